"""Proven processes (SPEC 8 "Processes"): no file an executor can write makes unitmgr or pair
signal a process that is not the turn's or the step's.

Each attack plants, the way an executor would, the true pid, start time and group of an
unrelated process of the user — a `sleep` the test starts outside the worktree, with the test's
own environment — into a record, a journal entry or a pair's in-flight marker, runs the real
command, and checks that the sleep is still alive and the command says `record-untrusted` (or,
for `pair clear`, clears the lock without calling the sleep the turn's). The positive paths —
a real stale validation, a real setup child, a real turn — are still stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import Sandbox, gone, wait_until


@pytest.fixture
def stranger(tmp_path: Path) -> Iterator[psutil.Popen]:
    """An unrelated process of the user: a sleep in its own group, outside any worktree."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    process = psutil.Popen(["sleep", "300"], cwd=elsewhere, start_new_session=True)
    yield process
    process.kill()
    process.wait()


def alive(process: psutil.Popen) -> bool:
    return process.is_running() and process.status() != psutil.STATUS_ZOMBIE


def identity_of(process: psutil.Popen, **extra: Any) -> dict[str, Any]:
    return {
        "pid": process.pid,
        "pgid": os.getpgid(process.pid),
        "create_time": process.create_time(),
        "argv0": "sh",
        **extra,
    }


def record_file(sandbox: Sandbox, unit_id: str) -> Path:
    return sandbox.registry / "units" / f"{unit_id}.json"


def edit_record(sandbox: Sandbox, unit_id: str, **fields: Any) -> None:
    record = sandbox.record(unit_id)
    record.update(fields)
    record_file(sandbox, unit_id).write_text(json.dumps(record))


# The partner commits its change, so the worktree is clean for a verify.
COMMIT = "cat > /dev/null; echo hi > GREETING.md; git add -A; git commit -qm g; echo ok"


def working_unit(sandbox: Sandbox, **options: str) -> Path:
    created = sandbox.create("u1", model=COMMIT, **options)
    assert created.code == 0, created.stdout + created.stderr
    assert sandbox.wait_turn("u1")["ok"]
    return sandbox.worktree("u1")


def pair_dir(sandbox: Sandbox, unit_id: str) -> Path:
    return sandbox.common_dir / "worktrees" / unit_id / "pair"


def assert_untrusted(result: Any, process: psutil.Popen, field: str) -> None:
    assert result.code == 1, result.stdout + result.stderr
    assert result["code"] == "record-untrusted", result.document
    detail = result["detail"]
    detail = detail.get("cause", detail)  # a resumed create reports its step's error as cause
    assert detail["field"] == field, result.document
    assert detail["recorded"] == process.pid
    assert alive(process), "an unrelated process was signalled"


def assert_left_alone(result: Any, process: psutil.Popen, field: str) -> None:
    """A planted child identity in the record: its signature does not verify (SPEC 8's signed
    fields), so the command ignores it and goes on — or, where it is looked at, refuses it as
    `record-untrusted`. Either way the unrelated process lives."""
    if result.code == 0:
        assert alive(process), "an unrelated process was signalled"
        return
    assert_untrusted(result, process, field)


# -- unit verify: the record's verification child ----------------------------------------------


@pytest.mark.parametrize("token", [None, "u2/0123456789abcdef"])
def test_verify_never_stops_a_planted_verification_child(
    sandbox: Sandbox, tmp_path: Path, token: str | None
) -> None:
    """With no token, or with another unit's token the stranger really carries (copied from
    that unit's record), the planted child is not u1's."""
    working_unit(sandbox)
    environment = dict(os.environ)
    if token is not None:
        environment["UNITMGR_CHILD_TOKEN"] = token
    process = psutil.Popen(["sleep", "300"], cwd=tmp_path, env=environment, start_new_session=True)
    try:
        planted = identity_of(process, sha=sandbox.record("u1")["base_sha"])
        if token is not None:
            planted["token"] = token
        edit_record(sandbox, "u1", verification_child=planted)
        verified = sandbox.unit("verify", "--unit", "u1")
        assert_left_alone(verified, process, "verification_child")
        if verified.code != 0:  # refused: nothing recorded
            assert not sandbox.record("u1").get("verification")
    finally:
        process.kill()
        process.wait()


