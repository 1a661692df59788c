"""The adapter interface every partner implements, and helpers for reading JSON streams."""

from __future__ import annotations

import json
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pair.errors import UsageError


@dataclass(frozen=True)
class TurnRequest:
    """One turn to run: everything an adapter needs to build its command line."""

    partner: str
    sid: str  # the session to resume; for a bootstrap, a pre-generated id or ""
    seq: int
    kind: str
    write: bool
    model: str | None  # what to pass to the CLI's model flag (None: the CLI's default)
    effort: str | None
    worktree: Path
    prompt_file: Path
    reply_file: Path
    bootstrap: bool = False  # True: create the session (no resume)
    partner_bin: str | None = None


@dataclass(frozen=True)
class TurnCommand:
    argv: list[str]
    stdin_file: Path | None  # the prompt on stdin; None means /dev/null
    recorded: list[str]  # the command as the receipt shows it (never the prompt itself)


@dataclass(frozen=True)
class TurnOutput:
    exit_code: int | None  # None when killed on a hang or never started
    stdout: bytes  # raw stdout (bounded), for parsing


@dataclass(frozen=True)
class TurnOutcome:
    status: str  # replied | empty-reply | failed | rate-limited | hang-killed
    reply: str | None = None
    reason: str | None = None  # for a failure: the partner's own final error, quoted first
    sid: str | None = None  # the session id the stream names (read at bootstrap)
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the model a CLI reports
    retry_after_seconds: float | None = None  # a rate limit's wait, when the stream names one


EMPTY_REPLY = (
    "the partner exited 0 with no reply — read the transcript before resending, the prompt "
    "may already be consumed"
)
EFFORT_LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max", "ultra")


class Partner(ABC):
    name: ClassVar[str]
    binary_name: ClassVar[str] = ""  # the executable looked up on PATH
    bootstrap: ClassVar[bool] = True  # whether init runs a read-only turn to get a session id
    efforts: ClassVar[tuple[str, ...]] = EFFORT_LEVELS

    def binary(self) -> str:
        """The executable: `UNITMGR_<PARTNER>_BIN`, else `binary_name` found on PATH."""
        variable = f"UNITMGR_{self.name.upper()}_BIN"
        override = os.environ.get(variable, "").strip()
        found = shutil.which(override or self.binary_name)
        if found is None:
            raise UsageError(
                "partner-not-installed",
                f"{override or self.binary_name} is not installed (not on PATH) — install the "
                f"{self.name} CLI or set {variable}",
            )
        return os.path.abspath(found)

    def validate_staffing(self, *, model: str | None, effort: str | None, identity: str) -> None:
        """Refuse (UsageError) an effort or identity this partner cannot take."""
        if effort is not None and effort not in self.efforts:
            raise UsageError(
                "effort-refused",
                f"{self.name} does not take --effort {effort} — use one of "
                f"{', '.join(self.efforts)}",
            )
        if identity != "default" and self.name != "codex":
            raise UsageError(
                "identity-refused",
                f"{self.name} has no named identities — only codex keeps one account per home; "
                "drop --identity or use default",
            )

    def preflight(self, *, model: str | None, worktree: Path) -> None:
        """Refuse (UsageError) when the partner cannot run here at all (binary missing)."""
        self.binary()

    @abstractmethod
    def command(self, request: TurnRequest) -> TurnCommand: ...

    @abstractmethod
    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        """The turn's outcome from its exit code and stdout."""

    def partial_reply(self, output: TurnOutput) -> str | None:
        """What can be recovered of the reply of a turn killed on a hang."""
        return None

    def session_known(self, sid: str, *, identity_home: str | None, worktree: Path) -> bool:
        """False only when the CLI's own session store is readable and lacks `sid`."""
        return True

    def exited(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome | None:
        """The common first rule: a non-zero exit is a failure whatever the stream says."""
        if output.exit_code not in (0, None):
            name = Path(request.partner_bin or self.binary_name).name
            return TurnOutcome(
                status="failed",
                reason=f"{name} exited {output.exit_code} — read the transcript",
            )
        return None


def store_has(store: Path, sid: str, depth: int = 6) -> bool:
    """Whether a session store has an entry naming `sid` (True when it cannot be read)."""
    try:
        entries = list(os.scandir(store))
    except OSError:
        return True
    for entry in entries:
        if sid in entry.name:
            return True
        try:
            if entry.is_dir(follow_symlinks=False) and (
                depth <= 0 or store_has(Path(entry.path), sid, depth - 1)
            ):
                return True
        except OSError:
            return True
    return False


def json_objects(stdout: bytes) -> Iterator[dict[str, Any]]:
    """Every JSON object in a stream, one per line, each parsed from its first `{`.

    A stream with no parseable line is tried once as a single (pretty-printed) object.
    """
    found = False
    for raw in stdout.splitlines():
        start = raw.find(b"{")
        if start < 0:
            continue
        try:
            value = json.loads(raw[start:])
        except ValueError:
            continue
        if isinstance(value, dict):
            found = True
            yield value
    if not found:
        try:
            value = json.loads(stdout)
        except ValueError:
            return
        if isinstance(value, dict):
            yield value


def text_blocks(message: Any) -> str:
    """The joined `text` blocks of an assistant message's `content`."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        block.get("text", "")
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def last_assistant_text(events: list[dict[str, Any]]) -> str:
    """The text of the last `assistant` event that has any (Claude and Cursor streams)."""
    for event in reversed(events):
        if event.get("type") == "assistant":
            text = text_blocks(event.get("message"))
            if text.strip():
                return text
    return ""


def replied_or_empty(reply: str | None, **extra: Any) -> TurnOutcome:
    reply = (reply or "").strip()
    if reply:
        return TurnOutcome(status="replied", reply=reply, extra=extra)
    return TurnOutcome(status="empty-reply", reason=EMPTY_REPLY, extra=extra)
