"""Git is neutralized (SPEC 8): nothing an executor plants in the git common dir runs in the
lead's own `unit` and `pair` processes.

Each vector is planted the way a prompt-injected executor would: written into the shared
`.git/config`, a worktree's `config.worktree`, an included file, `info/attributes`,
`.git/hooks/`, a planted `core.hooksPath`. Every payload appends its vector's name (and whether
GITHUB_TOKEN was in its environment) to one marker file; the lead's commands must succeed and
the marker must never appear. The executor's own git is not neutralized: a user's own hook and
a user's global filter still apply to it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Sandbox, git, write_record

ROUTES = ("shared-config", "config-worktree", "include-path", "include-if", "info-attributes")


def _payload(sandbox: Sandbox) -> tuple[Path, Path]:
    """The planted program and the marker file it appends to."""
    marker = sandbox.root / "planted-ran.log"
    script = sandbox.root / "planted.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$1 token=${{GITHUB_TOKEN:+present}} unit=${{UNITMGR_UNIT:-}}" >> {marker}\n'
        '[ "$2" = filter ] && exec cat\n'
        "exit 0\n"
    )
    script.chmod(0o755)
    return script, marker


def _command(script: Path, vector: str, *, filter_program: bool = False) -> str:
    return f"{script} {vector}" + (" filter" if filter_program else "")


def _plant_route(sandbox: Sandbox, route: str, worktree: Path, script: Path) -> None:
    """One route to a command git runs on `status`: an fsmonitor, or a clean filter."""
    common = sandbox.common_dir
    fsmonitor = _command(script, f"fsmonitor:{route}")
    if route == "shared-config":
        git(sandbox.repo, "config", "core.fsmonitor", fsmonitor)
    elif route == "config-worktree":
        git(sandbox.repo, "config", "extensions.worktreeConfig", "true")
        git(worktree, "config", "--worktree", "core.fsmonitor", fsmonitor)
    elif route == "include-path":
        included = sandbox.root / "included.gitconfig"
        included.write_text(f'[core]\n\tfsmonitor = "{fsmonitor}"\n')
        git(sandbox.repo, "config", "include.path", str(included))
    elif route == "include-if":
        included = sandbox.root / "conditional.gitconfig"
        included.write_text(f'[core]\n\tfsmonitor = "{fsmonitor}"\n')
        git(sandbox.repo, "config", f"includeIf.gitdir:{common}/.path", str(included))
    else:
        clean = _command(script, f"filter:{route}", filter_program=True)
        git(sandbox.repo, "config", "filter.planted.clean", clean)
        git(sandbox.repo, "config", "filter.planted.smudge", clean)
        (common / "info").mkdir(exist_ok=True)
        (common / "info" / "attributes").write_text("* filter=planted\n")


_STAMPS = iter(range(1_000_000, 2_000_000, 7))


def _stat_dirty(worktree: Path) -> None:
    """Make git re-read a tracked file's content (where a clean filter runs): a new mtime, a
    whole second away from any the index recorded."""
    readme = worktree / "README.md"
    readme.write_text(readme.read_text())
    stamp = next(_STAMPS)
    os.utime(readme, (stamp, stamp))


@pytest.mark.parametrize("route", ROUTES)
def test_status_all_and_list_run_nothing_planted(sandbox: Sandbox, route: str) -> None:
    script, marker = _payload(sandbox)
    worktree = sandbox.worktree("u1")
    git(sandbox.repo, "worktree", "add", "-q", "-b", "feat/u1", str(worktree), "main")
    write_record(sandbox, "u1", base_ref="refs/heads/main", worktree=str(worktree))
    _plant_route(sandbox, route, worktree, script)
    _stat_dirty(worktree)
    git(worktree, "status", "--porcelain")  # the planted program does run in plain git
    assert marker.is_file(), f"{route}: the plant is not live, the test proves nothing"
    marker.unlink()
    for args in (("status", "--all"), ("list",), ("status", "--unit", "u1")):
        _stat_dirty(worktree)
        _stat_dirty(sandbox.repo)
        result = sandbox.unit(*args)
        assert result.code == 0, result.stdout
        assert not marker.exists(), f"{route}: {args} ran {marker.read_text()}"


def _plant_everything(sandbox: Sandbox, worktree: Path, script: Path) -> None:
    common = sandbox.common_dir
    for route in ROUTES:
        _plant_route(sandbox, route, worktree, script)
    git(sandbox.repo, "config", "remote.origin.uploadpack", _command(script, "uploadpack"))
    git(sandbox.repo, "config", "remote.origin.receivepack", _command(script, "receivepack"))
    git(sandbox.repo, "config", "diff.external", _command(script, "diff-external"))
    git(sandbox.repo, "config", "core.pager", _command(script, "pager"))
    hooks = ("post-checkout", "post-index-change", "reference-transaction", "pre-push")
    for directory in (common / "hooks", sandbox.root / "planted-hooks"):
        directory.mkdir(exist_ok=True)
        for hook in hooks:
            path = directory / hook
            path.write_text(f'#!/bin/sh\nexec {script} "hook:{directory.name}/{hook}"\n')
            path.chmod(0o755)
    # The hooks path wins over `.git/hooks`: plant it in a worktree's own config, so the
    # shared hooks directory stays live for the lead's calls in the main worktree.
    git(worktree, "config", "--worktree", "core.hooksPath", str(sandbox.root / "planted-hooks"))


def test_the_leads_commands_run_nothing_planted(sandbox: Sandbox) -> None:
    """One unit, every vector planted at once, then each of the lead's commands."""
    script, marker = _payload(sandbox)
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    worktree = sandbox.worktree("u1")
    _plant_everything(sandbox, worktree, script)
    steps: list[tuple[str, ...]] = [
        ("doctor",),
        # Trusted on purpose (the config audit would refuse every mutating command otherwise):
        # what is trusted still never runs in the lead.
        ("doctor", "--trust"),
        ("status", "--all"),
        ("list",),
        ("status", "--unit", "u1"),
        ("scope", "--unit", "u1"),
        ("scope", "--unit", "u1", "--approve"),
        ("verify", "--unit", "u1"),
        ("addendum", "--unit", "u1", "--text", "One more thing.", "--queue"),
        ("restaff", "--unit", "u1", "--lead", "human", "--partner", "script",
         "--reason", "tests", "--model", "cat > /dev/null; echo done"),
        ("merge", "--unit", "u1", "--head", git(worktree, "rev-parse", "HEAD"), "--dry-run"),
        (*sandbox.create_args("u2"),),
        ("dismantle", "--unit", "u2", "--force", "u2"),
    ]  # fmt: skip
    for args in steps:
        _stat_dirty(worktree)
        _stat_dirty(sandbox.repo)
        result = sandbox.unit(*args)
        assert not marker.exists(), f"{args[0]} ran {marker.read_text()}"
        assert result.document is not None, result.stdout + result.stderr
        assert result.document.get("code") not in ("git-failed", "step-failed", "internal"), (
            args,
            result.stdout,
        )
        # (scope --approve, verify and merge may refuse on the merits: the file is uncommitted)
        if args[0] in ("doctor", "status", "list", "create", "dismantle", "addendum") or args == (
            "scope",
            "--unit",
            "u1",
        ):
            assert result.code == 0, (args, result.stdout)
        if args[0] == "restaff":
            sandbox.wait_turn("u1")
    created = sandbox.worktree("u2")
    assert not created.exists()  # made, checked out and removed again
    # pair's own git calls: locating the pair (status) and the ref audit around a turn.
    status = sandbox.pair("status", repo=worktree)
    assert status.code == 0, status.stdout
    body = sandbox.root / "again.md"
    body.write_text("Once more.\n")
    sent = sandbox.pair("send", "--kind", "task", "--body-file", str(body), repo=worktree)
    assert sent.code == 0, sent.stdout
    assert not marker.exists(), f"pair ran {marker.read_text()}"


