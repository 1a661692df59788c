"""What a `unit create` asks for (SPEC 3.3, Phase A): its options validated into a `Request`,
the checks that need git but change nothing, the record a reservation writes, and the resume
comparison that refuses a differing immutable field by name.

Nothing here takes a lock or writes: that is unitmgr/lifecycle/create.py. It runs over 400 lines
because every option, its config default and the pasteable create a refusal offers back (all
missing options at once) must agree; the option table and the rendering are the next to move out.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pair import api as pair_api
from pair.identity import identity_home, refuse_same_cli
from pair.partners import adapter_for
from pair.partners.script import first_command_word
from registry.errors import (
    StateError,
    UsageError,
)
from registry.lazy_re import lazy
from registry.light_dataclass import dataclass
from registry.locks import Deadline
from registry.records import Resources, Staffing, StaffingHistory, UnitRecord
from registry.redact import redact
from registry.timeutil import iso_z
from unitmgr import config_trust, git, option_fields, port_leases, validation
from unitmgr.admission import Base
from unitmgr.config import COMMAND_KEYS, ProjectConfig, flag_or_config, port_range
from unitmgr.lifecycle.pairing import runner_choice
from unitmgr.options import CreateOptions
from unitmgr.units import unsigned_fields, untrusted_field
from unitmgr.workspace import Workspace, is_inside, real_target, realpath

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


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
    # Where its turns run (SPEC 4.3): None on this machine, "ray" on a cluster's node `node`.
    runner: str | None
    node: str | None
    allow_overlap: bool
    lock_timeout: float
    dry_run: bool
    # The keys the project config supplied (a flag was not given), for the approvals and the
    # refusals that name where a value came from.
    configured: tuple[str, ...] = ()
    provenance: str = ""  # "partner 'x' from FILE; ..." for the staffing values it gave
    # The create command line as given (flag, value) with the worktree resolved: what a refusal's
    # `next` repeats with the one change that makes progress (`command_with`).
    words: tuple[tuple[str, str], ...] = ()
    repository: str = "."

    def command_with(self, changes: dict[str, str]) -> str:
        """This create as one pasteable command, each flag of `changes` set to its value."""
        return _render(self.words, changes, self.repository)


BRANCH_FIX = "--branch: a name git check-ref-format --branch accepts, not starting with -"
BASE_FIX = "--base: an existing branch's name, e.g. --base main"


def command_label(unit_id: str) -> str:
    return f"unit create --unit {unit_id}"


# -- Phase A: validation ------------------------------------------------------------------------

STDIN = "-"  # `--task-file -`: the task on standard input, bounded like a file (SPEC 3.3, 8)
# What stands for a missing option in the `next` command, where its metavar would not say it.
PLACEHOLDERS = {"--model": "<COMMAND>"}
FLAG_ORDER = tuple(item.metadata["flag"] for item in option_fields.fields(CreateOptions))
BOOLEAN_FLAGS = tuple(
    item.metadata["flag"] for item in option_fields.fields(CreateOptions) if item.default is False
)


def _read_task(
    options: CreateOptions, words: tuple[tuple[str, str], ...], repository: str
) -> str | None:
    """The task from `--task`, `--task-file FILE` or `--task-file -` (standard input), trimmed;
    None when neither is given (a resume needs none)."""
    if options.task is not None and options.task_file is not None:
        keep_file = tuple(word for word in words if word[0] != "--task")
        raise UsageError(
            "task-given-twice",
            "create takes the task once: --task TEXT or --task-file FILE, not both",
            detail={"task_file": options.task_file},
            next_step=_render(keep_file, {}, repository),
        )
    if options.task is not None:
        text, where = options.task, "--task"
        if len(text.encode("utf-8", "surrogateescape")) > validation.MAX_INPUT_FILE_BYTES:
            raise UsageError(
                "input-too-large",
                "--task is over the 1 MiB bound",
                next_step="shorten it: put long material in the repository and refer to it",
            )
    elif options.task_file == STDIN:
        text, where = _read_stdin(), "the task on standard input (--task-file -)"
    elif options.task_file is not None:
        text = validation.read_input_file(
            options.task_file, "--task-file", missing_code="task-file-missing"
        )
        where = f"task file {options.task_file}"
    else:
        return None
    if not text.strip():
        raise UsageError(
            "task-file-empty",
            f"the task is empty: {where}",
            next_step="--task: the task's text (or --task-file: a file that holds it)",
        )
    return text.strip()


def _read_stdin() -> str:
    """Standard input up to EOF, refused past 1 MiB without reading the rest (SPEC 8)."""
    if os.isatty(0):
        print(
            "unit create: reading the task from standard input (end it with Ctrl-D)",
            file=sys.stderr,
        )
    limit, chunks, size = validation.MAX_INPUT_FILE_BYTES, [], 0
    try:
        while chunk := os.read(0, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise UsageError(
                    "input-too-large",
                    "--task-file - (standard input) is over the 1 MiB bound",
                    next_step="shorten it: put long material in the repository and refer to it",
                )
    except OSError as error:  # stdin closed, or not readable
        raise UsageError(
            "task-file-missing", f"cannot read --task-file - (standard input): {error.strerror}"
        ) from None
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(
            "task-file-missing", f"cannot read --task-file - (standard input): {error}"
        ) from None


def _staffing_defaults(
    options: CreateOptions, config: ProjectConfig, partner: str | None
) -> tuple[str | None, str | None]:
    """`--model` and `--effort`, else the config's — which go with the config's partner: with
    another partner on the command line they would name a model of the wrong CLI (or, for the
    script partner, run a model id as a command), so they apply only when the config names no
    partner or the same one."""
    configured = config.value("partner")
    applies = configured is None or configured == partner
    model = options.model if options.model is not None or not applies else config.value("model")
    effort = options.effort if options.effort is not None or not applies else config.value("effort")
    return model, effort


# A `next`'s placeholder pasted unfilled (`--scope '<TEXT>'`) is still missing, never a value.
_PLACEHOLDER = lazy(r"<[A-Z|]+>")


def unset(value: str | None) -> bool:
    """Not given, blank, or a placeholder: `validate` names it among the missing options."""
    return value is None or not value.strip() or _PLACEHOLDER.fullmatch(value) is not None


def _missing(
    options: CreateOptions,
    config: ProjectConfig,
    *,
    resume: bool,
    required: dict[str, str | None],
    staffing: tuple[str | None, str | None],
) -> list[str]:
    """Every option a new unit (or a resume) still lacks, in `--help` order. An effort, or the
    script partner's command, is named only beside another missing option: alone, each keeps
    its own refusal (`effort-required`, `script-needs-model`)."""
    missing = {flag for flag, value in required.items() if unset(value)}
    if options.worktree is None and config.value("worktree_root") is None:
        missing.add("--worktree")
    if options.worktree is not None and unset(options.worktree):
        missing.add("--worktree")
    if not resume and options.task is None and options.task_file is None:
        missing.add("--task")
    if any(_PLACEHOLDER.fullmatch(value or "") for value in (options.task, options.task_file)):
        missing.add("--task")
    partner, (model, effort) = required["--partner"], staffing
    if missing and partner in validation.EFFORT_REQUIRED and not effort:
        missing.add("--effort")
    if missing and partner == "script" and not model:
        missing.add("--model")
    for flag, value in (("--effort", effort), ("--model", model)):
        if value is not None and _PLACEHOLDER.fullmatch(value):
            missing.add(flag)
    return [flag for flag in FLAG_ORDER if flag in missing]


def validate(
    options: CreateOptions, *, resume: bool, config: ProjectConfig, toplevel: Path
) -> Request:
    """The options, each missing default taken from the project config (SPEC 3.3 "Defaults",
    "Revision 3 inputs"); every missing option is named at once."""
    for flag, given in (("--max-active", options.max_active), ("--max-held", options.max_held)):
        if given is not None:
            validation.limit(given, flag)
    lead = flag_or_config(options.lead, config, "lead")
    partner = flag_or_config(options.partner, config, "partner")
    chosen_validation = flag_or_config(options.validation, config, "validation")
    model, effort = _staffing_defaults(options, config, partner)
    words = _words(options)
    required = {
        "--unit": options.unit,
        "--branch": options.branch,
        "--base": options.base,
        "--scope": options.scope,
        "--validation": chosen_validation,
        "--lead": lead,
        "--partner": partner,
        "--reason": options.reason,
    }
    missing = _missing(options, config, resume=resume, required=required, staffing=(model, effort))
    if missing:
        raise _missing_options(missing, words, str(toplevel))
    unit_id = validation.unit_id(options.unit or "")
    assert options.branch and options.base and lead and partner and chosen_validation
    assert options.reason and options.scope
    if options.branch.startswith("-"):
        raise UsageError(
            "invalid-branch", f"invalid branch name: {options.branch!r}", next_step=BRANCH_FIX
        )
    if options.base.startswith("-"):
        raise UsageError(
            "invalid-base", f"invalid base branch name: {options.base!r}", next_step=BASE_FIX
        )
    worktree = _worktree(options, config, toplevel, unit_id)
    configured = _configured(options, config, model=model, effort=effort)
    provenance = _provenance(config, configured)
    with _attributed(provenance):
        validation.staffing(
            lead=lead, partner=partner, model=model, effort=effort, identity=options.identity
        )
    # `--setup ''` turns a configured setup off for this unit.
    setup = flag_or_config(options.setup, config, "setup")
    choice = runner_choice(options.runner, options.node, config)  # refused before any write
    if choice.kind == "ray" and config.source("ray.address") != "default":
        configured += ("ray.address",)  # approved like a command (require_approvals)
    return Request(
        unit_id=unit_id,
        worktree=worktree,
        branch=options.branch,
        base=options.base,
        scope=options.scope,
        validation=chosen_validation,
        lead=lead,
        partner=partner,
        reason=options.reason,
        task=_read_task(options, words, str(toplevel)),
        paths=validation.write_paths(options.paths or config.value("paths")),
        model=None if model in (None, "CLI-default") else model,
        effort=effort,
        identity=options.identity or "default",
        identity_explicit=options.identity is not None,
        issue=validation.issue_number(options.issue),
        setup=setup or None,
        ports=port_leases.count(flag_or_config(options.ports, config, "ports")),
        ports_explicit=options.ports is not None,
        port_range=_port_range(config),
        max_active=int(flag_or_config(options.max_active, config, "max_active")),
        max_held=int(flag_or_config(options.max_held, config, "max_held")),
        runner=None if choice.kind == "local" else choice.kind,
        node=choice.node,
        allow_overlap=options.allow_overlap,
        lock_timeout=validation.lock_timeout(options.lock_timeout),
        dry_run=options.dry_run,
        configured=configured,
        provenance=provenance,
        words=words,
        repository=str(toplevel),
    )


def _configured(
    options: CreateOptions, config: ProjectConfig, *, model: str | None, effort: str | None
) -> tuple[str, ...]:
    """The create defaults the config supplied here (no flag given, and a file sets them)."""
    taken = {
        "lead": options.lead is None,
        "partner": options.partner is None,
        "validation": options.validation is None,
        "model": options.model is None and model is not None,
        "effort": options.effort is None and effort is not None,
        "paths": not options.paths,
        "setup": options.setup is None,
    }
    return tuple(key for key, used in taken.items() if used and config.source(key) != "default")


def _provenance(config: ProjectConfig, configured: tuple[str, ...]) -> str:
    """Which staffing values the config gave, for a refusal's reason ('' when none did)."""
    return "; ".join(
        f"{key} {config.value(key)!r} from {config.file_of(key)}"
        for key in ("lead", "partner", "model", "effort")
        if key in configured
    )


