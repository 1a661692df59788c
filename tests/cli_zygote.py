"""A warm interpreter that runs `unit` and `pair` command lines for the tests, one fork each.

Every test drives the real CLIs, and each fresh interpreter pays Python's start-up plus the
imports of typer, rich, PyGithub and the product (0.1–0.5 s) before the command does anything:
across the suite that is most of its time. This server imports those once, then serves each
command line in a forked child that is set up exactly as the console script would be — its own
process, the caller's argv, environment, working directory and stdin/stdout/stderr (passed as
file descriptors, so a descendant that kept a pipe open still holds the caller up), the same
entry function (`unitmgr.entry:main`, `pair.entry:main`), the interpreter's exit sequence
(non-daemon threads joined, atexit run, streams flushed) and its real wait status (a SIGKILLed
command reads as -9). A test process may run two: one that also has PyGithub warm, for the
command lines that talk to GitHub, and one without it for every other (a smaller process forks
faster).

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
import contextlib
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
    "psutil",
    "tenacity",
    "unitmgr.entry",
    "unitmgr.cli",
    "pair.cli",
)
# PyGithub (with requests, urllib3 and the crypto it signs apps with) is half of a warm server's
# memory, ~28 of 56 MB, and a fork's cost grows with it (see `serve`): it is warm only in the
# server that runs the command lines which talk to GitHub (tests/cli_client.py chooses).
WARM_FOR_GITHUB = ("github",)
ENTRY_POINTS = {"unit": ("unitmgr.entry", "main"), "pair": ("pair.entry", "main")}
MAX_REQUEST = 1 << 20
RECEIVE_SECONDS = 2.0  # a client sends its request as it connects; one that does not is dropped


def warm(kind: str) -> None:
    import importlib
    import pkgutil

    for name in (*WARM_FOR_GITHUB, *WARM) if kind == "github" else WARM:
        importlib.import_module(name)
    for package in ("registry", "pair", "unitmgr"):
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue
            importlib.import_module(info.name)


def receive(connection: socket.socket) -> tuple[dict[str, object], list[int]]:
    """One request and its descriptors; on a broken one (cut short, not JSON, timed out) the
    descriptors it brought are closed, never left open in the server, and the error raised."""
    fds = array.array("i")
    chunks = []
    try:
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
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def exit_code(error: SystemExit) -> int:
    """The status the interpreter gives a `SystemExit` (None is 0, a message is 1)."""
    code = error.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def console_script_path(program: str, warm_path: list[str]) -> list[str]:
    """The `sys.path` a fresh `program` starts with: its own directory, then what this `-P`
    server has — PYTHONPATH's entries too (the server starts with the callers' settings), which
    replacing the first entry would drop (a warm Ray server's key covers `sys.path`)."""
    return [str(Path(program).parent), *warm_path]


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
    sys.path[:] = console_script_path(program, sys.path)
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


def start(connection: socket.socket, others: list[socket.socket | int]) -> int | None:
    """Read one command line from `connection` and fork its command; the command's pid, or None
    for a request that never came whole (its client went away)."""
    connection.settimeout(RECEIVE_SECONDS)  # a client sends its request as it connects
    try:
        request, fds = receive(connection)
    except (OSError, ValueError):
        return None
    pid = os.fork()
    if pid == 0:
        for other in others:  # the server's sockets and pidfds are not the command's
            if isinstance(other, int):
                os.close(other)
            else:
                other.close()
        connection.close()
        run_command(request, fds)
    for fd in fds:
        os.close(fd)
    return pid


def answer(connection: socket.socket, message: dict[str, int]) -> None:
    with contextlib.suppress(OSError):  # a client that timed out has gone: nothing to tell
        connection.sendall(json.dumps(message).encode() + b"\n")


def serve(path: str, kind: str) -> None:
    """Fork each command line's command straight from this process, one fork per command: a
    fork's cost grows with the process's resident memory (page tables, on this VM ~0.05 ms a MB,
    ~3 ms for the warm imports), so no second fork stands between the server and the command.
    Each command's exit is seen through its pidfd, never `waitpid(-1)` (which could take
    another command's status). `kind`: "github" also warms PyGithub."""
    warm(kind)
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
    running: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, its client's connection)
    while os.getppid() == parent:  # the test process went away: so do we
        readable, _, _ = select.select([listener, *running], [], [], 1.0)
        for ready in readable:
            if ready is listener:
                connection, _ = listener.accept()
                others: list[socket.socket | int] = [listener, *running]
                others += [client for _, client in running.values()]
                pid = start(connection, others)
                if pid is None:
                    connection.close()
                    continue
                running[os.pidfd_open(pid)] = (pid, connection)
                answer(connection, {"pid": pid})
                continue
            pid, connection = running.pop(ready)
            os.close(ready)
            _, status = os.waitpid(pid, 0)
            answer(connection, {"status": status})
            connection.close()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
