"""The tests' side of tests/cli_zygote.py: run a `unit`/`pair` command line in a warm fork.

`run` answers like `subprocess.run([...], capture_output=True, text=True, timeout=...,
stdin=DEVNULL)` (with `input` bytes, stdin is a pipe a thread feeds instead): the same
`CompletedProcess` (stdout and stderr decoded with universal newlines), `TimeoutExpired` after
killing the command, and it returns only once both output pipes are closed — by the command and
by anything it left running — as `subprocess.run` does.
Up to two servers per test process (`server_kind`: PyGithub warm or not), each started on first
use and stopped at the end of the session.
Command lines it cannot serve faithfully (interpreter settings such as `PYTHON*` that differ
from the server's, another locale, `UNITMGR_TESTS_FRESH_CLI=1`, a program that is not the venv's
console script) run as a fresh process instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
SERVER = Path(__file__).with_name("cli_zygote.py")
# Read at import: the isolation fixture clears UNITMGR_* from every test's environment.
FRESH = os.environ.get("UNITMGR_TESTS_FRESH_CLI", "").strip() == "1"
# Settings a fresh interpreter reads at start-up, which a warm fork would not honour.
_STARTUP_SETTINGS = ("PYTHON", "LC_ALL", "LC_CTYPE")
# Per kind of warm server ("github", "plain"): the running server and its socket's directory.
_servers: dict[str, tuple[subprocess.Popen[str], str]] = {}
_settings: dict[str, str] | None = None
_starting = threading.Lock()


def _startup_settings(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key.startswith(_STARTUP_SETTINGS)}


def serves(program: str, env: dict[str, str]) -> bool:
    """Whether a warm fork would start exactly as a fresh console script would here."""
    if FRESH or program not in ("unit", "pair"):
        return False
    if shutil.which(program, path=env.get("PATH")) != str(VENV_BIN / program):
        return False
    if env.get("LANG", "C.UTF-8") not in ("C.UTF-8", "C.utf8"):
        return False
    return _settings is None or _startup_settings(env) == _settings


# The commands that always talk to GitHub; any other does when the test gave it a GitHub.
GITHUB_COMMANDS = frozenset({"intake", "merge", "feedback", "serve"})


def server_kind(program: str, argv: list[str], env: dict[str, str]) -> str:
    """Which warm server runs the command line: "github" (PyGithub warm: importing it costs a
    command ~0.25 s of CPU) when it may talk to GitHub, else "plain" (half the memory, so a
    cheaper fork). Only speed depends on it: a command that needs PyGithub imports it anyway."""
    if "GITHUB_API_URL" in env or (program == "unit" and GITHUB_COMMANDS.intersection(argv[:1])):
        return "github"
    return "plain"


def _socket_path(kind: str, env: dict[str, str]) -> str:
    # Tests run commands from several threads at once (concurrent creates): only one of them
    # may start a server, and none may read a socket path while another is replacing it.
    with _starting:
        return _started_socket_path(kind, env)


def _started_socket_path(kind: str, env: dict[str, str]) -> str:
    global _settings
    if kind in _servers and _servers[kind][0].poll() is None:
        return os.path.join(_servers[kind][1], "zygote.sock")
    socket_dir = tempfile.mkdtemp(prefix="unitmgr-zygote-")
    path = os.path.join(socket_dir, "zygote.sock")
    # The interpreter's own start-up settings (PYTHONDONTWRITEBYTECODE, ...) are the callers'.
    # (`serves` sends a server only the command lines whose settings match the first's.)
    _settings = _startup_settings(env)
    environment = {**_settings, "LANG": "C.UTF-8", "PATH": env.get("PATH", "")}
    server = subprocess.Popen(
        [sys.executable, "-P", str(SERVER), path, kind],
        cwd="/",
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    _servers[kind] = (server, socket_dir)
    assert server.stdout is not None
    if server.stdout.readline().strip() != "ready":
        raise RuntimeError("the CLI zygote did not start (run with UNITMGR_TESTS_FRESH_CLI=1)")
    return path


def stop() -> None:
    while _servers:
        _, (server, socket_dir) = _servers.popitem()
        server.kill()
        server.wait()
        shutil.rmtree(socket_dir, ignore_errors=True)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="strict").replace("\r\n", "\n").replace("\r", "\n")


def _read_message(connection: socket.socket, buffer: bytearray, deadline: float) -> dict | None:
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        connection.settimeout(remaining)
        try:
            data = connection.recv(4096)
        except TimeoutError:
            return None
        if not data:
            raise RuntimeError("the CLI zygote closed the connection")
        buffer += data
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    message: dict = json.loads(line)
    return message


def run_fresh(
    program: str,
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str] | None,
    timeout: float,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[str]:
    """The command line as its own fresh process: what `run` stands in for."""
    if input is None:
        return subprocess.run(
            [program, *argv],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    completed = subprocess.run(
        [program, *argv],
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
        env=env,
        input=input,
    )
    return subprocess.CompletedProcess(
        completed.args, completed.returncode, _decode(completed.stdout), _decode(completed.stderr)
    )


def _stdin(input: bytes | None) -> int:
    """The command's stdin: /dev/null, or a pipe a thread feeds `input` into and then closes
    (a command that stops reading early breaks the pipe, as it would a shell's)."""
    if input is None:
        return os.open(os.devnull, os.O_RDONLY)
    read_end, write_end = os.pipe()

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), open(write_end, "wb") as pipe:
            pipe.write(input)

    threading.Thread(target=feed, daemon=True).start()
    return read_end


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def run(
    program: str,
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[str]:
    deadline = time.monotonic() + timeout
    command = [program, *argv]
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    devnull = _stdin(input)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(_socket_path(server_kind(program, argv, env), env))
        request = {"program": str(VENV_BIN / program), "argv": argv, "cwd": str(cwd), "env": env}
        socket.send_fds(
            connection, [json.dumps(request).encode() + b"\n"], [devnull, out_write, err_write]
        )
    finally:
        for fd in (devnull, out_write, err_write):
            os.close(fd)
    buffer = bytearray()
    try:
        started = _read_message(connection, buffer, deadline)
        if started is None:
            raise subprocess.TimeoutExpired(command, timeout)
        pid = int(started["pid"])
        outputs = {out_read: bytearray(), err_read: bytearray()}
        open_fds = set(outputs)
        while open_fds:
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select(list(open_fds), [], [], max(remaining, 0))
            if not readable:
                _kill(pid)
                raise subprocess.TimeoutExpired(command, timeout)
            for fd in readable:
                data = os.read(fd, 65536)
                if data:
                    outputs[fd] += data
                else:
                    open_fds.discard(fd)
        finished = _read_message(connection, buffer, deadline)
        if finished is None:
            _kill(pid)
            raise subprocess.TimeoutExpired(command, timeout)
        code = os.waitstatus_to_exitcode(int(finished["status"]))
        return subprocess.CompletedProcess(
            command, code, _decode(outputs[out_read]), _decode(outputs[err_read])
        )
    finally:
        connection.close()
        os.close(out_read)
        os.close(err_read)
