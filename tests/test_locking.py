"""Two-level locking (SPEC 2.4): different units in parallel, one unit never twice at once."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from registry.locks import Deadline, FileLock
from tests.conftest import Sandbox


def start(sandbox: Sandbox, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["unit", *args, "--repo", str(sandbox.repo)],
        cwd=sandbox.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def setup_running(sandbox: Sandbox, unit_id: str) -> bool:
    record = sandbox.registry / "units" / f"{unit_id}.json"
    return record.exists() and '"child"' in record.read_text()


def test_creates_of_different_units_overlap(sandbox: Sandbox) -> None:
    """Each setup hook (run under its unit's lock) waits until both have started: the creates
    finish only if both hold their unit locks at the same time — proved without a wall clock."""
    barrier = sandbox.root / "barrier"
    barrier.mkdir()
    hook = (
        f"touch {barrier}/$(basename $PWD); n=0; "
        f"until [ -e {barrier}/a1 ] && [ -e {barrier}/a2 ]; do "
        "n=$((n+1)); [ $n -gt 1200 ] && exit 1; sleep 0.05; done"
    )
    limits = {"setup": hook, "max_active": "4", "max_held": "4"}
    first = start(sandbox, *sandbox.create_args("a1", **limits))
    second = start(sandbox, *sandbox.create_args("a2", **limits))
    outputs = [first.communicate(timeout=120), second.communicate(timeout=120)]
    # Serialized creates would leave the first setup waiting alone until it gives up (60 s).
    assert first.returncode == 0 and second.returncode == 0, outputs


def test_a_busy_unit_refuses_with_the_holder_named(sandbox: Sandbox) -> None:
    creating = start(sandbox, *sandbox.create_args("u1", setup="sleep 30"))
    wait_for(lambda: setup_running(sandbox, "u1"))
    busy = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1", "--lock-timeout", "0")
    assert busy.code == 75, busy.stdout
    assert busy["code"] == "lock-busy" and busy["retryable"] is True
    assert busy["reason"].startswith(
        f"unit u1 is busy: unit create --unit u1 (pid {creating.pid}) has held it for "
    )
    waited = time.monotonic()
    bounded = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1", "--lock-timeout", "1")
    assert bounded.code == 75 and 0.9 < time.monotonic() - waited < 10
    status = sandbox.unit("status", "--all")  # lock-free: never waits for the create
    assert status.code == 0 and status["units"][0]["lifecycle"] == "setting-up"
    creating.kill()
    creating.wait()


def test_a_killed_lock_holder_never_blocks_the_next_command(sandbox: Sandbox) -> None:
    creating = start(sandbox, *sandbox.create_args("u1", setup="sleep 60"))
    wait_for(lambda: setup_running(sandbox, "u1"))
    record = json.loads((sandbox.registry / "units" / "u1.json").read_text())
    setup_pid = next(e for e in record["journal"] if e["step"] == "setup")["detail"]["child"]["pid"]
    creating.kill()  # SIGKILL: the kernel drops its flocks
    creating.wait()
    started = time.monotonic()
    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1", "--lock-timeout", "0")
    assert gone.code == 0, gone.stdout
    assert time.monotonic() - started < 15
    reaped = next(step for step in gone["done"] if step["step"] == "reap")
    assert setup_pid in [p["pid"] for p in reaped["detail"]["processes"]]
    assert not psutil.pid_exists(setup_pid) or psutil.Process(setup_pid).status() == "zombie"


def test_lock_holder_information_and_deadline(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "x.lock"
    holder = FileLock(path, subject="unit x", command="unit create --unit x")
    holder.acquire(Deadline(0))
    info = json.loads(path.read_text())
    assert info["pid"] == os.getpid() and info["command"] == "unit create --unit x"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    # A second descriptor in the same process contends like another process would.
    contender = FileLock(path, subject="unit x", command="unit dismantle --unit x")
    started = time.monotonic()
    with pytest.raises(Exception) as refused:
        contender.acquire(Deadline(0.3))
    assert 0.25 < time.monotonic() - started < 5
    assert refused.value.code == "lock-busy"  # type: ignore[attr-defined]
    assert f"(pid {os.getpid()})" in refused.value.reason  # type: ignore[attr-defined]
    holder.release()
    assert path.exists() and path.read_text() == ""  # never deleted; holder line cleared
    contender.acquire(Deadline(0))
    contender.release()


def test_a_stale_holder_line_is_not_named(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    path.write_text(
        json.dumps(
            {"pid": 999999, "create_time": 1.0, "command": "ghost", "since": "2026-01-01T00:00:00Z"}
        )
    )
    first = FileLock(path, subject="unit x", command="real")
    # Simulate an unidentified holder: flock held through another descriptor whose line is stale.
    import fcntl

    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(Exception) as refused:
            first.acquire(Deadline(0))
        assert refused.value.reason == "unit x is busy: held by an unidentified process"  # type: ignore[attr-defined]
    finally:
        os.close(fd)
