"""`unit feedback` (SPEC 3.17)."""

from __future__ import annotations

from registry.output import Rendered
from unitmgr.commands.common import declare
from unitmgr.options import FeedbackOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _feedback(repo: str, options: FeedbackOptions) -> dict[str, Any] | Rendered:
    if options.every is not None:
        from unitmgr.lifecycle import feedback_loop

        return feedback_loop.run(repo, options)
    from unitmgr.lifecycle import feedback

    return feedback.run(repo, options)


command = declare(
    FeedbackOptions,
    _feedback,
    help_text="Send a unit its PR's failing CI and trusted review, once.",
)
