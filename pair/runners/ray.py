"""`RayRunner`: a unit's turns on another machine of a Ray cluster (SPEC 4.3), the lead's side.

What stays with the lead is what `LocalRunner` keeps: the session, the marker (the lease), the
prompt, the transcript file, the receipt and the unit's branch and worktree. So `RayRunner` is a
`LocalRunner` whose detached supervisor (`pair.launch.start_supervisor`, the same path) does not
run the partner itself: `drive` (called by `pair.supervisor.supervise` for a session whose
signed runner choice is `ray`) connects to the cluster (`pair.runners.ray_driver`), gets or
creates the unit's detached named actor (`unitmgr/<repo-id>/<unit-id>`, namespace `unitmgr`,
pinned by the resource `unitmgr-node-NAME` or `unitmgr-executor`) and starts the turn under the
lease epoch — one call when the node's copy already holds the base commit; otherwise the node
answers what it holds and the base goes as a git bundle without those commits, through the
object store, in a second — and then — until the actor reports the turn
over — appends the transcript into the local transcript file by byte offset, heartbeats into the
marker (`runner_heartbeat_at`) and forwards a cancel. The turn's commits come back as a bundle:
fetched into `refs/unitmgr/<unit>/e<epoch>`, checked to descend from the base and to belong to
the marker's epoch (`land_commits`), and only then fast-forwarded into the local worktree.

`read_status`, `probe`, `receipt` and `read_transcript` stay file-only (inherited); `reattach`
starts a new supervisor for a turn whose supervisor died (the actor kept running it) — `pair
wait` asks for it. `ray` is imported only through `ray_driver` (and by the node side it wraps),
in the supervisor, never at this module's import.

Over 400 lines because the lead's half of a remote turn is one conversation with one actor —
place it, send the base, follow the transcript, forward a cancel, tell a lost node, land the
commits, write the receipt — and each step needs the handle and the epoch the previous one set.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from pathlib import Path

from pair.errors import StateError, UsageError
from pair.runners import ray_driver
from pair.runners.choice import INSTALL_RAY, RunnerChoice
from pair.runners.local import LocalRunner
from pair.state import (
    Marker,
    MarkerUnreadable,
    Session,
    load_session,
    marker_mutex,
    read_marker,
    update_owned_marker,
    write_marker,
)
from registry import light_dataclass
from registry.processes import ProcessIdentity, current_identity, is_alive
from registry.timeutil import iso_z

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from pair.paths import PairPaths
    from pair.runners.base import BootstrapTurn, Liveness, Reaped, TurnStart
    from pair.turn import TurnResult

NAMESPACE = ray_driver.NAMESPACE
POLL_SECONDS = 0.1  # after a call that failed
POLL_WAIT_SECONDS = 0.25  # a poll answers at once with news, else after this (a cancel's delay)
POLL_LIMIT = 1024 * 1024  # transcript bytes a poll brings back
HEARTBEAT_SECONDS = 2.0
CALL_SECONDS = 5.0  # one actor call's bound
START_SECONDS = 60.0  # the first call: it waits for a new actor's placement
HOLDS_LIMIT = 64  # commits of the node's copy a delta bundle may leave out
HEX40 = re.compile(r"[0-9a-f]{40}")
LOST_SECONDS = 12.0  # no answer from the actor for this long: the node is lost
CANCEL_SECONDS = 25.0  # the node's cancel: its TERM, grace and KILL, confirmed (`cancel_seconds`)
HANDSHAKE_SECONDS = 90.0  # connect, place (or create) the actor, fetch the base, start


def cancel_seconds() -> float:
    """How long the lead's supervisor waits for the node to confirm a cancelled turn dead:
    `CANCEL_SECONDS`, or less in a test of a node that never answers (`_hooked`)."""
    return _hooked("UNITMGR_TEST_RAY_CANCEL_SECONDS", CANCEL_SECONDS)


def poll_seconds() -> float:
    """One poll's bound (`CALL_SECONDS`): a poll of a node that has stopped answering returns
    after it, and only then is a cancel sent. Shorter in such a test (`_hooked`)."""
    return _hooked("UNITMGR_TEST_RAY_POLL_SECONDS", CALL_SECONDS)


def _hooked(variable: str, seconds: float) -> float:
    """`seconds`, or the shorter bound `variable` names when SPEC 8's test hooks are on
    (`UNITMGR_TEST_HOOKS=1`): never longer. The lead's own environment: nothing an executor
    writes reaches it."""
    if os.environ.get("UNITMGR_TEST_HOOKS") == "1":
        try:
            return min(seconds, float(os.environ.get(variable, "")))
        except ValueError:
            pass
    return seconds


def require_ray() -> None:
    """`runner-unavailable` (exit 2) when the `ray` extra does not import."""
    try:
        import ray  # noqa: F401  (only to know it imports)
    except ImportError as error:
        raise UsageError(
            "runner-unavailable",
            f"the ray runner needs Ray, which does not import here ({error})",
            next_step=INSTALL_RAY,
        ) from None


def actor_name(paths: PairPaths, session: Session) -> str:
    """`unitmgr/<repo-id>/<unit-id>`: the unit's one actor (a bare pair: its state dir's)."""
    return unit_actor_name(paths, session.unit)


def unit_actor_name(paths: PairPaths, unit: str | None) -> str:
    """`actor_name` before the session is saved (the bootstrap knows only its unit)."""
    from pair.git import common_dir
    from registry.userdirs import repository_id

    repo = repository_id(common_dir(paths.state_dir.parent))
    unit = (
        unit
        or "pair-" + hashlib.sha256(os.path.realpath(paths.state_dir).encode()).hexdigest()[:12]
    )
    return f"unitmgr/{repo}/{unit}"


def commits_ref(session: Session, epoch: int) -> str:
    unit = session.unit or "pair"
    return f"refs/unitmgr/{unit}/e{epoch}"


class RayRunner(LocalRunner):
    """The turns of the pair in `state_dir`, run by its unit's actor on a Ray node."""

    def __init__(self, state_dir: Path, choice: RunnerChoice) -> None:
        super().__init__(state_dir)
        self.choice = choice

    def start(self, turn: TurnStart) -> dict[str, Any]:
        from pair.launch import start_supervisor
        from pair.runners.choice import refuse_unauthenticated

        refuse_unauthenticated(self.choice)
        # (The base commit is in the marker from its grant: `grant_turn`.)
        update_owned_marker(
            self.paths, turn.lease.token, runner={"kind": "ray", "node": self.choice.node}
        )
        return start_supervisor(
            self.paths,
            turn.worktree,
            turn.seq,
            turn.kind,
            turn.lease.token,
            handshake_seconds=HANDSHAKE_SECONDS,
            # Forked by the warm Ray server (`ray` imported), else like a local turn's (a
            # caller that loaded Ray is never forked: launch's rule), importing `ray` afresh.
            fork=True,
            warm=True,
        )

    def bootstrap(
        self,
        turn: BootstrapTurn,
        *,
        on_partner_start: Callable[[ProcessIdentity], None] | None = None,
    ) -> TurnResult:
        """`pair init`'s bootstrap on the unit's node, in the caller's foreground (SPEC 4.3): a
        partner's session lives where its CLI ran (claude's `~/.claude`, codex's rollouts), so
        the node that resumes it must be the one that created it. A new session gets a fresh
        actor (one left under the unit's name — a move, a resumed create — is retired first),
        the lead's HEAD as the copy's base, and turn 0 run by the same node turn code as every
        other turn; this process follows it as a supervisor does (transcript by byte offset
        into the local file, the partner named into the marker and to `on_partner_start` as
        soon as the node reports it) and returns once the node says nothing of it is left."""
        from pair import git as pair_git
        from pair.runners.choice import refuse_unauthenticated
        from pair.state import BOOTSTRAP_KIND

        refuse_unauthenticated(self.choice)
        paths, token, request = self.paths, turn.lease.token, turn.request
        worktree = Path(request.worktree)
        base = pair_git.rev(worktree, "HEAD")
        name = unit_actor_name(paths, turn.unit)
        facts: dict[str, Any] = {"kind": "ray", "node": self.choice.node}
        update_owned_marker(paths, token, base_commit=base, runner=dict(facts))
        facts["resource"] = self.choice.resource

        def named(partner: dict[str, Any]) -> None:
            identity = ProcessIdentity.from_json(partner)
            if identity is not None and on_partner_start is not None:
                on_partner_start(light_dataclass.replace(identity, token=token))

        spec = {
            "partner": request.partner,
            "sid": request.sid,
            "kind": BOOTSTRAP_KIND,
            "write": False,
            "bootstrap": True,
            "model": request.model,
            "effort": request.effort,
            "prompt": request.prompt_file.read_text(encoding="utf-8"),
            "idle_seconds": turn.idle_seconds,
            "total_seconds": turn.total_seconds,
            "base_commit": base,
            "environment": None,
            "unit": turn.unit,
        }
        try:
            with _connected(self.choice) as ray:
                handle = _actor(ray, name, self.choice, fresh=True)
                hello = ray.get(handle.hello.remote(), timeout=START_SECONDS)
                facts.update(actor=name, node_id=hello.get("node_id"), home=hello.get("home"))
                # A fresh actor's copy is new (retire removed the last): the whole base goes.
                bundle = ray.put(_base_bundle(worktree, base, [])[0]) if base else None
                started = ray.get(
                    handle.start.remote(0, token, spec, bundle, False, self.choice.resource),
                    timeout=START_SECONDS,
                )
                if "started" in started:
                    update_owned_marker(paths, token, runner=facts)
                    transcript = paths.transcript_file(0, BOOTSTRAP_KIND)
                    node = _follow(
                        ray, handle, paths, token, 0, transcript, facts, lambda: None, named
                    )
                else:
                    why = started.get("refused") or started.get("lost")
                    node = {"status": "failed", "reason": f"the node refused: {why}"}
        except Exception as error:
            why = f"node-lost: could not run the bootstrap on the node: {type(error).__name__}"
            node = {"status": "failed", "reason": why}
        return _turn_result(node)

    def probe(self, seq: int) -> Liveness:
        """As `LocalRunner.probe`; a partner on the node is the one the marker names."""
        liveness = super().probe(seq)
        if liveness.partner_pid is None and liveness.held:
            marker = self._marker_of(seq)
            remote = (marker.remote_partner if marker is not None else None) or {}
            if isinstance(remote.get("pid"), int):
                return light_dataclass.replace(liveness, partner_pid=remote["pid"])
        return liveness

    def release(self) -> dict[str, Any]:
        """The session is ending (`close_state`: a restaff or a dismantle): its actor retires
        (its turn stopped, the node's copy removed) and is killed. `{actor, released}`."""
        from pair.runners.choice import refuse_unauthenticated
        from pair.session_trust import session_trusted

        session = load_session(self.paths)
        if session is None:
            return {"actor": None, "released": False}
        if not session_trusted(self.paths, session):  # its runner may be spliced in: no contact
            return {"actor": None, "released": False, "refused": "session-untrusted"}
        refuse_unauthenticated(self.choice)
        name = actor_name(self.paths, session)
        ray = ray_driver.connect(self.choice.address)
        try:
            handle = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:  # none on the cluster (never started, or already gone)
            return {"actor": name, "released": False}
        with contextlib.suppress(Exception):  # a dead actor is killed all the same
            ray.get(handle.retire.remote(), timeout=CALL_SECONDS)
        ray.kill(handle, no_restart=True)
        return {"actor": name, "released": True}

    def reattach(self, seq: int) -> bool:
        """Start a new lead supervisor for turn `seq` when its own died; whether one was."""
        from pair.launch import start_supervisor

        me = current_identity(argv0="pair reattach")
        with marker_mutex(self.paths):
            try:
                marker = read_marker(self.paths)
            except MarkerUnreadable:
                return False
            if marker is None or marker.seq != seq or not marker.runner:
                return False
            supervisor = ProcessIdentity.from_json(marker.supervisor)
            if supervisor is None or is_alive(supervisor):
                return False
            # This process launches it: the turn is not lost meanwhile (SPEC 3.4).
            marker.supervisor, marker.launcher = None, me.to_json()
            write_marker(self.paths, marker)
        session_worktree = self.paths.state_dir.parent
        start_supervisor(
            self.paths,
            session_worktree,
            seq,
            marker.kind,
            marker.owner_token,
            handshake_seconds=HANDSHAKE_SECONDS,
            # Forked by the warm Ray server (`ray` imported), else like a local turn's (a
            # caller that loaded Ray is never forked: launch's rule), importing `ray` afresh.
            fork=True,
            warm=True,
        )
        return True

    def reap(self) -> Reaped:
        """`pair clear` of a turn on the node: when no process of the turn is left on the lead
        (its supervisor died) the node may still run it, so the node is asked to stop it first
        and to say what is left; only then is the lock released (`LocalRunner.reap`, which
        refuses `turn-in-flight` while the lead's supervisor lives). `runner.node_turn` is what
        the node confirmed — `stopped`, `not-running` — or `unknown` (the cluster or the actor
        did not answer, or the node could not confirm the turn dead): never `stopped` unless
        the node said so. An unknown turn's lock is released all the same (a lost node must
        not hold the pair for good): the epoch fences whatever it still sends."""
        from pair.proof import proven_live_pid

        try:
            marker = read_marker(self.paths)
        except MarkerUnreadable:
            marker = None
        on_node = marker is not None and (marker.seq > 0 or bool(marker.runner))  # a bootstrap too
        if marker is None or not on_node or proven_live_pid(self.paths, marker) is not None:
            return super().reap()  # nothing to stop, or refused: a process of it lives here
        node = self._stop_on_node(marker.seq)
        return light_dataclass.replace(super().reap(), runner=node)

    def _stop_on_node(self, epoch: int) -> dict[str, Any]:
        """Ask the unit's actor to stop turn `epoch`: `{node_turn, actor, pgid, reason?}`."""
        from pair.runners.choice import refuse_unauthenticated

        session = load_session(self.paths)
        if session is None:
            return _unknown(None, "no pair session names the unit's actor")
        refuse_unauthenticated(self.choice)
        name = actor_name(self.paths, session)
        try:
            with _connected(self.choice) as ray:
                try:
                    handle = ray.get_actor(name, namespace=NAMESPACE)
                except ValueError:
                    return _unknown(
                        name,
                        "the unit's actor is not on the cluster (its node's "
                        "watchdog stops a turn it leaves; unconfirmed)",
                    )
                try:
                    answer = ray.get(handle.stop.remote(epoch), timeout=cancel_seconds())
                except Exception as error:
                    return _unknown(
                        name, f"the unit's actor did not answer: {type(error).__name__}"
                    )
        except Exception as error:  # the cluster itself did not answer
            return _unknown(name, f"the cluster did not answer: {type(error).__name__}")
        if not answer.get("dead"):
            return _unknown(name, "the node could not confirm the turn's processes dead")
        state = "stopped" if answer.get("stopped") else "not-running"
        return {"node_turn": state, "actor": name, "pgid": answer.get("pgid")}

    # The supervisor's answer may take a poll (CALL_SECONDS) and the node's cancel
    # (CANCEL_SECONDS) before its receipt: only then does a cancel stop the turn without it.
    cancel_wait_seconds = CALL_SECONDS + CANCEL_SECONDS + 10.0

    def cancel(self, seq: int | None, *, reason: str) -> dict[str, Any] | None:
        """As `LocalRunner.cancel`, through the lead's supervisor (re-attached when it died),
        which forwards the cancel to the node and writes `cancelled` only once the node reports
        the turn dead — `unknown` (code `cancel-unconfirmed`) when it cannot. With no supervisor
        able to answer, the node is asked directly (`stop`), never answered for."""
        try:
            marker = read_marker(self.paths)
        except MarkerUnreadable:
            marker = None
        if marker is not None and (seq is None or marker.seq == seq):
            self.reattach(marker.seq)  # a cancel needs a supervisor to reach the node
        return super().cancel(seq, reason=reason)

    def _unsupervised_stop(self) -> Callable[[Session, Marker], tuple[str, str]]:
        def stop(session: Session, marker: Marker) -> tuple[str, str]:
            node = self._stop_on_node(marker.seq)
            if node["node_turn"] in ("stopped", "not-running"):
                return "cancelled", f"the node confirmed the turn dead: {node['node_turn']}"
            return "unknown", f"the node could not confirm the turn dead: {node.get('reason')}"

        return stop


