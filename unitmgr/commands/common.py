"""What every `unit` command module shares: the common options, and `declare`, which turns an
options dataclass (unitmgr/options.py) into the Typer command that fills it.

A command parses, calls one lifecycle (or view) function, and renders; it does no git, GitHub or
registry I/O itself, and imports what it calls inside its function so start-up stays light.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer

from registry.output import Rendered

Repo = Annotated[
    str,
    typer.Option("--repo", help="The repository (default: current directory).", metavar="PATH"),
]
LockTimeout = Annotated[
    str,
    typer.Option(
        "--lock-timeout", help="Seconds to wait for locks (0 = do not wait).", metavar="SECONDS"
    ),
]
Format = Annotated[
    str, typer.Option("--format", help="json (default) or table.", metavar="json|table")
]

Result = dict[str, Any] | Rendered


def _parameter(item: dataclasses.Field[Any], annotation: Any) -> inspect.Parameter:
    flag, help_text, metavar = (item.metadata[key] for key in ("flag", "help", "metavar"))
    default: Any = inspect.Parameter.empty
    if item.default_factory is not dataclasses.MISSING:
        annotation, default = annotation | None, None  # Typer gives None for an absent list
    elif item.default is not dataclasses.MISSING:
        default = item.default
    return inspect.Parameter(
        item.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[annotation, typer.Option(flag, help=help_text, metavar=metavar)],
    )


def declare(
    options_type: type[Any],
    call: Callable[..., Result],
    *,
    help_text: str,
    lock_free: bool = False,
    formats: bool = False,
) -> Callable[..., Result]:
    """The Typer command for `options_type`: every field is an option (its flag, default and
    help from the field's metadata), plus `--repo`; a `lock_free` command also takes
    `--lock-timeout` (a lead passes it to every command) and checks it, and a command that
    `formats` takes `--format`. It calls `call(repo, options)` (plus `output_format=`)."""
    hints = typing.get_type_hints(options_type)
    fields = dataclasses.fields(options_type)
    parameters = [_parameter(item, hints[item.name]) for item in fields]
    common = [("repo", ".", Repo)]
    if lock_free:
        common.append(("lock_timeout", "30", LockTimeout))
    if formats:
        common.append(("output_format", "json", Format))
    # `--repo` comes before the options every command shares, as `--help` has always listed it.
    names = [item.name for item in fields]
    at = names.index("lock_timeout") if "lock_timeout" in names else len(names)
    parameters[at:at] = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint)
        for name, default, hint in common
    ]
    lists = {item.name for item in fields if item.default_factory is not dataclasses.MISSING}

    def command(**given: Any) -> Result:
        repo = given.pop("repo")
        if lock_free:
            from unitmgr.quick_reads import lock_free as check_lock_timeout

            check_lock_timeout(given.pop("lock_timeout"))
        extra = {}
        if formats:  # a bad --format is refused before any work
            from unitmgr.quick_reads import output_format

            extra["output_format"] = output_format(given.pop("output_format"))
        for name in lists:
            given[name] = list(given[name] or [])
        return call(repo, options_type(**given), **extra)

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = help_text
    command.__name__ = call.__name__.lstrip("_")
    return command


def rendered(document: dict[str, Any], output_format: str, table: Callable[[Any], str]) -> Result:
    """The document, or its table for `--format table`."""
    return Rendered(table(document)) if output_format == "table" else document
