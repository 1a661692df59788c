"""`unit addendum` (SPEC 3.6)."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import AddendumOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _addendum(repo: str, options: AddendumOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import addendum

    return addendum.run(repo, options)


command = declare(
    AddendumOptions,
    _addendum,
    help_text="Append to a unit's task. Its executor is told to re-read the manifest.",
)
