"""Start a turn's detached supervisor (`python -m pair _supervise ...`) and wait for its handshake.

The supervisor runs in its own session with stdin from /dev/null and stdout/stderr to the turn's
`-supervisor.log`, so nobody capturing the caller's output waits for it. This returns once the
partner has started (the running record) or the turn already ended (its receipt); it never
waits for a turn to finish.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pair.errors import StateError
from pair.paths import PairPaths
from pair.state import MarkerUnreadable, read_marker, read_receipt, release_owned_marker
from registry.processes import ProcessIdentity, identify, kill_tree
from registry.timeutil import seconds_from_env

HANDSHAKE_SECONDS = 10.0


def start_supervisor(
    paths: PairPaths, root: Path, seq: int, kind: str, token: str
) -> dict[str, Any]:
    log_file = paths.turn_file(seq, kind, "-supervisor.log")
    log_fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        supervisor = subprocess.Popen(
            [
                sys.executable,
                "-P",  # never import from the cwd: a worktree may hold its own `pair/` package
                "-m",
                "pair",
                "_supervise",
                "--state-dir",
                str(paths.state_dir),
                "--seq",
                str(seq),
                "--token",
                token,
            ],
            cwd=paths.state_dir,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,
        )
    except OSError as error:
        release_owned_marker(paths, token)
        raise StateError(
            "supervisor-failed",
            f"could not start the detached turn supervisor: {error}",
            next_step=f"fix the cause, then resend: pair send --repo {root} --kind {kind} "
            "--body-file FILE",
        ) from None
    finally:
        os.close(log_fd)
    receipt_file = paths.turn_file(seq, kind, "-receipt.json")
    handshake = seconds_from_env("UNITMGR_PAIR_HANDSHAKE_SECONDS", HANDSHAKE_SECONDS)
    deadline = time.monotonic() + handshake
    while True:
        if receipt_file.exists():
            # Finished (or failed to start) before the handshake: the receipt is the answer.
            receipt = read_receipt(receipt_file)
            if receipt and "unreadable" not in receipt:
                return receipt
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            marker = None
        if marker is not None and marker.owner_token == token and marker.partner:
            partner = ProcessIdentity.from_json(marker.partner)
            return {
                "ok": True,
                "status": "running",
                **_running_view(paths, seq, kind, supervisor.pid, partner.pid if partner else None),
            }
        if supervisor.poll() is not None and not receipt_file.exists():
            release_owned_marker(paths, token)
            raise StateError(
                "supervisor-failed",
                f"the detached supervisor pid {supervisor.pid} exited before startup — see "
                f"{log_file}",
                next_step=f"read {log_file}, then resend: pair send --repo {root} --kind {kind} "
                "--body-file FILE",
            )
        if time.monotonic() > deadline:
            _stop_late_supervisor(paths, supervisor, token)
            raise StateError(
                "supervisor-failed",
                f"the detached supervisor pid {supervisor.pid} did not start within "
                f"{handshake:g}s and was stopped — see {log_file}",
                detail={"seq": seq, "supervisor_pid": supervisor.pid},
                next_step=f"read {log_file}, then resend: pair send --repo {root} --kind {kind} "
                "--body-file FILE",
            )
        time.sleep(0.01)


def _stop_late_supervisor(
    paths: PairPaths, supervisor: subprocess.Popen[bytes], token: str
) -> None:
    """Kill a supervisor that missed its handshake, with its group and every descendant (a
    partner it may have started meanwhile), then release the marker: no orphan may run the turn
    later. It is our child and not yet reaped, so its pid cannot belong to anyone else."""
    found = identify(supervisor.pid, argv0="pair _supervise")
    if found is not None:
        # No grace: on SIGTERM a supervisor would still finish and write a receipt.
        kill_tree(
            ProcessIdentity(pid=found.pid, create_time=found.create_time, pgid=supervisor.pid),
            grace_seconds=0.0,
        )
    with contextlib.suppress(ProcessLookupError):
        supervisor.kill()
    supervisor.wait()
    release_owned_marker(paths, token)


def _running_view(
    paths: PairPaths, seq: int, kind: str, supervisor_pid: Any, partner_pid: Any
) -> dict[str, Any]:
    return {
        "seq": seq,
        "kind": kind,
        "supervisor_pid": supervisor_pid,
        "partner_pid": partner_pid,
        "transcript": str(paths.turn_file(seq, kind, ".log")),
        "prompt_file": str(paths.turn_file(seq, kind, "-prompt.md")),
        "reply_file": str(paths.turn_file(seq, kind, "-reply.md")),
        "receipt_file": str(paths.turn_file(seq, kind, "-receipt.json")),
    }
