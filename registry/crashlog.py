"""Where an unexpected error's traceback is kept: `<registry root>/logs/internal-<stamp>.log`.

An error no code raised on purpose (a bug, or a hostile file in the way) is reported as
`internal` — or, inside a journaled step, as `step-failed` — and its redacted traceback goes
both into the document's `detail` and into a log file (mode 0600, in a 0700 directory) whose
path the document names in `detail.log`, so the trace survives a lead that only keeps the
`reason`.

The registry root is whichever registry the process opened last (`remember`); a process that
opened none (a usage error, `pair` outside a unit) writes no log. It knows no git.
"""

from __future__ import annotations

import os

from registry.errors import ToolError

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from pathlib import Path

_opened: list[Path | str] = []  # the registry roots this process opened, last one last


def remember(root: Path | str) -> None:
    """The registry root this process works in (called when a registry is opened; the
    empty-registry reads give it as text, importing no pathlib)."""
    _opened.append(root)
    del _opened[:-1]


def unexpected_cause(error: BaseException) -> BaseException | None:
    """The first exception in `error`'s chain that is no `ToolError`: the unexpected one."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if not isinstance(current, ToolError):
            return current
        current = current.__cause__
    return None


def write(error: BaseException, command_line: str) -> Path | None:
    """Keep `error`'s redacted traceback (with its whole chain) in a new log file; its path,
    or None when no registry was opened or the log cannot be written (the document still
    carries the traceback)."""
    import traceback  # only on a failure: off every command's start-up path
    from pathlib import Path

    from registry.atomic import ensure_private_dir, write_text_atomic
    from registry.timeutil import iso_z

    root = Path(_opened[-1]) if _opened else None
    if root is None or not root.parent.is_dir():
        return None
    stamp = iso_z().replace(":", "").replace("-", "")
    text = f"command: {command_line}\nat: {iso_z()}\npid: {os.getpid()}\n\n" + "".join(
        traceback.format_exception(error)
    )
    try:
        directory = ensure_private_dir(root / "logs")
        path = directory / f"internal-{stamp}-{os.getpid()}.log"
        write_text_atomic(path, text)  # redacted on the way to disk
    except OSError:
        return None
    return path
