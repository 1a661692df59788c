"""pair's library API: `init`, `send`, `wait`, `status`, `read_status`, `cancel`, `clear`, `end`
(SPEC 4).

Each returns the dict the CLI prints and raises `ToolError` subclasses carrying `code` and
`reason`. `unit` calls these in-process; the only processes pair ever starts are the detached
supervisor and the partner it runs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pair.environment import detect_lead, partner_environment
from pair.errors import StateError, UsageError
from pair.git import locate
from pair.partners import LEADS
from pair.paths import PairPaths, is_log, is_receipt, state_dir_for
from pair.receipts import failure_fields
from pair.state import (
    TURN_KINDS,
    Marker,
    MarkerUnreadable,
    Session,
    acquire_marker,
    crash_point,
    load_session,
    marker_mutex,
    read_marker,
    read_receipt,
    release_owned_marker,
    save_session,
    write_marker,
)
from registry.atomic import ensure_private_dir, remove_file, write_text_atomic
from registry.processes import (
    ProcessIdentity,
    current_identity,
    group_members,
    identify,
    is_alive,
    kill_tree,
)
from registry.timeutil import iso_from_epoch, iso_z, seconds_from_env, stamp

__all__ = [
    "PairPaths",
    "cancel",
    "cancel_state",
    "clear",
    "clear_state",
    "close_state",
    "end",
    "end_state",
    "ended_receipt",
    "init",
    "is_log",
    "is_receipt",
    "parse_minutes",
    "paths_at",
    "paths_for",
    "read_status",
    "resolve_model",
    "send",
    "state_dir_for",
    "status",
    "wait",
]

if TYPE_CHECKING:
    from pair.models import Resolution
    from pair.partners.base import Partner

ROLES = ("peer", "executor")
HANDSHAKE_SECONDS = 10.0
WAIT_POLL_SECONDS = 0.05
NO_MARKER_GRACE_SECONDS = 10.0
DEFAULT_WAIT_MINUTES = 125.0
SYNC_SEND_SLACK_SECONDS = 60.0


# -- paths: the one place unitmgr learns where a pair's files are ----------------------------


def paths_for(worktree: str | Path) -> PairPaths:
    """The pair files of `worktree` (one git call: its absolute git dir)."""
    return _paths(worktree)[1]


def paths_at(state_dir: str | Path) -> PairPaths:
    """The pair files under a known state dir (no git call; the worktree may be gone)."""
    return PairPaths(Path(state_dir))


# -- helpers -------------------------------------------------------------------------------


def _paths(repo: str | Path) -> tuple[Path, PairPaths]:
    place = locate(repo)
    return place.root, PairPaths(state_dir_for(place.git_dir))


def _require_session(paths: PairPaths) -> Session:
    session = load_session(paths)
    if session is None:
        raise StateError(
            "no-pair-session",
            f"no pair session in {paths.state_dir} — run pair init first",
        )
    return session


def resolve_lead(lead: str | None) -> str:
    if lead is not None:
        if lead not in LEADS:
            raise UsageError(
                "unknown-lead", f"unknown lead {lead!r} — use one of {', '.join(LEADS)}"
            )
        return lead
    return detect_lead() or "lead"


def parse_minutes(value: float | str | None, option: str) -> float | None:
    if value is None:
        return None
    try:
        minutes = float(value)
    except (TypeError, ValueError):
        minutes = math.nan
    if not math.isfinite(minutes) or minutes <= 0:
        raise UsageError(
            "invalid-budget", f"{option} must be a positive number of minutes, got {value}"
        )
    return minutes


def default_budgets(kind: str, write: bool) -> tuple[float, float]:
    """(idle, total) minutes: 45/120 for a writable task, 20/60 for everything else."""
    from pair.turn import DEFAULT_BUDGET_MINUTES, TASK_BUDGET_MINUTES

    return TASK_BUDGET_MINUTES if kind == "task" and write else DEFAULT_BUDGET_MINUTES


def session_view(paths: PairPaths, session: Session) -> dict[str, Any]:
    return {
        "sid": session.sid,
        "partner": session.partner,
        "role": session.role,
        "lead": session.lead,
        "model": session.model,
        "effort": session.effort,
        "identity": session.identity,
        "identity_home": session.identity_home,
        "model_resolved": session.model_resolved,
        "model_source": session.model_source,
        "resolved_at": session.resolved_at,
        "partner_bin": session.partner_bin,
        "partner_bin_version": session.partner_bin_version,
        "branch": session.branch,
        "seq": session.seq,
        "created_at": session.created_at,
        "worktree": session.worktree,
        "state_dir": str(paths.state_dir),
        "state_file": str(paths.session_file),
        "transcripts": str(paths.transcripts_dir),
    }


# -- init ------------------------------------------------------------------------------------


def init(
    repo: str | Path,
    *,
    partner: str,
    lead: str | None = None,
    identity: str | None = None,
    model: str | None = None,
    effort: str | None = None,
    role: str = "peer",
    idle_min: float | str | None = None,
    total_min: float | str | None = None,
    on_partner_start: Callable[[ProcessIdentity], None] | None = None,
    branch: str | None = None,
) -> dict[str, Any]:
    """Create the worktree's pair session, or resume the one already there.

    A streaming partner runs a read-only bootstrap turn to obtain a resumable session id, holding
    the in-flight marker meanwhile; `on_partner_start` receives the bootstrap's process identity
    before anything waits on it (unit journals it). `branch` is the branch the session's
    writable turns may move (the ref audit); without it, each turn allows the worktree's branch.
    """
    from pair.bootstrap import BOOTSTRAP_IDLE_MINUTES, BOOTSTRAP_TOTAL_MINUTES, run_bootstrap
    from pair.identity import identity_home, refuse_same_cli
    from pair.partners import adapter_for

    adapter = adapter_for(partner)  # an unknown partner is refused first
    if role not in ROLES:
        raise UsageError("unknown-role", f"unknown role {role!r} — use peer or executor")
    lead_name = resolve_lead(lead)
    requested_identity = identity or "default"
    idle = parse_minutes(idle_min, "--idle-min") or BOOTSTRAP_IDLE_MINUTES
    total = parse_minutes(total_min, "--total-min") or BOOTSTRAP_TOTAL_MINUTES
    root, paths = _paths(repo)
    existing = load_session(paths)
    if existing is not None:
        if existing.partner != partner:
            raise StateError(
                "pair-exists",
                f"a {existing.partner} pair already exists here (sid {existing.sid}) — end it "
                f"first, or pass --partner {existing.partner} to resume it",
            )
        if identity is not None and existing.identity != requested_identity:
            raise StateError(
                "pair-identity-differs",
                f"this pair runs as {existing.partner} identity {existing.identity} (sid "
                f"{existing.sid}) — end it first to pair with identity {requested_identity}",
            )
        return {"ok": True, "status": "resumed", **session_view(paths, existing)}
    adapter.validate_staffing(
        model=model, effort=effort, identity=requested_identity, writable=role == "executor"
    )
    home = identity_home(partner, requested_identity)
    refuse_same_cli(lead=lead_name, partner=partner, partner_home=home)
    _refuse_existing_marker(paths, root)
    adapter.preflight(model=model, worktree=root)
    binary, version, resolution = _binary_and_model(adapter, model, effort, home)
    session = Session(
        partner=partner,
        sid=f"script-{uuid.uuid4()}" if partner == "script" else "",
        seq=0,
        lead=lead_name,
        role=role,
        model=model,
        effort=effort,
        identity=requested_identity,
        identity_home=home,
        model_resolved=resolution.model_resolved,
        model_source=resolution.model_source,
        resolved_at=resolution.resolved_at,
        partner_bin=binary if partner != "script" else None,
        partner_bin_version=version,
        branch=branch,
        worktree=str(root),
        state_dir=str(paths.state_dir),
        transcripts=str(paths.transcripts_dir),
        created_at=iso_z(),
    )
    ensure_private_dir(paths.transcripts_dir)
    document: dict[str, Any] = {}
    if adapter.bootstrap:
        session, document = run_bootstrap(
            adapter,
            session,
            resolution,
            paths,
            on_partner_start=on_partner_start,
            idle_minutes=idle,
            total_minutes=total,
        )
    else:
        save_session(paths, session)
    return {"ok": True, "status": "created", **session_view(paths, session), **document}


def _refuse_existing_marker(paths: PairPaths, root: Path) -> None:
    try:
        marker = read_marker(paths)
    except MarkerUnreadable:
        raise StateError(
            "marker-unreadable",
            f"the in-flight marker {paths.marker_file} cannot be read — inspect it, then run "
            "pair clear",
        ) from None
    if marker is None:
        return
    if marker.live_pid() is not None:
        raise StateError(
            "bootstrap-in-flight",
            f"a bootstrap is in flight in {paths.state_dir} — wait for it to finish",
        )
    raise StateError(
        "turn-lost",
        f"a bootstrap was left in flight since {marker.started_at} and none of its processes are "
        f"alive — clear it with: pair clear --repo {root}",
    )


def _binary_and_model(
    adapter: Partner, model: str | None, effort: str | None, home: str | None
) -> tuple[str, str | None, Resolution]:
    """The partner's binary, its version (preflight: its help names every flag the adapter
    passes) and the model resolution."""
    from pair.models import resolve

    binary = adapter.binary()
    version = adapter.verify_cli(binary)
    resolution = resolve(
        partner=adapter.name,
        model=model,
        effort=effort,
        binary=binary,
        identity_home=home,
        environment=partner_environment(codex_home=home),
    )
    return binary, version, resolution


def resolve_model(
    *, partner: str, model: str, effort: str | None = None, identity: str | None = None
) -> dict[str, Any]:
    """`pair resolve`: how a model request resolves for a partner, without a session."""
    from pair.identity import identity_home
    from pair.partners import adapter_for

    adapter = adapter_for(partner)
    requested_identity = identity or "default"
    adapter.validate_staffing(
        model=model, effort=effort, identity=requested_identity, writable=False
    )
    home = identity_home(partner, requested_identity)
    binary, _, resolution = _binary_and_model(adapter, model, effort, home)
    document: dict[str, Any] = {
        "ok": True,
        "partner": partner,
        "identity": requested_identity,
        **resolution.to_json(),
    }
    if home is not None:
        document["identity_home"] = home
    if partner == "codex":
        document["codex_bin"] = binary
    if resolution.evidence:
        document["model_evidence"] = resolution.evidence
    return document


# -- send ------------------------------------------------------------------------------------


def send(
    repo: str | Path,
    *,
    kind: str,
    body: str | None = None,
    body_file: str | Path | None = None,
    lead: str | None = None,
    write: bool | None = None,
    background: bool = False,
    idle_min: float | str | None = None,
    total_min: float | str | None = None,
) -> dict[str, Any]:
    if kind not in TURN_KINDS:
        raise UsageError(
            "unknown-kind", f"unknown kind {kind!r} — use one of {', '.join(TURN_KINDS)}"
        )
    if body is None:
        if body_file is None:
            raise UsageError("missing-body", "send needs --body-file")
        try:
            body = Path(body_file).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError("no-body-file", f"no body file at {body_file}") from None
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(
                "no-body-file", f"cannot read body file {body_file}: {error}"
            ) from None
    if not body.strip():
        raise UsageError("empty-body", "the body is empty — a partner turn needs a message")
    idle = parse_minutes(idle_min, "--idle-min")
    total = parse_minutes(total_min, "--total-min")
    lead_name = resolve_lead(lead) if lead is not None else None
    root, paths = _paths(repo)
    session = _require_session(paths)
    version = _recheck_partner_cli(session)
    lease = write if write is not None else session.role == "executor"
    default_idle, default_total = default_budgets(kind, lease)
    idle = idle or default_idle
    total = total or default_total

    token = uuid.uuid4().hex
    launcher = current_identity(argv0="pair send")

    def build() -> Marker:
        # Read and saved under the marker lock: a slower concurrent send cannot reuse this
        # number, and a send killed right after it cannot either (the sequence advances before
        # the turn runs, before the marker even exists).
        nonlocal session
        session = _require_session(paths)
        session.seq += 1
        session.latest_kind = kind
        session.partner_bin_version = version
        save_session(paths, session)
        return Marker(
            seq=session.seq,
            kind=kind,
            owner_token=token,
            started_at=iso_z(),
            write=lease,
            idle_seconds=idle * 60,
            total_seconds=total * 60,
            launcher=launcher.to_json(),
        )

    seq = acquire_marker(paths, build, root).seq
    crash_point("pair-send", "marker")
    header_lead = lead_name or detect_lead() or session.lead
    prompt = f"[agent {header_lead} -> {session.partner} kind={kind} sid={session.sid}]\n\n"
    prompt += body.rstrip() + "\n"
    ensure_private_dir(paths.transcripts_dir)
    write_text_atomic(paths.turn_file(seq, kind, "-prompt.md"), prompt)
    running = _start_supervisor(paths, root, seq, kind, token)
    if background:
        return running
    return wait(root, seq=seq, timeout_min=(total * 60 + SYNC_SEND_SLACK_SECONDS) / 60)


def _recheck_partner_cli(session: Session) -> str | None:
    """Preflight again when the recorded binary's version moved (cached: free when unchanged)."""
    from pair.partners import adapter_for

    if not session.partner_bin:
        return session.partner_bin_version
    return adapter_for(session.partner).verify_cli(session.partner_bin)


