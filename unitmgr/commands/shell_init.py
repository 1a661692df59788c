"""`unit shell-init SHELL` (SPEC 3.18): the shell function that gives `unit cd ID`."""

from __future__ import annotations

from unitmgr.commands.common import Result, declare
from unitmgr.options import ShellInitOptions


def _shell_init(repo: str, options: ShellInitOptions) -> Result:
    from unitmgr.views import shell_init

    return shell_init.run(options.shell)


command = declare(
    ShellInitOptions,
    _shell_init,
    help_text='A `unit cd ID` shell function: eval "$(unit shell-init bash)".',
)