@contextmanager
def _attributed(provenance: str) -> Iterator[None]:
    """A staffing refusal, saying which of its values came from the config: the flag's own
    refusal (an unknown partner from a file is `unknown-partner`, as `--partner` would be)."""
    try:
        yield
    except UsageError as error:
        if provenance:
            error.reason = f"{error.reason} ({provenance})"
            error.args = (error.reason,)
        raise


def require_approvals(config: ProjectConfig, request: Request, *, common_dir: Path) -> None:
    """Refuse (`config-unapproved`) a shell command a config file supplied that the user has not
    approved (SPEC 8): `setup`, `validation` (what `unit verify` runs) and, for the script
    partner, `model` (its command line). A flag is the lead's own and needs no approval."""
    for key in COMMAND_KEYS:
        if key not in request.configured or (key == "model" and request.partner != "script"):
            continue
        config_trust.require_approved(
            config, key, common_dir=common_dir, toplevel=Path(request.repository)
        )


# -- the create command line, for `next` --------------------------------------------------------


def _words(options: CreateOptions) -> tuple[tuple[str, str], ...]:
    """Every option given, in `--help` order, as (flag, value) ('' for a flag without value),
    with a relative `--worktree` resolved as the create resolves it."""
    words: list[tuple[str, str]] = []
    for item in option_fields.fields(CreateOptions):
        flag, value = item.metadata["flag"], getattr(options, item.name)
        if value is None or value is False or (flag == "--lock-timeout" and value == "30"):
            continue
        if flag == "--worktree" and value.strip():
            value = str(_resolved(value))
        for one in value if isinstance(value, list) else [value]:
            words.append((flag, "" if one is True else one))
    return tuple(words)


