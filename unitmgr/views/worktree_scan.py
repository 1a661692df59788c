"""The git facts `status --all` shows for each unit's worktree, gathered concurrently and, in a
long-lived process, reused while the worktree is unchanged.

Per present worktree this costs one `git status --porcelain --branch` (which also counts
ahead/behind against the unit's base, SPEC 3.4). The committed changes of every unit ahead of its
base come from two processes for the whole batch (SPEC 7 revision 3): one `git rev-list
--parents HEADS --not BASE` per base (each unit's merge base is where its own commits meet the
base), then one `git diff-tree --stdin` over every `(HEAD, merge base)` pair; a unit whose merge
base that walk cannot name alone (a merge of the base, an unborn or detached HEAD) gets its own
`git diff --name-only base...HEAD`. The separate `rev-list` runs only when the status header
cannot answer (detached or unborn HEAD, or the branch carries its own upstream). The per-worktree
calls run in a thread pool: git does the work in its own processes, so they spread over the
cores.

A `WorktreeScanner(reuse=True)` (held by `unit watch`, later `unit serve`) skips the git calls
for a worktree whose HEAD, index, base ref and directory mtimes are unchanged since its last
call, for at most `REUSE_SECONDS` (an in-place write to a tracked file moves no directory mtime;
references/decisions.md). This module writes nothing, takes no lock and persists nothing.

`status --all` adds its jobs one at a time (`WorktreeScanner.begin()`, `ScanRun.add`), each
git call starting while the next record is read, and the diff batch starts beside the
remaining statuses as soon as one unit is seen ahead (`EarlyBatch`).

Over ~400 lines because the per-worktree calls, the batched diffs and the reuse stamps share
one set of jobs and one memo of committed files; split, that memo would be spread over modules.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from registry.light_dataclass import dataclass, replace
from unitmgr import git

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import TypeVar

    from registry.threads import Task

REUSE_SECONDS = 30.0
if TYPE_CHECKING:
    _T = TypeVar("_T")
    _R = TypeVar("_R")


@dataclass(frozen=True)
class WorktreeFacts:
    """What git said about one worktree (each None when its git call failed)."""

    counts: tuple[int, int] | None  # (ahead, behind) against the base ref; None: git failed
    entries: list[str] | None  # `git status --porcelain` entries; None: git failed
    committed: list[str] | None  # files changed on HEAD since its merge base; None: git failed
    committed_pending: bool = False  # ahead of its base: `scan` fills `committed` in its batch


@dataclass(frozen=True)
class WorktreeJob:
    """One worktree to scan, and what `git worktree list` already told about it."""

    worktree: Path
    base_ref: str
    branch: str | None  # the branch checked out there (from `git worktree list`), None: detached
    head: str | None  # its HEAD commit (from `git worktree list`)
    untracked: str = "normal"  # "all" for a unit with a setup baseline: files one by one


def upstream_names(base_ref: str) -> set[str]:
    """The names git may print for `base_ref` as an upstream (it shortens unambiguous refs)."""
    names = {base_ref}
    for prefix in ("refs/heads/", "refs/remotes/", "refs/tags/", "refs/"):
        if base_ref.startswith(prefix):
            names.add(base_ref[len(prefix) :])
    return names


def pool_size() -> int:
    """Threads for the per-worktree git calls: two per core keeps every core busy while a
    thread forks (each call waits on a git child, not on Python)."""
    return min(2 * (os.cpu_count() or 1), 32)


def concurrently(action: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """`action` over `items` in a thread pool sized for the cores (in order)."""
    if len(items) <= 1:
        return [action(item) for item in items]
    from registry.threads import Pool

    with Pool(min(len(items), pool_size())) as pool:
        return pool.map(action, items)


class WorktreeScanner:
    """Reads `WorktreeFacts` for many worktrees; with `reuse`, remembers them in memory."""

    def __init__(self, *, reuse: bool = False, common_git_dir: Path | None = None) -> None:
        self.reuse = reuse
        self.common_git_dir = common_git_dir
        self._committed: dict[tuple[str, str, str], list[str] | None] = {}
        self._seen: dict[str, tuple[tuple[object, ...], float, WorktreeFacts]] = {}
        self._pruned: dict[str, set[str]] = {}  # by worktree: directories the stamp skips
        self.git_runs = 0  # worktrees whose git calls ran in the last `scan` (for tests)

    def scan(self, jobs: Sequence[WorktreeJob]) -> list[WorktreeFacts]:
        run = self.begin()
        for job in jobs:
            run.add(job)
        return run.finish()

    def begin(self) -> ScanRun:
        """A scan whose jobs are added one at a time, each starting its git call at once."""
        self.git_runs = 0
        return ScanRun(self)

    def _complete(
        self, jobs: Sequence[WorktreeJob], found: list[WorktreeFacts], early: EarlyBatch | None
    ) -> list[WorktreeFacts]:
        """Fill in the committed files of the facts still pending (units ahead of their base):
        from the batch started early when it named their merge base, else one diff each."""
        pending = [index for index, facts in enumerate(found) if facts.committed_pending]
        if not pending:
            return found
        batched = early.result() if early is not None else {}
        committed = self._committed_batch(
            [jobs[index] for index in pending],
            known=[batched.get(index) for index in pending],
        )
        for index, files in zip(pending, committed, strict=True):
            found[index] = replace(found[index], committed=files, committed_pending=False)
            if self.reuse:
                key = f"{jobs[index].worktree}\0{jobs[index].base_ref}"
                remembered = self._seen.get(key)
                if remembered is not None and remembered[2].committed_pending:
                    self._seen[key] = (remembered[0], remembered[1], found[index])
        return found

    def _facts(self, job: WorktreeJob) -> WorktreeFacts:
        if not self.reuse:
            facts, _ = self._read(job)
            return facts
        key = f"{job.worktree}\0{job.base_ref}"  # two records may name one worktree
        before = self._stamp(job)
        remembered = self._seen.get(key)
        now = time.monotonic()
        if (
            remembered is not None
            and remembered[0] == before
            and now - remembered[1] < REUSE_SECONDS
        ):
            return remembered[2]
        facts, pruned = self._read(job)
        skipped_before = self._pruned.get(str(job.worktree))
        self._pruned[str(job.worktree)] = pruned
        # Stamped after the read as well: a change during the git call is seen next time. When
        # the skipped directories changed, the two stamps walk different trees and cannot be
        # compared; the age limit then bounds what a change during this one call could hide.
        after = self._stamp(job)
        fresh = after == before or skipped_before != pruned
        self._seen[key] = (after if fresh else (), now, facts)
        return facts

    def _read(self, job: WorktreeJob) -> tuple[WorktreeFacts, set[str]]:
        self.git_runs += 1
        status = (
            git.status_against(
                job.worktree,
                branch=job.branch,
                upstream_ref=job.base_ref,
                ignored=self.reuse,
                untracked=job.untracked,
            )
            if job.branch
            else None
        )
        entries: list[str] | None = None
        pruned: set[str] = set()
        counts: tuple[int, int] | None = None
        answered = False
        if status is not None:
            entries = [entry for entry in status.entries if not entry.startswith("!! ")]
            pruned = {
                entry[3:].rstrip("/")
                for entry in status.entries
                if entry.endswith("/") and entry[:3] in ("?? ", "!! ")
            }
            answered = status.branch == job.branch and status.upstream in upstream_names(
                job.base_ref
            )
            counts = status.counts
        if not answered:
            counts = git.ahead_behind(job.base_ref, worktree=job.worktree)
        if status is None and not job.branch:
            entries = git.status_porcelain(job.worktree, untracked=job.untracked)
        if counts is not None and counts[0] == 0:
            # HEAD is its own merge base: nothing committed
            return WorktreeFacts(counts, entries, []), pruned
        remembered = self._committed.get((str(job.worktree), job.base_ref, job.head or ""))
        if job.head is not None and remembered is not None:
            return WorktreeFacts(counts, entries, remembered), pruned
        return WorktreeFacts(counts, entries, None, committed_pending=True), pruned

    def _committed_batch(
        self, jobs: list[WorktreeJob], *, known: Sequence[list[str] | None] | None = None
    ) -> list[list[str] | None]:
        """The committed changes of `jobs` (all ahead of their base), batched per base; memoized
        by (worktree, base, HEAD): the answer only changes when HEAD moves. With `known` (what
        a batch started earlier found, None where it named no merge base) no batch runs again:
        the rest get one `git diff` each."""
        if known is None:
            found = _batched_by_base(jobs)
        else:
            found = {index: files for index, files in enumerate(known) if files is not None}
        alone = [index for index in range(len(jobs)) if index not in found]
        for index, files in zip(
            alone,
            concurrently(
                lambda job: git.changed_since_merge_base(job.base_ref, worktree=job.worktree),
                [jobs[index] for index in alone],
            ),
            strict=True,
        ):
            found[index] = files
        for index, job in enumerate(jobs):
            if job.head is not None and found[index] is not None:
                self._committed[(str(job.worktree), job.base_ref, job.head)] = found[index]
        return [found[index] for index in range(len(jobs))]

    def _stamp(self, job: WorktreeJob) -> tuple[object, ...]:
        """What must be unchanged for the last facts to still hold: HEAD (commit and branch), the
        worktree's index and HEAD file, the base ref, and every directory's mtime (new, removed
        or renamed files move them), skipping `.git` and untracked or ignored directories."""
        gitdir = _gitdir(job.worktree)
        parts: list[object] = [job.head, job.branch]
        files = [gitdir / "index", gitdir / "HEAD"] if gitdir else []
        if self.common_git_dir is not None:
            files += [self.common_git_dir / job.base_ref, self.common_git_dir / "packed-refs"]
        for path in files:
            parts.append(_mtime(path))
        parts.extend(_directory_mtimes(job.worktree, self._pruned.get(str(job.worktree), set())))
        return tuple(parts)


def _batched_by_base(jobs: Sequence[WorktreeJob]) -> dict[int, list[str] | None]:
    """The committed changes of the `jobs` whose merge base a walk names, by index: per base
    one `git rev-list --parents HEADS --not BASE`, then one `git diff-tree --stdin` over every
    (HEAD, merge base) pair. A HEAD at or behind its base adds nothing to either."""
    found: dict[int, list[str] | None] = {}
    by_base: dict[str, list[int]] = {}
    for index, job in enumerate(jobs):
        if job.head is not None:
            by_base.setdefault(job.base_ref, []).append(index)
    for base_ref, indexes in by_base.items():
        cwd = jobs[indexes[0]].worktree
        heads = sorted({str(jobs[index].head) for index in indexes})
        commits = git.commits_ahead_with_parents(base_ref, heads, cwd=cwd)
        if commits is None:
            continue
        pairs: list[tuple[str, str]] = []
        paired: list[int] = []
        for index in indexes:
            merge_base = _merge_base(str(jobs[index].head), commits)
            if merge_base is not None:
                pairs.append((str(jobs[index].head), merge_base))
                paired.append(index)
        if not pairs:
            continue
        changed = git.changed_between(pairs, cwd=cwd)
        if changed is not None:
            found.update(zip(paired, changed, strict=True))
    return found


def _merge_base(head: str, commits: dict[str, list[str]]) -> str | None:
    """Where `head`'s own commits (`commits`: those not on the base, with their parents) meet
    the base: the one parent outside them. None when there is not exactly one (a merge of the
    base into the branch, a root commit): `git diff base...HEAD` then decides."""
    if head not in commits:
        return None
    boundary: set[str] = set()
    seen: set[str] = set()
    stack = [head]
    while stack:
        commit = stack.pop()
        if commit in seen:
            continue
        seen.add(commit)
        parents = commits[commit]
        if not parents:
            return None  # a root commit off the base: no merge base at all
        for parent in parents:
            if parent in commits:
                stack.append(parent)
            else:
                boundary.add(parent)
    return next(iter(boundary)) if len(boundary) == 1 else None


def _gitdir(worktree: Path) -> Path | None:
    dot_git = worktree / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text()
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    path = Path(text[len("gitdir: ") :].strip())
    return path if path.is_absolute() else worktree / path


def _mtime(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _directory_mtimes(root: Path, pruned: set[str]) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        directory = os.path.join(root, relative) if relative else str(root)
        try:
            found.append((relative, os.stat(directory).st_mtime_ns))
            with os.scandir(directory) as listing:
                for entry in listing:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                    child = f"{relative}/{entry.name}" if relative else entry.name
                    if entry.name == ".git" or child in pruned:
                        continue
                    pending.append(child)
        except OSError:
            found.append((relative, -1))
    return found


class EarlyBatch:
    """The committed changes of a scan's jobs, batched (`_batched_by_base`) in a thread of its
    own while their `git status` calls still run: started once every job is known and one of
    them is seen ahead of its base (a batch where nobody is ahead runs no `rev-list`)."""

    def __init__(self, jobs: list[WorktreeJob], indexes: list[int]) -> None:
        import threading

        self._indexes = indexes
        self._found: dict[int, list[str] | None] = {}
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=([jobs[index] for index in indexes],), daemon=True
        )
        self._thread.start()

    def _run(self, jobs: list[WorktreeJob]) -> None:
        try:
            batched = _batched_by_base(jobs)
        except BaseException as error:  # raised again in the caller's thread
            self._error = error
            return
        self._found = {self._indexes[position]: files for position, files in batched.items()}

    def result(self) -> dict[int, list[str] | None]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._found


class ScanRun:
    """One scan of `WorktreeScanner.begin()`: each `add` starts its job's git call in the pool
    at once (the caller reads the next record meanwhile); `finish` waits for them all."""

    def __init__(self, scanner: WorktreeScanner) -> None:
        from registry.threads import Pool

        self._scanner = scanner
        self._jobs: list[WorktreeJob] = []
        self._futures: list[Task[WorktreeFacts]] = []
        self._pool = Pool(pool_size())

    def add(self, job: WorktreeJob) -> int:
        """Start `job`'s git call; its index in `finish`'s answer."""
        self._jobs.append(job)
        self._futures.append(self._pool.submit(self._scanner._facts, job))
        return len(self._jobs) - 1

    def finish(self) -> list[WorktreeFacts]:
        """Every job's facts, in the order added. The committed changes of units ahead are
        batched as soon as the first of them is seen, while the other git calls still run."""
        try:
            early: EarlyBatch | None = None
            waiting = set(self._futures)
            while waiting:
                done, waiting = self._pool.first_done(waiting)
                if any(future.result().committed_pending for future in done):
                    early = self._start_batch()
                    break
            found = [future.result() for future in self._futures]
        finally:
            self._pool.shutdown()
        return self._scanner._complete(self._jobs, found, early)

    def close(self) -> None:
        """Wait for the git calls already started, without their answers (the caller failed)."""
        self._pool.shutdown(cancel_pending=True)

    def _start_batch(self) -> EarlyBatch | None:
        """The batch over every job with a HEAD whose answer is not memoized (those already
        known need none; one at its base adds nothing to the batch)."""
        memo = self._scanner._committed
        indexes = [
            index
            for index, job in enumerate(self._jobs)
            if job.head is not None and (str(job.worktree), job.base_ref, job.head) not in memo
        ]
        return EarlyBatch(self._jobs, indexes) if indexes else None
