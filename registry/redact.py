"""Secret redaction (SPEC 8): one function applied to every byte unitmgr and pair write or print.

It replaces with `***`:
- the values (8 characters or more) of `GH_TOKEN`, `GITHUB_TOKEN`, the `gh auth token` result and
  every environment variable whose name ends in `_TOKEN`, `_API_KEY`, `_SECRET`, `_PASSWORD` or
  `_ACCESS_KEY` (so `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, ... are covered);
- well-known token shapes wherever they appear (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
  `github_pat_`, `sk-ant-`, `sk-proj-`, `sk-` + 32 or more letters and digits);
- a URL's userinfo only when it carries a secret (`user:secret@`, `x-access-token:...@`, or a
  token shape): a user name alone is never altered, so `ssh://git@github.com/o/r.git` and
  `git@github.com:o/r.git` stay exactly as written.

Text that holds no secret is returned unchanged, and redacting twice equals redacting once
(tests/test_redact.py proves both with hypothesis). `StreamRedactor` does the same over a byte
stream read in chunks, holding back an incomplete line so a secret split across two reads is
still caught.

It must not log, print or persist a secret it learns; `gh auth token` is asked at most once per
process and only when `gh` is on PATH.
"""

from __future__ import annotations

import os
import re
import time
from functools import lru_cache

from registry.lazy_re import lazy  # the rare shapes compile when first met (SPEC 7)

MASK = "***"
MIN_SECRET_LENGTH = 8
SECRET_SUFFIXES = ("_TOKEN", "_API_KEY", "_SECRET", "_PASSWORD", "_ACCESS_KEY")
_TOKEN_VARIABLES = ("GH_TOKEN", "GITHUB_TOKEN")
# Not preceded by a word character, so `risk-proj-plan` or `task-ant-...` are words, not keys.
TOKEN_SHAPE = lazy(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9_]{8,}|github_pat_[A-Za-z0-9_]{8,}"
    r"|sk-ant-[A-Za-z0-9_-]{8,}|sk-proj-[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9]{32,})"
)
_URL_USERINFO = lazy(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s@'\"<>:]*):(?P<secret>[^/\s@'\"<>]+)@"
)
# A URL's scheme and userinfo with no end yet (the end of the buffer comes before `@`, `/` or a
# space), down to a bare `scheme`, `scheme:` or `scheme:/`: the rest may still be on its way,
# and once the scheme is released the rest no longer looks like a URL.
_UNFINISHED_URL = lazy(rb"[A-Za-z][A-Za-z0-9+.-]*(?::(?://[^/\s@'\"<>]*|/?))?$")
# A token shape is one run of these characters: a line-less buffer is never cut inside one.
_UNFINISHED_WORD = lazy(rb"[A-Za-z0-9_-]+$")
_WORD_BYTE = lazy(rb"[A-Za-z0-9_-]")
_LONGEST_TOKEN = 4096


@lru_cache(maxsize=1)
def gh_auth_token() -> str | None:
    """`gh auth token`, once per process (None when gh is absent, logged out, or
    `UNITMGR_SKIP_GH_AUTH_TOKEN=1`): a secret to mask, and the GitHub client's fallback token."""
    if os.environ.get("UNITMGR_SKIP_GH_AUTH_TOKEN") == "1" or not _on_path("gh"):
        return None
    import subprocess  # here: only when there is a gh to ask

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


