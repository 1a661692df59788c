"""`unit intake` (SPEC 3.2): lock-free, it only reads (GitHub and the registry)."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare, rendered
from unitmgr.options import IntakeOptions


def _intake(repo: str, options: IntakeOptions, *, output_format: str) -> Result:
    from unitmgr.views import intake, table

    return rendered(intake.run(repo, options), output_format, table.intake)


command = declare(
    IntakeOptions,
    _intake,
    help_text="Free slots and the ready issues that may start. Each with its dependencies.",
    lock_free=True,
    formats=True,
)
