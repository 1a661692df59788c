"""The `pair` command line: parse, call one `pair.api` function, print its document.

Each command is a plain function here, registered in `COMMANDS`: pair/entry.py calls it directly
for a plainly spelled command line (SPEC 7: no Typer at start-up), and `whole_app` builds the
Typer app from the same functions for everything else. Nothing here imports typer at module
level: the parameters' annotations are strings until `whole_app` evaluates them.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

from pair import __version__, api
from pair.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Annotated, Any

    import typer

    from pair.cli_options import Effort, Identity, IdleMin, Lead, Model, Repo, TotalMin

# The option types pair/cli_options.py declares, which `whole_app` puts in this namespace.
OPTION_TYPES = ("Repo", "Lead", "Identity", "Effort", "Model", "IdleMin", "TotalMin")
PARTNERS = "One of claude|codex|cursor|opencode|grok|script."

COMMANDS: dict[str, Callable[..., dict[str, object]]] = {}


def command(function: Callable[..., dict[str, object]]) -> Callable[..., dict[str, object]]:
    """Register a `pair` command (its name is the function's)."""
    COMMANDS[function.__name__] = function
    return function


@command
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
    runner: Annotated[
        str | None,
        typer.Option(
            "--runner", help="Where turns run: local (default) or ray.", metavar="local|ray"
        ),
    ] = None,
    node: Annotated[
        str | None,
        typer.Option(
            "--node", help="The Ray node (its unitmgr-node-NAME resource).", metavar="NAME"
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address", help="The cluster: ray://HOST:10001, HOST:6379, auto.", metavar="ADDR"
        ),
    ] = None,
) -> dict[str, object]:
    """Create (or resume) the pair session of this worktree."""
    from pair.runners.choice import RunnerChoice

    chosen = (
        RunnerChoice(kind=runner or "ray", node=node, address=ray_address)
        if runner or node or ray_address
        else None
    )
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
        runner=chosen,
    )


@command
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


@command
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


@command
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


@command
def status(repo: Repo = ".") -> dict[str, object]:
    """Session fields, seq, the in-flight turn and the latest receipt."""
    return api.status(repo)


@command
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


@command
def clear(repo: Repo = ".") -> dict[str, object]:
    """Remove a dead turn's in-flight marker. Refused while any of its processes live."""
    return api.clear(repo)


@command
def end(repo: Repo = ".") -> dict[str, object]:
    """End the session; its files move to ended/. Refused while a turn is in flight."""
    return api.end(repo)


@functools.cache
def whole_app() -> typer.Typer:
    """The Typer app: for `--help`, completion, refusals, and any command line pair/entry.py
    does not parse itself. The commands' annotations name typer and pair/cli_options.py's
    option types; they are evaluated (in this module's namespace) only now."""
    import typing

    import typer

    from pair import cli_options
    from registry.cli_runner import HELP_OPTIONS, add_version_option

    shared = {name: getattr(cli_options, name) for name in OPTION_TYPES}
    globals().update({"typer": typer, "Annotated": typing.Annotated, **shared})
    built = typer.Typer(
        name="pair",
        help="Run and supervise headless executor turns in one worktree.",
        no_args_is_help=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings=HELP_OPTIONS,
    )
    add_version_option(built, __version__)
    for function in COMMANDS.values():
        built.command()(function)
    return built


def __getattr__(name: str) -> Any:
    if name == "app":  # `from pair.cli import app`: the Typer app, built on first use
        return whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """The Typer path (pair/entry.py is the console entry)."""
    from registry.cli_runner import run

    return run(whole_app(), argv, "pair")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
