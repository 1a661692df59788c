"""The bootstrap turn `pair init` runs for a streaming partner (SPEC 4.1 `init`).

It is a read-only turn in the foreground of `init`, holding the in-flight marker (seq 0, kind
`init`) so a concurrent or resumed init refuses and `pair clear` recovers a dead one. Its only
purpose is a resumable session id; for Claude it also reads the model the CLI actually runs.
Pair grants the lease, writes the prompt and judges the result here; the runner
(`pair.runners.base.TurnRunner.bootstrap`) runs the partner, as it runs every other turn.
Files: `transcripts/0000-init.log`, `-prompt.md`, `-reply.md`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pair.errors import StateError, UsageError
from pair.models import Resolution, check_claude_family
from pair.partners.base import Partner, TurnRequest
from pair.paths import PairPaths
from pair.runners.base import BootstrapTurn, TurnLease
from pair.session_trust import sign_session
from pair.state import (
    BOOTSTRAP_KIND,
    Marker,
    Session,
    acquire_marker,
    load_session,
    release_owned_marker,
    save_session,
)
from pair.turn import DEFAULT_BUDGET_MINUTES
from registry.atomic import write_text_atomic
from registry.ids import uuid4, uuid4_hex
from registry.processes import ProcessIdentity, current_identity
from registry.timeutil import iso_z

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

BOOTSTRAP_IDLE_MINUTES, BOOTSTRAP_TOTAL_MINUTES = DEFAULT_BUDGET_MINUTES
ROLE_LINES = {
    "executor": "You are the executor: you hold the write leases by default and implement; the "
    "lead plans and reviews.",
    "peer": "You and the lead are peers: you split scopes and review each other's `ready`.",
}


def bootstrap_prompt(*, lead: str, partner: str, root: str, role: str) -> str:
    return "\n".join(
        [
            f"You are the {partner} pair partner of a {lead} lead working in {root}.",
            ROLE_LINES.get(role, ROLE_LINES["peer"]),
            "This session persists: every later message resumes it, so keep what you learn.",
            "Each message starts with a header `[agent <from> -> <to> kind=<kind> sid=<sid>]`.",
            "Kinds: task (work and its write lease), review (read and judge), question (answer "
            "it), ready (work finished, please review), accepted (review passed), blocked "
            "(cannot go on), stalemate (the same disagreement twice), handoff (pass the work on).",
            "A turn that carries a write lease runs with full write permissions; any other turn "
            "is read-only, so propose diffs instead of editing.",
            "During long work keep printing progress: a watchdog ends turns that stay silent.",
            "Your reply is the final message of each run.",
            "Reply now with one or two lines saying you are ready.",
        ]
    )


def grant_bootstrap(
    paths: PairPaths, worktree: Path, *, idle_minutes: float, total_minutes: float
) -> TurnLease:
    """Take the in-flight marker for the bootstrap (seq 0, kind `init`): pair's lease, as
    `pair.commands.send.grant_turn` is a turn's. Refuses `bootstrap-in-flight` while another
    init holds it, and `pair-exists` when another init finished first."""
    token = uuid4_hex()

    def build() -> Marker:
        existing = load_session(paths)
        if existing is not None:  # another init finished first, while this one waited
            raise StateError(
                "pair-exists",
                f"a {existing.partner} pair was just created here (sid {existing.sid}) — run "
                "pair init again to resume it",
            )
        return Marker(
            seq=0,
            kind=BOOTSTRAP_KIND,
            owner_token=token,
            started_at=iso_z(),
            write=False,
            idle_seconds=idle_minutes * 60,
            total_seconds=total_minutes * 60,
            launcher=current_identity(argv0="pair init").to_json(),
        )

    try:
        acquire_marker(paths, build, worktree)
    except StateError as error:
        if error.code != "turn-in-flight":
            raise
        raise StateError(
            "bootstrap-in-flight",
            f"a bootstrap is in flight in {paths.state_dir} — wait for it to finish",
            detail=error.detail,
        ) from None
    return TurnLease(epoch=0, token=token, write=False)


def run_bootstrap(
    adapter: Partner,
    session: Session,
    resolution: Resolution,
    paths: PairPaths,
    *,
    on_partner_start: Callable[[ProcessIdentity], None] | None = None,
    idle_minutes: float = BOOTSTRAP_IDLE_MINUTES,
    total_minutes: float = BOOTSTRAP_TOTAL_MINUTES,
    key_id: str,
) -> tuple[Session, dict[str, Any]]:
    """Run the bootstrap turn and save the session it completes, signed with the lead's key
    `key_id` (SPEC 8: the sid and resolved model it learns are signed fields)."""
    lease = grant_bootstrap(
        paths, Path(session.worktree), idle_minutes=idle_minutes, total_minutes=total_minutes
    )
    try:
        session, document = _bootstrap(
            adapter,
            session,
            resolution,
            paths,
            BootstrapTurn(
                lease=lease,
                request=bootstrap_request(adapter, session, resolution, paths),
                idle_seconds=idle_minutes * 60,
                total_seconds=total_minutes * 60,
                partner_home=session.identity_home,
                unit=session.unit,
            ),
            on_partner_start,
        )
        sign_session(paths, session, key_id)
        save_session(paths, session)  # before the marker goes: no gap for a second init
        return session, document
    finally:
        release_owned_marker(paths, lease.token)


def bootstrap_request(
    adapter: Partner, session: Session, resolution: Resolution, paths: PairPaths
) -> TurnRequest:
    """The bootstrap's command line, its prompt file written."""
    prompt_file = paths.turn_file(0, BOOTSTRAP_KIND, "-prompt.md")
    preset = uuid4() if adapter.name == "grok" else ""  # grok takes our session id
    write_text_atomic(
        prompt_file,
        bootstrap_prompt(
            lead=session.lead, partner=session.partner, root=session.worktree, role=session.role
        )
        + "\n",
    )
    return TurnRequest(
        partner=session.partner,
        sid=preset,
        seq=0,
        kind=BOOTSTRAP_KIND,
        write=False,
        model=resolution.cli_model,
        effort=session.effort,
        worktree=Path(session.worktree),
        prompt_file=prompt_file,
        reply_file=paths.turn_file(0, BOOTSTRAP_KIND, "-reply.md"),
        bootstrap=True,
        partner_bin=session.partner_bin,
    )


