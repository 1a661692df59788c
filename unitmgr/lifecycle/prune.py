"""`unit prune [--older-than DURATION=30d] [--dry-run]` (SPEC 3.18): remove old archives.

Dismantle and a rolled-back create copy a unit's pair state to
`orchestrate/archive/<unit-id>-<UTC stamp>[-N]/` (unitmgr/lifecycle/archive.py). Prune removes
the ones whose stamp is older than the duration, never one of a unit still recorded (a
dismantle that has archived but not yet deleted its record, a unit re-created under the same
id), under the registry lock; `--dry-run` takes no lock, writes nothing and shows the same list.

The archive is in the git common dir, which an executor can write (SPEC 8): every entry is
hostile. Nothing here follows a symbolic link — not `orchestrate/` or `archive/` themselves
(opened `O_NOFOLLOW` from the common dir, then used only through that descriptor), not an
entry, not anything inside one — so a planted `archive/x-20200101T000000Z -> /home/user` is
reported and left, and nothing outside the archive root is ever removed. The walk is bounded
(entries in the root, files and depth per archive): an archive past a bound is kept and named,
never half-measured. Only names that parse as an archive's are candidates; anything else in the
root is listed as ignored. Each removal appends one `pruned` event to `events.jsonl`.

Listings are bounded as they are read (`os.scandir`, stopping past the cap), never read whole
and then cut: a planted directory of a million entries costs the cap. A removal is claimed
first: the archive is renamed to `.pruning-<name>` in the same root (one atomic rename), then
removed. A prune killed mid-removal leaves only such a claimed name, which is never an archive
and which the next prune removes first (`resumed: true`): nothing is ever half an archive.
"""

from __future__ import annotations

import calendar
import errno
import os
import re
import stat
import time

from registry.errors import UsageError
from registry.timeutil import ago
from unitmgr import validation
from unitmgr.config import load_config
from unitmgr.lifecycle.journal import _crash_hook
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_OLDER_THAN = "30d"
MAX_ROOT_ENTRIES = 10_000  # entries of archive/ looked at in one run; the rest wait
MAX_ARCHIVE_ENTRIES = 100_000  # files and directories in one archive
MAX_DEPTH = 32  # directories below an archive's own (the pair state is two or three deep)
MAX_LISTED = 100  # ignored or kept entries named in the document; the rest are counted

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"([0-9]{1,6})([smhdw])")
_ARCHIVE = re.compile(r"(?P<unit>.+)-(?P<stamp>[0-9]{8}T[0-9]{6}Z)(?:-[0-9]{1,6})?")
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
CLAIMED = ".pruning-"  # an archive being removed: renamed first, so a crash leaves only this


def bounded_names(fd: int, cap: int) -> tuple[list[str], bool]:
    """At most `cap` names of the directory `fd`, sorted, and whether there were more: read
    entry by entry, so a huge directory costs `cap` entries, not its size."""
    names: list[str] = []
    with os.scandir(fd) as entries:  # scandir reads a duplicate of `fd`, and closes it
        for entry in entries:
            if len(names) == cap:
                return sorted(names), True
            names.append(entry.name)
    return sorted(names), False


def duration_seconds(value: str) -> int:
    """`30d`, `12h`, `90m`, `45s`, `2w` in seconds; anything else is exit 2."""
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        raise UsageError(
            "invalid-duration",
            f"--older-than must be a number and a unit (s, m, h, d or w), such as 30d, got "
            f"{value!r}",
            next_step="unit prune --older-than 30d --dry-run",
        )
    return int(match.group(1)) * _UNITS[match.group(2)]


class TooLarge(Exception):
    """An archive past a walk bound: kept whole, never half-removed."""


def run(repo: str, *, older_than: str, dry_run: bool, lock_timeout: str) -> dict[str, Any]:
    seconds = duration_seconds(older_than)
    deadline_seconds = validation.lock_timeout(lock_timeout)
    workspace = Workspace.open(repo)
    # It uses no key, yet changes something: a bad config is refused as for every such command
    # (SPEC 3.16), --dry-run included, since it refuses exactly as the real command would.
    load_config(workspace.toplevel, workspace.common_git_dir)
    registry = workspace.registry
    if dry_run:
        document = _prune(workspace, seconds, remove=False)
    else:
        from registry.locks import Deadline

        lock = registry.registry_lock(command=f"unit prune --older-than {older_than}")
        with lock.hold(Deadline(deadline_seconds)):
            document = _prune(workspace, seconds, remove=True)
    return {
        "ok": True,
        **({"dry_run": True} if dry_run else {}),
        "older_than": older_than,
        **document,
    }


