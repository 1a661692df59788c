"""POSIX paths as text, spelled as pathlib spells them, for the reads that must not import it.

`pathlib`'s import (with `urllib.parse` and `ipaddress`, for `as_uri`) is several percent of
the empty-registry reads' budget (SPEC 7: at most 3x `python -c pass`). Those reads only need
to name a few paths and stat them, so they work on text: `joined(*parts)` is
`str(PurePosixPath(*parts))` to the character (tests/test_pathtext.py compares the two), and a
Path made later from that text is the Path the old code made.
"""

from __future__ import annotations

import os


def joined(*parts: str) -> str:
    """`str(PurePosixPath(*parts))`: the last absolute part restarts the path, empty and `.`
    components are dropped, `..` is kept, and exactly two leading slashes stay two."""
    root = ""
    names: list[str] = []
    for part in reversed(parts):
        if not part:
            continue
        stripped = part.lstrip("/")
        names[:0] = [name for name in stripped.split("/") if name and name != "."]
        if len(stripped) != len(part):
            root = "//" if len(part) - len(stripped) == 2 else "/"
            break
    return root + "/".join(names) or "."


def home() -> str:
    """`str(Path.home())`: refused as pathlib refuses a home it cannot determine."""
    found = os.path.expanduser("~")
    if found[:1] == "~":
        raise RuntimeError("Could not determine home directory.")
    return joined(found)


def expanded(text: str) -> str:
    """`str(Path(text).expanduser())`."""
    path = joined(text)
    if path[:1] != "~":
        return path
    first, slash, rest = path.partition("/")
    found = os.path.expanduser(first)
    if found[:1] == "~":
        raise RuntimeError("Could not determine home directory.")
    return joined(found, rest) if slash else joined(found)


def resolved(text: str) -> str:
    """`str(Path(text).resolve())` for an absolute `text` (non-strict: a symlink loop is
    refused, as pathlib refuses it)."""
    import errno

    real = os.path.realpath(text)
    try:
        os.stat(real)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RuntimeError(f"Symlink loop from {error.filename!r}") from None
    return joined(real)
