"""`setup_baseline` (SPEC 3.3): what a unit's `--setup` left behind, so that it never counts as
the unit's change.

After setup, every untracked, non-ignored file in the worktree is recorded with a fingerprint
(`sha256`, plus size and mtime for a cheap first look). `unit scope`, `unit verify`'s dirty
check and `status --all`'s `overlaps` and dirty counts then ignore exactly those paths while
their content is unchanged; a changed (or replaced) baseline file counts again.

The record is untrusted input (SPEC 2.5): a baseline entry is only ever read and hashed, never
removed or written, and an entry that is not a relative path inside the worktree, or whose
fingerprint is malformed, simply does not match. This module knows no lock and writes nothing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from registry.records import UnitRecord
from unitmgr import git

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

MAX_BASELINE_FILES = 10_000  # beyond this, setup's extra files count as changes (decisions.md)


def fingerprint(worktree: Path, name: str) -> dict[str, Any] | None:
    """`{sha256, size, mtime_ns}` of a regular file or a symlink (its target text), else None."""
    import hashlib  # only when a baseline is taken or checked (status --all stays light)

    path = worktree / name
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            digest = hashlib.sha256(b"symlink:" + os.fsencode(os.readlink(path)))
        elif stat.S_ISREG(info.st_mode):
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
        else:
            return None
    except OSError:
        return None
    return {"sha256": digest.hexdigest(), "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def take(worktree: Path) -> dict[str, dict[str, Any]]:
    """The baseline of `worktree` now: its untracked, non-ignored files and their fingerprints."""
    baseline: dict[str, dict[str, Any]] = {}
    for name in sorted(git.untracked_files(worktree))[:MAX_BASELINE_FILES]:
        found = fingerprint(worktree, name)
        if found is not None:
            baseline[name] = found
    return baseline


def _safe(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and not name.startswith("/") and ".." not in parts and ".git" not in parts


def unchanged(record: UnitRecord, worktree: Path, *, by_stat: bool = False) -> set[str]:
    """The baseline paths whose content is what setup left. `by_stat` trusts an unchanged size
    and mtime without hashing (the status views); the gates (scope, verify) always hash."""
    baseline = record.setup_baseline
    if not isinstance(baseline, dict):
        return set()
    found = set()
    for name, recorded in baseline.items():
        if not isinstance(name, str) or not isinstance(recorded, dict) or not _safe(name):
            continue
        if by_stat:
            try:
                info = os.lstat(worktree / name)
            except OSError:
                continue
            if (info.st_size, info.st_mtime_ns) == (recorded.get("size"), recorded.get("mtime_ns")):
                found.add(name)
                continue
        now = fingerprint(worktree, name)
        if now is not None and now["sha256"] == recorded.get("sha256"):
            found.add(name)
    return found


def without_baseline(entries: list[str], ignored: set[str]) -> list[str]:
    """`git status --porcelain` entries minus untracked (`??`) entries for `ignored` paths."""
    return [entry for entry in entries if not (entry.startswith("?? ") and entry[3:] in ignored)]


def dirty_entries(record: UnitRecord, worktree: Path) -> list[str]:
    """The worktree's status entries that count as changes: everything but an unchanged
    baseline file. With a baseline, untracked files are listed one by one (a directory setup
    filled would otherwise show as one entry that cannot be matched)."""
    if not record.setup_baseline:
        return git.status_entries(worktree)
    entries = git.status_entries(worktree, untracked="all")
    return without_baseline(entries, unchanged(record, worktree))