# -- the lead's supervisor, driving the actor --------------------------------------------------


def _connect(choice: RunnerChoice) -> Any:
    """`ray`, connected as a driver (`ray_driver.connect`: from `/`, no env hooks)."""
    return ray_driver.connect(choice.address)


@contextlib.contextmanager
def _connected(choice: RunnerChoice) -> Iterator[Any]:
    """`ray`, connected for one call of a lead's command; disconnected again when this call
    connected it (a library caller — a test, `unit` in-process — is not left a Ray driver).
    A cluster that does not answer raises what Ray raises, after Ray's own connect bound."""
    import ray

    ours = not ray.is_initialized()
    try:
        yield _connect(choice)
    finally:
        if ours and ray.is_initialized():
            ray.shutdown()


def _unknown(actor: str | None, why: str) -> dict[str, Any]:
    return {"node_turn": "unknown", "actor": actor, "pgid": None, "reason": why}


def _retire(ray: Any, name: str, handle: Any) -> None:
    """Retire and kill the actor `handle` (its turn stopped, the node's copy removed) and wait
    until its name is free again (a kill is asynchronous)."""
    with contextlib.suppress(Exception):  # a dead actor is killed all the same
        ray.get(handle.retire.remote(), timeout=CALL_SECONDS)
    ray.kill(handle, no_restart=True)
    deadline = time.monotonic() + CALL_SECONDS
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return
        time.sleep(POLL_SECONDS)