def _render(words: tuple[tuple[str, str], ...], changes: dict[str, str], repository: str) -> str:
    """`unit create …` with each flag of `changes` set (in place, else appended), one line."""
    changes = dict(changes)
    parts = ["unit", "create"]
    for flag, given in words:
        value = changes.pop(flag, given)
        parts += [flag] if flag in BOOLEAN_FLAGS else [flag, value]
    for flag, value in changes.items():
        parts += [flag, value]
    parts += ["--repo", repository]
    return " ".join(shlex.quote(part) for part in parts)


def _missing_options(
    missing: list[str], words: tuple[tuple[str, str], ...], repository: str
) -> UsageError:
    """One refusal naming every missing option; `next` is the command with a placeholder for
    each (quoted, so the line still pastes), in the order `--help` lists the options."""
    metavars = {
        item.metadata["flag"]: f"<{item.metadata['metavar']}>"
        for item in option_fields.fields(CreateOptions)
    }
    given = [(flag, value) for flag, value in words if flag not in missing]
    placeholders = [(flag, PLACEHOLDERS.get(flag, metavars[flag])) for flag in missing]
    ordered = sorted(given + placeholders, key=lambda word: FLAG_ORDER.index(word[0]))
    alternatives = {
        "--task": " (or --task-file)",
        "--worktree": " (or worktree_root in the config)",
    }
    named = [flag + alternatives.get(flag, "") for flag in missing]
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    return UsageError(
        "missing-option",
        f"create requires {listed}",
        detail={"missing": missing},
        next_step=_render(tuple(ordered), {}, repository),
    )


