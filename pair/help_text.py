"""Render the `pair` help pages and command specs from the Typer app, and store them in
pair/help_pages.py (registry/stored_cli.py says why and how).

`python -m pair.help_text --write` rewrites the stored module; tests/test_help.py fails when a
stored page or spec differs from what Typer gives now. Never imported at start-up.
"""

from __future__ import annotations

import sys
from pathlib import Path

from registry import stored_cli

STORED = Path(__file__).with_name("help_pages.py")


def _main(arguments: list[str]) -> int:
    from pair.cli import main

    return main(arguments)


def source() -> str:
    from pair.cli import whole_app

    pages = stored_cli.render_pages(_main)
    return stored_cli.source("pair", "pair", pages, stored_cli.render_specs(whole_app()))


def main(argv: list[str]) -> int:
    return stored_cli.write_or_check(STORED, source(), argv, "pair")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
