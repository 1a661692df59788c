"""Run a Typer app so that every outcome is one JSON document and a SPEC 3.0 exit code.

Both `unit` and `pair` enter through `run()`. Commands return a JSON-able dict (exit 0 when its
`ok` is true, else 1) or a `Rendered` text, or raise a `ToolError`. Typer runs with
`standalone_mode=False`, so its usage errors arrive here as exceptions and leave as JSON too; only
`--help`, `--version` and `--show-completion` print text, and a bare program name is its
`--help` (SPEC 3.0 Help). Anything unexpected becomes `code: internal`, exit 1, with the (redacted)
traceback in `detail`.

This module never imports click: Typer vendors it, and `typer.TyperException` is the base of its
usage errors.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
import typer.main

from registry.errors import EXIT_REFUSED, EXIT_USAGE, UsageError
from registry.outcome import deliver, failure

# `-h` is `--help` everywhere (SPEC 3.18): click hands a group's help names to its subcommands.
HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def _option_takes_value(parameter: Any) -> bool:
    return not getattr(parameter, "is_flag", False) and not getattr(parameter, "count", False)


def _value_options(command: Any) -> dict[str, bool]:
    """Every option name of `command` mapped to whether it consumes a value."""
    names: dict[str, bool] = {}
    for parameter in getattr(command, "params", []):
        if getattr(parameter, "param_type_name", "") != "option":
            continue
        for name in [*parameter.opts, *getattr(parameter, "secondary_opts", [])]:
            names[name] = _option_takes_value(parameter)
    return names


def check_option_values(root: Any, argv: Sequence[str]) -> None:
    """Refuse `--name --other`: an option value that starts with `--` is a missing value.

    Click would take `--other` as the value and report something confusing later; SPEC 3.0
    makes it a usage error naming the option.
    """
    command = root
    options = _value_options(command)
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return
        if token.startswith("--") and "=" not in token:
            if options.get(token):
                following = argv[index + 1] if index + 1 < len(argv) else None
                if following is None or following.startswith("--"):
                    raise UsageError(
                        "missing-value",
                        f"missing value for {token}",
                        next_step=f"{token} needs a value (one that does not start with --)",
                    )
                index += 2
                continue
        elif not token.startswith("-") and hasattr(command, "commands"):
            subcommand = command.commands.get(token)
            if subcommand is not None:
                command = subcommand
                options = _value_options(command)
        index += 1


def add_version_option(app: typer.Typer, version: str) -> None:
    """Give `app` an eager `--version` that prints `version` and exits 0 (SPEC 3.0 Help)."""

    def show(value: bool) -> None:
        if value:
            sys.stdout.write(version + "\n")
            raise typer.Exit()

    def callback(_version: bool = False) -> None:
        """The program's own options (a subcommand has its own)."""

    # Set as objects, not strings: this module's annotations are postponed, and Typer could not
    # resolve `show` from a string.
    callback.__annotations__ = {
        "_version": Annotated[
            bool,
            typer.Option(
                "--version", help="Print the version and exit.", is_eager=True, callback=show
            ),
        ],
        "return": None,
    }
    app.callback()(callback)


def completing(prog_name: str) -> bool:
    """Whether the shell is asking for completions (typer's `_<PROG>_COMPLETE` protocol)."""
    return f"_{prog_name.upper()}_COMPLETE" in os.environ


def _usage_document(
    error: typer.TyperException, app: typer.Typer, arguments: Sequence[str], prog_name: str
) -> dict[str, Any]:
    message = error.format_message()
    document = UsageError("usage", message.rstrip(".") if message else "invalid usage").document()
    document["next"] = help_for(app, arguments, prog_name)
    return document


