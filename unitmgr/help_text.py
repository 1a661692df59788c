"""Render the `unit` help pages and command specs from the Typer app, and store them in
unitmgr/help_pages.py (registry/stored_cli.py says why and how).

`python -m unitmgr.help_text --write` rewrites the stored module; tests/test_help.py fails when a
stored page or spec differs from what Typer gives now. Never imported at start-up.
"""

from __future__ import annotations

import sys
from pathlib import Path

from registry import stored_cli

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

STORED = Path(__file__).with_name("help_pages.py")


def _main(arguments: list[str]) -> int:
    from unitmgr.cli import main

    return main(arguments)


def command_names() -> list[str]:
    return stored_cli.command_names(_main)


def render(arguments: list[str]) -> str:
    return stored_cli.render(_main, arguments)


def render_pages() -> dict[str, str]:
    return stored_cli.render_pages(_main)


def render_specs() -> dict[str, dict[str, Any]]:
    from unitmgr.cli import whole_app

    return stored_cli.render_specs(whole_app())


def source(pages: dict[str, str], specs: dict[str, dict[str, Any]] | None = None) -> str:
    return stored_cli.source("unit", "unitmgr", pages, render_specs() if specs is None else specs)


def main(argv: list[str]) -> int:
    return stored_cli.write_or_check(STORED, source(render_pages()), argv, "unitmgr")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
