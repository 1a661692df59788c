"""`copy-files` (SPEC 3.3): the project config's `copy` list, copied from the repository's top
level into a new unit's worktree.

Only what git ignores is copied (a `.env`, a `.venv`): a tracked path is already in the
worktree, and an untracked, unignored one would become the unit's change. Files are copied,
never linked. The list is untrusted input (SPEC 2.5): no path is followed out of the source
tree or written out of the new worktree through a symbolic link, and a symlink is copied as a
symlink only when its target is relative and stays inside the tree (an absolute link, or one
climbing out, would tie the unit to files it does not own). FIFOs, sockets and devices are
skipped. Every skip carries its reason, for the journal.

This module never removes anything but what an earlier, interrupted copy of the same path left
in the new worktree; the worktree's removal undoes the rest.
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from registry.light_dataclass import dataclass, field
from unitmgr import git
from unitmgr.workspace import is_inside, realpath


@dataclass
class CopyReport:
    copied: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {path, why}

    def skip(self, path: str, why: str) -> None:
        self.skipped.append({"path": path, "why": why})


def copy_listed(listed: list[str], *, source: Path, target: Path) -> CopyReport:
    """Copy each ignored path of `listed` from `source` (the top level) into `target`."""
    report = CopyReport()
    candidates = []
    for entry in listed:
        path = posixpath.normpath(entry)
        why = _unsafe(path, source=source, target=target)
        if why is not None:
            report.skip(path, why)
        elif not os.path.lexists(source / path):
            report.skip(path, "absent in the main worktree")
        else:
            candidates.append(path)
    tracked = git.tracked_paths(candidates, cwd=source)
    ignored = git.ignored_paths([p for p in candidates if p not in tracked], cwd=source)
    for path in candidates:
        if path in tracked:
            report.skip(path, "tracked by git: the worktree has it already")
        elif path not in ignored:
            report.skip(path, "not ignored by git: copy only ignored files")
        else:
            _copy_entry(path, source=source, target=target, report=report)
    return report


def _unsafe(path: str, *, source: Path, target: Path) -> str | None:
    """Why `path` must not be copied before looking at it, or None."""
    if path.startswith("/") or path == "." or ".." in path.split("/"):
        return "not a relative path inside the repository"
    if path == ".git" or path.startswith(".git/"):
        return "inside .git"
    for root, label in ((source, "main worktree"), (target, "new worktree")):
        parent = realpath(os.path.dirname(root / path))
        if not is_inside(parent, realpath(root)):
            return f"its directory leads out of the {label} through a symbolic link"
    return None


def _link_stays_inside(link: Path, root: Path) -> bool:
    text = os.readlink(link)
    if os.path.isabs(text):
        return False
    relative = os.path.relpath(os.path.dirname(link), root)
    resolved = posixpath.normpath(posixpath.join(relative, text))
    return resolved != ".." and not resolved.startswith("../")


def _copy_entry(path: str, *, source: Path, target: Path, report: CopyReport) -> None:
    origin, destination = source / path, target / path
    if os.path.lexists(destination):
        # Only an earlier, interrupted copy puts an ignored path here (setup runs later).
        if destination.is_dir() and not destination.is_symlink():
            import shutil  # only when a copy is made (SPEC 7: off create's start-up)

            shutil.rmtree(destination)
        else:
            destination.unlink()
    destination.parent.mkdir(parents=True, exist_ok=True)
    mode = os.lstat(origin).st_mode
    if stat.S_ISDIR(mode):
        _copy_tree(origin, destination, root=source, report=report, shown=path)
        report.copied.append(path)
    elif _copy_one(origin, destination, root=source, report=report, shown=path):
        report.copied.append(path)


def _copy_one(
    origin: Path, destination: Path, *, root: Path, report: CopyReport, shown: str
) -> bool:
    mode = os.lstat(origin).st_mode
    if stat.S_ISLNK(mode):
        if not _link_stays_inside(origin, root):
            report.skip(shown, "a symbolic link pointing outside the worktree")
            return False
        os.symlink(os.readlink(origin), destination)
        return True
    if stat.S_ISREG(mode):
        import shutil

        shutil.copy2(origin, destination, follow_symlinks=False)
        return True
    report.skip(shown, "not a regular file, directory or symbolic link")
    return False


def _copy_tree(
    origin: Path, destination: Path, *, root: Path, report: CopyReport, shown: str
) -> None:
    destination.mkdir(exist_ok=True)
    import shutil

    shutil.copystat(origin, destination, follow_symlinks=False)
    with os.scandir(origin) as entries:
        for entry in sorted(entries, key=lambda item: item.name):
            child, child_shown = Path(entry.path), f"{shown}/{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                _copy_tree(
                    child, destination / entry.name, root=root, report=report, shown=child_shown
                )
            else:
                _copy_one(
                    child, destination / entry.name, root=root, report=report, shown=child_shown
                )
