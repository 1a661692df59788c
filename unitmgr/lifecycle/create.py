"""`unit create` (SPEC 3.3): reserve a unit under the registry lock, then build it step by step.

- Phase A, no lock, nothing written: validate every option, resolve the base (a fetch under
  `locks/fetch.lock`, falling back to the local branch), check the branch is absent at origin.
- Phase B, unit lock then registry lock: a record already there means resume; otherwise admission
  from a fresh read of every record, conflict checks, and the `creating` record (step `reserve`).
- Phase C, unit lock only: `manifest`, `worktree`, `pr-body-exclude`, `setup`, `pair-init`,
  `pair-verify`, `first-task`, `working`, each journaled before and after it acts.

A new create that fails rolls back everything it made; a repeated create resumes at the first
unfinished step and refuses a differing immutable field by name.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pair import api as pair_api
from pair.identity import identity_home, refuse_same_cli
from pair.partners import adapter_for
from pair.partners.script import first_command_word
from registry.atomic import remove_file, sweep_temp_files, write_text_atomic
from registry.errors import (
    RetryableError,
    StateError,
    ToolError,
    UsageError,
)
from registry.locks import Deadline
from registry.output import progress
from registry.processes import (
    ChildTimeout,
    ProcessIdentity,
    is_alive,
    kill_tree,
    run_streamed,
)
from registry.records import Resources, Staffing, StaffingHistory, UnitRecord
from registry.redact import redact
from registry.store import UnreadableRecord
from registry.timeutil import iso_z, seconds_from_env
from unitmgr import admission, git, validation
from unitmgr.forge import PullRequest
from unitmgr.forge_github import open_forge
from unitmgr.lifecycle.archive import archive_pair_state
from unitmgr.lifecycle.journal import Journal
from unitmgr.lifecycle.manifest import ensure_manifest
from unitmgr.lifecycle.pairing import init_pair, report_first_turn, send_or_adopt, verify_pair
from unitmgr.lifecycle.runner import Handler, Step, StepRunner, dry_run_aware
from unitmgr.options import CreateOptions
from unitmgr.ownership import Ownership, others_of
from unitmgr.scope import overlapping_pairs
from unitmgr.steps import CREATE_LIFECYCLE_AFTER, CREATE_PHASES, CREATE_STEPS
from unitmgr.views.observe import describe, worktree_rows
from unitmgr.workspace import Workspace, dismantle_label, is_inside, realpath

PR_BODY_PATTERN = "/PR_BODY.md"
PAIR_STEPS = ("pair-init", "pair-verify", "first-task")


@dataclass(frozen=True)
class Request:
    """Validated options."""

    unit_id: str
    worktree: Path
    branch: str
    base: str
    scope: str
    validation: str
    lead: str
    partner: str
    reason: str
    task: str | None
    paths: list[str]
    model: str | None
    effort: str | None
    identity: str
    identity_explicit: bool
    issue: int | None
    setup: str | None
    max_active: int
    max_held: int
    allow_overlap: bool
    lock_timeout: float
    dry_run: bool


def command_label(unit_id: str) -> str:
    return f"unit create --unit {unit_id}"


# -- Phase A: validation ------------------------------------------------------------------------


def _read_task(task_file: str) -> str:
    text = validation.read_input_file(task_file, "--task-file", missing_code="task-file-missing")
    if not text.strip():
        raise UsageError("task-file-empty", f"task file is empty: {task_file}")
    return text.strip()


def validate(options: CreateOptions, *, resume: bool) -> Request:
    unit_id = validation.unit_id(options.unit)
    for option, value in (
        ("--worktree", options.worktree),
        ("--branch", options.branch),
        ("--base", options.base),
        ("--scope", options.scope),
        ("--validation", options.validation),
        ("--lead", options.lead),
        ("--partner", options.partner),
        ("--reason", options.reason),
    ):
        validation.required(value, option)
    if not resume:
        validation.required(options.task_file, "--task-file")
    assert options.worktree and options.branch and options.base and options.lead
    assert options.partner and options.reason and options.scope and options.validation
    worktree = validation.absolute_path(options.worktree, "--worktree")
    if options.branch.startswith("-"):
        raise UsageError("invalid-branch", f"invalid branch name: {options.branch!r}")
    if options.base.startswith("-"):
        raise UsageError("invalid-base", f"invalid base branch name: {options.base!r}")
    validation.staffing(
        lead=options.lead,
        partner=options.partner,
        model=options.model,
        effort=options.effort,
        identity=options.identity,
    )
    model = None if options.model in (None, "CLI-default") else options.model
    return Request(
        unit_id=unit_id,
        worktree=worktree,
        branch=options.branch,
        base=options.base,
        scope=options.scope,
        validation=options.validation,
        lead=options.lead,
        partner=options.partner,
        reason=options.reason,
        task=_read_task(options.task_file) if options.task_file else None,
        paths=validation.write_paths(options.paths),
        model=model,
        effort=options.effort,
        identity=options.identity or "default",
        identity_explicit=options.identity is not None,
        issue=validation.issue_number(options.issue),
        setup=options.setup if options.setup else None,
        max_active=validation.limit(options.max_active, "--max-active"),
        max_held=validation.limit(options.max_held, "--max-held"),
        allow_overlap=options.allow_overlap,
        lock_timeout=validation.lock_timeout(options.lock_timeout),
        dry_run=options.dry_run,
    )


def validate_against_repository(workspace: Workspace, request: Request) -> None:
    """The checks that need git but change nothing: branch format, nesting, script command."""
    if not git.check_branch_name(request.branch, cwd=workspace.toplevel):
        raise UsageError(
            "invalid-branch",
            f"invalid branch name: {request.branch} — use the repository's convention (for "
            "example feat/<issue>-<slug>)",
        )
    if not git.check_branch_name(request.base, cwd=workspace.toplevel):
        raise UsageError(
            "invalid-base",
            f"invalid base branch name: {request.base!r} — git check-ref-format --branch "
            "refuses it",
            next_step="name the base branch exactly, e.g. --base main",
        )
    target = _real_target(request.worktree)
    for row in git.list_worktrees(cwd=workspace.toplevel):
        # An equal path is a conflict with that unit (exit 1, under the registry lock), not a
        # malformed call.
        if target != realpath(row.path) and is_inside(target, realpath(row.path)):
            raise UsageError(
                "worktree-inside-worktree",
                f"--worktree {request.worktree} is inside the worktree {row.path} — put unit "
                "worktrees beside the repository, not in it",
            )
    if is_inside(target, realpath(workspace.common_git_dir)):
        raise UsageError(
            "worktree-inside-worktree",
            f"--worktree {request.worktree} is inside the git dir {workspace.common_git_dir}",
        )
    adapter = adapter_for(request.partner)
    adapter.validate_staffing(model=request.model, effort=request.effort, identity=request.identity)
    home = identity_home(request.partner, request.identity)
    refuse_same_cli(lead=request.lead, partner=request.partner, partner_home=home)
    model = request.model
    if request.partner == "script":
        # A command found on PATH (or a shell builtin) can be checked before anything is made;
        # a relative path can only be checked in the worktree, at pair-init.
        if model and "/" not in first_command_word(model):
            adapter.preflight(model=model, worktree=workspace.toplevel)
    elif not request.dry_run:
        # The binary, and a model the live catalog cannot resolve, refuse before anything is made
        # (a dry run starts no process but read-only git, so it skips the catalog).
        pair_api.resolve_model(
            partner=request.partner,
            model=model or "CLI-default",
            effort=request.effort,
            identity=request.identity,
        )


def _real_target(path: Path) -> str:
    """The real path `path` will have: its nearest existing ancestor resolved, then the rest."""
    existing, rest = path, []
    while not existing.exists() and existing != existing.parent:
        rest.append(existing.name)
        existing = existing.parent
    return os.path.join(realpath(existing), *reversed(rest)) if rest else realpath(existing)


@dataclass(frozen=True)
class Base:
    ref: str
    sha: str
    source: str  # "origin" | "local"


def resolve_base(workspace: Workspace, request: Request, deadline: Deadline) -> Base:
    cwd = workspace.toplevel
    remote_ref = f"refs/remotes/origin/{request.base}"
    local_ref = f"refs/heads/{request.base}"
    if git.has_remote(cwd):
        if request.dry_run:
            remote_sha = git.remote_branch_head(request.base, cwd=cwd)
            if remote_sha:
                return Base(remote_ref, remote_sha, "origin")
        else:
            progress(f"unit create {request.unit_id}: fetching origin {request.base}")
            lock = workspace.registry.fetch_lock(command=command_label(request.unit_id))
            with lock.hold(deadline):
                fetched = git.fetch_base(request.base, cwd=cwd)
            if fetched == "fetched":
                sha = git.resolve_commit(remote_ref, cwd=cwd)
                if sha:
                    return Base(remote_ref, sha, "origin")
    sha = git.resolve_commit(local_ref, cwd=cwd)
    if sha:
        return Base(local_ref, sha, "local")
    raise StateError(
        "base-missing", f"unit base {request.base} does not exist at origin or locally"
    )


# -- Phase B: admission, conflicts, reservation -------------------------------------------------


def admit(
    entries: list[UnitRecord | UnreadableRecord],
    request: Request,
    pulls: dict[str, list[PullRequest]] | None,
) -> dict[str, Any]:
    """The capacity, or the `admission-paused` refusal when no slot is free."""
    capacity = admission.compute(
        entries, max_active=request.max_active, max_held=request.max_held, pulls=pulls
    )
    if capacity["slots"] <= 0:
        raise StateError(
            "admission-paused",
            "admission paused: active or human-review limit reached",
            detail=capacity,
            next_step="wait for a unit to be merged or dismantled",
        )
    return capacity


def check_conflicts(workspace: Workspace, request: Request, records: list[UnitRecord]) -> None:
    target = _real_target(request.worktree)
    for other in records:
        reason = None
        if other.branch == request.branch:
            reason = f"same branch {request.branch}"
        elif realpath(other.worktree) == target:
            reason = f"same worktree {request.worktree}"
        elif is_inside(target, realpath(other.worktree)) or is_inside(
            realpath(other.worktree), target
        ):
            # Checked again here, under the registry lock: two creates racing with `/w/a` and
            # `/w/a/b` both passed the lock-free check before either worktree existed.
            reason = f"worktree {request.worktree} nests with {other.worktree}"
        elif request.issue is not None and other.issue == request.issue:
            reason = f"same issue #{request.issue}"
        elif not request.allow_overlap and other.paths and request.paths:
            shared = overlapping_pairs(request.paths, other.paths)
            if shared:
                reason = "overlapping --paths " + ", ".join(f"{a} ~ {b}" for a, b in shared)
        if reason:
            raise StateError(
                "conflict",
                f"unit {request.unit_id} conflicts with recorded unit {other.unit_id}: {reason}",
                detail={"unit": other.unit_id, "why": reason},
                next_step="pick another branch, worktree or issue"
                + (", or pass --allow-overlap" if "paths" in reason else ""),
            )
    cwd = workspace.toplevel
    for ref in (f"refs/heads/{request.branch}", f"refs/remotes/origin/{request.branch}"):
        if git.ref_exists(ref, cwd=cwd):
            raise StateError("branch-exists", f"branch {request.branch} already exists at {ref}")
    if os.path.lexists(request.worktree):
        raise StateError("worktree-exists", f"worktree path already exists: {request.worktree}")


def new_record(workspace: Workspace, request: Request, base: Base) -> UnitRecord:
    assert request.task is not None
    now = iso_z()
    record = UnitRecord(
        unit_id=request.unit_id,
        issue=request.issue,
        repository=str(workspace.toplevel),
        common_git_dir=str(workspace.common_git_dir),
        worktree=str(request.worktree),
        branch=request.branch,
        base=request.base,
        base_ref=base.ref,
        base_sha=base.sha,
        lifecycle="creating",
        lead=request.lead,
        task=request.task,
        task_file=str(workspace.registry.manifest_path(request.unit_id)),
        scope=request.scope,
        paths=list(request.paths),
        validation=request.validation,
        setup=request.setup,
        resources=Resources(),
        staffing=StaffingHistory(
            current=Staffing(
                partner=request.partner,
                identity=request.identity,
                model=request.model,
                effort=request.effort,
                reason=request.reason,
                selected_at=now,
            )
        ),
        created_at=now,
    )
    return record


# -- resume checks ------------------------------------------------------------------------------


def compare_for_resume(record: UnitRecord, request: Request) -> None:
    """Refuse at the first immutable field that differs (SPEC 3.3 "Resume")."""
    assert record.staffing is not None
    current = record.staffing.current
    comparisons: list[tuple[str, Any, Any]] = [
        ("identity", current.identity, request.identity),
        ("issue", record.issue, request.issue),
        ("worktree", realpath(record.worktree), _real_target(request.worktree)),
        ("branch", record.branch, request.branch),
        ("base", record.base, request.base),
        ("lead", record.lead, request.lead),
        ("partner", current.partner, request.partner),
        ("model", current.model, request.model),
        ("effort", current.effort, request.effort),
        ("reason", current.reason, request.reason),
        ("scope", record.scope, request.scope),
        ("validation", record.validation, request.validation),
        ("setup", record.setup, request.setup),
        ("paths", record.paths, request.paths),
    ]
    if request.task is not None:
        comparisons.append(("task", record.task, request.task))
    for name, recorded, requested in comparisons:
        # The record was written redacted (SPEC 8): compare what each side looks like there.
        if _redacted(recorded) != _redacted(requested):
            raise StateError(
                "cannot-resume",
                f"unit {record.unit_id} cannot resume: {name} differs",
                detail={"field": name, "recorded": recorded, "requested": requested},
                next_step="repeat create with the recorded options (see unit list's recovery "
                "command)",
            )


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value


# -- the command --------------------------------------------------------------------------------


@dry_run_aware
def run(repo: str, options: CreateOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    existing = workspace.read_record(unit_id)
    request = validate(options, resume=existing is not None)
    if existing is None:
        validate_against_repository(workspace, request)
    if request.dry_run:
        return dry_run(workspace, request, existing)
    deadline = Deadline(request.lock_timeout)
    if existing is not None:
        return Builder.resume(workspace, request, deadline)
    # Live PR state is read now (network, no lock); an advisory admission check refuses a full
    # registry before any fetch or lock. The decision that counts is taken again under the
    # registry lock (Phase B) from a fresh read of every record.
    entries = workspace.registry.scan()
    pulls = admission.live_pr_state(open_forge(workspace), admission.refuse_unreadable(entries))
    admit(entries, request, pulls)
    base = resolve_base(workspace, request, deadline)
    if git.has_remote(workspace.toplevel) and git.remote_branch_head(
        request.branch, cwd=workspace.toplevel
    ):
        raise StateError("branch-exists", f"branch {request.branch} already exists at origin")
    return Builder.reserve_and_build(workspace, request, base, deadline, pulls)


def resumable(record: UnitRecord) -> bool:
    """A create can resume this record: still in a create phase, or `working` with the create's
    journal not yet cleared (killed after its last step). Another command's journal is not."""
    return record.lifecycle in CREATE_PHASES or (
        record.lifecycle == "working"
        and any(entry.get("command") == "create" for entry in record.journal)
    )


