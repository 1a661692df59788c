"""The `unit` command line: each command parses, calls one lifecycle function and renders.

Heavy modules are imported inside the commands that need them, so `unit --help` and
`unit status --all` start fast (tests/test_architecture.py checks that `github` and `git` stay
out of the start-up path).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from registry.cli_runner import run
from registry.errors import UsageError
from registry.output import Rendered
from unitmgr import quick_reads
from unitmgr.quick_reads import lock_free as _lock_free
from unitmgr.quick_reads import output_format as _format

app = typer.Typer(
    name="unit",
    help="Create, monitor and dismantle units: one worktree, one branch, one executor pair.",
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

Repo = Annotated[str, typer.Option("--repo", help="The repository (default: current directory).")]
LockTimeout = Annotated[
    str, typer.Option("--lock-timeout", help="Seconds to wait for locks (0 = do not wait).")
]
Format = Annotated[str, typer.Option("--format", help="json (default) or table.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Check and plan; change nothing.")]


@app.command()
def create(
    unit: Annotated[str, typer.Option("--unit", help="Unit id.")],
    worktree: Annotated[str | None, typer.Option("--worktree", help="Absolute path.")] = None,
    branch: Annotated[str | None, typer.Option("--branch")] = None,
    base: Annotated[str | None, typer.Option("--base")] = None,
    scope: Annotated[str | None, typer.Option("--scope", help="Free-text scope summary.")] = None,
    validation: Annotated[
        str | None, typer.Option("--validation", help="The command that proves the work.")
    ] = None,
    lead: Annotated[str | None, typer.Option("--lead")] = None,
    partner: Annotated[str | None, typer.Option("--partner")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why this staffing.")] = None,
    task_file: Annotated[str | None, typer.Option("--task-file")] = None,
    paths: Annotated[
        list[str] | None, typer.Option("--paths", help="Write-scope glob (repeatable).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model")] = None,
    effort: Annotated[str | None, typer.Option("--effort")] = None,
    identity: Annotated[str | None, typer.Option("--identity")] = None,
    issue: Annotated[str | None, typer.Option("--issue")] = None,
    setup: Annotated[
        str | None, typer.Option("--setup", help="Shell command run in the worktree.")
    ] = None,
    max_active: Annotated[str, typer.Option("--max-active")] = "2",
    max_held: Annotated[str, typer.Option("--max-held")] = "2",
    allow_overlap: Annotated[bool, typer.Option("--allow-overlap")] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    dry_run: DryRun = False,
) -> dict[str, Any]:
    """Create a unit (or resume an interrupted create)."""
    from unitmgr.lifecycle import create as lifecycle

    options = lifecycle.CreateOptions(
        unit=unit,
        worktree=worktree,
        branch=branch,
        base=base,
        scope=scope,
        validation=validation,
        lead=lead,
        partner=partner,
        reason=reason,
        task_file=task_file,
        paths=list(paths or []),
        model=model,
        effort=effort,
        identity=identity,
        issue=issue,
        setup=setup,
        max_active=max_active,
        max_held=max_held,
        allow_overlap=allow_overlap,
        lock_timeout=lock_timeout,
        dry_run=dry_run,
    )
    return lifecycle.run(repo, options)


@app.command("list")
def list_command(
    prs: Annotated[bool, typer.Option("--prs", help="Also read each branch's PRs.")] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    output_format: Format = "json",
) -> dict[str, Any] | Rendered:
    """Every unit with what is observed and the command that recovers it."""
    return quick_reads.list_units(
        prs=prs, repo=repo, lock_timeout=lock_timeout, format_name=output_format
    )


@app.command()
def status(
    unit: Annotated[str | None, typer.Option("--unit")] = None,
    all_units: Annotated[
        bool, typer.Option("--all", help="Every unit, lock-free, offline.")
    ] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    output_format: Format = "json",
) -> dict[str, Any] | Rendered:
    """One unit (--unit ID) or a summary of every unit (--all)."""
    if all_units and not unit:
        return quick_reads.status_all(
            repo=repo, lock_timeout=lock_timeout, format_name=output_format
        )
    _lock_free(lock_timeout)
    fmt = _format(output_format)
    if bool(unit) == all_units:
        raise UsageError("usage", "status needs exactly one of --unit ID or --all")
    from unitmgr.views import table
    from unitmgr.views.status import status_unit

    assert unit is not None
    document = status_unit(repo, unit)
    return Rendered(table.status_unit(document)) if fmt == "table" else document


@app.command()
def dismantle(
    unit: Annotated[str, typer.Option("--unit")],
    force: Annotated[
        str | None, typer.Option("--force", help="Repeat the unit id to abandon unmerged work.")
    ] = None,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    dry_run: DryRun = False,
) -> dict[str, Any]:
    """Take a unit apart: pair, processes, worktree, branches, manifest, record."""
    from unitmgr.lifecycle import dismantle as lifecycle

    return lifecycle.run(
        repo,
        lifecycle.DismantleOptions(
            unit=unit, force=force, lock_timeout=lock_timeout, dry_run=dry_run
        ),
    )


@app.command()
def restaff(
    unit: Annotated[str, typer.Option("--unit")],
    lead: Annotated[
        str | None, typer.Option("--lead", help="Must equal the recorded lead.")
    ] = None,
    partner: Annotated[str | None, typer.Option("--partner")] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why this staffing.")] = None,
    model: Annotated[str | None, typer.Option("--model")] = None,
    effort: Annotated[str | None, typer.Option("--effort")] = None,
    identity: Annotated[str | None, typer.Option("--identity")] = None,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    dry_run: DryRun = False,
) -> dict[str, Any]:
    """Swap a unit's executor in place, handing over a checkpoint of its work."""
    from unitmgr.lifecycle import restaff as lifecycle

    return lifecycle.run(
        repo,
        lifecycle.RestaffOptions(
            unit=unit,
            lead=lead,
            partner=partner,
            reason=reason,
            model=model,
            effort=effort,
            identity=identity,
            lock_timeout=lock_timeout,
            dry_run=dry_run,
        ),
    )