def test_an_ext_transport_behind_insteadof_never_runs(sandbox: Sandbox) -> None:
    _, marker = _payload(sandbox)
    assert sandbox.origin is not None
    git(sandbox.repo, "config", "protocol.ext.allow", "always")
    git(sandbox.repo, "config", f"url.ext::sh -c touch% {marker}.insteadOf", str(sandbox.origin))
    result = sandbox.create("u1")
    assert not marker.exists(), "the ext:: transport ran in the lead"
    assert result.code == 1 and result["code"] == "git-failed", result.stdout
    assert "ext" in result["detail"]["cause"]["stderr"] if "cause" in result["detail"] else True


def test_a_users_own_hooks_and_global_filters_still_apply_to_the_executor(
    sandbox: Sandbox, isolated_environment: Path
) -> None:
    """A global smudge filter (LFS-like) still smudges the new worktree, even when the
    repository redefines it; a user's pre-commit hook still runs for the executor's commit."""
    script, marker = _payload(sandbox)
    smudge, clean = sandbox.root / "smudge.sh", sandbox.root / "clean.sh"
    smudge.write_text("#!/bin/sh\nsed 's/^pointer$/smudged content/'\n")
    clean.write_text("#!/bin/sh\nsed 's/^smudged content$/pointer/'\n")
    smudge.chmod(0o755)
    clean.chmod(0o755)
    with (isolated_environment / ".gitconfig").open("a") as handle:
        handle.write(f'[filter "lfs"]\n\tsmudge = {smudge}\n\tclean = {clean}\n\trequired = true\n')
    (sandbox.repo / ".gitattributes").write_text("*.bin filter=lfs\n")
    (sandbox.repo / "asset.bin").write_text("pointer\n")
    git(sandbox.repo, "add", ".gitattributes", "asset.bin")
    git(sandbox.repo, "commit", "-q", "-m", "an lfs asset")
    git(sandbox.repo, "push", "-q", "origin", "HEAD:main")
    # The repository's own override of the global filter: planted, never run by the lead.
    override = _command(script, "override", filter_program=True)
    git(sandbox.repo, "config", "filter.lfs.smudge", override)
    hook = sandbox.common_dir / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\necho pre-commit >> {sandbox.root / 'user-hook.log'}\n")
    hook.chmod(0o755)
    model = "cat >/dev/null; echo hi >GREETING.md; git add GREETING.md; git commit -qm hi; echo ok"
    result = sandbox.create("u1", model=model)
    assert result.code == 0, result.stdout
    worktree = sandbox.worktree("u1")
    assert (worktree / "asset.bin").read_text() == "smudged content\n"
    assert not marker.exists(), marker.read_text()
    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "replied", receipt
    # Read once the executor's turn (which adds and commits) is over: the index was populated
    # as a checkout's, so the smudged asset does not read as modified.
    assert git(worktree, "status", "--porcelain") == ""
    assert (sandbox.root / "user-hook.log").read_text() == "pre-commit\n"
    assert git(worktree, "log", "-1", "--format=%s") == "hi"


