"""The adapter interface every partner implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True)
class TurnRequest:
    """One turn to run: what the supervisor knows when it builds the command line."""

    partner: str
    sid: str
    seq: int
    kind: str
    write: bool
    model: str | None
    effort: str | None
    worktree: Path
    prompt_file: Path
    reply_file: Path
    bootstrap: bool = False


@dataclass(frozen=True)
class TurnCommand:
    argv: list[str]
    stdin_file: Path | None  # the prompt on stdin; None means /dev/null
    recorded: list[str]  # the command as the receipt shows it (never the prompt itself)


@dataclass(frozen=True)
class TurnOutput:
    exit_code: int | None  # None when killed on a hang or never started
    stdout: bytes  # raw stdout (bounded), for parsing
    hang: bool = False


@dataclass(frozen=True)
class TurnOutcome:
    status: str  # replied | empty-reply | failed
    reply: str | None = None
    reason: str | None = None
    sid: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Partner(ABC):
    name: ClassVar[str]
    bootstrap: ClassVar[bool]  # whether init runs a read-only turn to obtain a session id

    @abstractmethod
    def validate_staffing(self, *, model: str | None, effort: str | None, identity: str) -> None:
        """Refuse (UsageError) a model, effort or identity this partner cannot take."""

    @abstractmethod
    def preflight(self, *, model: str | None, worktree: Path) -> None:
        """Refuse (UsageError) when the partner cannot run here at all (binary missing)."""

    @abstractmethod
    def command(self, request: TurnRequest) -> TurnCommand: ...

    @abstractmethod
    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        """The turn's outcome from its exit code and stdout."""

    def partial_reply(self, output: TurnOutput) -> str | None:
        """What can be recovered of the reply of a turn killed on a hang."""
        return None
