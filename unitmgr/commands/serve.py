"""`unit serve` (SPEC 3.14): a read-only web dashboard for people; it serves until Ctrl-C."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare
from unitmgr.options import ServeOptions


def _serve(repo: str, options: ServeOptions) -> Result:
    from unitmgr import quick_reads

    quick_reads.lock_free(options.lock_timeout)  # refused before the server's imports (SPEC 7)
    from unitmgr.views import serve

    return serve.run(repo, host=options.host, port=options.port, prs=options.prs)


command = declare(
    ServeOptions,
    _serve,
    help_text="A read-only web dashboard. What needs you, every unit, its transcript, live in "
    "a browser.",
)
