"""A short-lived `codex app-server` for read-only questions: models, rate limits, account.

Each call starts `<codex> app-server` (with `CODEX_HOME` set to the identity's home), speaks
newline-delimited JSON-RPC over stdio — `initialize`, the `initialized` notification, one
request — and then kills the server's process group. It never starts a model turn and never
surfaces the server's stderr.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import time

from registry.processes import stop_child_group
from registry.timeutil import iso_from_epoch, iso_z, utc_now

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

READ_METHODS = ("account/read", "account/rateLimits/read", "model/list")
MAX_PAGES = 20
CLIENT_INFO = {"name": "unitmgr", "title": "unitmgr pair", "version": "0.1.0"}
# How the app-server refuses `account/rateLimits/read` for an account that cannot report limits
# ("codex account authentication required" under API-key auth): a refusal that never changes.
AUTHENTICATION_REFUSAL = re.compile(r"(?i)\bauthentication required\b")


class CodexRpcError(Exception):
    pass


def call(
    method: str,
    params: dict[str, Any],
    *,
    binary: str,
    codex_home: str | None,
    environment: dict[str, str],
    timeout_seconds: float = 10.0,
) -> dict[str, Any]:
    if method not in READ_METHODS:
        raise CodexRpcError(
            f"codex app-server reads allow only {', '.join(READ_METHODS)}, not {method}"
        )
    env = dict(environment)
    if codex_home:
        env["CODEX_HOME"] = codex_home
    try:
        server = subprocess.Popen(
            [binary, "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    except OSError as error:
        raise CodexRpcError(f"cannot run {binary} app-server: {error.strerror or error}") from None
    deadline = time.monotonic() + timeout_seconds
    try:
        assert server.stdin is not None and server.stdout is not None
        reader = _Lines(server.stdout.fileno())

        def send(message: dict[str, Any]) -> None:
            assert server.stdin is not None
            server.stdin.write((json.dumps(message) + "\n").encode())
            server.stdin.flush()

        def answer(request_id: int) -> dict[str, Any]:
            while True:
                line = reader.next_line(deadline)
                if line is None:
                    raise CodexRpcError(
                        f"codex app-server did not answer {method} within "
                        f"{int(timeout_seconds * 1000)}ms"
                    )
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict) and message.get("id") == request_id:
                    if "error" in message:
                        error = message["error"]
                        text = error.get("message") if isinstance(error, dict) else error
                        raise CodexRpcError(f"codex app-server refused {method}: {text}")
                    result = message.get("result")
                    return result if isinstance(result, dict) else {}

        send({"method": "initialize", "id": 0, "params": {"clientInfo": CLIENT_INFO}})
        answer(0)
        send({"method": "initialized"})
        send({"method": method, "id": 1, "params": params})
        return answer(1)
    except (BrokenPipeError, OSError) as error:
        raise CodexRpcError(f"codex app-server failed during {method}: {error}") from None
    finally:
        stop_child_group(server)
        for stream in (server.stdin, server.stdout):
            if stream is not None:
                stream.close()


class _Lines:
    """Line reader over a non-blocking fd with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        os.set_blocking(fd, False)

    def next_line(self, deadline: float) -> bytes | None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.fd, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(timeout=remaining):
                    return None
                try:
                    chunk = os.read(self.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    return None
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def model_catalog(
    *, binary: str, codex_home: str | None, environment: dict[str, str]
) -> tuple[list[dict[str, Any]], int]:
    """Every `model/list` entry, following `nextCursor` page by page."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for page in range(1, MAX_PAGES + 1):
        params: dict[str, Any] = {"cursor": cursor} if cursor else {}
        result = call(
            "model/list", params, binary=binary, codex_home=codex_home, environment=environment
        )
        data = result.get("data")
        entries.extend(
            entry for entry in (data if isinstance(data, list) else []) if isinstance(entry, dict)
        )
        cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
        if not cursor:
            return entries, page
        if cursor in seen:
            raise CodexRpcError(f'repeated cursor "{cursor}" on page {page} — refusing to loop')
        seen.add(cursor)
    raise CodexRpcError(f"model/list has more than {MAX_PAGES} pages — refusing to loop")


def _window(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None

    def number(key: str) -> float | None:
        value = raw.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    return {
        "window_minutes": number("windowDurationMins"),
        "used_percent": number("usedPercent"),
        "resets_at": epoch_iso(raw.get("resetsAt")),
    }


def epoch_iso(value: Any) -> str | None:
    """An epoch in seconds or milliseconds as ISO 8601, or None for anything unusable."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    seconds = value / 1000 if value > 10**11 else value  # seconds or milliseconds
    try:
        return iso_from_epoch(seconds)
    except (OverflowError, ValueError, OSError):
        return None


def rate_limits(
    *, binary: str, codex_home: str | None, environment: dict[str, str]
) -> dict[str, Any]:
    """`{available: true, read_at, primary, secondary}` from `account/rateLimits/read`;
    `{available: false, why}` when the account cannot report limits (API-key or custom-provider
    auth is refused with an authentication error, every time); else `{error}`."""
    try:
        result = call(
            "account/rateLimits/read",
            {},
            binary=binary,
            codex_home=codex_home,
            environment=environment,
        )
    except CodexRpcError as error:
        if AUTHENTICATION_REFUSAL.search(str(error)):
            return {"available": False, "why": str(error)}
        return {"error": str(error)}
    by_id = result.get("rateLimitsByLimitId")
    limits = by_id.get("codex") if isinstance(by_id, dict) else None
    if not isinstance(limits, dict):
        limits = result.get("rateLimits")
    if not isinstance(limits, dict):
        return {"error": "account/rateLimits/read answered without rateLimits"}
    return {
        "available": True,
        "read_at": iso_z(utc_now()),
        "primary": _window(limits.get("primary")),
        "secondary": _window(limits.get("secondary")),
    }


def claude_rate_limit(event: dict[str, Any]) -> dict[str, Any]:
    """A Claude `rate_limit_event`'s info, in the receipt's `rate_limits` shape."""
    resets = event.get("resetsAt")
    return {
        "source": "claude rate_limit_event",
        "status": event.get("status"),
        "rate_limit_type": event.get("rateLimitType"),
        "utilization": event.get("utilization"),
        "resets_at": epoch_iso(resets),
    }
