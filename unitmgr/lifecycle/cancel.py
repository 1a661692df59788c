"""`unit cancel --unit ID [--reason T] [--dry-run]` (SPEC 3.13): stop a unit's in-flight turn.

Under the unit lock it ends the turn through pair's library API in-process (`cancel_state`: the
partner's group and every descendant get SIGTERM, SIGKILL after 5 s; the receipt says
`cancelled`; the marker is released) and appends a `cancelled` event. The state dir is the one
of the worktree git proves is the unit's, and pair signals only processes it proves the turn's
(SPEC 8): a planted marker is `record-untrusted`. It returns once no process
of the turn is alive, so `dismantle` and `restaff` can proceed. Repeated on the cancelled turn it
prints the same receipt and appends nothing. It never touches the worktree, the branch or the
record.
"""

from __future__ import annotations

from pair import api as pair_api
from registry.errors import StateError
from registry.records import UnitRecord
from unitmgr import validation
from unitmgr.lifecycle.runner import dry_run_aware
from unitmgr.options import CancelOptions
from unitmgr.ownership import Ownership, others_of
from unitmgr.units import load, locked, pair_state, turn_in_flight
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


@dry_run_aware
def run(repo: str, options: CancelOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    seconds = validation.lock_timeout(options.lock_timeout)
    record = load(workspace, unit_id)
    if options.dry_run:
        return _plan(record)
    with locked(workspace, unit_id, command=f"unit cancel --unit {unit_id}", seconds=seconds):
        record = load(workspace, unit_id)
        state_dir = _state_dir(workspace, record)
        try:
            cancelled = pair_api.cancel_state(state_dir, reason=options.reason)
        except StateError as error:
            if error.code == "no-turn-in-flight":
                raise _nothing_in_flight(record, error.detail) from None
            raise
        if not cancelled["repeated"]:
            workspace.registry.append_event(
                {
                    "command": "cancel",
                    "step": "cancelled",
                    "status": "done",
                    "unit": unit_id,
                    "seq": cancelled["seq"],
                    "reason": cancelled["reason"],
                }
            )
    return {"ok": True, "unit_id": unit_id, **cancelled}


def _plan(record: UnitRecord) -> dict[str, Any]:
    """What the real cancel would do, from the pair's files alone (nothing signalled)."""
    in_flight = turn_in_flight(record)
    if in_flight is None:
        receipt = pair_state(record).get("latest_receipt") or {}
        if receipt.get("status") != "cancelled":
            raise _nothing_in_flight(record, None)
        action, detail = "skip", {"seq": receipt.get("seq"), "skipped": "already cancelled"}
    else:
        action = "run"
        detail = {"seq": in_flight.get("seq"), "partner_pid": in_flight.get("partner_pid")}
    return {
        "ok": True,
        "dry_run": True,
        "plan": [{"step": "cancel", "action": action, "detail": detail}],
    }


def _state_dir(workspace: Workspace, record: UnitRecord) -> str:
    """The pair state of the worktree git proves is the unit's: what pair proves the turn's
    processes against (SPEC 8), so never the record's word alone."""
    if record.pair is None or not record.pair.state_dir:
        raise _nothing_in_flight(record, None)
    ownership = Ownership(workspace, record, others_of(workspace, record))
    state_dir = ownership.pair_state_dir(ownership.worktree())
    if state_dir is None:
        raise _nothing_in_flight(record, None)
    return str(state_dir)


def _nothing_in_flight(record: UnitRecord, detail: Any) -> StateError:
    return StateError(
        "no-turn-in-flight",
        f"unit {record.unit_id} has no turn in flight — nothing to cancel",
        detail=detail,
        next_step=f"unit status --unit {record.unit_id}",
    )
