"""`unit doctor` (SPEC 8): the config audit for a person — every executable git config key,
hook and attributes file, who set it, whether the lead accepted it and how to remove it;
`--trust` accepts the current state as the baseline."""

from __future__ import annotations

from unitmgr.commands.common import declare
from unitmgr.options import DoctorOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _doctor(repo: str, options: DoctorOptions) -> dict[str, Any]:
    from unitmgr import config_audit

    return config_audit.doctor(repo, trust=options.trust)


command = declare(
    DoctorOptions,
    _doctor,
    help_text=(
        "Audit what can make git run something. Every executable config key, hook and"
        " attributes file, trusted or foreign, and how to remove it; --trust accepts them."
    ),
)
