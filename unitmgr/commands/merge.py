"""`unit merge` (SPEC 3.8)."""

from __future__ import annotations

from typing import Any

from unitmgr.commands.common import declare
from unitmgr.options import MergeOptions


def _merge(repo: str, options: MergeOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import merge

    return merge.run(repo, options)


command = declare(
    MergeOptions,
    _merge,
    help_text=(
        "Merge the unit's PR at --head when every gate passes. The merge hold is enforced in code."
    ),
)
