"""The JSON envelope and the only writers to stdout and stderr.

Every outcome is exactly one JSON document on stdout (2-space indent, trailing newline);
progress of long steps goes to stderr. Both pass through `registry.redact`.
"""

from __future__ import annotations

import json
import sys

from registry import terminal
from registry.lazy_re import lazy
from registry.redact import redact

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from typing import Any, TextIO


class Rendered:
    """A command result already rendered for people (`--format table`).

    A plain class, not a dataclass: `dataclasses` imports `inspect`, about 10 ms of the fast
    reads' start-up (SPEC 7)."""

    __slots__ = ("exit_code", "styled", "text")

    def __init__(self, text: str, exit_code: int = 0, *, styled: bool = False) -> None:
        self.text = text
        self.exit_code = exit_code
        # True: the text carries its own terminal styling (rich, on a tty) and its data was
        # cleaned before styling (`unit watch --once`); else it is cleaned as it is printed.
        self.styled = styled


# C1 controls (8-bit CSI, OSC, ST) and U+2028/U+2029 pass `ensure_ascii=False` raw; a terminal
# acts on them, so they are written as \\u escapes: still valid JSON, the same values (SPEC 8).
_RAW_IN_JSON = lazy("[\u0080-\u009f\u2028\u2029]")


def escape_raw_controls(text: str) -> str:
    if text.isascii():  # none of them: no pattern to compile (SPEC 7)
        return text
    return _RAW_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def dumps(document: Any) -> str:
    return escape_raw_controls(json.dumps(document, indent=2, ensure_ascii=False)) + "\n"


def emit(document: Any, stream: TextIO | None = None) -> None:
    write_text(dumps(document), stream)


def write_text(text: str, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    stream.write(redact(text))
    stream.flush()


def write_view(rendered: Rendered) -> None:
    """A text view, its control characters shown as visible escapes (SPEC 8)."""
    text = rendered.text if rendered.text.endswith("\n") else rendered.text + "\n"
    write_text(text if rendered.styled else terminal.clean(text))


def progress(message: str) -> None:
    """One line of progress for people, on stderr (control characters made visible)."""
    sys.stderr.write(terminal.clean(redact(message.rstrip("\n"))) + "\n")
    sys.stderr.flush()
