"""`pair init` (SPEC 4.1): create the worktree's pair session, or resume the one already there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pair.commands.shared import locate_paths, parse_minutes, resolve_lead, session_view
from pair.environment import is_session_variable, partner_environment
from pair.errors import StateError, UsageError
from pair.paths import PairPaths
from pair.session_trust import lead_key_id, sign_session
from pair.state import (
    MarkerUnreadable,
    Session,
    load_session,
    marker_mutex,
    read_marker,
    save_session,
)
from registry.atomic import ensure_private_dir
from registry.ids import uuid4
from registry.processes import ProcessIdentity
from registry.timeutil import iso_z

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from pair.models import Resolution
    from pair.partners.base import Partner
    from pair.runners.choice import RunnerChoice

ROLES = ("peer", "executor")


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
    unit: str | None = None,
    notify: dict[str, Any] | None = None,
    environment: dict[str, str] | None = None,
    runner: RunnerChoice | None = None,
) -> dict[str, Any]:
    """Create the worktree's pair session, or resume the one already there.

    A streaming partner runs a read-only bootstrap turn to obtain a resumable session id, holding
    the in-flight marker meanwhile; `on_partner_start` receives the bootstrap's process identity
    before anything waits on it (unit journals it). `branch` is the branch the session's
    writable turns may move (the ref audit); without it, each turn allows the worktree's branch.
    `unit` names the unit the pair works for: every turn's partner gets it as `UNITMGR_UNIT`.
    `notify` (a `registry.notify.Target` as JSON) is stored in the session: its supervisors
    deliver `turn-ended` and `attention` to it; a resumed session takes the one passed now.
    `environment` holds variables every turn's partner gets (stored in the session; a resumed
    session takes the ones passed now); a name pair sets itself or a loader reads is refused.
    `runner` (a `pair.runners.RunnerChoice`) is where its turns run (SPEC 4.3; None: this
    machine, or a resumed session's own); it is stored signed by the lead, so a choice an
    executor writes into the session is refused. Choosing `ray` needs Ray importable
    (`runner-unavailable`) and, for a non-loopback address, Ray's token auth
    (`ray-auth-required`).
    """
    from pair.bootstrap import BOOTSTRAP_IDLE_MINUTES, BOOTSTRAP_TOTAL_MINUTES, run_bootstrap
    from pair.identity import identity_home, refuse_same_cli
    from pair.partners import adapter_for

    adapter = adapter_for(partner)  # an unknown partner is refused first
    for name, value in (environment or {}).items():
        if not is_session_variable(name, value):
            raise ValueError(f"pair init cannot set {name!r} in the partner's environment")
    if role not in ROLES:
        raise UsageError(
            "unknown-role",
            f"unknown role {role!r} — use peer or executor",
            next_step="--role: peer or executor",
        )
    if runner is not None:
        from pair.runners import check_choice

        check_choice(runner)
    lead_name = resolve_lead(lead)
    requested_identity = identity or "default"
    idle = parse_minutes(idle_min, "--idle-min") or BOOTSTRAP_IDLE_MINUTES
    total = parse_minutes(total_min, "--total-min") or BOOTSTRAP_TOTAL_MINUTES
    root, paths = locate_paths(repo)
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
        changes: dict[str, Any] = {}
        if notify is not None and notify != existing.notify:
            changes["notify"] = notify
        if environment is not None and environment != (existing.environment or {}):
            changes["environment"] = environment
        if runner is not None:  # the lead chose again: signed afresh, whatever was stored
            changes["runner"] = _signed(paths, runner)
        if changes:
            existing = _store(paths, existing, changes)
        return {"ok": True, "status": "resumed", **session_view(paths, existing)}
    adapter.validate_staffing(
        model=model, effort=effort, identity=requested_identity, writable=role == "executor"
    )
    home = identity_home(partner, requested_identity)
    refuse_same_cli(lead=lead_name, partner=partner, partner_home=home)
    _refuse_existing_marker(paths, root)
    adapter.preflight(model=model, worktree=root)
    binary, version, resolution = binary_and_model(adapter, model, effort, home)
    session = Session(
        partner=partner,
        sid=f"script-{uuid4()}" if partner == "script" else "",
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
        unit=unit,
        notify=notify,
        environment=environment or None,
        runner=_signed(paths, runner) if runner is not None else None,
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
            key_id=lead_key_id(paths),
        )
    else:
        sign_session(paths, session, lead_key_id(paths))
        save_session(paths, session)
    return {"ok": True, "status": "created", **session_view(paths, session), **document}


def _signed(paths: PairPaths, runner: RunnerChoice) -> dict[str, Any] | None:
    from pair.runners.choice import sign_choice

    return sign_choice(paths.state_dir, runner)


def _store(paths: PairPaths, session: Session, changes: dict[str, Any]) -> Session:
    """The session with `changes` (`notify`, `environment`, `runner`) saved in it, under the
    marker mutex (a supervisor may be saving its own change to the session right now)."""
    with marker_mutex(paths):
        current = load_session(paths) or session
        for name, value in changes.items():
            setattr(current, name, value or None)
        save_session(paths, current)
    return current


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


def binary_and_model(
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
