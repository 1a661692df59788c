"""Executor-written strings and numbers that reach the lead's views (SPEC 2.5, 8).

A record is the executor's to write: one planted field must not take down `status --all` (every
unit's overview) or `watch`, and never reaches a terminal raw.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Sandbox, write_record


@pytest.mark.parametrize("counts", [{"ci": "many"}, {"review": [1]}, {"withheld": {"n": 1}}])
def test_planted_feedback_counts_do_not_take_down_the_overview(
    sandbox: Sandbox, counts: dict[str, object]
) -> None:
    write_record(sandbox, "u8")
    planted = {"ci": 1, "review": 0, "withheld": 0, **counts}
    write_record(sandbox, "u9", feedback={"counts": planted})
    listed = sandbox.unit("status", "--all")
    assert listed.code == 0, listed.stdout
    assert sorted(unit["unit_id"] for unit in listed["units"]) == ["u8", "u9"]
    one = sandbox.unit("status", "--unit", "u9")
    assert one.code == 0, one.stdout
    table = sandbox.unit("status", "--all", "--format", "table")
    assert table.code == 0, table.stdout


def test_a_flooded_session_store_is_read_to_a_bound(tmp_path: Path) -> None:
    """A partner's session store is the executor's to fill: `store_has` reads entry by entry
    and past its bound answers as for a store it cannot read (the session is not lost)."""
    from pair.partners import base

    store = tmp_path / "sessions"
    store.mkdir()
    for n in range(base.STORE_ENTRIES + 50):
        (store / f"f{n}").touch()
    assert base.store_has(store, "the-sid") is True  # not a full scan that says "lost"
    small = tmp_path / "small"
    (small / "2026" / "12").mkdir(parents=True)
    (small / "2026" / "12" / "rollout-the-sid.jsonl").touch()
    assert base.store_has(small, "the-sid") is True
    assert base.store_has(small, "another-sid") is False
