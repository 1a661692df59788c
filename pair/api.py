"""pair's library API (SPEC 4.0): `init`, `send`, `wait`, `status`, `read_status`, `cancel`,
`clear`, `end`, `resolve_model`, and where a pair's files are.

A façade: each command lives in its own module under `pair/commands/`; this module only
re-exports them, so `unit` and tests call `pair.api.<name>` whatever the layout. Each command
returns the dict the CLI prints and raises `ToolError` subclasses carrying `code` and `reason`.
`unit` calls these in-process; the only processes pair ever starts are the detached supervisor
and the partner it runs. Nothing is defined here.
"""

from __future__ import annotations

from pair.commands.cancel import cancel, cancel_state
from pair.commands.clear import clear, clear_state
from pair.commands.end import close_state, end, end_state
from pair.commands.init import init
from pair.commands.resolve import resolve_model
from pair.commands.send import send
from pair.commands.shared import parse_minutes, paths_at, paths_for
from pair.commands.status import read_status, status
from pair.commands.wait import ended_receipt, wait
from pair.paths import PairPaths, is_log, is_receipt, state_dir_for
from pair.transcripts import TurnFiles, render_line, turn_files

__all__ = [
    "PairPaths",
    "TurnFiles",
    "cancel",
    "cancel_state",
    "clear",
    "clear_state",
    "close_state",
    "end",
    "end_state",
    "ended_receipt",
    "init",
    "is_log",
    "is_receipt",
    "parse_minutes",
    "paths_at",
    "paths_for",
    "read_status",
    "render_line",
    "resolve_model",
    "send",
    "state_dir_for",
    "status",
    "turn_files",
    "wait",
]