def _prune(workspace: Workspace, older_than: float, *, remove: bool) -> dict[str, Any]:
    registry = workspace.registry
    archive_dir = registry.archive_dir
    result: dict[str, Any] = {
        "archive_dir": str(archive_dir),
        "pruned": [],
        "bytes_freed": 0,
        "kept": [],
        "ignored": [],
        "younger": 0,
    }
    root = _open_archive_root(workspace)
    if isinstance(root, str):
        if root != "missing":
            result["ignored"].append({"path": str(archive_dir), "why": root})
        return result
    try:
        names, more = bounded_names(root, MAX_ROOT_ENTRIES)
        if more:
            result["truncated"] = {"looked_at": MAX_ROOT_ENTRIES, "more": True}
        recorded = set(registry.unit_ids())
        now = time.time()
        for name in names:
            if name.startswith(CLAIMED):
                _resume(root, name, remove, result, workspace)
                continue
            _one(root, name, recorded, now, older_than, remove, result, workspace)
    finally:
        os.close(root)
    for key in ("kept", "ignored"):
        if len(result[key]) > MAX_LISTED:
            result[f"{key}_not_listed"] = len(result[key]) - MAX_LISTED
            del result[key][MAX_LISTED:]
    return result


def _one(
    root: int,
    name: str,
    recorded: set[str],
    now: float,
    older_than: float,
    remove: bool,
    result: dict[str, Any],
    workspace: Workspace,
) -> None:
    path = str(workspace.registry.archive_dir / name)
    match = _ARCHIVE.fullmatch(name)
    moment = _stamp_epoch(match.group("stamp")) if match else None
    if match is None or moment is None:
        result["ignored"].append({"path": path, "why": "not an archive's name"})
        return
    try:
        found = os.lstat(name, dir_fd=root)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(found.st_mode):
        what = "a symbolic link" if stat.S_ISLNK(found.st_mode) else "not a directory"
        result["ignored"].append({"path": path, "why": f"{what}: never followed or removed"})
        return
    age = now - moment
    if age < older_than:
        result["younger"] += 1
        return
    unit_id = match.group("unit")
    # A unit id may itself end in what looks like a stamp: any recorded id the name could
    # belong to keeps it.
    owner = next((unit for unit in recorded if name.startswith(unit + "-")), None)
    if owner is not None:
        result["kept"].append({"path": path, "unit_id": owner, "why": "unit still recorded"})
        return
    try:
        size, _ = _walk(root, name, remove=False)  # the bounds, before anything is removed
        if remove:
            os.rename(name, CLAIMED + name, src_dir_fd=root, dst_dir_fd=root)
            _crash_hook("prune", "claimed", "done")
            _walk(root, CLAIMED + name, remove=True)
    except TooLarge as error:
        result["kept"].append({"path": path, "unit_id": unit_id, "why": str(error)})
        return
    except OSError as error:
        # Swapped or changed under the walk (an executor's race): left as it now is.
        why = f"could not {'remove' if remove else 'read'} it: {error.strerror or error}"
        result["kept"].append({"path": path, "unit_id": unit_id, "why": why})
        return
    entry = {
        "path": path,
        "unit_id": unit_id,
        "age": age_text(age),
        "age_seconds": int(age),
        "bytes": size,
    }
    result["pruned"].append(entry)
    result["bytes_freed"] += size
    if remove:
        workspace.registry.append_event(
            {
                "command": "prune",
                "step": "pruned",
                "status": "done",
                "unit": unit_id,
                "detail": {"path": path, "bytes": size, "age": age_text(age)},
            }
        )