def test_verify_still_stops_its_own_earlier_validation(sandbox: Sandbox) -> None:
    go = sandbox.root / "go"
    pid_file = sandbox.root / "validation.pid"
    validation = f"echo $$ >> {pid_file}; test -f {go} || sleep 120; true"
    working_unit(sandbox, validation=validation)
    first = psutil.Popen(
        ["unit", "verify", "--unit", "u1", "--repo", str(sandbox.repo)],
        cwd=sandbox.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: pid_file.exists() and sandbox.record("u1").get("verification_child"))
    earlier = int(pid_file.read_text().split()[0])
    assert sandbox.record("u1")["verification_child"]["token"].startswith("u1/")
    first.kill()  # the lead dies; its validation, in its own group, lives on
    first.wait()
    assert not gone(earlier)
    go.write_text("go")
    verified = sandbox.unit("verify", "--unit", "u1")
    assert verified.code == 0, verified.stdout + verified.stderr
    assert "stopping the earlier validation" in verified.stderr
    wait_until(lambda: gone(earlier))


# -- the in-flight marker: unit cancel, pair cancel, pair clear ----------------------------------


def plant_marker(sandbox: Sandbox, stranger: psutil.Popen, *fields: str, **extra: Any) -> Path:
    session = json.loads((pair_dir(sandbox, "u1") / "session.json").read_text())
    marker: dict[str, Any] = {
        "seq": session["seq"] + 1,
        "kind": "task",
        "owner_token": "f" * 32,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600)),
        "write": True,
        **extra,
    }
    for field in fields:
        marker[field] = identity_of(stranger)
    path = pair_dir(sandbox, "u1") / "in-flight.json"
    path.write_text(json.dumps(marker))
    return path


