"""`unit merge` (SPEC 3.8)."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import MergeOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


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
