"""`unit watch` (SPEC 3.10): a live view for a person; lock-free, it only reads."""

from __future__ import annotations

from typing import Annotated

import typer

from registry.output import Rendered
from unitmgr.commands.common import LockTimeout, Repo


def command(
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between redraws.", metavar="SECONDS")
    ] = 3.0,
    once: Annotated[bool, typer.Option("--once", help="Draw one frame and exit.")] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
) -> Rendered:
    """A live view of every unit for a person. What needs attention comes first; Ctrl-C ends."""
    from unitmgr import quick_reads
    from unitmgr.views import watch

    quick_reads.lock_free(lock_timeout)
    return watch.run(repo, interval=interval, once=once)