def test_a_create_killed_between_the_add_and_the_checkout_resumes_to_a_full_checkout(
    sandbox: Sandbox,
) -> None:
    """The state a kill between `worktree add --no-checkout` and the checkout leaves (made here
    by hand after a crash as the step starts): the resume checks the worktree out in full."""
    import os as _os

    crash = dict(
        _os.environ, UNITMGR_TEST_HOOKS="1", UNITMGR_TEST_CRASH_AFTER="create:worktree:started"
    )
    assert sandbox.unit(*sandbox.create_args("u1"), env=crash).code != 0
    worktree = sandbox.worktree("u1")
    base = sandbox.record("u1")["base_sha"]
    git(
        sandbox.repo, "worktree", "add", "-q", "--no-checkout", "-b", "feat/u1", str(worktree), base
    )
    assert not (worktree / "README.md").exists()
    resumed = sandbox.create("u1")
    assert resumed.code == 0 and resumed["status"] == "resumed", resumed.stdout
    assert (worktree / "README.md").read_text() == "# sandbox\n"
    assert git(worktree, "status", "--porcelain", "--untracked-files=no") == ""


def test_the_child_environment_follows_every_change_of_the_parents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`child_environment` reuses its copy of `os.environ` only while nothing in it changed: a
    set, changed or removed variable shows in the next child's environment, and what one
    caller adds or changes in its copy reaches no other child."""
    from registry.environment import child_environment

    name = "UNITMGR_TEST_CHILD_VARIABLE"
    monkeypatch.delenv(name, raising=False)
    first = child_environment({"ADDED_FOR_ONE": "1"})
    assert first["GIT_TERMINAL_PROMPT"] == "0" and first["ADDED_FOR_ONE"] == "1"
    first["GIT_TERMINAL_PROMPT"] = "1"
    again = child_environment()
    assert again["GIT_TERMINAL_PROMPT"] == "0" and "ADDED_FOR_ONE" not in again
    monkeypatch.setenv(name, "one")
    assert child_environment()[name] == "one"
    monkeypatch.setenv(name, "two")
    assert child_environment()[name] == "two"
    monkeypatch.delenv(name)
    assert name not in child_environment()


def test_the_executable_key_shortcut_answers_as_the_whole_catalogue() -> None:
    """pair/gitconfig.py answers most keys without compiling its catalogue (SPEC 7 start-up):
    for every key built from the catalogue's own patterns, and near misses of each, the answer
    is the full regex's."""
    import itertools
    import re

    from pair import gitconfig

    whole = re.compile("|".join(f"(?:{pattern})" for pattern in gitconfig._EXECUTABLE))
    fillers = ["x", "My.Driver", "a.b.c", "", "UPPER"]
    keys: set[str] = set()
    for pattern in gitconfig._EXECUTABLE:
        words = re.split(r"\\\.", pattern)
        options = [
            re.sub(r"[()]", "", word).split("|") if word != ".+" else fillers for word in words
        ]
        for parts in itertools.product(*options):
            key = ".".join(parts)
            keys |= {key, key.upper(), key + "x", "x" + key, key + ".x", key.rsplit(".", 1)[0]}
    keys |= {"core.repositoryformatversion", "core.bare", "user.name", "unitmgr.x", "", "core"}
    assert len(keys) > 500
    for key in sorted(keys):
        assert gitconfig.is_executable_key(key) == (whole.fullmatch(key.lower()) is not None), key


