"""Admission capacity (SPEC 3.2, 3.3): how many more units may start.

Every unit counts `active` unless live PR state says it is `held` (an open, ready PR awaiting
review) or `merged`; any lifecycle other than `working` is `active`. Until GitHub is configured
every recorded unit counts `active` and `pr_state` is "not-configured".

    slots = max(0, min(max_active - active, max_held - held - active))
"""

from __future__ import annotations

from typing import Any

from registry.errors import StateError
from registry.records import UnitRecord
from registry.store import UnreadableRecord


def compute(
    entries: list[UnitRecord | UnreadableRecord], *, max_active: int, max_held: int
) -> dict[str, Any]:
    unreadable = [entry for entry in entries if isinstance(entry, UnreadableRecord)]
    if unreadable:
        raise StateError(
            "admission-paused",
            "admission paused: unreadable unit record "
            + ", ".join(entry.unit_id for entry in unreadable),
            detail={"unreadable": [entry.to_json() for entry in unreadable]},
            next_step="inspect the record; `unit dismantle --unit ID --force ID` removes it",
        )
    units = []
    for entry in entries:
        assert isinstance(entry, UnitRecord)
        units.append(
            {"unit_id": entry.unit_id, "issue": entry.issue, "state": "active", "pr": None}
        )
    active = sum(1 for unit in units if unit["state"] == "active")
    held = sum(1 for unit in units if unit["state"] == "held")
    return {
        "max_active": max_active,
        "max_held": max_held,
        "active": active,
        "held": held,
        "slots": max(0, min(max_active - active, max_held - held - active)),
        "pr_state": "not-configured",
        "units": units,
    }
