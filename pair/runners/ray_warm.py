"""The lead's side of the warm Ray supervisor server (`pair.runners.ray_forkserver`): where its
socket is, the secret both ends prove, asking it for a turn's supervisor, starting and stopping
it, and the served supervisor's identity. See the server's docstring for the design; this
module never imports Ray and never runs a turn.
"""

from __future__ import annotations

import contextlib
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
CONNECT_SECONDS = 0.5  # the CLI's connect and the server's proof: past it (nothing sent), cold
ANSWER_SECONDS = 5.0  # once sent, the server may have forked: the CLI waits for its answer
REQUEST_SECONDS = 1.0  # a handler's bound on reading one whole request
MAX_REQUEST = 1 << 20
SOCKET_PATH_MAX = 107  # sockaddr_un's sun_path, less its terminating NUL
SECRET_ID = "ray-forkserver"  # its file among the signing keys (never a repository id's shape)
# Read when used, never baked in at start-up; `ray.init` sets it in the environment of a process
# that connected (`unit create`'s bootstrap), which would otherwise have a server of its own.
READ_WHEN_USED = frozenset({"PYTHONBREAKPOINT"})
# What the server's own environment keeps: what its imports and its socket's place read. The
# requester's whole environment (tokens included) goes only to the supervisor it asked for.
SERVER_ENVIRONMENT = ("RAY_", "PYTHON", "XDG_", "HOME", "PATH", "LANG", "LC_", "TMPDIR")
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


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


def _secret() -> bytes | None:
    """The lead's secret for this server (made on first use, 0600), or None if it cannot be."""
    from registry.signing import Signer

    try:
        return Signer(SECRET_ID).key()
    except OSError:
        return None


def _mac(secret: bytes, *parts: bytes) -> str:
    from registry.signing import hmac_sha256

    return hmac_sha256(secret, b"\n".join(parts))


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


def key(environ: Any = os.environ, secret: bytes | None = None) -> str:
    """A short keyed hash of what a warm server baked in (see the module's docstring)."""
    import pair
    import registry

    parts: list[Any] = [sys.executable]
    for entry in _search_path():
        with contextlib.suppress(OSError):
            parts.append([entry, os.stat(entry).st_mtime_ns])  # a package installed or removed
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
    secret = secret if secret is not None else (_secret() or b"")
    return _mac(secret, json.dumps(parts).encode())[:16]


def socket_path(environ: Any = os.environ, secret: bytes | None = None) -> Path | None:
    directory = run_directory(environ)
    if directory is None:
        return None
    path = directory / f"ray-{key(environ, secret)}.sock"
    return path if len(os.fsencode(path)) <= SOCKET_PATH_MAX else None


def peer(connection: socket.socket) -> tuple[int, int]:
    """The (pid, uid) of the other end of a Unix socket (SO_PEERCRED)."""
    pid, uid, _ = _CRED.unpack(
        connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
    )
    return pid, uid


def _read_lines(
    connection: socket.socket, deadline: float, limit: int, count: int = 1, fds: Any = None
) -> list[bytes] | None:
    """`count` lines (without their newlines) read by `deadline`, at most `limit` bytes in all,
    nothing after them; None if not. Descriptors passed with them go into the list `fds`."""
    data = b""
    while data.count(b"\n") < count:
        left = deadline - time.monotonic()
        if left <= 0 or len(data) > limit:
            return None
        connection.settimeout(left)
        if fds is None:
            chunk = connection.recv(65536)
        else:
            chunk, passed, _, _ = socket.recv_fds(connection, 65536, 4)
            fds.extend(passed)
        if not chunk:
            return None
        data += chunk
    if len(data) > limit or not data.endswith(b"\n") or data.count(b"\n") != count:
        return None
    return data[:-1].split(b"\n")


class Unanswered(Exception):
    """A request was sent and not answered: a supervisor may run, so none is started cold."""


