"""A warm fork server for Ray turns' lead supervisors: `python -P -m pair.runners.ray_forkserver`.

A Ray turn's supervisor spends most of its start importing `ray` (references/benchmarks.md, "A
Ray turn beside a local one"). This per-user process imports it once (`ray_driver.defer()`
first, as the supervisor would) with `pair.supervisor` and the Ray runner, and then forks one
supervisor per request; the child becomes the supervisor exactly as `pair.launch` makes a forked
one (`_become_supervisor`), with the requesting CLI's environment. The server never calls
`ray.init` (a child forked from a connected driver hangs in its own `ray.init`), starts no
thread (after `import ray` the process has one OS thread, so a fork copies no held lock) and
holds no turn state: the child re-verifies the marker's owner token, the session's signature and
the runner choice from files, as an exec'd supervisor does; the server passes `state_dir`, `seq`
and `token` on and reads nothing else from a request but the environment.

Its socket is `ray-<key>.sock` in a private directory — `$XDG_RUNTIME_DIR/unitmgr`, else
`~/.cache/unitmgr/run`, 0700 and ours, or not used at all — outside anything an executor writes
(SPEC 8). `key` hashes what the warm process baked in: the interpreter, its `sys.path`, the
size and mtime of every file of `pair` and `registry`, and every `RAY_*`/`PYTHON*` variable; new
code or another environment is another server. A server exits after `IDLE_SECONDS` without a
request, or when its socket is removed; nothing depends on it: with no answer the CLI starts
one detached and runs its turn the cold way (`pair.launch`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

IDLE_SECONDS = 600.0
CONNECT_SECONDS = 0.5  # the CLI's connect and send: past it (nothing sent), the turn goes cold
ANSWER_SECONDS = 5.0  # once sent, the server may have forked: the CLI waits for its answer
REQUEST_SECONDS = 2.0  # the server's bound on one request
MAX_REQUEST = 1 << 20
SOCKET_PATH_MAX = 107  # sockaddr_un's sun_path, less its terminating NUL
# Read when used, never baked in at start-up; `ray.init` sets it in the environment of a process
# that connected (`unit create`'s bootstrap), which would otherwise have a server of its own.
READ_WHEN_USED = frozenset({"PYTHONBREAKPOINT"})
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def idle_seconds() -> float:
    """`IDLE_SECONDS`; SPEC 8's test hooks (`UNITMGR_TEST_HOOKS=1`) may shorten it with
    `UNITMGR_TEST_RAY_FORKSERVER_IDLE_SECONDS`."""
    if os.environ.get("UNITMGR_TEST_HOOKS") == "1":
        try:
            return float(os.environ.get("UNITMGR_TEST_RAY_FORKSERVER_IDLE_SECONDS", ""))
        except ValueError:
            pass
    return IDLE_SECONDS


def run_directory(environ: Any = os.environ) -> Path | None:
    """The private directory of the sockets, made 0700 if missing; None when it is not a real
    directory owned by us with no access for anyone else (then no server is used)."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        directory = Path(runtime) / "unitmgr"
    else:
        home = environ.get("HOME", "")
        if not home or not os.path.isabs(home):
            return None
        directory = Path(home) / ".cache" / "unitmgr" / "run"
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700)
        info = os.lstat(directory)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return directory


def _search_path() -> list[str]:
    """`sys.path` as a `-P` interpreter has it: without a first entry that is the caller's
    script's directory or its cwd (a console script, `python -m`, `-c`), and without entries that
    are no directory (they import nothing: the stdlib's absent zip)."""
    path = list(sys.path)
    if path and not sys.flags.safe_path:
        path = path[1:]
    elif path and sys.argv and path[0] == os.path.dirname(os.path.abspath(sys.argv[0] or ".")):
        path = path[1:]  # a `-P` process that put its script's directory back (the tests' CLI)
    return [entry for entry in path if os.path.isdir(entry)]


def key(environ: Any = os.environ) -> str:
    """A short hash of what a warm server baked in (see the module's docstring)."""
    import pair
    import registry

    digest = hashlib.blake2b(digest_size=8)
    parts: list[Any] = [sys.executable, _search_path()]
    for package in (pair, registry):
        root = Path(package.__file__ or "").parent
        for name in sorted(root.rglob("*.py")):
            with contextlib.suppress(OSError):
                info = name.stat()
                parts.append([str(name), info.st_size, info.st_mtime_ns])
    parts.append(
        sorted(
            (k, v)
            for k, v in environ.items()
            if k.startswith(("RAY_", "PYTHON")) and k not in READ_WHEN_USED
        )
    )
    digest.update(json.dumps(parts).encode())
    return digest.hexdigest()


