"""`unit restaff` (SPEC 3.5): swap a unit's executor in place, keeping its worktree and work.

Steps, journaled: `checkpoint` (what the old executor leaves behind, pushed once onto
`staffing.history`, with `pending_staffing`) -> `end-old` -> `init-target` -> `verify-target`
(against `pending_staffing`) -> `send-checkpoint` (the checkpoint, the manifest path and the
manifest's text as the new executor's first task) -> `finalize` (`working`). `restaff_phase` says
where it is: `ending-old`, `initializing-target`, `starting-target`. A failure leaves
`restaff-failed`; the same command resumes (adopting a target pair that was already started); a
different target is refused naming the field.
"""

from __future__ import annotations

import json
from pathlib import Path

from pair import api as pair_api
from pair.identity import identity_home, refuse_same_cli
from pair.partners import adapter_for
from registry.errors import RetryableError, Rewrite, StateError, ToolError
from registry.records import Staffing, UnitRecord
from registry.timeutil import iso_z
from unitmgr import git, notify, validation
from unitmgr.lifecycle.journal import Journal, StepOutcome
from unitmgr.lifecycle.manifest import read_manifest
from unitmgr.lifecycle.pairing import end_proven_pair, init_pair, send_or_adopt, verify_pair
from unitmgr.lifecycle.runner import StepRunner, dry_run_aware
from unitmgr.options import RestaffOptions
from unitmgr.ownership import Ownership, others_of
from unitmgr.units import (
    base_ref_of,
    load,
    locked,
    pair_state,
    refuse_in_flight,
    unsigned_fields,
)
from unitmgr.views.observe import describe, worktree_rows
from unitmgr.workspace import Workspace, dismantle_label

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

PHASE_AFTER = {
    "checkpoint": "ending-old",
    "end-old": "initializing-target",
    "init-target": "initializing-target",
    "verify-target": "starting-target",
    "send-checkpoint": "starting-target",
}
TARGET_FIELDS = ("identity", "lead", "partner", "model", "effort", "reason", "runner", "node")


def _target(options: RestaffOptions) -> dict[str, Any]:
    validation.refuse_missing_restaff_options(options)
    lead, partner, reason = options.lead, options.partner, options.reason
    assert lead is not None and partner is not None and reason is not None
    validation.staffing(
        lead=lead,
        partner=partner,
        model=options.model,
        effort=options.effort,
        identity=options.identity,
        command="restaff",
    )
    model = None if options.model in (None, "CLI-default") else options.model
    identity = options.identity or "default"
    adapter_for(partner).validate_staffing(model=model, effort=options.effort, identity=identity)
    refuse_same_cli(lead=lead, partner=partner, partner_home=identity_home(partner, identity))
    return {
        "lead": lead,
        "partner": partner,
        "identity": identity,
        "model": model,
        "effort": options.effort,
        "reason": reason,
    }


