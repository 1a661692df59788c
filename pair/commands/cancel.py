"""`pair cancel` (SPEC 4.1): end the in-flight turn, returning only once none of its processes
lives."""

from __future__ import annotations

import shlex
from pathlib import Path

from pair.commands.shared import locate_paths, require_session
from pair.errors import StateError, UsageError
from pair.paths import PairPaths
from pair.runners import runner_for
from pair.runners.base import DEFAULT_CANCEL_REASON
from pair.state import Session

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def cancel(
    repo: str | Path, *, seq: int | None = None, reason: str | None = None
) -> dict[str, Any]:
    _, paths = locate_paths(repo)
    return cancel_state(paths.state_dir, seq=seq, reason=reason)


def cancel_state(
    state_dir: str | Path, *, seq: int | None = None, reason: str | None = None
) -> dict[str, Any]:
    """End the in-flight turn: its partner's group and every descendant get SIGTERM, SIGKILL
    after 5 s; the receipt says `cancelled` with `reason`; the marker is released.

    The turn's runner does the work and returns only once no process of the turn is alive.
    Repeated on a cancelled turn it answers with the same receipt (`repeated: true`).
    """
    if seq is not None and seq < 1:
        raise UsageError("invalid-seq", f"--seq must be a positive integer, got {seq}")
    paths = PairPaths(Path(state_dir))
    session = require_session(paths)
    why = (reason or "").strip() or DEFAULT_CANCEL_REASON
    runner = runner_for(paths.state_dir)
    receipt = runner.cancel(seq, reason=why)
    if receipt is None:
        target = seq if seq is not None else session.seq
        receipt = runner.receipt(target)
        if receipt is not None and receipt.get("status") == "cancelled":
            return _cancel_document(receipt, repeated=True)
        raise _nothing_to_cancel(session, target, receipt)
    if receipt.get("status") == "unknown":  # a turn on a node that could not confirm it dead
        raise StateError(
            "cancel-unconfirmed",
            f"seq {receipt.get('seq')}: {receipt.get('reason')} — it may still run on its node; "
            "the lock is released and the epoch fences whatever it still sends",
            detail={"seq": receipt.get("seq"), "status": "unknown", "receipt": receipt},
            next_step=shlex.join(["pair", "status", "--repo", str(session.worktree)]),
        )
    if receipt.get("status") != "cancelled":
        raise _nothing_to_cancel(session, int(receipt.get("seq") or 0), receipt)
    return _cancel_document(receipt, repeated=False)


def _nothing_to_cancel(session: Session, seq: int, receipt: dict[str, Any] | None) -> StateError:
    ended = f" — seq {seq} already ended {receipt.get('status')}" if receipt else ""
    return StateError(
        "no-turn-in-flight",
        f"no turn is in flight in {session.worktree}{ended}",
        detail={"seq": seq, "receipt": receipt},
        next_step=shlex.join(["pair", "status", "--repo", str(session.worktree)]),
    )


def _cancel_document(receipt: dict[str, Any], *, repeated: bool) -> dict[str, Any]:
    return {
        "ok": True,
        "status": "cancelled",
        "seq": receipt.get("seq"),
        "reason": receipt.get("reason"),
        "repeated": repeated,
        "receipt": receipt,
    }
