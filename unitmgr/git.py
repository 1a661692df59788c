"""Every git call unitmgr makes (pair's own few live in `pair/git.py`).

Each call is an argument list (never a shell), runs with stdin from /dev/null in its own process
group with the no-prompt environment, and is killed as a group on timeout: local git 120 s
(`UNITMGR_GIT_TIMEOUT`), network git 300 s (`UNITMGR_NETWORK_TIMEOUT`). Output is read from
plumbing (`--porcelain`, `-z`) and paths are kept absolute.

GitPython is deliberately not used here: its `Git.execute` cannot start a child in its own
process group, and `import git` costs ~100 ms (see references/decisions.md).

Over ~400 lines on purpose: SPEC 1 makes this the one module that runs git, so every call lives
here as a small named function; splitting it would only spread that rule over several files.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from registry import pathtext
from registry.environment import child_environment, start_found
from registry.errors import Rewrite, StateError, hold_interrupts, release_interrupts
from registry.redact import redact
from registry.timeutil import seconds_from_env

# `unit list` and `unit status --all` on an empty registry run one git call and must start in
# at most 3x a bare Python (SPEC 7): nothing here imports typing, dataclasses or psutil (the
# value types are plain classes; registry/processes.py is imported only to stop a child), nor
# pathlib: the functions that make a Path import it, and the empty reads make none (the
# repository is resolved as text, registry/pathtext.py; a git call takes a `cwd` as text too).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def stop_child_group(process: subprocess.Popen[bytes]) -> None:
    from registry.processes import stop_child_group as stop

    stop(process)


def local_timeout() -> float:
    return seconds_from_env("UNITMGR_GIT_TIMEOUT", 120.0)


def network_timeout() -> float:
    return seconds_from_env("UNITMGR_NETWORK_TIMEOUT", 300.0)


class GitError(StateError):
    """A git command failed: carries the command, exit code and stderr."""

    def __init__(
        self,
        step: str,
        argv: Sequence[str],
        returncode: int | None,
        stderr: str,
        cwd: Path | str | None = None,
    ) -> None:
        message = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {returncode}"
        words = list(argv[1:] if argv and argv[0] == "git" else argv)
        while words[:1] == ["-c"]:
            words = words[2:]  # the pins: a by-hand run of the same command needs none
        super().__init__(
            "git-failed",
            redact(f"{step}: {message}"),
            detail={
                "command": redact(" ".join(argv)),
                "exit_code": returncode,
                "stderr": redact(stderr[-4000:]),
            },
            # The same git command by hand, where it failed: git's whole answer.
            next_step=redact(shlex.join(["git", "-C", str(cwd or "."), *words])) if words else None,
        )
        self.returncode = returncode
        self.stderr = stderr


class GitTimeout(StateError):
    def __init__(self, step: str, seconds: float) -> None:
        super().__init__(
            "timeout",
            f"{step} timed out after {int(seconds)}s",
            next_command=Rewrite(
                environment={
                    "UNITMGR_GIT_TIMEOUT": str(max(int(seconds * 2), 60)),
                    "UNITMGR_NETWORK_TIMEOUT": str(max(int(seconds * 2), 60)),
                }
            ),
        )


class GitResult:
    """A finished git command's exit code and output."""

    __slots__ = ("returncode", "stderr", "stdout")

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def run_git(
    args: Sequence[str],
    *,
    cwd: Path | str,
    step: str,
    network: bool = False,
    check: bool = True,
    optional_locks: bool = True,
    environment: dict[str, str] | None = None,
    stdin_text: str | None = None,
    unpinned: tuple[str, ...] = (),
) -> GitResult:
    """Run `git <args>` in `cwd`, neutralized (SPEC 8): command-line config that wins over the
    repository's pins every program a repository file could make git run
    (`pair.gitconfig.neutral_pins`), plus the flags config cannot pin
    (`pair.gitconfig.neutral_args`: `--no-ext-diff --no-textconv`, git's own upload-pack and
    receive-pack). `check` raises `GitError` on a non-zero exit.

    `environment` adds variables to the no-prompt child environment (its `GIT_CONFIG_*` come
    before the pins). `stdin_text` is git's standard input (else /dev/null). `unpinned` names
    keys a call that runs nothing reads as the repository sets them (`git config --get`,
    `rev-parse --git-path hooks`)."""
    from pair import gitconfig

    shown = ["git", *args]
    argv = ["git"]
    if not optional_locks:
        argv.append("--no-optional-locks")  # status must not rewrite the index of a reader
    argv.extend(gitconfig.neutral_args(list(args)))
    try:
        pins = _pins(args, cwd)
    except GitError as error:  # no listing, no pins: git does not run without them
        if check:
            raise
        return GitResult(error.returncode or 128, "", error.stderr)
    if unpinned:
        dropped = {key.lower() for key in unpinned}
        pins = [(key, value) for key, value in pins if key.lower() not in dropped]
    variables = child_environment(environment)
    variables.update(gitconfig.config_environment(pins, variables))
    seconds = network_timeout() if network else local_timeout()
    result = _execute(
        argv, cwd=cwd, step=step, seconds=seconds, environment=variables, stdin_text=stdin_text
    )
    if check and result.returncode != 0:
        raise GitError(step, shown, result.returncode, result.stderr, cwd=cwd)
    return result


