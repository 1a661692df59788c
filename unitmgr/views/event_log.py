"""`unit log [--unit ID] [--since ISO] [--follow] [--format json|table]` (SPEC 3.18): the
registry's event log, `orchestrate/events.jsonl`, for a person or a program.

Every lifecycle step's journal entry, a verification, a cancel, a prune and a failed
notification are appended there (`Registry.append_event`, `registry/notify.py`). This view
reads it and never writes, takes no lock and runs no git. The file is in the git common dir, so
an executor can write it (SPEC 8): it is read through the bounded reader from the common dir
(no symbolic link, no FIFO; at most the last LOG_TAIL_BYTES, a cut first line dropped), a line
that is no JSON object or is longer than MAX_LINE_BYTES is skipped and counted, strings are
redacted on the way out, and the table escapes control characters so a planted event cannot
drive the lead's terminal.

`--format json` (the default) prints `{ok, events_file, events, skipped, truncated?, ...}`.
`--follow` keeps reading as lines are appended (an inotify watch on the registry directory
wakes it, else a 0.25 s poll) until SIGINT or SIGTERM, printing one JSON object per line —
`{"event": {...}}` each (wrapped, so a planted line can never pass for the end), a first
`{"config_warning": ...}` when the config has a problem — and ends with the `interrupted`
document on one line, whose `next` resumes from the last event seen (references/decisions.md).
With `--format table` each event is one line: time, unit, command, step, status, a short detail.
"""

from __future__ import annotations

import json
import shlex
import signal

from registry import bounded, terminal
from registry.errors import Interrupted, StateError, UsageError
from registry.output import Rendered, write_text
from registry.redact import redact
from registry.timeutil import parse_iso
from unitmgr import config, validation
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

LOG_TAIL_BYTES = 4 * 1024 * 1024  # events.jsonl grows for ever: only its end is read
FOLLOW_CHUNK_BYTES = 1024 * 1024  # what one poll reads of what was appended
MAX_LINE_BYTES = 64 * 1024  # an event line longer than this is no event unitmgr wrote
POLL_SECONDS = 0.25
COLUMNS = (("TIME", 20), ("UNIT", 14), ("COMMAND", 10), ("STEP", 16), ("STATUS", 8))


class _Filter:
    """Which events are shown: `--unit` and `--since` (an event at or after it)."""

    def __init__(self, unit: str | None, since: str | None) -> None:
        self.unit = validation.unit_id(unit) if unit is not None else None
        self.since = None
        if since is not None:
            try:
                self.since = parse_iso(since)
            except ValueError:
                raise UsageError(
                    "invalid-since", f"--since must be an ISO 8601 time, got {since!r}"
                ) from None

    def wants(self, event: dict[str, Any]) -> bool:
        if self.unit is not None and event.get("unit") != self.unit:
            return False
        if self.since is None:
            return True
        try:
            return parse_iso(str(event.get("at"))) >= self.since
        except (ValueError, TypeError):
            return False  # no time to compare: not shown as "since" anything


class _Lines:
    """Complete lines out of appended bytes: a partial last line waits for its end, and one
    past MAX_LINE_BYTES is dropped (counted) up to its newline."""

    def __init__(self) -> None:
        self.pending = b""
        self.dropping = False
        self.skipped = 0

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        found = []
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()
        for line in lines:
            if self.dropping:
                self.dropping = False
                continue
            event = self._parse(line)
            if event is not None:
                found.append(event)
        if len(self.pending) > MAX_LINE_BYTES:
            self.skipped += 0 if self.dropping else 1
            self.pending, self.dropping = b"", True
        return found

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        if not line.strip():
            return None
        if len(line) > MAX_LINE_BYTES:
            self.skipped += 1
            return None
        try:
            event = json.loads(line)
        except ValueError:  # no JSON, or no UTF-8
            event = None
        if not isinstance(event, dict):
            self.skipped += 1
            return None
        return event


