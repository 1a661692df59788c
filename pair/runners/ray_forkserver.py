"""A warm fork server for Ray turns' lead supervisors: `python -P -m pair.runners.ray_forkserver`.

A Ray turn's supervisor spends most of its start importing `ray` (references/benchmarks.md, "A
Ray turn beside a local one"). This per-user process imports it once (`ray_driver.defer()`
first, as the supervisor would) with `pair.supervisor` and the Ray runner; for each request it
forks a handler, and the handler forks the supervisor, which becomes one exactly as
`pair.launch` makes a forked one (`_become_supervisor`), with the requester's environment and
umask. The server never calls `ray.init` (a child forked from a connected driver hangs in its
own `ray.init`), starts no thread (after `import ray` the process has one OS thread, so a fork
copies no held lock) and holds no turn state: the supervisor re-verifies the marker's owner
token, the session's signature and the runner choice from files, as an exec'd one does.

Only the lead may ask (SPEC 8: an executor runs as the same user and can reach any socket of
ours). Both ends prove they hold a secret kept beside the signing keys (`registry.signing`,
`$XDG_STATE_HOME/unitmgr/keys`, which an executor cannot read: if it could, it could forge every
signature anyway) before the requester sends anything that matters, each proof an HMAC over
both nonces and both ends' pids as SO_PEERCRED reports them, and the answer's too — so neither
a process posing as the server nor one relaying between the two learns or names anything.
The socket is `ray-<key>.sock` in a private directory
(`$XDG_RUNTIME_DIR/unitmgr`, else `~/.cache/unitmgr/run`, 0700 and ours, or not used at all);
`key` is an HMAC under that secret over what the warm process baked in: the interpreter, its
`sys.path` and its directories' mtimes (an installed or removed package), the size and mtime
of every file of `pair` and `registry`, and every `RAY_*`/`PYTHON*` variable. A server exits
after `IDLE_SECONDS` without a request, on SIGTERM, or when its socket is removed; nothing
depends on it: with no answer the CLI starts one detached and runs its turn the cold way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

from pair.runners.ray_warm import (
    IDLE_SECONDS,
    MAX_REQUEST,
    REQUEST_SECONDS,
    _is_nonce,
    _nonce,
    _read_lines,
    _secret,
    answer_proof,
    hello_proof,
    peer,
    request_proof,
    socket_path,
)

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _valid(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    state_dir, seq, token = body.get("state_dir"), body.get("seq"), body.get("token")
    umask, environ = body.get("umask"), body.get("environ")
    return (
        isinstance(state_dir, str)
        and os.path.isabs(state_dir)
        and isinstance(seq, int)
        and not isinstance(seq, bool)
        and isinstance(token, str)
        and isinstance(umask, int)
        and not isinstance(umask, bool)
        and 0 <= umask <= 0o777
        and isinstance(environ, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in environ.items())
    )


def _handle(
    connection: socket.socket, secret: bytes, supervise: Any, added: dict[str, str]
) -> None:
    """In a handler forked per connection (a slow or hostile client holds up only itself): the
    proofs, then the supervisor forked and its identity answered — or a refusal."""
    import gc

    from pair.launch import _become_supervisor
    from registry.processes import _own_create_time
    from registry.signing import compare_digest

    deadline = time.monotonic() + REQUEST_SECONDS
    client, uid = peer(connection)
    if uid != os.getuid():
        return
    lines = _read_lines(connection, deadline, 64)
    if not lines or not _is_nonce(lines[0]):
        return
    # SO_PEERCRED names the process that listened (the server), not this handler.
    theirs, mine, me = lines[0], _nonce(), os.getppid()
    hello = {"nonce": mine.decode(), "proof": hello_proof(secret, theirs, mine, me, client)}
    connection.sendall(json.dumps(hello).encode() + b"\n")

    def answer(reply: dict[str, Any]) -> None:
        text = json.dumps(reply).encode()
        proof = answer_proof(secret, theirs, mine, text).encode()
        connection.sendall(text + b"\n" + proof + b"\n")

    fds: list[int] = []
    try:
        lines = _read_lines(connection, deadline, MAX_REQUEST + 66, 2, fds)
        data, proof = lines if lines else (b"", b"")
        expected = request_proof(secret, theirs, mine, me, client, data)
        proven = bool(data) and compare_digest(proof.decode("ascii", "replace"), expected)
        body: Any = json.loads(data) if proven else None
        if not _valid(body) or len(fds) != 1:
            answer({"refused": "not a proven, whole request"})
            return
        log_fd = fds.pop()
        gc.freeze()  # the child never collects (and so never closes) the server's objects
        pid = os.fork()
        if pid == 0:
            os.umask(body["umask"])
            environ = {**body["environ"], **added}
            state_dir = Path(body["state_dir"])
            _become_supervisor(supervise, state_dir, body["seq"], body["token"], log_fd, environ)
        os.close(log_fd)
        answer({"pid": pid, "create_time": _own_create_time(pid)})
    finally:
        for fd in fds:
            os.close(fd)


def serve(expected_key: str, idle: float = IDLE_SECONDS) -> int:
    """The server: bind this environment's socket (one server per key: an flock), warm up,
    then fork a handler per connection until idle, SIGTERM, or its socket is gone."""
    import fcntl

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its own session: only a kill stops it
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda number, _frame: stopping.append(number))
    secret = _secret()
    path = socket_path(secret=secret) if secret else None
    if secret is None or path is None or path.name != f"ray-{expected_key}.sock":
        # The caller's environment is not this interpreter's: serve nobody (said in its log).
        print(
            f"ray-forkserver: not serving {expected_key!r}: this process's key differs",
            file=sys.stderr,
        )
        return 2
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
        print(
            f"ray-forkserver: importing ray failed: {ray_driver._import['error']!r}",
            file=sys.stderr,
        )
        return 1
    added = {k: v for k, v in os.environ.items() if before.get(k) != v}
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead server's (we hold the key's lock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    inode = os.stat(path).st_ino
    last = time.monotonic()
    while not stopping:
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
        _fork_handler(connection, listener, secret, supervisor.supervise, added)
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
        _fork_handler(connection, listener, secret, supervisor.supervise, added)
    listener.close()
    return 0


def _fork_handler(
    connection: socket.socket,
    listener: socket.socket,
    secret: bytes,
    supervise: Any,
    added: dict[str, str],
) -> None:
    with connection:
        if os.fork() == 0:
            code = 1
            try:
                listener.close()
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                _handle(connection, secret, supervise, added)
                code = 0
            except BaseException:  # its client sees the connection close
                pass
            finally:
                os._exit(code)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


if __name__ == "__main__":
    arguments = sys.argv[1:]
    idle = float(arguments[2]) if len(arguments) > 2 and arguments[1] == "--idle" else IDLE_SECONDS
    sys.exit(serve(arguments[0] if arguments else "", idle))
