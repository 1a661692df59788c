"""The project config file (SPEC 3.16): keys, types, precedence, sources, `unit config`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from registry.errors import UsageError
from tests.conftest import Sandbox, git
from unitmgr.config import NOTIFY_EVENTS, load_config, machine_file


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_precedence_local_over_repository_over_defaults(tmp_path: Path) -> None:
    top, common = tmp_path / "repo", tmp_path / "repo" / ".git"
    shared = _write(
        top / ".unitmgr.toml",
        'max_active = 5\nmax_held = 3\nsetup = "make deps"\ncopy = [".env"]\n'
        'worktree_root = "../{repo}.units/{branch_slug}"\n'
        '[notify]\ncommand = "notify-send unit"\nevents = ["attention", "merged"]\n',
    )
    local = _write(
        machine_file(common),
        'max_active = 7\nguard_refs = true\n[notify]\nurl = "https://hooks.example/u"\n',
    )
    config = load_config(top, common)
    assert (config.value("max_active"), config.source("max_active")) == (7, "local")
    assert config.file_of("max_active") == local
    assert (config.value("max_held"), config.source("max_held")) == (3, "repository")
    assert config.file_of("max_held") == shared
    assert (config.value("lead"), config.source("lead")) == (None, "default")
    assert config.value("stuck_minutes") == 10 and config.value("guard_refs") is True
    assert config.notify.command == "notify-send unit"  # per key: the repository's command
    assert config.notify.url == "https://hooks.example/u"  # and the local url
    assert config.notify.events == ("attention", "merged")
    assert config.worktree_for(toplevel=top, unit_id="u1", branch="feat/a-b") == str(
        tmp_path / "repo.units" / "feat-a-b"
    )
    # No file at all: every default, and notify configured nowhere.
    empty = load_config(tmp_path / "none", tmp_path / "none" / ".git")
    assert empty.value("max_active") == 2 and empty.source("copy") == "default"
    assert not empty.notify.configured and empty.notify.events == NOTIFY_EVENTS
    assert empty.worktree_for(toplevel=top, unit_id="u", branch="b") is None


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("max_active = 0\n", "max_active", "an integer from 1 to 10000"),
        ("max_held = true\n", "max_held", "an integer from 1 to 10000"),
        ("max_held = 10001\n", "max_held", "an integer from 1 to 10000"),
        ('lead = "nobody"\n', "lead", "a string, one of"),
        ("setup = 3\n", "setup", "a non-empty string"),
        ('copy = "/etc/passwd"\n', "copy", "a list of relative paths"),
        ('copy = ["../secret"]\n', "copy", "a list of relative paths"),
        ('worktree_root = "/w/{repo.__class__}"\n', "worktree_root", "a non-empty path template"),
        ('worktree_root = "/w/{repo}"\n', "worktree_root", "at least one of"),
        ('stuck_minutes = "ten"\n', "stuck_minutes", "a number of minutes"),
        ('guard_refs = "yes"\n', "guard_refs", "a boolean"),
        ("ports = 65\n", "ports", "an integer from 0 to 64"),
        ("ports = -1\n", "ports", "an integer from 0 to 64"),
        ('ports = "2"\n', "ports", "an integer from 0 to 64"),
        ('port_range = "80-90"\n', "port_range", 'a range "A-B" of TCP ports'),
        ('port_range = "3000-2000"\n', "port_range", 'a range "A-B" of TCP ports'),
        ('port_range = "20000-70000"\n', "port_range", 'a range "A-B" of TCP ports'),
        ("port_range = 20000\n", "port_range", 'a range "A-B" of TCP ports'),
        ('[notify]\nurl = "file:///etc/passwd"\n', "notify.url", "an http:// or https:// URL"),
        ('[notify]\nevents = ["attention", "lunch"]\n', "notify.events", "a list of event names"),
        ('notify = "x"\n', "notify", "a table [notify]"),
        ("max_actve = 3\n", "max_actve", "a known key"),
        ("max_active = = 3\n", None, "valid UTF-8 TOML"),
    ],
)
def test_a_bad_key_or_type_is_config_invalid_naming_file_key_and_type(
    tmp_path: Path, text: str, key: str | None, expected: str
) -> None:
    path = _write(tmp_path / ".unitmgr.toml", text)
    with pytest.raises(UsageError) as raised:
        load_config(tmp_path, tmp_path / ".git")
    error = raised.value
    assert error.code == "config-invalid" and error.exit_code == 2
    assert error.detail == {"file": str(path), "key": key, "expected": error.detail["expected"]}
    assert expected in error.detail["expected"] and str(path) in error.reason
    assert key is None or f"{key}:" in error.reason
    assert "unit config" in error.next_step


def test_unit_config_names_every_problem_of_both_files_at_once(sandbox: Sandbox) -> None:
    shared = _write(sandbox.repo / ".unitmgr.toml", 'max_active = "four"\nstuk = 3\n')
    local = _write(sandbox.machine_config, '[notify]\nurl = "ftp://x"\n')
    for args in (("config",), ("config", "--approve")):
        refused = sandbox.unit(*args)
        assert refused.code == 2 and refused["code"] == "config-invalid", refused.stdout
        problems = refused["detail"]["problems"]
        assert [(p["file"], p["key"]) for p in problems] == [
            (str(shared), "max_active"), (str(shared), "stuk"), (str(local), "notify.url"),
        ]  # fmt: skip
        assert refused["detail"]["key"] == "max_active"  # the first one's, as for one problem
        assert refused["reason"].startswith("3 problems in the project config: ")
        for problem in problems:
            assert problem["key"] in refused["reason"] and problem["expected"] in problem["reason"]
        assert refused["next"].startswith(f"max_active in {shared}: must be an integer")
    _write(sandbox.repo / ".unitmgr.toml", "max_active = 3\n")
    _write(sandbox.machine_config, "")
    assert sandbox.unit("config").code == 0


def test_limits_go_up_to_ten_thousand_in_the_file_and_the_flags(tmp_path: Path) -> None:
    """A batch of 300 or 1000 units (SPEC 7) can be admitted: the cap is 10000, not 100."""
    from unitmgr.validation import limit

    _write(tmp_path / ".unitmgr.toml", "max_active = 1000\nmax_held = 10000\n")
    loaded = load_config(tmp_path, tmp_path / ".git")
    assert (loaded.value("max_active"), loaded.value("max_held")) == (1000, 10000)
    assert limit("300", "--max-active") == 300 and limit("10000", "--max-held") == 10000


def test_a_config_that_is_not_a_small_regular_file_is_refused_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".unitmgr.toml")  # opened for reading it would block forever
    with pytest.raises(UsageError) as raised:
        load_config(tmp_path, tmp_path / ".git")
    assert raised.value.code == "config-invalid"
    (tmp_path / ".unitmgr.toml").unlink()
    _write(tmp_path / ".unitmgr.toml", "# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(UsageError, match="1 MiB"):
        load_config(tmp_path, tmp_path / ".git")


def test_unit_config_prints_every_setting_with_its_source(sandbox: Sandbox) -> None:
    shared = _write(sandbox.repo / ".unitmgr.toml", 'max_held = 4\nsetup = "make deps"\n')
    local = _write(sandbox.machine_config, 'setup = "true"\n')
    result = sandbox.unit("config")
    assert result.code == 0, result.stdout
    settings = result["settings"]
    assert settings["max_held"] == {"value": 4, "source": "repository", "file": str(shared)}
    assert settings["setup"] == {
        "value": "true",
        "source": "local",
        "file": str(local),
        "approval": "unapproved",  # a command from a file runs only once approved (SPEC 8)
    }
    assert settings["max_active"] == {"value": 2, "source": "default", "file": None}
    assert result["files"]["local"] == {"path": str(local), "present": True}
    table = sandbox.unit("config", "--format", "table")
    assert table.code == 0 and table.document is None
    assert any(
        line.split() == ["max_held", "4", "(repository)"] for line in table.stdout.splitlines()
    ), table.stdout


def test_copy_files_copies_only_ignored_paths_and_never_leaves_the_trees(tmp_path: Path) -> None:
    from unitmgr.copy_files import copy_listed

    source, target, outside = tmp_path / "main", tmp_path / "unit", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not ours\n")
    source.mkdir()
    git(source, "init", "-q")
    _write(source / ".gitignore", ".env\n.venv/\nlinked/\nplain.txt\n")
    _write(source / "tracked.txt", "t\n")
    git(source, "add", ".gitignore", "tracked.txt")
    git(source, "commit", "-q", "-m", "init")
    _write(source / ".env", "KEY=1\n")
    (source / ".env").chmod(0o600)
    _write(source / ".venv" / "bin" / "tool", "#!/bin/sh\n")
    (source / ".venv" / "lib").symlink_to("bin")  # relative, inside: copied as a link
    (source / ".venv" / "etc").symlink_to(outside)  # absolute: skipped
    (source / "linked").symlink_to(outside)  # its directory leads out of the tree
    _write(source / "unignored.txt", "u\n")
    target.mkdir()
    listed = [".env", "./.venv/", "tracked.txt", "missing", "unignored.txt", "linked/secret"]
    report = copy_listed(listed, source=source, target=target)
    assert report.copied == [".env", ".venv"]
    assert (target / ".env").read_text() == "KEY=1\n"
    assert (target / ".env").stat().st_mode & 0o777 == 0o600
    assert not (target / ".env").is_symlink()
    assert (target / ".venv" / "bin" / "tool").read_text() == "#!/bin/sh\n"
    assert os.readlink(target / ".venv" / "lib") == "bin"
    assert not os.path.lexists(target / ".venv" / "etc")
    assert not (target / "linked").exists() and not (target / "tracked.txt").exists()
    whys = {item["path"]: item["why"] for item in report.skipped}
    assert whys == {
        ".venv/etc": "a symbolic link pointing outside the worktree",
        "tracked.txt": "tracked by git: the worktree has it already",
        "missing": "absent in the main worktree",
        "unignored.txt": "not ignored by git: copy only ignored files",
        "linked/secret": "its directory leads out of the main worktree through a symbolic link",
    }
    # A repeat (a resumed step) replaces what the interrupted copy left, nothing else.
    (target / ".env").write_text("half")
    assert copy_listed([".env"], source=source, target=target).copied == [".env"]
    assert (target / ".env").read_text() == "KEY=1\n"


def test_a_repository_with_only_a_config_runs_a_three_unit_batch(sandbox: Sandbox) -> None:
    """Issue 11's done-when: the create calls name only the unit, branch, base, staffing, task
    and what SPEC 3.3 still requires (scope, validation, reason; `--paths` for the scope
    approval), never --worktree, --lead, --setup or a limit; `.env` is copied; setup's
    leftovers never block scope --approve or verify, nor make an overlap, until they change."""
    _write(
        sandbox.repo / ".unitmgr.toml",
        'max_active = 3\nmax_held = 3\nlead = "human"\nsetup = "echo x > build.log"\n'
        'worktree_root = "../{repo}.units/{branch_slug}"\ncopy = [".env"]\n',
    )
    _write(sandbox.repo / ".gitignore", ".env\n")
    git(sandbox.repo, "add", ".unitmgr.toml", ".gitignore")
    git(sandbox.repo, "commit", "-q", "-m", "project config")
    git(sandbox.repo, "push", "-q", "origin", "HEAD:main")
    _write(sandbox.repo / ".env", "API_URL=http://127.0.0.1:9\n")
    approved = sandbox.unit("config", "--approve")  # the committed setup, once (SPEC 8)
    assert [entry["key"] for entry in approved["approved"]] == ["setup"], approved.stdout
    work = 'cat > /dev/null; f=greet-$(basename "$PWD").md; echo hi > $f; git add $f; '
    work += "git commit -qm greet; echo done"

    def create(unit_id: str) -> object:
        return sandbox.unit(
            "create", "--unit", unit_id, "--branch", f"feat/{unit_id}", "--base", "main",
            "--partner", "script", "--model", work, "--reason", "batch",
            "--scope", "a greeting", "--paths", f"greet-feat-{unit_id}.md",
            "--validation", "ls greet-*.md", "--task-file", str(sandbox.task),
        )  # fmt: skip

    units = ("u1", "u2", "u3")
    for unit_id in units:
        created = create(unit_id)
        assert created.code == 0, created.stdout + created.stderr
    worktrees = {u: sandbox.root / "repo.units" / f"feat-{u}" for u in units}
    for unit_id in units:
        turn = sandbox.pair("wait", "--timeout-min", "1", repo=worktrees[unit_id])
        assert turn.document["status"] == "replied", turn.stdout
        record = sandbox.record(unit_id)
        assert record["worktree"] == os.path.realpath(worktrees[unit_id])
        assert record["lead"] == "human" and record["setup"] == "echo x > build.log"
        assert set(record["setup_baseline"]) == {"build.log"}
        assert (worktrees[unit_id] / ".env").read_text() == "API_URL=http://127.0.0.1:9\n"
    refused = create("u4")  # max_active = 3 from the file
    assert refused.code == 1 and refused["code"] == "admission-paused", refused.stdout
    assert refused["detail"]["max_active"] == 3 and refused["detail"]["active"] == 3

    status = sandbox.unit("status", "--all")
    assert status["overlaps"] == [], status["overlaps"]
    assert all(unit["worktree"]["dirty_files"] == 0 for unit in status["units"])
    for unit_id in units:
        approved = sandbox.unit("scope", "--unit", unit_id, "--approve")
        assert approved.code == 0, approved.stdout
        assert approved["files"] == [f"greet-feat-{unit_id}.md"]
        verified = sandbox.unit("verify", "--unit", unit_id)
        assert verified.code == 0, verified.stdout

    # A changed baseline file counts again: dirty for verify, and an overlap once two share it.
    (worktrees["u1"] / "build.log").write_text("changed\n")
    (worktrees["u2"] / "build.log").write_text("changed too\n")
    dirty = sandbox.unit("verify", "--unit", "u1")
    assert dirty.code == 1 and dirty["code"] == "worktree-dirty"
    assert dirty["detail"]["dirty"] == ["?? build.log"]
    status = sandbox.unit("status", "--all")
    assert status["overlaps"] == [{"units": ["u1", "u2"], "files": ["build.log"]}]
    assert [unit["worktree"]["dirty_files"] for unit in status["units"]] == [1, 1, 0]


def test_a_hooks_path_unitmgr_does_not_own_is_never_written(tmp_path: Path) -> None:
    from unitmgr import ref_guard

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    theirs = repo / "team-hooks"
    theirs.mkdir()
    git(repo, "config", "core.hooksPath", "team-hooks")
    skipped = ref_guard.install(repo, repo / ".git", guard=True)
    assert "is not unitmgr's" in skipped["skipped"] and list(theirs.iterdir()) == []
    (theirs / ref_guard.OWNED_MARKER).write_text("")
    installed = ref_guard.install(repo, repo / ".git", guard=True)
    assert installed == {
        "installed": str(theirs / "reference-transaction"),
        "chained": None,
        "guard": True,
    }
    assert ref_guard.HOOK_MARKER in (theirs / "reference-transaction").read_text()


def test_guard_refs_refuses_an_executor_moving_main_or_another_units_branch(
    sandbox: Sandbox,
) -> None:
    hooks = sandbox.common_dir / "hooks"
    log = sandbox.root / "team-hook.log"
    _write(  # the team's own hook: chained, run first, its refusal respected
        hooks / "reference-transaction",
        f'#!/bin/sh\ninput=$(cat)\necho "$1" >> {log}\n'
        'case "$input" in *refs/heads/team-forbidden*) exit 1;; esac\nexit 0\n',
    ).chmod(0o755)
    _write(sandbox.machine_config, "guard_refs = true\n")
    assert sandbox.create("u2").code == 0
    sandbox.wait_turn("u2")
    mover = (
        "cat > /dev/null; date +%s%N > mine.txt; git add mine.txt; git commit -qm mine && "
        "echo committed; for ref in main feat/u2; do git update-ref refs/heads/$ref HEAD "
        "2>/dev/null && echo moved-$ref || echo refused-$ref; done; "
        "git tag t$(date +%s%N) && echo tagged"
    )
    created = sandbox.create("u1", model=mover)
    assert created.code == 0, created.stdout
    assert (hooks / "reference-transaction.unitmgr-chained").is_file()
    main, other = (git(sandbox.repo, "rev-parse", ref) for ref in ("main", "feat/u2"))
    receipt = sandbox.wait_turn("u1")
    reply = receipt["reply"].split()
    assert reply == ["committed", "refused-main", "refused-feat/u2", "tagged"], receipt
    assert (git(sandbox.repo, "rev-parse", "main"), git(sandbox.repo, "rev-parse", "feat/u2")) == (
        main,
        other,
    )
    assert receipt["foreign_ref_changes"] == []
    assert "prepared" in log.read_text()  # the team's hook ran for the executor's commit
    # Outside a unit's turn the guard is inert, and the chained hook still refuses its own.
    git(sandbox.repo, "update-ref", "refs/heads/lead-branch", "HEAD")
    with pytest.raises(subprocess.CalledProcessError):
        git(sandbox.repo, "update-ref", "refs/heads/team-forbidden", "HEAD")

    # Turned off in the config: the hook stops refusing; the ref audit still reports.
    _write(sandbox.machine_config, "guard_refs = false\n")
    body = _write(sandbox.root / "again.md", "again\n")
    again = sandbox.pair(
        "send", "--kind", "task", "--body-file", str(body), "--write", repo=sandbox.worktree("u1")
    )
    assert again.document["reply"].split()[1:3] == ["moved-main", "moved-feat/u2"], again.stdout
    foreign = {change["ref"] for change in again.document["foreign_ref_changes"]}
    assert foreign == {"refs/heads/main", "refs/heads/feat/u2"}


def test_intake_takes_its_limits_from_the_config_and_a_flag_wins(
    sandbox: Sandbox, github: object
) -> None:
    _write(sandbox.repo / ".unitmgr.toml", "max_active = 7\nmax_held = 5\n")
    from_file = sandbox.unit("intake", "--label", "ready")
    assert from_file.code == 0, from_file.stdout
    assert (from_file["capacity"]["max_active"], from_file["capacity"]["max_held"]) == (7, 5)
    flagged = sandbox.unit("intake", "--label", "ready", "--max-held", "3")
    assert (flagged["capacity"]["max_active"], flagged["capacity"]["max_held"]) == (7, 3)


def test_a_resume_compares_the_worktree_the_template_resolves_to(sandbox: Sandbox) -> None:
    local = _write(sandbox.machine_config, 'worktree_root = "../units/{unit}"\n')
    args = sandbox.create_args("u1", worktree=None)
    crash = dict(
        os.environ, UNITMGR_TEST_HOOKS="1", UNITMGR_TEST_CRASH_AFTER="create:worktree:done"
    )
    assert sandbox.unit(*args, env=crash).code == -9
    recorded = sandbox.record("u1")["worktree"]
    assert recorded == os.path.realpath(sandbox.root / "units" / "u1")
    local.write_text('worktree_root = "../elsewhere/{unit}"\n')
    moved = sandbox.unit(*args)
    assert moved.code == 1 and moved["code"] == "cannot-resume", moved.stdout
    assert moved["detail"]["field"] == "worktree"
    local.write_text('worktree_root = "../units/{unit}"\n')
    resumed = sandbox.unit(*args)
    assert resumed.code == 0 and resumed["status"] == "resumed", resumed.stdout