def dry_run(workspace: Workspace, request: Request, existing: UnitRecord | None) -> dict[str, Any]:
    if existing is not None:
        if not resumable(existing):
            raise StateError(
                "unit-exists",
                f"unit {existing.unit_id} already exists in phase {existing.lifecycle}",
                detail={"dry_run": True},
            )
        compare_for_resume(existing, request)
        plan = Journal(workspace.registry, existing, "create").plan()
        return {"ok": True, "dry_run": True, "status": "resume", "plan": plan}
    base = resolve_base(workspace, request, Deadline(0))
    entries = workspace.registry.scan()
    pulls = admission.live_pr_state(open_forge(workspace), admission.refuse_unreadable(entries))
    capacity = admit(entries, request, pulls)
    check_conflicts(workspace, request, [e for e in entries if isinstance(e, UnitRecord)])
    if git.has_remote(workspace.toplevel) and git.remote_branch_head(
        request.branch, cwd=workspace.toplevel
    ):
        raise StateError("branch-exists", f"branch {request.branch} already exists at origin")
    details: dict[str, Any] = {
        "reserve": {"capacity": capacity},
        "worktree": {"path": str(request.worktree), "base_ref": base.ref, "base_sha": base.sha},
        "setup": {"command": request.setup} if request.setup else {"skipped": "no --setup"},
        "pair-init": {"partner": request.partner, "model": request.model, "effort": request.effort},
    }
    plan = [
        {
            "step": step,
            "action": "skip" if step == "setup" and not request.setup else "run",
            "detail": details.get(step),
        }
        for step in CREATE_STEPS
    ]
    return {"ok": True, "dry_run": True, "status": "create", "plan": plan}


