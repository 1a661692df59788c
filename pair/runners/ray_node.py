"""The node side of the Ray runner (SPEC 4.3): one detached actor per unit, and its watchdog.

`UnitActor` lives on the unit's node (pinned by a custom resource) and holds the node's own
copy of the unit's worktree under `$UNITMGR_NODE_ROOT` (default `$XDG_STATE_HOME/unitmgr/nodes`).
`start` takes the lease epoch (refusing one it has passed, and stopping an older turn it still
runs), fetches the base commit from a git bundle the lead put in the object store when the copy
lacks it (the copy is kept between turns: a warm one needs none, and a bundle carries only what
the copy's refs do not reach), resets the copy to it and runs the turn in a thread with the
same turn code the local supervisor runs (`pair.turn.run_turn`: budgets, hang kill, redaction).
`poll` hands back the transcript from a byte offset and, once the turn is over, its result: the
outcome, a bundle of the commits it made on top of the base, and the paths it left uncommitted.
Nothing here depends on the lead's process: a lead supervisor that dies and comes back finds the
turn by its epoch.

The watchdog (`python -m pair.runners.ray_node watchdog ...`) runs in its own session beside
each turn: when the actor's process is gone (its worker or its raylet killed) it kills every
process carrying the turn's token within a second — Ray's own subreaper was measured not to
reach a turn started in its own session.

`ray` is imported here only by the lead's `pair.runners.ray`, which wraps `UnitActor` as a
remote class; this module imports no `ray` itself, so the watchdog starts fast.

Over 400 lines because the node's side is one actor's state — the epoch, the copy and its base,
the running turn, its polls, cancel and retirement — and the watchdog must live in this
Ray-free module to start fast beside each turn.
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
from typing import Any

WATCHDOG_POLL_SECONDS = 0.5
WATCHDOG_ARM_SECONDS = 5.0  # the launcher's start and fork, at most
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
        self.watchdog: subprocess.Popen[bytes] | None = None
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
            partner_bin=None,  # the node's own CLI: the lead's path means nothing here
        )
        environment = partner_environment(codex_home=None)  # the node's own, never the lead's
        environment.update(session_variables(spec.get("environment")))
        environment.update(turn_environment(self.state_dir, self.token))
        if spec.get("unit"):
            environment["UNITMGR_UNIT"] = spec["unit"]

        def started(identity: ProcessIdentity) -> None:
            self.partner = identity.to_json()
            self._start_watchdog(identity)

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

    def _start_watchdog(self, partner: Any) -> None:
        import psutil

        me = psutil.Process()
        self.watchdog = subprocess.Popen(
            [
                sys.executable,
                "-P",
                "-m",
                "pair.runners.ray_node",
                "watchdog",
                str(me.pid),
                repr(me.create_time()),
                self.token,
                str(partner.pgid or partner.pid),
                str(self.done_file),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        # Armed before the turn streams a byte (run_turn streams once this returns): the
        # launcher exits as soon as its watchdog has forked away from this worker, whose
        # direct children Ray kills with it — a node lost in that window left no watchdog.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.watchdog.wait(timeout=WATCHDOG_ARM_SECONDS)

    def _stop_watchdog(self) -> None:
        with contextlib.suppress(OSError):
            self.done_file.write_text("done\n")
        if self.watchdog is not None:  # the launcher, which exits at once (the watchdog forks)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.watchdog.wait(timeout=5)

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
        import socket

        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "resource": self.resource,
            "epoch": self.epoch,
            "home": str(self.home),
        }

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
                return {"started": True, "again": True}
            if attach:
                return {"lost": f"this node's actor never ran epoch {epoch} (at {self.epoch})"}
            if epoch <= self.epoch:
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
            return {"started": True, "again": False}

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

    def stop(self, epoch: int) -> dict[str, Any]:
        """`reap`: stop what of turn `epoch` still runs here."""
        turn = self.turn
        if turn is not None and turn.epoch == epoch and turn.thread.is_alive():
            return {"dead": self._stop(turn, "reaped by the lead")}
        return {"dead": True}

    def retire(self) -> dict[str, Any]:
        """The unit's session is ending: stop what still runs here and remove the node's copy
        (the lead then kills this actor)."""
        import shutil

        turn = self.turn
        stopped = turn is None or not turn.thread.is_alive() or self._stop(turn, "retired")
        shutil.rmtree(self.home, ignore_errors=True)
        return {"stopped": stopped, "removed": not self.home.exists()}


# -- the watchdog ------------------------------------------------------------------------------


def watchdog(actor_pid: int, actor_created: float, token: str, pgid: int, done: Path) -> int:
    """Kill the turn's processes once the actor's process is gone; exit once `done` exists.

    It runs as a grandchild of the actor's worker, reparented away from it: Ray kills a dying
    worker's direct children, which would take the watchdog with it (measured). So it forks
    first, before its imports: the launcher's exit is what the actor waits for."""
    if os.fork():
        os._exit(0)  # the launcher: its child is nobody's child but init's (or a subreaper's)
    os.setsid()
    import psutil

    from pair.proof import TURN_TOKEN_VARIABLE
    from registry.processes import reap_processes_marked

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(WATCHDOG_POLL_SECONDS) and not done.exists():
        try:
            alive = abs(psutil.Process(actor_pid).create_time() - actor_created) < 0.01
            alive = alive and psutil.Process(actor_pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        if not alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            reap_processes_marked(TURN_TOKEN_VARIABLE, token, grace_seconds=0.0)
            return 0
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["watchdog"] and len(argv) == 6:
        return watchdog(int(argv[1]), float(argv[2]), argv[3], int(argv[4]), Path(argv[5]))
    print(
        "usage: python -m pair.runners.ray_node watchdog PID CREATED TOKEN PGID DONE",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":  # pragma: no cover (the watchdog's own process)
    sys.exit(main(sys.argv[1:]))