def _pins(args: Sequence[str], cwd: Path | str) -> list[tuple[str, str]]:
    from pair import gitconfig

    if gitconfig.subcommand(list(args)) in gitconfig.OBJECT_ONLY or not os.path.isdir(cwd):
        return list(gitconfig.ALWAYS_PINS)  # (a missing directory: git will not start there)
    return gitconfig.neutral_pins(gitconfig.LISTINGS.entries(str(cwd), _list_config))


def _list_config(place: str, explicit: bool) -> str:
    """The repository's config listing, for `pair.gitconfig.ListingCache`: run with no pins
    (`git config` runs no program) against a git dir (`explicit`) or in a directory."""
    from pair.gitconfig import LIST_ARGS

    argv = ["git", "--git-dir", place, *LIST_ARGS] if explicit else ["git", *LIST_ARGS]
    cwd = place if not explicit else "/"
    result = _execute(
        argv, cwd=cwd, step="list config", seconds=local_timeout(), environment=child_environment()
    )
    if result.returncode != 0:
        raise GitError("list config", argv, result.returncode, result.stderr)
    return result.stdout


def _execute(
    argv: list[str],
    *,
    cwd: Path | str,
    step: str,
    seconds: float,
    environment: dict[str, str],
    stdin_text: str | None = None,
) -> GitResult:
    """Start `argv` in its own process group, stdin `stdin_text` (else /dev/null); kill it on
    timeout."""
    hold_interrupts()  # SPEC 3.0: no signal between the start and the `try` that stops git
    try:
        process: subprocess.Popen[bytes] = start_found(  # git found once, not by a PATH walk
            subprocess.Popen,
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL if stdin_text is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=environment,
        )
    except (FileNotFoundError, NotADirectoryError) as error:
        release_interrupts()
        if os.path.isdir(cwd):  # git itself is missing: no answer git could have given
            raise
        # The directory went away before git started (a worktree removed while a reader looked
        # at it): answer as git does for a directory it cannot enter.
        return GitResult(128, "", f"fatal: cannot change to '{cwd}': {error.strerror}\n")
    except BaseException:
        release_interrupts()
        raise
    try:
        release_interrupts()
        given = None if stdin_text is None else stdin_text.encode("utf-8", "surrogateescape")
        stdout, stderr = process.communicate(given, timeout=seconds)
    except subprocess.TimeoutExpired:
        stop_child_group(process)
        process.communicate()
        raise GitTimeout(step, seconds) from None
    except BaseException:
        stop_child_group(process)  # interrupted (SPEC 3.0): git never outlives its command
        raise
    return GitResult(
        process.returncode,
        stdout.decode("utf-8", "surrogateescape"),
        stderr.decode("utf-8", "replace"),
    )


# -- repository ------------------------------------------------------------------------------


class RepositoryPaths:
    """A repository's worktree top level and its common git dir: Paths, made on first use from
    the text git answered (`toplevel_text`, `common_text`, as `str()` of those Paths spells
    them), so the empty-registry reads, which use the text only, import no pathlib (SPEC 7)."""

    __slots__ = ("_common", "_toplevel", "common_text", "toplevel_text")

    def __init__(self, toplevel: Path | str, common_git_dir: Path | str) -> None:
        self.toplevel_text = pathtext.joined(os.fspath(toplevel))
        self.common_text = pathtext.joined(os.fspath(common_git_dir))
        self._toplevel = None if isinstance(toplevel, str) else toplevel
        self._common = None if isinstance(common_git_dir, str) else common_git_dir

    @property
    def toplevel(self) -> Path:
        if self._toplevel is None:
            from pathlib import Path

            self._toplevel = Path(self.toplevel_text)
        return self._toplevel

    @property
    def common_git_dir(self) -> Path:
        if self._common is None:
            from pathlib import Path

            self._common = Path(self.common_text)
        return self._common


# `resolve_repository`'s answers kept while `resolving_once` runs, by the exact argument.
_ONCE: dict[str, RepositoryPaths | None] = {}


class resolving_once:
    """Within the block, `resolve_repository(repo)` — that exact argument only — answers from
    its first success: a writing command checks the config audit, then opens its workspace, and
    the repository it names does not move in between (one `git rev-parse`, not two; SPEC 7).
    A refusal is never kept; leaving the block forgets the answer."""

    def __init__(self, repo: str | Path) -> None:
        self.key = str(repo)

    def __enter__(self) -> None:
        self.owner = self.key not in _ONCE  # a nested block leaves the outer one's answer
        if self.owner:
            _ONCE[self.key] = None

    def __exit__(self, *exc: object) -> None:
        if self.owner:
            _ONCE.pop(self.key, None)


def resolve_repository(repo: str | Path) -> RepositoryPaths:
    kept = _ONCE.get(str(repo))
    if kept is not None:
        return kept
    found = _resolve_repository(repo)
    if str(repo) in _ONCE:
        _ONCE[str(repo)] = found
    return found


