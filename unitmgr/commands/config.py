"""`unit config` (SPEC 3.16): print the effective settings with the source of each."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare, rendered
from unitmgr.options import ConfigOptions


def _config(repo: str, options: ConfigOptions, *, output_format: str) -> Result:
    from unitmgr.views import config

    return rendered(config.run(repo, options), output_format, config.table)


command = declare(
    ConfigOptions,
    _config,
    help_text=(
        "The effective project settings. Each with its source: .unitmgr.toml, the local"
        " config or the default."
    ),
    formats=True,
)
