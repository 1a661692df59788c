"""`unit path ID` (SPEC 3.18): the unit's proven worktree path, one line of plain text."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare
from unitmgr.options import PathOptions


def _path(repo: str, options: PathOptions) -> Result:
    from unitmgr.views import worktree_path

    return worktree_path.run(repo, options.unit, lock_timeout=options.lock_timeout)


command = declare(
    PathOptions,
    _path,
    help_text='A unit\'s worktree path, and nothing else. For cd "$(unit path ID)".',
)
