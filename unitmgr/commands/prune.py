"""`unit prune` (SPEC 3.18): remove old archives; `--dry-run` lists them and removes nothing."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from unitmgr.commands.common import LockTimeout, Repo


def command(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Remove archives older than this: a number and s, m, h, d or w.",
            metavar="DURATION",
        ),
    ] = "30d",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would go; remove nothing.")
    ] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
) -> dict[str, Any]:
    """Remove old archives, never a recorded unit's."""
    from unitmgr.lifecycle import prune

    return prune.run(repo, older_than=older_than, dry_run=dry_run, lock_timeout=lock_timeout)
