"""Process identity and group kills (registry.processes)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from registry.processes import (
    OWN_CHILD,
    ChildTimeout,
    ProcessIdentity,
    identify,
    is_alive,
    kill_tree,
    run_streamed,
)
from tests.conftest import gone


def test_kill_tree_survives_a_tree_that_keeps_forking() -> None:
    for _ in range(10):
        process = subprocess.Popen(
            ["sh", "-c", "while true; do sleep 0.01; done"], start_new_session=True
        )
        try:
            found = identify(process.pid)
            assert found is not None
            identity = ProcessIdentity(process.pid, found.create_time, process.pid, "sh")
            kill_tree(identity, proof=OWN_CHILD, grace_seconds=2)
            process.wait(timeout=10)
            assert not is_alive(identity)
        finally:
            # A failed run must not leave a fork loop eating the CPU of every later test.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_kill_tree_catches_setsid_escapees() -> None:
    process = subprocess.Popen(
        ["sh", "-c", "setsid sleep 300 & echo $!; wait"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    escapee = int(process.stdout.readline())
    assert psutil.Process(escapee).pid != 0
    found = identify(process.pid)
    assert found is not None
    kill_tree(ProcessIdentity(process.pid, found.create_time, process.pid, "sh"), proof=OWN_CHILD)
    process.wait(timeout=10)
    deadline = time.monotonic() + 5
    while not gone(escapee) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone(escapee)


def test_a_reused_pid_is_never_touched() -> None:
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        found = identify(bystander.pid)
        assert found is not None
        impostor = ProcessIdentity(bystander.pid, found.create_time - 100, None, "sleep")
        assert not is_alive(impostor)
        assert kill_tree(impostor, proof=OWN_CHILD) == []
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_run_streamed_times_out_and_kills_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    sink = open(tmp_path / "out", "wb")  # noqa: SIM115
    started = time.monotonic()
    try:
        run_streamed(
            ["sh", "-c", f"echo started; sleep 300 & echo $! > {pid_file}; wait"],
            cwd=tmp_path,
            timeout_seconds=1,
            sink=sink,
        )
    except ChildTimeout as timeout:
        assert "started" in timeout.output_tail
    else:
        raise AssertionError("no timeout")
    finally:
        sink.close()
    assert time.monotonic() - started < 10
    assert gone(int(pid_file.read_text()))


def test_run_streamed_reports_the_exit_code_and_identity(tmp_path: Path) -> None:
    seen: list[ProcessIdentity] = []
    result = run_streamed(
        [sys.executable, "-c", "import sys; print('out'); sys.exit(4)"],
        cwd=tmp_path,
        timeout_seconds=30,
        sink=None,
        on_start=seen.append,
    )
    assert result.exit_code == 4 and "out" in result.output_tail
    assert seen and seen[0].pgid == seen[0].pid
