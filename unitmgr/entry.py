"""The `unit` console entry point: simple read command lines skip Typer.

Importing Typer and building its app costs several times a bare Python start. A command line
that is only `status --all` or `list` with their own options, each spelled plainly (`--repo X`
or `--repo=X`, no repeats, no `--help`, no value that starts with `-`), is parsed here and
answered by the same function `unitmgr/cli.py` calls (unitmgr/quick_reads.py), with the same
document, exit code and errors. Anything else goes to the Typer app unchanged — this module never
guesses: when in doubt it hands over. It must not import typer, rich, github or git, and an
empty registry's answer imports neither `typing` nor `dataclasses` (tests/test_entry.py).

`unit`, `unit --help`, `unit --version` and `unit <command> --help` (or `-h`) print text stored
in the package (unitmgr/help_pages.py, rendered by the Typer app itself) for the same reason.

Every other command declared by its options (unitmgr/commands/common.py `Declared`) runs here
too when its command line is spelled plainly: the stored spec of its Typer command (the same
module) fills the keyword arguments Typer would (registry/plain_argv.py, which hands anything
unusual back), and the command's own body runs with them — so every command starts without
Typer (SPEC 7 revision 3), and Typer remains the one parser of help, completion and refusals.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's own flag would import typing, a tenth of the budget
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

# Per command: option -> the keyword it fills, and whether it takes a value.
_STATUS_ALL = {
    "--all": ("all", False),
    "--repo": ("repo", True),
    "--lock-timeout": ("lock_timeout", True),
    "--format": ("format_name", True),
}
_LIST = {
    "--prs": ("prs", False),
    "--repo": ("repo", True),
    "--lock-timeout": ("lock_timeout", True),
    "--format": ("format_name", True),
}


def simple_options(arguments: Sequence[str], known: dict[str, tuple[str, bool]]) -> dict[str, Any]:
    """The keyword arguments of a plainly spelled command line, or {} to hand it to Typer."""
    found: dict[str, Any] = {}
    index = 0
    while index < len(arguments):
        token = arguments[index]
        name, equals, inline = token.partition("=")
        spec = known.get(name)
        if spec is None:
            return {}
        keyword, takes_value = spec
        if keyword in found or (equals and not takes_value):
            return {}
        if not takes_value:
            found[keyword] = True
            index += 1
            continue
        if equals:
            value = inline
            index += 1
        else:
            if index + 1 >= len(arguments):
                return {}
            value = arguments[index + 1]
            index += 2
        if value.startswith("-"):
            return {}
        found[keyword] = value
    return found


def fast_call(arguments: Sequence[str]) -> Callable[[], Any] | None:
    """The read this command line asks for, when it can be answered without Typer."""
    if not arguments:
        return None
    command, rest = arguments[0], arguments[1:]
    defaults = {"repo": ".", "lock_timeout": "30", "format_name": "json"}
    if command == "status":
        options = simple_options(rest, _STATUS_ALL)
        if not options.pop("all", False):
            return None
        from unitmgr import quick_reads

        return lambda: quick_reads.status_all(**{**defaults, **options})
    if command == "list":
        options = simple_options(rest, _LIST)
        if not options and rest:
            return None
        from unitmgr import quick_reads

        prs = bool(options.pop("prs", False))
        return lambda: quick_reads.list_units(prs=prs, **{**defaults, **options})
    return None


def declared_call(arguments: Sequence[str]) -> Callable[[], Any] | None:
    """A declared command's body with the arguments Typer would give it, when the command line
    is plain (registry/plain_argv.py); None hands it to Typer."""
    if not arguments or "_UNIT_COMPLETE" in os.environ:
        return None
    from registry import plain_argv
    from unitmgr.cli import COMMANDS
    from unitmgr.help_pages import SPECS

    name = arguments[0]
    spec = SPECS.get(name)
    if name not in COMMANDS or spec is None:
        return None
    given = plain_argv.parse(arguments[1:], spec)
    if given is None:
        return None
    module = __import__(f"unitmgr.commands.{COMMANDS[name]}", fromlist=["command"])
    invoke = getattr(module.command, "invoke", None)  # a command with its own signature: Typer
    if invoke is None:
        return None
    return lambda: invoke(**given)


def stored_text(arguments: Sequence[str]) -> str | None:
    """The help page or version this command line asks for, when it is stored and exact."""
    if "_UNIT_COMPLETE" in os.environ:
        return None  # the shell asks for completions: Typer answers
    if list(arguments) == ["--version"]:
        from unitmgr import __version__

        return __version__ + "\n"
    if len(arguments) > 2 or (arguments and arguments[-1] not in ("--help", "-h")):
        return None
    from registry import terminal
    from unitmgr.help_pages import PAGES, WIDTH

    if terminal.columns() < WIDTH:
        return None  # Typer wraps to a narrower terminal; the pages are rendered at WIDTH
    return PAGES.get(arguments[0] if len(arguments) == 2 else "")


def main(argv: list[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    text = stored_text(arguments)
    if text is not None:
        sys.stdout.write(text)
        return 0
    call = fast_call(arguments) or declared_call(arguments)
    if call is not None:
        import shlex

        from registry.outcome import deliver

        return deliver(call, shlex.join(["unit", *arguments]))
    from unitmgr.cli import main as typer_main

    return typer_main(arguments)


def run() -> None:
    """The console script: `main`, then the interpreter's exit without its teardown
    (registry/leave.py)."""
    from registry.leave import leave

    leave(main())


if __name__ == "__main__":  # pragma: no cover
    run()
