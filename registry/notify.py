"""Notifications (SPEC 3.15): deliver one event to the configured `command` and `url` sinks.

Both `unit` (lifecycle events) and the pair supervisor (turn ends) deliver through here, so it
lives in `registry`: it knows no git, no unit record and no pair session — the caller hands it a
`Target` (the settings, the unit id, the repository, the `events.jsonl` to report failures to)
and the event's fields.

- `command`: `sh -c COMMAND` in its own process group, the event JSON on stdin, stdout to
  /dev/null, stderr to a temporary file (no pipe a grandchild could hold open), killed as a group
  after the timeout.
- `url`: one HTTP POST of the event JSON (`Content-Type: application/json`) through `urllib`,
  so the proxy variables and `NO_PROXY` work as everywhere else; one retry, only after a failure
  that may pass (no connection, a timeout, 429, 5xx).
- The timeout is 10 s per attempt (`UNITMGR_NOTIFY_TIMEOUT` overrides it, for tests).
- Payloads are redacted field by field (registry.redact) and bounded (`MAX_PAYLOAD_BYTES`): a
  receipt is summarized, its reply trimmed.

It must never raise into its caller or fail a command: a failed delivery is one `notify-failed`
line in `events.jsonl` naming the sink kind, the event and the redacted reason — never the URL
or the command text, which often hold a credential of their own (a Slack webhook's path).
`spawn` hands a delivery to a detached `python -m registry.notify` child, so a slow sink never
delays the caller's JSON. Nothing here is imported on a command's start-up path: callers import
it only once a configured sink wants the event.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from registry import light_dataclass as dataclasses
from registry.atomic import append_line
from registry.redact import redact
from registry.timeutil import iso_z, seconds_from_env

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

TIMEOUT_SECONDS = 10.0
TIMEOUT_VARIABLE = "UNITMGR_NOTIFY_TIMEOUT"
# A notification is a nudge, not an archive: the transcript and receipt stay on disk.
MAX_PAYLOAD_BYTES = 32 * 1024  # so a detached child's whole job fits one pipe buffer
MAX_REPLY_CHARS = 2000
MAX_REASON_CHARS = 300
_RECEIPT_FIELDS = (
    "seq",
    "kind",
    "status",
    "ok",
    "reason",
    "reply",
    "partial_reply",
    "retry_after_seconds",
    "started_at",
    "finished_at",
    "receipt_file",
    "transcript",
)


@dataclasses.dataclass(frozen=True)
class NotifySettings:
    """The project config's `[notify]` (SPEC 3.16): `events` None means every event."""

    command: str | None = None
    url: str | None = None
    events: tuple[str, ...] | None = None

    def wants(self, event: str) -> bool:
        return bool(self.command or self.url) and (self.events is None or event in self.events)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "url": self.url,
            "events": list(self.events) if self.events is not None else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> NotifySettings | None:
        if not isinstance(data, dict):
            return None
        events = data.get("events")
        return cls(
            command=data.get("command") if isinstance(data.get("command"), str) else None,
            url=data.get("url") if isinstance(data.get("url"), str) else None,
            events=tuple(str(name) for name in events) if isinstance(events, list) else None,
        )


@dataclasses.dataclass(frozen=True)
class Target:
    """Who a delivery is about and where its failures go."""

    settings: NotifySettings
    unit_id: str
    repository: str
    events_file: Path
    # When a running turn counts as `stuck` (SPEC 3.4): its supervisor announces it then.
    stuck_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.settings.to_json(),
            "unit_id": self.unit_id,
            "repository": self.repository,
            "events_file": str(self.events_file),
            "stuck_seconds": self.stuck_seconds,
        }

    @classmethod
    def from_json(cls, data: Any) -> Target | None:
        """The target a pair session stores (None when absent or malformed: nothing is sent)."""
        settings = NotifySettings.from_json(data)
        if settings is None or not isinstance(data, dict):
            return None
        unit_id, repository, events_file = (
            data.get("unit_id"),
            data.get("repository"),
            data.get("events_file"),
        )
        if not (isinstance(unit_id, str) and isinstance(repository, str)):
            return None
        if not isinstance(events_file, str) or not events_file:
            return None
        stuck = data.get("stuck_seconds")
        if isinstance(stuck, bool) or not isinstance(stuck, (int, float)) or not stuck > 0:
            stuck = None  # absent, or no number of seconds: no alarm
        return cls(settings, unit_id, repository, Path(events_file), stuck)


