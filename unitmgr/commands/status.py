"""`unit status` (SPEC 3.4): `--all` is a lock-free view; `--unit` reads, then writes back what
it found out of date — through the lifecycle, since that may send a queued notice."""

from __future__ import annotations

from typing import Annotated

import typer

from registry.errors import UsageError
from unitmgr.commands.common import Format, LockTimeout, Repo, Result, rendered


def command(
    unit: Annotated[
        str | None,
        typer.Option("--unit", help="One unit, read and brought up to date.", metavar="ID"),
    ] = None,
    all_units: Annotated[
        bool, typer.Option("--all", help="Every unit, lock-free, offline.")
    ] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    output_format: Format = "json",
) -> Result:
    """One unit (--unit ID) or a summary of every unit (--all)."""
    from unitmgr import quick_reads

    if all_units and not unit:
        return quick_reads.status_all(
            repo=repo, lock_timeout=lock_timeout, format_name=output_format
        )
    quick_reads.lock_free(lock_timeout)
    fmt = quick_reads.output_format(output_format)
    if bool(unit) == all_units:
        raise UsageError("usage", "status needs exactly one of --unit ID or --all")
    assert unit is not None
    from unitmgr.lifecycle.status_write_back import status_unit
    from unitmgr.views import table

    return rendered(status_unit(repo, unit), fmt, table.status_unit)