def _resolve_repository(repo: str | Path) -> RepositoryPaths:
    path = pathtext.expanded(os.fspath(repo))  # as `Path(repo).expanduser()` spells it
    path = path if path.startswith("/") else pathtext.joined(os.getcwd(), path)
    if not os.path.isdir(path):
        raise StateError("not-a-git-repository", f"not a git repository: {repo}")
    result = run_git(
        ["rev-parse", "--show-toplevel", "--path-format=absolute", "--git-common-dir"],
        cwd=path,
        step="resolve repository",
        check=False,
    )
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) < 2:
        raise StateError("not-a-git-repository", f"not a git repository: {repo}")
    return RepositoryPaths(lines[0], pathtext.resolved(pathtext.joined(lines[1])))


def check_branch_name(branch: str, *, cwd: Path) -> bool:
    """A valid new branch name, taken literally.

    `check-ref-format --branch` also expands `@` and `@{-N}` to existing branches; a name it
    rewrites is not the literal name the unit would record, so it is refused too.
    """
    if branch.startswith("-") or branch == "@":  # `@` is HEAD in every revision git reads
        return False
    result = run_git(
        ["check-ref-format", "--branch", branch], cwd=cwd, step="check branch", check=False
    )
    return result.returncode == 0 and result.stdout.strip() == branch


def remote_url(cwd: Path, name: str = "origin") -> str | None:
    listed = _listed_remote_url(cwd, name)
    if listed is not None:
        return listed[0]
    result = run_git(["remote", "get-url", name], cwd=cwd, step="remote url", check=False)
    return result.stdout.strip() or None if result.returncode == 0 else None


def _listed_remote_url(cwd: Path, name: str) -> tuple[str | None] | None:
    """`(url,)` as `git remote get-url NAME` answers it, read from the config listing every
    git call of this process shares (pair/gitconfig.py `LISTINGS`) instead of one more git
    process (SPEC 7: ~5 ms of every command that asks whether GitHub is configured); None when
    git's own rules decide: an `insteadOf` rewrite, a remote file under `remotes/` or
    `branches/`, a remote with no URL or several, or no listing at all."""
    listed = _listed_remote(cwd, name)
    if listed is None:
        return None
    configured, urls = listed
    if not configured:
        return (None,)  # git: "No such remote"
    if len(urls) != 1 or not urls[0]:
        return None
    return (urls[0].strip() or None,)


def _listed_remote(cwd: Path, name: str) -> tuple[bool, list[str | None]] | None:
    """Whether the config listing configures remote `name` (any `remote.NAME.*` key: what `git
    remote` lists), and its URLs; None when git's own rules decide (see `_listed_remote_url`)."""
    from pair import gitconfig

    dirs = gitconfig._git_dirs(str(cwd))
    if dirs is None or any(
        os.path.lexists(os.path.join(dirs[1], legacy, name)) for legacy in ("remotes", "branches")
    ):
        return None
    try:
        entries = gitconfig.LISTINGS.entries(str(cwd), _list_config)
    except GitError:
        return None
    urls: list[str | None] = []
    configured = False
    for entry in entries:
        lowered = entry.key.lower()
        if lowered.startswith("url.") and lowered.endswith(("insteadof", "pushinsteadof")):
            return None
        remote = lowered.startswith("remote.") and lowered.count(".") >= 2
        if remote and gitconfig._subsection(entry.key) == name:
            configured = True
            if lowered.rsplit(".", 1)[1] == "url":
                urls.append(entry.value)
    return configured, urls


def has_remote(cwd: Path, name: str = "origin") -> bool:
    """Whether `git remote` lists `name`: from the shared config listing (SPEC 7: `unit create`
    asked twice, a git process each), else from `git remote` where git's rules decide."""
    listed = _listed_remote(cwd, name)
    if listed is not None:
        return listed[0]
    result = run_git(["remote"], cwd=cwd, step="list remotes", check=False)
    return name in result.stdout.split()


def resolve_commit(ref: str, *, cwd: Path) -> str | None:
    result = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
        cwd=cwd,
        step="resolve ref",
        check=False,
    )
    return result.stdout.strip() or None if result.returncode == 0 else None


def existing_refs(refs: Sequence[str], *, cwd: Path) -> set[str]:
    """Which of `refs` (full names) exist, from one `for-each-ref`. A pattern also lists refs
    below it: exact names only. When it fails (one junk line in `packed-refs` is fatal to it,
    and an executor can write that file) each ref is asked on its own, as `ref_exists` does."""
    result = run_git(
        ["for-each-ref", "--format=%(refname)", "--", *refs],
        cwd=cwd,
        step="check refs",
        check=False,
    )
    if result.returncode != 0:
        return {ref for ref in refs if ref_exists(ref, cwd=cwd)}
    return set(result.stdout.splitlines()) & set(refs)


def ref_exists(ref: str, *, cwd: Path) -> bool:
    result = run_git(
        ["show-ref", "--verify", "--quiet", ref], cwd=cwd, step="check ref", check=False
    )
    return result.returncode == 0