def help_for(app: typer.Typer, arguments: Sequence[str], prog_name: str) -> str:
    """`PROG COMMAND --help` for the command the line names, else for the closest real command
    (a typo), else `PROG --help`: never the help of a command that does not exist."""
    import difflib

    names = [
        info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
        for info in app.registered_commands
        if not info.hidden
    ]
    first = arguments[0] if arguments and not arguments[0].startswith("-") else None
    if first is None:
        return shlex.join([prog_name, "--help"])
    if first not in names:
        close = difflib.get_close_matches(first, names, n=1)
        if not close:
            return shlex.join([prog_name, "--help"])
        first = close[0]
    return shlex.join([prog_name, first, "--help"])


def _group() -> None:
    """The group callback of a narrowed app: nothing to do."""


def _only(app: typer.Typer, name: str | None) -> typer.Typer:
    """The app narrowed to the one subcommand being run.

    Building every command's parameters costs ~25 ms at each start; the group with only the
    requested command parses the same arguments. Help and unknown commands use the whole app.
    """
    for info in app.registered_commands:
        command_name = info.name or (info.callback.__name__ if info.callback else None)
        if command_name == name:
            narrowed = typer.Typer(
                add_completion=False,
                rich_markup_mode=app.rich_markup_mode,
                pretty_exceptions_enable=False,
                context_settings=HELP_OPTIONS,
            )
            narrowed.info = app.info
            narrowed.registered_commands = [info]
            # A callback keeps it a group: with one bare command Typer would run it directly
            # and take the subcommand's name for an argument.
            narrowed.callback()(_group)
            return narrowed
    return app


# The click parameter types `registry.plain_argv` parses itself; any other keeps a command on Typer.
_PLAIN_KINDS = {"str": "value", "int": "int", "float": "float"}


def command_spec(command: Any) -> dict[str, Any] | None:
    """What `registry.plain_argv.parse` needs to fill `command`'s keyword arguments as Typer
    would (stored by the help-page writers, checked against Typer by the tests), or None when
    one of its parameters is beyond it (a count, a `--x/--no-x` pair, an environment variable,
    an eager or validating callback, a choice, a path, several values)."""
    options: dict[str, list[str]] = {}
    arguments: list[str] = []
    defaults: dict[str, Any] = {}
    required: list[str] = []
    for parameter in command.params:
        kind = (
            "flag"
            if getattr(parameter, "is_flag", False)
            else _PLAIN_KINDS.get(parameter.type.name)
        )
        plain = (
            kind is not None
            and parameter.nargs == 1
            and not getattr(parameter, "count", False)
            and not getattr(parameter, "secondary_opts", [])
            and not parameter.envvar
            and not parameter.is_eager
            and parameter.callback is None
        )
        if kind is None or not plain or not parameter.name:
            return None
        if parameter.param_type_name == "argument":
            if not parameter.required:
                return None
            arguments.append(parameter.name)
            continue
        if getattr(parameter, "multiple", False):
            kind = "multiple"
        for name in parameter.opts:
            options[name] = [parameter.name, kind]
        if parameter.required:
            required.append(parameter.name)
        elif kind == "multiple":  # click gives an absent repeatable option as no values
            defaults[parameter.name] = list(parameter.default or [])
        else:
            defaults[parameter.name] = parameter.default
    return {"options": options, "arguments": arguments, "defaults": defaults, "required": required}


def run(app: typer.Typer, argv: Sequence[str] | None, prog_name: str) -> int:
    """Run `app` with `argv`, print exactly one document, and return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    command_line = shlex.join([prog_name, *arguments])
    if not arguments and not completing(prog_name):
        arguments = ["--help"]  # a bare `unit` shows what it can do, exit 0

    def call() -> object:
        try:
            first = arguments[0] if arguments and not arguments[0].startswith("-") else None
            command = typer.main.get_command(_only(app, first))
            check_option_values(command, arguments)
            return command.main(args=arguments, prog_name=prog_name, standalone_mode=False)
        except typer.TyperException as error:
            code = EXIT_USAGE if getattr(error, "exit_code", 2) == 2 else EXIT_REFUSED
            return failure(_usage_document(error, app, arguments, prog_name), code, command_line)
        except typer.Abort:
            raise KeyboardInterrupt from None

    return deliver(call, command_line)
