"""`unit create` (SPEC 3.3): reserve a unit under the registry lock, then build it step by step.

- Phase A, no lock, nothing written: validate every option, resolve the base (a fetch under
  `locks/fetch.lock`, falling back to the local branch), check the branch is absent at origin.
- Phase B, unit lock then registry lock: a record already there means resume; otherwise admission
  from a fresh read of every record, conflict checks, the port lease (SPEC 3.19) and the
  `creating` record (step `reserve`).
- Phase C, unit lock only: `manifest`, `worktree`, `pr-body-exclude`, `copy-files`, `setup`,
  `pair-init`, `pair-verify`, `first-task`, `working`, each journaled before and after it acts.

A new create that fails rolls back everything it made; a repeated create resumes at the first
unfinished step and refuses a differing immutable field by name.

This module is the command and its order of steps. Around it: create_request.py (Phase A: the
validated request, the resume comparison), unitmgr/admission.py (base, admission, conflicts),
create_steps.py (one method per step), create_rollback.py (what a failure undoes).
"""

from __future__ import annotations

import functools

from registry.atomic import sweep_temp_files
from registry.errors import (
    StateError,
    ToolError,
)
from registry.locks import Deadline
from registry.records import UnitRecord
from registry.store import UnreadableRecord
from unitmgr import admission, config_trust, git, notify, port_leases, validation
from unitmgr.admission import Base, admit, check_conflicts, resolve_base
from unitmgr.config import load_config
from unitmgr.forge import PullRequest
from unitmgr.github_remote import open_forge
from unitmgr.lifecycle.create_request import (
    Request,
    command_label,
    compare_for_resume,
    new_record,
    require_approvals,
    unset,
    validate,
    validate_against_repository,
)
from unitmgr.lifecycle.create_rollback import CreateRollback
from unitmgr.lifecycle.journal import Journal
from unitmgr.lifecycle.manifest import ensure_manifest
from unitmgr.lifecycle.pairing import report_first_turn
from unitmgr.lifecycle.runner import Handler, Step, StepRunner, dry_run_aware
from unitmgr.options import CreateOptions
from unitmgr.steps import CREATE_PHASES, CREATE_STEPS
from unitmgr.views.observe import describe, worktree_rows
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


