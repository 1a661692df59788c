"""`unit tail` (SPEC 3.14a): a turn's transcript for a person; lock-free, it only reads."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare
from unitmgr.options import TailOptions


def _tail(repo: str, options: TailOptions) -> Result:
    from unitmgr.views import tail

    return tail.run(repo, options)


command = declare(
    TailOptions,
    _tail,
    help_text="A turn's transcript for a person. --follow prints it until its receipt lands.",
    lock_free=True,
)