@pytest.mark.parametrize(
    "setup",
    [
        [],
        [["remote", "add", "origin", "https://github.com/o/r.git"]],
        [["remote", "add", "origin", " ssh://git@example.com/o/r "]],
        [["remote", "add", "upstream", "https://github.com/o/u.git"]],
        [["config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"]],
        [
            ["remote", "add", "origin", "gh:o/r"],
            ["config", "url.https://github.com/.insteadOf", "gh:"],
        ],
        [["remote", "add", "origin", "a"], ["config", "--add", "remote.origin.url", "b"]],
        [["config", "remote.Origin.url", "https://github.com/o/case.git"]],
        [["config", "remote.origin.url", ""]],
        ["legacy"],
    ],
)
def test_the_origin_url_read_from_the_listing_is_what_git_remote_get_url_says(
    tmp_path: Path, setup: list[object]
) -> None:
    """unitmgr/git.py answers `git remote get-url origin` from the config listing its other
    calls already made (SPEC 7 start-up) — the same answer git gives, or git's own answer
    wherever git's rules decide (a rewrite, a remote file, no URL or several)."""
    import subprocess

    from unitmgr import git as unit_git

    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for step in setup:
        if step == "legacy":
            (repo / ".git" / "remotes").mkdir()
            (repo / ".git" / "remotes" / "origin").write_text("URL: https://github.com/o/l\n")
        else:
            assert isinstance(step, list)
            git(repo, *step)
    asked = subprocess.run(
        ["git", "remote", "get-url", "origin"], cwd=repo, capture_output=True, text=True
    )
    expected = (asked.stdout.strip() or None) if asked.returncode == 0 else None
    assert unit_git.remote_url(repo) == expected
    plain = all(isinstance(step, list) and "" not in step for step in setup)
    if len(setup) < 2 and plain and "fetch" not in str(setup):
        assert unit_git._listed_remote_url(repo, "origin") is not None  # no git process asked
    assert unit_git.remote_url(repo / ".git") == unit_git.remote_url(repo)