def receipt_summary(receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt's fields a person needs, the reply trimmed to `MAX_REPLY_CHARS`."""
    summary = {name: receipt.get(name) for name in _RECEIPT_FIELDS if name in receipt}
    reply = summary.get("reply")
    if isinstance(reply, str) and len(reply) > MAX_REPLY_CHARS:
        summary["reply"] = reply[:MAX_REPLY_CHARS] + "…"
        summary["reply_trimmed"] = True
    return summary


def payload(target: Target, event: str, **fields: Any) -> dict[str, Any]:
    """`{event, unit_id, repository, at, ...fields}`, redacted, within `MAX_PAYLOAD_BYTES`."""
    document = {
        "event": event,
        "unit_id": target.unit_id,
        "repository": target.repository,
        "at": iso_z(),
        **{name: value for name, value in fields.items() if value is not None},
    }
    return bounded(_redacted(document))


def bounded(document: dict[str, Any]) -> dict[str, Any]:
    """`document`, with its long strings cut shorter and shorter until it fits the bound."""
    for limit in (None, 4000, 1000, 200, 40):
        trimmed = document if limit is None else _trim_strings(document, limit)
        if len(encode(trimmed)) <= MAX_PAYLOAD_BYTES:
            return trimmed
    head = ("event", "unit_id", "repository", "at")
    return {name: document[name] for name in head if name in document} | {"trimmed": True}


def encode(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {str(key): _redacted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(item) for item in value]
    return value


def _trim_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, dict):
        return {key: _trim_strings(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_trim_strings(item, limit) for item in value[:50]]
    return value


# -- delivery ------------------------------------------------------------------------------------


def deliver(target: Target, document: dict[str, Any]) -> list[dict[str, Any]]:
    """Send `document` to every configured sink; each failure is appended to `events.jsonl` as
    `notify-failed` and returned. Never raises."""
    body = encode(document)
    timeout = seconds_from_env(TIMEOUT_VARIABLE, TIMEOUT_SECONDS)
    attempts: list[tuple[str, str | None]] = []
    if target.settings.command:
        attempts.append(("command", _run_command(target, body, timeout)))
    if target.settings.url:
        attempts.append(("url", _post(target.settings.url, body, timeout)))
    event = str(document.get("event"))
    return [report_failure(target, event, sink, why) for sink, why in attempts if why is not None]


def report_failure(target: Target, event: str, sink: str, reason: str) -> dict[str, Any]:
    """Append (and return) the `notify-failed` line for `event` at `sink`."""
    failure = {
        "command": "notify",
        "step": "notify-failed",
        "status": "failed",
        "unit": target.unit_id,
        "event": event,
        "sink": sink,
        "reason": redact(reason)[:MAX_REASON_CHARS],
        "at": iso_z(),
    }
    with contextlib.suppress(OSError):  # nowhere left to tell: the command still succeeds
        append_line(target.events_file, json.dumps(failure, ensure_ascii=False))
    return failure


def _run_command(target: Target, body: bytes, timeout: float) -> str | None:
    """`sh -c COMMAND` with `body` on stdin; None when it exits 0, else why not."""
    assert target.settings.command is not None
    cwd = target.repository if os.path.isdir(target.repository) else None
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(
                ["sh", "-c", target.settings.command],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                cwd=cwd,
                start_new_session=True,  # its own group: a timeout kills all of it
            )
        except OSError as error:
            return f"cannot start the command: {error.strerror or error}"
        try:
            process.communicate(body, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return f"the command ran over its {timeout:g} s timeout and was killed"
        if process.returncode == 0:
            return None
        errors.seek(0, os.SEEK_END)
        errors.seek(max(0, errors.tell() - MAX_REASON_CHARS))
        said = errors.read().decode("utf-8", "replace").strip()
        return f"the command exited {process.returncode}" + (f": {said}" if said else "")


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _post(url: str, body: bytes, timeout: float) -> str | None:
    """One POST, and one retry after a failure that may pass; None when it was accepted."""
    import urllib.error
    import urllib.request

    reason = None
    for attempt in range(2):
        if attempt:
            time.sleep(min(1.0, timeout / 4))  # a short pause before the one retry
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "unitmgr-notify"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                response.read(4096)
            return None
        except urllib.error.HTTPError as error:
            reason = f"HTTP {error.code} {error.reason}"
            if error.code != 429 and error.code < 500:
                return reason
        except (urllib.error.URLError, OSError, ValueError) as error:
            cause = getattr(error, "reason", None) or error
            reason = f"POST failed: {cause}"
            if isinstance(error, ValueError):  # not a URL urllib can send: no retry helps
                return reason
    return reason


# -- a detached delivery -------------------------------------------------------------------------


def spawn(target: Target, document: dict[str, Any]) -> int | None:
    """Deliver in a detached `python -m registry.notify` child (its own session, no inherited
    descriptors, stdout and stderr to /dev/null): the caller's JSON never waits for a sink. The
    job goes on the child's stdin, within one pipe buffer, so this never blocks. Returns the
    child's pid (None when it could not start: then a `notify-failed` line says so)."""
    job = encode({"target": target.to_json(), "payload": document})
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "registry.notify"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=target.repository if os.path.isdir(target.repository) else None,
            start_new_session=True,
        )
        assert child.stdin is not None
        child.stdin.write(job)
        child.stdin.close()
    except OSError as error:
        report_failure(
            target, str(document.get("event")), "spawn", f"cannot start the delivery: {error}"
        )
        return None
    return child.pid


def main() -> int:
    """The detached child: read one job from stdin, deliver it, exit."""
    try:
        job = json.loads(sys.stdin.buffer.read(MAX_PAYLOAD_BYTES * 2))
        target = Target.from_json(job["target"])
        document = job["payload"]
    except (ValueError, KeyError, TypeError):
        return 2
    if target is None or not isinstance(document, dict):
        return 2
    deliver(target, document)
    return 0


if __name__ == "__main__":  # pragma: no cover (entered through `python -m registry.notify`)
    sys.exit(main())
