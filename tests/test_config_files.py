"""Config files an executor can write run nothing (SPEC 8 "Config files", references/config.md).

Each attack is planted the way an executor would plant it: a machine config in the git common
dir it can write, a `.unitmgr.toml` committed in its own worktree, a committed `setup` or
`notify.command` that reaches the main worktree. The lead's next command must run none of it,
copy nothing, and say what happened.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from tests.conftest import Sandbox, git, run_cli, wait_until


def _commit(worktree: Path, name: str, text: str, message: str = "config") -> None:
    (worktree / name).write_text(text)
    git(worktree, "add", name)
    git(worktree, "commit", "-q", "-m", message)


def _events(sandbox: Sandbox) -> list[dict[str, Any]]:
    path = sandbox.registry / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _session_notify(worktree: Path) -> Any:
    git_dir = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    return json.loads((git_dir / "pair" / "session.json").read_text()).get("notify")


def test_a_machine_config_planted_in_the_common_dir_runs_nothing_and_copies_nothing(
    sandbox: Sandbox,
) -> None:
    ran, notified = sandbox.root / "setup-ran", sandbox.root / "notify-ran"
    _commit(sandbox.repo, ".gitignore", ".env\n")
    (sandbox.repo / ".env").write_text("DATABASE_PASSWORD=hunter2-secret\n")
    planted = sandbox.registry / "config.toml"  # where the machine's file used to live
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text(
        f'setup = "touch {ran}"\ncopy = [".env"]\nmax_active = 9\n'
        f'[notify]\ncommand = "touch {notified}"\n'
    )
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout + created.stderr
    assert not ran.exists()
    assert not (sandbox.worktree("u1") / ".env").exists()
    assert sandbox.record("u1")["setup"] is None
    # It says what happened: in the document and on stderr, every key the file carried.
    migration = created["config_migration"]
    assert migration["migrated"] is True and migration["from"] == str(planted)
    assert migration["keys"] == ["setup", "copy", "max_active", "notify.command"]
    assert "moved this machine's config" in created.stderr and "notify.command" in created.stderr
    # The new file holds every line, commented out: none of it is in effect.
    moved = Path(migration["to"])
    assert moved == sandbox.machine_config and tomllib.loads(moved.read_text()) == {}
    assert f'# setup = "touch {ran}"' in moved.read_text()
    assert stat.S_IMODE(moved.stat().st_mode) == 0o600
    assert not planted.exists() and planted.with_name("config.toml.migrated").exists()
    # The pair session got no notify command (nothing is configured any more).
    assert _session_notify(sandbox.worktree("u1")) is None
    config = sandbox.unit("config")
    assert config["settings"]["max_active"]["source"] == "default"
    assert config["settings"]["setup"]["value"] is None

    # Planted again after the move: the old place is never read again, nor moved again.
    planted.write_text(f'setup = "touch {ran}"\ncopy = [".env"]\n')
    again = sandbox.create("u2")
    assert again.code == 0, again.stdout + again.stderr
    assert "config_migration" not in again.document
    assert not ran.exists() and not (sandbox.worktree("u2") / ".env").exists()
    assert planted.exists()  # left where it is, and ignored
    sandbox.wait_turn("u1")
    sandbox.wait_turn("u2")
    assert not notified.exists()


def test_a_unitmgr_toml_committed_in_a_units_worktree_is_never_read(sandbox: Sandbox) -> None:
    ran = sandbox.root / "setup-ran"
    _commit(sandbox.repo, ".unitmgr.toml", "max_active = 3\n")
    git(sandbox.repo, "push", "-q", "origin", "HEAD:main")
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    linked = sandbox.worktree("u1")
    # The executor commits its own project config on its branch, in its worktree.
    _commit(linked, ".unitmgr.toml", f'max_active = 1\nsetup = "touch {ran}"\n', "mine")
    args = sandbox.create_args("u2")
    created = run_cli("unit", *args, "--repo", str(linked), cwd=linked)
    assert created.code == 0, created.stdout + created.stderr  # max_active 3, not its 1
    assert not ran.exists() and sandbox.record("u2")["setup"] is None
    from_inside = run_cli("unit", "config", cwd=linked)  # cwd there, no --repo
    assert from_inside.code == 0, from_inside.stdout
    settings = from_inside["settings"]
    assert settings["max_active"] == {
        "value": 3,
        "source": "repository",
        "file": str(sandbox.repo / ".unitmgr.toml"),
    }
    assert settings["setup"]["source"] == "default"
    assert from_inside["files"]["repository"]["path"] == str(sandbox.repo / ".unitmgr.toml")


def test_a_committed_setup_runs_only_once_approved_and_again_after_each_change(
    sandbox: Sandbox,
) -> None:
    shared = sandbox.repo / ".unitmgr.toml"
    _commit(sandbox.repo, ".unitmgr.toml", 'setup = "echo one > setup-ran.txt"\n')
    before = sandbox.snapshot()
    refused = sandbox.create("u1")
    assert refused.code == 1 and refused["code"] == "config-unapproved", refused.stdout
    assert refused["next"] == f"unit config --approve --repo {sandbox.repo}"
    assert refused["detail"]["key"] == "setup" and refused["detail"]["file"] == str(shared)
    assert refused["detail"]["value"] == "echo one > setup-ran.txt"
    assert "setup from" in refused["reason"] and "not approved" in refused["reason"]
    assert sandbox.snapshot() == before  # nothing written
    dry = sandbox.create("u1", "--dry-run")
    assert dry["code"] == "config-unapproved" and dry["dry_run"] is True, dry.stdout
    assert sandbox.unit("config")["settings"]["setup"]["approval"] == "unapproved"

    from unitmgr.config_trust import approvals_file  # (after the refusal: the test's point)

    would = sandbox.unit("config", "--approve", "--dry-run")
    assert would.code == 0 and would["dry_run"] is True, would.stdout
    assert [entry["key"] for entry in would["would_approve"]] == ["setup"]
    assert not approvals_file(sandbox.common_dir).exists()
    approved = sandbox.unit("config", "--approve")
    assert approved.code == 0, approved.stdout
    [entry] = approved["approved"]
    assert entry["value"] == "echo one > setup-ran.txt" and len(entry["sha256"]) == 64
    stored = approvals_file(sandbox.common_dir)
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text())["approved"]["setup"]["sha256"] == entry["sha256"]
    assert sandbox.unit("config")["settings"]["setup"]["approval"] == "approved"
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout + created.stderr
    assert (sandbox.worktree("u1") / "setup-ran.txt").read_text() == "one\n"

    # A changed command (a merged PR could change it) is refused again, naming the change.
    shared.write_text('setup = "echo two > setup-ran.txt"\n')
    changed = sandbox.create("u2")
    assert changed.code == 1 and changed["code"] == "config-unapproved", changed.stdout
    assert "changed since it was approved" in changed["reason"]
    assert changed["detail"]["approved_sha256"] == entry["sha256"]
    assert sandbox.unit("config", "--approve").code == 0  # one command approves the change
    assert sandbox.create("u2").code == 0
    assert (sandbox.worktree("u2") / "setup-ran.txt").read_text() == "two\n"

    # The lead's own --setup needs no approval, nor does turning setup off.
    shared.write_text('setup = "echo three > setup-ran.txt"\n')
    limits = {"max_active": "9", "max_held": "9"}
    flagged = sandbox.create("u3", setup="echo flag > setup-ran.txt", **limits)
    assert flagged.code == 0, flagged.stdout
    assert (sandbox.worktree("u3") / "setup-ran.txt").read_text() == "flag\n"
    off = sandbox.create("u4", setup="", **limits)
    assert off.code == 0 and sandbox.record("u4")["setup"] is None, off.stdout


def test_an_unapproved_notify_command_is_skipped_never_the_command(sandbox: Sandbox) -> None:
    sink = sandbox.root / "sink.jsonl"
    _commit(sandbox.repo, ".unitmgr.toml", f'[notify]\ncommand = "cat >> {sink}"\n')
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout + created.stderr  # a notification never blocks
    assert "notify.command from" in created.stderr and "not approved" in created.stderr
    skipped = [line for line in _events(sandbox) if line.get("step") == "notify-unapproved"]
    assert skipped and skipped[0]["key"] == "notify.command", _events(sandbox)
    assert skipped[0]["file"] == str(sandbox.repo / ".unitmgr.toml")
    assert _session_notify(sandbox.worktree("u1")) is None  # nothing reaches the pair session
    sandbox.wait_turn("u1")
    assert not sink.exists()

    assert sandbox.unit("config", "--approve").code == 0
    assert sandbox.create("u2").code == 0
    assert _session_notify(sandbox.worktree("u2"))["command"] == f"cat >> {sink}"
    wait_until(lambda: sink.exists() and '"created"' in sink.read_text())


def test_a_repository_file_that_is_a_symbolic_link_is_refused(sandbox: Sandbox) -> None:
    # A committed link would point the team's file into the common dir an executor writes.
    target = sandbox.registry / "team.toml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("max_active = 9\n")
    os.symlink(".git/orchestrate/team.toml", sandbox.repo / ".unitmgr.toml")
    refused = sandbox.create("u1")
    assert refused.code == 2 and refused["code"] == "config-invalid", refused.stdout
    assert "not a symbolic link" in refused["reason"]
