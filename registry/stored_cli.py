"""Render a program's help pages and command specs from its Typer app, for storing in the package.

`unit` and `pair` must start within 5x a bare Python (SPEC 7), and importing Typer alone costs
about that, so their fast entries (unitmgr/entry.py, pair/entry.py) print stored `--help` pages
and parse plain command lines from stored specs (registry/plain_argv.py) instead. Both are
rendered here, from the Typer app itself, at `WIDTH` columns; each program's `help_text` module
writes them (`python -m unitmgr.help_text --write`, `python -m pair.help_text --write`) and the
tests fail when what is stored differs from what the app gives now, so a changed option cannot
leave a stale page or spec. Never imported at start-up; only the writers and the tests use it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pprint
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

WIDTH = 80

HEADER = '''"""The `{program} --help` pages and command specs, from the Typer app. GENERATED.

Written by `python -m {package}.help_text --write` (do not edit by hand); {package}/entry.py
prints the pages and parses plain command lines by the specs (registry/plain_argv.py) without
importing Typer, and the tests fail when they are stale. Typer caps its help at 80 columns, so a
page is exact on any terminal at least that wide; a narrower one gets Typer's own rendering.
"""

WIDTH = {width}

PAGES: dict[str, str] = {pages}

# fmt: off
SPECS: dict[str, dict[str, object]] = {specs}
# fmt: on
'''


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """The terminal width Typer's formatter sees (it reads COLUMNS first)."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def render(main: Callable[[list[str]], int], arguments: list[str]) -> str:
    """What the program prints for `arguments`, through its Typer app, at WIDTH columns."""
    buffer = io.StringIO()
    with _columns(WIDTH), contextlib.redirect_stdout(buffer):
        code = main(arguments)
    if code != 0:
        raise RuntimeError(f"{' '.join(arguments)} exited {code}: {buffer.getvalue()}")
    return buffer.getvalue()


def command_names(main: Callable[[list[str]], int]) -> list[str]:
    """Every subcommand, in the order `--help` lists them (read from that page, so only `main`
    is assumed, however the app is assembled)."""
    listing = render(main, ["--help"]).split("\nCommands:\n", 1)[1]
    names = [line for line in listing.splitlines() if line.startswith("  ") and line[2] != " "]
    return [line.split()[0] for line in names]


def render_pages(main: Callable[[list[str]], int]) -> dict[str, str]:
    """Every stored page: "" is `--help`, a command name is `<name> --help`."""
    pages = {"": render(main, ["--help"])}
    return pages | {name: render(main, [name, "--help"]) for name in command_names(main)}


def render_specs(app: Any) -> dict[str, dict[str, Any]]:
    """Each subcommand's spec (registry/cli_runner.command_spec), for those it can describe."""
    import typer.main

    from registry.cli_runner import command_spec

    commands = getattr(typer.main.get_command(app), "commands", {})
    found = {name: command_spec(command) for name, command in commands.items()}
    return {name: spec for name, spec in found.items() if spec is not None}


def _quoted(line: str) -> str:
    """`line` as a string literal, quoted as `ruff format` quotes it: double quotes unless single
    ones need fewer escapes."""
    if line.count('"') <= line.count("'"):
        return json.dumps(line)
    inner = json.dumps(line)[1:-1].replace('\\"', '"').replace("'", "\\'")
    return f"'{inner}'"


def source(
    program: str, package: str, pages: dict[str, str], specs: dict[str, dict[str, Any]]
) -> str:
    """The stored module: each page one string literal per line, so a diff shows what changed."""
    entries = []
    for name, text in pages.items():
        lines = "".join(f"        {_quoted(line)}\n" for line in text.splitlines(keepends=True))
        entries.append(f"    {json.dumps(name)}: (\n{lines}    ),\n")
    return HEADER.format(
        program=program,
        package=package,
        width=WIDTH,
        pages="{\n" + "".join(entries) + "}",
        specs=pprint.pformat(specs, width=99, sort_dicts=False),
    )


def write_or_check(stored: Path, text: str, argv: list[str], package: str) -> int:
    """`--write` rewrites `stored`; `--check` exits 1 when it is stale."""
    if argv == ["--write"]:
        stored.write_text(text, encoding="utf-8")
        return 0
    if argv == ["--check"]:
        stale = stored.read_text(encoding="utf-8") != text
        if stale:
            sys.stderr.write(f"stale: run python -m {package}.help_text --write\n")
        return 1 if stale else 0
    sys.stderr.write(f"usage: python -m {package}.help_text --write | --check\n")
    return 2
