"""`unit restaff` (SPEC 3.5)."""

from __future__ import annotations

from typing import Any

from unitmgr.commands.common import declare
from unitmgr.options import RestaffOptions


def _restaff(repo: str, options: RestaffOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import restaff

    return restaff.run(repo, options)


command = declare(
    RestaffOptions,
    _restaff,
    help_text="Swap a unit's executor in place. A checkpoint of its work is handed over.",
)
