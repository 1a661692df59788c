"""Executor-written strings and numbers that reach the lead's views (SPEC 2.5, 8).

A record is the executor's to write: one planted field must not take down `status --all` (every
unit's overview) or `watch`, and never reaches a terminal raw.
"""

from __future__ import annotations

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
