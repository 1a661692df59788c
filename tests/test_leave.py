"""The console scripts' exit (registry/leave.py): what `sys.exit` guarantees still happens —
non-daemon threads finish, atexit runs, buffered output arrives, a closed stdout exits 120 —
and the status is the command's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import VENV_BIN, wait_until


def _start(tmp_path: Path, body: str, stdout: int = subprocess.PIPE) -> subprocess.Popen:
    """A script ending in `leave`, started with block-buffered stdout (as a console script
    writing to a pipe has it)."""
    script = tmp_path / "script.py"
    script.write_text(f"import sys, threading, atexit\nfrom registry.leave import leave\n{body}\n")
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.Popen(
        [sys.executable, str(script)], stdout=stdout, stderr=subprocess.PIPE, env=environment
    )


def _leave(tmp_path: Path, body: str, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess:
    process = _start(tmp_path, body, stdout)
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_a_running_thread_finishes_and_atexit_runs_before_the_status(tmp_path: Path) -> None:
    done, hook, gate = tmp_path / "thread-done", tmp_path / "atexit-ran", tmp_path / "gate"
    body = f"""
import os
def work():
    while not os.path.exists({str(gate)!r}):
        threading.Event().wait(0.01)
    open({str(done)!r}, "w").write("done")
threading.Thread(target=work).start()
atexit.register(lambda: open({str(hook)!r}, "w").write(str(os.path.exists({str(done)!r}))))
sys.stdout.write("no newline, still buffered")
open({str(gate)!r}, "w").close()
leave(3)
"""
    completed = _leave(tmp_path, body)
    assert completed.returncode == 3, completed.stderr
    assert done.read_text() == "done"
    assert hook.read_text() == "True"  # atexit ran after the thread was joined, as at exit
    assert completed.stdout == b"no newline, still buffered"


def test_none_is_0_and_a_closed_stdout_is_120(tmp_path: Path) -> None:
    assert _leave(tmp_path, "leave(None)").returncode == 0
    read, write = os.pipe()
    os.close(read)  # nobody reads: the flush at exit fails with EPIPE
    try:
        body = "import signal\nsignal.signal(signal.SIGPIPE, signal.SIG_IGN)\n"
        body += "sys.stdout.write('x' * 10)\nleave(0)"
        assert _leave(tmp_path, body, stdout=write).returncode == 120  # as CPython's own exit
    finally:
        os.close(write)


def test_the_console_scripts_are_ours_and_end_through_leave() -> None:
    """The installed scripts are bin/'s (pyproject's shared-scripts), first line rewritten to
    the installing interpreter: no `re` imported before the command (pip's wrapper's)."""
    root = Path(__file__).resolve().parent.parent
    for program, module in (("unit", "unitmgr.entry"), ("pair", "pair.entry")):
        installed = (Path(VENV_BIN) / program).read_text()
        shebang, _, body = installed.partition("\n")
        assert shebang.startswith("#!") and "python" in shebang, shebang
        assert body == (root / "bin" / program).read_text().partition("\n")[2]
        assert f"from {module} import run\n" in body and "import re" not in body


def test_each_exit_step_stands_alone(tmp_path: Path) -> None:
    """A Ctrl-C while a thread is joined, and an atexit callback that raises, are said on
    stderr; atexit still runs and the buffered output still arrives (CPython's own exit)."""
    import signal

    joining, hook, gate = tmp_path / "joining", tmp_path / "atexit-ran", tmp_path / "gate"
    body = f"""
import os, signal
def work():
    # The kernel may hand a process's SIGINT to any thread not blocking it; one taken by this
    # thread would never interrupt the main thread's join (CPython's own exit alike).
    signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGINT}})
    # The main thread reads as stopped once `leave` is joining this one (threading._shutdown).
    while threading.main_thread().is_alive():
        threading.Event().wait(0.01)
    open({str(joining)!r}, "w").close()
    while not os.path.exists({str(gate)!r}):
        threading.Event().wait(0.01)
threading.Thread(target=work).start()
def broken():
    raise RuntimeError("a broken callback")
atexit.register(lambda: open({str(hook)!r}, "w").write("ran"))
atexit.register(broken)  # (run first: last registered)
sys.stdout.write("the document")
leave(3)
"""
    process = _start(tmp_path, body)
    try:
        wait_until(joining.exists, timeout=30)
        process.send_signal(signal.SIGINT)  # lands in the join (the thread waits for the gate)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        gate.touch()
        process.kill()
    assert process.returncode == 3, stderr
    assert stdout == b"the document"
    assert hook.read_text() == "ran"
    assert b"Exception ignored at exit" in stderr and b"a broken callback" in stderr, stderr
