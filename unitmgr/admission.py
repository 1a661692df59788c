"""Admission capacity (SPEC 3.2, 3.3): how many more units may start.

Per unit, from its record and its branch's live PR state: an open draft PR or no PR is
`active`; an open ready PR is `held` (awaiting human review); a merged PR is `merged`; any
lifecycle other than `working` is `active` whatever the PR says. Without GitHub every recorded unit
counts `active` and `pr_state` is "not-configured".

    slots = max(0, min(max_active - active, max_held - held - active))

Admission pauses (exit 1) on an unreadable record or two open PRs for one branch, and (exit 75)
when live PR state cannot be read within the retry bound.
"""

from __future__ import annotations

from typing import Any

from registry.errors import RetryableError, StateError
from registry.records import UnitRecord
from registry.store import UnreadableRecord
from registry.timeutil import parse_iso
from unitmgr.forge import Forge, PullRequest


def refuse_unreadable(entries: list[UnitRecord | UnreadableRecord]) -> list[UnitRecord]:
    unreadable = [entry for entry in entries if isinstance(entry, UnreadableRecord)]
    if unreadable:
        raise StateError(
            "admission-paused",
            "admission paused: unreadable unit record "
            + ", ".join(entry.unit_id for entry in unreadable),
            detail={"unreadable": [entry.to_json() for entry in unreadable]},
            next_step="inspect the record; `unit dismantle --unit ID --force ID` removes it",
        )
    return [entry for entry in entries if isinstance(entry, UnitRecord)]


def live_pr_state(
    forge: Forge | None, records: list[UnitRecord]
) -> dict[str, list[PullRequest]] | None:
    """Each recorded branch's pull requests, or None when GitHub is not configured."""
    if forge is None:
        return None
    found: dict[str, list[PullRequest]] = {}
    for record in records:
        try:
            found[record.unit_id] = forge.pulls_for_branch(record.branch)
        except RetryableError as error:
            raise RetryableError(
                "admission-paused",
                "admission paused: cannot read live PR state",
                detail={"unit": record.unit_id, "cause": error.reason},
                next_step="try again later",
            ) from None
    return found


def merged_since_created(record: UnitRecord, pull: PullRequest) -> bool:
    """A merged PR that belongs to this unit, not to an earlier one that used the same branch
    name (dismantle deletes a branch, so a name can come back): merged after the unit began."""
    if pull.state != "merged" or not pull.merged_at:
        return False
    if not record.created_at:
        return True
    try:
        # GitHub stamps whole seconds: a merge in the unit's first second still counts.
        return parse_iso(pull.merged_at) >= parse_iso(record.created_at).replace(microsecond=0)
    except ValueError:
        return False


def unit_state(
    record: UnitRecord, pulls: list[PullRequest] | None
) -> tuple[str, PullRequest | None]:
    if pulls is None:
        return "active", None
    open_pulls = [pull for pull in pulls if pull.state == "open"]
    if len(open_pulls) > 1:
        raise StateError(
            "admission-paused",
            f"admission paused: {len(open_pulls)} open PRs for branch {record.branch} of unit "
            f"{record.unit_id}",
            detail={"unit": record.unit_id, "pulls": [pull.to_json() for pull in open_pulls]},
            next_step="close all but one of those pull requests",
        )
    if record.lifecycle != "working":
        return "active", open_pulls[0] if open_pulls else None
    if open_pulls:
        return ("active" if open_pulls[0].draft else "held"), open_pulls[0]
    merged = [pull for pull in pulls if merged_since_created(record, pull)]
    if merged:
        return "merged", merged[0]
    return "active", None


def compute(
    entries: list[UnitRecord | UnreadableRecord],
    *,
    max_active: int,
    max_held: int,
    pulls: dict[str, list[PullRequest]] | None = None,
) -> dict[str, Any]:
    records = refuse_unreadable(entries)
    units = []
    for record in records:
        state, pull = unit_state(record, None if pulls is None else pulls.get(record.unit_id, []))
        units.append(
            {
                "unit_id": record.unit_id,
                "issue": record.issue,
                "state": state,
                "pr": pull.url if pull else None,
            }
        )
    active = sum(1 for unit in units if unit["state"] == "active")
    held = sum(1 for unit in units if unit["state"] == "held")
    return {
        "max_active": max_active,
        "max_held": max_held,
        "active": active,
        "held": held,
        "slots": max(0, min(max_active - active, max_held - held - active)),
        "pr_state": "not-configured" if pulls is None else "live",
        "units": units,
    }
