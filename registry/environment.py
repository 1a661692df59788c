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


_PROGRAMS: dict[tuple[str, str], str] = {}


def program_path(name: str, environment: Mapping[str, str]) -> str:
    """`name`'s absolute path on `environment`'s PATH, looked up once per PATH in this process,
    else `name` itself (the child's own PATH search then decides, and fails as it would). The
    lookup is exec's: the first directory holding an executable file of that name. Starting a
    child by name walks PATH with one failed `execve` per directory before the one that holds
    it — ~0.2 ms of the ~1.3 ms a `git` call costs here, and `status --all` starts one per unit.
    A relative or empty entry (the child's working directory) before the match is left to the
    child's search: its answer depends on where the child starts."""
    search = environment.get("PATH", os.defpath)
    key = (name, search)
    found = _PROGRAMS.get(key)
    if found is None:
        found = name
        for directory in search.split(os.pathsep):
            if not os.path.isabs(directory):
                break
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                found = candidate
                break
        _PROGRAMS[key] = found
    return found
