"""What a forced dismantle keeps of what it discards (SPEC 3.9): the worktree's uncommitted
changes as `uncommitted.patch` and its untracked, not ignored files as `untracked.tar`, in the
unit's archive dir, with the commands that restore them.

The worktree is the executor's, so everything in it is hostile:
- files are opened beneath the worktree one path component at a time with `O_NOFOLLOW`, so a
  directory swapped for a symlink since git listed it is never followed out of the worktree;
- a symlink is stored as a link (its target text), never read through;
- a FIFO, socket or device is skipped and listed (`O_NONBLOCK`: a FIFO swapped in late never
  blocks the open);
- sizes are checked from `fstat` before a byte is read (a huge sparse file costs nothing), each
  file up to 5 MB, 50 MB in all, and the patch itself up to 50 MB; what is left out is listed;
- names come from `-z` listings (a newline in a name is just a character).

It writes only into the archive dir it is given, each file through a temp name and `os.replace`,
so a repeated archive step rewrites the same two files: never a duplicate, never a loss. It
never deletes, moves or changes anything in the worktree.
"""

from __future__ import annotations

import io
import os
import shlex
import stat
from pathlib import Path

from registry.atomic import FILE_MODE, remove_file
from unitmgr import git

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    import tarfile
    from typing import Any

PATCH_NAME = "uncommitted.patch"
TAR_NAME = "untracked.tar"
FILE_LIMIT = 5 * 1024 * 1024
TOTAL_LIMIT = 50 * 1024 * 1024
LEFT_OUT_LISTED = 100  # the record stays small (a record over 4 MiB is unreadable)


class _Entry:
    """One untracked path as `lstat` beneath the worktree saw it."""

    __slots__ = ("kind", "mode", "mtime", "name", "size", "why")

    def __init__(self, name: str) -> None:
        self.name = name
        self.kind = "skip"  # "file" | "link" | "skip"
        self.size = 0
        self.mode = 0o644
        self.mtime = 0.0
        self.why = ""


def _parent_fd(root_fd: int, name: str) -> tuple[int, str]:
    """A descriptor of `name`'s directory, reached beneath `root_fd` without following a link,
    and the last component. Raises OSError for a link or a non-directory on the way."""
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise OSError(f"not a plain relative path: {name!r}")
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            child = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def _examine(root_fd: int, name: str) -> _Entry:
    entry = _Entry(name)
    if name.endswith("/"):
        entry.why = "a directory git does not descend into (a nested repository)"
        return entry
    try:
        parent, leaf = _parent_fd(root_fd, name)
    except OSError:
        entry.why = "a directory on its path is a symlink or is gone"
        return entry
    try:
        info = os.lstat(leaf, dir_fd=parent)
    except OSError:
        entry.why = "gone"
        return entry
    finally:
        os.close(parent)
    entry.mode, entry.mtime = stat.S_IMODE(info.st_mode), info.st_mtime
    if stat.S_ISLNK(info.st_mode):
        entry.kind = "link"
    elif stat.S_ISREG(info.st_mode):
        entry.kind, entry.size = "file", info.st_size
        if info.st_size > FILE_LIMIT:
            entry.kind, entry.why = "skip", f"over 5 MB ({info.st_size} bytes)"
    else:
        entry.why = "not a regular file or symlink (FIFO, socket or device)"
    return entry


