"""Torn and hostile state: reported clearly, never silently repaired or deleted, and recoverable
by the command `unit list` prints."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import time
from pathlib import Path

import pytest

from tests.conftest import Sandbox, git, run_cli, write_record


def recovery_of(sandbox: Sandbox, unit_id: str) -> dict:
    listed = sandbox.unit("list")
    assert listed.code == 0
    return next(u for u in listed["units"] if u["unit_id"] == unit_id)["recovery"]


def run_recovery(sandbox: Sandbox, command: str):
    result = run_cli(*shlex.split(command), cwd=sandbox.root)
    assert result.code == 0, result.stdout + result.stderr
    return result


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ('{"schema_version": 1, "unit_id": "u1", "worktree": "/x", "bra', "record-unreadable"),
        ("\x00\x01garbage\xff", "record-unreadable"),
        (
            '{"schema_version": 1, "unit_id": "u1", "worktree": 7, "branch": "b", "base": "m", '
            '"lifecycle": "working"}',
            "record-unreadable",
        ),
        ('{"schema_version": 3, "unit_id": "u1"}', "record-too-new"),
    ],
)
def test_a_torn_or_foreign_record_is_listed_not_touched(
    sandbox: Sandbox, content: str, code: str
) -> None:
    units = sandbox.registry / "units"
    units.mkdir(parents=True)
    path = units / "u1.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    before = path.read_bytes()
    listed = sandbox.unit("list")
    assert listed.code == 0
    (entry,) = listed["units"]
    assert entry["lifecycle"] == "unreadable" and entry["code"] == code and entry["error"]
    assert (
        entry["recovery"]["command"] == f"unit dismantle --unit u1 --force u1 --repo {sandbox.repo}"
    )
    everything = sandbox.unit("status", "--all")
    assert everything.code == 0 and everything["units"][0]["lifecycle"] == "unreadable"
    assert sandbox.unit("status", "--unit", "u1").code == 2
    assert sandbox.unit("create", *sandbox.create_args("u2")[1:]).code == 1  # admission paused
    assert path.read_bytes() == before  # never rewritten, never deleted
    if code == "record-too-new":  # SPEC 2.2: refused, `--force` or not
        forced = run_cli(*shlex.split(entry["recovery"]["command"]), cwd=sandbox.root)
        assert forced.code == 2 and forced["code"] == "record-too-new", forced.stdout
        assert path.read_bytes() == before
        return
    run_recovery(sandbox, entry["recovery"]["command"])
    assert not path.exists()
    (archived,) = (sandbox.registry / "archive").glob("u1-*/record.json")
    assert archived.read_bytes() == before  # moved into the archive, not lost


def test_a_missing_manifest_is_reported_and_restored_exactly(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", model="cat > /dev/null; echo ok").code == 0
    sandbox.wait_turn("u1")
    assert sandbox.unit("addendum", "--unit", "u1", "--text", "Also in French.").code == 0
    sandbox.wait_turn("u1")
    manifest = sandbox.registry / "tasks" / "u1.md"
    expected = manifest.read_text()
    manifest.unlink()
    recovery = recovery_of(sandbox, "u1")
    assert recovery["why"] == "manifest missing"
    assert sandbox.unit("status", "--unit", "u1").code == 0
    assert not manifest.exists()  # reading never repairs
    refused = sandbox.unit("addendum", "--unit", "u1", "--text", "More.")
    assert refused.code == 1 and refused["code"] == "manifest-missing"
    restored = run_recovery(sandbox, recovery["command"])
    assert restored["status"] == "restored" and restored["addenda"] == 1
    assert manifest.read_text() == expected
    assert recovery_of(sandbox, "u1")["needed"] is False


def test_a_worktree_deleted_behind_our_back(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    shutil.rmtree(sandbox.worktree("u1"))
    summary = sandbox.unit("status", "--all")["units"][0]
    assert summary["worktree"] == {"present": False}
    recovery = recovery_of(sandbox, "u1")
    assert recovery["why"] == "worktree missing"
    assert not sandbox.worktree("u1").exists()
    run_recovery(sandbox, recovery["command"])
    assert sandbox.unit("list")["units"] == []


def test_a_branch_deleted_behind_our_back(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    git(sandbox.repo, "update-ref", "-d", "refs/heads/feat/u1")
    recovery = recovery_of(sandbox, "u1")
    assert recovery["why"] == "branch missing"
    assert sandbox.unit("status", "--all").code == 0
    run_recovery(sandbox, recovery["command"])
    assert sandbox.unit("list")["units"] == []
    assert not sandbox.worktree("u1").exists()


def test_a_pair_session_removed_mid_turn(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    model = f"cat > /dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo done"
    assert sandbox.create("u1", model=model).code == 0
    session = sandbox.common_dir / "worktrees" / "u1" / "pair" / "session.json"
    session.unlink()
    summary = sandbox.unit("status", "--all")["units"][0]
    assert "no pair session" in summary["pair"]["error"]
    recovery = recovery_of(sandbox, "u1")
    assert recovery["why"] == "pair session missing"
    gate.write_text("go")
    receipt_dir = session.parent / "transcripts"
    deadline = time.monotonic() + 20
    while not list(receipt_dir.glob("*-receipt.json")):
        assert time.monotonic() < deadline, "the turn never finished"
        time.sleep(0.05)
    assert not session.exists()  # never silently recreated
    run_recovery(sandbox, recovery["command"])
    assert sandbox.unit("list")["units"] == []


def test_registry_files_are_owner_only(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", model="cat > /dev/null; echo ok", validation="true").code == 0
    sandbox.wait_turn("u1")
    sandbox.unit("addendum", "--unit", "u1", "--text", "More.")
    sandbox.wait_turn("u1")
    assert sandbox.unit("verify", "--unit", "u1").code == 0
    pair_dir = sandbox.common_dir / "worktrees" / "u1" / "pair"
    for root in (sandbox.registry, pair_dir):
        for path in [root, *root.rglob("*")]:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            expected = 0o700 if path.is_dir() else 0o600
            assert mode == expected, f"{path} has mode {oct(mode)}"
    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    archive = Path(gone["archive"])
    for path in [archive, *archive.rglob("*")]:
        assert stat.S_IMODE(os.lstat(path).st_mode) == (0o700 if path.is_dir() else 0o600), path


def test_records_for_tests_are_valid(sandbox: Sandbox) -> None:
    write_record(sandbox, "u9")
    assert sandbox.unit("list")["units"][0]["lifecycle"] == "working"