def fetch_base(base: str, *, cwd: Path) -> str:
    """`git fetch origin <base>`: returns "fetched" or "missing" (origin has no such ref).

    Any other failure raises; a `cannot lock ref` race with another fetch is retried once.
    """
    refspec = f"+refs/heads/{base}:refs/remotes/origin/{base}"
    for attempt in (1, 2):
        result = run_git(
            ["fetch", "--no-tags", "origin", refspec],
            cwd=cwd,
            step=f"fetch origin {base}",
            network=True,
            check=False,
        )
        if result.returncode == 0:
            return "fetched"
        stderr = result.stderr.lower()
        if "couldn't find remote ref" in stderr or "remote ref does not exist" in stderr:
            return "missing"
        if "cannot lock ref" in stderr and attempt == 1:
            continue
        raise GitError(
            f"fetch origin {base}",
            ["git", "fetch", "origin", refspec],
            result.returncode,
            result.stderr,
        )
    raise AssertionError("unreachable")


def remote_branch_head(branch: str, *, cwd: Path) -> str | None:
    """The commit of `refs/heads/<branch>` at origin (network), or None when absent."""
    return remote_branch_heads([branch], cwd=cwd)[branch]


def remote_branch_heads(branches: Sequence[str], *, cwd: Path) -> dict[str, str | None]:
    """The commit of each `refs/heads/<branch>` at origin (None when absent), from one
    `ls-remote`: one round trip to the remote however many branches (a dry run's base and
    branch)."""
    wanted = {f"refs/heads/{branch}": branch for branch in branches}
    result = run_git(
        ["ls-remote", "--heads", "origin", *wanted],
        cwd=cwd,
        step=f"ls-remote origin {' '.join(branches)}",
        network=True,
    )
    heads: dict[str, str | None] = dict.fromkeys(branches)
    for line in result.stdout.splitlines():
        sha, _, name = line.partition("\t")
        # ls-remote matches a pattern against the tail of a name (refs/heads/x/refs/heads/b
        # matches refs/heads/b): exact names only
        if name in wanted:
            heads[wanted[name]] = sha
    return heads


# -- worktrees -------------------------------------------------------------------------------


class WorktreeRow:
    """One entry of `git worktree list --porcelain`."""

    __slots__ = ("bare", "branch", "detached", "head", "locked", "path", "prunable")

    def __init__(
        self,
        path: str,
        head: str | None,
        branch: str | None,  # short name, without refs/heads/
        *,
        bare: bool = False,
        detached: bool = False,
        locked: str | None = None,
        prunable: str | None = None,
    ) -> None:
        self.path = path
        self.head = head
        self.branch = branch
        self.bare = bare
        self.detached = detached
        self.locked = locked
        self.prunable = prunable

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "head": self.head,
            "branch": self.branch,
            "detached": self.detached,
            "locked": self.locked,
            "prunable": self.prunable,
        }


# What `git worktree list` (and `git fetch`) print while another process is in the middle of
# `git worktree add` or `git worktree remove`: an admin dir whose `commondir` is still empty (or
# already gone), whose HEAD is still the null placeholder. Seen with git 2.39 against racing
# creates: `fatal: failed to read .git/worktrees/c0/commondir: Success`, `fatal: bad object
# worktrees/c0/HEAD`.
HALF_WRITTEN_WORKTREE_SIGNS = ("failed to read ", "bad object ", "bad ref for ")
HALF_WRITTEN_WORKTREE_FILES = ("/commondir", "/HEAD", "/gitdir")


def is_half_written_worktree_error(stderr: str) -> bool:
    """Whether git failed only because some worktree's admin dir was half-written."""
    for line in stderr.splitlines():
        if (
            "worktrees/" in line
            and any(sign in line for sign in HALF_WRITTEN_WORKTREE_SIGNS)
            and any(name in line for name in HALF_WRITTEN_WORKTREE_FILES)
        ):
            return True
    return False


def list_worktrees(*, cwd: Path) -> list[WorktreeRow]:
    """`git worktree list --porcelain -z`, retried once when it read a worktree another process
    was adding or removing (a lock-free reader has nothing else to wait on; a mutating command
    lists under `locks/fetch.lock`, `Workspace.settled_worktrees`)."""
    args = ["worktree", "list", "--porcelain", "-z"]
    result = run_git(args, cwd=cwd, step="list worktrees", check=False)
    if result.returncode != 0 and is_half_written_worktree_error(result.stderr):
        result = run_git(args, cwd=cwd, step="list worktrees", check=False)
    if result.returncode != 0:
        raise GitError("list worktrees", ["git", *args], result.returncode, result.stderr)
    rows: list[WorktreeRow] = []
    fields: dict[str, str | None] = {}

    def flush() -> None:
        if fields.get("worktree"):
            branch = fields.get("branch")
            rows.append(
                WorktreeRow(
                    path=str(fields["worktree"]),
                    head=fields.get("HEAD"),
                    branch=branch.removeprefix("refs/heads/") if branch else None,
                    bare="bare" in fields,
                    detached="detached" in fields,
                    locked=fields.get("locked") if "locked" in fields else None,
                    prunable=fields.get("prunable") if "prunable" in fields else None,
                )
            )
        fields.clear()

    for item in result.stdout.split("\0"):
        if item == "":
            flush()
            continue
        key, _, value = item.partition(" ")
        fields[key] = value if value else ("" if key in ("locked", "prunable") else None)
    flush()
    return rows


