"""`unit verify` (SPEC 3.12)."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import VerifyOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _verify(repo: str, options: VerifyOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import verify

    return verify.run(repo, options)


command = declare(
    VerifyOptions,
    _verify,
    help_text="Run the unit's --validation on its HEAD and record the result.",
)
