"""pair's few git calls: where a worktree's pair state lives.

State is per worktree, in `<absolute-git-dir>/pair/`, so every linked worktree has its own.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from pair.errors import StateError, UsageError
from registry.processes import child_environment

GIT_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class Place:
    root: Path  # the worktree's toplevel
    git_dir: Path  # its absolute git dir (`.git/worktrees/<name>` for a linked worktree)

    @property
    def state_dir(self) -> Path:
        return self.git_dir / "pair"


def locate(repo: str | Path) -> Place:
    path = Path(repo).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.is_dir():
        raise UsageError("not-a-directory", f"not a directory: {repo}")
    try:
        completed = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--show-toplevel", "--absolute-git-dir"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            env=child_environment(),
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise StateError(
            "not-a-git-repository", f"not a git repository: {repo} ({error})"
        ) from None
    lines = completed.stdout.splitlines()
    if completed.returncode != 0 or len(lines) < 2:
        raise StateError("not-a-git-repository", f"not a git repository: {repo}")
    return Place(root=Path(lines[0]), git_dir=Path(lines[1]))