@dry_run_aware
def run(repo: str, options: RestaffOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    seconds = validation.lock_timeout(options.lock_timeout)
    target = _target(options)
    record = load(workspace, unit_id)
    target.update(_runner_target(workspace, options, record))  # refused before any write
    if options.dry_run:
        # As create's: a dry run starts no process but read-only git, so it skips the live model
        # catalog below (a model the catalog cannot resolve is refused by the real restaff).
        resumed_from = _admit(workspace, record, target)
        plan = Journal(workspace.registry, record, "restaff").plan(resuming=bool(resumed_from))
        for entry in plan:
            if entry["step"] == "init-target":
                entry["detail"] = {"target": target}
        return {"ok": True, "dry_run": True, "plan": plan}
    if target["partner"] != "script":
        pair_api.resolve_model(
            partner=target["partner"],
            model=target["model"] or "CLI-default",
            effort=target["effort"],
            identity=target["identity"],
        )
    with locked(workspace, unit_id, command=f"unit restaff --unit {unit_id}", seconds=seconds):
        record = load(workspace, unit_id)
        resumed_from = _admit(workspace, record, target)
        return Restaffer(workspace, record, target).run(resumed_from)


def _runner_target(
    workspace: Workspace, options: RestaffOptions, record: UnitRecord
) -> dict[str, Any]:
    """`{runner, node}` of the target (SPEC 4.3): `--runner`/`--node`, else the unit's own (a
    restaff moves a unit only when asked). The config is read only for a ray target (its `[ray]
    address`, approved like a command when a file gives it)."""
    from unitmgr import config_trust
    from unitmgr.config import load_config
    from unitmgr.lifecycle.pairing import runner_choice

    def config() -> Any:
        return load_config(workspace.toplevel, workspace.common_git_dir)

    current = record.staffing.current if record.staffing is not None else None
    choice = runner_choice(options.runner, options.node, config, current=current)
    if choice.kind == "ray":
        common_dir, toplevel = workspace.common_git_dir, workspace.toplevel
        config_trust.require_approved(
            config(), "ray.address", common_dir=common_dir, toplevel=toplevel
        )
    return {"runner": None if choice.kind == "local" else choice.kind, "node": choice.node}


def _admit(workspace: Workspace, record: UnitRecord, target: dict[str, Any]) -> str | None:
    """None for a fresh restaff, else the lifecycle it resumes from; refuses everything else.

    A recorded target without the lead's MAC (SPEC 8) is not compared: the lead's options now
    replace it, and the next write signs them."""
    finalized = record.lifecycle == "working" and any(
        entry.get("command") == "restaff" for entry in record.journal
    )
    if record.lifecycle in ("restaffing", "restaff-failed") or finalized:
        # A restaff killed after `finalize` but before clearing its journal: the target is
        # now the current staffing.
        pending = record.pending_staffing or {}
        if finalized and record.staffing is not None:
            pending = {**record.staffing.current.to_json(), "lead": record.lead}
        source = "staffing.current" if finalized else "pending_staffing"
        if unsigned_fields(workspace, record, source):
            _adopt_target(record, target, source)
            pending = {**target, "lead": record.lead}
        for field in TARGET_FIELDS:
            if pending.get(field) != target[field]:
                raise StateError(
                    "cannot-resume",
                    f"unit {record.unit_id} cannot resume restaff: {field} differs",
                    detail={
                        "field": field,
                        "recorded": pending.get(field),
                        "requested": target[field],
                    },
                    next_step="repeat the restaff with the recorded target (unit list prints it)",
                )
        return "restaffing" if finalized else record.lifecycle
    if record.lifecycle != "working":
        raise StateError(
            "wrong-lifecycle",
            f"unit {record.unit_id} cannot restaff from phase {record.lifecycle}",
            detail={"lifecycle": record.lifecycle},
        )
    if target["lead"] != record.lead:
        raise StateError(
            "lead-differs",
            f"unit {record.unit_id} lead differs: recorded {record.lead}, requested "
            f"{target['lead']}",
            detail={"recorded": record.lead, "requested": target["lead"]},
            next_command=Rewrite(set_options={"--lead": record.lead}),
        )
    if not Path(record.worktree).is_dir():
        raise StateError(
            "worktree-missing",
            f"unit {record.unit_id} worktree is missing: {record.worktree}",
            next_step=dismantle_label(record.unit_id),
        )
    refuse_in_flight(record, what="restaffing")
    return None


def _adopt_target(record: UnitRecord, target: dict[str, Any], source: str) -> None:
    """Replace an unsigned recorded target with the lead's (`source`: the field it was in)."""
    from registry import signing

    if source == "pending_staffing":
        requested_at = (record.pending_staffing or {}).get("requested_at") or iso_z()
        record.pending_staffing = {**target, "requested_at": requested_at}
    elif record.staffing is not None:
        fields = {key: target[key] for key in TARGET_FIELDS if key != "lead"}
        record.staffing.current = Staffing(**fields, selected_at=iso_z())
    signing.vouch(record, source)


class Restaffer:
    def __init__(self, workspace: Workspace, record: UnitRecord, target: dict[str, Any]) -> None:
        self.workspace = workspace
        self.registry = workspace.registry
        self.record = record
        self.target = target
        self.journal = Journal(self.registry, record, "restaff")

    @property
    def staffing(self) -> Staffing:
        """The target, from the lead's options (equal to `pending_staffing`, which `_admit`
        proved; never the record's alone: a script partner's model is a command, SPEC 8)."""
        pending = self.record.pending_staffing or {}
        target = self.target
        return Staffing(
            partner=target["partner"],
            identity=target.get("identity") or "default",
            model=target.get("model"),
            effort=target.get("effort"),
            reason=target.get("reason") or "",
            selected_at=pending.get("requested_at"),
            runner=target.get("runner"),
            node=target.get("node"),
        )

    def run(self, resumed_from: str | None) -> dict[str, Any]:
        record = self.record
        if record.lifecycle == "working" and not self.journal.is_done("checkpoint"):
            # The target and the new lifecycle are recorded with the first journal entry, so a
            # restaff killed at any later point is found (and resumed) by its record.
            record.pending_staffing = {**self.target, "requested_at": iso_z()}
            record.restaff_phase = "ending-old"
            record.lifecycle = "restaffing"
        StepRunner(self.journal).run(
            {
                "checkpoint": self._checkpoint,
                "end-old": self._end_old,
                "init-target": self._init_target,
                "verify-target": self._verify_target,
                "send-checkpoint": self._send_checkpoint,
                "finalize": self._finalize,
            },
            on_failure=self._failed,
            after=self._reached,
        )
        self.journal.clear()
        self.registry.write(record)
        document: dict[str, Any] = {
            "ok": True,
            "status": "resumed" if resumed_from else "restaffed",
        }
        if resumed_from:
            document["resumed_from"] = resumed_from
        document["unit"] = describe(
            record,
            worktree_rows(self.workspace, settled_for=f"unit restaff --unit {record.unit_id}"),
        )
        return document

    def _failed(self, error: ToolError, step: str | None) -> ToolError:
        """A failed step leaves `restaff-failed` with its journal: the same command resumes."""
        record = self.record
        record.lifecycle = "restaff-failed"
        record.error = error.reason
        self.registry.write(record)
        failure = RetryableError if isinstance(error, RetryableError) else StateError
        # The failed step's own next step; the same restaff resumes once it is done.
        next_step = error.next_step or f"unit status --unit {record.unit_id}"
        if failure is StateError:
            notify.announce(
                self.workspace,
                "restaff-failed",
                record.unit_id,
                code=error.code,
                reason=error.reason,
                next=next_step,
            )
        return failure(
            error.code,
            error.reason,
            detail={
                "step": step,
                "restaff_phase": record.restaff_phase,
                "recovery_record": str(self.registry.record_path(record.unit_id)),
                "cause": error.detail,
            },
            next_step=next_step,
            next_command=error.next_command,
        )

    def _staffing_fields(self) -> dict[str, Any]:
        staffing = self.staffing
        return {
            "partner": staffing.partner,
            "identity": staffing.identity,
            "model": staffing.model,
            "effort": staffing.effort,
            "reason": staffing.reason,
            "runner": staffing.runner,
            "node": staffing.node,
        }

    # -- steps ---------------------------------------------------------------------------------

    def _reached(self, step: str) -> None:
        if step in PHASE_AFTER:
            self.record.restaff_phase = PHASE_AFTER[step]

    def _finalize(self, outcome: dict[str, Any]) -> None:
        record = self.record
        assert record.staffing is not None
        record.staffing.current = Staffing(**{**self._staffing_fields(), "selected_at": iso_z()})
        record.pending_staffing = None
        record.restaff_phase = None
        record.lifecycle = "working"
        record.error = None

    def _checkpoint(self, outcome: dict[str, Any]) -> None:
        record = self.record
        assert record.staffing is not None
        worktree = Path(record.worktree)
        base_ref = base_ref_of(record)
        status = pair_state(record)
        receipt = status.get("latest_receipt") if status.get("ok") else None
        checkpoint = {
            "pair_sid": record.pair.sid if record.pair else None,
            "head": git.head_commit(worktree),
            "diff_stat": git.diff_stat(f"{base_ref}...HEAD", worktree=worktree),
            "worktree_status": git.status_porcelain(worktree),
            "receipt": _receipt_summary(receipt),
            "at": iso_z(),
        }
        # Pushed exactly once: the history entry is persisted together with this step's `done`.
        record.staffing.history.append(
            {**record.staffing.current.to_json(), "ended_at": iso_z(), "checkpoint": checkpoint}
        )
        outcome["checkpoint"] = checkpoint

    def _end_old(self, outcome: StepOutcome) -> None:
        ownership = Ownership(self.workspace, self.record, others_of(self.workspace, self.record))
        end_proven_pair(ownership, outcome, skipped="no old pair session")

    def _init_target(self, outcome: dict[str, Any]) -> None:
        target = notify.session_target(self.workspace, self.record.unit_id, self.record.worktree)
        outcome.update(
            init_pair(self.record, self.journal, "init-target", self.staffing, notify=target)
        )

    def _verify_target(self, outcome: dict[str, Any]) -> None:
        outcome.update(verify_pair(self.record, self.staffing))

    def _send_checkpoint(self, outcome: dict[str, Any]) -> None:
        record = self.record
        assert record.staffing is not None
        checkpoint = (
            record.staffing.history[-1].get("checkpoint") if record.staffing.history else None
        )
        manifest = read_manifest(Path(record.task_file))
        body = handoff_body(record, checkpoint or {}, manifest)
        outcome.update(send_or_adopt(record, body=body, what="the restaff checkpoint"))
        record.pending_notice = None  # the handoff carries the whole manifest


def _receipt_summary(receipt: dict[str, Any] | None) -> dict[str, Any] | None:
    if not receipt:
        return None
    return {key: receipt.get(key) for key in ("seq", "kind", "status", "reason", "receipt_file")}


def handoff_body(record: UnitRecord, checkpoint: dict[str, Any], manifest: str) -> str:
    """The new executor's first task: where the work stands, and the task itself."""
    previous = record.staffing.history[-1] if record.staffing and record.staffing.history else {}
    status_lines = checkpoint.get("worktree_status") or []
    return "\n".join(
        [
            "You are taking over this unit from another executor "
            f"({previous.get('partner', 'unknown')}). The worktree, with all its work, is yours "
            "now; nothing was reset.",
            "",
            "Where the work stands (checkpoint):",
            f"- head: {checkpoint.get('head')}",
            f"- previous session: {checkpoint.get('pair_sid')}",
            f"- last receipt: {json.dumps(checkpoint.get('receipt'))}",
            "- uncommitted changes:" + (" none" if not status_lines else ""),
            *(f"    {line}" for line in status_lines[:50]),
            "- changes against the base:",
            *(f"    {line}" for line in (checkpoint.get("diff_stat") or "none").splitlines()[:50]),
            "",
            f"The task manifest is {record.task_file}. Read the whole manifest before you act; "
            "its full text follows, in case you cannot read that path.",
            "",
            manifest.rstrip(),
        ]
    )
