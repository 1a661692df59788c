"""The `unit` command line: the Typer app, assembled from one module per verb.

Each command (unitmgr/commands/) parses, calls one lifecycle or view function and renders.
A command line that names a command imports only that command's module; heavy modules are
imported inside the commands that need them, so `unit --help` and `unit status --all` start
fast (tests/test_architecture.py checks that `github` and `git` stay out of the start-up path);
a plain `status --all` or `list` does not even come here (unitmgr/entry.py).
"""

from __future__ import annotations

import functools
import importlib
import sys

from unitmgr import __version__

TYPE_CHECKING = False  # typing's own flag would import typing (unitmgr/entry.py reads COMMANDS)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    import typer

# The order `unit --help` lists them in, and the module (unitmgr/commands/) of each.
COMMANDS = {
    "create": "create",
    "list": "list_units",
    "status": "status",
    "dismantle": "dismantle",
    "restaff": "restaff",
    "cancel": "cancel",
    "addendum": "addendum",
    "scope": "scope",
    "verify": "verify",
    "wait": "wait",
    "intake": "intake",
    "merge": "merge",
    "watch": "watch",
    "tail": "tail",
    "serve": "serve",
    "config": "config",
    "doctor": "doctor",
}
# SPEC 3.17: CI and review back to the unit (a block of its own: commands are added in parallel).
COMMANDS["feedback"] = "feedback"
# Getting around (SPEC 3.18): old archives and the event log.
COMMANDS.update({"prune": "prune", "log": "log"})

# Getting around (SPEC 3.18).
COMMANDS |= {"path": "path", "shell-init": "shell_init"}


def build(names: Sequence[str]) -> typer.Typer:
    """The Typer app with the commands `names`, each module imported only now."""
    import typer

    from registry.cli_runner import HELP_OPTIONS, add_version_option
    from unitmgr.commands.common import typer_callback

    built = typer.Typer(
        name="unit",
        help="Create, monitor and dismantle units: one worktree, one branch, one executor pair.",
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings=HELP_OPTIONS,
    )
    add_version_option(built, __version__)
    for name in names:
        module = importlib.import_module(f"unitmgr.commands.{COMMANDS[name]}")
        built.command(name)(typer_callback(module.command))
    return built


@functools.cache
def whole_app() -> typer.Typer:
    """Every command: for `unit --help`, an unknown command, and the docs tests."""
    return build(list(COMMANDS))


def app_for(arguments: Sequence[str]) -> typer.Typer:
    """Only the command the command line names (its module and nothing else: importing all
    of them costs more than a bare Python start), else the whole app."""
    first = arguments[0] if arguments else None
    return build([first]) if first in COMMANDS else whole_app()


def __getattr__(name: str) -> Any:
    if name == "app":  # `from unitmgr.cli import app`: the whole app, built on first use
        return whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    from registry.cli_runner import run

    arguments = list(sys.argv[1:] if argv is None else argv)
    return run(app_for(arguments), arguments, "unit")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