def _on_path(program: str) -> bool:
    """Whether `program` is an executable file on PATH (what `shutil.which` answers, without
    importing shutil and its archive modules into every command's start-up)."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or os.curdir, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return True
    return False


def is_secret_variable(name: str) -> bool:
    return name in _TOKEN_VARIABLES or name.upper().endswith(SECRET_SUFFIXES)


def secrets() -> tuple[str, ...]:
    """The secret values to mask right now, longest first (so a longer one wins an overlap).

    Read from the environment as it is at this call, memoized by its exact content: every
    atomic write and every signed field's MAC redacts, and walking `os.environ` through its
    mapping interface (a decode per key and value) cost ~0.3 ms a call, hundreds of times a
    command. The raw table (`os.environ._data`, what `os.environ` itself reads) is a cheap key;
    a changed, added or removed variable is a different key, so nothing is ever stale."""
    table = getattr(os.environ, "_data", None)
    if not isinstance(table, dict):  # not CPython's os.environ: no cheap key, read it all
        return _secrets_of(tuple(os.environ.items()))
    return _secrets_of(tuple(table.items()))


@lru_cache(maxsize=8)
def _secrets_of(environment: tuple[tuple[str | bytes, str | bytes], ...]) -> tuple[str, ...]:
    values = set()
    for raw_name, raw_value in environment:
        name = os.fsdecode(raw_name)  # as os.environ decodes its table
        if is_secret_variable(name):
            values.add(os.fsdecode(raw_value).strip())
    values.add(gh_auth_token() or "")
    return tuple(sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True))


@lru_cache(maxsize=8)
def _values_pattern(values: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(re.escape(value) for value in values)) if values else None


def _mask_userinfo(match: re.Match[str]) -> str:
    return match.group("scheme") + MASK + "@"


def redact(text: str) -> str:
    # Each pattern runs only where a match can start (a plain substring search first): the
    # same result, and a `status --all` of 1000 units (1.5 MB) no longer scans every position
    # with a lookbehind (~100 ms; SPEC 7).
    values = secrets()
    if values and any(value in text for value in values):
        pattern = _values_pattern(values)
        assert pattern is not None
        text = pattern.sub(MASK, text)
    if _may_hold_token(text):
        text = TOKEN_SHAPE.sub(MASK, text)
    if "://" not in text:  # every URL userinfo `_URL_USERINFO` masks follows a `://`
        return text
    return _URL_USERINFO.sub(_mask_userinfo, text)


# What every TOKEN_SHAPE match starts with; it starts a match only where no word character
# precedes it. The prefixes cannot overlap one another's start, so `finditer` misses none.
_TOKEN_START = lazy(r"gh[pousr]_|github_pat_|sk-")  # compiled once a text holds a prefix
_WORD_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _may_hold_token(text: str) -> bool:
    """Whether TOKEN_SHAPE can match anywhere in `text` (False means it surely cannot)."""
    if "gh" not in text and "sk-" not in text and "github_pat_" not in text:  # the prefixes
        return False
    for match in _TOKEN_START.finditer(text):
        start = match.start()
        if start == 0 or text[start - 1] not in _WORD_CHARACTERS:
            return True
    return False


def redact_bytes(data: bytes) -> bytes:
    # surrogateescape round-trips any byte exactly, so bytes holding no secret come back intact.
    return redact(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


class StreamRedactor:
    """Redacts a byte stream fed in arbitrary chunks.

    Complete lines are redacted and released at once. The tail after the last newline is held
    back (a secret never contains a newline, so holding the partial line is enough to catch a
    split secret) until a newline arrives, `max_hold_seconds` pass, or it grows past
    `max_hold_bytes`; then all of it is released except what could still be the start of a
    secret: the last `longest secret - 1` bytes, a trailing word that may be a token shape, and
    a URL whose userinfo may still be arriving.
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

        A known secret is kept whole; so is a trailing word (a token shape may still be
        growing) and a URL whose userinfo may still be arriving (`scheme://user:pw` with no
        `@`, `/` or space yet), which is held back from its scheme.
        """
        cut = max(0, len(buffer) - self._keep)
        window = max(0, cut - _LONGEST_TOKEN)
        unfinished = _UNFINISHED_URL.search(buffer, window, cut)
        if unfinished is not None:
            cut = unfinished.start()
        if cut == len(buffer) or _WORD_BYTE.match(buffer, cut):
            word = _UNFINISHED_WORD.search(buffer, window, cut)  # the word the cut would split
            if word is not None:
                cut = word.start()
        for secret in self._secrets:
            start = buffer.find(secret, max(0, cut - len(secret) + 1))
            while start != -1 and start < cut:
                cut = max(cut, start + len(secret))
                start = buffer.find(secret, start + 1)
        return cut
