"""`unit wait` (SPEC 3.11): lock-free, it only reads."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import WaitOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _wait(repo: str, options: WaitOptions) -> dict[str, Any]:
    from unitmgr.views import wait

    return wait.run(repo, options)


command = declare(
    WaitOptions,
    _wait,
    help_text="Block until a unit gets a receipt or changes lifecycle. Git is not polled.",
    lock_free=True,
)
