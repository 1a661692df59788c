"""`unit status` (SPEC 3.4): `--all` is a lock-free view; `--unit` reads, then writes back what
it found out of date — through the lifecycle, since that may send a queued notice."""

from __future__ import annotations

from registry.errors import UsageError
from unitmgr.commands.common import Result, declare, rendered
from unitmgr.options import StatusOptions


def _status(repo: str, options: StatusOptions, *, output_format: str) -> Result:
    from unitmgr import quick_reads

    unit, all_units = options.unit, options.all_units
    if all_units and not unit:
        return quick_reads.status_all(
            repo=repo, lock_timeout=options.lock_timeout, format_name=output_format
        )
    quick_reads.lock_free(options.lock_timeout)
    if bool(unit) == all_units:
        raise UsageError("usage", "status needs exactly one of --unit ID or --all")
    assert unit is not None
    from unitmgr.lifecycle.status_write_back import status_unit
    from unitmgr.views import table

    return rendered(status_unit(repo, unit), output_format, table.status_unit)


command = declare(
    StatusOptions,
    _status,
    help_text="One unit (--unit ID) or a summary of every unit (--all).",
    formats=True,
)
