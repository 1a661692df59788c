"""The Typer declaration of the options several `pair` commands share.

pair/cli.py's commands annotate their parameters with these names (and with inline
`Annotated[..., typer.Option(...)]`), which only the Typer app evaluates (`pair.cli.whole_app`):
importing typer costs more than SPEC 7 allows a whole `pair` command, so pair/entry.py runs a
plain command line without it. Imported only when the Typer app is built.
"""

from __future__ import annotations

from typing import Annotated

import typer

Repo = Annotated[
    str, typer.Option("--repo", help="The worktree (default: current directory).", metavar="PATH")
]
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
