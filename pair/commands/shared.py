"""What several pair commands share: finding a worktree's pair files and session, the lead, budget
minutes, and the session's view.

It reads files and makes one git call (`locate_paths`); it starts and signals nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

from pair.environment import detect_lead
from pair.errors import StateError, UsageError
from pair.git import locate
from pair.partners import LEADS
from pair.paths import PairPaths, state_dir_for
from pair.state import Session, load_session

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

WAIT_POLL_SECONDS = 0.05


def paths_for(worktree: str | Path) -> PairPaths:
    """The pair files of `worktree` (one git call: its absolute git dir)."""
    return locate_paths(worktree)[1]


def paths_at(state_dir: str | Path) -> PairPaths:
    """The pair files under a known state dir (no git call; the worktree may be gone)."""
    return PairPaths(Path(state_dir))


def locate_paths(repo: str | Path) -> tuple[Path, PairPaths]:
    place = locate(repo)
    return place.root, PairPaths(state_dir_for(place.git_dir))


def require_session(paths: PairPaths) -> Session:
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
            "invalid-budget",
            f"{option} must be a positive number of minutes, got {value}",
            next_step=f"{option}: a positive number of minutes, e.g. {option} 30",
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
