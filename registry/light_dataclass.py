"""`dataclass`, `field`, `fields`, `replace` and `MISSING` as `dataclasses` has them, without it.

SPEC 7: every command starts within 5x `python -c pass`, and importing `dataclasses` brings
`inspect` (with `ast`, `dis`, `tokenize`), while building each dataclass compiles its methods
with `exec` — for the forty-odd classes a command that reads a unit loads, together about as long
as a bare Python start. A class built here gets, from closures and no compiled code, what the
dataclasses in this project use: an `__init__` taking the fields (positionally in order unless
`kw_only`, by keyword always) with their defaults or default factories, `__post_init__`, the
`__repr__`, `__eq__` and `__hash__` a dataclass with the same options has, and read-only fields
for `frozen` (assignment raises `FrozenInstanceError`, an `AttributeError`, as there).

Fields are the class's annotations in order (strings, under `from __future__ import
annotations`), after those of its decorated bases; a `ClassVar` annotation is no field. mypy is
told these are the `dataclasses` names themselves (under TYPE_CHECKING), so it checks every
class as the dataclass it behaves as. Standard library builtins only; this module must not import
`dataclasses`, `typing` or `inspect` at run time.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    _Instance = TypeVar("_Instance")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class _FrozenInstanceError(AttributeError):
    """An assignment to a field of a frozen instance."""


class _Field:
    """One field: its name, default or default factory, and whether `__init__` takes it by
    keyword only and `__repr__` / `__eq__` show / compare it."""

    __slots__ = ("compare", "default", "default_factory", "kw_only", "name", "repr")

    def __init__(
        self,
        *,
        default: Any = _MISSING,
        default_factory: Any = _MISSING,
        repr: bool = True,
        compare: bool = True,
        kw_only: Any = _MISSING,
    ) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.kw_only = kw_only

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def _field(
    *,
    default: Any = _MISSING,
    default_factory: Any = _MISSING,
    repr: bool = True,
    compare: bool = True,
    kw_only: Any = _MISSING,
) -> Any:
    return _Field(
        default=default,
        default_factory=default_factory,
        repr=repr,
        compare=compare,
        kw_only=kw_only,
    )


def _is_class_var(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return isinstance(text, str) and text.startswith(("ClassVar", "typing.ClassVar"))


def _own_fields(cls: type[Any], kw_only: bool) -> list[_Field]:
    found = []
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 (inspect is what this avoids)
    for name, annotation in own.items():
        if _is_class_var(annotation):
            continue
        value = cls.__dict__.get(name, _MISSING)
        item = value if isinstance(value, _Field) else _Field(default=value)
        item.name = name
        if item.kw_only is _MISSING:
            item.kw_only = kw_only
        if isinstance(value, _Field):
            if item.default is _MISSING:
                delattr(cls, name)  # as dataclasses: no class attribute for a field without one
            else:
                setattr(cls, name, item.default)
        found.append(item)
    return found


def _build(cls: type[Any], *, frozen: bool, kw_only: bool, eq: bool) -> type[Any]:
    merged: dict[str, _Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for item in base.__dict__.get("__light_dataclass_fields__", ()):
            merged[item.name] = item
    for item in _own_fields(cls, kw_only):
        merged[item.name] = item
    every = tuple(merged.values())
    cls.__light_dataclass_fields__ = every
    positional = [item for item in every if not item.kw_only]
    names = frozenset(item.name for item in every)
    shown = tuple(item.name for item in every if item.repr)
    compared = tuple(item.name for item in every if item.compare)
    post_init = getattr(cls, "__post_init__", None) is not None
    assign = object.__setattr__

    def __init__(self: Any, *args: Any, **given: Any) -> None:
        if len(args) > len(positional):
            raise TypeError(
                f"{cls.__name__}.__init__() takes {len(positional) + 1} positional arguments "
                f"but {len(args) + 1} were given"
            )
        for item, value in zip(positional, args, strict=False):
            if item.name in given:
                raise TypeError(
                    f"{cls.__name__}.__init__() got multiple values for argument {item.name!r}"
                )
            given[item.name] = value
        unexpected = [name for name in given if name not in names]
        if unexpected:
            raise TypeError(
                f"{cls.__name__}.__init__() got an unexpected keyword argument {unexpected[0]!r}"
            )
        for item in every:
            value = given.get(item.name, _MISSING)
            if value is _MISSING:
                if item.default is not _MISSING:
                    value = item.default
                elif item.default_factory is not _MISSING:
                    value = item.default_factory()
                else:
                    raise TypeError(
                        f"{cls.__name__}.__init__() missing 1 required argument: {item.name!r}"
                    )
            assign(self, item.name, value)
        if post_init:
            self.__post_init__()

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in compared)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, name) for name in compared))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if name in names:
            raise _FrozenInstanceError(f"cannot assign to field {name!r}")
        assign(self, name, value)

    def __delattr__(self: Any, name: str) -> None:
        if name in names:
            raise _FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    own = cls.__dict__
    # As dataclasses: a method the class defines itself is kept, and without its own `__hash__`
    # an `eq` class hashes its fields when frozen and is unhashable when not.
    methods: dict[str, Any] = {}
    if "__init__" not in own:
        methods["__init__"] = __init__
    if "__repr__" not in own:
        methods["__repr__"] = __repr__
    if eq and "__eq__" not in own:
        methods["__eq__"] = __eq__
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if eq and not explicit_hash:
        methods["__hash__"] = __hash__ if frozen else None
    if frozen:
        methods["__setattr__"] = __setattr__
        methods["__delattr__"] = __delattr__
    for name, method in methods.items():
        setattr(cls, name, method)
    return cls


def _dataclass(
    cls: type[Any] | None = None, *, frozen: bool = False, kw_only: bool = False, eq: bool = True
) -> Any:
    """`@dataclass`, `@dataclass(frozen=True)`, `@dataclass(kw_only=True)` as dataclasses."""

    def wrap(target: type[Any]) -> type[Any]:
        return _build(target, frozen=frozen, kw_only=kw_only, eq=eq)

    return wrap if cls is None else wrap(cls)


def _fields(class_or_instance: Any) -> tuple[_Field, ...]:
    """The fields of a class built here (or of its instance), in order."""
    found: tuple[_Field, ...] = class_or_instance.__light_dataclass_fields__
    return found


def _replace(instance: _Instance, **changes: Any) -> _Instance:
    """A copy of `instance` with `changes`, through its `__init__` (as dataclasses.replace)."""
    values = {item.name: getattr(instance, item.name) for item in _fields(instance)}
    made: _Instance = type(instance)(**{**values, **changes})
    return made


if TYPE_CHECKING:
    from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields, replace
else:
    MISSING = _MISSING
    FrozenInstanceError = _FrozenInstanceError
    dataclass = _dataclass
    field = _field
    fields = _fields
    replace = _replace

__all__ = ["MISSING", "FrozenInstanceError", "dataclass", "field", "fields", "replace"]
