"""`unit create` (SPEC 3.3)."""

from __future__ import annotations

from typing import Any

from unitmgr.commands.common import declare
from unitmgr.options import CreateOptions


def _create(repo: str, options: CreateOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import create

    return create.run(repo, options)


command = declare(
    CreateOptions, _create, help_text="Create a unit (or resume an interrupted create)."
)
