"""Render the `unit` help pages from the Typer app, and store them in unitmgr/help_pages.py.

`unit --help` must start within 5x a bare Python (SPEC 7), and importing Typer alone costs more
than that, so unitmgr/entry.py prints stored pages instead. They are rendered here, by the Typer
app itself, at `WIDTH` columns: `python -m unitmgr.help_text --write` rewrites the stored module,
and tests/test_help.py fails when a stored page differs from what Typer renders now, so a changed
option cannot leave a stale page. This module is never imported at start-up; only the writer and
the tests use it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from unitmgr.help_pages import WIDTH

STORED = Path(__file__).with_name("help_pages.py")

HEADER = '''"""The `unit --help` pages, as the Typer app renders them at WIDTH columns. GENERATED.

Written by `python -m unitmgr.help_text --write` (do not edit by hand); unitmgr/entry.py prints
them without importing Typer, and tests/test_help.py fails when they are stale. Typer caps its
help at 80 columns, so a page is exact on any terminal at least that wide; a narrower one gets
Typer's own rendering.
"""

WIDTH = {width}

PAGES: dict[str, str] = {pages}
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


def command_names() -> list[str]:
    """Every `unit` subcommand, in the order `unit --help` lists them (read from that page, so
    only `unitmgr.cli.main` is assumed, however the app is assembled)."""
    listing = render(["--help"]).split("\nCommands:\n", 1)[1]
    names = [line for line in listing.splitlines() if line.startswith("  ") and line[2] != " "]
    return [line.split()[0] for line in names]


def render(arguments: list[str]) -> str:
    """What `unit <arguments>` prints, through the Typer app, at WIDTH columns."""
    from unitmgr.cli import main

    buffer = io.StringIO()
    with _columns(WIDTH), contextlib.redirect_stdout(buffer):
        code = main(arguments)
    if code != 0:
        raise RuntimeError(f"unit {' '.join(arguments)} exited {code}: {buffer.getvalue()}")
    return buffer.getvalue()


def render_pages() -> dict[str, str]:
    """Every stored page: "" is `unit --help`, a command name is `unit <name> --help`."""
    return {"": render(["--help"])} | {name: render([name, "--help"]) for name in command_names()}


def source(pages: dict[str, str]) -> str:
    """The stored module: each page one string literal per line, so a diff shows what changed
    and the file is as `ruff format` writes it."""
    import json

    entries = []
    for name, text in pages.items():
        lines = "".join(f"        {json.dumps(line)}\n" for line in text.splitlines(keepends=True))
        entries.append(f"    {json.dumps(name)}: (\n{lines}    ),\n")
    return HEADER.format(width=WIDTH, pages="{\n" + "".join(entries) + "}")


def main(argv: list[str]) -> int:
    text = source(render_pages())
    if argv == ["--write"]:
        STORED.write_text(text, encoding="utf-8")
        return 0
    if argv == ["--check"]:
        stale = STORED.read_text(encoding="utf-8") != text
        if stale:
            sys.stderr.write("stale: run python -m unitmgr.help_text --write\n")
        return 1 if stale else 0
    sys.stderr.write("usage: python -m unitmgr.help_text --write | --check\n")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
