"""A ref change is charged to the unit that made it (SPEC 4.1, revision 3; issue 21 item 1).

A batch as a lead runs one: units committing and pushing on their own branches at once, the
lead creating and force-dismantling others meanwhile and fetching a teammate's push of `main`.
Before, every receipt listed everyone's refs and every unit read `failed`. Now a receipt lists
only what its own executor moved outside its refs — and such a move is still caught.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from tests.conftest import Sandbox, git, wait_until

LIMITS = {"max_active": "9", "max_held": "9"}

# Waits for the gate (so the turn spans the lead's own work), then commits and pushes its branch.
WORKER = (
    "cat > /dev/null; touch {started}.$UNITMGR_UNIT; while [ ! -f {gate} ]; do sleep 0.05; done; "
    "echo $UNITMGR_UNIT > work.txt; git add work.txt; git commit -qm work; "
    "git push -q origin HEAD 2>/dev/null; echo done"
)
# The same, then moves `main` and another unit's branch: the ref audit's catch.
MOVER = WORKER.replace(
    "echo done",
    "git update-ref refs/heads/main HEAD; git update-ref refs/heads/feat/w1 HEAD; echo moved",
)


def teammate_pushes_main(sandbox: Sandbox) -> None:
    assert sandbox.origin is not None
    clone = sandbox.root / "teammate"
    git(sandbox.root, "clone", "-q", str(sandbox.origin), str(clone))
    (clone / "TEAM.md").write_text("a teammate's change\n")
    git(clone, "add", "TEAM.md")
    git(clone, "commit", "-qm", "teammate")
    git(clone, "push", "-q", "origin", "main")


def test_a_batch_charges_each_ref_change_to_the_unit_that_made_it(sandbox: Sandbox) -> None:
    gate, started = sandbox.root / "gate", sandbox.root / "started"
    worker = WORKER.format(gate=gate, started=started)
    assert sandbox.create("doomed", **LIMITS).code == 0
    sandbox.wait_turn("doomed")
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        made = [
            pool.submit(sandbox.create, unit, model=worker, **LIMITS) for unit in ("w1", "w2", "w3")
        ]
        made.append(
            pool.submit(
                sandbox.create, "mover", model=MOVER.format(gate=gate, started=started), **LIMITS
            )
        )
        assert all(future.result().code == 0 for future in made)
    for unit in ("w1", "w2", "w3", "mover"):
        wait_until(Path(f"{started}.{unit}").exists, timeout=60)
    # While every turn runs: a teammate pushes main, the lead creates a unit (fetching that
    # push) and force-dismantles another.
    teammate_pushes_main(sandbox)
    assert sandbox.create("late", **LIMITS).code == 0
    assert sandbox.unit("dismantle", "--unit", "doomed", "--force", "doomed").code == 0
    main_before = git(sandbox.repo, "rev-parse", "refs/heads/main")
    gate.write_text("go")
    receipts = {unit: sandbox.wait_turn(unit) for unit in ("w1", "w2", "w3", "mover")}

    for unit in ("w1", "w2", "w3"):
        assert receipts[unit]["status"] == "replied", receipts[unit]
        assert receipts[unit]["foreign_ref_changes"] == [], (unit, receipts[unit])
    moved = {change["ref"]: change for change in receipts["mover"]["foreign_ref_changes"]}
    assert set(moved) == {"refs/heads/main", "refs/heads/feat/w1"}, moved
    assert moved["refs/heads/main"]["before"] == main_before

    everything = sandbox.unit("status", "--all")
    attention = {unit["unit_id"]: unit["attention"]["state"] for unit in everything["units"]}
    assert attention["mover"] == "failed"
    assert "refs/heads/main" in next(
        unit["attention"]["why"] for unit in everything["units"] if unit["unit_id"] == "mover"
    )
    assert {unit: state for unit, state in attention.items() if unit != "mover"} == {
        "w1": "waiting-on-lead",
        "w2": "waiting-on-lead",
        "w3": "waiting-on-lead",
        "late": "waiting-on-lead",
    }
    assert everything["unattributed_ref_changes"] == []


def test_a_change_nobody_made_through_git_is_shown_once(sandbox: Sandbox) -> None:
    """A ref written straight into the ref store (no git, so no hook) is nobody's to charge:
    shown once for the repository and on the unit whose branch it is, not on every unit."""
    gate, started = sandbox.root / "gate", sandbox.root / "started"
    worker = WORKER.format(gate=gate, started=started)
    for unit in ("a", "b"):
        assert sandbox.create(unit, model=worker, **LIMITS).code == 0
    for unit in ("a", "b"):
        wait_until(Path(f"{started}.{unit}").exists, timeout=60)
    # Someone (no unit's git) rewrites a's branch file by hand while both turns run.
    sha = git(sandbox.repo, "rev-parse", "main~0")
    git(sandbox.repo, "commit-tree", "-m", "x", "-p", sha, f"{sha}^{{tree}}")
    forged = git(sandbox.repo, "commit-tree", "-m", "forged", f"{sha}^{{tree}}")
    (sandbox.common_dir / "refs" / "heads" / "feat").mkdir(parents=True, exist_ok=True)
    (sandbox.common_dir / "refs" / "heads" / "feat" / "zz").write_text(forged + "\n")
    gate.write_text("go")
    for unit in ("a", "b"):
        assert sandbox.wait_turn(unit)["foreign_ref_changes"] == []
    everything = sandbox.unit("status", "--all")
    (change,) = everything["unattributed_ref_changes"]
    assert change["ref"] == "refs/heads/feat/zz" and change["after"] == forged
    assert sorted(change["seen_by"]) == ["a", "b"]
    states = {unit["unit_id"]: unit["attention"]["state"] for unit in everything["units"]}
    assert states == {"a": "waiting-on-lead", "b": "waiting-on-lead"}
