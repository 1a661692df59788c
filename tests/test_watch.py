"""`unit watch`: the live view, driven under a real pseudo-terminal, and its single frame."""

from __future__ import annotations

import os
import pty
import select
import shutil
import time

from tests.conftest import Sandbox


def read_until(fd: int, needle: bytes, timeout: float = 30.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"never saw {needle!r} in {seen[-2000:]!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_watch_live_under_a_pty_highlights_and_stops_on_ctrl_c(sandbox: Sandbox) -> None:
    assert (
        sandbox.create("calm", model="cat > /dev/null; echo ok", max_active="4", max_held="4").code
        == 0
    )
    broken = sandbox.create("broken", model="cat > /dev/null; exit 3", max_active="4", max_held="4")
    # A first turn that already failed when create prints is `first-turn-failed` (SPEC 3.3).
    assert broken.code == 0 or broken["code"] == "first-turn-failed", broken.stdout
    assert sandbox.create("gone", max_active="4", max_held="4").code == 0
    for unit in ("calm", "broken", "gone"):
        sandbox.wait_turn(unit)
    shutil.rmtree(sandbox.worktree("gone"))
    pid, master = pty.fork()
    if pid == 0:  # the child: `unit watch` on a terminal, wide enough for one line per unit
        os.environ.update(COLUMNS="200", LINES="50")
        os.execvp("unit", ["unit", "watch", "--interval", "0.5", "--repo", str(sandbox.repo)])
    screen = read_until(master, b"need attention")
    screen += read_until(master, b"worktree missing")
    text = screen.decode("utf-8", "replace")
    assert "calm" in text and "broken" in text and "gone" in text
    assert "#1 failed" in text  # a failed receipt is flagged
    assert "recover: worktree missing" in text
    os.write(master, b"\x03")  # Ctrl-C
    rest = read_until(master, b"unit watch: stopped")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"Traceback" not in screen + rest
    os.close(master)


def test_watch_once_draws_one_frame(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    frame = sandbox.unit("watch", "--once")
    assert frame.code == 0 and "u1" in frame.stdout and "all quiet" in frame.stdout
    refused = sandbox.unit("watch")  # not a terminal
    assert refused.code == 2 and refused["code"] == "not-a-terminal"
