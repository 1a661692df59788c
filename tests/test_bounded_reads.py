"""SPEC 8 (revision 3): bounded reads everywhere, clean terminal output, `unit serve`'s limits.

Each attack is planted the way an executor would: it can write its own pair files
(`<git-dir>/pair/`) and everything else in the git common dir. A read command must answer
promptly, exit 0, and show the planted file as unreadable; a text view must never hand an
escape sequence to the lead's terminal; the dashboard must outlive idle and slow clients.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import Sandbox, wait_until
from tests.test_serve import serving
from tests.test_watch import read_until

PROMPT = 30  # seconds: on the code before the fix these reads hung (or ate memory) for ever
GATED = "cat > /dev/null; echo started; while [ ! -f {gate} ]; do sleep 0.05; done; echo done"
# Each planted sequence does something to a terminal: OSC 52 writes the clipboard, OSC 0 sets
# the title, CSI 2J clears the screen, CSI 6n makes the terminal type a reply into the lead's
# shell, and U+009B is the one-character (C1) form of CSI.
ESCAPES = "\x1b]52;c;cm0gLXJmIH4K\x07 \x1b]0;owned\x07 \x1b[2J \x1b[6n \u009b6n"
RAW_CONTROLS = ("\x1b", "\x07", "\u009b")


def _finished_unit(sandbox: Sandbox, unit_id: str = "u1", model: str | None = None) -> Path:
    """A unit whose first turn has replied; its pair state dir."""
    created = sandbox.create(unit_id, **({"model": model} if model else {}))
    assert created.code == 0, created.stdout + created.stderr
    sandbox.wait_turn(unit_id)
    return Path(sandbox.record(unit_id)["pair"]["state_dir"])


def _latest(state_dir: Path, suffix: str) -> Path:
    files = sorted((state_dir / "transcripts").glob(f"0001-*{suffix}"))
    assert files, list((state_dir / "transcripts").iterdir())
    return files[-1]


def _replace(path: Path, plant: str, target: Path | None = None) -> None:
    path.unlink()
    if plant == "fifo":
        os.mkfifo(path)
    else:
        assert target is not None
        path.symlink_to(target)


def _pair_of(document: dict, unit_id: str = "u1") -> dict:
    units = {unit["unit_id"]: unit for unit in document["units"]}
    return units[unit_id]


def _tail(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["unit", "tail", "--unit", "u1", *args, "--repo", str(sandbox.repo)],
        capture_output=True,
        timeout=PROMPT,
        stdin=subprocess.DEVNULL,
    )


# -- bounded reads -----------------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["in-flight.json", "receipt"])
def test_a_fifo_marker_or_receipt_leaves_status_and_list_prompt(
    sandbox: Sandbox, planted: str
) -> None:
    state_dir = _finished_unit(sandbox)
    target = state_dir / "in-flight.json" if planted == "in-flight.json" else None
    if target is None:
        target = _latest(state_dir, "-receipt.json")
        target.unlink()
    os.mkfifo(target)  # opened for reading, it blocks until a writer comes: never
    everything = sandbox.unit("status", "--all", timeout=PROMPT)
    assert everything.code == 0, everything.stdout + everything.stderr
    unit = _pair_of(everything.document)
    key = "in_flight" if planted == "in-flight.json" else "latest_receipt"
    refused = unit["pair"][key]
    assert refused["unreadable"] == str(target) and "FIFO" in refused["error"], refused
    assert unit["attention"]["state"] == "failed" and "unreadable" in unit["attention"]["why"]
    listed = sandbox.unit("list", timeout=PROMPT)
    assert listed.code == 0, listed.stdout + listed.stderr
    assert _pair_of(listed.document)["attention"]["state"] == "failed"
    table = sandbox.unit("status", "--all", "--format", "table", timeout=PROMPT)
    assert table.code == 0 and "unreadable" in table.stdout, table.stdout


def test_a_session_symlinked_to_dev_zero_is_refused_unread(sandbox: Sandbox) -> None:
    state_dir = _finished_unit(sandbox)
    _replace(state_dir / "session.json", "symlink", Path("/dev/zero"))
    started = time.monotonic()
    everything = sandbox.unit("status", "--all", timeout=PROMPT)
    assert everything.code == 0, everything.stdout + everything.stderr
    assert time.monotonic() - started < PROMPT
    pair = _pair_of(everything.document)["pair"]
    assert "error" in pair and "symbolic link" in pair["error"], pair
    assert sandbox.unit("list", timeout=PROMPT).code == 0


def test_a_symlinked_pair_or_transcripts_directory_is_not_followed(sandbox: Sandbox) -> None:
    state_dir = _finished_unit(sandbox)
    transcripts = state_dir / "transcripts"
    elsewhere = sandbox.root / "elsewhere"
    shutil.move(transcripts, elsewhere)  # the same receipt, now outside the pair dir
    transcripts.symlink_to(elsewhere, target_is_directory=True)
    unit = _pair_of(sandbox.unit("status", "--all", timeout=PROMPT).document)
    receipt = unit["pair"]["latest_receipt"]
    assert "transcripts/ is a symbolic link" in receipt["error"], receipt
    pair_dir = state_dir.parent / "pair-real"
    transcripts.unlink()
    shutil.move(elsewhere, transcripts)
    state_dir.rename(pair_dir)
    state_dir.symlink_to(pair_dir, target_is_directory=True)
    pair = _pair_of(sandbox.unit("status", "--all", timeout=PROMPT).document)["pair"]
    assert "pair/ is a symbolic link" in pair["error"], pair


# -- unit tail ---------------------------------------------------------------------------------


def test_tail_never_follows_a_symlinked_transcript_to_a_secret(
    sandbox: Sandbox, isolated_environment: Path
) -> None:
    netrc = isolated_environment / ".netrc"
    netrc.write_text("machine github.com login lead password hunter2-netrc-secret\n")
    state_dir = _finished_unit(sandbox)
    transcript = _latest(state_dir, ".log")
    _replace(transcript, "symlink", netrc)
    for args in ((), ("--raw",), ("--follow",)):
        shown = _tail(sandbox, *args)
        out = shown.stdout + shown.stderr
        assert shown.returncode == 0, out
        assert b"hunter2" not in out and b"unreadable: is a symbolic link" in shown.stdout, out
    # A symlinked `transcripts/` holding a regular file of that name is refused the same way.
    decoy = sandbox.root / "decoy"
    decoy.mkdir()
    shutil.copy(netrc, decoy / transcript.name)
    transcript.unlink()
    shutil.rmtree(state_dir / "transcripts")
    (state_dir / "transcripts").symlink_to(decoy, target_is_directory=True)
    shown = _tail(sandbox)
    assert shown.returncode == 0 and b"hunter2" not in shown.stdout + shown.stderr


def test_tail_of_dev_zero_or_a_sparse_2_gib_transcript_is_bounded(sandbox: Sandbox) -> None:
    state_dir = _finished_unit(sandbox)
    transcript = _latest(state_dir, ".log")
    original = transcript.read_bytes()
    os.truncate(transcript, 2 << 30)  # 2 GiB, almost all of it a hole of zeros
    for args in ((), ("--raw",)):
        shown = _tail(sandbox, *args)
        assert shown.returncode == 0, shown.stderr
        assert len(shown.stdout) < 8 << 20, len(shown.stdout)  # a tail, never the file
        assert b"bytes not shown" in shown.stdout + shown.stderr
    assert not shown.stdout.startswith(original)  # it did start near the end
    _replace(transcript, "symlink", Path("/dev/zero"))
    shown = _tail(sandbox, "--follow")
    assert shown.returncode == 0 and b"unreadable" in shown.stdout, shown.stdout[-500:]
    assert len(shown.stdout) < 4096


def test_tail_follow_refuses_a_fifo_and_stays_bounded_on_a_growing_hole(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    created = sandbox.create("u1", model=GATED.format(gate=gate))
    assert created.code == 0, created.stdout + created.stderr
    state_dir = Path(sandbox.record("u1")["pair"]["state_dir"])
    transcript = wait_until(lambda: next((state_dir / "transcripts").glob("0001-*.log"), None))
    wait_until(lambda: b"started" in transcript.read_bytes())
    saved = transcript.read_bytes()
    _replace(transcript, "fifo")
    shown = _tail(sandbox, "--follow")  # the turn is still running: it would wait on the FIFO
    assert shown.returncode == 0, shown.stderr
    assert b"unreadable: is a FIFO" in shown.stdout and b"no receipt yet" in shown.stdout
    transcript.unlink()
    transcript.write_bytes(saved)
    follower = subprocess.Popen(
        ["unit", "tail", "--unit", "u1", "--follow", "--repo", str(sandbox.repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert follower.stdout is not None
        read_until(follower.stdout.fileno(), b"started\n")
        os.truncate(transcript, 2 << 30)  # the file jumps ahead by 2 GiB while followed
        seen = read_until(follower.stdout.fileno(), b"bytes not shown]")
        gate.write_text("go")
        rest, _ = follower.communicate(timeout=PROMPT)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0 and b"[receipt #1" in rest
    assert len(seen + rest) < 8 << 20


# -- terminal output ---------------------------------------------------------------------------


def _no_raw_controls(text: str) -> None:
    for control in RAW_CONTROLS:
        assert control not in text, repr(text[:2000])


def test_an_executors_escape_sequences_are_shown_never_sent(sandbox: Sandbox) -> None:
    # The reply is the script partner's stdout, byte for byte; its stderr is the transcript's.
    reply_file = sandbox.root / "reply.txt"
    reply_file.write_bytes(ESCAPES.encode() + b" replied\n")
    script = f"cat > /dev/null; cat {reply_file}; cat {reply_file} >&2"
    state_dir = _finished_unit(sandbox, model=script)
    receipt_file = _latest(state_dir, "-receipt.json")
    receipt = json.loads(receipt_file.read_text())
    assert "\x1b]52" in receipt["reply"]  # planted as the executor wrote it
    views = {
        "list": sandbox.unit("list", "--format", "table").stdout,
        "status": sandbox.unit("status", "--all", "--format", "table").stdout,
        "watch": sandbox.unit("watch", "--once").stdout,
        "tail": _tail(sandbox).stdout.decode(),
    }
    for name, text in views.items():
        _no_raw_controls(text)
        assert "\\x1b]52;c;" in text, (name, text)  # shown, as visible escapes
    # JSON stays as it is: the reply round-trips exactly.
    listed = sandbox.unit("status", "--all")
    assert "\x1b]52;c;" in _pair_of(listed.document)["attention"]["why"]
    # Rich markup in a string an executor controls is shown as written, never interpreted.
    receipt["status"] = "[reverse]planted[/reverse]"
    receipt_file.write_text(json.dumps(receipt))
    frame = sandbox.unit("watch", "--once").stdout
    assert "[reverse]planted[/reverse]" in "".join(frame.replace("│", "").split()), frame
    assert "\\x9b6n" in views["tail"]
    # Under a terminal, rich styles the frame; the executor's sequences still do not pass.
    pid, master = pty.fork()
    if pid == 0:
        os.environ.update(COLUMNS="120", LINES="40")
        os.execvp("unit", ["unit", "watch", "--once", "--repo", str(sandbox.repo)])
    screen = read_until(master, b"unit(s)")
    os.waitpid(pid, 0)
    os.close(master)
    assert b"\x1b[" in screen  # rich's own styling is there
    for planted in (b"\x1b]", b"\x07", b"\x1b[2J", b"\x1b[6n", "\u009b".encode()):
        assert planted not in screen, screen[:2000]
    # `tail --raw` keeps the bytes for a pipe, and shows them visibly on a terminal.
    raw = _tail(sandbox, "--raw").stdout
    assert ESCAPES.encode() in raw
    pid, master = pty.fork()
    if pid == 0:
        os.execvp("unit", ["unit", "tail", "--unit", "u1", "--raw", "--repo", str(sandbox.repo)])
    screen = read_until(master, b"[receipt #1")
    os.waitpid(pid, 0)
    os.close(master)
    assert b"\x1b" not in screen and b"\\x1b]52;c;" in screen


# -- unit serve --------------------------------------------------------------------------------


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=PROMPT)


def test_serve_caps_connections_and_cuts_idle_and_slow_clients(sandbox: Sandbox) -> None:
    environment = {**os.environ, "UNITMGR_SERVE_TIMEOUT": "3"}
    with serving(sandbox, env=environment) as served:
        port = int(served.url.rsplit(":", 1)[1].strip("/"))
        idle = [_connect(port) for _ in range(31)]
        slow = _connect(port)  # the 32nd: trickles its request a byte at a time
        wait_until(lambda: served.get("/api/status")[0] == 503, timeout=10)
        extra = _connect(port)  # one over the cap: answered at once, without a thread
        extra.settimeout(5)
        answer = extra.recv(65536)
        assert answer.startswith(b"HTTP/1.0 503") and b'"code": "busy"' in answer, answer
        started = time.monotonic()
        request = b"GET /api/status HTTP/1.0\r\nHost: 127.0.0.1\r\n"
        cut = False
        for byte in request:  # each byte well inside a socket timeout; the deadline cuts it
            try:
                slow.send(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            slow.settimeout(0.3)
            try:
                if slow.recv(1) == b"":
                    cut = True
                    break
            except TimeoutError:
                continue
        assert cut and time.monotonic() - started < 10, "the slow client was never cut"
        for client in idle:  # the idle ones were cut at their deadline too
            client.settimeout(10)
            assert client.recv(1) == b""
        status, document, _ = served.get("/api/status")
        assert status == 200 and document["ok"], document
        for client in [*idle, slow, extra]:
            client.close()