def _start_supervisor(
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


# -- wait ------------------------------------------------------------------------------------


def _receipt_path(paths: PairPaths, session: Session, seq: int) -> Path | None:
    if seq == session.seq and session.latest_kind:
        return paths.turn_file(seq, session.latest_kind, "-receipt.json")
    try:
        names = os.listdir(paths.transcripts_dir)
    except FileNotFoundError:
        return None
    prefix = f"{seq:04d}-"
    for name in sorted(names):
        if name.startswith(prefix) and name.endswith("-receipt.json"):
            return paths.transcripts_dir / name
    return None


def wait(
    repo: str | Path, *, seq: int | None = None, timeout_min: float | str | None = None
) -> dict[str, Any]:
    minutes = parse_minutes(timeout_min, "--timeout-min") or DEFAULT_WAIT_MINUTES
    if seq is not None and seq < 1:
        raise UsageError("invalid-seq", f"--seq must be a positive integer, got {seq}")
    root, paths = _paths(repo)
    session = _require_session(paths)
    target = seq if seq is not None else session.seq
    if target < 1:
        raise UsageError(
            "invalid-seq", "no turn has been sent in this pair yet — send one before waiting"
        )
    started = time.monotonic()
    deadline = started + minutes * 60
    next_liveness_check = started
    while True:
        session = load_session(paths) or session
        receipt_path = _receipt_path(paths, session, target)
        receipt = read_receipt(receipt_path) if receipt_path else None
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            marker = None
        own_marker = marker if marker is not None and marker.seq == target else None
        now = time.monotonic()
        if receipt is not None:
            supervisor = ProcessIdentity.from_json(own_marker.supervisor) if own_marker else None
            if own_marker is None or not is_alive(supervisor):
                return receipt
        elif own_marker is not None:
            if now >= next_liveness_check:
                next_liveness_check = now + 1.0
                lost = _lost_reason(own_marker)
                if lost is not None:
                    return {
                        **_unfinished("worker-lost", root, target, own_marker.kind, lost),
                        "partner_pid": (own_marker.partner or {}).get("pid"),
                    }
        elif now - started > NO_MARKER_GRACE_SECONDS:
            return _unfinished(
                "worker-lost",
                root,
                target,
                None,
                "the turn has no receipt and no in-flight marker",
            )
        if now > deadline:
            kind = own_marker.kind if own_marker is not None else None
            return _unfinished(
                "wait-timeout", root, target, kind, f"no receipt appeared within {minutes:g}m"
            )
        # Closely at first: a short turn's receipt is usually there within a second.
        time.sleep(WAIT_POLL_SECONDS if now - started > 1.0 else WAIT_POLL_SECONDS / 5)


def _unfinished(status: str, root: Path, seq: int, kind: str | None, reason: str) -> dict[str, Any]:
    """`wait`'s own answer when there is no receipt: `worker-lost` or `wait-timeout`."""
    return {
        "ok": False,
        "status": status,
        **failure_fields(status, root=root, seq=seq, kind=kind),
        "seq": seq,
        "reason": reason,
    }


def _lost_reason(marker: Marker) -> str | None:
    """Why this marker's turn can no longer produce a receipt, or None while it still can."""
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    if supervisor is not None:
        if is_alive(supervisor):
            return None
        return f"the supervisor pid {supervisor.pid} exited before it wrote a receipt"
    launcher = ProcessIdentity.from_json(marker.launcher)
    if launcher is not None and is_alive(launcher):
        return None
    return "the turn's launcher exited before a supervisor took the turn"


# -- status ----------------------------------------------------------------------------------


def _turn_view(paths: PairPaths, seq: int, kind: str | None) -> dict[str, Any] | None:
    if seq < 1 or not kind:
        return None
    transcript = paths.turn_file(seq, kind, ".log")
    try:
        info = transcript.stat()
    except FileNotFoundError:
        return {
            "seq": seq,
            "kind": kind,
            "transcript": str(transcript),
            "bytes": 0,
            "last_output_at": None,
            "seconds_since_output": None,
        }
    return {
        "seq": seq,
        "kind": kind,
        "transcript": str(transcript),
        "bytes": info.st_size,
        "last_output_at": iso_from_epoch(info.st_mtime),
        "seconds_since_output": max(0, round(time.time() - info.st_mtime)),
    }


def read_status(state_dir: str | Path) -> dict[str, Any]:
    """The pair's state from its files alone: no subprocess, no lock, no vendor store walk.

    Reads `session.json`, `in-flight.json`, the current seq's receipt and a `stat` of the
    current transcript, so its cost never depends on transcript size.
    """
    paths = PairPaths(Path(state_dir))
    try:
        session = load_session(paths)
    except StateError as error:
        return {"ok": False, "code": error.code, "reason": error.reason}
    if session is None:
        return {
            "ok": False,
            "code": "no-pair-session",
            "reason": f"no pair session in {paths.state_dir}",
        }
    in_flight: dict[str, Any] | None
    try:
        marker = read_marker(paths)
    except MarkerUnreadable as error:
        marker = None
        in_flight = {"unreadable": str(paths.marker_file), "error": str(error)}
    else:
        in_flight = _marker_view(marker) if marker is not None else None
    seq, kind = session.seq, session.latest_kind
    receipt = None
    if seq >= 1 and kind:
        receipt = read_receipt(paths.turn_file(seq, kind, "-receipt.json"))
    turn_seq = marker.seq if marker is not None else seq
    turn_kind = marker.kind if marker is not None else kind
    return {
        "ok": True,
        **session_view(paths, session),
        "in_flight": in_flight,
        "latest_receipt": receipt,
        "turn": _turn_view(paths, turn_seq, turn_kind),
    }


def _marker_view(marker: Marker) -> dict[str, Any]:
    partner = ProcessIdentity.from_json(marker.partner)
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    alive = marker.live_pid() is not None  # the same test `clear` applies
    return {
        "seq": marker.seq,
        "kind": marker.kind,
        "started_at": marker.started_at,
        "write": marker.write,
        "partner_pid": partner.pid if partner else None,
        "supervisor_pid": supervisor.pid if supervisor else None,
        "heavy_queue": marker.heavy_queue,
        "alive": alive,
    }


def status(repo: str | Path) -> dict[str, Any]:
    _, paths = _paths(repo)
    session = _require_session(paths)
    view = read_status(paths.state_dir)
    # Only a positive absence counts: an unreadable store or a CLI without one says True.
    from pair.partners import adapter_for

    view["session_known"] = adapter_for(session.partner).session_known(
        session.sid, identity_home=session.identity_home, worktree=Path(session.worktree)
    )
    return view


def ended_receipt(
    state_dir: str | Path, seq: int, *, settle_seconds: float = 5.0
) -> dict[str, Any] | None:
    """The receipt of turn `seq` if that turn has already ended, else None.

    A turn whose partner has exited is over even while its supervisor is still writing the
    receipt: that receipt is waited for (up to `settle_seconds`). While the partner runs, None
    at once — nothing here waits on a running turn.
    """
    paths = PairPaths(Path(state_dir))
    deadline = time.monotonic() + settle_seconds
    while True:
        session = load_session(paths)
        receipt_path = _receipt_path(paths, session, seq) if session else None
        receipt = read_receipt(receipt_path) if receipt_path else None
        if receipt is not None and "unreadable" not in receipt:
            return receipt
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            return None
        if marker is None or marker.seq != seq:
            return None  # no receipt and no marker: `wait` calls that worker-lost
        partner = ProcessIdentity.from_json(marker.partner)
        if partner is None or is_alive(partner) or time.monotonic() > deadline:
            return None
        time.sleep(WAIT_POLL_SECONDS / 5)


# -- cancel ----------------------------------------------------------------------------------

CANCEL_GRACE_SECONDS = 5.0
# The supervisor's kill (SIGTERM, SIGKILL after 5 s), its sweep and its receipt, with slack.
CANCEL_WAIT_SECONDS = 20.0
DEFAULT_CANCEL_REASON = "cancelled by the lead"


def cancel(
    repo: str | Path, *, seq: int | None = None, reason: str | None = None
) -> dict[str, Any]:
    _, paths = _paths(repo)
    return cancel_state(paths.state_dir, seq=seq, reason=reason)


def cancel_state(
    state_dir: str | Path, *, seq: int | None = None, reason: str | None = None
) -> dict[str, Any]:
    """End the in-flight turn: its partner's group and every descendant get SIGTERM, SIGKILL
    after 5 s; the receipt says `cancelled` with `reason`; the marker is released.

    The supervisor does the work (it owns the receipt and is the subreaper of the partner's
    descendants): the reason goes into the marker, then the supervisor gets SIGTERM. When no
    supervisor is alive to do it, this does it itself. Returns only once no process of the turn
    is alive. Repeated on a cancelled turn it answers with the same receipt (`repeated: true`).
    """
    if seq is not None and seq < 1:
        raise UsageError("invalid-seq", f"--seq must be a positive integer, got {seq}")
    paths = PairPaths(Path(state_dir))
    session = _require_session(paths)
    why = (reason or "").strip() or DEFAULT_CANCEL_REASON
    marker = _request_cancel(paths, session, seq, why)
    if marker is None:
        target = seq if seq is not None else session.seq
        receipt_path = _receipt_path(paths, session, target)
        receipt = read_receipt(receipt_path) if receipt_path else None
        if receipt is not None and receipt.get("status") == "cancelled":
            return _cancel_document(receipt, repeated=True)
        raise _nothing_to_cancel(session, target, receipt)
    receipt = _await_cancel(paths, session, marker)
    if receipt.get("status") != "cancelled":
        raise _nothing_to_cancel(session, marker.seq, receipt)
    return _cancel_document(receipt, repeated=False)


def _request_cancel(paths: PairPaths, session: Session, seq: int | None, why: str) -> Marker | None:
    """Record the cancel in the marker of the turn in flight; None when none (or not `seq`)."""
    with marker_mutex(paths):
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            raise StateError(
                "marker-unreadable",
                f"the in-flight marker {paths.marker_file} cannot be read — inspect it, confirm "
                "no partner process remains, then run pair clear",
                next_step=f"pair clear --repo {session.worktree}",
            ) from None
        if marker is None or (seq is not None and marker.seq != seq):
            return None
        if marker.seq == 0:
            raise StateError(
                "bootstrap-in-flight",
                f"a bootstrap is in flight in {paths.state_dir}, not a turn — interrupt the pair "
                "init that runs it",
                next_step="interrupt the running pair init (or unit create); then pair clear",
            )
        if marker.cancel is None:  # a cancel already asked is waited for, not asked again
            marker.cancel = {"reason": why, "requested_at": iso_z()}
            write_marker(paths, marker)
        return marker


def _await_cancel(paths: PairPaths, session: Session, marker: Marker) -> dict[str, Any]:
    """Signal the turn's supervisor until its receipt is written and the marker released; kill
    the turn here when no supervisor is left to do it. The receipt."""
    receipt_file = paths.turn_file(marker.seq, marker.kind, "-receipt.json")
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    signalled: set[int] = set()
    while True:
        try:
            current = read_marker(paths)
        except MarkerUnreadable:
            current = marker
        if current is None or current.owner_token != marker.owner_token:
            receipt = read_receipt(receipt_file)
            if receipt is not None and "unreadable" not in receipt:
                _confirm_dead(marker)
                return receipt
        else:
            marker = current  # the latest view: the partner may have been recorded since
            supervisor = ProcessIdentity.from_json(marker.supervisor)
            launcher = ProcessIdentity.from_json(marker.launcher)
            stuck = time.monotonic() > deadline
            if supervisor is not None and is_alive(supervisor) and not stuck:
                if supervisor.pid not in signalled:
                    os.kill(supervisor.pid, signal.SIGTERM)
                    signalled.add(supervisor.pid)
            elif supervisor is not None or stuck or not is_alive(launcher):
                # Nobody left (or able) to write the receipt: a dead supervisor, a send killed
                # before its supervisor took the turn, or a supervisor that does not answer.
                if supervisor is not None:
                    kill_tree(supervisor, grace_seconds=0.0)
                receipt = _cancel_unsupervised(paths, session, marker)
                if receipt is not None:
                    _confirm_dead(marker)
                    return receipt
        time.sleep(WAIT_POLL_SECONDS)


def _cancel_unsupervised(
    paths: PairPaths, session: Session, marker: Marker
) -> dict[str, Any] | None:
    """Kill what remains of a turn with no supervisor, write its receipt and release its marker;
    None when the marker stopped being this turn's meanwhile (its supervisor finished)."""
    from pair.receipts import minimal_receipt

    partner = ProcessIdentity.from_json(marker.partner)
    killed = kill_tree(partner, grace_seconds=CANCEL_GRACE_SECONDS) if partner else []
    why = str((marker.cancel or {}).get("reason") or DEFAULT_CANCEL_REASON)
    receipt = minimal_receipt(
        paths,
        session,
        marker,
        status="cancelled",
        reason=f"cancelled: {why} (no supervisor was left; cancel stopped the partner itself)",
        supervisor_pid=(marker.supervisor or {}).get("pid"),
        started_at=None,
        leftovers=[{"pid": pid, "argv": []} for pid in killed if partner and pid != partner.pid],
    )
    with marker_mutex(paths):
        try:
            current = read_marker(paths)
        except MarkerUnreadable:
            current = marker
        if current is None or current.owner_token != marker.owner_token:
            return None
        write_text_atomic(Path(receipt["receipt_file"]), json.dumps(receipt, indent=2) + "\n")
        remove_file(paths.marker_file)
    return receipt


def _confirm_dead(marker: Marker) -> None:
    """No process of the cancelled turn may be alive when cancel returns."""
    partner = ProcessIdentity.from_json(marker.partner)
    if partner is not None and (
        is_alive(partner) or (partner.pgid is not None and group_members(partner.pgid))
    ):
        kill_tree(partner, grace_seconds=CANCEL_GRACE_SECONDS)
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    # It has written its receipt and released the marker: it only has to exit.
    if supervisor is not None and not _gone_within(supervisor, CANCEL_GRACE_SECONDS):
        kill_tree(supervisor, grace_seconds=0.0)


def _gone_within(identity: ProcessIdentity, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while is_alive(identity):
        if time.monotonic() > deadline:
            return False
        time.sleep(WAIT_POLL_SECONDS)
    return True


def _nothing_to_cancel(session: Session, seq: int, receipt: dict[str, Any] | None) -> StateError:
    ended = f" — seq {seq} already ended {receipt.get('status')}" if receipt else ""
    return StateError(
        "no-turn-in-flight",
        f"no turn is in flight in {session.worktree}{ended}",
        detail={"seq": seq, "receipt": receipt},
        next_step=f"pair status --repo {session.worktree}",
    )


def _cancel_document(receipt: dict[str, Any], *, repeated: bool) -> dict[str, Any]:
    return {
        "ok": True,
        "status": "cancelled",
        "seq": receipt.get("seq"),
        "reason": receipt.get("reason"),
        "repeated": repeated,
        "receipt": receipt,
    }


# -- clear / end -----------------------------------------------------------------------------


def clear(repo: str | Path) -> dict[str, Any]:
    _, paths = _paths(repo)
    return clear_state(paths.state_dir)


def clear_state(state_dir: str | Path) -> dict[str, Any]:
    """`clear` for a known state dir (works when the worktree directory itself is gone)."""
    paths = PairPaths(Path(state_dir))
    if not paths.marker_file.exists():
        # Nothing to clear, and nothing written (not even the marker lock) where no pair is.
        return {"ok": True, "status": "already-cleared", "lock_file": str(paths.marker_file)}
    with marker_mutex(paths):
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            raise StateError(
                "marker-unreadable",
                f"the in-flight marker {paths.marker_file} cannot be read — inspect it by hand "
                "and remove it once no partner process remains",
            ) from None
        if marker is None:
            return {"ok": True, "status": "already-cleared", "lock_file": str(paths.marker_file)}
        pid = marker.live_pid()
        if pid is not None:
            raise StateError(
                "turn-in-flight",
                f"seq {marker.seq} is still in flight as pid {pid} — clear it only after that "
                "process is gone",
                detail={"seq": marker.seq, "pid": pid},
            )
        remove_file(paths.marker_file)
    return {
        "ok": True,
        "status": "cleared",
        "lock_file": str(paths.marker_file),
        "marker": marker.to_json(),
    }


def end(repo: str | Path) -> dict[str, Any]:
    _, paths = _paths(repo)
    return end_state(paths.state_dir)


def end_state(state_dir: str | Path) -> dict[str, Any]:
    """`end` for a known state dir (works when the worktree directory itself is gone)."""
    paths = PairPaths(Path(state_dir))
    _require_session(paths)  # refuses before the marker lock creates anything
    with marker_mutex(paths):
        if paths.marker_file.exists():
            raise StateError(
                "turn-in-flight",
                f"a turn is in flight (or its marker remains) at {paths.marker_file} — wait for "
                "it to finish, or run pair clear first",
            )
        session = _require_session(paths)
        # Ending keeps the record of the session: it moves into ended/ (archived by dismantle),
        # so a later init in this worktree starts clean without losing a transcript.
        destination = paths.ended_dir / f"{stamp()}-{session.sid}"
        ensure_private_dir(destination)
        if paths.transcripts_dir.exists():
            shutil.move(str(paths.transcripts_dir), str(destination / "transcripts"))
        shutil.move(str(paths.session_file), str(destination / "session.json"))
    return {"ok": True, "status": "ended", "sid": session.sid, "ended_dir": str(destination)}


def close_state(state_dir: str | Path) -> dict[str, Any]:
    """Clear a dead turn's marker, then end the session if there is one: what a unit does before
    it replaces or removes a pair. `{"cleared": status | None, "ended_dir": path | None}`.
    A live turn is refused (`turn-in-flight`)."""
    paths = PairPaths(Path(state_dir))
    cleared = clear_state(paths.state_dir)["status"] if paths.marker_file.exists() else None
    ended = end_state(paths.state_dir)["ended_dir"] if paths.session_file.exists() else None
    return {"cleared": cleared, "ended_dir": ended}
