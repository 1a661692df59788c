"""`unit watch`: the live view, driven under a real pseudo-terminal, and its single frame."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import time
from pathlib import Path

from tests.conftest import Sandbox, write_record


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


GATED = "cat > /dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo released"
# Replies to its first turn, fails its second (the addendum's notice): a failure that is not
# the first turn's, which SPEC 3.3 makes a recovery instead.
SECOND_TURN_FAILS = (
    "cat > /dev/null; if [ -e {mark} ]; then echo broke >&2; exit 3; fi; touch {mark}; echo first"
)
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Za-z0-9]|\x1b[=>]")


def three_unit_batch(sandbox: Sandbox) -> Path:
    """replier (waiting-on-lead), runner (running until the returned gate file exists), failer
    (failed), and gone (recovery: its worktree was removed)."""
    gate = sandbox.root / "gate"
    limits = {"max_active": "5", "max_held": "5"}
    replier = sandbox.create(
        "replier", model="cat > /dev/null; echo 'All done: GREETING added'", **limits
    )
    assert replier.code == 0, replier.stdout
    failer = sandbox.create(
        "failer", model=SECOND_TURN_FAILS.format(mark=sandbox.root / "failed-once"), **limits
    )
    assert failer.code == 0, failer.stdout
    assert sandbox.create("gone", **limits).code == 0
    for unit in ("replier", "failer", "gone"):
        sandbox.wait_turn(unit)
    assert sandbox.create("runner", model=GATED.format(gate=gate), **limits).code == 0
    notice = sandbox.unit("addendum", "--unit", "failer", "--text", "One more thing.")
    assert notice.code == 0, notice.stdout
    assert sandbox.wait_turn("failer")["status"] == "failed"
    shutil.rmtree(sandbox.worktree("gone"))
    return gate


EXPECTED = {
    "replier": "waiting-on-lead",
    "runner": "running",
    "failer": "failed",
    "gone": "recovery",
}


def test_attention_of_a_batch_in_status_list_and_watch_under_a_pty(sandbox: Sandbox) -> None:
    gate = three_unit_batch(sandbox)

    everything = sandbox.unit("status", "--all")
    assert everything.code == 0
    seen = {unit["unit_id"]: unit["attention"] for unit in everything["units"]}
    assert {unit: state["state"] for unit, state in seen.items()} == EXPECTED
    assert "#1 task replied: All done: GREETING added" in seen["replier"]["why"]
    assert seen["failer"]["why"].startswith("#2 task failed")
    assert seen["gone"]["why"] == "worktree missing"
    assert "running" in seen["runner"]["why"]

    listed = sandbox.unit("list")
    by_id = {unit["unit_id"]: unit for unit in listed["units"]}
    assert {unit: view["attention"]["state"] for unit, view in by_id.items()} == EXPECTED
    replied = by_id["replier"]["observed"]["latest_receipt"]
    assert by_id["replier"]["attention"]["since"] == replied["finished_at"]
    in_flight = by_id["runner"]["observed"]["pair"]["in_flight"]
    assert by_id["runner"]["attention"]["since"] == in_flight["started_at"]

    for unit in ("replier", "runner", "failer"):
        one = sandbox.unit("status", "--unit", unit)
        assert one.code == 0 and one["unit"]["attention"]["state"] == EXPECTED[unit], one.stdout

    pid, master = pty.fork()
    if pid == 0:  # the child: `unit watch` on a narrow terminal, so long lines must wrap
        os.environ.update(COLUMNS="80", LINES="60")
        os.execvp("unit", ["unit", "watch", "--interval", "0.5", "--repo", str(sandbox.repo)])
    screen = read_until(master, b"need attention")
    screen += read_until(master, b"unit(s)")
    text = screen.decode("utf-8", "replace")
    plain = ANSI.sub(b"", screen).decode("utf-8", "replace")
    squeezed = "".join(plain.split())
    banner = plain[plain.index("Waiting on you") :]
    assert "Waiting on you (3):" in banner and "all quiet" not in text
    # The banner names the units the lead must act on, most urgent first, and not the runner.
    head = banner[: banner.index("unit(s)")]
    order = [head.index(unit) for unit in ("gone", "failer", "replier")]
    assert order == sorted(order) and "runner" not in head
    for state in ("recovery", "failed", "waiting-on-lead"):
        assert state in head
    # The recovery command is wrapped at 80 columns, never cut.
    command = by_id["gone"]["recovery"]["command"]
    assert len(command) > 80 and "".join(command.split()) in squeezed
    assert "#2failed" in squeezed  # a failed receipt is flagged in the table too
    assert "recover:worktreemissing" in squeezed.replace("│", "")  # a folded table cell
    os.write(master, b"\x03")  # Ctrl-C
    rest = read_until(master, b"unit watch: stopped")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"Traceback" not in screen + rest
    os.close(master)
    gate.write_text("go")
    assert sandbox.wait_turn("runner")["status"] == "replied"


def test_watch_once_draws_one_frame(sandbox: Sandbox) -> None:
    quiet = sandbox.unit("watch", "--once")
    assert quiet.code == 0 and quiet.stdout.startswith("Waiting on you: nobody — all quiet")
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    # A finished turn waits on the lead: not "all quiet" (SPEC 3.10).
    frame = sandbox.unit("watch", "--once")
    assert frame.code == 0 and frame.stdout.startswith("Waiting on you (1):")
    assert "u1  waiting-on-lead" in frame.stdout and "all quiet" not in frame.stdout
    refused = sandbox.unit("watch")  # not a terminal
    assert refused.code == 2 and refused["code"] == "not-a-terminal"


def test_watch_shows_the_feedback_ledgers_counts(sandbox: Sandbox) -> None:
    """`unit watch` shows the feedback ledger's counts as `status --all` does (SPEC 3.17)."""
    counts = {"ci": 2, "review": 3, "withheld": 1, "at": "2026-12-01T10:00:00Z"}
    write_record(sandbox, "u1", feedback={"counts": counts})
    frame = sandbox.unit("watch", "--once")
    assert frame.code == 0, frame.stdout
    cells = [line.split("│")[-2].strip() for line in frame.stdout.splitlines() if "│" in line]
    assert "feedback: 2 CI, 3 review pending, 1 withheld" in " ".join(cells)  # the last column
