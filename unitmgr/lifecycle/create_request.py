"""What a `unit create` asks for (SPEC 3.3, Phase A): its options validated into a `Request`,
the checks that need git but change nothing, the record a reservation writes, and the resume
comparison that refuses a differing immutable field by name.

Nothing here takes a lock or writes: that is unitmgr/lifecycle/create.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pair import api as pair_api
from pair.identity import identity_home, refuse_same_cli
from pair.partners import adapter_for
from pair.partners.script import first_command_word
from registry.errors import (
    Rewrite,
    StateError,
    UsageError,
)
from registry.locks import Deadline
from registry.records import Resources, Staffing, StaffingHistory, UnitRecord
from registry.redact import redact
from registry.timeutil import iso_z
from unitmgr import git, port_leases, validation
from unitmgr.admission import Base
from unitmgr.config import ProjectConfig, flag_or_config, port_range
from unitmgr.options import CreateOptions
from unitmgr.units import unsigned_fields, untrusted_field
from unitmgr.workspace import Workspace, is_inside, real_target, realpath


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
    ports: int  # how many to lease (SPEC 3.19)
    ports_explicit: bool  # `--ports` given: a resume must agree with the recorded count
    port_range: tuple[int, int]
    max_active: int
    max_held: int
    allow_overlap: bool
    lock_timeout: float
    dry_run: bool


BRANCH_FIX = "--branch: a name git check-ref-format --branch accepts, not starting with -"
BASE_FIX = "--base: an existing branch's name, e.g. --base main"


def beside(toplevel: Path, worktree: Path) -> Rewrite:
    """The create again with its worktree beside the repository, under the same name."""
    return Rewrite(set_options={"--worktree": str(toplevel.parent / Path(worktree).name)})


def command_label(unit_id: str) -> str:
    return f"unit create --unit {unit_id}"


# -- Phase A: validation ------------------------------------------------------------------------


def _read_task(task_file: str) -> str:
    text = validation.read_input_file(task_file, "--task-file", missing_code="task-file-missing")
    if not text.strip():
        raise UsageError(
            "task-file-empty",
            f"task file is empty: {task_file}",
            next_step=f"--task-file: {task_file} holds no text — write the task into it",
        )
    return text.strip()


def validate(
    options: CreateOptions, *, resume: bool, config: ProjectConfig, toplevel: Path
) -> Request:
    """The options, each missing default taken from the project config (SPEC 3.3 "Defaults")."""
    unit_id = validation.unit_id(options.unit)
    for flag, given in (("--max-active", options.max_active), ("--max-held", options.max_held)):
        if given is not None:
            validation.limit(given, flag)
    lead = flag_or_config(options.lead, config, "lead")
    for option, value in (
        ("--branch", options.branch),
        ("--base", options.base),
        ("--scope", options.scope),
        ("--validation", options.validation),
        ("--lead", lead),
        ("--partner", options.partner),
        ("--reason", options.reason),
    ):
        validation.required(value, option)
    if not resume:
        validation.required(options.task_file, "--task-file")
    assert options.branch and options.base and lead
    assert options.partner and options.reason and options.scope and options.validation
    if options.branch.startswith("-"):
        raise UsageError(
            "invalid-branch", f"invalid branch name: {options.branch!r}", next_step=BRANCH_FIX
        )
    if options.base.startswith("-"):
        raise UsageError(
            "invalid-base", f"invalid base branch name: {options.base!r}", next_step=BASE_FIX
        )
    worktree = _worktree(options, config, toplevel)
    validation.staffing(
        lead=lead,
        partner=options.partner,
        model=options.model,
        effort=options.effort,
        identity=options.identity,
    )
    model = None if options.model in (None, "CLI-default") else options.model
    # `--setup ''` turns a configured setup off for this unit.
    setup = flag_or_config(options.setup, config, "setup")
    return Request(
        unit_id=unit_id,
        worktree=worktree,
        branch=options.branch,
        base=options.base,
        scope=options.scope,
        validation=options.validation,
        lead=lead,
        partner=options.partner,
        reason=options.reason,
        task=_read_task(options.task_file) if options.task_file else None,
        paths=validation.write_paths(options.paths),
        model=model,
        effort=options.effort,
        identity=options.identity or "default",
        identity_explicit=options.identity is not None,
        issue=validation.issue_number(options.issue),
        setup=setup or None,
        ports=port_leases.count(flag_or_config(options.ports, config, "ports")),
        ports_explicit=options.ports is not None,
        port_range=_port_range(config),
        max_active=int(flag_or_config(options.max_active, config, "max_active")),
        max_held=int(flag_or_config(options.max_held, config, "max_held")),
        allow_overlap=options.allow_overlap,
        lock_timeout=validation.lock_timeout(options.lock_timeout),
        dry_run=options.dry_run,
    )


def _port_range(config: ProjectConfig) -> tuple[int, int]:
    parsed = port_range(config.value("port_range"))
    assert parsed is not None  # load_config refused any other value
    return parsed


def _worktree(options: CreateOptions, config: ProjectConfig, toplevel: Path) -> Path:
    """`--worktree`, else the path the config's `worktree_root` names; absolute either way (the
    nesting checks follow in validate_against_repository)."""
    if options.worktree is not None:
        validation.required(options.worktree, "--worktree")
        return validation.absolute_path(options.worktree, "--worktree")
    assert options.branch is not None
    named = config.worktree_for(toplevel=toplevel, unit_id=options.unit, branch=options.branch)
    if named is None:
        raise UsageError(
            "missing-option",
            "create requires --worktree (or worktree_root in the project config)",
            next_step="pass --worktree /absolute/path, or set worktree_root in .unitmgr.toml",
        )
    return validation.absolute_path(named, "worktree_root")


def validate_against_repository(workspace: Workspace, request: Request) -> None:
    """The checks that need git but change nothing: branch format, nesting, script command."""
    if not git.check_branch_name(request.branch, cwd=workspace.toplevel):
        raise UsageError(
            "invalid-branch",
            f"invalid branch name: {request.branch} — use the repository's convention (for "
            "example feat/<issue>-<slug>)",
            next_step=BRANCH_FIX,
        )
    if not git.check_branch_name(request.base, cwd=workspace.toplevel):
        raise UsageError(
            "invalid-base",
            f"invalid base branch name: {request.base!r} — git check-ref-format --branch "
            "refuses it",
            next_step=BASE_FIX,
        )
    target = real_target(request.worktree)
    # A dry run never waits for a lock; a real create lists under the fetch lock, which another
    # create holds while its `git worktree add` writes the admin dir this would read.
    rows = (
        git.list_worktrees(cwd=workspace.toplevel)
        if request.dry_run
        else workspace.settled_worktrees(
            command=f"unit create --unit {request.unit_id}",
            deadline=Deadline(request.lock_timeout),
            write_nothing=True,
        )
    )
    for row in rows:
        # An equal path is a conflict with that unit (exit 1, under the registry lock), not a
        # malformed call.
        if target != realpath(row.path) and is_inside(target, realpath(row.path)):
            raise UsageError(
                "worktree-inside-worktree",
                f"--worktree {request.worktree} is inside the worktree {row.path} — put unit "
                "worktrees beside the repository, not in it",
                next_command=beside(workspace.toplevel, request.worktree),
            )
    if is_inside(target, realpath(workspace.common_git_dir)):
        raise UsageError(
            "worktree-inside-worktree",
            f"--worktree {request.worktree} is inside the git dir {workspace.common_git_dir}",
            next_command=beside(workspace.toplevel, request.worktree),
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


def new_record(
    workspace: Workspace, request: Request, base: Base, *, ports: list[int]
) -> UnitRecord:
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
        ports=ports,
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


def adopt_unsigned(workspace: Workspace, record: UnitRecord, request: Request) -> list[str]:
    """The signed fields of `record` without the lead's MAC (SPEC 8), replaced by what the lead
    supplies now and vouched for (the next write signs them); the names replaced.

    An executor can rewrite the record, so a recorded `setup`, `validation`, staffing (a script
    partner's model is its command) or `task` counts only with the lead's MAC; without one the
    resume compares nothing against it and uses the request's value. A `task` must then be given
    again (`--task-file`), else `record-untrusted`."""
    from registry import signing
    from unitmgr.views.observe import RESUME_SIGNED, create_command

    unsigned = unsigned_fields(workspace, record, *RESUME_SIGNED)
    if "task" in unsigned and request.task is None:
        raise untrusted_field(record, "task", next_step=create_command(workspace, record))
    assert record.staffing is not None
    for field in unsigned:
        if field == "validation":
            record.validation = request.validation
        elif field == "setup":
            record.setup = request.setup
        elif field == "task":
            assert request.task is not None
            record.task = request.task
        elif field == "staffing.current":
            record.staffing.current = Staffing(
                partner=request.partner,
                identity=request.identity,
                model=request.model,
                effort=request.effort,
                reason=request.reason,
                selected_at=iso_z(),
            )
    signing.vouch(record, *unsigned)
    return unsigned


def compare_for_resume(workspace: Workspace, record: UnitRecord, request: Request) -> None:
    """Refuse at the first immutable field that differs (SPEC 3.3 "Resume"); a signed field
    without the lead's MAC is first replaced by the request's (`adopt_unsigned`)."""
    from unitmgr.views.observe import create_command

    adopt_unsigned(workspace, record, request)
    assert record.staffing is not None
    current = record.staffing.current
    comparisons: list[tuple[str, Any, Any]] = [
        ("identity", current.identity, request.identity),
        ("issue", record.issue, request.issue),
        ("worktree", realpath(record.worktree), real_target(request.worktree)),
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
    if request.ports_explicit:  # the recorded ports are kept; a different count is refused
        comparisons.append(("ports", len(record.ports), request.ports))
    for name, recorded, requested in comparisons:
        # The record was written redacted (SPEC 8): compare what each side looks like there.
        if _redacted(recorded) != _redacted(requested):
            raise StateError(
                "cannot-resume",
                f"unit {record.unit_id} cannot resume: {name} differs",
                detail={"field": name, "recorded": recorded, "requested": requested},
                next_step=create_command(workspace, record),
            )


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    return value
