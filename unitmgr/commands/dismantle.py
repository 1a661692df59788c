"""`unit dismantle` (SPEC 3.9)."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import DismantleOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _dismantle(repo: str, options: DismantleOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import dismantle

    return dismantle.run(repo, options)


command = declare(
    DismantleOptions,
    _dismantle,
    help_text=(
        "Take a unit apart: pair, worktree, branches, record. Its processes and manifest go too."
    ),
)
