"""The machinery of unitmgr/options.py: `declared` makes a class of `option`, `repeatable`,
`required` (and positional) fields a frozen, keyword-only record, and `fields` lists them.

Not `dataclasses` (SPEC 7: every `unit` command imports its options at start-up, and importing
`dataclasses` brings `inspect`, `ast` and `dis`, while building twenty dataclasses compiles some
eighty functions — together about as long as a bare Python start). A record built here has the
`__init__`, `__repr__`, `__eq__` and `__hash__` of a frozen dataclass and refuses assignment;
mypy is told it is one (`declared` is `dataclass(frozen=True)` under TYPE_CHECKING), and
`fields` answers as `dataclasses.fields` would (`name`, `default`, `default_factory`,
`metadata`, with `MISSING` for none). Standard library builtins only.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    _Record = TypeVar("_Record")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """One option: its name (set by `declared`), default (or a factory for a fresh list) and
    metadata (`flag`, `help`, `metavar`, and `argument` for a positional one)."""

    __slots__ = ("default", "default_factory", "metadata", "name")

    def __init__(
        self,
        metadata: dict[str, Any],
        default: Any = MISSING,
        default_factory: Callable[[], Any] | Any = MISSING,
    ) -> None:
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.metadata = metadata


class FrozenOptions(AttributeError):
    """Options are read-only once built (as a frozen dataclass's fields are)."""


def _declared(cls: type[Any]) -> type[Any]:
    """`cls` with a keyword-only `__init__` filling every field, read-only attributes, and the
    `__repr__` and `__eq__` of a frozen dataclass."""
    found = []
    for name, value in list(vars(cls).items()):
        if isinstance(value, Field):
            value.name = name
            found.append(value)
            delattr(cls, name)  # the instance's own value, never the class's Field, is read
    fields = tuple(found)
    cls.__options_fields__ = fields

    def __init__(self: Any, **given: Any) -> None:
        for item in fields:
            if item.name in given:
                value = given.pop(item.name)
            elif item.default is not MISSING:
                value = item.default
            elif item.default_factory is not MISSING:
                value = item.default_factory()
            else:
                raise TypeError(f"{cls.__name__}() missing keyword argument {item.name!r}")
            object.__setattr__(self, item.name, value)
        if given:
            raise TypeError(f"{cls.__name__}() got unexpected keyword arguments {sorted(given)}")

    def __setattr__(self: Any, name: str, value: Any) -> None:
        raise FrozenOptions(f"cannot assign to field {name!r}")

    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{item.name}={getattr(self, item.name)!r}" for item in fields)
        return f"{cls.__qualname__}({shown})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, item.name) == getattr(other, item.name) for item in fields)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, item.name) for item in fields))

    for name, function in (
        ("__init__", __init__),
        ("__setattr__", __setattr__),
        ("__delattr__", __setattr__),
        ("__repr__", __repr__),
        ("__eq__", __eq__),
        ("__hash__", __hash__),
    ):
        setattr(cls, name, function)
    return cls


if TYPE_CHECKING:
    from dataclasses import dataclass

    declared = dataclass(frozen=True)
else:
    declared = _declared


def fields(cls: type[Any]) -> tuple[Field, ...]:
    """The fields of an options class, in declaration order."""
    found: tuple[Field, ...] = cls.__options_fields__
    return found


def replace(record: _Record, **changes: Any) -> _Record:
    """A copy of the options `record` with `changes` (as `dataclasses.replace`)."""
    values = {item.name: getattr(record, item.name) for item in fields(type(record))}
    return type(record)(**{**values, **changes})


def option(flag: str, help: str, default: Any = None, metavar: str | None = None) -> Any:
    """A field that is the command-line option `flag`; `metavar` says what its value is (`ID`,
    `PATH`, ...) in `--help`, and a flag (a bool default) has none."""
    return Field({"flag": flag, "help": help, "metavar": metavar}, default=default)


def repeatable(flag: str, help: str, metavar: str) -> Any:
    """A field that is the repeatable option `flag` (a list, empty when not given)."""
    return Field({"flag": flag, "help": help, "metavar": metavar}, default_factory=list)


def required(flag: str, help: str, metavar: str) -> Any:
    return Field({"flag": flag, "help": help, "metavar": metavar})
