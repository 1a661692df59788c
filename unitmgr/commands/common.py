"""What every `unit` command module shares: the common options, and `declare`, which turns an
options class (unitmgr/options.py, built by unitmgr/option_fields.py) into the command that
fills it.

A command parses, calls one lifecycle (or view) function, and renders; it does no git, GitHub or
registry I/O itself, and imports what it calls inside its function so start-up stays light.

A declared command is a `Declared`: its body (`invoke`) needs no Typer, so unitmgr/entry.py runs
a plainly spelled command line without importing Typer at all (SPEC 7: importing Typer alone
costs about five bare Python starts); `typer_command()` builds the Typer function for
unitmgr/cli.py, only when the Typer app is built. This module imports typer only there (and for
the `Repo`, `LockTimeout`, `Format` option types a command declaring its own signature uses).
"""

from __future__ import annotations

from registry.output import Rendered
from unitmgr.option_fields import MISSING, Field, fields

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# "Any" quoted: the alias is built at run time without importing typing.
Result = dict[str, "Any"] | Rendered

REPO = ("--repo", "The repository (default: current directory).", "PATH")
LOCK_TIMEOUT = ("--lock-timeout", "Seconds to wait for locks (0 = do not wait).", "SECONDS")
FORMAT = ("--format", "json (default) or table.", "json|table")


def typer_types() -> dict[str, Any]:
    """The common options as Typer annotations (imports typer: only the Typer app calls it)."""
    from typing import Annotated

    import typer

    from unitmgr import completion

    def annotated(flag: str, help_text: str, metavar: str) -> Any:
        complete = completion.for_flag(flag)
        return Annotated[
            str, typer.Option(flag, help=help_text, metavar=metavar, autocompletion=complete)
        ]

    return {
        "Repo": annotated(*REPO),
        "LockTimeout": annotated(*LOCK_TIMEOUT),
        "Format": annotated(*FORMAT),
    }


def __getattr__(name: str) -> Any:
    """`from unitmgr.commands.common import Repo` (a command declaring its own signature).
    Any other name is refused before typer is imported: the import system asks for `__path__`."""
    if name in ("Repo", "LockTimeout", "Format"):
        return typer_types()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _parameter(item: Field, annotation: Any) -> Any:
    import inspect
    from typing import Annotated

    import typer

    from unitmgr import completion

    flag, help_text, metavar = (item.metadata[key] for key in ("flag", "help", "metavar"))
    default: Any = inspect.Parameter.empty
    declared: Any
    if item.metadata.get("argument"):
        declared = typer.Argument(help=help_text, metavar=metavar, show_default=False)
    else:
        complete = completion.for_flag(flag)
        declared = typer.Option(flag, help=help_text, metavar=metavar, autocompletion=complete)
    if item.default_factory is not MISSING:
        annotation, default = annotation | None, None  # Typer gives None for an absent list
    elif item.default is not MISSING:
        default = item.default
    return inspect.Parameter(
        item.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[annotation, declared],
    )


class Declared:
    """A command declared by its options class: `invoke` runs it from the keyword arguments
    the Typer command would get (unitmgr/entry.py calls it without Typer), `typer_command`
    builds that Typer command."""

    def __init__(
        self,
        options_type: type[Any],
        call: Callable[..., Result],
        *,
        help_text: str,
        lock_free: bool,
        formats: bool,
    ) -> None:
        self.options_type = options_type
        self.call = call
        self.help_text = help_text
        self.lock_free = lock_free
        self.formats = formats

    def invoke(self, **given: Any) -> Result:
        repo = given.pop("repo")
        if self.lock_free:
            from unitmgr.quick_reads import lock_free as check_lock_timeout

            check_lock_timeout(given.pop("lock_timeout"))
        extra = {}
        if self.formats:  # a bad --format is refused before any work
            from unitmgr.quick_reads import output_format

            extra["output_format"] = output_format(given.pop("output_format"))
        for item in fields(self.options_type):
            if item.default_factory is not MISSING:
                given[item.name] = list(given[item.name] or [])
        return self.call(repo, self.options_type(**given), **extra)

    def typer_command(self) -> Callable[..., Result]:
        """The Typer command: every field is an option (its flag, default and help from the
        field's metadata; an `argument` field is positional), plus `--repo`; a `lock_free`
        command also takes `--lock-timeout` (a lead passes it to every command) and checks it,
        and a command that `formats` takes `--format`."""
        import inspect
        import typing

        types = typer_types()
        hints = typing.get_type_hints(self.options_type)
        declared_fields = fields(self.options_type)
        parameters = [_parameter(item, hints[item.name]) for item in declared_fields]
        leading = [("repo", ".", types["Repo"])]
        if self.lock_free:
            leading.append(("lock_timeout", "30", types["LockTimeout"]))
        trailing = [("output_format", "json", types["Format"])] if self.formats else []
        # `--repo` comes before the options every command shares, as `--help` has always listed
        # it, and `--format` after them.
        names = [item.name for item in declared_fields]
        at = names.index("lock_timeout") if "lock_timeout" in names else len(names)

        def declared(name: str, default: str, hint: Any) -> inspect.Parameter:
            return inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint
            )

        parameters[at:at] = [declared(*item) for item in leading]
        parameters += [declared(*item) for item in trailing]

        def command(**given: Any) -> Result:
            return self.invoke(**given)

        command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        command.__doc__ = self.help_text
        command.__name__ = self.call.__name__.lstrip("_")
        return command


def declare(
    options_type: type[Any],
    call: Callable[..., Result],
    *,
    help_text: str,
    lock_free: bool = False,
    formats: bool = False,
) -> Declared:
    """The command for `options_type`; it calls `call(repo, options)` (plus `output_format=`)."""
    return Declared(options_type, call, help_text=help_text, lock_free=lock_free, formats=formats)


def typer_callback(command: Any) -> Callable[..., Any]:
    """What unitmgr/cli.py registers with Typer for a command module's `command`."""
    return command.typer_command() if isinstance(command, Declared) else command


def rendered(document: dict[str, Any], output_format: str, table: Callable[[Any], str]) -> Result:
    """The document, or its table for `--format table`."""
    return Rendered(table(document)) if output_format == "table" else document
