"""No process outlives its turn (SPEC 4.1): the supervisor as a child subreaper, and its sweep.

The detached supervisor calls `become_subreaper()` first, so a descendant that double-forks or
calls `setsid` to get away from the partner is reparented to the supervisor instead of pid 1.
When the turn ends, for any reason, `sweep_descendants()` kills whatever is still below the
supervisor (SIGTERM, SIGKILL after 2 s), reaps it, and describes it for the receipt's
`leftovers`.

Only the supervisor may call these: the sweep kills every descendant of the calling process and
reaps any child, which in a long-lived library caller (`unit`) would hit processes that are not
the turn's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from registry.processes import no_live_descendants, wait_gone

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
ARGV_KEEP = 8
SWEEP_ROUNDS = 5


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # `_ctypes`, the C half of `ctypes`: `prctl(2)` needs only a symbol and two ints, and
        # importing `ctypes` itself (its classes, `struct`) costs every turn's start ~2 ms more.
        import _ctypes

        program = _ctypes.dlopen(None, os.RTLD_NOW)  # type: ignore[arg-type]  # NULL: this program
        prctl = _ctypes.dlsym(program, "prctl")
        return bool(_ctypes.call_function(prctl, (PR_SET_CHILD_SUBREAPER, 1)) == 0)
    except (ImportError, OSError, AttributeError):
        return False


def describe(process: Any) -> dict[str, Any]:
    """`{pid, argv}` of a psutil process (argv empty when it can no longer be read)."""
    import psutil

    try:
        argv = process.cmdline()[:ARGV_KEEP]
    except (psutil.Error, OSError):
        argv = []
    return {"pid": process.pid, "argv": argv}


def running(processes: list[Any]) -> list[Any]:
    """Those of `processes` that are alive and not zombies."""
    import psutil

    alive = []
    for process in processes:
        with contextlib.suppress(psutil.Error, OSError):
            if process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive


def sweep_descendants(*, grace_seconds: float = 2.0) -> list[dict[str, Any]]:
    """Kill every live descendant of this process, reap them, and return `[{pid, argv}]`.

    Repeated a few rounds, because a descendant can fork again while the previous round is being
    signalled.
    """
    if no_live_descendants():
        reap_children()  # the usual end, proved from /proc: no psutil import (SPEC 7)
        return []
    import psutil

    me = psutil.Process()
    found: dict[int, dict[str, Any]] = {}
    for _ in range(SWEEP_ROUNDS):
        try:
            victims = running(me.children(recursive=True))
        except psutil.Error:
            victims = []
        if not victims:
            break
        for process in victims:
            found.setdefault(process.pid, describe(process))
        _signal(victims, signal.SIGTERM)
        survivors = wait_gone(victims, timeout_seconds=grace_seconds)
        _signal(survivors, signal.SIGKILL)
        wait_gone(survivors, timeout_seconds=grace_seconds)
    reap_children()
    return [found[pid] for pid in sorted(found)]


def reap_children() -> None:
    """Collect the exit status of every child that has exited (orphans adopted as subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _signal(processes: list[Any], signum: int) -> None:
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.Error, OSError):
            process.send_signal(signum)
