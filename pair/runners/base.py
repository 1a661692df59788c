"""Where a turn runs: the one seam between pair's commands and the processes of a turn.

`send`, `wait`, `cancel` and `clear` never start, signal or probe a process themselves: they ask
a `TurnRunner`: `pair.runners.local.LocalRunner` (a detached supervisor on this machine,
`python -m pair _supervise`) or `pair.runners.ray.RayRunner` (the same supervisor, driving a Ray
actor per unit on another machine, SPEC 4.3). `pair.runners.runner_for` is the one place that
chooses; every runner passes `tests/test_runner_contract.py` unchanged.

What stays outside the seam, on purpose:
- the in-flight lock and the sequence: `send` takes the marker (`pair.state.acquire_marker`) and
  advances `seq` before it asks the runner to start anything, so the lease a turn runs under is
  granted by pair, never by a runner;
- `read_status` (and so `unit status --all`, `unit list`, `unit wait`) reads only files — the
  session, the marker, the receipt, a `stat` of the transcript — and never calls a runner. A
  runner therefore keeps those files current: it writes the turn's transcript and receipt under
  the names `pair.paths` gives, and records its processes in the marker.

This module defines the interface and its value types only; it starts nothing and imports no
runner.
"""

from __future__ import annotations

from pathlib import Path

from registry.light_dataclass import dataclass

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol

    from pair.partners.base import TurnRequest
    from pair.turn import TurnResult
    from registry.processes import ProcessIdentity
else:
    Protocol = object  # a structural type for mypy only: no `typing` at run time (SPEC 7)

TRANSCRIPT_READ_BYTES = 1024 * 1024
DEFAULT_CANCEL_REASON = "cancelled by the lead"  # what a cancel records when given no reason


@dataclass(frozen=True)
class TurnLease:
    """The grant under which one turn runs: pair's one-turn-at-a-time lock (the marker).

    `epoch` is the turn's seq: the session advances it under the marker lock before the turn
    starts and never reuses it, so it fences a stale runner — a runner acts for a turn (records
    its processes, writes its transcript and receipt, releases the lock) only while the marker
    still holds this epoch and `token`.
    """

    epoch: int
    token: str  # the marker's owner token
    write: bool  # the write lease: whether the turn may change the worktree


@dataclass(frozen=True)
class TurnStart:
    """Everything a runner needs to start turn `lease.epoch`, beyond the pair's files (the
    session and the turn's prompt, already written when `start` is called)."""

    kind: str
    lease: TurnLease
    worktree: Path  # where the turn's work lands
    base_commit: str | None  # the worktree's HEAD when the lease was granted (None: unborn)

    @property
    def seq(self) -> int:
        return self.lease.epoch


@dataclass(frozen=True)
class BootstrapTurn:
    """`pair init`'s bootstrap for a streaming partner (SPEC 4.1): turn 0, kind `init`,
    read-only, run in the caller's foreground under the lease `init` took (epoch 0) — `init`
    waits for its session id, and `unit create` journals the partner's identity before anything
    waits on it (SPEC 8). The prompt file is written before the runner is asked."""

    lease: TurnLease
    request: TurnRequest  # the partner's command line: prompt and reply files, model, preset sid
    idle_seconds: float
    total_seconds: float
    partner_home: str | None  # the identity's home (CODEX_HOME for codex); None: the default
    unit: str | None = None  # the session's unit: a runner elsewhere names its actor by it


@dataclass(frozen=True)
class TranscriptChunk:
    """Bytes of a turn's transcript from `offset`; read again from `next_offset` for new ones."""

    data: bytes
    offset: int
    next_offset: int


@dataclass(frozen=True)
class Liveness:
    """What a runner knows about turn `seq` right now.

    `held`: the turn still holds the in-flight lock. `alive`: some process of the turn still
    runs (while `held` is false nothing of it runs: a runner releases the lock only after the
    turn's processes are gone). `lost`: the turn holds the lock but nobody is left to finish it
    (write its receipt) — why. `pid`: a live process of the turn, for messages.
    """

    held: bool
    alive: bool
    lost: str | None = None
    pid: int | None = None
    kind: str | None = None
    partner_pid: int | None = None


@dataclass(frozen=True)
class Reaped:
    """What `reap` released: `cleared` (a dead turn's lock) or `already-cleared` (nothing)."""

    status: str
    lock_file: str
    marker: dict[str, Any] | None = None
    # `[{field, pid, found}]`: live processes the marker named that were not the turn's (SPEC 8).
    untrusted: list[dict[str, Any]] | None = None
    # A turn on another machine (SPEC 4.3): what its node says of it — `{node_turn: "stopped" |
    # "not-running" | "unknown", pgid, reason?}`; None for a turn of this machine.
    runner: dict[str, Any] | None = None


class TurnRunner(Protocol):
    """Runs the turns of one pair (one state dir). Every method may be called from any process:
    a runner keeps no memory between calls that the pair's files do not hold."""

    def start(self, turn: TurnStart) -> dict[str, Any]:
        """Start the turn whose lease `send` holds; return once its partner has started (the
        running record `{ok, status: "running", seq, kind, supervisor_pid, partner_pid,
        transcript, prompt_file, reply_file, receipt_file}`) or, when it already ended, its
        receipt. A turn that cannot start releases the lease and raises `supervisor-failed`."""
        ...

    def bootstrap(
        self,
        turn: BootstrapTurn,
        *,
        on_partner_start: Callable[[ProcessIdentity], None] | None = None,
    ) -> TurnResult:
        """Run the bootstrap in the caller's foreground and return its result (the outcome
        with the session id, the exit code, the seconds) once no process of it is left. The
        partner's identity goes into the marker (under the lease's token) and to
        `on_partner_start` before anything waits on it; the transcript is
        `read_transcript(0, "init")`. The lease stays the caller's: it saves the session, then
        releases the marker."""
        ...

    def read_transcript(
        self, seq: int, kind: str, *, offset: int = 0, limit: int = TRANSCRIPT_READ_BYTES
    ) -> TranscriptChunk:
        """Up to `limit` bytes of the turn's transcript from byte `offset` (none yet: empty)."""
        ...

    def receipt(self, seq: int) -> dict[str, Any] | None:
        """The receipt of turn `seq` once the turn has ended (the lock released or nobody left
        holding it); None while it runs or when it has none."""
        ...

    def probe(self, seq: int) -> Liveness:
        """Liveness of turn `seq`."""
        ...

    def cancel(self, seq: int | None, *, reason: str) -> dict[str, Any] | None:
        """Stop the turn in flight (`seq`, or whichever when None): every process of it is
        killed and its receipt says `cancelled` with `reason`. Returns that receipt only once
        no process of the turn is alive; None when no such turn is in flight."""
        ...

    def reattach(self, seq: int) -> bool:
        """Give turn `seq` a new lead-side supervisor when its own died while the turn itself
        runs on (another machine's turn, SPEC 4.3); whether one was started. A runner whose
        turns die with their supervisor answers False."""
        ...

    def release(self) -> dict[str, Any] | None:
        """The session is ending (`close_state`): free what the runner holds for it elsewhere
        (a Ray node's actor and its copy of the worktree, `{actor, released}`); None when it
        holds nothing outside this machine."""
        ...

    def reap(self) -> Reaped:
        """Release what a dead turn left (its lock); refuses `turn-in-flight` while any process
        of it lives. Afterwards nothing of the turn remains."""
        ...
