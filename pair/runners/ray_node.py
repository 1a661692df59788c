"""The node side of the Ray runner (SPEC 4.3): one detached actor per unit, and its watchdog.

`UnitActor` lives on the unit's node (pinned by a custom resource) and holds the node's own
copy of the unit's worktree under `$UNITMGR_NODE_ROOT` (default `$XDG_STATE_HOME/unitmgr/nodes`).
`start` takes the lease epoch (refusing one it has passed, and stopping an older turn it still
runs; epoch 0 is a new session's bootstrap, started only on a fresh actor), fetches the base
commit from a git bundle the lead put in the object store when the copy lacks it (the copy is
kept between turns: a warm one needs none, and a bundle carries only what the copy's refs do not
reach), resets the copy to it and runs the turn in a thread with the same turn code the local
supervisor runs (`pair.turn.run_turn`: budgets, hang kill, redaction). `poll` hands back the
transcript from a byte offset and, once the turn is over, its result: the outcome, a bundle of
the commits it made on top of the base, and the paths it left uncommitted. Nothing here depends
on the lead's process: a lead supervisor that dies and comes back finds the turn by its epoch.

The watchdog (`python -m pair.runners.ray_node watchdog ...`) runs in its own session beside
each turn: when the actor's process is gone (its worker or its raylet killed) it kills every
process carrying the turn's token within a second — Ray's own subreaper was measured not to
reach a turn started in its own session. It is armed before the partner starts (a node killed
in the moment after a partner's start would otherwise take the watchdog's launcher with it and
leave the turn running), and learns the partner's process group through a pipe from the actor,
whose end of file — the actor gone — wakes it at once.

`ray` is imported here only by the lead's `pair.runners.ray`, which wraps `UnitActor` as a
remote class; this module imports no `ray` itself, so the watchdog starts fast.

Over 400 lines because the node's side is one actor's state — the epoch, the copy and its base,
the running turn, its polls, cancel and retirement — and its watchdog is one protocol with the
turn (the watchdog's arguments, its pipe and its `done` file are written by the one and read by
the other) that must live in this Ray-free module to start fast beside each turn.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

WATCHDOG_POLL_SECONDS = 0.5
WATCHDOG_START_SECONDS = 30.0  # its launcher's interpreter start, on a node under load
POLL_WAIT_SECONDS = 1.0  # the longest a poll holds its answer back for news
POLL_STEP_SECONDS = 0.01
BRANCH = "unitmgr-node"
BASE_REF = "refs/unitmgr/base"
OUT_REF = "refs/unitmgr/out"


def node_root() -> Path:
    explicit = os.environ.get("UNITMGR_NODE_ROOT")
    if explicit:
        return Path(explicit)
    from registry.userdirs import state_home

    return state_home() / "nodes"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]


class NodeTurn:
    """One turn running on this node, in a thread of the actor."""

    def __init__(self, epoch: int, token: str, spec: dict[str, Any], home: Path) -> None:
        self.epoch, self.token, self.spec, self.home = epoch, token, spec, home
        self.state_dir = home / "pair"
        self.transcript = self.state_dir / f"{epoch:04d}-{spec['kind']}.log"
        self.cancel_reason: str | None = None
        self.partner: dict[str, Any] | None = None
        self.result: dict[str, Any] | None = None
        self.watchdog_pipe: int | None = None  # the actor's end: the partner's pgid goes in
        self.done_file = self.state_dir / f"{epoch:04d}-watchdog.done"
        self.thread = threading.Thread(target=self._run, name=f"turn-{epoch}", daemon=True)

    @property
    def clone(self) -> Path:
        return self.home / "worktree"

    def _run(self) -> None:
        try:
            self.result = self._turn()
        except Exception as error:  # the result must exist whatever happened
            self.result = {
                "status": "failed",
                "reason": f"node error: {type(error).__name__}: {error}",
                "bundle": None,
                "head": None,
                "uncommitted": [],
                "leftovers": [],
            }
        finally:
            self._stop_watchdog()

    def _turn(self) -> dict[str, Any]:
        from pair import git as pair_git
        from pair.environment import partner_environment, session_variables
        from pair.partners import adapter_for
        from pair.partners.base import TurnRequest
        from pair.proof import TURN_TOKEN_VARIABLE, turn_environment
        from pair.turn import Budgets, run_turn
        from registry.processes import ProcessIdentity, reap_processes_marked

        spec = self.spec
        prompt = self.state_dir / f"{self.epoch:04d}-{spec['kind']}-prompt.md"
        prompt.write_text(spec["prompt"], encoding="utf-8")
        request = TurnRequest(
            partner=spec["partner"],
            sid=spec["sid"],
            seq=self.epoch,
            kind=spec["kind"],
            write=spec["write"],
            model=spec["model"],
            effort=spec["effort"],
            worktree=self.clone,
            prompt_file=prompt,
            reply_file=self.state_dir / f"{self.epoch:04d}-{spec['kind']}-reply.md",
            bootstrap=bool(spec.get("bootstrap")),  # `pair init`'s turn 0: creates the session
            partner_bin=None,  # the node's own CLI: the lead's path means nothing here
        )
        environment = partner_environment(codex_home=None)  # the node's own, never the lead's
        environment.update(session_variables(spec.get("environment")))
        environment.update(turn_environment(self.state_dir, self.token))
        if spec.get("unit"):
            environment["UNITMGR_UNIT"] = spec["unit"]

        def started(identity: ProcessIdentity) -> None:
            self.partner = identity.to_json()
            if self.watchdog_pipe is not None:
                with contextlib.suppress(OSError):
                    os.write(self.watchdog_pipe, f"{identity.pgid or identity.pid}\n".encode())

        self._start_watchdog()  # armed before the partner exists: nothing of it runs unwatched
        try:
            result = run_turn(
                adapter_for(spec["partner"]),
                request,
                transcript=self.transcript,
                budgets=Budgets(spec["idle_seconds"], spec["total_seconds"]),
                environment=environment,
                on_partner_start=started,
                stop_requested=lambda: self.cancel_reason,
            )
        finally:
            escaped = reap_processes_marked(TURN_TOKEN_VARIABLE, self.token)
        known = {item.get("pid") for item in result.leftovers}
        leftovers = [*result.leftovers, *(i for i in escaped if i["pid"] not in known)]
        head = pair_git.rev(self.clone, "HEAD")
        data: bytes | None = None
        base = spec["base_commit"]
        if head and head != base and base and pair_git.is_ancestor(base, head, self.clone):
            pair_git.set_ref(self.clone, OUT_REF, head)
            with tempfile.TemporaryDirectory() as scratch:
                out = Path(scratch) / "out.bundle"
                if pair_git.bundle(self.clone, out, OUT_REF, base):
                    data = out.read_bytes()
        outcome = result.outcome
        return {
            "status": outcome.status,
            "reason": outcome.reason,
            "reply": outcome.reply,
            "sid": outcome.sid,
            "extra": dict(outcome.extra),  # e.g. the model a bootstrap's CLI reports
            "exit_code": result.exit_code,
            "seconds": result.seconds,
            "command": result.command,
            "partial_reply": result.partial_reply,
            "throttle_signals": result.throttle_signals,
            "leftovers": leftovers,
            "head": head,
            "bundle": data,
            "diverged": bool(head and base and head != base and data is None),
            "uncommitted": pair_git.uncommitted_paths(self.clone),
        }

    def _start_watchdog(self) -> None:
        """Start the watchdog and wait for its launcher to exit: by then the watchdog itself has
        forked away from this worker into its own session, so nothing the node's loss takes
        with the worker can take the watchdog too. A watchdog that cannot start fails the
        turn before its partner runs."""
        import psutil

        me = psutil.Process()
        reader, writer = os.pipe()  # not inherited by the partner: Python's fds are non-inheritable
        launcher = subprocess.Popen(
            [
                sys.executable,
                "-P",
                "-m",
                "pair.runners.ray_node",
                "watchdog",
                str(me.pid),
                repr(me.create_time()),
                self.token,
                str(self.done_file),
            ],
            stdin=reader,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        os.close(reader)
        try:
            armed = launcher.wait(timeout=WATCHDOG_START_SECONDS) == 0
        except subprocess.TimeoutExpired:
            launcher.kill()
            armed = False
        if not armed:
            os.close(writer)
            raise RuntimeError("the turn's watchdog did not start: no partner runs unwatched")
        self.watchdog_pipe = writer

    def _stop_watchdog(self) -> None:
        with contextlib.suppress(OSError):
            self.done_file.write_text("done\n")  # before the pipe closes: an end, not a loss
        if self.watchdog_pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self.watchdog_pipe)
            self.watchdog_pipe = None

    def chunk(self, offset: int, limit: int) -> bytes:
        try:
            with open(self.transcript, "rb") as handle:
                handle.seek(offset)
                return handle.read(limit)
        except FileNotFoundError:
            return b""


class UnitActor:
    """The unit's actor on its node (wrapped by `ray.remote` on the lead's side)."""

    def __init__(self, name: str, resource: str) -> None:
        self.name, self.resource = name, resource
        self.home = node_root() / _safe(name)
        self.epoch = 0
        self.turn: NodeTurn | None = None
        self.lock = threading.Lock()

    def hello(self) -> dict[str, Any]:
        """Where this actor runs, as its node says: the Ray node id, host and pid, and the
        directory of its copy (under the node's own `UNITMGR_NODE_ROOT`)."""
        import socket

        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "resource": self.resource,
            "epoch": self.epoch,
            **self._where(),
        }

    def _where(self) -> dict[str, Any]:
        """The Ray node id (in a Ray worker; None for the class used without Ray, which must
        not auto-start a cluster) and the copy's directory."""
        ray = sys.modules.get("ray")  # in a Ray worker: imported (the watchdog never gets here)
        node_id = None
        if ray is not None and ray.is_initialized():
            node_id = ray.get_runtime_context().get_node_id()
        return {"node_id": node_id, "home": str(self.home)}

    def has(self, sha: str) -> bool:
        """Whether the node's copy already holds commit `sha` (then no bundle is needed)."""
        from pair import git as pair_git

        clone = self.home / "worktree"
        return (clone / ".git").is_dir() and pair_git.rev(clone, sha) == sha

    def holds(self, limit: int = 64) -> list[str]:
        """The commits the node's copy's branches and `refs/unitmgr/*` point at (a delta
        bundle's basis: what the lead need not send)."""
        from pair import git as pair_git

        clone = self.home / "worktree"
        return pair_git.ref_commits(clone, limit) if (clone / ".git").is_dir() else []

    def start(
        self,
        epoch: int,
        token: str,
        spec: dict[str, Any],
        base_bundle: bytes | None,
        attach: bool = False,
        resource: str | None = None,
    ) -> dict[str, Any]:
        """Start turn `epoch` (idempotent for the same epoch and token: a re-attaching lead,
        `attach`, only finds it — a turn this actor never ran is not started late).

        `{moved}` when this actor sits on another resource than `resource` (the lead rebuilds
        it); `{need_base, holds}` — nothing started, the epoch not taken — when the copy lacks
        the base commit and no bundle came: the lead sends one without what `holds` reach."""
        if resource is not None and resource != self.resource:
            return {"moved": self.resource}
        with self.lock:
            if self.turn is not None and self.turn.epoch == epoch:
                if self.turn.token != token:
                    return {"refused": f"epoch {epoch} runs under another token"}
                return {"started": True, "again": True, **self._where()}
            if attach:
                return {"lost": f"this node's actor never ran epoch {epoch} (at {self.epoch})"}
            fresh = epoch == 0 and self.turn is None  # a new session's bootstrap, on a new actor
            if epoch <= self.epoch and not fresh:
                return {"refused": f"epoch {epoch} is stale: this node is at epoch {self.epoch}"}
            base = spec.get("base_commit")
            if base and not base_bundle and not self.has(base):
                return {"need_base": True, "holds": self.holds()}
            if self.turn is not None and self.turn.thread.is_alive():
                self._stop(self.turn, "a newer epoch started")
            self.epoch = epoch
            turn = NodeTurn(epoch, token, spec, self.home)
            self._prepare(turn, base_bundle)
            self.turn = turn
            turn.thread.start()
            return {"started": True, "again": False, **self._where()}

    def _prepare(self, turn: NodeTurn, base_bundle: bytes | None) -> None:
        from pair import git as pair_git
        from registry.atomic import ensure_private_dir

        ensure_private_dir(turn.state_dir)
        clone = turn.clone
        if not (clone / ".git").is_dir():
            pair_git.init_repository(clone)
        base = turn.spec["base_commit"]
        if base_bundle:
            with tempfile.TemporaryDirectory() as scratch:
                path = Path(scratch) / "base.bundle"
                path.write_bytes(base_bundle)
                pair_git.fetch_bundle(clone, path, BASE_REF, BASE_REF)
        if base:
            # The lead's branch is the truth: what a lost turn left here unbundled is gone.
            pair_git.reset_to(clone, base, BRANCH)

    def poll(
        self, epoch: int, offset: int, limit: int = 1024 * 1024, wait: float = 0.0
    ) -> dict[str, Any]:
        """The transcript from `offset`, the partner, and once the turn is over its result —
        answered as soon as there is news (bytes, the partner, the end), else after `wait`
        seconds (at most `POLL_WAIT_SECONDS`): the lead learns of an end at once, not a poll
        interval later."""
        turn = self.turn
        if turn is None or turn.epoch != epoch:
            return {"epoch": self.epoch, "unknown": True}
        import time

        deadline = time.monotonic() + min(max(wait, 0.0), POLL_WAIT_SECONDS)
        partner = turn.partner
        while True:
            done = not turn.thread.is_alive() and turn.result is not None
            data = turn.chunk(offset, limit)
            if data or done or turn.partner is not partner or time.monotonic() >= deadline:
                break
            turn.thread.join(POLL_STEP_SECONDS)  # returns at once when the turn ends
        answer: dict[str, Any] = {"epoch": epoch, "data": data, "partner": turn.partner}
        if done and len(data) < limit:
            answer["result"] = turn.result
        return answer

    def cancel(self, epoch: int, reason: str, wait_seconds: float = 20.0) -> dict[str, Any]:
        """Stop turn `epoch` and answer once its processes are dead (`dead`), or not."""
        turn = self.turn
        if turn is None or turn.epoch != epoch:
            return {"dead": True, "unknown_epoch": True}
        return {"dead": self._stop(turn, reason, wait_seconds)}

    def _stop(self, turn: NodeTurn, reason: str, wait_seconds: float = 20.0) -> bool:
        turn.cancel_reason = reason
        turn.thread.join(wait_seconds)
        return not turn.thread.is_alive()

    def stop(self, epoch: int, reason: str = "reaped by the lead") -> dict[str, Any]:
        """`reap` (`pair clear`): stop what of turn `epoch` still runs here and say, from this
        node, whether anything of it is left: `{dead, stopped, epoch, pgid}` — `dead` only when
        the turn's thread has ended and no process of the partner's group is left here
        (`stopped`: it was running and this call ended it). A turn this actor never ran (an
        `epoch` it does not hold) has nothing here: dead."""
        from registry.processes import group_members

        turn = self.turn
        if turn is None or turn.epoch != epoch:
            return {"dead": True, "stopped": False, "epoch": self.epoch, "pgid": None}
        running = turn.thread.is_alive()
        ended = not running or self._stop(turn, reason)
        partner = turn.partner or {}
        pgid = partner.get("pgid") or partner.get("pid")
        left = group_members(int(pgid)) if isinstance(pgid, int) and pgid > 1 else []
        return {"dead": ended and not left, "stopped": running, "epoch": epoch, "pgid": pgid}

    def retire(self) -> dict[str, Any]:
        """The unit's session is ending: stop what still runs here and remove the node's copy
        (the lead then kills this actor)."""
        import shutil

        turn = self.turn
        stopped = turn is None or not turn.thread.is_alive() or self._stop(turn, "retired")
        shutil.rmtree(self.home, ignore_errors=True)
        return {"stopped": stopped, "removed": not self.home.exists()}


