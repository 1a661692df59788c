"""Signals that must stay true (issue 21, "small lies"): a step's status is the step's own
decision, a turn that ends normally is never read as lost, and watch's table agrees with its
banner (SPEC 3.4: one attention function)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from pair.api import read_status
from tests.conftest import Sandbox, git, wait_until


def events(sandbox: Sandbox) -> list[dict[str, Any]]:
    lines = (sandbox.registry / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_copy_files_that_copied_a_file_is_done_even_when_it_left_one_out(
    sandbox: Sandbox,
) -> None:
    (sandbox.repo / ".gitignore").write_text(".env\n")
    (sandbox.repo / ".unitmgr.toml").write_text('copy = [".env", ".env.local"]\n')
    git(sandbox.repo, "add", ".gitignore", ".unitmgr.toml")
    git(sandbox.repo, "commit", "-qm", "config")
    git(sandbox.repo, "push", "-q", "origin", "main")
    (sandbox.repo / ".env").write_text("LOCAL=1\n")
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout
    ended = [
        event
        for event in events(sandbox)
        if event.get("step") == "copy-files" and event["status"] != "started"
    ]
    assert len(ended) == 1
    assert ended[0]["status"] == "done", ended[0]  # it copied .env: not "skipped"
    assert ended[0]["detail"]["copied"] == [".env"]
    assert [item["path"] for item in ended[0]["detail"]["skipped"]] == [".env.local"]


def test_a_turn_whose_supervisor_left_after_its_receipt_is_not_lost(sandbox: Sandbox) -> None:
    """The race of `pair status`: it read the marker, then found the supervisor gone. The
    supervisor had written its receipt first; the turn ended normally."""
    assert sandbox.create("u1").code == 0
    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "replied"
    state_dir = Path(sandbox.record("u1")["pair"]["state_dir"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    # The marker as a supervisor leaves it just before it releases it: its own identity, dead.
    (state_dir / "in-flight.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "seq": receipt["seq"],
                "kind": receipt["kind"],
                "owner_token": "t" * 32,
                "started_at": receipt["started_at"],
                "supervisor": {"pid": dead.pid, "create_time": 1.0},
            }
        )
    )
    view = read_status(state_dir)
    assert view["in_flight"] is None, view["in_flight"]
    assert view["latest_receipt"]["status"] == "replied"
    everything = sandbox.unit("status", "--all")
    (unit,) = everything["units"]
    assert unit["attention"]["state"] == "waiting-on-lead", unit["attention"]


def test_watch_table_names_the_state_its_banner_lists(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    frame = sandbox.unit("watch", "--once")
    assert frame.stdout.startswith("Waiting on you (1):"), frame.stdout
    (row,) = [line for line in frame.stdout.splitlines() if line.startswith("│ u1")]
    assert "waiting-on-lead" in row and " ok " not in row, row


def test_a_cancelled_receipt_carries_code_and_next(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    hang = f"cat > /dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo late"
    assert sandbox.create("u1", model=hang).code == 0
    cancelled = sandbox.unit("cancel", "--unit", "u1", "--reason", "wrong task")
    assert cancelled.code == 0, cancelled.stdout
    for receipt in (cancelled["receipt"], sandbox.wait_turn("u1")):
        assert receipt["status"] == "cancelled" and receipt["ok"] is False
        assert receipt["code"] == "cancelled", receipt
        assert receipt["next"], receipt


def test_a_unit_the_leads_own_command_works_on_is_busy_not_recovery(sandbox: Sandbox) -> None:
    """Issue 21: while a create is in its setup or a dismantle is mid-way, `status --all` showed
    the unit `{error: "no pair recorded"}`, attention `recovery` and a recovery command. Every
    look that sees such a lifecycle must see `busy` (the command holds the unit's lock for as
    long as the record shows it), whenever the look happens to land."""
    import concurrent.futures
    import subprocess

    gate, started = sandbox.root / "gate", sandbox.root / "setup-started"
    setup = f"touch {started}; while [ ! -f {gate} ]; do sleep 0.05; done"
    limits = {"max_active": "5", "max_held": "5"}
    for unit in ("done1", "going"):
        assert sandbox.create(unit, **limits).code == 0
        sandbox.wait_turn(unit)
    # A process in the doomed worktree that ignores SIGTERM: dismantle's reap waits 5 s on it.
    stubborn = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], cwd=sandbox.worktree("going")
    )
    looks = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        creating = pool.submit(sandbox.create, "slow", "--setup", setup, **limits)
        wait_until(started.exists, timeout=60)
        dismantling = pool.submit(sandbox.unit, "dismantle", "--unit", "going", "--force", "going")
        wait_until(lambda: sandbox.record("going")["lifecycle"] == "dismantling", timeout=60)
        looks += [pool.submit(sandbox.unit, "status", "--all") for _ in range(10)]
        looks.append(pool.submit(sandbox.unit, "list"))
        documents = [look.result(timeout=120) for look in looks]
        gate.write_text("go")
        assert creating.result(timeout=120).code == 0
        assert dismantling.result(timeout=120).code == 0
    stubborn.wait(timeout=30)
    mid_way = {"slow": 0, "going": 0}
    for document in documents:
        assert document.code == 0, document.stdout
        for unit in document["units"]:
            unit_id = unit["unit_id"]
            if unit_id == "done1":
                assert unit["attention"]["state"] == "waiting-on-lead"
                continue
            if unit["lifecycle"] in ("working",):
                continue  # the look landed after the command finished
            mid_way[unit_id] += 1
            assert unit["attention"]["state"] == "busy", (unit_id, unit["attention"])
            command = "unit create" if unit_id == "slow" else "unit dismantle"
            assert command in unit["attention"]["why"], unit["attention"]
            assert unit["recovery"]["needed"] is False, unit["recovery"]
            pair = unit.get("pair") or unit.get("observed", {}).get("pair") or {}
            assert "error" not in pair, pair
    assert mid_way["slow"] == len(documents), mid_way  # the gate holds the create's setup
    assert mid_way["going"] >= 1, mid_way


def test_a_planted_holder_line_does_not_make_a_unit_busy(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    import psutil

    lock = sandbox.registry / "locks" / "u1.lock"
    me = psutil.Process()  # a live process: only the kernel's flock can say nobody holds it
    lock.write_text(
        json.dumps({"pid": me.pid, "create_time": me.create_time(), "command": "unit x"}) + "\n"
    )
    (unit,) = sandbox.unit("status", "--all")["units"]
    assert unit["attention"]["state"] == "waiting-on-lead", unit["attention"]


def test_wait_does_not_wake_for_the_leads_own_dismantle(sandbox: Sandbox) -> None:
    import concurrent.futures

    limits = {"max_active": "5", "max_held": "5"}
    for unit in ("keep", "drop"):
        assert sandbox.create(unit, **limits).code == 0
        sandbox.wait_turn(unit)
    since = sandbox.unit("status", "--all")["observed_at"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        waiting = pool.submit(
            sandbox.unit, "wait", "--since", since, "--timeout-min", "2", timeout=180
        )
        dropped = sandbox.unit("dismantle", "--unit", "drop", "--force", "drop")
        assert dropped.code == 0, dropped.stdout
        assert not waiting.done()
        assert sandbox.unit("addendum", "--unit", "keep", "--text", "One more thing.").code == 0
        woke = waiting.result(timeout=180)
    assert woke.code == 0, woke.stdout
    assert [change["unit_id"] for change in woke["changed"]] == ["keep"], woke.stdout


def _kill_the_turn(sandbox: Sandbox, unit: str) -> None:
    """What a crash does to a running turn: its supervisor and partner die, the marker stays."""
    import os
    import signal

    from registry.processes import group_members
    from tests.conftest import gone

    marker_file = Path(sandbox.record(unit)["pair"]["state_dir"]) / "in-flight.json"

    def partner_of(marker: dict) -> dict:
        return marker.get("partner") or {}

    # The partner can start (and touch its file) before its supervisor records it in the
    # marker: read the marker once it names the partner, or the partner would be left alive.
    wait_until(lambda: partner_of(json.loads(marker_file.read_text())).get("pid"), timeout=30)
    marker = json.loads(marker_file.read_text())
    for role in ("supervisor", "partner"):
        pid = (marker.get(role) or {}).get("pid")
        if pid:
            os.kill(pid, signal.SIGKILL)
    for role in ("supervisor", "partner"):
        pid = (marker.get(role) or {}).get("pid")
        if pid:
            wait_until(lambda pid=pid: gone(pid), timeout=30)
    # What the partner had started (its `sleep`) lives on briefly: a process of the turn, so
    # `pair clear` would rightly refuse until it too is gone.
    group = partner_of(marker)["pgid"]
    wait_until(lambda: not group_members(group), timeout=30)


def test_a_lost_turn_keeps_a_receipt_after_pair_clear(sandbox: Sandbox) -> None:
    gate, started = sandbox.root / "gate", sandbox.root / "started"
    hang = f"cat > /dev/null; touch {started}; while [ ! -f {gate} ]; do sleep 0.05; done; echo x"
    assert sandbox.create("u1", model=hang).code == 0
    wait_until(started.exists, timeout=60)
    _kill_the_turn(sandbox, "u1")
    cleared = sandbox.pair("clear", repo=sandbox.worktree("u1"))
    assert cleared.code == 0 and cleared["status"] == "cleared", cleared.stdout
    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "worker-lost" and receipt["code"] == "worker-lost", receipt
    assert "pair send" in receipt["next"]
    (unit,) = sandbox.unit("status", "--all")["units"]
    # The first task's turn was lost: SPEC 3.3 makes that a recovery that sends it again.
    assert unit["attention"]["state"] == "recovery", unit["attention"]
    assert unit["attention"]["why"] == "first turn failed"
    assert unit["recovery"]["command"].startswith("pair send"), unit["recovery"]
    tail = sandbox.unit("tail", "--unit", "u1")
    assert "no receipt yet" not in tail.stdout and "worker-lost" in tail.stdout, tail.stdout
    assert "all quiet" not in sandbox.unit("watch", "--once").stdout


def test_pair_wait_writes_the_lost_turns_receipt(sandbox: Sandbox) -> None:
    gate, started = sandbox.root / "gate", sandbox.root / "started"
    hang = f"cat > /dev/null; touch {started}; while [ ! -f {gate} ]; do sleep 0.05; done; echo x"
    assert sandbox.create("u1", model=hang).code == 0
    wait_until(started.exists, timeout=60)
    _kill_the_turn(sandbox, "u1")
    waited = sandbox.wait_turn("u1")
    assert waited["status"] == "worker-lost", waited
    on_disk = Path(waited["receipt_file"])
    assert json.loads(on_disk.read_text())["status"] == "worker-lost"
