"""The `pair` console entry point: plain command lines skip Typer (SPEC 7 revision 3).

`pair --help`, `pair <command> --help` (or `-h`) and `pair --version` print text stored in the
package (pair/help_pages.py, rendered by the Typer app itself), and a plainly spelled command
line (registry/plain_argv.py: every option known and given once, no value starting with `-`)
calls the command's own function in pair/cli.py with the keyword arguments Typer would give it,
by the stored spec of its Typer command. Anything else — and a completion request — goes to the
Typer app unchanged. The supervisor (`python -m pair _supervise`) never comes here. It must not
import typer.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def stored_text(arguments: Sequence[str]) -> str | None:
    """The help page or version this command line asks for, when it is stored and exact."""
    if "_PAIR_COMPLETE" in os.environ:
        return None
    if list(arguments) == ["--version"]:
        from pair import __version__

        return __version__ + "\n"
    if not arguments or len(arguments) > 2 or arguments[-1] not in ("--help", "-h"):
        return None  # a bare `pair` is its help too, but Typer says so (registry/cli_runner.py)
    from pair.help_pages import PAGES, WIDTH
    from registry import terminal

    if terminal.columns() < WIDTH:
        return None
    return PAGES.get(arguments[0] if len(arguments) == 2 else "")


def main(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    text = stored_text(arguments)
    if text is not None:
        sys.stdout.write(text)
        return 0
    if arguments and "_PAIR_COMPLETE" not in os.environ:
        from pair.help_pages import SPECS
        from registry import plain_argv

        spec = SPECS.get(arguments[0])
        given = plain_argv.parse(arguments[1:], spec) if spec is not None else None
        if given is not None:
            import shlex

            from pair.cli import COMMANDS
            from registry.outcome import deliver

            function = COMMANDS[arguments[0]]
            return deliver(lambda: function(**given), shlex.join(["pair", *arguments]))
    from pair.cli import main as typer_main

    return typer_main(arguments)


def run() -> None:
    """The console script: `main`, then the interpreter's exit without its teardown
    (registry/leave.py)."""
    from registry.leave import leave

    leave(main())


if __name__ == "__main__":  # pragma: no cover
    run()