# -- the watchdog ------------------------------------------------------------------------------


def watchdog(actor_pid: int, actor_created: float, token: str, done: Path) -> int:
    """Kill the turn's processes once the actor's process is gone; exit once `done` exists.

    It runs as a grandchild of the actor's worker, reparented away from it: Ray kills a dying
    worker's direct children, which would take the watchdog with it (measured). So it forks
    first, before its imports: the launcher's exit is what the actor waits for. Its stdin is the
    actor's pipe: the partner's process group arrives as a line, and end of file without `done`
    means the actor is gone (checked again by pid, at least every poll)."""
    if os.fork():
        os._exit(0)  # the launcher: its child is nobody's child but init's (or a subreaper's)
    os.setsid()
    import select

    import psutil

    from pair.proof import TURN_TOKEN_VARIABLE
    from registry.processes import reap_processes_marked

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pgid: int | None = None
    pending = b""
    open_pipe = True
    while not stop.is_set() and not done.exists():
        if open_pipe:
            readable, _, _ = select.select([0], [], [], WATCHDOG_POLL_SECONDS)
            if readable:
                data = os.read(0, 64)
                open_pipe = bool(data)
                pending = (pending + data)[-64:]
                if pending.strip().isdigit():
                    pgid = int(pending.strip())
        elif stop.wait(WATCHDOG_POLL_SECONDS):
            break
        if done.exists():
            break
        try:
            alive = (
                open_pipe and abs(psutil.Process(actor_pid).create_time() - actor_created) < 0.01
            )
            alive = alive and psutil.Process(actor_pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        if not alive:
            if pgid is not None and pgid > 1:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
            reap_processes_marked(TURN_TOKEN_VARIABLE, token, grace_seconds=0.0)
            return 0
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["watchdog"] and len(argv) == 5:
        return watchdog(int(argv[1]), float(argv[2]), argv[3], Path(argv[4]))
    print(
        "usage: python -m pair.runners.ray_node watchdog PID CREATED TOKEN DONE",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":  # pragma: no cover (the watchdog's own process)
    sys.exit(main(sys.argv[1:]))
