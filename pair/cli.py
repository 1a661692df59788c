"""The `pair` command line: parse, call one `pair.api` function, print its document."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from pair import api
from pair.errors import UsageError
from registry.cli_runner import run

app = typer.Typer(
    name="pair",
    help="Run and supervise headless executor turns in one worktree.",
    add_completion=False,
    no_args_is_help=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

Repo = Annotated[str, typer.Option("--repo", help="The worktree (default: current directory).")]


@app.command()
def init(
    partner: Annotated[
        str, typer.Option("--partner", help="claude|codex|cursor|opencode|grok|script")
    ],
    repo: Repo = ".",
    lead: Annotated[str | None, typer.Option("--lead")] = None,
    identity: Annotated[str | None, typer.Option("--identity")] = None,
    model: Annotated[str | None, typer.Option("--model")] = None,
    effort: Annotated[str | None, typer.Option("--effort")] = None,
    role: Annotated[str, typer.Option("--role", help="peer|executor")] = "peer",
    idle_min: Annotated[
        str | None, typer.Option("--idle-min", help="Bootstrap idle budget.")
    ] = None,
    total_min: Annotated[
        str | None, typer.Option("--total-min", help="Bootstrap total budget.")
    ] = None,
) -> dict[str, object]:
    """Create (or resume) the pair session of this worktree."""
    return api.init(
        repo,
        partner=partner,
        lead=lead,
        identity=identity,
        model=model,
        effort=effort,
        role=role,
        idle_min=idle_min,
        total_min=total_min,
    )


@app.command()
def resolve(
    partner: Annotated[str, typer.Option("--partner")],
    model: Annotated[str, typer.Option("--model", help="An id, an alias or latest:<family>.")],
    effort: Annotated[str | None, typer.Option("--effort")] = None,
    identity: Annotated[str | None, typer.Option("--identity")] = None,
) -> dict[str, object]:
    """Resolve a model request for a partner, without a session."""
    return api.resolve_model(partner=partner, model=model, effort=effort, identity=identity)


@app.command()
def send(
    kind: Annotated[str, typer.Option("--kind")],
    body_file: Annotated[str, typer.Option("--body-file")],
    repo: Repo = ".",
    lead: Annotated[str | None, typer.Option("--lead")] = None,
    write: Annotated[bool, typer.Option("--write")] = False,
    read_only: Annotated[bool, typer.Option("--read-only")] = False,
    background: Annotated[bool, typer.Option("--background")] = False,
    idle_min: Annotated[str | None, typer.Option("--idle-min")] = None,
    total_min: Annotated[str | None, typer.Option("--total-min")] = None,
) -> dict[str, object]:
    """Send one turn; print its receipt (or the running record with --background)."""
    if write and read_only:
        raise UsageError(
            "write-and-read-only", "--write and --read-only contradict each other on one turn"
        )
    lease = True if write else False if read_only else None
    return api.send(
        repo,
        kind=kind,
        body_file=body_file,
        lead=lead,
        write=lease,
        background=background,
        idle_min=idle_min,
        total_min=total_min,
    )


@app.command()
def wait(
    repo: Repo = ".",
    seq: Annotated[int | None, typer.Option("--seq")] = None,
    timeout_min: Annotated[str | None, typer.Option("--timeout-min")] = None,
) -> dict[str, object]:
    """Wait for a turn's receipt (default: the latest turn)."""
    return api.wait(repo, seq=seq, timeout_min=timeout_min)


@app.command()
def status(repo: Repo = ".") -> dict[str, object]:
    """Session fields, seq, the in-flight turn and the latest receipt."""
    return api.status(repo)


@app.command()
def cancel(
    repo: Repo = ".",
    seq: Annotated[
        int | None, typer.Option("--seq", help="The turn to cancel (default: the one in flight).")
    ] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why; recorded in the receipt.")
    ] = None,
) -> dict[str, object]:
    """Stop the in-flight turn (its whole process tree); its receipt says cancelled."""
    return api.cancel(repo, seq=seq, reason=reason)


@app.command()
def clear(repo: Repo = ".") -> dict[str, object]:
    """Remove a dead turn's in-flight marker (refuses while any of its processes live)."""
    return api.clear(repo)


@app.command()
def end(repo: Repo = ".") -> dict[str, object]:
    """End the session (refuses while a turn is in flight); its files move to ended/."""
    return api.end(repo)


def main(argv: list[str] | None = None) -> int:
    return run(app, argv, "pair")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
