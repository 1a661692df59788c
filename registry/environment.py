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


# The last environment `child_environment` built, with the raw table (`os.environ._data`) it
# came from: copying `os.environ` decodes every key and value (~0.1 ms, a fifth of what starting
# one git costs Python), and `status --all` starts one per unit. A changed, added or removed
# variable makes the tables differ, so the copy is never stale.
_LAST: dict[str, tuple[dict[bytes, bytes], dict[str, str]]] = {}


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every child gets: never prompts (SPEC 3.0)."""
    table = getattr(os.environ, "_data", None)
    last = _LAST.get("last")
    if last is not None and isinstance(table, dict) and last[0] == table:
        environment = dict(last[1])
    else:
        environment = dict(os.environ)
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["GCM_INTERACTIVE"] = "never"
        environment.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        if isinstance(table, dict):
            _LAST["last"] = (dict(table), dict(environment))
    if extra:
        environment.update(extra)
    return environment