def add_worktree(path: Path, *, branch: str, start: str, new_branch: bool, cwd: Path) -> None:
    """`git worktree add --no-checkout`: on a new branch at `start` (no upstream), or on an
    existing branch (git refuses `--no-track` there: it only applies to a branch it creates).
    `populate_worktree` then checks it out: `worktree add` itself would run a `post-checkout`
    hook and the checkout's filters in a child of its own (SPEC 8)."""
    if new_branch:
        args = ["worktree", "add", "--no-checkout", "--no-track", "-b", branch, str(path), start]
    else:
        args = ["worktree", "add", "--no-checkout", str(path), branch]
    run_git(args, cwd=cwd, step="git worktree add")


def populate_worktree(path: Path) -> None:
    """Check out HEAD into a worktree made with `--no-checkout`: the index and every file, as
    `worktree add` does (`reset --hard --no-recurse-submodules`), neutralized: no hook runs,
    and a filter runs only as the user's own config defines it (a global LFS smudge does).
    Idempotent: a create killed half-way repeats it over whatever the first attempt wrote."""
    run_git(["reset", "--hard", "--quiet", "--no-recurse-submodules"], cwd=path, step="checkout")


def remove_worktree(path: str, *, force: bool, cwd: Path) -> GitResult:
    args = ["worktree", "remove"]
    if force:
        args += ["--force", "--force"]  # twice: also removes a locked worktree
    return run_git([*args, path], cwd=cwd, step="git worktree remove", check=False)


def delete_local_branch(branch: str, *, cwd: Path) -> bool:
    """Delete `refs/heads/<branch>`; return False when it did not exist."""
    if not ref_exists(f"refs/heads/{branch}", cwd=cwd):
        return False
    run_git(["branch", "-D", "--", branch], cwd=cwd, step=f"delete branch {branch}")
    return True


def delete_remote_branch(branch: str, *, expected_sha: str, cwd: Path) -> str | None:
    """Delete `refs/heads/<branch>` at origin under a lease on `expected_sha` (SPEC 3.9).

    Returns None when deleted, or the sha the remote moved to when the lease refused it (the
    branch then stays: commits pushed since are not lost).
    """
    ref = f"refs/heads/{branch}"
    result = run_git(
        ["push", f"--force-with-lease={ref}:{expected_sha}", "origin", "--delete", ref],
        cwd=cwd,
        step=f"delete origin branch {branch}",
        network=True,
        check=False,
    )
    if result.returncode == 0:
        return None
    if "stale info" in result.stderr or "rejected" in result.stderr:
        moved = remote_branch_head(branch, cwd=cwd)
        if moved is not None and moved != expected_sha:
            return moved
    raise GitError(
        f"delete origin branch {branch}",
        ["git", "push", f"--force-with-lease={ref}:{expected_sha}", "origin", "--delete", ref],
        result.returncode,
        result.stderr,
    )


def origin_default_branches(*, cwd: Path) -> set[str]:
    """Origin's default branch, asked of origin itself, plus the local `origin/HEAD` target.

    `refs/remotes/origin/HEAD` lives in the common dir an executor can write, so origin's own
    answer (`ls-remote --symref origin HEAD`) is the proof; the local ref only adds to it, and
    is all there is when origin cannot be reached.
    """
    found: set[str] = set()
    local = run_git(
        ["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"],
        cwd=cwd,
        step="origin default branch",
        check=False,
    )
    prefix = "refs/remotes/origin/"
    target = local.stdout.strip()
    if local.returncode == 0 and target.startswith(prefix):
        found.add(target[len(prefix) :])
    if not has_remote(cwd):
        return found
    try:
        remote = run_git(
            ["ls-remote", "--symref", "origin", "HEAD"],
            cwd=cwd,
            step="ls-remote --symref origin HEAD",
            network=True,
            check=False,
        )
    except GitTimeout:
        return found
    for line in remote.stdout.splitlines():
        ref, _, name = line.partition("\t")
        if name == "HEAD" and ref.startswith("ref: refs/heads/"):
            found.add(ref.removeprefix("ref: refs/heads/"))
    return found