@app.command()
def cancel(
    unit: Annotated[str, typer.Option("--unit")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why; recorded in the receipt and the event.")
    ] = None,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    dry_run: DryRun = False,
) -> dict[str, Any]:
    """Stop the unit's in-flight turn (its whole process tree); its receipt says cancelled."""
    from unitmgr.lifecycle import cancel as lifecycle

    return lifecycle.run(
        repo,
        lifecycle.CancelOptions(
            unit=unit, reason=reason, lock_timeout=lock_timeout, dry_run=dry_run
        ),
    )


@app.command()
def addendum(
    unit: Annotated[str, typer.Option("--unit")],
    text: Annotated[str | None, typer.Option("--text", help="The addendum text.")] = None,
    file: Annotated[str | None, typer.Option("--file", help="A file holding the text.")] = None,
    queue: Annotated[
        bool, typer.Option("--queue", help="Append now; notify once no turn is in flight.")
    ] = False,
    restore_manifest: Annotated[
        bool,
        typer.Option("--restore-manifest", help="Rewrite a lost manifest from the record."),
    ] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    dry_run: DryRun = False,
) -> dict[str, Any]:
    """Append to a unit's manifest and tell its executor to re-read it."""
    from unitmgr.lifecycle import addendum as lifecycle

    return lifecycle.run(
        repo,
        lifecycle.AddendumOptions(
            unit=unit,
            text=text,
            file=file,
            queue=queue,
            restore_manifest=restore_manifest,
            lock_timeout=lock_timeout,
            dry_run=dry_run,
        ),
    )


