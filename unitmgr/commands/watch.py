"""`unit watch` (SPEC 3.10): a live view for a person; lock-free, it only reads."""

from __future__ import annotations

from registry.output import Rendered
from unitmgr.commands.common import declare
from unitmgr.options import WatchOptions


def _watch(repo: str, options: WatchOptions) -> Rendered:
    from unitmgr import quick_reads
    from unitmgr.views import watch

    quick_reads.lock_free(options.lock_timeout)
    return watch.run(repo, interval=options.interval, once=options.once)


command = declare(
    WatchOptions,
    _watch,
    help_text="A live view of every unit for a person. What needs attention comes first; "
    "Ctrl-C ends.",
)
