"""The `pair` command line: parse, call one `pair.api` function, print its document."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from pair import __version__, api
from pair.errors import UsageError
from registry.cli_runner import add_version_option, run

app = typer.Typer(
    name="pair",
    help="Run and supervise headless executor turns in one worktree.",
    no_args_is_help=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
add_version_option(app, __version__)

Repo = Annotated[
    str, typer.Option("--repo", help="The worktree (default: current directory).", metavar="PATH")
]
PARTNERS = "One of claude|codex|cursor|opencode|grok|script."
Lead = Annotated[
    str | None,
    typer.Option(
        "--lead", help="Who drives the pair (default: detected, else lead).", metavar="LEAD"
    ),
]
Identity = Annotated[
    str | None,
    typer.Option("--identity", help="The partner's login (default: default).", metavar="NAME"),
]
Effort = Annotated[
    str | None,
    typer.Option("--effort", help="Reasoning effort (the partner's levels).", metavar="EFFORT"),
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model", help="An id, an alias, CLI-default or latest:<family>.", metavar="MODEL"
    ),
]
IdleMin = Annotated[
    str | None,
    typer.Option(
        "--idle-min",
        help="Kill the turn after this long without output"
        " (default: 45 for a writable task, else 20).",
        metavar="MINUTES",
    ),
]
TotalMin = Annotated[
    str | None,
    typer.Option(
        "--total-min",
        help="Kill the turn after this long in all (default: 120 for a writable task, else 60).",
        metavar="MINUTES",
    ),
]


@app.command()
def init(
    partner: Annotated[
        str, typer.Option("--partner", help="The partner's CLI. " + PARTNERS, metavar="PARTNER")
    ],
    repo: Repo = ".",
    lead: Lead = None,
    identity: Identity = None,
    model: Model = None,
    effort: Effort = None,
    role: Annotated[
        str,
        typer.Option(
            "--role",
            help="executor: turns write by default; peer: they only read.",
            metavar="peer|executor",
        ),
    ] = "peer",
    idle_min: Annotated[
        str | None,
        typer.Option("--idle-min", help="The bootstrap's idle budget.", metavar="MINUTES"),
    ] = None,
    total_min: Annotated[
        str | None,
        typer.Option("--total-min", help="The bootstrap's total budget.", metavar="MINUTES"),
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
    partner: Annotated[
        str, typer.Option("--partner", help="The partner's CLI. " + PARTNERS, metavar="PARTNER")
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model", help="An id, an alias, CLI-default or latest:<family>.", metavar="MODEL"
        ),
    ],
    effort: Effort = None,
    identity: Identity = None,
) -> dict[str, object]:
    """Resolve a model request for a partner, without a session."""
    return api.resolve_model(partner=partner, model=model, effort=effort, identity=identity)


@app.command()
def send(
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="One of task, review, question, ready, accepted, blocked, stalemate, handoff.",
            metavar="KIND",
        ),
    ],
    body_file: Annotated[
        str, typer.Option("--body-file", help="The turn's prompt body, a file.", metavar="FILE")
    ],
    repo: Repo = ".",
    lead: Lead = None,
    write: Annotated[
        bool, typer.Option("--write", help="The turn may write (default: by the role).")
    ] = False,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="The turn may only read (default: by the role).")
    ] = False,
    background: Annotated[
        bool,
        typer.Option("--background", help="Return once the partner started, not its receipt."),
    ] = False,
    idle_min: IdleMin = None,
    total_min: TotalMin = None,
) -> dict[str, object]:
    """Send one turn and print its receipt. With --background: the running record."""
    if write and read_only:
        raise UsageError(
            "write-and-read-only",
            "--write and --read-only contradict each other on one turn",
            next_step="--write or --read-only: one of them",
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
    seq: Annotated[
        int | None,
        typer.Option("--seq", help="The turn to wait for (default: the latest).", metavar="N"),
    ] = None,
    timeout_min: Annotated[
        str | None,
        typer.Option(
            "--timeout-min", help="Give up after this long (wait-timeout).", metavar="MINUTES"
        ),
    ] = None,
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
        int | None,
        typer.Option("--seq", help="The turn to cancel (default: the one in flight).", metavar="N"),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Why; recorded in the receipt.", metavar="TEXT"),
    ] = None,
) -> dict[str, object]:
    """Stop the in-flight turn and its whole process tree. Its receipt says cancelled."""
    return api.cancel(repo, seq=seq, reason=reason)


@app.command()
def clear(repo: Repo = ".") -> dict[str, object]:
    """Remove a dead turn's in-flight marker. Refused while any of its processes live."""
    return api.clear(repo)


@app.command()
def end(repo: Repo = ".") -> dict[str, object]:
    """End the session; its files move to ended/. Refused while a turn is in flight."""
    return api.end(repo)


def main(argv: list[str] | None = None) -> int:
    return run(app, argv, "pair")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
