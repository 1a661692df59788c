"""Proven processes (SPEC 8 "Processes"): evidence that a live process is the one a file names.

A record, a journal entry or a pair file can name any pid together with its true start time
(an executor can read both from /proc), so identity (`registry.processes.is_alive`) only says
that the named process lives, never that it is the turn's or the step's. Before a signal, the
caller builds a `Proof` from what it knows itself — a token it put into the child's
environment, a directory git proves — and asks `unproven`; a process that fails is never
signalled. The file supplies at most the token's value, never which variable or directory
counts.

The environment is read from /proc (psutil): it is fixed when the process executes, so an
unrelated process cannot come to carry a token later, and a process whose environment cannot be
read is not proven. A working directory counts as the kernel reports it (never resolved again:
a dead directory reads `P (deleted)`, and a symlink planted at that name must not move it).

It reads processes; it signals nothing. psutil is imported inside the functions.
"""

from __future__ import annotations

import os

from registry.light_dataclass import dataclass

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

# Set by unitmgr in the environment of a child it starts (setup, validation); journaled with it.
CHILD_TOKEN_VARIABLE = "UNITMGR_CHILD_TOKEN"
DELETED_SUFFIX = " (deleted)"


@dataclass(frozen=True)
class Proof:
    """What makes a live process the one a file names; any one alternative suffices.

    `environment`: every `(variable, value)` is in its environment. `cwd_within`: its working
    directory is one of these real paths or below one. `descends_from`: a pid the caller has
    proven is among its ancestors. `own_child`: a child this process started and has not reaped
    (its pid and group cannot be anyone else's) — only for the one who started it.
    """

    environment: tuple[tuple[str, str], ...] = ()
    cwd_within: tuple[str, ...] = ()
    descends_from: tuple[int, ...] = ()
    own_child: bool = False

    def found(self, process: Any) -> str | None:
        """None when `process` (a psutil process) is proven; else what it is instead."""
        import psutil

        if self.own_child:
            return None
        try:
            name = process.name()
        except (psutil.Error, OSError):
            name = "?"
        what = f"pid {process.pid} ({name})"
        if self.environment:
            names = ", ".join(sorted({variable for variable, _ in self.environment}))
            try:
                environ = process.environ()
            except (psutil.Error, OSError):
                what += f" whose environment cannot be read (for {names})"
            else:
                if all(environ.get(k) == v for k, v in self.environment):
                    return None
                what += f" without this one's {names}"
        cwd = cwd_of(process)
        if cwd is not None and any(within(cwd, root) for root in self.cwd_within):
            return None
        if self.descends_from and _descends(process, self.descends_from):
            return None
        if not (self.environment or self.cwd_within or self.descends_from):
            what += ", and nothing known proves it"
        return what + (f", running in {cwd}" if cwd is not None else "")


def unproven(pid: int, proof: Proof) -> str | None:
    """None when the live `pid` is proven by `proof` (or is gone); else what it is instead."""
    import psutil

    try:
        process = psutil.Process(pid)
    except (psutil.Error, OSError):
        return None
    return proof.found(process)


def new_child_token(owner: str) -> str:
    """A fresh token for one child of `owner` (a unit id): `<owner>/<random>`.

    The token is journaled in the clear: knowing it does not let anyone put it into the
    environment of a process that already runs, and the prefix binds it to its owner, so a
    token copied from another unit's journal proves nothing for this one.
    """
    # `secrets.token_hex(16)` is exactly this; `secrets` imports `hmac` and its OpenSSL (SPEC 7).
    return f"{owner}/{os.urandom(16).hex()}"


def child_proof(token: str | None, owner: str) -> Proof:
    """The proof for a child `owner` journaled with `token`; proves nothing without one."""
    if not token or not token.startswith(f"{owner}/"):
        return Proof()
    return Proof(environment=((CHILD_TOKEN_VARIABLE, token),))


def cwd_of(process: Any) -> str | None:
    """A process's working directory as the kernel reports it; None when unreadable or gone
    (a removed directory, `P (deleted)`, is nowhere)."""
    import psutil

    try:
        cwd = str(process.cwd())
    except (psutil.Error, OSError):
        return None
    return None if not cwd or cwd.endswith(DELETED_SUFFIX) else cwd


def within(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it (both absolute, neither resolved again)."""
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root + os.sep)


def _descends(process: Any, ancestors: tuple[int, ...]) -> bool:
    import psutil

    try:
        return any(parent.pid in ancestors for parent in process.parents())
    except (psutil.Error, OSError):
        return False
