"""The warm fork server of Ray turns' lead supervisors (pair.runners.ray_forkserver and its
client, pair.runners.ray_warm; SPEC 7 and 8).

A second Ray turn's supervisor is forked by the server the first turn started, and its receipt
has the cold turn's shape. Only the lead is served (SPEC 8: an executor runs as the same user
and can reach the socket): a client that cannot prove the secret is refused and nothing is
forked, a server that cannot prove it is never sent the environment, a stalled client holds up
no one else. A request sent and not answered never leaves a turn running without its marker. A
socket directory anyone else could reach is not used; another environment's key is not served;
an idle server exits. Every test's servers live under its own `XDG_RUNTIME_DIR`
(tests/conftest.py stops them); the warm path is on only in this file's tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pair.runners import ray_warm
from tests.conftest import gone, wait_until
from tests.test_runner_contract import (
    Harness,
    gated,
    on_ray,  # noqa: F401 (the fixture)
)


def _socket() -> Path | None:
    """The one server socket of this test (its key is the CLI's, whose `sys.path` is not
    pytest's: found by its directory, not computed here)."""
    found = sorted((Path(os.environ["XDG_RUNTIME_DIR"]) / "unitmgr").glob("ray-*.sock"))
    assert len(found) <= 1, found
    return found[0] if found else None


def _server_pid() -> int | None:
    """The pid of the server answering this test's socket, once it answers."""
    path = _socket()
    if path is None:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(1)
            connection.connect(str(path))
            return ray_warm.peer(connection)[0]
    except OSError:
        return None


def _server_traces() -> dict[str, str]:
    """What the run directory holds, and the servers' own logs (their errors, if they died)."""
    directory = Path(os.environ["XDG_RUNTIME_DIR"]) / "unitmgr"
    if not directory.is_dir():
        return {}
    return {
        entry.name: entry.read_text(errors="replace")[-4000:] if entry.suffix == ".log" else ""
        for entry in sorted(directory.iterdir())
    }


def _key() -> str:
    """This environment's key as a `-P` interpreter (the server's kind) computes it."""
    code = "from pair.runners import ray_warm as w; print(w.key())"
    return subprocess.check_output([sys.executable, "-P", "-c", code], cwd="/", text=True).strip()


def _start_server(key: str | None = None, idle: float = 600) -> Any:
    return subprocess.Popen(
        [
            sys.executable,
            "-P",
            "-m",
            "pair.runners.ray_forkserver",
            key or _key(),
            "--idle",
            str(idle),
        ],
        cwd="/",
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _send(harness: Harness, script: str, *extra: str) -> dict[str, Any]:
    body = harness.sandbox.root / "body.md"
    body.write_text(script)
    sent = harness.sandbox.pair("send", "--kind", "task", "--body-file", str(body), *extra)
    assert sent.code == 0 and sent.document is not None, sent.stdout + sent.stderr
    document: dict[str, Any] = sent.document
    return document


@pytest.mark.slow
def test_the_second_ray_turn_is_forked_by_the_warm_server(
    on_ray: Harness,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psutil

    monkeypatch.delenv("UNITMGR_RAY_WARM_SERVER")

    cold = _send(on_ray, "echo cold")
    assert cold["status"] == "replied", cold
    # The cold turn started a server for the next one; it answers once `ray` is imported.
    try:
        server = wait_until(_server_pid, timeout=60)
    except AssertionError:
        raise AssertionError(f"no warm server answered: {_server_traces()}") from None
    path = _socket()
    assert path is not None
    assert psutil.Process(server).cmdline()[-2:] == ["pair.runners.ray_forkserver", path.stem[4:]]
    running = _send(on_ray, gated("echo warm", "echo after", on_ray.gate_file), "--background")
    assert running["status"] == "running", running
    supervisor = psutil.Process(running["supervisor_pid"])
    # Forked by the warm server (by the handler it forked for the request): its command line.
    assert supervisor.cmdline() == psutil.Process(server).cmdline()
    assert supervisor.name() == "pair-supervise"
    assert os.getsid(supervisor.pid) == supervisor.pid  # its own session, as a cold one
    on_ray.open_gate()
    waited = on_ray.sandbox.pair("wait", "--timeout-min", "1")
    warm = waited.document
    assert warm is not None and warm["status"] == "replied", waited.stdout + waited.stderr
    assert warm["supervisor_pid"] == supervisor.pid
    assert sorted(warm) == sorted(cold)
    assert sorted(warm["runner"]) == sorted(cold["runner"])
    wait_until(lambda: gone(supervisor.pid), timeout=30)


def test_a_socket_directory_others_can_reach_is_not_used(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    (runtime / "unitmgr").mkdir(parents=True, mode=0o700)
    environ = {"XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path)}
    assert ray_warm.run_directory(environ) == runtime / "unitmgr"
    (runtime / "unitmgr").chmod(0o755)
    assert ray_warm.run_directory(environ) is None
    (runtime / "unitmgr").rmdir()
    (runtime / "unitmgr").symlink_to(tmp_path)
    assert ray_warm.run_directory(environ) is None


def test_no_request_goes_to_a_directory_others_can_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "unitmgr").mkdir(mode=0o777)
    (tmp_path / "unitmgr").chmod(0o777)
    log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert ray_warm.request(tmp_path, 1, "t", log) is None  # the turn goes cold
    finally:
        os.close(log)


def test_another_environments_key_is_not_served() -> None:
    assert ray_warm.key({"RAY_ADDRESS": "a"}) != ray_warm.key({"RAY_ADDRESS": "b"})
    assert ray_warm.key({"HOME": "x"}) == ray_warm.key({})
    assert ray_warm.key({"PYTHONBREAKPOINT": "0"}) == ray_warm.key({})
    # Keyed by the lead's secret: nobody without it can tell which environment a socket is for.
    assert ray_warm.key({}, secret=b"a" * 32) != ray_warm.key({}, secret=b"b" * 32)
    # A server asked for a key its own interpreter does not have exits before importing Ray.
    stale = _start_server(key="0" * 16)
    assert stale.wait(timeout=30) == 2
    assert _server_pid() is None


def _handshake(path: Path, secret: bytes, body: bytes, fds: list[int]) -> bytes:
    """A client's whole exchange with `secret` (right or wrong); the server's answer line."""
    mine = os.urandom(16).hex().encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(10)
        connection.connect(str(path))
        server = ray_warm.peer(connection)[0]
        connection.sendall(mine + b"\n")
        hello = json.loads(connection.recv(4096))
        theirs = hello["nonce"].encode()
        proof = ray_warm.request_proof(secret, mine, theirs, server, os.getpid(), body)
        socket.send_fds(connection, [body + b"\n" + proof.encode() + b"\n"], fds)
        answer = b""
        while answer.count(b"\n") < 2:
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer.split(b"\n")[0]


def _relay(path: Path, target: Path) -> Any:
    """A process in the middle: whatever either side sends goes on to the other; what the
    client sent is recorded."""

    def behave(connection: socket.socket, got: dict[str, Any]) -> None:
        got["from_client"] = b""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as onward:
            onward.connect(str(target))
            connection.settimeout(5)
            onward.settimeout(5)
            with contextlib.suppress(OSError):
                nonce = connection.recv(100)
                got["from_client"] += nonce
                onward.sendall(nonce)
                connection.sendall(onward.recv(4096))  # the real server's hello
                while chunk := connection.recv(65536):
                    got["from_client"] += chunk

    return _fake_server(path, behave)


def test_only_a_client_holding_the_secret_is_served_and_a_stalled_one_holds_up_no_one(
    tmp_path: Path,
) -> None:
    import psutil

    server = _start_server(idle=3)
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        assert wait_until(_server_pid, timeout=60) == server.pid
        path = _socket()
        assert path is not None
        state = tmp_path / "state"
        state.mkdir()
        log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
        body = {"state_dir": str(state), "seq": 1, "token": "t", "umask": 0o22, "environ": {}}
        data = json.dumps(body).encode()
        try:
            # An executor's request: the same uid, the right shape, no secret: refused, and
            # once its handler is gone nothing runs in the turn's state directory.
            refused = json.loads(_handshake(path, b"x" * 32, data, [log]))
            assert "refused" in refused
            wait_until(lambda: not psutil.Process(server.pid).children(), timeout=30)
            assert not _running_in(state)
            # Garbage and a stalled connection: the server still answers the lead at once.
            for garbage in (b"garbage", b"\xff" * 70000):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                    connection.connect(str(path))
                    with contextlib.suppress(OSError):
                        connection.sendall(garbage)
            stalled.connect(str(path))
            stalled.sendall(b"0")  # and nothing more
            served = ray_warm.request(state, 1, "t", log, path=path)
            assert served is not None
            # It ran as a supervisor does, found no turn of its own in `state`, and left.
            assert served.wait() != 0 and served.poll() is not None
            # A relay between the lead and the real server (as if at the socket's path): the
            # server's proof names both ends the kernel saw, so the lead sends it nothing.
            relay_path = path.with_name("ray-relay.sock")
            thread, got = _relay(relay_path, path)
            assert ray_warm.request(state, 1, "t", log, path=relay_path) is None
            thread.join(timeout=10)
            assert len(got["from_client"]) == 33  # its nonce and newline, nothing more
        finally:
            os.close(log)
        assert server.wait(timeout=30) == 0  # idle: it exits, and takes its socket with it
        assert not path.exists()
    finally:
        stalled.close()
        if server.poll() is None:
            server.kill()
            server.wait()


def _running_in(directory: Path) -> list[int]:
    import psutil

    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.cwd() == str(directory):
                found.append(process.pid)
    return found


def _fake_server(path: Path, behave: Any) -> Any:
    """A server at `path`, in a thread: one connection, handed to `behave`."""
    import threading

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    got: dict[str, Any] = {}

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            behave(connection, got)
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread, got


def test_a_server_that_cannot_prove_the_secret_is_never_sent_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNITMGR_PLANTED_SECRET", "the-lead-environment")
    path = ray_warm.socket_path()
    assert path is not None

    def impostor(connection: socket.socket, got: dict[str, Any]) -> None:
        connection.recv(100)
        connection.sendall(json.dumps({"nonce": "n", "proof": "0" * 64}).encode() + b"\n")
        connection.settimeout(2)
        got["rest"] = b""
        with contextlib.suppress(OSError):
            while chunk := connection.recv(65536):
                got["rest"] += chunk

    thread, got = _fake_server(path, impostor)
    log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert ray_warm.request(tmp_path, 1, "t", log) is None  # the turn goes cold
    finally:
        os.close(log)
    thread.join(timeout=10)
    assert got["rest"] == b""  # not a byte of the request, let alone the environment


def _marker_of(state: Path, supervisor: dict[str, Any] | None) -> Any:
    from pair.paths import PairPaths
    from pair.state import Marker, write_marker

    paths = PairPaths(state)
    write_marker(
        paths,
        Marker(seq=1, kind="task", owner_token="tok", started_at="now", supervisor=supervisor),
    )
    return paths


def _proving_then_silent(claim: Any) -> Any:
    """A server that proves the secret, takes the request, maybe lets a supervisor claim the
    turn, and dies before answering. (In this process: both ends' pid is this test's.)"""
    secret = ray_warm._secret()
    assert secret is not None

    def behave(connection: socket.socket, got: dict[str, Any]) -> None:
        theirs = connection.recv(100).strip()
        mine = os.urandom(16).hex().encode()
        proof = ray_warm.hello_proof(secret, theirs, mine, os.getpid(), os.getpid())
        connection.sendall(json.dumps({"nonce": mine.decode(), "proof": proof}).encode() + b"\n")
        data, fds, _, _ = socket.recv_fds(connection, 1 << 21, 4)
        for fd in fds:
            os.close(fd)
        got["request"] = data
        claim()

    return behave


def test_a_request_sent_and_not_answered_never_leaves_a_turn_without_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pair import launch
    from pair.errors import StateError

    monkeypatch.delenv("UNITMGR_RAY_WARM_SERVER")
    # The wait for the adopted claimant below to end (5 s), which it waits out: it never ends.
    monkeypatch.setattr(ray_warm, "EXIT_SECONDS", 0.5)
    from pair.state import read_marker
    from registry.processes import identify

    path = ray_warm.socket_path()
    assert path is not None
    state = tmp_path / "state"
    state.mkdir()
    log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        # Unclaimed: the marker goes, so a supervisor forked this late finds no turn to run.
        paths = _marker_of(state, None)
        thread, got = _fake_server(path, _proving_then_silent(lambda: None))
        with pytest.raises(OSError, match="did not answer"):
            launch._warm_supervisor(paths, 1, "task", "tok", log)
        thread.join(timeout=10)
        assert b'"token": "tok"' in got["request"]
        assert read_marker(paths) is None

        # Claimed by the time the CLI looks: that supervisor is the turn's and the marker
        # stays. Its name came from a file an executor can write: a missed start never kills
        # it, the turn stays in flight for `pair cancel` to prove and stop.
        path.unlink()
        claimant = subprocess.Popen(["sleep", "300"], cwd=state, start_new_session=True)
        try:
            identity = identify(claimant.pid)
            assert identity is not None
            paths = _marker_of(state, None)

            def claim() -> None:
                _marker_of(state, identity.to_json())

            thread, got = _fake_server(path, _proving_then_silent(claim))
            served = launch._warm_supervisor(paths, 1, "task", "tok", log)
            thread.join(timeout=10)
            assert served is not None and served.pid == claimant.pid
            assert served.poll() is None
            marker = read_marker(paths)
            assert marker is not None and marker.supervisor == identity.to_json()
            with pytest.raises(StateError, match="stays in flight") as refused:
                launch._stop_late_supervisor(paths, served, "tok")
            assert refused.value.next_step == "pair cancel"
            assert claimant.poll() is None
            assert read_marker(paths) is not None
        finally:
            claimant.kill()
            claimant.wait()

        # Claimed and already done (the marker released, the receipt written): its receipt is
        # the answer, not a failure to start.
        path.unlink()
        paths = _marker_of(state, None)

        def finish() -> None:
            paths.marker_file.unlink()
            receipt = paths.turn_file(1, "task", "-receipt.json")
            receipt.parent.mkdir(parents=True, exist_ok=True)
            receipt.write_text("{}")

        thread, got = _fake_server(path, _proving_then_silent(finish))
        done = launch._warm_supervisor(paths, 1, "task", "tok", log)
        thread.join(timeout=10)
        assert done is not None and done.poll() == 0
    finally:
        os.close(log)