class Builder:
    """Runs Phase C over one record, holding its unit lock."""

    def __init__(self, workspace: Workspace, record: UnitRecord, deadline: Deadline):
        self.workspace = workspace
        self.registry = workspace.registry
        self.record = record
        self.deadline = deadline
        self.journal = Journal(self.registry, record, "create")

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
        check_conflicts(workspace, request, [e for e in entries if isinstance(e, UnitRecord)])
        builder = cls(workspace, new_record(workspace, request, base), deadline)
        builder.journal.write("reserve", "started", {"capacity": capacity})
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
        compare_for_resume(record, request)
        builder = cls(workspace, record, deadline)
        return builder.build(new=False, resumed_from=record.lifecycle)

    # -- Phase C -------------------------------------------------------------------------------

    def build(self, *, new: bool, resumed_from: str | None) -> dict[str, Any]:
        record = self.record
        if not new and self.journal.is_done("manifest"):
            ensure_manifest(record)
        if not self.journal.is_done("reserve"):
            self.journal.write("reserve", "done", {"resumed": True})
        steps: dict[str, Handler | Step] = {
            "manifest": self._manifest,
            "worktree": self._worktree,
            "pr-body-exclude": self._pr_body_exclude,
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
        document: dict[str, Any] = {
            "ok": True,
            "status": "created" if new else "resumed",
        }
        if resumed_from is not None:
            document["resumed_from"] = resumed_from
        document["unit"] = describe(record, worktree_rows(self.workspace))
        report_first_turn(document, record)  # a first turn that already failed refuses
        return document

    # -- steps ---------------------------------------------------------------------------------

    def _reached(self, step: str) -> None:
        self.record.lifecycle = CREATE_LIFECYCLE_AFTER[step]

    def _working(self, outcome: dict[str, Any]) -> None:
        self.record.error = None

    def _manifest(self, outcome: dict[str, Any]) -> None:
        record = self.record
        ensure_manifest(record)
        record.resources.task_file = True
        outcome["task_file"] = record.task_file

    def _worktree(self, outcome: dict[str, Any]) -> None:
        record = self.record
        cwd = self.workspace.toplevel
        rows = worktree_rows(self.workspace)
        row = rows.get(realpath(record.worktree))
        if row is not None and row.branch != record.branch:
            raise StateError(
                "worktree-branch-differs",
                f"unit {record.unit_id} worktree {record.worktree} has branch {row.branch}, "
                f"not {record.branch}",
            )
        if row is not None and row.locked is not None and "initializing" in row.locked:
            # `git worktree add` was killed half-way; its half-made worktree is ours to redo,
            # once git proves it is (SPEC 2.5).
            Ownership(self.workspace, record, others_of(self.workspace, record)).worktree()
            git.remove_worktree(row.path, force=True, cwd=cwd)
            row = None
        if row is None:
            path = Path(record.worktree)
            if os.path.lexists(path):
                raise StateError(
                    "worktree-exists",
                    f"recorded worktree path exists but is not a linked worktree: {path}",
                    next_step="move that directory away, then repeat the create",
                )
            progress(f"unit create {record.unit_id}: git worktree add {path} ({record.branch})")
            branch_sha = git.resolve_commit(f"refs/heads/{record.branch}", cwd=cwd)
            if branch_sha is not None and branch_sha != record.base_sha:
                raise StateError(
                    "branch-exists",
                    f"recorded worktree is missing but branch {record.branch} exists at "
                    f"{branch_sha}, not at the recorded base {record.base_sha}",
                    next_step="pick another branch name, or inspect that branch by hand",
                )
            # `git fetch` reads every worktree's HEAD, and `worktree add` leaves its new one
            # half-written for a moment: both hold the fetch lock (SPEC 3.3).
            lock = self.registry.fetch_lock(command=command_label(record.unit_id))
            with lock.hold(self.deadline):
                if branch_sha is None:
                    assert record.base_sha is not None
                    git.add_worktree(
                        path, branch=record.branch, start=record.base_sha, new_branch=True, cwd=cwd
                    )
                else:
                    # Made by this unit's earlier, interrupted attempt (the name was reserved).
                    git.add_worktree(
                        path, branch=record.branch, start="", new_branch=False, cwd=cwd
                    )
        record.worktree = realpath(record.worktree)
        record.resources.worktree = True
        record.resources.local_branch = True
        outcome.update(worktree=record.worktree, base_ref=record.base_ref, base_sha=record.base_sha)

    def _pr_body_exclude(self, outcome: dict[str, Any]) -> None:
        exclude = git.exclude_file(cwd=Path(self.record.worktree))
        lock = self.registry.registry_lock(command=command_label(self.record.unit_id))
        with lock.hold(self.deadline):
            try:
                text = exclude.read_text(encoding="utf-8")
                mode = exclude.stat().st_mode & 0o777
            except FileNotFoundError:
                text, mode = "", 0o644
            added = PR_BODY_PATTERN not in text.splitlines()
            if added:
                if text and not text.endswith("\n"):
                    text += "\n"
                write_text_atomic(exclude, text + PR_BODY_PATTERN + "\n", mode=mode)
        outcome.update(path=str(exclude), pattern=PR_BODY_PATTERN, added=added)

    def _added_exclude(self) -> bool:
        """Whether this create's `pr-body-exclude` step added the line (not found it there)."""
        return any(
            entry.get("step") == "pr-body-exclude"
            and entry.get("status") == "done"
            and (entry.get("detail") or {}).get("added") is True
            for entry in self.journal.entries
        )

    def _undo_exclude(self) -> bool:
        """Remove the `/PR_BODY.md` line this create added, unless another recorded unit still
        relies on it (every unit's worktree reads the one shared `info/exclude`)."""
        exclude = git.exclude_file(cwd=self.workspace.toplevel)
        lock = self.registry.registry_lock(command=command_label(self.record.unit_id))
        with lock.hold(self.deadline):
            others = [u for u in self.registry.unit_ids() if u != self.record.unit_id]
            try:
                text = exclude.read_text(encoding="utf-8")
                mode = exclude.stat().st_mode & 0o777
            except FileNotFoundError:
                return False
            lines = text.splitlines(keepends=True)
            kept = [line for line in lines if line.rstrip("\n") != PR_BODY_PATTERN]
            if others or len(kept) == len(lines):
                return False
            write_text_atomic(exclude, "".join(kept), mode=mode)
            return True

    def _setup(self, outcome: dict[str, Any]) -> None:
        record = self.record
        assert record.setup is not None
        timeout = seconds_from_env("UNITMGR_SETUP_TIMEOUT", 1800.0)
        progress(f"unit create {record.unit_id}: setup: {record.setup}")
        try:
            result = run_streamed(
                ["sh", "-c", record.setup],
                cwd=Path(record.worktree),
                timeout_seconds=timeout,
                sink=sys.stderr.buffer,
                on_start=lambda child: self.journal.note_child("setup", child),
            )
        except ChildTimeout as error:
            raise StateError(
                "timeout",
                f"setup timed out after {int(error.seconds)}s",
                detail={"output_tail": error.output_tail[-2000:]},
            ) from None
        outcome.update(exit_code=result.exit_code, seconds=result.seconds)
        if result.exit_code != 0:
            raise StateError(
                "setup-failed",
                f"setup exited {result.exit_code}",
                detail={"output_tail": result.output_tail[-2000:]},
            )

    def _pair_init(self, outcome: dict[str, Any]) -> None:
        assert self.record.staffing is not None
        outcome.update(
            init_pair(self.record, self.journal, "pair-init", self.record.staffing.current)
        )

    def _pair_verify(self, outcome: dict[str, Any]) -> None:
        assert self.record.staffing is not None
        outcome.update(verify_pair(self.record, self.record.staffing.current))

    def _first_task(self, outcome: dict[str, Any]) -> None:
        manifest = Path(self.record.task_file).read_text(encoding="utf-8")
        outcome.update(send_or_adopt(self.record, body=manifest, what="the first task"))
        # The first task carries the whole manifest, addenda included: nothing is pending.
        self.record.pending_notice = None

    def _kill_journaled_child(self, step: str) -> None:
        entry = self.journal.last_started(step)
        child = ProcessIdentity.from_json(((entry or {}).get("detail") or {}).get("child"))
        if child is not None and is_alive(child):
            progress(
                f"unit create {self.record.unit_id}: stopping the earlier {step} pid {child.pid}"
            )
            kill_tree(child, grace_seconds=2.0)

    # -- failure -------------------------------------------------------------------------------

    def _fail(
        self, error: ToolError, *, new: bool, resumed_from: str | None, step: str | None
    ) -> ToolError:
        """The error a failed step ends the create with: a new create rolls back what it made;
        a resumed one, or one that only has to wait, keeps its journal for the repeat."""
        record = self.record
        record_file = str(self.registry.record_path(record.unit_id))
        retryable = isinstance(error, RetryableError)
        if not new or retryable:
            # A resumed create keeps what the journal reached; so does a new one that only has
            # to wait (a busy lock, GitHub rate limits): repeating the command finishes it.
            record.error = error.reason
            self.registry.write(record)
            failure = RetryableError if retryable else StateError
            return failure(
                error.code,
                error.reason,
                detail={
                    "recovery_record": record_file,
                    "resumed_from": resumed_from,
                    "step": step,
                    "cause": error.detail,
                },
                next_step="repeat the same create command"
                + (" later" if retryable else " once the cause is fixed"),
            )
        rollback, archive = self._rollback(error.reason)
        recovered = all(entry["ok"] for entry in rollback)
        reason = error.reason
        if archive and step in PAIR_STEPS:
            reason += f" — the pair's transcripts are archived at {archive}"
        return StateError(
            error.code,
            reason + ("" if recovered else " (rollback incomplete)"),
            detail={
                "step": step,
                "cause": error.detail,
                "rollback": rollback,
                "recovery_record": None if recovered else record_file,
                "archive": str(archive) if archive else None,
            },
            next_step=None
            if recovered
            else f"inspect the record, then: {dismantle_label(record.unit_id)}",
        )

    def _rollback(self, reason: str) -> tuple[list[dict[str, Any]], Path | None]:
        record = self.record
        record.lifecycle = "create-failed"
        record.error = reason
        self.registry.write(record)
        cwd = self.workspace.toplevel
        results: list[dict[str, Any]] = []
        archive: Path | None = None

        @contextmanager
        def attempt(resource: str) -> Iterator[dict[str, Any]]:
            entry: dict[str, Any] = {"resource": resource, "ok": True, "error": None}
            try:
                yield entry
            except Exception as failure:
                entry.update(ok=False, error=str(failure))
            results.append(entry)
            self.registry.append_event(
                {
                    "command": "create",
                    "step": f"rollback:{resource}",
                    "status": "done" if entry["ok"] else "failed",
                    "at": iso_z(),
                    "unit": record.unit_id,
                    "detail": entry,
                }
            )

        def ownership() -> Ownership:
            return Ownership(self.workspace, record, others_of(self.workspace, record))

        if record.resources.pair or (record.pair and record.pair.state_dir):
            with attempt("pair") as entry:
                proven_pair = ownership()
                state_dir = proven_pair.pair_state_dir(proven_pair.worktree())
                if state_dir is not None:
                    try:
                        pair_api.close_state(state_dir)  # a dead bootstrap's marker goes too
                    finally:
                        # Archived even when ending failed: the worktree removal that follows
                        # deletes the pair state with it.
                        archive = archive_pair_state(self.registry, record.unit_id, state_dir)
                        record.archive = str(archive) if archive else None
                        entry["archive"] = record.archive
                record.resources.pair = False
        if self._added_exclude():
            with attempt("pr-body-exclude") as entry:
                entry["removed"] = self._undo_exclude()
        worktree_started = any(e.get("step") == "worktree" for e in self.journal.entries)
        if record.resources.worktree or worktree_started:
            with attempt("worktree") as entry:
                proven_worktree = ownership()
                proven = proven_worktree.worktree()
                # A setup command's background children must not outlive their worktree.
                reaped = proven_worktree.reap(proven)
                if reaped and reaped["processes"]:
                    entry["reaped"] = reaped
                if proven is not None:
                    result = git.remove_worktree(proven.path, force=True, cwd=cwd)
                    if result.returncode != 0 and proven.present:
                        shutil.rmtree(proven.path)  # a proven linked worktree only
                        result = git.remove_worktree(proven.path, force=True, cwd=cwd)
                    if result.returncode != 0:
                        raise RuntimeError(result.stderr.strip() or "git worktree remove failed")
                record.resources.worktree = False
            with attempt("local-branch") as entry:
                deleted = False
                if git.ref_exists(f"refs/heads/{record.branch}", cwd=cwd):
                    ownership().branch()
                    deleted = git.delete_local_branch(record.branch, cwd=cwd)
                entry["deleted"] = deleted
                record.resources.local_branch = False
        if record.resources.task_file or Path(record.task_file).exists():
            with attempt("task-file") as entry:
                remove_file(Path(record.task_file))
                record.resources.task_file = False
        record.rollback = results
        if all(entry["ok"] for entry in results):
            self.registry.delete(record.unit_id)
        else:
            self.registry.write(record)
        return results, archive
