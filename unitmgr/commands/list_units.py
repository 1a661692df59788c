"""`unit list` (SPEC 3.1): lock-free; its body is shared with the fast entry (quick_reads)."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare
from unitmgr.options import ListOptions


def _list(repo: str, options: ListOptions, *, output_format: str) -> Result:
    from unitmgr import quick_reads

    return quick_reads.list_units(
        prs=options.prs, repo=repo, lock_timeout=options.lock_timeout, format_name=output_format
    )


command = declare(
    ListOptions,
    _list,
    help_text="Every unit, with what is observed and how to recover it.",
    formats=True,
)