def _actor(ray: Any, name: str, choice: RunnerChoice, *, fresh: bool = False) -> Any:
    """The unit's actor: found by name, or created on the choice's resource (no call yet — the
    turn's `start` is the first, and says whether the actor found sits elsewhere). `fresh`:
    always a new one, any actor under the name retired first (a bootstrap)."""
    from pair.runners.ray_node import UnitActor

    if fresh:
        try:
            _retire(ray, name, ray.get_actor(name, namespace=NAMESPACE))
        except ValueError:
            pass  # none: the usual case

    remote = ray.remote(UnitActor)
    return remote.options(
        name=name,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        num_cpus=0,
        resources={choice.resource: 0.001},
        max_restarts=0,
        max_concurrency=8,
    ).remote(name, choice.resource)


def _base_bundle(worktree: Path, base: str, holds: Any) -> tuple[bytes, bool]:
    """The bundle of the base commit the node lacks, without what the commits it holds reach
    (those this repository has too: the node's list is the node's word, checked here) — and
    whether it is such a delta. The bundle's one ref is renamed to the node's `BASE_REF`."""
    from pair import git as pair_git

    listed = holds[:HOLDS_LIMIT] if isinstance(holds, list) else []
    known = pair_git.known_commits(
        worktree, [sha for sha in listed if isinstance(sha, str) and HEX40.fullmatch(sha)]
    )
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "base.bundle"
        ref = "refs/unitmgr/base-" + base[:12]
        pair_git.set_ref(worktree, ref, base)
        try:
            delta = bool(known) and pair_git.bundle(worktree, out, ref, *known)
            if not delta and not pair_git.bundle(worktree, out, ref):
                raise StateError("git-failed", f"the base {base} made an empty bundle")
            data = out.read_bytes()
        finally:
            with contextlib.suppress(StateError):
                pair_git.run(worktree, "update-ref", "-d", ref)
    return _renamed(data, ref), delta


