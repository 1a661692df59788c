"""The warm fork server of Ray turns' lead supervisors (pair.runners.ray_forkserver; SPEC 7).

A second Ray turn's supervisor is forked by the server the first turn started (its parent is
the server) and its receipt has the cold turn's shape; a socket directory anyone else could
reach is not used; another environment's key is not served; garbage on the socket does not
crash the server; an idle server exits. Every test's servers live under its own
`XDG_RUNTIME_DIR` (tests/conftest.py stops them).
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

from pair.runners import ray_forkserver
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
            return ray_forkserver.peer(connection)[0]
    except OSError:
        return None


def _key() -> str:
    """This environment's key as a `-P` interpreter (the server's kind) computes it."""
    code = "from pair.runners import ray_forkserver as f; print(f.key())"
    return subprocess.check_output([sys.executable, "-P", "-c", code], cwd="/", text=True).strip()


def _start_server(key: str | None = None) -> Any:
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "pair.runners.ray_forkserver", key or _key()],
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
def test_the_second_ray_turn_is_forked_by_the_warm_server(on_ray: Harness) -> None:  # noqa: F811
    import psutil

    cold = _send(on_ray, "echo cold")
    assert cold["status"] == "replied", cold
    # The cold turn started a server for the next one; it answers once `ray` is imported.
    server = wait_until(_server_pid, timeout=60)
    path = _socket()
    assert path is not None
    assert psutil.Process(server).cmdline()[-2:] == ["pair.runners.ray_forkserver", path.stem[4:]]
    running = _send(on_ray, gated("echo warm", "echo after", on_ray.gate_file), "--background")
    assert running["status"] == "running", running
    supervisor = psutil.Process(running["supervisor_pid"])
    assert supervisor.ppid() == server  # forked by the warm server, not by the CLI
    assert supervisor.name() == "pair-supervise"
    assert os.getsid(supervisor.pid) == supervisor.pid  # its own session, as a cold one
    on_ray.open_gate()
    waited = on_ray.sandbox.pair("wait", "--timeout-min", "1")
    warm = waited.document
    assert warm is not None and warm["status"] == "replied", waited.stdout + waited.stderr
    assert warm["supervisor_pid"] == supervisor.pid
    assert sorted(warm) == sorted(cold)
    assert sorted(warm["runner"]) == sorted(cold["runner"])
    wait_until(lambda: gone(supervisor.pid), timeout=30)  # the server reaped it


def test_a_socket_directory_others_can_reach_is_not_used(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    (runtime / "unitmgr").mkdir(parents=True, mode=0o700)
    environ = {"XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path)}
    assert ray_forkserver.run_directory(environ) == runtime / "unitmgr"
    (runtime / "unitmgr").chmod(0o755)
    assert ray_forkserver.run_directory(environ) is None
    (runtime / "unitmgr").rmdir()
    (runtime / "unitmgr").symlink_to(tmp_path)
    assert ray_forkserver.run_directory(environ) is None


def test_no_request_goes_to_a_directory_others_can_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "unitmgr").mkdir(mode=0o777)
    (tmp_path / "unitmgr").chmod(0o777)
    log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        assert ray_forkserver.request(tmp_path, 1, "t", log) is None  # the turn goes cold
    finally:
        os.close(log)


def test_another_environments_key_is_not_served() -> None:
    assert ray_forkserver.key({"RAY_ADDRESS": "a"}) != ray_forkserver.key({"RAY_ADDRESS": "b"})
    assert ray_forkserver.key({"HOME": "x"}) == ray_forkserver.key({})
    assert ray_forkserver.key({"PYTHONBREAKPOINT": "0"}) == ray_forkserver.key({})
    # A server asked for a key its own interpreter does not have exits before importing Ray.
    stale = _start_server(key="0" * 16)
    assert stale.wait(timeout=30) == 2
    assert _server_pid() is None


def test_garbage_does_not_crash_the_server_and_an_idle_server_exits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UNITMGR_TEST_HOOKS", "1")
    monkeypatch.setenv("UNITMGR_TEST_RAY_FORKSERVER_IDLE_SECONDS", "3")
    server = _start_server()
    try:
        pid = wait_until(_server_pid, timeout=60)
        assert pid == server.pid
        path = _socket()
        assert path is not None
        for garbage in (b"garbage\n", b"\xff" * 70000, json.dumps({"seq": "x"}).encode() + b"\n"):
            answer = b""
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.connect(str(path))
                with contextlib.suppress(OSError):  # the server may close before reading it all
                    connection.sendall(garbage)
                    connection.shutdown(socket.SHUT_WR)
                    answer = connection.recv(100)
            assert answer == b""  # closed without an answer
        # A request without the log descriptor is refused too.
        log = os.open(os.devnull, os.O_WRONLY)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.connect(str(path))
                body = {"state_dir": "/nonexistent", "seq": 1, "token": "t", "environ": {}}
                socket.send_fds(connection, [json.dumps(body).encode()[:-1]], [log, log])
                connection.shutdown(socket.SHUT_WR)
                assert connection.recv(100) == b""
        finally:
            os.close(log)
        assert _server_pid() == server.pid  # still serving
        assert server.wait(timeout=30) == 0  # idle: it exits, and takes its socket with it
        assert not path.exists()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
