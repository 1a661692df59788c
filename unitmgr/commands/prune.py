"""`unit prune` (SPEC 3.18): remove old archives; `--dry-run` lists them and removes nothing."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare
from unitmgr.options import PruneOptions


def _prune(repo: str, options: PruneOptions) -> Result:
    from unitmgr.lifecycle import prune

    return prune.run(
        repo,
        older_than=options.older_than,
        dry_run=options.dry_run,
        lock_timeout=options.lock_timeout,
    )


command = declare(PruneOptions, _prune, help_text="Remove old archives, never a recorded unit's.")