class ServedSupervisor:
    """A supervisor the warm server forked: not our child, so its liveness and its kill go by
    its identity (pid and start time, from the server's answer or the marker it claimed) and
    by where it runs (the turn's state directory), never by a pid alone."""

    def __init__(self, pid: int, create_time: float, state_dir: Path) -> None:
        from registry.processes import ProcessIdentity

        self.pid = pid
        self.state_dir = state_dir
        self.identity = ProcessIdentity(pid=pid, create_time=create_time, pgid=pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        from registry.processes import is_alive

        if self.returncode is None and not is_alive(self.identity):
            self.returncode = -1  # gone: its exit status was its parent's to read
        return self.returncode

    def kill(self) -> None:
        """SIGKILL it, its group and its descendants — only while it is the recorded process
        and runs in the turn's state directory (where `_become_supervisor` put it)."""
        from registry.processes import kill_tree
        from registry.proof import Proof

        if self.poll() is None:
            proof = Proof(cwd_within=(os.path.realpath(self.state_dir),))
            kill_tree(self.identity, proof=proof, grace_seconds=0)

    def wait(self) -> int:
        from registry.processes import wait_gone

        if self.poll() is None:
            import psutil

            with contextlib.suppress(psutil.Error):
                wait_gone([psutil.Process(self.pid)], timeout_seconds=5.0)
        return self.poll() or -1


def request(
    state_dir: Path, seq: int, token: str, log_fd: int, *, path: Path | None = None
) -> ServedSupervisor | None:
    """The supervisor a warm server forked for this turn, or None when nothing was sent (no
    server, a stranger's, no proof, a refusal): then the caller starts it cold, and `spawn`s
    one. Raises `Unanswered` when the request went and no answer came. `path`: the socket to
    ask, when not this environment's own."""
    secret = _secret()
    path = path or (socket_path(secret=secret) if secret else None)
    if secret is None or path is None:
        return None
    body = {
        "state_dir": str(state_dir),
        "seq": seq,
        "token": token,
        "umask": _umask(),
        "environ": dict(os.environ),
    }
    data = json.dumps(body).encode()
    if len(data) > MAX_REQUEST:
        return None
    mine = os.urandom(16).hex().encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.settimeout(CONNECT_SECONDS)
            connection.connect(str(path))
            if peer(connection)[1] != os.getuid():
                return None
            connection.sendall(mine + b"\n")
            lines = _read_lines(connection, time.monotonic() + CONNECT_SECONDS, 256)
            hello = json.loads(lines[0]) if lines else None
            if not isinstance(hello, dict) or not isinstance(hello.get("nonce"), str):
                return None
            from registry.signing import compare_digest

            if not compare_digest(str(hello.get("proof")), _mac(secret, b"server", mine)):
                return None  # not our server: it learns nothing
            theirs = hello["nonce"].encode()
            message = data + b"\n" + _mac(secret, b"client", theirs, data).encode() + b"\n"
            sent = socket.send_fds(connection, [message], [log_fd])
            connection.sendall(message[sent:])
        except (OSError, ValueError):
            # The server forks only for a whole, proven request: one that did not all go
            # started nothing.
            return None
        try:
            lines = _read_lines(connection, time.monotonic() + ANSWER_SECONDS, 4096)
            reply = json.loads(lines[0]) if lines else None
            if isinstance(reply, dict) and "refused" in reply:
                return None  # it forked nothing
            pid, create_time = reply["pid"], reply["create_time"]  # type: ignore[index]
            if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
                raise ValueError(pid)
            if not isinstance(create_time, int | float) or isinstance(create_time, bool):
                raise ValueError(create_time)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise Unanswered(f"the warm supervisor server did not answer: {error!r}") from None
    return ServedSupervisor(pid, float(create_time), state_dir)


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def spawn() -> None:
    """Start a server for this environment, detached, with only what its imports read in its
    environment; never waits for it."""
    path = socket_path()
    if path is None:
        return
    environ = {k: v for k, v in os.environ.items() if k.startswith(SERVER_ENVIRONMENT)}
    with contextlib.suppress(OSError):
        # Its own errors (a traceback, if it dies) beside its socket, in the private directory.
        log = os.open(path.with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            subprocess.Popen(
                [sys.executable, "-P", "-m", "pair.runners.ray_forkserver", path.stem[4:]],
                cwd="/",
                env=environ,
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
