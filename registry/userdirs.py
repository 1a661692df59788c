"""The user's own directories: where what an executor must not write is kept (SPEC 8).

An executor can write its worktree and the whole git common dir, so a trusted fact about a
repository (the signing key, this machine's config file, the approvals of configured commands)
lives outside both, under the user's XDG directories, named by a repository id derived from the
common dir's real path. This module only names those paths and makes their directories; it
knows no git and reads no file. It stays free of heavy imports (the fast reads may import it).
"""

from __future__ import annotations

import os

from registry import pathtext

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from hashlib import sha256 as sha256  # noqa: PLC0414 (re-exported for the modules that hash)
    from pathlib import Path
else:
    try:  # CPython's own module: `hashlib` costs ~5 ms of imports (its OpenSSL; SPEC 7)
        from _sha256 import sha256
    except ImportError:  # pragma: no cover - other interpreters
        from hashlib import sha256

APP = "unitmgr"


def _home_dir(variable: str, fallback: str) -> str:
    """The directory as text, spelled as a Path of it (no pathlib: the empty reads name the
    machine's config file, SPEC 7)."""
    value = os.environ.get(variable, "")
    # The XDG spec: a relative value is invalid and is ignored.
    if value and os.path.isabs(value):
        return pathtext.joined(value)
    return pathtext.joined(pathtext.home(), fallback)


def config_home() -> Path:
    """`$XDG_CONFIG_HOME/unitmgr` (default `~/.config/unitmgr`)."""
    from pathlib import Path

    return Path(config_home_text())


def config_home_text() -> str:
    """`str(config_home())`."""
    return pathtext.joined(_home_dir("XDG_CONFIG_HOME", ".config"), APP)


def state_home() -> Path:
    """`$XDG_STATE_HOME/unitmgr` (default `~/.local/state/unitmgr`)."""
    from pathlib import Path

    return Path(_home_dir("XDG_STATE_HOME", ".local/state")) / APP


def repository_id(common_git_dir: Path | str) -> str:
    """A stable, readable name for one repository: its folder name and a hash of the real path
    of its common git dir (`myrepo-3f2a9c1d0b7e`).

    Every worktree of a repository shares the common dir, so they share one id; two clones are
    two repositories. Moving a repository gives it a new id (its keys and approvals stay with
    the old path), which is the safe direction: nothing trusted follows a path it was not
    granted for.
    """
    real = os.path.realpath(common_git_dir)
    digest = sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    folder = pathtext.joined(real)  # absolute: os.path's name and parent are Path's
    base = os.path.basename(folder)
    name = (
        os.path.basename(os.path.dirname(folder)) if base == ".git" else base.removesuffix(".git")
    )
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip(".-") or "repo"
    return f"{safe[:40]}-{digest}"


def private_dir(path: Path) -> Path:
    """Make `path` (and missing parents) with mode 0700, and return it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path
