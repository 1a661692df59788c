"""`unit log` (SPEC 3.18): the registry's event log; lock-free, it only reads."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare
from unitmgr.options import LogOptions


def _log(repo: str, options: LogOptions, *, output_format: str) -> Result:
    from unitmgr.views import event_log

    return event_log.run(
        repo,
        unit=options.unit,
        since=options.since,
        follow=options.follow,
        output_format=output_format,
    )


command = declare(
    LogOptions,
    _log,
    help_text="The event log, one line per event; --follow for new ones.",
    lock_free=True,
    formats=True,
)
