"""The `unit` command line: the Typer app, assembled from one module per verb.

Each command (unitmgr/commands/) parses, calls one lifecycle or view function and renders.
Heavy modules are imported inside the commands that need them, so `unit --help` and
`unit status --all` start fast (tests/test_architecture.py checks that `github` and `git` stay
out of the start-up path); a plain `status --all` or `list` does not even come here
(unitmgr/entry.py).
"""

from __future__ import annotations

import sys

import typer

from registry.cli_runner import run
from unitmgr.commands import (
    addendum,
    cancel,
    create,
    dismantle,
    intake,
    list_units,
    merge,
    restaff,
    scope,
    serve,
    status,
    verify,
    wait,
    watch,
)

app = typer.Typer(
    name="unit",
    help="Create, monitor and dismantle units: one worktree, one branch, one executor pair.",
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

# The order `unit --help` lists them in.
for name, module in (
    ("create", create),
    ("list", list_units),
    ("status", status),
    ("dismantle", dismantle),
    ("restaff", restaff),
    ("cancel", cancel),
    ("addendum", addendum),
    ("scope", scope),
    ("verify", verify),
    ("wait", wait),
    ("intake", intake),
    ("merge", merge),
    ("watch", watch),
    ("serve", serve),
):
    app.command(name)(module.command)


def main(argv: list[str] | None = None) -> int:
    return run(app, argv, "unit")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
