"""Lead detection and the partner's environment (SPEC 4.1 "Environment").

The same ordered list of lead markers detects the lead when `--lead` is absent and is dropped from
every partner's environment, so a partner never believes it is running inside its lead.

A session may carry variables its caller asked every turn's partner to get (`unit` passes a
unit's leased ports, SPEC 3.19): `session_variables` says which of them a turn applies. The
session file is writable by the partner itself, so those variables only ever reach that same
partner; still, none may replace what pair sets itself or steer how a process loads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from registry.environment import child_environment
from registry.lazy_re import lazy

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

LEAD_MARKERS: tuple[tuple[str, str], ...] = (
    ("OPENCODE_CLIENT", "opencode"),
    ("OPENCODE_PID", "opencode"),
    ("OPENCODE_WORKSPACE_ID", "opencode"),
    ("CLAUDECODE", "claude"),
    ("CLAUDE_CODE_ENTRYPOINT", "claude"),
    ("CODEX_SANDBOX", "codex"),
    ("CODEX_THREAD_ID", "codex"),
    ("CURSOR_AGENT", "cursor"),
    ("CURSOR_AGENT_CHAT_ID", "cursor"),
    ("GROK_SESSION_ID", "grok"),
    ("GROK_AGENT", "grok"),
)


def detect_lead(environment: Mapping[str, str] | None = None) -> str | None:
    environment = os.environ if environment is None else environment
    for variable, lead in LEAD_MARKERS:
        if environment.get(variable, "").strip():
            return lead
    return None


def partner_environment(*, codex_home: str | None = None) -> dict[str, str]:
    environment = child_environment()
    for variable, _ in LEAD_MARKERS:
        environment.pop(variable, None)
    if codex_home:
        environment["CODEX_HOME"] = codex_home
    return environment


# What pair sets itself (or drops) in a partner's environment, and what changes how a process
# loads rather than what it is told: never taken from a session.
_OWN_VARIABLES = frozenset(
    {"CODEX_HOME", "UNITMGR_UNIT", "PAIR_TURN_TOKEN", "PATH", "HOME", "IFS", "ENV", "BASH_ENV"}
    | {variable for variable, _ in LEAD_MARKERS}
)
_VARIABLE_NAME = lazy(r"[A-Z][A-Z0-9_]{0,63}")
_LOADER_PREFIXES = ("LD_", "DYLD_", "PYTHON", "NODE_", "GIT_")
MAX_SESSION_VARIABLES = 16


def is_session_variable(name: Any, value: Any) -> bool:
    """A variable a session may set for its partner: an upper-case name that is not pair's own
    nor a loader's, and a string value of at most 4096 characters without NUL."""
    return (
        isinstance(name, str)
        and _VARIABLE_NAME.fullmatch(name) is not None
        and name not in _OWN_VARIABLES
        and not name.startswith(_LOADER_PREFIXES)
        and isinstance(value, str)
        and len(value) <= 4096
        and "\0" not in value
    )


def session_variables(variables: Mapping[str, Any] | None) -> dict[str, str]:
    """The variables of a session's `environment` a turn applies (a hand-edited session's
    others are ignored, never passed on)."""
    if not variables:
        return {}
    kept = {name: value for name, value in variables.items() if is_session_variable(name, value)}
    return dict(list(kept.items())[:MAX_SESSION_VARIABLES])