def _renamed(data: bytes, ref: str) -> bytes:
    """The bundle with its ref renamed to the node's `refs/unitmgr/base` (header line only)."""
    from pair.runners.ray_node import BASE_REF

    header, _, rest = data.partition(b"\n\n")
    header = header.replace(ref.encode(), BASE_REF.encode())
    return header + b"\n\n" + rest


def _spec(paths: PairPaths, session: Session, marker: Marker) -> dict[str, Any]:
    from pair.supervisor import resume_model
    from pair.turn import DEFAULT_BUDGET_MINUTES
    from registry import bounded

    prompt = bounded.read_bytes(paths.turn_file(marker.seq, marker.kind, "-prompt.md"), 1 << 22)
    return {
        "partner": session.partner,
        "sid": session.sid,
        "kind": marker.kind,
        "write": marker.write,
        "model": resume_model(session),
        "effort": session.effort,
        "prompt": prompt.decode("utf-8", errors="replace"),
        "idle_seconds": marker.idle_seconds or DEFAULT_BUDGET_MINUTES[0] * 60,
        "total_seconds": marker.total_seconds or DEFAULT_BUDGET_MINUTES[1] * 60,
        "base_commit": marker.base_commit,
        "environment": session.environment,
        "unit": session.unit,
    }


def drive(
    paths: PairPaths,
    session: Session,
    marker: Marker,
    token: str,
    choice: RunnerChoice,
    stop_requested: Any,
) -> dict[str, Any]:
    """Run turn `marker.seq` on the unit's actor; the node's result (`{status, ...}`), with
    `runner` facts, or a `lost`/`unknown` one when the node is gone."""
    epoch = marker.seq
    transcript = paths.turn_file(epoch, marker.kind, ".log")
    facts: dict[str, Any] = {"kind": "ray", "node": choice.node, "resource": choice.resource}
    base = marker.base_commit
    try:
        # What needs no cluster first, while `ray` imports (ray_driver.begin, run_remote).
        name = actor_name(paths, session)
        spec = _spec(paths, session, marker)
        attach = marker.remote_partner is not None  # it started once: a re-attach only
        ray = ray_driver.connect(choice.address)
        handle = _actor(ray, name, choice)
        facts["actor"] = name
        facts["base"] = {"commit": base, "bundle_bytes": 0, "delta": False}
        # One call when the node's copy holds the base (a warm copy: every turn but a unit's
        # first, a restaff's, or one after the lead's branch moved underneath the node).
        started = ray.get(
            handle.start.remote(epoch, token, spec, None, attach, choice.resource),
            timeout=START_SECONDS,
        )
        if "moved" in started:  # found on another resource: a deliberate move, rebuilt there
            _retire(ray, name, handle)  # the old node's copy goes with it
            handle = _actor(ray, name, choice)
            started = ray.get(
                handle.start.remote(epoch, token, spec, None, attach, choice.resource),
                timeout=START_SECONDS,
            )
        if "need_base" in started and base is not None:
            data, delta = _base_bundle(Path(session.worktree), base, started.get("holds"))
            facts["base"] = {"commit": base, "bundle_bytes": len(data), "delta": delta}
            started = ray.get(
                handle.start.remote(epoch, token, spec, ray.put(data), attach, choice.resource),
                timeout=START_SECONDS,
            )
    except Exception as error:
        return {
            "status": "lost",
            "reason": f"node-lost: could not start the turn: {error}",
            **_no(facts),
        }
    if "lost" in started:
        return _lost(facts, started["lost"], None)
    if "refused" in started or "started" not in started:
        started.setdefault("refused", f"no start: {sorted(started)}")
        return {
            "status": "failed",
            "reason": f"the node refused: {started['refused']}",
            **_no(facts),
        }
    facts.update(node_id=started.get("node_id"), home=started.get("home"))  # the node's word
    update_owned_marker(paths, token, runner=facts)
    return _follow(ray, handle, paths, token, epoch, transcript, facts, stop_requested)


