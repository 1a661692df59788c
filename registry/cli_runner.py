"""Run a Typer app so that every outcome is one JSON document and a SPEC 3.0 exit code.

Both `unit` and `pair` enter through `run()`. Commands return a JSON-able dict (exit 0 when its
`ok` is true, else 1) or a `Rendered` text, or raise a `ToolError`. Typer runs with
`standalone_mode=False`, so its usage errors arrive here as exceptions and leave as JSON too; only
`--help` prints text. Anything unexpected becomes `code: internal`, exit 1, with the (redacted)
traceback in `detail`.

This module never imports click: Typer vendors it, and `typer.TyperException` is the base of its
usage errors.
"""

from __future__ import annotations

import shlex
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer
import typer.main

from registry.errors import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    Interrupted,
    ToolError,
    UsageError,
    raise_interrupted,
)
from registry.output import Rendered, emit, write_text


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
                        next_step=f"give {token} a value; a value may not start with --",
                    )
                index += 2
                continue
        elif not token.startswith("-") and hasattr(command, "commands"):
            subcommand = command.commands.get(token)
            if subcommand is not None:
                command = subcommand
                options = _value_options(command)
        index += 1


def _usage_document(error: typer.TyperException) -> dict[str, Any]:
    message = error.format_message()
    return UsageError("usage", message.rstrip(".") if message else "invalid usage").document()


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
            )
            narrowed.info = app.info
            narrowed.registered_commands = [info]
            # A callback keeps it a group: with one bare command Typer would run it directly
            # and take the subcommand's name for an argument.
            narrowed.callback()(_group)
            return narrowed
    return app


@contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` in the main thread while the command runs, so
    every `finally` and `except BaseException` on the way out runs: children started by
    `run_streamed`, `run_git` and a bootstrap are killed as a group, locks are released, and
    the journal keeps its `started` entry (SPEC 3.0)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (an in-process caller's worker)
        return
    previous = {
        signum: signal.signal(signum, raise_interrupted)
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _next_for(document: dict[str, Any], exit_code: int, command: str) -> str:
    """A next step for a failure that names none (SPEC 3.0: `next` is never empty)."""
    if exit_code == EXIT_USAGE:
        words = shlex.split(command)[:2]
        return f"fix the command line: {shlex.join([*words, '--help'])} lists the options"
    if document.get("retryable"):
        return f"retry later: {command}"
    if document.get("code") == "internal":
        return "a bug: report it with this output"
    return f"read reason and detail, fix the cause, then repeat: {command}"


def _failure(document: dict[str, Any], exit_code: int, command: str) -> int:
    if not document.get("next"):
        document["next"] = _next_for(document, exit_code, command)
    emit(document)
    return exit_code


def run(app: typer.Typer, argv: Sequence[str] | None, prog_name: str) -> int:
    """Run `app` with `argv`, print exactly one document, and return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    command_line = shlex.join([prog_name, *arguments])
    try:
        with _interruptible():
            first = arguments[0] if arguments and not arguments[0].startswith("-") else None
            command = typer.main.get_command(_only(app, first))
            check_option_values(command, arguments)
            result = command.main(args=arguments, prog_name=prog_name, standalone_mode=False)
    except ToolError as error:
        return _failure(error.document(), error.exit_code, command_line)
    except typer.TyperException as error:
        code = EXIT_USAGE if getattr(error, "exit_code", 2) == 2 else EXIT_REFUSED
        return _failure(_usage_document(error), code, command_line)
    except (Interrupted, typer.Abort, KeyboardInterrupt) as error:
        signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
        name = signal.Signals(signum).name
        document = {
            "ok": False,
            "code": "interrupted",
            "reason": f"interrupted by {name}; children were stopped and the journal kept",
            "next": f"repeat the command to resume: {command_line}",
            "detail": {"signal": name},
        }
        return _failure(document, 128 + signum, command_line)
    except Exception as error:
        document = {
            "ok": False,
            "code": "internal",
            "reason": f"unexpected error: {type(error).__name__}: {error}",
            "detail": {"traceback": traceback.format_exc()},
        }
        return _failure(document, EXIT_REFUSED, command_line)
    if isinstance(result, Rendered):
        write_text(result.text if result.text.endswith("\n") else result.text + "\n")
        return result.exit_code
    if isinstance(result, dict):
        emit(result)
        return EXIT_OK if result.get("ok") else EXIT_REFUSED
    if isinstance(result, int):
        # `--help` (and Typer's own exits) end here: the help text is already printed.
        return result
    return EXIT_OK
