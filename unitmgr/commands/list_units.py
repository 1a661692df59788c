"""`unit list` (SPEC 3.1): lock-free; its body is shared with the fast entry (quick_reads)."""

from __future__ import annotations

from typing import Annotated

import typer

from unitmgr.commands.common import Format, LockTimeout, Repo, Result


def command(
    prs: Annotated[bool, typer.Option("--prs", help="Also read each branch's PRs.")] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
    output_format: Format = "json",
) -> Result:
    """Every unit, with what is observed and how to recover it."""
    from unitmgr import quick_reads

    return quick_reads.list_units(
        prs=prs, repo=repo, lock_timeout=lock_timeout, format_name=output_format
    )