@dry_run_aware
def run(repo: str, options: CreateOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    # No --unit: validate names it among every missing option (a new unit, so far as it knows).
    unit = None if unset(options.unit) else validation.unit_id(options.unit or "")
    existing = workspace.read_record(unit) if unit else None
    migration = config_trust.migrate_legacy(workspace.common_git_dir, dry_run=options.dry_run)
    config = load_config(workspace.toplevel, workspace.common_git_dir)
    request = validate(
        options, resume=existing is not None, config=config, toplevel=workspace.toplevel
    )
    require_approvals(config, request, common_dir=workspace.common_git_dir)
    if existing is None:
        validate_against_repository(workspace, request)
    if request.dry_run:
        document = dry_run(workspace, request, existing, copy=config.value("copy"))
    else:
        deadline = Deadline(request.lock_timeout)
        if existing is not None:
            document = Builder.resume(workspace, request, deadline)
        else:
            _, pulls, _, base = preflight(workspace, request, deadline)
            document = Builder.reserve_and_build(workspace, request, base, deadline, pulls)
    if migration is not None:
        document["config_migration"] = migration
    return document


def preflight(
    workspace: Workspace, request: Request, deadline: Deadline
) -> tuple[
    list[UnitRecord | UnreadableRecord],
    dict[str, list[PullRequest]] | None,
    dict[str, Any],
    Base,
]:
    """The checks a new unit passes before any lock, in the one order a create and its dry run
    share (so both refuse the same request with the same code): admission, the base, the branch
    at origin. Live PR state is read here (network, no lock); this admission is advisory — it
    refuses a full registry before any fetch or lock — and the decision that counts is taken
    again under the registry lock (Phase B) from a fresh read of every record."""
    entries = workspace.registry.scan()
    pulls = admission.live_pr_state(open_forge(workspace), admission.refuse_unreadable(entries))
    capacity = admit(entries, request, pulls)
    origin = git.has_remote(workspace.toplevel)
    # A dry run reads origin's base and branch in one round trip; a create fetches the base
    # (under the fetch lock) and then asks for the branch.
    heads = (
        git.remote_branch_heads([request.base, request.branch], cwd=workspace.toplevel)
        if origin and request.dry_run
        else None
    )
    base = resolve_base(workspace, request, deadline, remote_heads=heads)
    if origin and (
        heads[request.branch]
        if heads is not None
        else git.remote_branch_head(request.branch, cwd=workspace.toplevel)
    ):
        raise StateError("branch-exists", f"branch {request.branch} already exists at origin")
    return entries, pulls, capacity, base


def resumable(record: UnitRecord) -> bool:
    """A create can resume this record: still in a create phase, or `working` with the create's
    journal not yet cleared (killed after its last step). Another command's journal is not."""
    return record.lifecycle in CREATE_PHASES or (
        record.lifecycle == "working"
        and any(entry.get("command") == "create" for entry in record.journal)
    )


def dry_run(
    workspace: Workspace, request: Request, existing: UnitRecord | None, *, copy: list[str]
) -> dict[str, Any]:
    if existing is not None:
        if not resumable(existing):
            raise StateError(
                "unit-exists",
                f"unit {existing.unit_id} already exists in phase {existing.lifecycle}",
                detail={"lifecycle": existing.lifecycle},
            )
        compare_for_resume(workspace, existing, request)
        plan = Journal(workspace.registry, existing, "create").plan()
        return {"ok": True, "dry_run": True, "status": "resume", "plan": plan}
    # Never waits for the fetch lock: a dry run that would wait says so at once.
    entries, _, capacity, base = preflight(workspace, request, Deadline(0))
    records = [e for e in entries if isinstance(e, UnitRecord)]
    check_conflicts(workspace, request, records)
    reserve: dict[str, Any] = {"capacity": capacity}
    if request.ports:  # the same choice the reservation makes, but nothing is held yet
        reserve["would_lease_ports"] = lease_ports(request, records)
    details: dict[str, Any] = {
        "reserve": reserve,
        "worktree": {"path": str(request.worktree), "base_ref": base.ref, "base_sha": base.sha},
        "copy-files": {"copy": copy} if copy else {"skipped": NO_COPY_LIST},
        "setup": {"command": request.setup} if request.setup else {"skipped": "no --setup"},
        "pair-init": {"partner": request.partner, "model": request.model, "effort": request.effort},
    }
    if request.runner is not None:  # where its turns would run (SPEC 4.3)
        details["pair-init"]["runner"] = {"kind": request.runner, "node": request.node}
    skipped = {"setup": not request.setup, "copy-files": not copy}
    plan = [
        {
            "step": step,
            "action": "skip" if skipped.get(step) else "run",
            "detail": details.get(step),
        }
        for step in CREATE_STEPS
    ]
    return {"ok": True, "dry_run": True, "status": "create", "plan": plan}


NO_COPY_LIST = "no copy list in the project config"


def lease_ports(request: Request, records: list[UnitRecord]) -> list[int]:
    """The ports a new unit gets (SPEC 3.19): none another recorded unit holds, none in use."""
    taken = port_leases.held(records)
    return port_leases.lease(request.unit_id, request.ports, request.port_range, taken)


class Builder(CreateRollback):
    """Runs Phase C over one record, holding its unit lock: reserve or resume, then the steps."""

    # -- entry points --------------------------------------------------------------------------

    @classmethod
    def reserve_and_build(
        cls,
        workspace: Workspace,
        request: Request,
        base: Base,
        deadline: Deadline,
        pulls: dict[str, list[PullRequest]] | None,
    ) -> dict[str, Any]:
        registry = workspace.registry
        label = command_label(request.unit_id)
        with registry.unit_lock(request.unit_id, command=label).hold(deadline):
            with registry.registry_lock(command=label).hold(deadline):
                builder = (
                    None
                    if registry.exists(request.unit_id)
                    else cls._reserve(workspace, request, base, deadline, pulls)
                )
            if builder is None:  # another create reserved it first: this one resumes
                return cls._resume_locked(workspace, request, deadline)
            return builder.build(new=True, resumed_from=None)

    @classmethod
    def _reserve(
        cls,
        workspace: Workspace,
        request: Request,
        base: Base,
        deadline: Deadline,
        pulls: dict[str, list[PullRequest]] | None,
    ) -> Builder:
        """Admission, conflicts and the `creating` record: the caller holds the registry lock.

        Nothing slow runs here: the live PR state was read before the lock; a unit reserved
        since then has no pull request yet and counts active.
        """
        registry = workspace.registry
        for directory in (registry.units_dir, registry.tasks_dir, registry.root):
            sweep_temp_files(directory)  # what writers killed mid-write left (old enough)
        entries = registry.scan()
        capacity = admit(entries, request, pulls)
        records = [e for e in entries if isinstance(e, UnitRecord)]
        check_conflicts(workspace, request, records)
        # Leased here, from the same read of every record, so no two units ever hold a port.
        ports = lease_ports(request, records)
        builder = cls(workspace, new_record(workspace, request, base, ports=ports), deadline)
        started: dict[str, Any] = {"capacity": capacity}
        if ports:
            started["ports"] = ports
        builder.journal.write("reserve", "started", started)
        builder.journal.write("reserve", "done")
        return builder

    @classmethod
    def resume(cls, workspace: Workspace, request: Request, deadline: Deadline) -> dict[str, Any]:
        lock = workspace.registry.unit_lock(request.unit_id, command=command_label(request.unit_id))
        with lock.hold(deadline):
            return cls._resume_locked(workspace, request, deadline)

    @classmethod
    def _resume_locked(
        cls, workspace: Workspace, request: Request, deadline: Deadline
    ) -> dict[str, Any]:
        record = workspace.read_record(request.unit_id)
        if record is None:
            raise StateError(
                "unit-vanished",
                f"unit {request.unit_id}'s record disappeared while waiting for its lock — "
                "repeat the create",
            )
        if not resumable(record):
            raise StateError(
                "unit-exists",
                f"unit {record.unit_id} already exists in phase {record.lifecycle}",
                detail={"lifecycle": record.lifecycle},
            )
        compare_for_resume(workspace, record, request)
        builder = cls(workspace, record, deadline)
        return builder.build(new=False, resumed_from=record.lifecycle)

    # -- Phase C -------------------------------------------------------------------------------

    def build(self, *, new: bool, resumed_from: str | None) -> dict[str, Any]:
        record = self.record
        if not new and self.journal.is_done("manifest"):
            ensure_manifest(record)
        if not self.journal.is_done("reserve"):
            self.journal.write("reserve", "done", {"resumed": True})
        # Read when the steps run, so a resume copies (and guards) what the config says now.
        config = load_config(self.workspace.toplevel, self.workspace.common_git_dir)
        listed = config.value("copy")
        self.guard_refs = bool(config.value("guard_refs"))
        steps: dict[str, Handler | Step] = {
            "manifest": self._manifest,
            "worktree": self._worktree,
            "pr-body-exclude": self._pr_body_exclude,
            "copy-files": (
                Step(functools.partial(self._copy_files, listed), started={"copy": listed})
                if listed
                else Step(skip=NO_COPY_LIST)
            ),
            "setup": self._setup if record.setup else Step(skip="no --setup"),
            "pair-init": self._pair_init,
            "pair-verify": self._pair_verify,
            "first-task": self._first_task,
            "working": self._working,
        }

        def failed(error: ToolError, step: str | None) -> ToolError:
            return self._fail(error, new=new, resumed_from=resumed_from, step=step)

        StepRunner(self.journal).run(
            steps, on_failure=failed, before=self._kill_journaled_child, after=self._reached
        )
        self.journal.clear()
        record.error = None
        self.registry.write(record)
        notify.announce(self.workspace, "created", record.unit_id)
        document: dict[str, Any] = {
            "ok": True,
            "status": "created" if new else "resumed",
        }
        if resumed_from is not None:
            document["resumed_from"] = resumed_from
        document["unit"] = describe(
            record, worktree_rows(self.workspace, settled_for=command_label(record.unit_id))
        )
        report_first_turn(document, record)  # a first turn that already failed refuses
        return document