def _port_range(config: ProjectConfig) -> tuple[int, int]:
    parsed = port_range(config.value("port_range"))
    assert parsed is not None  # load_config refused any other value
    return parsed


def _worktree(options: CreateOptions, config: ProjectConfig, toplevel: Path, unit_id: str) -> Path:
    """`--worktree`, else the path the config's `worktree_root` names (`_missing` refused the
    call with neither); absolute either way (the nesting checks follow in
    validate_against_repository)."""
    if options.worktree is not None:
        return _resolved(options.worktree)
    assert options.branch is not None
    named = config.worktree_for(toplevel=toplevel, unit_id=unit_id, branch=options.branch)
    assert named is not None
    return Path(named)


def _resolved(worktree: str) -> Path:
    """`--worktree` made absolute: a relative path is taken from the current directory, as a
    shell user expects (SPEC 3.3); whether it may be used is validate_against_repository's."""
    return Path(os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(worktree))))


def validate_against_repository(workspace: Workspace, request: Request) -> None:
    """The checks that need git but change nothing: branch format, nesting, script command.
    The two names' checks (and a dry run's worktree listing) run side by side (SPEC 7); their
    answers are taken, and refused, in this order."""
    from registry.threads import Pool

    with Pool(3) as pool:
        branch_checked = pool.submit(git.check_branch_name, request.branch, cwd=workspace.toplevel)
        base_checked = pool.submit(git.check_branch_name, request.base, cwd=workspace.toplevel)
        listed = (
            pool.submit(git.list_worktrees, cwd=workspace.toplevel) if request.dry_run else None
        )
        _check_names(branch_checked.result(), base_checked.result(), request)
        rows = listed.result() if listed is not None else None
    _validate_rows(workspace, request, rows)


