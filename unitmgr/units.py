"""What every command that operates on one recorded unit needs: its record, its lock, its turn.

- `load`: the record, exit 2 when it is unreadable or too new, exit 1 when there is none;
- `locked`: the unit lock for the whole command, bounded by `--lock-timeout`;
- `turn_in_flight` / `refuse_in_flight`: whether the unit's pair is running a live turn;
- `first_turn_resend`: the exact command that sends a failed first turn again;
- `require_signed` / `unsigned_fields`: whether a field that drives execution or opens a gate
  carries the lead's MAC (SPEC 8, registry/signing.py), before it is used;
- `manifest_path`: the manifest, always derived from the unit id (`Registry.read` also sets
  `task_file` to it: an executor can point the stored one anywhere).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from registry.errors import Rewrite, StateError
from registry.locks import Deadline
from registry.records import UnitRecord
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def load(workspace: Workspace, unit_id: str) -> UnitRecord:
    record = workspace.read_record(unit_id)
    if record is None:
        raise StateError("no-such-unit", f"unit {unit_id} is not recorded")
    return record


@contextmanager
def locked(workspace: Workspace, unit_id: str, *, command: str, seconds: float) -> Iterator[None]:
    with workspace.registry.unit_lock(unit_id, command=command).hold(Deadline(seconds)):
        yield


def manifest_path(workspace: Workspace, record: UnitRecord) -> Path:
    """`<registry>/tasks/<unit-id>.md`: derived, never read from the record (SPEC 8)."""
    return workspace.registry.manifest_path(record.unit_id)


def unsigned_fields(workspace: Workspace, record: UnitRecord, *fields: str) -> list[str]:
    """The signed fields among `fields` (default: all) whose value lacks the lead's MAC."""
    from registry import signing

    return signing.unverified(workspace.registry.signer, record, *fields)


def untrusted_field(record: UnitRecord, field: str, *, next_step: str) -> StateError:
    """`record-untrusted` for a field whose MAC is missing or wrong: it was not used."""
    return StateError(
        "record-untrusted",
        f"unit {record.unit_id}'s record field {field} is not signed by this lead (an executor "
        "can write the registry) — it was not used",
        detail={"field": field, "signed": False},
        next_step=next_step,
    )


def require_signed(workspace: Workspace, record: UnitRecord, field: str, *, next_step: str) -> None:
    """Refuse `record-untrusted` unless `field` is unset or carries the lead's MAC."""
    if unsigned_fields(workspace, record, field):
        raise untrusted_field(record, field, next_step=next_step)


def base_ref_of(record: UnitRecord) -> str:
    """The ref the unit's work is measured against: the recorded one, else the local base."""
    return record.base_ref or f"refs/heads/{record.base}"


def pair_state(record: UnitRecord) -> dict[str, Any]:
    if record.pair is None or not record.pair.state_dir:
        return {"ok": False, "code": "no-pair", "reason": "no pair recorded"}
    from pair import api as pair_api  # here: `status --all` on an empty registry never needs it

    return pair_api.read_status(record.pair.state_dir)


def turn_in_flight(record: UnitRecord) -> dict[str, Any] | None:
    """The live in-flight turn of the unit's pair, or None (a dead marker is not in flight)."""
    status = pair_state(record)
    in_flight = status.get("in_flight") if status.get("ok") else None
    if in_flight and in_flight.get("alive", True):
        return dict(in_flight)
    return None


def refuse_in_flight(record: UnitRecord, *, what: str) -> None:
    in_flight = turn_in_flight(record)
    if in_flight is not None:
        raise StateError(
            "turn-in-flight",
            f"unit {record.unit_id} has an in-flight turn (seq {in_flight.get('seq')}) — wait "
            f"for its receipt before {what}",
            detail={"in_flight": in_flight},
            next_step=f"unit cancel --unit {record.unit_id}",
            next_command=Rewrite(command=("unit", "cancel"), keep=("--unit", "--repo")),
        )


def first_turn_resend(record: UnitRecord) -> str:
    """The exact command that sends a failed first turn's task again (its recovery command)."""
    return " ".join(
        shlex.quote(word)
        for word in (
            "pair", "send", "--repo", record.worktree, "--kind", "task", "--body-file",
            record.task_file, "--background",
        )
    )  # fmt: skip