def run(
    repo: str,
    *,
    unit: str | None,
    since: str | None,
    follow: bool,
    output_format: str,
) -> dict[str, Any] | Rendered:
    shown = _Filter(unit, since)
    workspace = Workspace.open(repo)
    warning = config.for_reads(workspace)[1]
    events_file = workspace.registry.events_file
    lines = _Lines()
    events, offset, size, problem = _read_tail(workspace, lines)
    # Neither recorded nor in the log (a dismantled unit's events still are): a typo.
    unit = shown.unit
    logged = unit is None or any(event.get("unit") == unit for event in events)
    if unit is not None and not logged and not workspace.registry.exists(unit):
        raise StateError("no-such-unit", f"unit {unit} is not recorded")
    events = [event for event in events if shown.wants(event)]
    if follow:
        return _follow(workspace, shown, lines, (events, size, warning), output_format)
    document: dict[str, Any] = {
        "ok": True,
        "events_file": str(events_file),
        "events": events,
        "skipped": lines.skipped,
    }
    if offset:
        document["truncated"] = {"skipped_bytes": offset}
    if problem:
        document["unreadable"] = problem
    document.update(config.warning_field(warning))
    if output_format == "table":
        return Rendered(table(document))
    return document


def _read_tail(
    workspace: Workspace, lines: _Lines
) -> tuple[list[dict[str, Any]], int, int, str | None]:
    """(events, the offset the read began at, the size read up to — where a follow goes on —,
    why the file could not be read) of the last LOG_TAIL_BYTES; no file yet is no event. A
    last line still without its newline waits in `lines` (a follow prints it once complete)."""
    try:
        data, size, offset = bounded.read_tail(
            workspace.registry.events_file, LOG_TAIL_BYTES, below=workspace.common_git_dir
        )
    except FileNotFoundError:
        return [], 0, 0, None
    except (OSError, ValueError) as error:
        return [], 0, 0, str(getattr(error, "reason", None) or error)
    return lines.feed(data), offset, size, None


# -- table -----------------------------------------------------------------------------------


def _cell(value: Any, width: int) -> str:
    text = "-" if value is None or value == "" else str(value)
    text = terminal.clean(" ".join(text.split()))  # one line, control characters escaped
    return text if len(text) <= width else text[: width - 1] + "…"


def short_detail(event: dict[str, Any]) -> str:
    """A few words about the event: its reason, else its detail's scalar fields."""
    parts = []
    for key in ("reason", "error", "event"):
        if isinstance(event.get(key), str) and not (key == "event" and event.get("command")):
            parts.append(str(event[key]))
    detail = event.get("detail")
    if isinstance(detail, dict):
        parts += [
            f"{key}={value}"
            for key, value in list(detail.items())[:6]
            if isinstance(value, (str, int, float, bool)) or value is None
        ]
    elif detail is not None:
        parts.append(str(detail))
    if "seq" in event:
        parts.append(f"seq={event['seq']}")
    return ", ".join(parts)


def event_line(event: dict[str, Any]) -> str:
    width = max(120, terminal.columns())  # one line per event, even in a pipe
    values = (
        event.get("at"),
        event.get("unit") or event.get("unit_id"),
        event.get("command") or event.get("event"),
        event.get("step"),
        event.get("status"),
    )
    cells = [_cell(value, size) for value, (_, size) in zip(values, COLUMNS, strict=True)]
    line = "  ".join(cell.ljust(size) for cell, (_, size) in zip(cells, COLUMNS, strict=True))
    rest = width - len(line) - 2
    detail = short_detail(event)
    return (line + "  " + _cell(detail, max(rest, 10))).rstrip() if detail else line.rstrip()


def header() -> str:
    return "  ".join(name.ljust(size) for name, size in COLUMNS) + "  DETAIL"


def table(document: dict[str, Any]) -> str:
    from unitmgr.views.table import config_warning_text

    lines = []
    warned = config_warning_text(document)
    if warned:
        lines.append("! " + warned)
    if document.get("unreadable"):
        lines.append(f"! events file unreadable: {terminal.clean(str(document['unreadable']))}")
    if document.get("truncated"):
        lines.append(f"(the first {document['truncated']['skipped_bytes']} bytes not read)")
    lines.append(header() if document["events"] else "no events")
    lines += [event_line(event) for event in document["events"]]
    if document.get("skipped"):
        lines.append(f"({document['skipped']} malformed lines skipped)")
    return "\n".join(lines) + "\n"


