"""Lead detection and the partner's environment (SPEC 4.1 "Environment").

The same ordered list of lead markers detects the lead when `--lead` is absent and is dropped from
every partner's environment, so a partner never believes it is running inside its lead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from registry.environment import child_environment

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
