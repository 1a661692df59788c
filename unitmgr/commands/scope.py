"""`unit scope` (SPEC 3.7)."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import ScopeOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _scope(repo: str, options: ScopeOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import scope_check

    return scope_check.run(repo, options)


command = declare(
    ScopeOptions,
    _scope,
    help_text=(
        "What a unit changed against its base. "
        "Also what falls outside its --paths, and who overlaps."
    ),
)
