"""`unit log` (SPEC 3.18): the registry's event log; lock-free, it only reads."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from registry.output import Rendered
from unitmgr.commands.common import Format, LockTimeout, Repo


def command(
    unit: Annotated[
        str | None, typer.Option("--unit", help="Only this unit's events.", metavar="ID")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only events at or after this time.", metavar="ISO"),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", help="Keep printing new events (one per line) until Ctrl-C."),
    ] = False,
    output_format: Format = "json",
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
) -> dict[str, Any] | Rendered:
    """The event log, one line per event; --follow for new ones."""
    from unitmgr import quick_reads
    from unitmgr.views import event_log

    quick_reads.lock_free(lock_timeout)
    return event_log.run(
        repo,
        unit=unit,
        since=since,
        follow=follow,
        output_format=quick_reads.output_format(output_format),
    )
