"""`unit feedback` (SPEC 3.17)."""

from __future__ import annotations

from typing import Any

from registry.output import Rendered
from unitmgr.commands.common import declare
from unitmgr.options import FeedbackOptions


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
