"""Copy a unit's pair state out of its worktree before the worktree is removed (SPEC 3.9).

Everything under `pair/` is copied to `orchestrate/archive/<unit-id>-<UTC stamp>/`: sessions,
receipts, prompts, replies and markers; each transcript in full up to 5 MB, else its last 1 MB
(prefixed with a note saying how much was cut). Directories 0700, files 0600.

The archive lies in the git common dir, which an executor can write (SPEC 8): a directory in it
may be a planted link (`ended -> ~/somewhere`). So the copy walks the destination by directory
descriptors, each opened `O_NOFOLLOW`, and never writes through a link; and `own_archive` is how
a dismantle tells a recorded archive of its own unit from one naming another unit's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pair import api as pair_api
from registry.atomic import FILE_MODE, ensure_private_dir
from registry.store import Registry
from registry.timeutil import stamp

FULL_TRANSCRIPT_LIMIT = 5 * 1024 * 1024
TRANSCRIPT_TAIL = 1024 * 1024


def new_archive_dir(registry: Registry, unit_id: str) -> Path:
    """A fresh `orchestrate/archive/<unit-id>-<UTC stamp>/` (0700)."""
    destination = registry.archive_dir / f"{unit_id}-{stamp()}"
    suffix = 1
    while destination.exists():
        suffix += 1
        destination = registry.archive_dir / f"{unit_id}-{stamp()}-{suffix}"
    ensure_private_dir(destination)
    return destination


def own_archive(registry: Registry, unit_id: str, recorded: str | None) -> bool:
    """Whether `recorded` (a record's `archive`, executor-writable) names an archive of this
    unit: a real directory (no link) directly in the archive root, named `<unit-id>-<stamp>` as
    `new_archive_dir` names them — never another unit's, never the root, never elsewhere."""
    if not recorded or not os.path.isabs(recorded) or os.path.normpath(recorded) != recorded:
        return False
    path = Path(recorded)
    name = re.escape(unit_id) + r"-[0-9]{8}T[0-9]{6}Z(?:-[0-9]{1,6})?"
    if not re.fullmatch(name, path.name):
        return False
    root = os.path.realpath(registry.archive_dir)
    return (
        os.path.realpath(path.parent) == root and not os.path.islink(path) and os.path.isdir(path)
    )


def archive_pair_state(
    registry: Registry, unit_id: str, state_dir: Path, *, destination: Path | None = None
) -> Path | None:
    """Copy `state_dir` into the archive (`destination`, else a new dir); None when there is
    nothing to copy. Copying again into the same `destination` rewrites the same files."""
    if not state_dir.is_dir():
        return None
    destination = destination or new_archive_dir(registry, unit_id)
    locks = {path.name for path in pair_api.paths_at(state_dir).lock_files}  # not state
    root = os.open(destination, _DIRECTORY_FLAGS)
    try:
        for source in _regular_files(state_dir):
            if source.name in locks or source.name.endswith(".tmp"):
                continue
            parts = source.relative_to(state_dir).parts
            parent = _private_subdir(root, parts[:-1])
            try:
                _copy(source, parts[-1], parent, transcript=pair_api.is_log(source.name))
            finally:
                if parent != root:
                    os.close(parent)
    finally:
        os.close(root)
    return destination


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _private_subdir(root: int, parts: tuple[str, ...]) -> int:
    """The directory `parts` below the descriptor `root`, made 0700 where missing, each step
    opened `O_NOFOLLOW`: a planted link in the path is an error (`ELOOP`/`ENOTDIR`), never
    followed. The caller closes what it gets unless it is `root`."""
    current = root
    for part in parts:
        try:
            os.mkdir(part, 0o700, dir_fd=current)
            os.chmod(part, 0o700, dir_fd=current, follow_symlinks=False)
        except FileExistsError:
            pass
        try:
            following = os.open(part, _DIRECTORY_FLAGS, dir_fd=current)
        finally:
            if current != root:
                os.close(current)
        current = following
    return current


def _regular_files(root: Path) -> list[Path]:
    """Regular files under `root`, never through a symlink: a link planted in the pair state
    (to a key file, another unit's state) is skipped, not copied into the archive."""
    found = []
    for directory, _, names in os.walk(root, followlinks=False):
        for name in names:
            path = Path(directory) / name
            if not path.is_symlink() and path.is_file():
                found.append(path)
    return sorted(found)


def _copy(source: Path, name: str, directory: int, *, transcript: bool) -> None:
    size = source.stat().st_size
    # O_NOFOLLOW: a file swapped for a link since the walk is not followed either.
    source_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, FILE_MODE, dir_fd=directory)
    except OSError:
        os.close(source_fd)
        raise
    with os.fdopen(fd, "wb") as out, os.fdopen(source_fd, "rb") as handle:
        if transcript and size > FULL_TRANSCRIPT_LIMIT:
            handle.seek(size - TRANSCRIPT_TAIL)
            out.write(
                f"[unitmgr archive: first {size - TRANSCRIPT_TAIL} of {size} bytes cut; "
                "the last 1 MB follows]\n".encode()
            )
        while chunk := handle.read(1024 * 1024):
            out.write(chunk)
