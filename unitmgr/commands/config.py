"""`unit config` (SPEC 3.16): print the effective settings with the source of each;
`--approve` records the configured commands as approved (SPEC 8)."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare, rendered
from unitmgr.options import ConfigOptions


def _config(repo: str, options: ConfigOptions, *, output_format: str) -> Result:
    from unitmgr.views import config

    if options.approve:
        from unitmgr.lifecycle import approve_config

        return rendered(approve_config.run(repo, options), output_format, config.approved_table)
    return rendered(config.run(repo, options), output_format, config.table)


command = declare(
    ConfigOptions,
    _config,
    help_text=(
        "The effective project settings. Each with its source: .unitmgr.toml, the local"
        " config or the default. --approve lets a configured setup or notify.command run."
    ),
    formats=True,
)
