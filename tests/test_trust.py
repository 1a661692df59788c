"""Issue 14's smaller contract fixes: bounded inputs and records, the inside-rule under the
registry lock, an equal worktree path as a conflict, the rollback's exclude line, dry-run plans,
and an archive that never follows a link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Sandbox, git, write_record


@pytest.mark.parametrize(
    ("option", "value", "code"),
    [
        ("unit", "abc\n", "invalid-unit-id"),
        ("paths", ":(top)**", "invalid-paths"),
        ("paths", ":!x", "invalid-paths"),
        ("paths", ":x", "invalid-paths"),
        ("base", "ma..in", "invalid-base"),
    ],
)
def test_malformed_arguments_are_exit_2_and_write_nothing(
    sandbox: Sandbox, option: str, value: str, code: str
) -> None:
    before = sandbox.snapshot()
    if option == "unit":
        args = sandbox.create_args(value)
    elif option == "paths":
        args = [*sandbox.create_args("u1"), "--paths", value]
    else:
        args = sandbox.create_args("u1", **{option: value})
    result = sandbox.unit(*args)
    assert result.code == 2 and result["code"] == code, result.stdout
    assert result["next"]
    assert sandbox.snapshot() == before


def test_a_fifo_task_file_is_refused_without_being_opened(sandbox: Sandbox) -> None:
    fifo = sandbox.root / "task.fifo"
    os.mkfifo(fifo)
    # Opening a FIFO for reading blocks until a writer comes: a hang here is the bug.
    result = sandbox.unit(*sandbox.create_args("u1", task_file=str(fifo)), timeout=30)
    assert result.code == 2 and result["code"] == "input-not-regular-file", result.stdout
    created = sandbox.create("u1")
    assert created.code == 0
    sandbox.wait_turn("u1")
    addendum = sandbox.unit("addendum", "--unit", "u1", "--file", str(fifo), timeout=30)
    assert addendum.code == 2 and addendum["code"] == "input-not-regular-file"


def test_a_task_file_over_1_mib_is_refused(sandbox: Sandbox) -> None:
    big = sandbox.root / "big.md"
    big.write_text("x" * (1024 * 1024 + 1))
    result = sandbox.create("u1", task_file=str(big))
    assert result.code == 2 and result["code"] == "input-too-large", result.stdout
    big.write_text("x" * (1024 * 1024))
    assert sandbox.create("u1", task_file=str(big), model="cat > /dev/null; echo done").code == 0


@pytest.mark.parametrize(
    "fields",
    [
        {"worktree": "relative/path"},
        {"worktree": "/a/../b"},
        {"pair": {"state_dir": "/x/./y"}},
        {"task_file": "tasks/u1.md"},
        {"padding": "x" * (4 * 1024 * 1024)},
    ],
)
def test_records_are_bounded_and_type_checked_on_read(sandbox: Sandbox, fields: dict) -> None:
    write_record(sandbox, "u1", **fields)
    listed = sandbox.unit("list")
    assert listed.code == 0
    (entry,) = listed["units"]
    assert entry["lifecycle"] == "unreadable", entry
    assert sandbox.unit("status", "--unit", "u1")["code"] == "record-unreadable"


def test_nested_worktrees_conflict_under_the_registry_lock(sandbox: Sandbox) -> None:
    """A reserved unit has no worktree yet, so only the check under the lock can see that
    `/w/a/b` nests in `/w/a` (two racing creates both passed the lock-free one)."""
    outer = sandbox.root / "w" / "a"
    write_record(sandbox, "outer", worktree=str(outer), lifecycle="creating")
    inner = sandbox.create("inner", worktree=str(outer / "b"), max_active="5", max_held="5")
    assert inner.code == 1 and inner["code"] == "conflict", inner.stdout
    assert "nests with" in inner["reason"]
    around = sandbox.create("around", worktree=str(sandbox.root / "w"), max_active="5")
    assert around.code == 1 and around["code"] == "conflict", around.stdout


def test_a_worktree_equal_to_another_units_is_a_conflict(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    same = sandbox.create("u2", worktree=str(sandbox.worktree("u1")), max_active="5")
    assert same.code == 1 and same["code"] == "conflict", same.stdout
    assert "same worktree" in same["reason"]


def test_a_rolled_back_create_keeps_the_exclude_line_another_unit_needs(sandbox: Sandbox) -> None:
    write_record(sandbox, "other")
    failed = sandbox.create("u1", setup="exit 3", max_active="5", max_held="5")
    assert failed.code == 1 and failed["code"] == "setup-failed", failed.stdout
    rollback = {e["resource"]: e for e in failed["detail"]["rollback"]}
    assert rollback["pr-body-exclude"]["removed"] is False
    exclude = sandbox.common_dir / "info" / "exclude"
    assert "/PR_BODY.md" in exclude.read_text().splitlines()


def test_a_fresh_units_dismantle_plan_runs_every_step(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    plan = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1", "--dry-run")
    assert plan.code == 0, plan.stdout
    assert {step["action"] for step in plan["plan"]} == {"run"}


def test_merge_dry_run_prints_a_plan(sandbox: Sandbox, github) -> None:
    from tests.test_github import deliverable

    number, head = deliverable(sandbox, github)
    dry = sandbox.unit("merge", "--unit", "u1", "--head", head, "--dry-run")
    assert dry.code == 0, dry.stdout
    assert dry["plan"] == [
        {
            "step": "merge",
            "action": "run",
            "detail": {"pr": number, "head": head, "method": "merge"},
        }
    ]


def test_the_archive_skips_symlinks(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    secret = sandbox.root / "not-the-units.txt"
    secret.write_text("private\n")
    state_dir = Path(sandbox.record("u1")["pair"]["state_dir"])
    (state_dir / "planted.log").symlink_to(secret)
    (state_dir / "planted-dir").symlink_to(sandbox.root, target_is_directory=True)
    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert gone.code == 0, gone.stdout
    archived = [path.name for path in Path(gone["archive"]).rglob("*")]
    assert "session.json" in archived
    assert "planted.log" not in archived and "planted-dir" not in archived
    assert secret.read_text() == "private\n"


def test_a_record_written_by_a_hostile_executor_keeps_unknown_keys(sandbox: Sandbox) -> None:
    """Bounding records must not cost SPEC 2.2's round trip of unknown keys."""
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    path = sandbox.registry / "units" / "u1.json"
    record = json.loads(path.read_text())
    record["future_field"] = {"kept": True}
    path.write_text(json.dumps(record))
    assert sandbox.unit("status", "--unit", "u1").code == 0
    assert sandbox.unit("addendum", "--unit", "u1", "--text", "more", "--queue").code == 0
    assert json.loads(path.read_text())["future_field"] == {"kept": True}
    assert git(sandbox.repo, "rev-parse", "--verify", "refs/heads/feat/u1")


def test_a_resume_compares_redacted_with_redacted(sandbox: Sandbox) -> None:
    """The record holds the task redacted (SPEC 8): a resume given the same task file, secret
    and all, must see no difference."""
    secret = "https://x-access-token:" + "s3cr3t-value-123@github.com/o/r.git"
    sandbox.task.write_text(f"Push to {secret} when done.\n")
    args = sandbox.create_args("u1", model="cat > /dev/null; echo done", setup=f"echo {secret} >&2")
    crash = {"UNITMGR_TEST_HOOKS": "1", "UNITMGR_TEST_CRASH_AFTER": "create:setup:done"}
    assert sandbox.unit(*args, env={**os.environ, **crash}).code == -9
    record = sandbox.record("u1")
    assert "s3cr3t" not in json.dumps(record) and "https://***@github.com/o/r.git" in record["task"]
    resumed = sandbox.unit(*args)
    assert resumed.code == 0 and resumed["status"] == "resumed", resumed.stdout
    assert "s3cr3t" not in resumed.stdout + resumed.stderr
