"""Copy a unit's pair state out of its worktree before the worktree is removed (SPEC 3.9).

Everything under `pair/` is copied to `orchestrate/archive/<unit-id>-<UTC stamp>/`: sessions,
receipts, prompts, replies and markers; each transcript in full up to 5 MB, else its last 1 MB
(prefixed with a note saying how much was cut). Directories 0700, files 0600.
"""

from __future__ import annotations

import os
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


def archive_pair_state(
    registry: Registry, unit_id: str, state_dir: Path, *, destination: Path | None = None
) -> Path | None:
    """Copy `state_dir` into the archive (`destination`, else a new dir); None when there is
    nothing to copy. Copying again into the same `destination` rewrites the same files."""
    if not state_dir.is_dir():
        return None
    destination = destination or new_archive_dir(registry, unit_id)
    locks = {path.name for path in pair_api.paths_at(state_dir).lock_files}  # not state
    for source in _regular_files(state_dir):
        if source.name in locks or source.name.endswith(".tmp"):
            continue
        target = destination / source.relative_to(state_dir)
        ensure_private_dir(target.parent)
        _copy(source, target, transcript=pair_api.is_log(source.name))
    return destination


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


def _copy(source: Path, target: Path, *, transcript: bool) -> None:
    size = source.stat().st_size
    # O_NOFOLLOW: a file swapped for a link since the walk is not followed either.
    source_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(target, flags, FILE_MODE)
    with os.fdopen(fd, "wb") as out, os.fdopen(source_fd, "rb") as handle:
        if transcript and size > FULL_TRANSCRIPT_LIMIT:
            handle.seek(size - TRANSCRIPT_TAIL)
            out.write(
                f"[unitmgr archive: first {size - TRANSCRIPT_TAIL} of {size} bytes cut; "
                "the last 1 MB follows]\n".encode()
            )
        while chunk := handle.read(1024 * 1024):
            out.write(chunk)
