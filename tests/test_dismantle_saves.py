"""A forced dismantle keeps what it discards, shows every target before it acts, and clears an
unreadable record without touching anything it names (SPEC 2.2, 3.9; issue 21 item 7).

The worktree is the executor's: the test plants what an executor could leave there — a modified
tracked file, a staged new file, an untracked file whose name holds a newline, an untracked
symlink pointing outside the worktree, a 6 MB (sparse) file and a FIFO (which git never lists
as untracked, so it is neither saved nor waited on).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from tests.conftest import Sandbox, git, wait_until
from tests.test_threat_model import tree

NEWLINE_NAME = "notes/line one\nline two.txt"


def plant_work(sandbox: Sandbox, worktree: Path) -> dict[str, Any]:
    """Commit a tracked file, then leave every kind of uncommitted and untracked work."""
    (worktree / "tracked.txt").write_text("one\n")
    git(worktree, "add", "tracked.txt")
    git(worktree, "commit", "-q", "-m", "tracked")
    (worktree / "tracked.txt").write_text("two\n")  # modified, unstaged
    (worktree / "staged.txt").write_text("staged content\n")
    git(worktree, "add", "staged.txt")  # a new file, staged only
    (worktree / "notes").mkdir()
    (worktree / NEWLINE_NAME).write_text("untracked content\n")
    secret = sandbox.root / "outside-secret.txt"
    secret.write_text("never copied into the archive\n")
    (worktree / "outside-link").symlink_to(secret)
    with open(worktree / "big.bin", "wb") as handle:
        handle.truncate(6 * 1024 * 1024)  # sparse: the size cap is checked before reading
    os.mkfifo(worktree / "pipe")
    return {"head": git(worktree, "rev-parse", "HEAD"), "secret": str(secret)}


def test_a_forced_dismantle_saves_uncommitted_and_untracked_work(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", model="cat > /dev/null; echo ok").code == 0
    sandbox.wait_turn("u1")
    worktree = sandbox.worktree("u1")
    planted = plant_work(sandbox, worktree)

    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert gone.code == 0, gone.stdout
    saved = gone["abandoned"]["saved"]
    archive = Path(gone["archive"])
    assert saved["patch"] == str(archive / "uncommitted.patch")
    assert saved["untracked"] == str(archive / "untracked.tar")
    assert saved["patch_bytes"] == Path(saved["patch"]).stat().st_size > 0
    left_out = {entry["path"]: entry["why"] for entry in saved["left_out"]}
    assert "6291456 bytes" in left_out["big.bin"]
    # git lists no FIFO as untracked (nor would a FIFO swapped in later block: O_NONBLOCK).
    assert saved["left_out_count"] == 1 and "pipe" not in left_out
    assert saved["untracked_files"] == 2  # the newline-named file and the link
    with tarfile.open(saved["untracked"]) as archived:
        members = {member.name: member for member in archived.getmembers()}
    assert set(members) == {NEWLINE_NAME, "outside-link"}
    assert members["outside-link"].issym() and members["outside-link"].linkname == planted["secret"]
    # The same `saved` reached events.jsonl with the archive step.
    events = [
        json.loads(line) for line in (sandbox.registry / "events.jsonl").read_text().splitlines()
    ]
    (archived_event,) = [
        e for e in events if e.get("step") == "archive" and e.get("status") == "done"
    ]
    assert archived_event["detail"]["saved"] == saved
    assert not worktree.exists()

    # The restore commands bring the work back into a fresh worktree of the same head.
    git(sandbox.repo, "worktree", "add", "-q", "--detach", str(worktree), planted["head"])
    assert (worktree / "tracked.txt").read_text() == "one\n"
    assert len(saved["restore_with"]) == 2
    for command in saved["restore_with"]:
        subprocess.run(command, shell=True, check=True, cwd=sandbox.root)
    assert (worktree / "tracked.txt").read_text() == "two\n"
    assert (worktree / "staged.txt").read_text() == "staged content\n"
    assert (worktree / NEWLINE_NAME).read_text() == "untracked content\n"
    assert (worktree / "outside-link").is_symlink()
    assert os.readlink(worktree / "outside-link") == planted["secret"]
    assert not (worktree / "big.bin").exists() and not (worktree / "pipe").exists()


def test_a_dry_run_names_every_target_of_every_step(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", model="cat > /dev/null; echo ok").code == 0
    sandbox.wait_turn("u1")
    worktree = sandbox.worktree("u1")
    (worktree / "work.txt").write_text("committed\n")
    git(worktree, "add", "work.txt")
    git(worktree, "commit", "-q", "-m", "work")
    git(worktree, "push", "-q", "origin", "HEAD:refs/heads/feat/u1")
    (worktree / "work.txt").write_text("changed\n")
    head = git(worktree, "rev-parse", "HEAD")
    sleeper = subprocess.Popen(["sleep", "300"], cwd=worktree)
    try:
        before = tree(worktree)
        planned = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1", "--dry-run")
        assert planned.code == 0, planned.stdout
        steps = {step["step"]: step["detail"] for step in planned["plan"]}
        assert all(detail is not None for detail in steps.values()), steps
        assert steps["worktree"]["path"] == str(worktree) and steps["worktree"]["proven"]
        untracked = len([n for n in git(worktree, "ls-files", "--others").splitlines() if n])
        assert steps["worktree"]["dirty_files"] == 1 + untracked
        assert steps["local-branch"] == {"branch": "feat/u1", "head": head, "ahead_of_base": 1}
        assert steps["remote-branch"]["head"] == head and steps["remote-branch"]["lease"] == head
        assert {"pid": sleeper.pid, "argv": ["sleep", "300"]} in steps["reap"]["processes"]
        saves = steps["archive"]["saves"]
        assert saves["patch_bytes"] > 0 and saves["untracked_files"] == untracked
        assert steps["end-pair"]["pair_state"] and steps["end-pair"]["sid"]
        assert steps["record"]["path"].endswith("units/u1.json")
        # Nothing was touched.
        assert sleeper.poll() is None
        assert tree(worktree) == before
        assert sandbox.record("u1")["lifecycle"] == "working"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_forced_dismantle_clears_an_unreadable_record_naming_another_units_worktree(
    sandbox: Sandbox,
) -> None:
    assert sandbox.create("victim", model="cat > /dev/null; echo ok").code == 0
    sandbox.wait_turn("victim")
    victim = sandbox.record("victim")
    # A record of the right shape but a wrong type: unreadable, naming the victim's targets.
    torn = sandbox.registry / "units" / "thief.json"
    torn.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "unit_id": "thief",
                "worktree": victim["worktree"],
                "branch": victim["branch"],
                "base": "main",
                "lifecycle": 7,
                "pair": {"state_dir": victim["pair"]["state_dir"]},
            }
        )
    )
    content = torn.read_bytes()

    def snapshot() -> Any:
        return (
            tree(Path(victim["worktree"])),
            git(sandbox.repo, "for-each-ref", "--format=%(refname) %(objectname)"),
            git(sandbox.repo, "worktree", "list", "--porcelain"),
            git(sandbox.repo, "ls-remote", "origin"),
            sandbox.record("victim"),
        )

    before = snapshot()
    planned = sandbox.unit("dismantle", "--unit", "thief", "--force", "thief", "--dry-run")
    assert planned.code == 0, planned.stdout
    assert planned["named"]["worktree"] == victim["worktree"]
    cleared = sandbox.unit("dismantle", "--unit", "thief", "--force", "thief")
    assert cleared.code == 0, cleared.stdout
    named = cleared["named"]
    assert named["worktree"] == victim["worktree"] and named["branch"] == victim["branch"]
    assert named["untouched"] is True
    assert not torn.exists()
    (moved,) = (sandbox.registry / "archive").glob("thief-*/record.json")
    assert moved.read_bytes() == content
    done = {entry["step"]: entry for entry in cleared["done"]}
    for step in ("end-pair", "reap", "archive", "worktree", "local-branch", "remote-branch"):
        assert done[step]["status"] == "skipped", done[step]
    assert snapshot() == before
    assert [u["unit_id"] for u in sandbox.unit("list")["units"]] == ["victim"]


def test_a_too_new_record_stays_refused_even_when_forced(sandbox: Sandbox) -> None:
    units = sandbox.registry / "units"
    units.mkdir(parents=True)
    future = units / "future.json"
    future.write_text('{"schema_version": 99, "unit_id": "future"}\n')
    for extra in ((), ("--dry-run",)):
        forced = sandbox.unit("dismantle", "--unit", "future", "--force", "future", *extra)
        assert forced.code == 2 and forced["code"] == "record-too-new", forced.stdout
    assert future.read_text() == '{"schema_version": 99, "unit_id": "future"}\n'


def test_an_archive_killed_midway_is_redone_once_into_the_same_dir(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", model="cat > /dev/null; echo ok").code == 0
    sandbox.wait_turn("u1")
    worktree = sandbox.worktree("u1")
    (worktree / "GREETING.md").write_text("uncommitted\n")
    git(worktree, "add", "GREETING.md")
    for index in range(45):  # enough untracked bytes that the tar takes a while
        (worktree / f"data-{index:02}.bin").write_bytes(os.urandom(1024 * 1024))
    dismantle = subprocess.Popen(
        ["unit", "dismantle", "--unit", "u1", "--force", "u1", "--repo", str(sandbox.repo)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    archive_root = sandbox.registry / "archive"
    wait_until(lambda: list(archive_root.glob("u1-*/uncommitted.patch")), interval=0.002)
    dismantle.send_signal(signal.SIGKILL)
    dismantle.wait()
    record = sandbox.record("u1")
    archived = [e for e in record["cleanup"] if e["step"] == "archive"]
    assert archived[-1]["status"] == "started", archived  # killed inside the step
    (first_dir,) = archive_root.glob("u1-*")
    assert record["archive"] == str(first_dir)

    finished = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert finished.code == 0, finished.stdout
    assert list(archive_root.glob("u1-*")) == [first_dir]  # no second archive
    saved = finished["abandoned"]["saved"]
    assert saved["untracked"] == str(first_dir / "untracked.tar")
    with tarfile.open(saved["untracked"]) as tar:
        assert len(tar.getnames()) == 45
    assert b"uncommitted" in Path(saved["patch"]).read_bytes()
    assert not [p for p in first_dir.iterdir() if p.name.endswith(".tmp")]