def _check_names(branch_ok: bool, base_ok: bool, request: Request) -> None:
    if not branch_ok:
        raise UsageError(
            "invalid-branch",
            f"invalid branch name: {request.branch} — use the repository's convention (for "
            "example feat/<issue>-<slug>)",
            next_step=BRANCH_FIX,
        )
    if not base_ok:
        raise UsageError(
            "invalid-base",
            f"invalid base branch name: {request.base!r} — git check-ref-format --branch "
            "refuses it",
            next_step=BASE_FIX,
        )


def _validate_rows(workspace: Workspace, request: Request, listed: list[Any] | None) -> None:
    target = real_target(request.worktree)
    # A dry run never waits for a lock; a real create lists under the fetch lock, which another
    # create holds while its `git worktree add` writes the admin dir this would read.
    rows = (
        listed
        if listed is not None
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
                next_step=_beside(workspace, request),
            )
    if is_inside(target, realpath(workspace.common_git_dir)):
        raise UsageError(
            "worktree-inside-worktree",
            f"--worktree {request.worktree} is inside the git dir {workspace.common_git_dir}",
            next_step=_beside(workspace, request),
        )
    adapter = adapter_for(request.partner)
    with _attributed(request.provenance):
        adapter.validate_staffing(
            model=request.model, effort=request.effort, identity=request.identity
        )
    home = identity_home(request.partner, request.identity)
    refuse_same_cli(lead=request.lead, partner=request.partner, partner_home=home)
    model = request.model
    if request.partner == "script":
        # A command found on PATH (or a shell builtin) can be checked before anything is made;
        # a relative path can only be checked in the worktree, at pair-init.
        if model and "/" not in first_command_word(model):
            adapter.preflight(model=model, worktree=workspace.toplevel)
    elif request.dry_run:
        # A dry run starts no process but read-only git, so it skips the catalog; the binary
        # is only looked up (PATH, UNITMGR_<PARTNER>_BIN), and missing it refuses as the create.
        adapter.preflight(model=model, worktree=workspace.toplevel)
    else:
        # The binary, and a model the live catalog cannot resolve, refuse before anything is made.
        pair_api.resolve_model(
            partner=request.partner,
            model=model or "CLI-default",
            effort=request.effort,
            identity=request.identity,
        )


def _beside(workspace: Workspace, request: Request) -> str:
    """The create again with its worktree beside the repository: `<repo>.units/<unit>`, the
    layout references/config.md's `worktree_root` example gives."""
    top = workspace.toplevel
    return request.command_with(
        {"--worktree": str(top.parent / f"{top.name}.units" / request.unit_id)}
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
                runner=request.runner,
                node=request.node,
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
                runner=request.runner,
                node=request.node,
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
        ("runner", current.runner_kind, request.runner or "local"),
        ("node", current.node, request.node),
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
