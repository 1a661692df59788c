"""pair's few git calls: where a worktree's pair state lives.

State is per worktree, in `<absolute-git-dir>/pair/`, so every linked worktree has its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pair import gitconfig
from pair.errors import StateError, UsageError
from pair.paths import state_dir_for
from registry.environment import child_environment, start_found
from registry.light_dataclass import dataclass

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from pair.config_audit import Item

GIT_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class Place:
    root: Path  # the worktree's toplevel
    git_dir: Path  # its absolute git dir (`.git/worktrees/<name>` for a linked worktree)

    @property
    def state_dir(self) -> Path:
        return state_dir_for(self.git_dir)


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`git -C cwd args`, neutralized as unitmgr's git calls are (SPEC 8,
    `pair.gitconfig.neutral_pins`): nothing a repository file names runs in pair's process."""
    environment = child_environment()
    environment.update(gitconfig.config_environment(_pins(cwd, args), environment))
    return start_found(  # git found once on PATH, not by every start's PATH walk
        subprocess.run,
        ["git", "-C", str(cwd), *gitconfig.neutral_args(list(args))],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_SECONDS,
        env=environment,
        check=False,
    )


def _pins(cwd: Path, args: tuple[str, ...]) -> list[tuple[str, str]]:
    if gitconfig.subcommand(args) in gitconfig.OBJECT_ONLY:
        return list(gitconfig.ALWAYS_PINS)
    return gitconfig.neutral_pins(gitconfig.LISTINGS.entries(str(cwd), _list_config))


def _list_config(place: str, explicit: bool) -> str:
    """The config listing `pair.gitconfig.ListingCache` asks for, with no pins (`git config`
    runs no program); a failure raises: git never runs without its pins."""
    environment = child_environment()
    argv = ["git", "--git-dir", place] if explicit else ["git", "-C", place]
    completed = start_found(
        subprocess.run,
        [*argv, *gitconfig.LIST_ARGS],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_SECONDS,
        env=environment,
        check=False,
    )
    if completed.returncode != 0:
        raise StateError("git-failed", f"git config --list failed: {completed.stderr.strip()}")
    return completed.stdout


def locate(repo: str | Path) -> Place:
    path = Path(repo).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.is_dir():
        raise UsageError(
            "not-a-directory", f"not a directory: {repo}", next_step="--repo: the worktree's path"
        )
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


# -- the config audit (SPEC 8) ----------------------------------------------------------------


def config_listing(cwd: Path, *, file: Path | None = None) -> str | None:
    """`git config --list` with scopes and origins (pair/gitconfig.py `LIST_ARGS`), of every
    file git reads in `cwd` or of one `file`; None when git cannot list it."""
    from pair.config_audit import listing_args

    try:
        completed = _git(cwd, *listing_args(file))
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        return None
    return completed.stdout if completed.returncode == 0 else None


def config_snapshot(worktree: Path, git_dir: Path) -> dict[tuple[str, str, str], Item]:
    """The config audit's snapshot (pair/config_audit.py) of the repository of `worktree`."""
    from pair import config_audit

    listing = config_listing(worktree)
    if listing is None:
        raise StateError("git-failed", f"git config --list failed in {worktree}")
    return config_audit.snapshot(
        listing,
        cwd=worktree,
        common_dir=common_dir(git_dir),
        list_file=lambda path: config_listing(worktree, file=path),
    )


def config_snapshot_or_none(
    worktree: Path, git_dir: Path
) -> dict[tuple[str, str, str], Item] | None:
    """The snapshot before a turn; None (no audit of this turn) when git cannot list the config."""
    try:
        return config_snapshot(worktree, git_dir)
    except Exception as error:
        print(f"config audit unavailable: {error}", file=sys.stderr)
        return None


def foreign_config_changes(
    worktree: Path, git_dir: Path, before: dict[tuple[str, str, str], Item] | None
) -> list[dict[str, str | None]] | None:
    """What changed in the repository's executable config during a turn, minus what ends in
    the lead's accepted state (unitmgr installed it, or the lead removed a plant meanwhile).
    A snapshot the turn made impossible to take is itself a change."""
    from pair import config_audit

    if before is None:
        return None
    after = config_snapshot_or_none(worktree, git_dir)
    if after is None:
        return [
            {
                "kind": "config",
                "key_or_path": "(the whole config)",
                "file": str(common_dir(git_dir) / "config"),
                "before": "listed",
                "after": "git config --list fails after the turn",
            }
        ]
    accepted = config_audit.read_baseline(common_dir(git_dir))
    return config_audit.changes(before, after, accepted=accepted)