def _bootstrap(
    adapter: Partner,
    session: Session,
    resolution: Resolution,
    paths: PairPaths,
    turn: BootstrapTurn,
    on_partner_start: Callable[[ProcessIdentity], None] | None,
) -> tuple[Session, dict[str, Any]]:
    from pair.runners import runner_for

    transcript = paths.transcript_file(0, BOOTSTRAP_KIND)
    reply_file = turn.request.reply_file
    # The session is saved only once this turn gave it its id: the runner is the one it names.
    runner = runner_for(paths.state_dir, session=session)
    result = runner.bootstrap(turn, on_partner_start=on_partner_start)
    binary = Path(session.partner_bin or adapter.binary_name).name
    outcome = result.outcome
    detail = {"transcript": str(transcript), "seconds": result.seconds}
    if result.status == "hang-killed":
        raise StateError(
            "bootstrap-hang", f"{outcome.reason} (during init) — see {transcript}", detail=detail
        )
    if result.exit_code not in (0, None) or (
        result.status == "failed" and result.exit_code is None
    ):
        raise StateError(
            "bootstrap-failed",
            f"{binary} {_failure(result.exit_code, outcome.reason)} during init — see {transcript}",
            detail=detail,
        )
    sid = outcome.sid or turn.request.sid
    if not sid:
        raise StateError(
            "no-session-id",
            f"{binary} produced no session id — a pair needs a resumable session; see {transcript}",
            detail=detail,
        )
    if result.status == "failed":
        raise StateError(
            "bootstrap-failed",
            f"{binary} reported {outcome.reason} during init — the {session.partner} session "
            f"{sid} exists in its store but no pair was recorded; see {transcript}",
            detail=detail,
        )
    if session.partner == "claude":
        reported = outcome.extra.get("model")
        try:
            check_claude_family(resolution, reported if isinstance(reported, str) else None)
        except UsageError as error:  # the family differs; anything else is a bug: it shows
            raise StateError(
                "model-mismatch",
                f"{error}; the bootstrap session {sid} exists in Claude's store but no pair was "
                f"recorded; see {transcript}",
                detail=detail,
                next_step=f"--model: an exact {resolution.family or 'claude'} model id",
            ) from None
        if isinstance(reported, str):
            session.model_resolved = reported
            session.resolved_at = iso_z()
    if outcome.reply:
        write_text_atomic(reply_file, outcome.reply + "\n")
    session.sid = sid
    return session, {
        "transcript": str(transcript),
        "reply_file": str(reply_file) if outcome.reply else None,
        "seconds": result.seconds,
        "leftovers": result.leftovers,  # what the partner left running, killed (SPEC 8)
    }


def _failure(exit_code: int | None, reason: str | None) -> str:
    return f"exited {exit_code}" if exit_code not in (0, None) else f"failed ({reason})"
