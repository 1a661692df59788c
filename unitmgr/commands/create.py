"""`unit create` (SPEC 3.3)."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import CreateOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _create(repo: str, options: CreateOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import create

    return create.run(repo, options)


command = declare(
    CreateOptions, _create, help_text="Create a unit (or resume an interrupted create)."
)
