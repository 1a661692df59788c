"""What text views need of the terminal: its width, and text made safe to print on it.

`columns` follows `shutil.get_terminal_size`'s rules (COLUMNS, else the tty on stdout, else 80)
without importing shutil: the fast `unit` paths (help pages, tables) read it.

`clean` is SPEC 8's "Terminal output": every text view (tables, `watch`, `tail`, notifications'
text) passes an executor's words through it before they reach a terminal, so an escape sequence
(OSC 52 clipboard write, a title, a screen clear, a cursor-position report the terminal would
type into the lead's shell) is printed as visible text instead of acting. JSON never goes
through it. It must stay import-free beyond os and sys."""

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


# C0 controls but newline and tab, DEL, and C1 controls (U+0080-U+009F); ESC is among the C0.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
del _CONTROLS[ord("\n")], _CONTROLS[ord("\t")]


def clean(text: str) -> str:
    """`text` with every control character but newline and tab shown as a visible `\\xNN`
    escape: `\\x1b]52;c;...\\x07` is printed as those characters, and does nothing."""
    return text.translate(_CONTROLS)


def clean_all(value: object) -> object:
    """`value` (a JSON document) with `clean` applied to every string in it, keys included: for
    a view that styles the document itself (rich) and so cannot clean its output."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(str(key)): clean_all(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [clean_all(item) for item in value]
    return value
