"""The repository a command runs against: its toplevel, common git dir and registry."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from registry.errors import UsageError
from registry.light_dataclass import dataclass
from registry.locks import Deadline
from registry.records import RecordTooNew, RecordUnreadable, UnitRecord
from registry.store import Registry, UnreadableRecord
from unitmgr import git

# A mutating command's worktree listing waits this long for `locks/fetch.lock` when its caller
# has no deadline of its own (the lock is held for one fetch or one `git worktree add`).
LISTING_LOCK_SECONDS = 60.0


@dataclass(frozen=True)
class Workspace:
    """The repository a command runs against: its toplevel, common git dir and registry."""

    toplevel: Path
    common_git_dir: Path
    registry: Registry

    @classmethod
    def open(cls, repo: str | Path) -> Workspace:
        return cls.at(git.resolve_repository(repo))

    @classmethod
    def at(cls, paths: git.RepositoryPaths) -> Workspace:
        """The workspace of a repository already resolved."""
        return cls(paths.toplevel, paths.common_git_dir, Registry(paths.common_git_dir))

    def read_record(self, unit_id: str) -> UnitRecord | None:
        """The record (`pair.state_dir` derived); exit 2 when it is unreadable or too new."""
        try:
            record = self.registry.read(unit_id)
        except RecordTooNew as error:
            raise UsageError(
                "record-too-new",
                f"unit {unit_id}'s record was written by a newer unitmgr: {error}",
                detail={"record_file": str(self.registry.record_path(unit_id))},
                next_step="unitmgr: a newer version (this one never rewrites that record)",
            ) from None
        except RecordUnreadable as error:
            raise UsageError(
                "record-unreadable",
                f"unit {unit_id}'s record is unreadable: {error}",
                detail={"record_file": str(self.registry.record_path(unit_id))},
                next_step=dismantle_label(unit_id),
            ) from None
        if record is not None:
            derive_pair_state_dirs(self.common_git_dir, [record])
        return record

    def scan(self) -> list[UnitRecord | UnreadableRecord]:
        """Every record, sorted by id, each `pair.state_dir` derived (`derive_pair_state_dirs`)."""
        entries = self.registry.scan()
        derive_pair_state_dirs(self.common_git_dir, entries)
        return entries

    def scan_each(self) -> Iterator[UnitRecord | UnreadableRecord]:
        """What `scan` returns, one record at a time as it is read (`status --all` starts a
        unit's git call while it reads the next record)."""
        from pair.paths import state_dir_for  # here: an empty registry's reads stay light

        admins: dict[str, Path] | None = None
        for unit_id in self.registry.unit_ids():
            entry = self.registry.read_any(unit_id)
            if entry is None:
                continue
            if isinstance(entry, UnitRecord) and entry.pair is not None:
                if admins is None:
                    admins = admin_dirs(self.common_git_dir)
                admin = admins.get(os.path.normpath(entry.worktree))
                entry.pair.state_dir = str(state_dir_for(admin)) if admin is not None else None
            yield entry

    def settled_worktrees(
        self, *, command: str, deadline: Deadline | None = None, write_nothing: bool = False
    ) -> list[git.WorktreeRow]:
        """`git worktree list` for a command that acts on what it reads (create's checks, the
        ownership proofs): under `locks/fetch.lock`, the lock `git worktree add` holds, so it
        never reads another create's half-written worktree (SPEC 3.3). The fetch lock is a leaf:
        nothing is acquired while holding it, so it adds no lock-order edge (SPEC 2.4); callers
        never hold the registry lock here. Lock-free readers use `git.list_worktrees`, which
        retries once instead.

        `write_nothing` (create's Phase A, which writes nothing, SPEC 3.3): while the lock file
        does not exist no `worktree add` of unitmgr's can be running (it would have made it), so
        the retrying lock-free listing is used instead of creating the file."""
        if write_nothing and not self.registry.fetch_lock_file.exists():
            return git.list_worktrees(cwd=self.toplevel)
        lock = self.registry.fetch_lock(command=command)
        with lock.hold(deadline or Deadline(LISTING_LOCK_SECONDS)):
            return git.list_worktrees(cwd=self.toplevel)


def admin_dirs(common_git_dir: Path) -> dict[str, Path]:
    """`worktrees/<name>/` of this common dir, keyed by the worktree path its `gitdir` names."""
    found: dict[str, Path] = {}
    root = common_git_dir / "worktrees"
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return found
    for name in names:
        admin = root / name
        try:
            gitdir = (admin / "gitdir").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if gitdir:
            found[os.path.normpath(os.path.dirname(gitdir))] = admin
    return found


def derive_pair_state_dirs(
    common_git_dir: Path, entries: list[UnitRecord | UnreadableRecord] | list[UnitRecord]
) -> None:
    """Set each record's `pair.state_dir` to the one its worktree's git dir implies (the admin
    dir git keeps under this common dir's `worktrees/`, plus pair's `state_dir_for`), or None
    when git keeps none: never the recorded path, which an executor can point anywhere
    (SPEC 8). Reads a few small files under the common dir; runs no git."""
    records = [e for e in entries if isinstance(e, UnitRecord) and e.pair is not None]
    if not records:
        return
    from pair.paths import state_dir_for  # here: an empty registry's reads stay light

    admins = admin_dirs(common_git_dir)
    for record in records:
        assert record.pair is not None
        admin = admins.get(os.path.normpath(record.worktree))
        record.pair.state_dir = str(state_dir_for(admin)) if admin is not None else None


def dismantle_label(unit_id: str, *, forced: bool = True) -> str:
    """`unit dismantle --unit ID [--force ID]`: the command named in refusals and lock holders."""
    return f"unit dismantle --unit {unit_id}" + (f" --force {unit_id}" if forced else "")


def realpath(path: str | Path) -> str:
    return os.path.realpath(path)


def is_inside(path: str, parent: str) -> bool:
    """Whether `path` is `parent` or below it (both real paths)."""
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


def real_target(path: Path) -> str:
    """The real path `path` will have: its nearest existing ancestor resolved, then the rest."""
    existing, rest = path, []
    while not existing.exists() and existing != existing.parent:
        rest.append(existing.name)
        existing = existing.parent
    return os.path.join(realpath(existing), *reversed(rest)) if rest else realpath(existing)
