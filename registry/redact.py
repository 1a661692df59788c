"""Token redaction: the one function applied to every byte unitmgr and pair write or print.

It replaces the values of `GH_TOKEN`, `GITHUB_TOKEN` and the `gh auth token` result (8 characters
or more) with `***`, and the userinfo of any URL (`https://user:secret@host/` ->
`https://***@host/`). `StreamRedactor` does the same over a byte stream read in chunks, holding
back an incomplete line so a token split across two reads is still caught.

It must not log, print or persist a secret it learns; `gh auth token` is asked at most once per
process and only when `gh` is on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from functools import lru_cache

MASK = "***"
MIN_SECRET_LENGTH = 8
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@'\"<>]+@")
_URL_USERINFO_BYTES = re.compile(rb"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@'\"<>]+@")
_TOKEN_VARIABLES = ("GH_TOKEN", "GITHUB_TOKEN")
# A URL's scheme and userinfo with no end yet (the end of the buffer comes before `@`, `/` or a
# space), down to a bare `scheme`, `scheme:` or `scheme:/`: the rest may still be on its way,
# and once the scheme is released the rest no longer looks like a URL.
_UNFINISHED_URL = re.compile(rb"[A-Za-z][A-Za-z0-9+.-]*(?::(?://[^/\s@'\"<>]*|/?))?$")


@lru_cache(maxsize=1)
def gh_auth_token() -> str | None:
    """`gh auth token`, once per process (None when gh is absent, logged out, or
    `UNITMGR_SKIP_GH_AUTH_TOKEN=1`): a secret to mask, and the GitHub client's fallback token."""
    if os.environ.get("UNITMGR_SKIP_GH_AUTH_TOKEN") == "1" or shutil.which("gh") is None:
        return None
    try:
        completed = subprocess.run(
            ["gh", "auth", "token"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=5,
            env={**os.environ, "GH_PROMPT_DISABLED": "1"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    token = completed.stdout.decode("utf-8", "replace").strip()
    return token if completed.returncode == 0 and token else None


def secrets() -> tuple[str, ...]:
    """The secret values to mask right now, longest first (so a longer one wins an overlap)."""
    values = {os.environ.get(name, "").strip() for name in _TOKEN_VARIABLES}
    values.add(gh_auth_token() or "")
    return tuple(sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True))


def redact(text: str) -> str:
    for secret in secrets():
        text = text.replace(secret, MASK)
    return _URL_USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)


def redact_bytes(data: bytes) -> bytes:
    for secret in secrets():
        data = data.replace(secret.encode(), MASK.encode())
    return _URL_USERINFO_BYTES.sub(lambda m: m.group("scheme") + MASK.encode() + b"@", data)


class StreamRedactor:
    """Redacts a byte stream fed in arbitrary chunks.

    Complete lines are redacted and released at once. The tail after the last newline is held
    back (a secret never contains a newline, so holding the partial line is enough to catch a
    split token) until a newline arrives, `max_hold_seconds` pass, or it grows past
    `max_hold_bytes`; then all of it but the last `longest secret - 1` bytes is released.
    """

    def __init__(self, *, max_hold_bytes: int = 64 * 1024, max_hold_seconds: float = 1.0) -> None:
        self._secrets = [s.encode() for s in secrets()]
        self._keep = max((len(s) for s in self._secrets), default=1) - 1
        self._carry = b""
        self._carry_since = 0.0
        self._max_hold_bytes = max_hold_bytes
        self._max_hold_seconds = max_hold_seconds

    def feed(self, chunk: bytes, now: float | None = None) -> bytes:
        now = time.monotonic() if now is None else now
        if not self._carry:
            self._carry_since = now
        buffer = self._carry + chunk
        cut = buffer.rfind(b"\n") + 1
        if cut == 0 and (
            len(buffer) > self._max_hold_bytes or now - self._carry_since > self._max_hold_seconds
        ):
            cut = self._safe_cut(buffer)
        released, self._carry = buffer[:cut], buffer[cut:]
        if self._carry and cut:
            self._carry_since = now
        return redact_bytes(released) if released else b""

    def pending(self, now: float | None = None) -> bytes:
        """Release a held tail once it has waited too long (call this on idle ticks)."""
        now = time.monotonic() if now is None else now
        if self._carry and now - self._carry_since > self._max_hold_seconds:
            return self.feed(b"", now)
        return b""

    def flush(self) -> bytes:
        released, self._carry = self._carry, b""
        return redact_bytes(released) if released else b""

    def _safe_cut(self, buffer: bytes) -> int:
        """Where to cut a line-less buffer so no secret can straddle the cut.

        A known secret is kept whole; so is a URL whose userinfo may still be arriving
        (`scheme://user:pw` with no `@`, `/` or space yet), which is held back from its scheme.
        """
        cut = max(0, len(buffer) - self._keep)
        window = max(0, cut - 4096)
        unfinished = _UNFINISHED_URL.search(buffer, window, cut)
        if unfinished is not None:
            cut = unfinished.start()
        for secret in self._secrets:
            start = buffer.find(secret, max(0, cut - len(secret) + 1))
            while start != -1 and start < cut:
                cut = max(cut, start + len(secret))
                start = buffer.find(secret, start + 1)
        return cut
