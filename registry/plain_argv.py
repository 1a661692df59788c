"""Parse a plainly spelled command line without Typer, or hand it over (SPEC 7 start-up).

Importing Typer (and the click it vendors) costs about five bare Python starts on its own, more
than SPEC 7 allows a whole `unit` or `pair` command. So each program stores, per command, what
its Typer command takes (`spec`: generated from the Typer app and checked against it by the
tests, see unitmgr/help_text.py and pair/help_text.py), and `parse` fills the keyword arguments
the Typer command would receive — for a command line spelled plainly, and only then:

- every option known, each given once (a repeatable one any number of times), a flag without
  `=`, a value as the next word or after `=`, never one that starts with `-`;
- a number's value ASCII digits (a float's with one dot);
- every required option and argument present;
- no `--`, no `-h`/`--help`, no word it does not know.

Anything else returns None and the caller runs Typer, which answers (or refuses) as always: this
module never guesses, so Typer stays the one definition of every refusal. It must not import
typing, typer or anything beyond the standard library's builtins.

`spec` is `{"options": {flag: [keyword, kind]}, "arguments": [keyword, ...], "defaults":
{keyword: value}, "required": [keyword, ...]}` with kind `value`, `int`, `float`, `flag` or
`multiple`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def _plain(value: str, kind: str) -> bool:
    """Whether `value` is one `kind` parses exactly as click does (digits, one dot for a float)."""
    if kind == "int":  # past 18 digits Typer decides (int() refuses 4300 digits with a trace)
        return value.isascii() and value.isdigit() and len(value) <= 18
    if kind == "float":
        whole, _, fraction = value.partition(".")
        return value.isascii() and (whole + fraction).isdigit() and len(value) <= 18
    return True


def parse(arguments: Sequence[str], spec: dict[str, Any]) -> dict[str, Any] | None:
    """The keyword arguments the Typer command gets for `arguments`, or None to hand over."""
    options: dict[str, list[str]] = spec["options"]
    positional: list[str] = list(spec.get("arguments", []))
    found: dict[str, Any] = {}
    words: list[str] = []
    index = 0
    while index < len(arguments):
        token = arguments[index]
        index += 1
        if not token.startswith("-"):
            words.append(token)
            continue
        name, equals, inline = token.partition("=")
        known = options.get(name)
        if known is None:
            return None  # -h, --help, --, an unknown option: Typer's
        keyword, kind = known
        if kind == "flag":
            if equals or keyword in found:
                return None
            found[keyword] = True
            continue
        if equals:
            value = inline
        elif index < len(arguments):
            value = arguments[index]
            index += 1
        else:
            return None
        if value.startswith("-") or not _plain(value, kind):
            return None
        if kind == "multiple":
            found.setdefault(keyword, []).append(value)
            continue
        if keyword in found:
            return None
        found[keyword] = int(value) if kind == "int" else float(value) if kind == "float" else value
    if len(words) != len(positional):
        return None
    found.update(zip(positional, words, strict=True))
    if any(keyword not in found for keyword in spec.get("required", [])):
        return None
    return {**spec.get("defaults", {}), **found}