def _survey(worktree: Path) -> list[_Entry]:
    """Every untracked, not ignored path, classified, within the 50 MB total."""
    root_fd = os.open(worktree, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        entries = [_examine(root_fd, name) for name in sorted(git.untracked_files(worktree))]
    finally:
        os.close(root_fd)
    total = 0
    for entry in entries:
        if entry.kind == "file":
            if total + entry.size > TOTAL_LIMIT:
                entry.kind, entry.why = "skip", "over the 50 MB total"
            else:
                total += entry.size
    return entries


def _add_file(archive: tarfile.TarFile, root_fd: int, entry: _Entry) -> str | None:
    """Add one entry read beneath the worktree; the reason it was left out, or None."""
    import tarfile  # only when a forced dismantle saves files (SPEC 7: off every dry run)

    try:
        parent, leaf = _parent_fd(root_fd, entry.name)
    except OSError:
        return "a directory on its path is a symlink or is gone"
    try:
        info = tarfile.TarInfo(entry.name)
        info.mode, info.mtime = entry.mode, int(entry.mtime)
        if entry.kind == "link":
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(leaf, dir_fd=parent)
            archive.addfile(info)
            return None
        fd = os.open(
            leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent
        )
        with os.fdopen(fd, "rb") as handle:
            found = os.fstat(handle.fileno())
            if not stat.S_ISREG(found.st_mode):
                return "not a regular file or symlink (FIFO, socket or device)"
            data = handle.read(min(found.st_size, FILE_LIMIT) + 1)
        if len(data) > FILE_LIMIT or len(data) > entry.size:
            return "grew while it was saved"
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
        return None
    except OSError as error:
        return f"unreadable ({error.strerror or error})"
    finally:
        os.close(parent)


def _left_out(entries: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "left_out": [{"path": path, "why": why} for path, why in entries[:LEFT_OUT_LISTED]],
        "left_out_count": len(entries),
    }


def restore_commands(worktree: str, patch: str | None, tar: str | None) -> list[str]:
    """The commands that bring the saves back into a worktree at `worktree` (of the same head)."""
    commands = []
    if patch:
        commands.append(f"git -C {shlex.quote(worktree)} apply {shlex.quote(patch)}")
    if tar:
        commands.append(f"tar -x -f {shlex.quote(tar)} -C {shlex.quote(worktree)}")
    return commands


NO_HEAD = "HEAD does not resolve (its branch is gone): no commit to diff the changes against"


def save_discarded(worktree: Path, destination: Path) -> dict[str, Any]:
    """Write `uncommitted.patch` and `untracked.tar` into `destination`; `abandoned.saved`."""
    left_out: list[tuple[str, str]] = []
    patch: Path | None = destination / PATCH_NAME
    scratch = destination / f"{PATCH_NAME}.tmp"
    remove_file(scratch)  # a link planted under that name (the registry is writable) goes first
    if git.head_commit(worktree) is None:
        # HEAD names a branch deleted behind unitmgr's back: no commit to diff against.
        left_out.append((PATCH_NAME, NO_HEAD))
        patch_bytes = 0
    else:
        git.write_uncommitted_patch(worktree, scratch)
        patch_bytes = scratch.stat().st_size
    if patch_bytes == 0 or patch_bytes > TOTAL_LIMIT:
        if patch_bytes:
            left_out.append((PATCH_NAME, f"the patch is over 50 MB ({patch_bytes} bytes)"))
        remove_file(scratch)
        remove_file(destination / PATCH_NAME)
        patch = None
    else:
        os.chmod(scratch, FILE_MODE)
        os.replace(scratch, destination / PATCH_NAME)
    entries = _survey(worktree)
    left_out += [(entry.name, entry.why) for entry in entries if entry.kind == "skip"]
    saved_names: list[str] = []
    tar: Path | None = destination / TAR_NAME
    if any(entry.kind != "skip" for entry in entries):
        scratch = destination / f"{TAR_NAME}.tmp"
        remove_file(scratch)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(scratch, flags, FILE_MODE)
        root_fd = os.open(worktree, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        import tarfile  # only when there is something to save (SPEC 7)

        try:
            with (
                os.fdopen(fd, "wb") as out,
                tarfile.open(
                    fileobj=out,
                    mode="w",
                    format=tarfile.PAX_FORMAT,
                    encoding="utf-8",
                    errors="surrogateescape",
                ) as archive,
            ):
                for entry in entries:
                    if entry.kind == "skip":
                        continue
                    why = _add_file(archive, root_fd, entry)
                    if why is None:
                        saved_names.append(entry.name)
                    else:
                        left_out.append((entry.name, why))
        finally:
            os.close(root_fd)
        os.replace(scratch, destination / TAR_NAME)
    else:
        remove_file(destination / TAR_NAME)
        tar = None
    return {
        "patch": str(patch) if patch else None,
        "patch_bytes": patch_bytes if patch else 0,
        "untracked": str(tar) if tar else None,
        "untracked_files": len(saved_names),
        **_left_out(left_out),
        "restore_with": restore_commands(
            str(worktree), str(patch) if patch else None, str(tar) if tar else None
        ),
    }


def would_save(worktree: Path) -> dict[str, Any]:
    """What `save_discarded` would keep, read without writing anything (a dry run)."""
    headless = git.head_commit(worktree) is None
    patch_bytes = 0 if headless else git.uncommitted_patch_size(worktree)
    entries = _survey(worktree)
    left_out = [(entry.name, entry.why) for entry in entries if entry.kind == "skip"]
    if headless:
        left_out.insert(0, (PATCH_NAME, NO_HEAD))
    if patch_bytes > TOTAL_LIMIT:
        left_out.insert(0, (PATCH_NAME, f"the patch is over 50 MB ({patch_bytes} bytes)"))
    return {
        "patch_bytes": patch_bytes if patch_bytes <= TOTAL_LIMIT else 0,
        "untracked_files": sum(entry.kind != "skip" for entry in entries),
        **_left_out(left_out),
    }