def _no(facts: dict[str, Any]) -> dict[str, Any]:
    return {"runner": facts, "bundle": None, "uncommitted": None, "leftovers": []}


def _follow(
    ray: Any,
    handle: Any,
    paths: PairPaths,
    token: str,
    epoch: int,
    transcript: Path,
    facts: dict[str, Any],
    stop_requested: Any,
    on_partner: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    import ray.exceptions as errors

    from registry.redact import StreamRedactor

    fd = os.open(transcript, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    offset = os.fstat(fd).st_size  # a re-attached supervisor goes on where the last one stopped
    # The node redacts its partner's stream, but the executor there can write the node's
    # transcript file itself: what this lead writes is redacted here too (SPEC 8), split
    # tokens across chunks included. (A redacted chunk is shorter: a re-attached supervisor,
    # which goes on from the local size, may repeat a few bytes of a turn that held a secret.)
    redactor = StreamRedactor()
    last_answer = last_beat = time.monotonic()
    partner_seen = False
    cancel_sent: str | None = None
    bound = poll_seconds()
    try:
        while True:
            now = time.monotonic()
            reason = stop_requested()
            if reason and cancel_sent is None:
                cancel_sent = reason
                try:
                    answer = ray.get(handle.cancel.remote(epoch, reason), timeout=cancel_seconds())
                except Exception:
                    answer = {"dead": False}
                if not answer.get("dead"):
                    return {
                        "status": "unknown",
                        "reason": f"cancel: the node could not confirm the turn dead ({reason})",
                        **_no(facts),
                    }
            try:
                answer = ray.get(
                    handle.poll.remote(epoch, offset, POLL_LIMIT, POLL_WAIT_SECONDS),
                    timeout=bound,
                )
            except (errors.ActorDiedError, errors.RayActorError) as error:
                return _lost(facts, f"the unit's actor died: {type(error).__name__}", cancel_sent)
            except Exception as error:
                if now - last_answer > LOST_SECONDS:
                    return _lost(facts, f"no answer for {LOST_SECONDS:g}s: {error}", cancel_sent)
                time.sleep(POLL_SECONDS)
                continue
            last_answer = now
            if answer.get("unknown"):
                return _lost(facts, f"the node's actor is at epoch {answer.get('epoch')}", None)
            data = answer.get("data") or b""
            if not isinstance(data, bytes):
                data = b""
            if data:
                _write_all(fd, redactor.feed(data))
                offset += len(data)
            else:
                _write_all(fd, redactor.pending())
            if answer.get("partner") and not partner_seen:
                partner_seen = True
                update_owned_marker(paths, token, remote_partner=answer["partner"])
                if on_partner is not None:
                    on_partner(answer["partner"])
            if "result" in answer:
                _write_all(fd, redactor.flush())
                return {**answer["result"], "runner": facts}
            if now - last_beat > HEARTBEAT_SECONDS:
                last_beat = now
                if update_owned_marker(paths, token, runner_heartbeat_at=iso_z()) is None:
                    return {"status": "failed", "reason": "the lease was lost", **_no(facts)}
    finally:
        with contextlib.suppress(OSError):
            _write_all(fd, redactor.flush())
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lost(facts: dict[str, Any], why: str, cancel: str | None) -> dict[str, Any]:
    status = "unknown" if cancel else "lost"
    reason = f"node-lost: {why}; the turn's work not yet bundled is gone"
    if cancel:
        reason = f"cancel ({cancel}) unconfirmed: {reason}"
    return {"status": status, "reason": reason, **_no(facts)}


def _turn_result(node: dict[str, Any]) -> TurnResult:
    """The node's result as the turn code's `TurnResult` (its partner ran elsewhere: None)."""
    from pair.partners.base import TurnOutcome
    from pair.turn import TurnResult

    extra = node.get("extra")
    outcome = TurnOutcome(
        status=str(node.get("status") or "failed"),
        reply=node.get("reply"),
        reason=node.get("reason"),
        sid=node.get("sid"),
        extra=dict(extra) if isinstance(extra, dict) else {},
    )
    return TurnResult(
        outcome=outcome,
        exit_code=node.get("exit_code"),
        seconds=float(node.get("seconds") or 0.0),
        command=list(node.get("command") or []),
        partner=None,
        partial_reply=bool(node.get("partial_reply")),
        throttle_signals=node.get("throttle_signals"),
        leftovers=list(node.get("leftovers") or []),
    )


def land_commits(
    paths: PairPaths, session: Session, token: str, epoch: int, base: str | None, data: bytes
) -> dict[str, Any]:
    """Fetch a turn's bundle into `refs/unitmgr/<unit>/e<epoch>` and fast-forward the local
    worktree to it — only when `epoch` is still the marker's (under `token`) and the commits
    descend from `base`. `{ref, head, fast_forwarded}` or `{refused}`."""
    from pair import git as pair_git
    from pair.runners.ray_node import OUT_REF

    try:
        marker = read_marker(paths)
    except MarkerUnreadable:
        marker = None
    if marker is None or marker.seq != epoch or marker.owner_token != token:
        return {"refused": f"stale epoch {epoch}: the marker is not that turn's"}
    worktree = Path(session.worktree)
    ref = commits_ref(session, epoch)
    with tempfile.TemporaryDirectory() as scratch:
        bundle_file = Path(scratch) / "turn.bundle"
        bundle_file.write_bytes(data)
        try:
            pair_git.fetch_bundle(worktree, bundle_file, OUT_REF, ref)
        except StateError as error:
            return {"refused": f"the bundle did not fetch: {error.reason}"}
    head = pair_git.rev(worktree, ref)
    if head is None or base is None or not pair_git.is_ancestor(base, head, worktree):
        with contextlib.suppress(StateError):
            pair_git.run(worktree, "update-ref", "-d", ref)
        return {"refused": f"the bundle's {head} does not descend from the base {base}"}
    try:
        pair_git.fast_forward(worktree, head)
    except StateError as error:
        return {"ref": ref, "head": head, "fast_forwarded": False, "why": error.reason}
    return {"ref": ref, "head": head, "fast_forwarded": True}


def run_remote(
    paths: PairPaths,
    session: Session,
    marker: Marker,
    token: str,
    supervisor_pid: int,
    started_at: str,
) -> dict[str, Any]:
    """`pair.supervisor.supervise`'s turn for a session whose turns run on Ray: drive the
    node, land its commits, and build the receipt as the local supervisor does."""
    from pair import receipts
    from pair.runners.choice import verified_choice
    from pair.supervisor import SIGTERM_REASON, Stop, build_receipt, turn_request
    from registry.atomic import write_text_atomic

    if refused := receipts.untrusted(paths, session, marker, supervisor_pid, started_at):
        return refused  # a session rewritten since `send` verified it: the node runs nothing
    choice = verified_choice(paths.state_dir, session.runner)  # refused: nothing contacted
    ray_driver.begin()  # begun by `supervise` already; nothing is contacted before this line

    def stop_requested() -> str | None:
        if not Stop.signalled:
            return None
        with contextlib.suppress(MarkerUnreadable):
            current = read_marker(paths)
            if current is not None and current.owner_token == token and current.cancel:
                return str(current.cancel.get("reason") or SIGTERM_REASON)
        return SIGTERM_REASON

    seq = marker.seq
    node = drive(paths, session, marker, token, choice, stop_requested)
    runner = dict(node.get("runner") or {})
    if node.get("bundle"):
        runner["commits"] = land_commits(
            paths, session, token, seq, marker.base_commit, node["bundle"]
        )
    runner["uncommitted"] = node.get("uncommitted")
    if node.get("diverged"):
        runner["commits"] = {"refused": "the node's HEAD does not descend from the base"}
    request = turn_request(paths, session, marker, partner_bin=None)
    result = _turn_result(node)
    outcome = result.outcome
    if outcome.reply:
        write_text_atomic(request.reply_file, outcome.reply + "\n")
    try:
        current = read_marker(paths)
    except MarkerUnreadable:
        current = None
    remote_partner = (current.remote_partner if current else None) or {}
    receipt = build_receipt(
        paths=paths,
        session=session,
        marker=marker,
        request=request,
        result=result,
        supervisor_pid=supervisor_pid,
        started_at=started_at,
        rate_limits=None,
        leftovers=list(node.get("leftovers") or []),
        audits={
            "foreign_ref_changes": None,
            "unattributed_ref_changes": None,
            "foreign_config_changes": None,
        },
    )
    receipt["partner_pid"] = remote_partner.get("pid")
    receipt["runner"] = runner
    return receipt
