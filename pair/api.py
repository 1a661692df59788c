"""pair's library API (SPEC 4.0): `init`, `send`, `wait`, `status`, `read_status`, `cancel`,
`clear`, `end`, `resolve_model`, and where a pair's files are.

A façade: each command lives in its own module under `pair/commands/`; this module only
re-exports them, so `unit` and tests call `pair.api.<name>` whatever the layout. A command's
module is imported when its name is first used (the type checker sees plain imports). Each
command returns the dict the CLI prints and raises `ToolError` subclasses carrying `code` and
`reason`. `unit` calls these in-process; the only processes pair ever starts are the detached
supervisor and the partner it runs. Nothing is defined here but that lookup.
"""

from __future__ import annotations

import importlib

from pair.paths import PairPaths, is_log, is_receipt, state_dir_for

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from pair.commands.cancel import cancel, cancel_state
    from pair.commands.clear import clear, clear_state
    from pair.commands.end import close_state, end, end_state
    from pair.commands.init import init
    from pair.commands.resolve import resolve_model
    from pair.commands.send import send
    from pair.commands.shared import parse_minutes, paths_at, paths_for
    from pair.commands.status import never_started, read_status, status
    from pair.commands.wait import ended_receipt, wait
    from pair.proof import turn_proof
    from pair.runners import check_choice
    from pair.runners.choice import RunnerChoice
    from pair.state import read_receipt
    from pair.transcripts import TurnFiles, render_line, turn_files

# Where each command lives: a caller pays only for the modules of the commands it uses
# (`unit status --all` reads status and imports no runner; `pair send` loads no `init`).
_MODULE_OF = {
    **dict.fromkeys(("cancel", "cancel_state"), "cancel"),
    **dict.fromkeys(("clear", "clear_state"), "clear"),
    **dict.fromkeys(("close_state", "end", "end_state"), "end"),
    "init": "init",
    "resolve_model": "resolve",
    "send": "send",
    **dict.fromkeys(("parse_minutes", "paths_at", "paths_for"), "shared"),
    **dict.fromkeys(("never_started", "read_status", "status"), "status"),
    **dict.fromkeys(("ended_receipt", "wait"), "wait"),
    "read_receipt": "pair.state",  # a receipt file, read as every command reads it
    "turn_proof": "pair.proof",  # what proves a bootstrap partner a unit journaled (SPEC 8)
    # where a pair's turns run (SPEC 4.3): the choice `init` signs, and its refusals
    "RunnerChoice": "pair.runners.choice",
    "check_choice": "pair.runners",
    # Transcript rendering: `status --all` only stats transcripts, so it never loads these.
    **dict.fromkeys(("TurnFiles", "render_line", "turn_files"), "pair.transcripts"),
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    full = module if "." in module else f"pair.commands.{module}"
    value = getattr(importlib.import_module(full), name)
    globals()[name] = value  # once: the next lookup is a plain attribute
    return value


__all__ = [
    "PairPaths",
    "RunnerChoice",
    "TurnFiles",
    "cancel",
    "cancel_state",
    "check_choice",
    "clear",
    "clear_state",
    "close_state",
    "end",
    "end_state",
    "ended_receipt",
    "init",
    "is_log",
    "is_receipt",
    "never_started",
    "parse_minutes",
    "paths_at",
    "paths_for",
    "read_receipt",
    "read_status",
    "render_line",
    "resolve_model",
    "send",
    "state_dir_for",
    "status",
    "turn_files",
    "turn_proof",
    "wait",
]
