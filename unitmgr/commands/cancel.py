"""`unit cancel` (SPEC 3.13)."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import CancelOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _cancel(repo: str, options: CancelOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import cancel

    return cancel.run(repo, options)


command = declare(
    CancelOptions,
    _cancel,
    help_text=(
        "Stop the unit's in-flight turn. Its whole process tree ends; its receipt says cancelled."
    ),
)
