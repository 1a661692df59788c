"""`pair send` (SPEC 4.1): take the in-flight lock, advance `seq`, write the prompt, start the
turn."""

from __future__ import annotations

from pathlib import Path

from pair.commands.shared import (
    default_budgets,
    locate_paths,
    parse_minutes,
    require_session,
    resolve_lead,
)
from pair.commands.wait import wait
from pair.environment import detect_lead
from pair.errors import UsageError
from pair.git import head_commit
from pair.paths import PairPaths
from pair.runners import runner_for
from pair.runners.base import TurnLease, TurnStart
from pair.session_trust import require_trusted
from pair.state import TURN_KINDS, Marker, Session, acquire_marker, crash_point, save_session
from registry.atomic import ensure_private_dir, write_text_atomic
from registry.ids import uuid4_hex
from registry.light_dataclass import dataclass
from registry.processes import current_identity
from registry.timeutil import iso_z

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

SYNC_SEND_SLACK_SECONDS = 60.0


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
    _check_kind(kind)  # before the body: a bad kind is named first
    if body is None:
        if body_file is None:
            raise UsageError(
                "missing-body", "send needs --body-file", next_step="--body-file: the message file"
            )
        try:
            body = Path(body_file).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(
                "no-body-file",
                f"no body file at {body_file}",
                next_step=f"--body-file: a file that exists ({body_file} does not)",
            ) from None
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(
                "no-body-file", f"cannot read body file {body_file}: {error}"
            ) from None
    # Chosen (and its choice verified, SPEC 4.3) before the lease: a refusal holds nothing.
    located = locate_paths(repo)
    runner = runner_for(located[1].state_dir)
    granted = grant_turn(
        repo,
        kind=kind,
        body=body,
        lead=lead,
        write=write,
        idle_min=idle_min,
        total_min=total_min,
        located=located,
    )
    running = runner.start(granted.turn)
    if background:
        return running
    return wait(
        granted.turn.worktree,
        seq=granted.turn.seq,
        timeout_min=(granted.total_minutes * 60 + SYNC_SEND_SLACK_SECONDS) / 60,
    )


@dataclass(frozen=True)
class Granted:
    paths: PairPaths
    turn: TurnStart
    total_minutes: float


def grant_turn(
    repo: str | Path,
    *,
    kind: str,
    body: str,
    lead: str | None = None,
    write: bool | None = None,
    idle_min: float | str | None = None,
    total_min: float | str | None = None,
    located: tuple[Path, PairPaths] | None = None,
) -> Granted:
    """All `send` does before a runner is asked: check the turn, take the in-flight lock (the
    turn's lease, at the next seq) and write the prompt. The same for every runner.
    `located`: `locate_paths(repo)` when the caller has it (one git process fewer, SPEC 7)."""
    _check_kind(kind)
    if not body.strip():
        raise UsageError(
            "empty-body",
            "the body is empty — a partner turn needs a message",
            next_step="--body-file: a file holding the message",
        )
    idle = parse_minutes(idle_min, "--idle-min")
    total = parse_minutes(total_min, "--total-min")
    lead_name = resolve_lead(lead) if lead is not None else None
    root, paths = located if located is not None else locate_paths(repo)
    # Before its binary is asked its version: a session an executor rewrote runs nothing.
    session = require_trusted(paths, require_session(paths), root)
    version = _recheck_partner_cli(session)
    base_commit = head_commit(root)
    lease = write if write is not None else session.role == "executor"
    default_idle, default_total = default_budgets(kind, lease)
    idle = idle or default_idle
    total = total or default_total

    token = uuid4_hex()
    launcher = current_identity(argv0="pair send")

    def build() -> Marker:
        # Read and saved under the marker lock: a slower concurrent send cannot reuse this
        # number, and a send killed right after it cannot either (the sequence advances before
        # the turn runs, before the marker even exists).
        nonlocal session
        session = require_trusted(paths, require_session(paths), root)
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
            # In the marker from its first write: the receipt names it, and no runner need
            # rewrite the marker to add it before its supervisor reads it.
            base_commit=base_commit,
        )

    seq = acquire_marker(paths, build, root).seq
    crash_point("pair-send", "marker")
    header_lead = lead_name or detect_lead() or session.lead
    prompt = f"[agent {header_lead} -> {session.partner} kind={kind} sid={session.sid}]\n\n"
    prompt += body.rstrip() + "\n"
    ensure_private_dir(paths.transcripts_dir)
    write_text_atomic(paths.turn_file(seq, kind, "-prompt.md"), prompt)

    return Granted(
        paths=paths,
        turn=TurnStart(
            kind=kind,
            lease=TurnLease(epoch=seq, token=token, write=lease),
            worktree=root,
            base_commit=base_commit,
        ),
        total_minutes=total,
    )


def _check_kind(kind: str) -> None:
    if kind not in TURN_KINDS:
        raise UsageError(
            "unknown-kind",
            f"unknown kind {kind!r} — use one of {', '.join(TURN_KINDS)}",
            next_step=f"--kind: one of {', '.join(TURN_KINDS)}",
        )


def _recheck_partner_cli(session: Session) -> str | None:
    """Preflight again when the recorded binary's version moved (cached: free when unchanged)."""
    from pair.partners import adapter_for

    if not session.partner_bin:
        return session.partner_bin_version
    return adapter_for(session.partner).verify_cli(session.partner_bin)
