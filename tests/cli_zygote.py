"""A warm interpreter that runs `unit` and `pair` command lines for the tests, one fork each.

Every test drives the real CLIs, and each fresh interpreter pays Python's start-up plus the
imports of typer, rich, PyGithub and the product (0.1–0.5 s) before the command does anything:
across the suite that is most of its time. This server imports those once, then serves each
command line in a forked child that is set up exactly as the console script would be — its own
process, the caller's argv, environment, working directory and stdin/stdout/stderr (passed as
file descriptors, so a descendant that kept a pipe open still holds the caller up), the same
entry function (`unitmgr.entry:main`, `pair.cli:main`), the interpreter's exit sequence (non-daemon
threads joined, atexit run, streams flushed) and its real wait status (a SIGKILLed command reads
as -9).

It must not run a command in the server itself (every command starts from the same pristine
import state), and it imports nothing a command reads the environment for at import time (the
product reads its settings when a command runs; tests/test_cli_zygote.py checks the equivalence).
`UNITMGR_TESTS_FRESH_CLI=1` makes the suite start a fresh console script for every call instead.

Protocol (one connection per command line, on a Unix socket): the client sends one JSON request
`{"program", "argv", "cwd", "env"}` with three file descriptors (stdin, stdout, stderr); the
server answers `{"pid": N}` once the command is running and `{"status": S}` (a wait status,
`os.waitstatus_to_exitcode`) once it is done.
"""

from __future__ import annotations

import array
import atexit
import io
import json
import os
import select
import socket
import sys
import threading
from pathlib import Path

# Heavy third-party libraries first, then the product's modules, so that every fork starts warm.
WARM = (
    "typer",
    "rich",
    "rich.console",
    "rich.table",
    "github",
    "psutil",
    "tenacity",
    "unitmgr.entry",
    "unitmgr.cli",
    "pair.cli",
)
ENTRY_POINTS = {"unit": ("unitmgr.entry", "main"), "pair": ("pair.entry", "main")}
MAX_REQUEST = 1 << 20


def warm() -> None:
    import importlib
    import pkgutil

    for name in WARM:
        importlib.import_module(name)
    for package in ("registry", "pair", "unitmgr"):
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)


def receive(connection: socket.socket) -> tuple[dict[str, object], list[int]]:
    fds = array.array("i")
    chunks = []
    while True:
        data, ancdata, _flags, _address = connection.recvmsg(
            MAX_REQUEST, socket.CMSG_LEN(3 * fds.itemsize)
        )
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
        if not data:
            break
        chunks.append(data)
        if data.endswith(b"\n"):
            break
    return json.loads(b"".join(chunks)), list(fds)


def exit_code(error: SystemExit) -> int:
    """The status the interpreter gives a `SystemExit` (None is 0, a message is 1)."""
    code = error.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_command(request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: become the console script, run it, exit as the interpreter would."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(request["cwd"]))
    environment = request["env"]
    assert isinstance(environment, dict)
    os.environ.clear()
    os.environ.update({str(key): str(value) for key, value in environment.items()})
    program = str(request["program"])
    argv = request["argv"]
    assert isinstance(argv, list)
    sys.argv = [program, *(str(arg) for arg in argv)]
    sys.path[0] = str(Path(program).parent)  # a console script's own directory
    # The standard streams a fresh interpreter opens (PYTHONUNBUFFERED: written through).
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), "utf-8")
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
        encoding="utf-8",
        write_through=unbuffered,
    )
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
        write_through=unbuffered,
    )
    module_name, function_name = ENTRY_POINTS[Path(program).name]
    code = 1
    try:
        entry = getattr(sys.modules[module_name], function_name)
        code = exit_code(SystemExit(entry()))
    except SystemExit as error:
        code = exit_code(error)
    except BaseException:  # an uncaught error: the interpreter prints it and exits 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            threading._shutdown()  # type: ignore[attr-defined]  # joins non-daemon threads
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def handle(connection: socket.socket, listener: socket.socket) -> None:
    """In a forked handler: start the command as our child, report its pid, then its status."""
    listener.close()
    request, fds = receive(connection)
    pid = os.fork()
    if pid == 0:
        connection.close()
        run_command(request, fds)
    for fd in fds:
        os.close(fd)
    connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    connection.sendall(json.dumps({"status": status}).encode() + b"\n")
    connection.close()


def serve(path: str) -> None:
    warm()
    import gc

    # The warm imports move to the permanent generation: a command's collections never walk
    # them, so its fork does not copy every page they sit on (measured: 25 -> 20 ms of CPU and
    # 29 -> 19 ms of wall time per `unit list`).
    gc.collect()
    gc.freeze()
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while os.getppid() == parent:  # the test process went away: so do we
        readable, _, _ = select.select([listener], [], [], 1.0)
        while True:  # reap finished handlers
            try:
                finished, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if finished == 0:
                break
        if not readable:
            continue
        connection, _ = listener.accept()
        if os.fork() == 0:
            try:
                handle(connection, listener)
            finally:
                os._exit(0)
        connection.close()


if __name__ == "__main__":
    serve(sys.argv[1])