PLANTS = {
    "supervisor": ("supervisor",),
    "partner": ("partner",),
    "both": ("supervisor", "partner"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
@pytest.mark.parametrize("command", ["unit cancel", "pair cancel"])
def test_cancel_never_signals_what_a_planted_marker_names(
    sandbox: Sandbox, stranger: psutil.Popen, plant: str, command: str
) -> None:
    worktree = working_unit(sandbox)
    marker = plant_marker(sandbox, stranger, *PLANTS[plant])
    if command == "unit cancel":
        result = sandbox.unit("cancel", "--unit", "u1")
    else:
        result = sandbox.pair("cancel", repo=worktree)
    assert_untrusted(result, stranger, PLANTS[plant][0])
    assert json.loads(marker.read_text()).get("cancel") is None  # nothing written either


def test_cancel_never_signals_a_partner_carrying_another_pairs_token(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The token of another pair's turn (readable in its marker) is bound to that pair's state
    dir: a process carrying it is not this pair's turn."""
    worktree = working_unit(sandbox)
    token = "e" * 32
    environment = {**os.environ, "PAIR_TURN_TOKEN": token, "PAIR_STATE_DIR": str(tmp_path)}
    process = psutil.Popen(["sleep", "300"], cwd=tmp_path, env=environment, start_new_session=True)
    try:
        plant_marker(sandbox, process, "partner", owner_token=token)
        assert_untrusted(sandbox.pair("cancel", repo=worktree), process, "partner")
    finally:
        process.kill()
        process.wait()


def test_a_planted_partner_group_is_not_signalled(sandbox: Sandbox, tmp_path: Path) -> None:
    """A dead partner whose recorded group is a stranger's whose leader has exited: the kernel
    keeps the group id while a member lives, but the group is not the turn's."""
    worktree = working_unit(sandbox)
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 & echo $!"],
        cwd=tmp_path,
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert leader.stdout is not None
    member = psutil.Process(int(leader.stdout.readline()))
    leader.wait()
    try:
        partner = {
            "pid": leader.pid,
            "pgid": leader.pid,
            "create_time": member.create_time(),
            "argv0": "sh",
        }
        plant_marker(sandbox, member, partner=partner)
        result = sandbox.pair("cancel", repo=worktree)
        assert result.code == 1 and result["code"] == "record-untrusted", result.document
        assert result["detail"]["field"] == "partner.pgid"
        assert member.is_running() and member.status() != psutil.STATUS_ZOMBIE
    finally:
        member.kill()
        member.wait()


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_clear_does_not_call_a_planted_process_the_turns(
    sandbox: Sandbox, stranger: psutil.Popen, plant: str
) -> None:
    worktree = working_unit(sandbox)
    marker = plant_marker(sandbox, stranger, *PLANTS[plant])
    cleared = sandbox.pair("clear", repo=worktree)
    assert cleared.code == 0, cleared.stdout + cleared.stderr
    assert cleared["status"] == "cleared"
    assert {item["pid"] for item in cleared["untrusted"]} == {stranger.pid}
    assert {item["field"] for item in cleared["untrusted"]} == set(PLANTS[plant])
    assert not marker.exists()
    assert alive(stranger)


def test_a_real_turn_is_still_cancelled_with_its_whole_group(sandbox: Sandbox) -> None:
    pid_file = sandbox.root / "background.pid"
    model = f"cat > /dev/null; sleep 300 & echo $! > {pid_file}; sleep 300"
    created = sandbox.create("u1", model=model)
    assert created.code == 0, created.stdout + created.stderr
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip())
    background = int(pid_file.read_text())
    marker_file = pair_dir(sandbox, "u1") / "in-flight.json"
    # The partner may run before its supervisor records it in the marker: wait for the record.
    wait_until(lambda: (json.loads(marker_file.read_text()).get("partner") or {}).get("pid"))
    partner = json.loads(marker_file.read_text())["partner"]["pid"]
    cancelled = sandbox.unit("cancel", "--unit", "u1", "--reason", "enough")
    assert cancelled.code == 0, cancelled.stdout + cancelled.stderr
    assert cancelled["status"] == "cancelled"
    assert gone(partner) and gone(background)
    assert not (pair_dir(sandbox, "u1") / "in-flight.json").exists()


# -- a resumed create's journaled child ----------------------------------------------------------


def crash_environment(point: str) -> dict[str, str]:
    return dict(os.environ, UNITMGR_TEST_HOOKS="1", UNITMGR_TEST_CRASH_AFTER=point)


@pytest.mark.parametrize("step", ["setup", "pair-init"])
def test_a_resumed_create_never_stops_a_planted_journal_child(
    sandbox: Sandbox, stranger: psutil.Popen, step: str
) -> None:
    args = sandbox.create_args("u1", setup="true")
    assert sandbox.unit(*args, env=crash_environment(f"create:{step}:started")).code == -9
    record = sandbox.record("u1")
    entry = next(
        e for e in reversed(record["journal"]) if e["step"] == step and e["status"] == "started"
    )
    entry.setdefault("detail", {})["child"] = identity_of(stranger, token="u1/" + "0" * 32)
    record_file(sandbox, "u1").write_text(json.dumps(record))
    resumed = sandbox.unit(*args)
    assert_left_alone(resumed, stranger, f"journal {step} detail.child")


# -- dismantle's reap: a stranger's removed directory ---------------------------------------------


def test_reap_is_not_steered_by_a_symlink_at_a_gone_cwd(sandbox: Sandbox, tmp_path: Path) -> None:
    """A process whose directory was removed reads its cwd as `P (deleted)`; a symlink planted
    at that name, into the worktree, must not make it look inside."""
    worktree = working_unit(sandbox)
    place = tmp_path / "removed"
    place.mkdir()
    process = psutil.Popen(["sleep", "300"], cwd=place, start_new_session=True)
    try:
        place.rmdir()
        wait_until(lambda: os.readlink(f"/proc/{process.pid}/cwd").endswith(" (deleted)"))
        Path(f"{place} (deleted)").symlink_to(worktree)
        dismantled = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
        assert dismantled.code == 0, dismantled.stdout + dismantled.stderr
        assert alive(process), "dismantle's reap killed a process outside the worktree"
    finally:
        process.kill()
        process.wait()
