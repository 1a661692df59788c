"""`unit restaff` (SPEC 3.5)."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import RestaffOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _restaff(repo: str, options: RestaffOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import restaff

    return restaff.run(repo, options)


command = declare(
    RestaffOptions,
    _restaff,
    help_text="Swap a unit's executor in place. A checkpoint of its work is handed over.",
)
