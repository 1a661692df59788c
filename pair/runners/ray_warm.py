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
CONNECT_SECONDS = 0.5  # the CLI's connect: past it (nothing sent), the turn goes cold
HELLO_SECONDS = 1.0  # the server's proof (a handler's fork first); past it, cold (~0.6 s more)
ANSWER_SECONDS = 5.0  # once sent, the server may have forked: the CLI waits for its answer
REQUEST_SECONDS = 1.0  # a handler's bound on reading one whole request
EXIT_SECONDS = 5.0  # how long waiting on a served supervisor waits for it to end
MAX_REQUEST = 1 << 20
SOCKET_PATH_MAX = 107  # sockaddr_un's sun_path, less its terminating NUL
SECRET_ID = "ray-forkserver"  # its file among the signing keys (registry.signing.LOCAL_SECRETS)
# Read when used, never baked in at start-up; `ray.init` sets it in the environment of a process
# that connected (`unit create`'s bootstrap), which would otherwise have a server of its own.
READ_WHEN_USED = frozenset({"PYTHONBREAKPOINT"})
# What the server's own environment keeps: what its imports and its socket's place read. The
# requester's whole environment (tokens included) goes only to the supervisor it asked for.
SERVER_ENVIRONMENT = ("RAY_", "PYTHON", "XDG_", "LC_")
SERVER_VARIABLES = frozenset({"HOME", "PATH", "LANG", "TMPDIR"})
# Never in the server's environment nor its key, whatever the prefix (a cluster's token: the
# server never connects, and each supervisor gets its requester's own).
SECRET_SUFFIXES = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIALS", "AUTH")
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
    """The lead's secret for this server (its key file made on first use, 0600), derived for
    this use alone: a MAC the handshake computes is never one a signature check accepts."""
    from registry.signing import Signer, hmac_sha256

    try:
        stored = Signer(SECRET_ID).key()
    except OSError:
        return None
    return bytes.fromhex(hmac_sha256(stored, b"unitmgr ray-forkserver handshake v1"))


def _nonce() -> bytes:
    return os.urandom(16).hex().encode()


def _is_nonce(value: object) -> bool:
    return (
        isinstance(value, bytes)
        and len(value) == 32
        and all(c in b"0123456789abcdef" for c in value)
    )


def _kept(name: str) -> bool:
    """Whether a variable is one the server keeps (and its key covers)."""
    if name.upper().endswith(SECRET_SUFFIXES):
        return False
    return name.startswith(SERVER_ENVIRONMENT) or name in SERVER_VARIABLES


def hello_proof(
    secret: bytes, client_nonce: bytes, server_nonce: bytes, server: int, client: int
) -> str:
    """The server's proof: both nonces and both ends' pids as the kernel reports them, so a
    relay between the two (it sees its own pid on each side) proves nothing to either."""
    return _mac(secret, b"server", client_nonce, server_nonce, b"%d" % server, b"%d" % client)


def request_proof(
    secret: bytes, client_nonce: bytes, server_nonce: bytes, server: int, client: int, data: bytes
) -> str:
    return _mac(secret, b"client", client_nonce, server_nonce, b"%d" % server, b"%d" % client, data)


def answer_proof(secret: bytes, client_nonce: bytes, server_nonce: bytes, answer: bytes) -> str:
    return _mac(secret, b"answer", client_nonce, server_nonce, answer)


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
            if k.startswith(("RAY_", "PYTHON")) and _kept(k) and k not in READ_WHEN_USED
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
    its identity (pid and start time, from the server's proven answer) and by where it runs
    (the turn's state directory, resolved now: a symlink swapped in later widens nothing).
    One `adopted` from the marker (a file an executor can write) is waited for, never killed."""

    def __init__(
        self, pid: int, create_time: float, state_dir: Path, *, adopted: bool = False
    ) -> None:
        from registry.processes import ProcessIdentity

        self.pid = pid
        self.adopted = adopted
        # A state dir reached through a symlink proves nothing: no place to kill in.
        real = os.path.realpath(state_dir)
        self.place = real if real == os.path.abspath(state_dir) and real != "/" else None
        self.identity = ProcessIdentity(pid=pid, create_time=create_time, pgid=pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        from registry.processes import is_alive

        if self.returncode is None and not is_alive(self.identity):
            self.returncode = -1  # gone: its exit status was its parent's to read
        return self.returncode

    def kill(self) -> None:
        """SIGKILL it, its group and its descendants — only while it is the recorded process,
        runs in the turn's state directory, and came from the server's own answer."""
        from registry.processes import kill_tree
        from registry.proof import Proof

        if self.poll() is None and not self.adopted and self.place is not None:
            kill_tree(self.identity, proof=Proof(cwd_within=(self.place,)), grace_seconds=0)

    def wait(self) -> int:
        from registry.processes import wait_gone

        if self.poll() is None:
            import psutil

            with contextlib.suppress(psutil.Error):
                wait_gone([psutil.Process(self.pid)], timeout_seconds=EXIT_SECONDS)
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
    mine = _nonce()
    me = os.getpid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.settimeout(CONNECT_SECONDS)
            connection.connect(str(path))
            server, uid = peer(connection)
            if uid != os.getuid():
                return None
            connection.sendall(mine + b"\n")
            lines = _read_lines(connection, time.monotonic() + HELLO_SECONDS, 256)
            hello = json.loads(lines[0]) if lines else None
            theirs = hello.get("nonce", "").encode() if isinstance(hello, dict) else b""
            if not _is_nonce(theirs):
                return None
            from registry.signing import compare_digest

            expected = hello_proof(secret, mine, theirs, server, me)
            if not compare_digest(str(hello.get("proof")), expected):  # type: ignore[union-attr]
                return None  # not our server, or not directly: it learns nothing
            proof = request_proof(secret, mine, theirs, server, me, data)
            message = data + b"\n" + proof.encode() + b"\n"
        except (OSError, ValueError):
            return None  # nothing of the request was sent
        # The server forks only for a whole, proven request: one whose last byte did not go
        # started nothing (a failure after it did is an unanswered request, below).
        sent = 0
        try:
            sent = socket.send_fds(connection, [message], [log_fd])
            while sent < len(message):
                sent += connection.send(message[sent:])
        except OSError:
            if sent < len(message):
                return None
        try:
            lines = _read_lines(connection, time.monotonic() + ANSWER_SECONDS, 4096, 2)
            if not lines:
                raise ValueError("no whole answer")
            answer, signed = lines
            if not compare_digest(
                signed.decode("ascii", "replace"), answer_proof(secret, mine, theirs, answer)
            ):
                raise ValueError("an answer without the server's proof")
            reply = json.loads(answer)
            if isinstance(reply, dict) and "refused" in reply:
                return None  # it forked nothing
            pid, create_time = reply["pid"], reply["create_time"]
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
    environ = {k: v for k, v in os.environ.items() if _kept(k)}
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
