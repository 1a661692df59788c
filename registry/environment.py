"""The environment every child process gets: one that never prompts (SPEC 3.0).

Apart from registry/processes.py (process identity, group kills, streamed runs), which imports
`dataclasses`: the one `git rev-parse` of the fast reads (`unit list`, `unit status --all`) needs
this and nothing else from there (SPEC 7 start-up). It must stay free of heavy imports.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Mapping


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every child gets: never prompts (SPEC 3.0)."""
    environment = dict(os.environ)
    environment["GIT_TERMINAL_PROMPT"] = "0"
    environment["GCM_INTERACTIVE"] = "never"
    environment.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    if extra:
        environment.update(extra)
    return environment
