"""pair's few git calls: where a worktree's pair state lives.

State is per worktree, in `<absolute-git-dir>/pair/`, so every linked worktree has its own.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from pair.errors import StateError, UsageError
from pair.paths import state_dir_for
from registry.environment import child_environment

GIT_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class Place:
    root: Path  # the worktree's toplevel
    git_dir: Path  # its absolute git dir (`.git/worktrees/<name>` for a linked worktree)

    @property
    def state_dir(self) -> Path:
        return state_dir_for(self.git_dir)


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(cwd), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_SECONDS,
        env=child_environment(),
        check=False,
    )


def locate(repo: str | Path) -> Place:
    path = Path(repo).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.is_dir():
        raise UsageError("not-a-directory", f"not a directory: {repo}")
    try:
        completed = _git(path, "rev-parse", "--show-toplevel", "--absolute-git-dir")
    except (OSError, subprocess.SubprocessError) as error:
        raise StateError(
            "not-a-git-repository", f"not a git repository: {repo} ({error})"
        ) from None
    lines = completed.stdout.splitlines()
    if completed.returncode != 0 or len(lines) < 2:
        raise StateError("not-a-git-repository", f"not a git repository: {repo}")
    return Place(root=Path(lines[0]), git_dir=Path(lines[1]))


def head_commit(worktree: Path) -> str | None:
    """The commit the worktree's HEAD names; None for an unborn branch or when git cannot say."""
    try:
        completed = _git(worktree, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    except (OSError, subprocess.SubprocessError):
        return None
    sha = completed.stdout.strip()
    return sha if completed.returncode == 0 and sha else None


# -- the ref audit (SPEC 4.1) ------------------------------------------------------------------

MAIN_WORKTREE_HEAD = "main-worktree/HEAD"  # git's own name for the main worktree's HEAD


def common_dir(git_dir: Path) -> Path:
    """The common dir of a worktree's git dir (a linked worktree names it in `commondir`)."""
    try:
        pointer = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return git_dir
    return (git_dir / pointer).resolve()


def head_of(git_dir: Path) -> str | None:
    """A HEAD as written in its file: `ref: refs/heads/<name>` or a commit id."""
    try:
        return (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None


def current_branch(git_dir: Path) -> str | None:
    """The branch a worktree has checked out, or None when its HEAD is detached."""
    head = head_of(git_dir) or ""
    return head[len("ref: refs/heads/") :] if head.startswith("ref: refs/heads/") else None


def ref_snapshot(worktree: Path, git_dir: Path) -> dict[str, str]:
    """Every ref `git for-each-ref` lists, with its object, plus the main worktree's HEAD."""
    try:
        completed = _git(worktree, "for-each-ref", "--format=%(refname) %(objectname)")
    except (OSError, subprocess.SubprocessError) as error:
        raise StateError("git-failed", f"git for-each-ref failed in {worktree}: {error}") from None
    if completed.returncode != 0:
        raise StateError(
            "git-failed",
            f"git for-each-ref failed in {worktree}: {completed.stderr.strip()}",
        )
    refs: dict[str, str] = {}
    for line in completed.stdout.splitlines():
        name, _, sha = line.partition(" ")
        refs[name] = sha
    main_head = head_of(common_dir(git_dir))
    if main_head is not None:
        refs[MAIN_WORKTREE_HEAD] = main_head
    return refs


def foreign_ref_changes(
    before: dict[str, str], after: dict[str, str], branch: str | None
) -> list[dict[str, str | None]]:
    """`[{ref, before, after}]` for every change a turn may not make.

    A turn may move its own branch, that branch's remote-tracking refs and its worktree's HEAD
    (not listed by for-each-ref), and create tags; anything else that changed is foreign.
    """
    changes: list[dict[str, str | None]] = []
    for ref in sorted(set(before) | set(after)):
        old, new = before.get(ref), after.get(ref)
        if old == new or _turn_may_move(ref, old, branch):
            continue
        changes.append({"ref": ref, "before": old, "after": new})
    return changes


def _turn_may_move(ref: str, before: str | None, branch: str | None) -> bool:
    if ref.startswith("refs/tags/"):
        return before is None  # a tag the turn created
    if branch is None:
        return False
    if ref == f"refs/heads/{branch}":
        return True
    remote = ref.removeprefix("refs/remotes/")
    suffix = "/" + branch
    return remote != ref and remote.endswith(suffix) and "/" not in remote[: -len(suffix)]


def is_ancestor(older: str, newer: str, worktree: Path) -> bool:
    """Whether commit `older` is an ancestor of `newer` (a fast forward from one to the other)."""
    try:
        completed = _git(worktree, "merge-base", "--is-ancestor", older, newer)
    except (OSError, subprocess.SubprocessError):
        return False
    return completed.returncode == 0
