"""The environment every child process gets: one that never prompts (SPEC 3.0).

Apart from registry/processes.py (process identity, group kills, streamed runs), which imports
`dataclasses`: the one `git rev-parse` of the fast reads (`unit list`, `unit status --all`) needs
this and nothing else from there (SPEC 7 start-up). It must stay free of heavy imports.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TypeVar

    _T = TypeVar("_T")


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


class _Found:
    """One lookup's answer: the path found (or the name), each directory searched up to it with
    its mtime, and when those were last looked at (monotonic)."""

    __slots__ = ("checked", "path", "searched")

    def __init__(self, path: str, searched: tuple[tuple[str, int], ...], checked: float) -> None:
        self.path, self.searched, self.checked = path, searched, checked


_PROGRAMS: dict[tuple[str, str], _Found] = {}  # by (name, PATH)
RECENT_NS = 2_000_000_000  # a directory changed this recently: its answer is not kept
RECHECK_SECONDS = 1.0  # an answer's directories are looked at again at most this often


def _mtime(directory: str) -> int:
    try:
        return os.stat(directory).st_mtime_ns
    except OSError:
        return -1


def program_path(name: str, environment: Mapping[str, str]) -> str:
    """`name`'s absolute path on `environment`'s PATH — the first directory holding an
    executable regular file of that name — else `name` itself (the child's own PATH search then
    decides, and fails as it would). Starting a child by name walks PATH with one failed
    `execve` per directory before the one that holds it, on every start (`status --all` starts
    a git per unit). The answer is kept per PATH value; at most once a second, before it is
    used, every directory it searched is checked for a changed mtime (a program added, replaced
    or removed in one changes it), and while one changed in the last two seconds it is not kept
    at all (a change in the same tick of the file system's clock would not show). A relative or
    empty entry (the child's working directory) before the match is left to the child's search:
    its answer depends on where the child starts. `start_found` falls back to that search when
    the file found cannot be started (a stale shim)."""
    search = environment.get("PATH", os.defpath)
    key = (name, search)
    cached = _PROGRAMS.get(key)
    if cached is not None:
        now = time.monotonic()
        if now - cached.checked < RECHECK_SECONDS:
            return cached.path
        if all(_mtime(folder) == seen for folder, seen in cached.searched):
            cached.checked = now
            return cached.path
    found, searched = name, []
    for directory in search.split(os.pathsep):
        if not os.path.isabs(directory):
            break
        searched.append((directory, _mtime(directory)))
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            found = candidate
            break
    settled = time.time_ns() - RECENT_NS
    if all(0 <= seen < settled for _, seen in searched):
        _PROGRAMS[key] = _Found(found, tuple(searched), time.monotonic())
    return found


def start_found(
    start: Callable[..., _T], argv: list[str], *, env: dict[str, str], **options: object
) -> _T:
    """`start(argv, env=env, **options)` (`subprocess.run` or `Popen`) with argv[0] found by
    `program_path` as its executable (argv unchanged); when that file cannot be started — a
    shim with a missing interpreter, a file gone since — once more by name, as exec's own PATH
    search would go on to the next directory."""
    name = argv[0]
    found = program_path(name, env) if os.sep not in name else name
    if found == name:
        return start(argv, env=env, **options)
    try:
        return start(argv, executable=found, env=env, **options)
    except OSError:
        _PROGRAMS.pop((name, env.get("PATH", os.defpath)), None)
        return start(argv, env=env, **options)