def exclude_file(*, cwd: Path) -> Path:
    """The shared `info/exclude` every worktree of the repository reads."""
    result = run_git(
        ["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=cwd, step="locate exclude"
    )
    from pathlib import Path

    return Path(result.stdout.strip()) / "info" / "exclude"


# -- observing a worktree --------------------------------------------------------------------


def status_porcelain(worktree: Path, *, untracked: str = "normal") -> list[str] | None:
    """`git status --porcelain -z` entries (XY path), or None when git fails."""
    try:
        return status_entries(worktree, untracked=untracked)
    except GitError:
        return None


def status_entries(worktree: Path, *, untracked: str = "normal") -> list[str]:
    """`git status --porcelain -z` entries (XY path); a git failure raises (never "clean").
    `untracked="all"` lists each untracked file instead of its directory."""
    result = run_git(
        ["status", "--porcelain", "-z", f"--untracked-files={untracked}"],
        cwd=worktree,
        step="status",
        optional_locks=False,
    )
    return _porcelain_entries(result.stdout.split("\0"))


class BranchStatus:
    """One `git status --porcelain --branch` against a chosen upstream."""

    __slots__ = ("branch", "counts", "entries", "upstream")

    def __init__(
        self,
        entries: list[str],  # XY path, as `status_entries`; `!!` entries only when asked for
        branch: str,  # what git printed ("HEAD (no branch)", "No commits yet on x")
        upstream: str | None,  # the upstream git compared against, as it printed it
        counts: tuple[int, int] | None,  # (ahead, behind) of the branch against that upstream
    ) -> None:
        self.entries = entries
        self.branch = branch
        self.upstream = upstream
        self.counts = counts


def status_against(
    worktree: Path,
    *,
    branch: str,
    upstream_ref: str,
    ignored: bool = False,
    untracked: str = "normal",
) -> BranchStatus | None:
    """`git status --porcelain -z --branch` with `upstream_ref` as the branch's upstream for
    this one call, or None when git fails.

    The upstream is set through `GIT_CONFIG_*` variables (command-line scope: nothing is
    written, and a branch name holding `=` or `.` stays one key), so the one process that lists
    the dirty files also counts ahead/behind — the work of a separate `rev-list`.
    `ignored` adds the `!!` entries (`--ignored=traditional`: whole ignored directories);
    `untracked="all"` lists each untracked file instead of its directory.
    """
    inherited = os.environ.get("GIT_CONFIG_COUNT", "")
    count = int(inherited) if inherited.isdigit() else 0  # keep the caller's own -c settings
    extra = {
        "GIT_CONFIG_COUNT": str(count + 2),
        f"GIT_CONFIG_KEY_{count}": f"branch.{branch}.remote",
        f"GIT_CONFIG_VALUE_{count}": ".",
        f"GIT_CONFIG_KEY_{count + 1}": f"branch.{branch}.merge",
        f"GIT_CONFIG_VALUE_{count + 1}": upstream_ref,
    }
    args = ["status", "--porcelain", "-z", "--branch", "--ahead-behind"]
    args.append(f"--untracked-files={untracked}")
    if ignored:
        args.append("--ignored=traditional")
    result = run_git(
        args,
        cwd=worktree,
        step="status",
        check=False,
        optional_locks=False,
        environment=extra,
    )
    if result.returncode != 0:
        return None
    items = result.stdout.split("\0")
    header = items[0] if items and items[0].startswith("## ") else None
    if header is None:
        return None
    shown, upstream, counts = _branch_header(header[3:])
    return BranchStatus(_porcelain_entries(items[1:]), shown, upstream, counts)


def _branch_header(text: str) -> tuple[str, str | None, tuple[int, int] | None]:
    """`x...origin/main [ahead 1, behind 2]` -> ("x", "origin/main", (1, 2)).

    No `...` means no upstream; `[gone]` (or an unreadable bracket) means no counts."""
    shown, dots, rest = text.partition("...")
    if not dots:
        return shown, None, None
    upstream, _, bracket = rest.partition(" [")
    if not bracket:
        return shown, upstream, (0, 0)
    ahead = behind = 0
    for part in bracket.rstrip("]").split(", "):
        word, _, number = part.partition(" ")
        if word not in ("ahead", "behind") or not number.isdigit():
            return shown, upstream, None
        if word == "ahead":
            ahead = int(number)
        else:
            behind = int(number)
    return shown, upstream, (ahead, behind)


def _porcelain_entries(items: list[str]) -> list[str]:
    entries: list[str] = []
    index = 0
    while index < len(items):
        item = items[index]
        if item:
            entries.append(item)
            if item[:1] in ("R", "C"):
                index += 1  # a rename carries its source path as the next item
        index += 1
    return entries


def ahead_behind(base_ref: str, *, worktree: Path) -> tuple[int, int] | None:
    """(ahead, behind) of HEAD against `base_ref`, or None when git fails."""
    result = run_git(
        ["rev-list", "--left-right", "--count", f"{base_ref}...HEAD", "--"],
        cwd=worktree,
        step="rev-list",
        check=False,
    )
    parts = result.stdout.split()
    if result.returncode != 0 or len(parts) != 2:
        return None
    behind, ahead = int(parts[0]), int(parts[1])
    return ahead, behind


def head_commit(worktree: Path) -> str | None:
    result = run_git(["rev-parse", "--verify", "HEAD"], cwd=worktree, step="head", check=False)
    return result.stdout.strip() or None if result.returncode == 0 else None


def changed_since_merge_base(base_ref: str, *, worktree: Path) -> list[str] | None:
    """Files changed on HEAD since its merge base with `base_ref` (`git diff base...HEAD`)."""
    result = run_git(
        ["diff", "--name-only", "-z", f"{base_ref}...HEAD", "--"],
        cwd=worktree,
        step="diff",
        check=False,
    )
    if result.returncode != 0:
        return None
    return [name for name in result.stdout.split("\0") if name]


def diff_stat(revisions: str, *, worktree: Path) -> str | None:
    """`git diff --stat <revisions>` plus uncommitted changes, or None when git fails."""
    committed = run_git(["diff", "--stat", revisions, "--"], cwd=worktree, step="diff", check=False)
    working = run_git(["diff", "--stat", "HEAD", "--"], cwd=worktree, step="diff", check=False)
    if committed.returncode != 0:
        return None
    text = committed.stdout.rstrip()
    if working.returncode == 0 and working.stdout.strip():
        text += ("\n" if text else "") + "uncommitted:\n" + working.stdout.rstrip()
    return text


def merge_base(first: str, second: str, *, cwd: Path) -> str | None:
    result = run_git(["merge-base", first, second], cwd=cwd, step="merge-base", check=False)
    return result.stdout.strip() or None if result.returncode == 0 else None


def changed_files(
    revisions: str, *, worktree: Path, patterns: list[str] | None = None
) -> list[str]:
    """`git diff --name-only <revisions>`, limited to `:(glob)` patterns when given."""
    args = ["diff", "--name-only", "-z", revisions, "--"]
    if patterns is not None:
        args += [f":(glob){pattern}" for pattern in patterns]
    result = run_git(args, cwd=worktree, step="diff")
    return [name for name in result.stdout.split("\0") if name]


def head_and_tracked(worktree: Path) -> tuple[str | None, str]:
    """HEAD's commit (None: unborn) and the tracked changes, the two facts a drift check
    compares, from one `git status --porcelain=v2 --branch --untracked-files=no` (SPEC 7: not a
    `rev-parse` beside it). The changes are v2's entries: compare them only with this
    function's. When git fails, the answer of the two calls it replaces: None when `rev-parse
    --verify HEAD` fails too, else the status's `GitError` (never "unchanged")."""
    arguments = [
        "status", "--porcelain=v2", "-z", "--branch", "--no-ahead-behind", "--untracked-files=no",
    ]  # fmt: skip
    result = run_git(arguments, cwd=worktree, step="status", optional_locks=False, check=False)
    if result.returncode != 0:
        if head_commit(worktree) is None:
            return None, ""
        run_git(arguments, cwd=worktree, step="status", optional_locks=False)  # raises
    head: str | None = None
    entries = []
    for entry in result.stdout.split("\0"):
        if entry.startswith("# branch.oid "):
            oid = entry[len("# branch.oid ") :]
            head = oid if oid != "(initial)" else None
        elif entry and not entry.startswith("# "):
            entries.append(entry)
    return head, "\0".join(entries)


def tracked_status(worktree: Path) -> str:
    """Tracked changes only (`status --porcelain --untracked-files=no`), for drift checks."""
    result = run_git(
        ["status", "--porcelain", "-z", "--untracked-files=no"],
        cwd=worktree,
        step="status",
        optional_locks=False,
    )
    return result.stdout


# -- the project config's copy list (SPEC 3.3 copy-files) ------------------------------------


def ignored_paths(paths: Sequence[str], *, cwd: Path) -> set[str]:
    """Which of `paths` (relative to `cwd`) git ignores (`git check-ignore`; a tracked path is
    never ignored). One call per path: `-z` needs `--stdin`, and copy lists are short."""
    ignored = set()
    for path in paths:
        result = run_git(
            ["check-ignore", "-q", "--", path], cwd=cwd, step="check-ignore", check=False
        )
        if result.returncode not in (0, 1):  # 1: not ignored
            raise GitError(
                "check-ignore", ["git", "check-ignore"], result.returncode, result.stderr
            )
        if result.returncode == 0:
            ignored.add(path)
    return ignored


def tracked_paths(paths: Sequence[str], *, cwd: Path) -> set[str]:
    """Which of `paths` are tracked files, or directories holding one (literal paths, no
    globbing)."""
    if not paths:
        return set()
    result = run_git(
        ["ls-files", "-z", "--", *paths],
        cwd=cwd,
        step="ls-files",
        environment={"GIT_LITERAL_PATHSPECS": "1"},
    )
    files = [name for name in result.stdout.split("\0") if name]
    return {
        path
        for path in paths
        if any(
            name == path.rstrip("/") or name.startswith(path.rstrip("/") + "/") for name in files
        )
    }


def untracked_files(worktree: Path) -> list[str]:
    """Every untracked, non-ignored file, one by one (`ls-files --others --exclude-standard`)."""
    result = run_git(
        ["ls-files", "-z", "--others", "--exclude-standard"], cwd=worktree, step="ls-files"
    )
    return [name for name in result.stdout.split("\0") if name]


# -- the ref guard hook (SPEC 4.1 guard_refs) -------------------------------------------------


def config_value(key: str, *, cwd: Path) -> str | None:
    """`git config --get KEY`, or None when it is not set."""
    result = run_git(
        ["config", "--get", key], cwd=cwd, step="read config", check=False, unpinned=(key,)
    )
    return result.stdout.strip() or None if result.returncode == 0 else None


def hooks_directory(*, cwd: Path) -> Path:
    """The hooks directory git runs hooks from (the common dir's, or `core.hooksPath`)."""
    result = run_git(
        ["rev-parse", "--path-format=absolute", "--git-path", "hooks"],
        cwd=cwd,
        step="hooks",
        unpinned=("core.hooksPath",),  # where the executor's git runs hooks from, not the lead's
    )
    from pathlib import Path

    return Path(result.stdout.strip())


# -- the main worktree (SPEC 8: the repository file is read from it only) ----------------------


def main_worktree(common_git_dir: Path) -> Path | None:
    """`main_worktree_text` as a Path."""
    found = main_worktree_text(common_git_dir)
    if found is None:
        return None
    from pathlib import Path

    return Path(found)


def main_worktree_text(common_git_dir: Path | str) -> str | None:
    """The repository's main working tree, derived as git derives it (`git worktree list`'s
    first entry is the real path of the common dir without its `/.git`), or None when the
    common dir is not a `.git` directory (a bare repository, a separated git dir, a submodule's
    `modules/` dir: git then names the git dir itself, which is no checkout).

    Computed from the path alone, never from `core.worktree`, `core.bare` or a `.git` file: those
    live where an executor can write, and would let it name its own checkout. No git process is
    started (the empty-registry reads stay within their start-up budget)."""
    real = pathtext.joined(os.path.realpath(common_git_dir))  # absolute: name and parent are
    parent = os.path.dirname(real)  # os.path's, as Path's `name` and `parent` spell them
    if os.path.basename(real) != ".git" or not os.path.isdir(parent):
        return None
    return parent


# -- the config audit (SPEC 8) ----------------------------------------------------------------


def config_listing(*, cwd: Path, file: Path | None = None) -> str | None:
    """`git config --list` with scopes and origins (pair/gitconfig.py `LIST_ARGS`), of every
    file git reads in `cwd` or of one `file`; None when git cannot list it."""
    from pair.config_audit import listing_args

    result = run_git(listing_args(file), cwd=cwd, step="git config --list", check=False)
    return result.stdout if result.returncode == 0 else None


# -- status --all's overlaps in one batch (SPEC 7 revision 3) ---------------------------------


def commits_ahead_with_parents(
    base_ref: str, heads: Sequence[str], *, cwd: Path
) -> dict[str, list[str]] | None:
    """Every commit reachable from one of `heads` but not from `base_ref`, with its parents
    (`git rev-list --parents HEADS --not BASE`): one process for every unit on that base.
    None when git fails."""
    if not heads:
        return {}
    result = run_git(
        ["rev-list", "--parents", *heads, "--not", base_ref, "--"],
        cwd=cwd,
        step="rev-list",
        check=False,
    )
    if result.returncode != 0:
        return None
    commits: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        sha, *parents = line.split()
        commits[sha] = parents
    return commits


def changed_between(pairs: Sequence[tuple[str, str]], *, cwd: Path) -> list[list[str]] | None:
    """The files that differ between each `(head, base)` commit pair, in order, from one `git
    diff-tree --stdin` (a pair without differences prints nothing, so each block is found by
    its head, which diff-tree prints first). None when git fails."""
    if not pairs:
        return []
    text = "".join(f"{head} {base}\n" for head, base in pairs)
    result = run_git(
        ["diff-tree", "--stdin", "-r", "--name-only", "-z", "--no-renames"],
        cwd=cwd,
        step="diff-tree --stdin",
        check=False,
        stdin_text=text,
    )
    if result.returncode != 0:
        return None
    found: list[list[str]] = [[] for _ in pairs]
    index_of: dict[str, list[int]] = {}
    for index, (head, _) in enumerate(pairs):
        index_of.setdefault(head, []).append(index)
    current: list[int] = []
    position = -1  # headers come in input order: a name is a header only if a later head
    for item in result.stdout.split("\0"):
        if not item:
            continue
        later = [i for i in index_of.get(item, []) if i > position]
        if later:
            current = [i for i in index_of[item] if i >= later[0]]
            position = current[-1]
            continue
        for index in current:
            found[index].append(item)
    return found


# -- what a forced dismantle keeps (SPEC 3.9) ---------------------------------------------------

# Every option that worktree config (writable by the executor) could turn against a patch that
# must apply again: no external diff or textconv program runs, no colour, the standard a/ b/
# prefixes, paths from the worktree root, binary changes in full.
SAVED_DIFF_ARGS = (
    "diff",
    "--binary",
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "HEAD",
)


def write_uncommitted_patch(worktree: Path, output: Path) -> None:
    """`git diff --binary HEAD` (staged and unstaged changes of tracked files) into `output`;
    git writes the file itself, so a large patch never passes through this process."""
    run_git(
        [*SAVED_DIFF_ARGS, f"--output={output}", "--"],
        cwd=worktree,
        step="save uncommitted changes",
    )


def uncommitted_patch_size(worktree: Path) -> int:
    """The size in bytes `write_uncommitted_patch` would write (for a dismantle's dry run)."""
    result = run_git([*SAVED_DIFF_ARGS, "--"], cwd=worktree, step="measure uncommitted changes")
    return len(result.stdout.encode("utf-8", "surrogateescape"))