def _resume(
    root: int, name: str, remove: bool, result: dict[str, Any], workspace: Workspace
) -> None:
    """Finish removing an archive an earlier prune claimed and was killed removing (or, with
    `--dry-run`, say it would). A link or a file under that name is only ever unlinked."""
    path = str(workspace.registry.archive_dir / name)
    original = name[len(CLAIMED) :]
    match = _ARCHIVE.fullmatch(original)
    unit_id = match.group("unit") if match else original
    try:
        found = os.lstat(name, dir_fd=root)
        if not stat.S_ISDIR(found.st_mode):
            size = 0
            if remove:
                os.unlink(name, dir_fd=root)
        else:
            size, _ = _walk(root, name, remove=remove)
    except FileNotFoundError:
        return
    except (TooLarge, OSError) as error:
        why = str(error) if isinstance(error, TooLarge) else f"could not remove it: {error}"
        result["kept"].append({"path": path, "unit_id": unit_id, "why": why})
        return
    entry = {"path": path, "unit_id": unit_id, "bytes": size, "resumed": True}
    result["pruned"].append(entry)
    result["bytes_freed"] += size
    if remove:
        workspace.registry.append_event(
            {
                "command": "prune",
                "step": "pruned",
                "status": "done",
                "unit": unit_id,
                "detail": {"path": path, "bytes": size, "resumed": True},
            }
        )


def age_text(seconds: float) -> str:
    """An archive's age for a person: `42d03h` past a day, else `ago`'s `3h05m`."""
    days, rest = divmod(int(seconds), 86400)
    return f"{days}d{rest // 3600:02d}h" if days else ago(seconds)


def _stamp_epoch(text: str) -> float | None:
    try:
        parsed = time.strptime(text, "%Y%m%dT%H%M%SZ")
    except ValueError:
        return None
    return float(calendar.timegm(parsed))


def _open_archive_root(workspace: Workspace) -> int | str:
    """A descriptor of `orchestrate/archive/`, opened from the common dir without following a
    link at either step; else why not ("missing" when there is no archive yet)."""
    registry = workspace.registry
    try:
        common = os.open(workspace.common_git_dir, _DIRECTORY_FLAGS & ~os.O_NOFOLLOW)
    except OSError as error:
        return f"the git common dir cannot be opened: {error.strerror}"
    try:
        parent = common
        for part in (registry.root.name, registry.archive_dir.name):
            try:
                opened = os.open(part, _DIRECTORY_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                return "missing"
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    return f"{part}/ is a symbolic link or no directory: never followed"
                return f"{part}/ cannot be opened: {error.strerror}"
            finally:
                if parent != common:
                    os.close(parent)
            parent = opened
        return parent
    finally:
        os.close(common)


def _walk(root: int, name: str, *, remove: bool) -> tuple[int, int]:
    """(bytes, entries) of the archive `name` in `root`, removing it when `remove`: depth
    first, one descriptor per level (at most MAX_DEPTH + 1 open), every directory opened
    `O_NOFOLLOW` relative to its parent's descriptor, a link removed as a link (never its
    target). Every listing is bounded by what is left of MAX_ARCHIVE_ENTRIES (names listed so
    far, visited or pending); past a bound it raises TooLarge — before removing anything, as
    the measuring walk runs first."""
    total_bytes = 0
    listed = 0

    def names_of(fd: int) -> list[str]:
        nonlocal listed
        names, more = bounded_names(fd, MAX_ARCHIVE_ENTRIES - listed)
        if more:
            raise TooLarge(f"more than {MAX_ARCHIVE_ENTRIES} entries: remove it by hand")
        listed += len(names)
        return names

    top = os.open(name, _DIRECTORY_FLAGS, dir_fd=root)
    # Each frame: (its descriptor, the names still to visit, its parent's descriptor, its name);
    # a directory is on the stack before it is listed, so a refusal still closes it.
    stack: list[tuple[int, list[str], int, str]] = [(top, [], root, name)]
    try:
        stack[-1][1].extend(names_of(top))
        while stack:
            fd, pending, parent, own_name = stack[-1]
            if not pending:
                stack.pop()
                os.close(fd)
                if remove:
                    os.rmdir(own_name, dir_fd=parent)
                continue
            child = pending.pop()
            found = os.lstat(child, dir_fd=fd)
            if stat.S_ISDIR(found.st_mode):
                if len(stack) > MAX_DEPTH:
                    raise TooLarge(f"nested deeper than {MAX_DEPTH}: remove it by hand")
                opened = os.open(child, _DIRECTORY_FLAGS, dir_fd=fd)
                stack.append((opened, [], fd, child))
                stack[-1][1].extend(names_of(opened))
                continue
            if stat.S_ISREG(found.st_mode):
                total_bytes += found.st_size
            if remove:
                os.unlink(child, dir_fd=fd)
    finally:
        for fd, *_ in stack:
            os.close(fd)
    return total_bytes, listed