@app.command()
def scope(
    unit: Annotated[str, typer.Option("--unit")],
    approve: Annotated[bool, typer.Option("--approve", help="Record the scope approval.")] = False,
    allow_outside: Annotated[
        bool, typer.Option("--allow-outside", help="Approve files outside --paths.")
    ] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    dry_run: DryRun = False,
) -> dict[str, Any]:
    """What a unit changed against its base, what falls outside its --paths, who overlaps."""
    from unitmgr.lifecycle import scope_check

    return scope_check.run(
        repo,
        scope_check.ScopeOptions(
            unit=unit,
            approve=approve,
            allow_outside=allow_outside,
            lock_timeout=lock_timeout,
            dry_run=dry_run,
        ),
    )


@app.command()
def verify(
    unit: Annotated[str, typer.Option("--unit")],
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    dry_run: DryRun = False,
) -> dict[str, Any]:
    """Run the unit's recorded --validation on its HEAD and record the result."""
    from unitmgr.lifecycle import verify as lifecycle

    return lifecycle.run(
        repo, lifecycle.VerifyOptions(unit=unit, lock_timeout=lock_timeout, dry_run=dry_run)
    )


@app.command()
def wait(
    unit: Annotated[
        list[str] | None, typer.Option("--unit", help="A unit to wait for (repeatable).")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="ISO time; default: now (use observed_at).")
    ] = None,
    timeout_min: Annotated[str, typer.Option("--timeout-min")] = "30",
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
) -> dict[str, Any]:
    """Block until a unit gets a new receipt or changes lifecycle (no polling of git)."""
    _lock_free(lock_timeout)
    from unitmgr.views import wait as waiting

    return waiting.run(
        repo, waiting.WaitOptions(units=list(unit or []), since=since, timeout_min=timeout_min)
    )


@app.command()
def intake(
    label: Annotated[str | None, typer.Option("--label", help="The ready-issue label.")] = None,
    milestone: Annotated[
        str | None, typer.Option("--milestone", help="A milestone title or number.")
    ] = None,
    max_active: Annotated[str, typer.Option("--max-active")] = "2",
    max_held: Annotated[str, typer.Option("--max-held")] = "2",
    limit: Annotated[str, typer.Option("--limit")] = "30",
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    output_format: Format = "json",
) -> dict[str, Any] | Rendered:
    """Free slots and the ready issues (with their dependencies) that may start."""
    _lock_free(lock_timeout)
    from unitmgr.views import intake as reading
    from unitmgr.views import table

    fmt = _format(output_format)
    document = reading.run(
        repo,
        reading.IntakeOptions(
            label=label, milestone=milestone, max_active=max_active, max_held=max_held, limit=limit
        ),
    )
    return Rendered(table.intake(document)) if fmt == "table" else document


@app.command()
def merge(
    unit: Annotated[str, typer.Option("--unit")],
    head: Annotated[str | None, typer.Option("--head", help="The exact PR head SHA.")] = None,
    method: Annotated[str, typer.Option("--method", help="merge|squash|rebase")] = "merge",
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    dry_run: DryRun = False,
) -> dict[str, Any]:
    """Merge the unit's PR at --head, only when every gate of the merge hold passes."""
    from unitmgr.lifecycle import merge as delivery

    return delivery.run(
        repo,
        delivery.MergeOptions(
            unit=unit, head=head, method=method, lock_timeout=lock_timeout, dry_run=dry_run
        ),
    )


@app.command()
def watch(
    interval: Annotated[float, typer.Option("--interval", help="Seconds between redraws.")] = 3.0,
    once: Annotated[bool, typer.Option("--once", help="Draw one frame and exit.")] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
) -> Rendered:
    """A live view of every unit for a person; what needs attention comes first (Ctrl-C ends)."""
    _lock_free(lock_timeout)
    from unitmgr.views import watch as view

    return view.run(repo, interval=interval, once=once)


def main(argv: list[str] | None = None) -> int:
    return run(app, argv, "unit")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
