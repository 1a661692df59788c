"""The terminal's width, by `shutil.get_terminal_size`'s rules (COLUMNS, else the tty on
stdout, else 80) without importing shutil: the fast `unit` paths (help pages, tables) read it.
It must stay import-free beyond os and sys."""

from __future__ import annotations

import os
import sys

FALLBACK = 80


def columns() -> int:
    try:
        given = int(os.environ["COLUMNS"])
        if given > 0:
            return given
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return FALLBACK
