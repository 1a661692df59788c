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


def _exited(process: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """Until `process` (unreaped) is a zombie: it has exited but its pid is still ours."""
    deadline = time.monotonic() + 10
    while psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)


def test_exited_alone_is_false_while_anything_of_the_child_lives() -> None:
    """The psutil-free check a turn's end relies on (SPEC 7): true only for an exited child
    with nothing left in its group or below it — never for a running one, one that left a
    background job in its group. (A job that escaped with `setsid` is the sweep's:
    `no_live_descendants`, below.)"""
    from registry.processes import exited_alone

    cases = {
        "alone": ("true", True),
        "running": ("sleep 300", False),
        "background job in its group": ("sleep 300 & echo $!", False),
    }
    for label, (script, expected) in cases.items():
        process = subprocess.Popen(
            ["sh", "-c", script], start_new_session=True, stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None
        job = int(process.stdout.readline()) if "$!" in script else None
        try:
            if label != "running":
                _exited(process)
            answer = exited_alone(process.pid, process.pid)
            # psutil's view of the same moment: what the slow path would have found
            group = [
                p.pid
                for p in psutil.process_iter(["status"])
                if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == process.pid
            ]
            assert answer is expected, (label, group)
            assert answer is (not group and label != "running")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if job is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(job, signal.SIGKILL)
            process.kill()
            process.wait()
            process.stdout.close()


def test_no_live_descendants_sees_a_grandchild_and_then_its_absence() -> None:
    """The supervisor's sweep skips psutil only when /proc shows nothing alive below it. Run
    in a fresh interpreter: a test worker has descendants of its own (the CLI zygote, servers)."""
    script = """
import os, signal, subprocess, sys, time
from registry.processes import no_live_descendants
print(no_live_descendants())
child = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE)
grandchild = int(child.stdout.readline())
print(no_live_descendants())
os.kill(grandchild, signal.SIGKILL)
child.wait()
deadline = time.monotonic() + 10
while not no_live_descendants() and time.monotonic() < deadline:
    time.sleep(0.01)  # the killed grandchild is reaped by init, not by us
print(no_live_descendants())
"""
    answers = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
        check=True,
    ).stdout.split()
    assert answers == ["True", "False", "True"]


def test_is_alive_from_proc_answers_as_psutil_does() -> None:
    """`is_alive` reads /proc without psutil (SPEC 7); its answer is psutil's for the recorded
    process, the same pid with another start time (a reused pid), a zombie and a reaped one."""
    from registry import processes

    def by_psutil(identity: ProcessIdentity) -> bool:
        try:
            process = psutil.Process(identity.pid)
            same = abs(process.create_time() - identity.create_time) < 1.0
            return same and process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    child = subprocess.Popen(["sleep", "300"])
    started = psutil.Process(child.pid).create_time()
    recorded = ProcessIdentity(child.pid, started, child.pid, "sleep")
    reused = ProcessIdentity(child.pid, started - 5, child.pid, "sleep")
    assert processes._proc_state(child.pid) is not None  # the /proc path answers, not psutil
    try:
        assert is_alive(recorded) is by_psutil(recorded) is True
        assert is_alive(reused) is by_psutil(reused) is False
        child.kill()
        _exited(child)
        assert is_alive(recorded) is by_psutil(recorded) is False  # a zombie
    finally:
        child.kill()
        child.wait()
    assert is_alive(recorded) is by_psutil(recorded) is False  # reaped: its pid is free