# -- follow ----------------------------------------------------------------------------------


def _follow(
    workspace: Workspace,
    shown: _Filter,
    lines: _Lines,
    start: tuple[list[dict[str, Any]], int, dict[str, Any] | None],
    output_format: str,
) -> Rendered:
    events, position, warning = start
    as_table = output_format == "table"
    last_at: str | None = None

    def out(event: dict[str, Any]) -> None:
        nonlocal last_at
        last_at = _resume_at(event, last_at)
        write_text((event_line(event) if as_table else _json_line({"event": event})) + "\n")

    if warning:
        from unitmgr.views.table import config_warning_text

        text = config_warning_text({"config_warning": warning}) or ""
        write_text(
            ("! " + terminal.clean(text) if as_table else _json_line({"config_warning": warning}))
            + "\n"
        )
    if as_table:
        write_text(header() + "\n")
    for event in events:
        out(event)
    from registry.dirwatch import DirectoryWatch  # ctypes: only to follow (SPEC 7)

    try:
        with DirectoryWatch([workspace.registry.root], contents=True) as watch:
            while True:
                watch.sleep(POLL_SECONDS)
                position = _read_more(workspace, lines, position, shown, out)
    except Interrupted as error:
        return _interrupted(workspace, shown, error.signum, last_at, output_format)
    except KeyboardInterrupt:
        return _interrupted(workspace, shown, signal.SIGINT, last_at, output_format)


def _read_more(workspace: Workspace, lines: _Lines, position: int, shown: _Filter, out: Any) -> int:
    """Print the events appended since `position`; the new position (0 again when the file was
    truncated or replaced by a smaller one)."""
    try:
        data, size = bounded.read_range(
            workspace.registry.events_file,
            position,
            FOLLOW_CHUNK_BYTES,
            below=workspace.common_git_dir,
        )
    except (OSError, ValueError):
        return position  # missing or refused for now: looked at again on the next tick
    if size < position:
        lines.pending, lines.dropping = b"", False
        return 0
    for event in lines.feed(data):
        if shown.wants(event):
            out(event)
    return position + len(data)


def _resume_at(event: dict[str, Any], last_at: str | None) -> str | None:
    """Where a resumed follow starts: the event's time, but never later than the lead's clock
    (events.jsonl is the executor's to write: a planted `at` far in the future would make the
    pasted `next` hide every event to come) and only a time that parses."""
    import time

    from registry.timeutil import iso_from_epoch

    text = event.get("at")
    try:
        at = parse_iso(text).timestamp() if isinstance(text, str) and len(text) <= 64 else None
    except (ValueError, TypeError, OverflowError):
        at = None
    if at is None:
        return last_at
    now = time.time()
    return text if at <= now else iso_from_epoch(now)


def _json_line(value: dict[str, Any]) -> str:
    from registry.output import escape_raw_controls

    return escape_raw_controls(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _interrupted(
    workspace: Workspace, shown: _Filter, signum: int, last_at: str | None, output_format: str
) -> Rendered:
    """The one closing document (SPEC 3.0), on one line like every other in the stream; its
    `next` goes on from the last event printed (at or after it: nothing lost)."""
    name = signal.Signals(signum).name
    words = ["unit", "log"]
    if shown.unit:
        words += ["--unit", shown.unit]
    since = last_at or (shown.since.isoformat().replace("+00:00", "Z") if shown.since else None)
    if since:
        words += ["--since", since]
    words += ["--follow", "--format", output_format, "--repo", str(workspace.toplevel)]
    document = {
        "ok": False,
        "code": "interrupted",
        "reason": f"interrupted by {name}; unit log only reads, nothing to resume",
        "next": shlex.join(words),
        "detail": {"signal": name, "last_at": last_at},
    }
    return Rendered(redact(_json_line(document)), exit_code=128 + signum)
