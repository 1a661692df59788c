"""How a turn's supervisor starts (pair/launch.py): forked from a single-threaded caller on Linux,
a fresh interpreter otherwise. A forked supervisor keeps none of the caller's descriptors (an flock
the caller holds is the caller's alone), is the caller's child as an exec'd one is, and is reaped
at the next launch."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import Sandbox, wait_until
from tests.test_pair import init_script

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is Linux-only")


def _start(sandbox: Sandbox) -> psutil.Process:
    from pair import api

    running = api.send(sandbox.repo, kind="task", body="measure", background=True)
    assert running["status"] == "running", running
    return psutil.Process(running["supervisor_pid"])


def _finish(sandbox: Sandbox, gate: Path) -> dict[str, Any]:
    from pair import api

    gate.write_text("go")
    receipt = api.wait(sandbox.repo, timeout_min=1)
    assert receipt["status"] == "replied" and receipt["reply"] == "late", receipt
    return receipt


IN_A_FRESH_PROCESS = "UNITMGR_TEST_SUPERVISOR_LAUNCH_FRESH"


@pytest.mark.slow  # under xdist it proves itself in a fresh pytest: start it early
def test_the_supervisor_is_forked_only_from_a_single_threaded_caller(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    forkable = threading.active_count() == 1 and "ray._raylet" not in sys.modules
    if not forkable and not os.environ.get(IN_A_FRESH_PROCESS):
        # An earlier test in this worker left a thread running (pytest-httpserver's server lives
        # for the whole session) or loaded Ray (a Ray runner's test), and such a caller rightly
        # gets the exec'd supervisor (pair/launch.py): prove the forked one from a process that
        # has only its own thread and no Ray.
        here = f"{Path(__file__).resolve()}::{sys._getframe().f_code.co_name}"
        completed = subprocess.run(
            # Its own basetemp: a default one would clean up the oldest sessions' temp dirs
            # (anyone's, up to hundreds of MB) on its way in.
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--basetemp={sandbox.root / 'inner'}",
                here,
            ],
            env={**os.environ, IN_A_FRESH_PROCESS: "1"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            # Not the worker's stdin: with it, the inner pytest session took 28-43 s, not 4.
            stdin=subprocess.DEVNULL,
        )
        assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
        return
    assert threading.active_count() == 1
    gate = sandbox.root / "gate"
    # Each turn waits for its own gate file and consumes it, so the supervisor is alive to inspect.
    init_script(
        sandbox, f"cat >/dev/null; while [ ! -f {gate} ]; do sleep 0.02; done; rm {gate}; echo late"
    )
    lock_file = sandbox.root / "caller.lock"
    held = open(lock_file, "w")  # noqa: SIM115 (closed below, while the turn still runs)
    fcntl.flock(held, fcntl.LOCK_EX)

    forked = _start(sandbox)
    assert forked.name() == "pair-supervise" and "_supervise" not in forked.cmdline()
    assert forked.ppid() == os.getpid()
    held.close()  # the caller's lock is gone with the caller's descriptor: none was inherited
    with open(lock_file) as again:
        fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert Path(_finish(sandbox, gate)["receipt_file"]).exists()
    wait_until(lambda: forked.status() == psutil.STATUS_ZOMBIE)  # ours to reap, at the next launch

    monkeypatch.setenv("UNITMGR_PAIR_SUPERVISOR", "exec")
    told = _start(sandbox)
    assert not psutil.pid_exists(forked.pid), "the finished forked supervisor was not reaped"
    assert "_supervise" in told.cmdline()
    _finish(sandbox, gate)

    monkeypatch.delenv("UNITMGR_PAIR_SUPERVISOR")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        threaded = _start(sandbox)  # a fork would copy the other thread's locks held
        assert "_supervise" in threaded.cmdline() and threaded.ppid() == os.getpid()
        _finish(sandbox, gate)
    finally:
        stop.set()
        other.join()


def test_a_forked_supervisor_wakes_its_launcher_once_its_partner_is_recorded(
    sandbox: Sandbox,
) -> None:
    """`pair send --background` answers when the forked supervisor says its partner is
    recorded, not at the handshake's next poll (SPEC 7): with the poll lengthened to 30 s by
    SPEC 8's test hooks, the running record still comes back within seconds, and from a forked
    supervisor whose partner is still running."""
    import time

    gate = sandbox.root / "gate"
    init_script(sandbox, f"cat >/dev/null; while [ ! -f {gate} ]; do sleep 0.02; done; echo late")
    body = sandbox.root / "body.md"
    body.write_text("measure\n")
    slow_poll = {
        **os.environ,
        "UNITMGR_TEST_HOOKS": "1",
        "UNITMGR_TEST_HANDSHAKE_POLL_SECONDS": "30",
    }
    began = time.monotonic()
    running = sandbox.pair(
        "send", "--kind", "task", "--body-file", str(body), "--background", env=slow_poll
    )
    elapsed = time.monotonic() - began
    assert running["status"] == "running", running.stdout
    assert elapsed < 10, elapsed  # the poll alone: 30 s
    assert psutil.Process(running["supervisor_pid"]).name() == "pair-supervise"  # forked
    assert psutil.Process(running["partner_pid"]).is_running()
    gate.write_text("go")
    receipt = sandbox.pair("wait", "--timeout-min", "1")
    assert receipt["status"] == "replied" and receipt["reply"] == "late", receipt.stdout