def socket_path(environ: Any = os.environ) -> Path | None:
    directory = run_directory(environ)
    if directory is None:
        return None
    path = directory / f"ray-{key(environ)}.sock"
    return path if len(os.fsencode(path)) <= SOCKET_PATH_MAX else None


def peer(connection: socket.socket) -> tuple[int, int]:
    """The (pid, uid) of the other end of a Unix socket (SO_PEERCRED)."""
    pid, uid, _ = _CRED.unpack(
        connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    )
    return pid, uid


class Unanswered(Exception):
    """A request was sent and not answered: a supervisor may run, so none is started cold."""


class ServedSupervisor:
    """A supervisor the warm server forked: not our child, so its liveness and its kill go by
    its recorded identity (pid and start time), never by a pid alone."""

    def __init__(self, pid: int, create_time: float, server_pid: int) -> None:
        from registry.processes import ProcessIdentity

        self.pid = pid
        self.server_pid = server_pid
        self.identity = ProcessIdentity(pid=pid, create_time=create_time, pgid=pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        from registry.processes import is_alive

        if self.returncode is None and not is_alive(self.identity):
            self.returncode = -1  # gone: its exit status is the server's to reap
        return self.returncode

    def kill(self) -> None:
        """SIGKILL it, its group and its descendants — only while it is the recorded process
        and descends from the server that forked it."""
        from registry.processes import kill_tree
        from registry.proof import Proof

        if self.poll() is None:
            kill_tree(self.identity, proof=Proof(descends_from=(self.server_pid,)), grace_seconds=0)

    def wait(self) -> int:
        from registry.processes import wait_gone

        if self.poll() is None:
            import psutil

            with contextlib.suppress(psutil.Error):
                wait_gone([psutil.Process(self.pid)], timeout_seconds=5.0)
        return self.poll() or -1


def request(state_dir: Path, seq: int, token: str, log_fd: int) -> ServedSupervisor | None:
    """The supervisor a warm server forked for this turn, or None when nothing was sent (no
    server, a stranger's, no connection within `CONNECT_SECONDS`): then the caller starts it
    cold, and `spawn`s one. Raises `Unanswered` when the request went and no good answer came."""
    path = socket_path()
    if path is None:
        return None
    body = {"state_dir": str(state_dir), "seq": seq, "token": token, "environ": dict(os.environ)}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.settimeout(CONNECT_SECONDS)
            connection.connect(str(path))
            server_pid, uid = peer(connection)
            if uid != os.getuid():
                return None
            data = json.dumps(body).encode() + b"\n"
            sent = socket.send_fds(connection, [data], [log_fd])
            connection.sendall(data[sent:])
        except OSError:
            # The server forks only for a whole line: one that did not all go started nothing.
            return None
        try:
            connection.settimeout(ANSWER_SECONDS)
            answer = b""
            while not answer.endswith(b"\n") and len(answer) < 4096:
                chunk = connection.recv(4096)
                if not chunk:
                    break
                answer += chunk
            reply = json.loads(answer)
            pid, create_time = reply["pid"], reply["create_time"]
            if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
                raise ValueError(pid)
            if not isinstance(create_time, int | float):
                raise ValueError(create_time)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise Unanswered(f"the warm supervisor server did not answer: {error!r}") from None
    return ServedSupervisor(pid, float(create_time), server_pid)


def spawn() -> None:
    """Start a server for this environment, detached; never waits for it."""
    path = socket_path()
    if path is None:
        return
    with contextlib.suppress(OSError):
        # Its own errors (a traceback, if it dies) beside its socket, in the private directory.
        log = os.open(path.with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            subprocess.Popen(
                [sys.executable, "-P", "-m", "pair.runners.ray_forkserver", key()],
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        finally:
            os.close(log)


def stop(directory: Path) -> list[int]:
    """Stop every warm server whose socket is in `directory` (each is asked who it is: SO_PEERCRED
    names its pid and uid; only ours, only a process running this module, gets SIGTERM); their
    pids. Removing a socket also stops its server, within a second."""
    stopped = []
    for path in sorted(directory.glob("ray-*.sock")):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.settimeout(CONNECT_SECONDS)
                connection.connect(str(path))
                pid, uid = peer(connection)
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                ours = b"pair.runners.ray_forkserver" in cmdline.read()
            if uid == os.getuid() and ours:
                os.kill(pid, signal.SIGTERM)
                stopped.append(pid)
        except OSError:
            continue
    return stopped


def _read_request(connection: socket.socket) -> tuple[dict[str, Any], int] | None:
    """One request and its log descriptor, or None (malformed, too big, a stranger's)."""
    connection.settimeout(REQUEST_SECONDS)
    _, uid = peer(connection)
    data, fds, _, _ = socket.recv_fds(connection, 65536, 4)
    try:
        if uid != os.getuid() or len(fds) != 1:
            return None
        while data and not data.endswith(b"\n") and len(data) <= MAX_REQUEST:
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
        whole = data.endswith(b"\n") and len(data) <= MAX_REQUEST
        body = json.loads(data) if whole else None
        if not isinstance(body, dict):
            return None
        state_dir, seq, token = body.get("state_dir"), body.get("seq"), body.get("token")
        environ = body.get("environ")
        if not (
            isinstance(state_dir, str)
            and os.path.isabs(state_dir)
            and isinstance(seq, int)
            and not isinstance(seq, bool)
            and isinstance(token, str)
            and isinstance(environ, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in environ.items())
        ):
            return None
        log_fd = fds.pop()
        return body, log_fd
    except (ValueError, UnicodeDecodeError):
        return None
    finally:
        for fd in fds:
            os.close(fd)


def _serve_one(connection: socket.socket, supervise: Any, added: dict[str, str]) -> None:
    import gc

    from pair.launch import _become_supervisor
    from registry.processes import _own_create_time

    got = _read_request(connection)
    if got is None:
        return
    body, log_fd = got
    environ = {**body["environ"], **added}
    gc.freeze()  # the child never collects (and so never closes) the server's objects
    try:
        pid = os.fork()
        if pid == 0:
            _become_supervisor(
                supervise, Path(body["state_dir"]), body["seq"], body["token"], log_fd, environ
            )
    finally:
        gc.unfreeze()
        os.close(log_fd)
    answer = {"pid": pid, "create_time": _own_create_time(pid)}
    connection.sendall(json.dumps(answer).encode() + b"\n")


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def serve(expected_key: str) -> int:
    """The server: bind this environment's socket (one server per key: an flock), warm up,
    then fork a supervisor per request until idle or until its socket is gone."""
    import fcntl

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its own session: only a kill stops it
    path = socket_path()
    if path is None or path.name != f"ray-{expected_key}.sock":
        return 2  # the caller's environment is not this interpreter's: serve nobody
    lock = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server holds this key
    before = dict(os.environ)
    from pair import supervisor
    from pair.runners import ray as _ray_runner  # noqa: F401 (warm: the turn's driver side)
    from pair.runners import ray_driver

    ray_driver._import_ray()  # `defer()` and `import ray`, on this thread: no `ray.init`
    if "error" in ray_driver._import:
        return 1
    added = {k: v for k, v in os.environ.items() if before.get(k) != v}
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead server's (we hold the key's lock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    inode = os.stat(path).st_ino
    idle = idle_seconds()
    last = time.monotonic()
    while True:
        _reap()
        left = last + idle - time.monotonic()
        try:
            if left <= 0 or os.stat(path).st_ino != inode:
                break
        except OSError:
            break
        listener.settimeout(min(left, 1.0))
        try:
            connection, _ = listener.accept()
        except OSError:  # its timeout, too: look at the idle bound and the socket again
            continue
        last = time.monotonic()
        with connection, contextlib.suppress(Exception):
            _serve_one(connection, supervisor.supervise, added)
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == inode:
            path.unlink()
    # Whoever connected before the unlink is still answered: no sent request goes unanswered.
    listener.setblocking(False)
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            break
        with connection, contextlib.suppress(Exception):
            _serve_one(connection, supervisor.supervise, added)
    listener.close()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1] if len(sys.argv) > 1 else ""))