# -- code moved by bundles (SPEC 4.3: a turn on another machine) -------------------------------


def run(cwd: Path, *args: str) -> str:
    """`git -C cwd args`, neutralized like every pair git call; its stdout, or `git-failed`."""
    try:
        completed = _git(cwd, *args)
    except (OSError, subprocess.SubprocessError) as error:
        raise StateError("git-failed", f"git {args[0]} failed in {cwd}: {error}") from None
    if completed.returncode != 0:
        raise StateError(
            "git-failed",
            f"git {' '.join(args[:2])} failed in {cwd}: {completed.stderr.strip()[-400:]}",
        )
    return completed.stdout


def init_repository(path: Path) -> None:
    """An empty repository at `path` (the node's copy of a unit's worktree)."""
    path.mkdir(parents=True, exist_ok=True)
    run(path, "init", "-q")


def rev(cwd: Path, name: str) -> str | None:
    """The commit `name` names in `cwd`, or None."""
    try:
        completed = _git(cwd, "rev-parse", "--verify", "-q", f"{name}^{{commit}}")
    except (OSError, subprocess.SubprocessError):
        return None
    sha = completed.stdout.strip()
    return sha if completed.returncode == 0 and sha else None


def ref_commits(cwd: Path, limit: int) -> list[str]:
    """The distinct commits `cwd`'s branches and `refs/unitmgr/*` point at (at most `limit`)."""
    listing = run(
        cwd, "for-each-ref", "--format=%(objectname)", "refs/heads", "refs/unitmgr"
    ).split()
    return list(dict.fromkeys(listing))[:limit]


def known_commits(cwd: Path, shas: list[str]) -> list[str]:
    """Those of `shas` (full hex names) that name commits in `cwd`, in one git call; none when
    git refuses the list (a name of a tree or a blob)."""
    if not shas:
        return []
    try:
        completed = _git(cwd, "rev-list", "--no-walk=unsorted", "--ignore-missing", *shas)
    except (OSError, subprocess.SubprocessError):
        return []
    return completed.stdout.split() if completed.returncode == 0 else []


def set_ref(cwd: Path, ref: str, sha: str) -> None:
    run(cwd, "update-ref", ref, sha)


def bundle(cwd: Path, out: Path, ref: str, *excluded: str) -> bool:
    """Write a bundle of `ref` without what `excluded` reach; False when there is nothing."""
    try:
        completed = _git(cwd, "bundle", "create", str(out), ref, *(f"^{sha}" for sha in excluded))
    except (OSError, subprocess.SubprocessError) as error:
        raise StateError("git-failed", f"git bundle failed in {cwd}: {error}") from None
    if completed.returncode != 0:
        if "empty bundle" in completed.stderr:
            return False
        raise StateError("git-failed", f"git bundle failed in {cwd}: {completed.stderr[-400:]}")
    return True


def fetch_bundle(cwd: Path, bundle_file: Path, source_ref: str, target_ref: str) -> None:
    """Fetch `source_ref` of a bundle into `target_ref` (forced: the ref is the fetcher's)."""
    run(
        cwd, "fetch", "-q", "--no-write-fetch-head", str(bundle_file), f"+{source_ref}:{target_ref}"
    )


def fast_forward(worktree: Path, sha: str) -> None:
    """Move the worktree's branch and files to `sha`, only as a fast forward."""
    run(worktree, "merge", "-q", "--ff-only", sha)


def reset_to(worktree: Path, sha: str, branch: str) -> None:
    """Check `branch` out at `sha`, discarding what the worktree held (the node's copy)."""
    run(worktree, "checkout", "-q", "-f", "-B", branch, sha)
    run(worktree, "clean", "-q", "-f", "-d")


def uncommitted_paths(worktree: Path, limit: int = 200) -> list[str]:
    """The paths `git status` lists as changed or untracked (at most `limit`)."""
    listing = run(worktree, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    entries = [entry[3:] for entry in listing.split("\0") if len(entry) > 3]
    return entries[:limit]
