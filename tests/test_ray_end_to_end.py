"""A unit on the second node, end to end through the real CLI (SPEC 4.3; issue 24).

`unit create --runner ray --node n2` with the config's `[ray] address` approved, a turn whose
commit lands in the lead's branch and worktree, `unit status --all` naming where it runs,
`unit restaff --runner local` (the fixture's cluster offers one executor node: the move is back
to this machine) whose next turn runs here and which retires the unit's actor and the node's
copy, `unit dismantle --force`; then a second unit dismantled while still on the node, whose
`end-pair` retires its actor. And a unit moved from one node to the other (`unit restaff --runner
ray --node n2` of a unit created on the head's `n1`): its next turn runs on n2 in a copy rebuilt
from the lead's branch, and n1's actor and copy are gone. Which node ran a turn is what the node
itself says (the Ray node id and the directory of its copy, each node has its own root), never
the record alone. The cluster is asked for the actors by name. The two-node cluster is the
session's `cluster` fixture (tests/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry.userdirs import repository_id
from tests import ray_cluster
from tests.conftest import Sandbox, git

COMMIT = (
    "cat > /dev/null; echo {text} > {name}; git add {name}; "
    "git -c user.name=n -c user.email=n@x commit -qm {text}; echo done"
)


def _ok(result: Any) -> dict[str, Any]:
    assert result.code == 0, result.stdout + result.stderr
    assert result.document is not None, result.stdout + result.stderr
    document: dict[str, Any] = result.document
    return document


def _units(sandbox: Sandbox) -> dict[str, dict[str, Any]]:
    status = _ok(sandbox.unit("status", "--all"))
    return {unit["unit_id"]: unit for unit in status["units"]}


def _actor_alive(handle: ray_cluster.RayCluster, name: str) -> bool:
    """Whether the cluster holds the named actor, asked as a driver of this test process that
    disconnects again (the cluster refuses to stop a node a driver is connected to)."""
    import ray

    connected = not ray.is_initialized()
    if connected:
        ray.init(address=handle.address, namespace="unitmgr", log_to_driver=False)
    try:
        ray.get_actor(name, namespace="unitmgr")
    except ValueError:
        return False
    finally:
        if connected:
            ray.shutdown()
    return True


@pytest.mark.slow
def test_a_unit_on_the_second_node_end_to_end(
    sandbox: Sandbox, cluster: ray_cluster.RayCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    ray_cluster.point_units_at(cluster, sandbox, monkeypatch)

    model = COMMIT.format(text="from-the-node", name="NODE.md")
    _ok(sandbox.create("u1", "--runner", "ray", "--node", ray_cluster.NODE, model=model))
    receipt = sandbox.wait_turn("u1")
    worktree = sandbox.worktree("u1")
    assert receipt["status"] == "replied", receipt
    commits = receipt["runner"]["commits"]
    assert commits["fast_forwarded"], commits
    assert (worktree / "NODE.md").read_text() == "from-the-node\n"
    assert git(sandbox.repo, "rev-parse", "feat/u1").strip() == commits["head"]
    assert git(worktree, "log", "-1", "--format=%s").strip() == "from-the-node"
    assert git(worktree, "status", "--porcelain").strip() == ""
    runner = _units(sandbox)["u1"]["runner"]
    assert (runner["kind"], runner["node"]) == ("ray", ray_cluster.NODE), runner
    actor = f"unitmgr/{repository_id(sandbox.common_dir)}/u1"
    assert _actor_alive(cluster, actor)
    assert any(cluster.node_root(ray_cluster.NODE).glob("*u1*"))  # the node's copy

    # Back to this machine: the next turn runs here, on top of the node's commit.
    moved = COMMIT.format(text="from-the-lead", name="LEAD.md")
    restaff = ["restaff", "--unit", "u1", "--lead", "human", "--partner", "script"]
    _ok(sandbox.unit(*restaff, "--reason", "back", "--model", moved, "--runner", "local"))
    after = sandbox.wait_turn("u1")
    assert after["status"] == "replied" and "runner" not in after, after
    assert (worktree / "LEAD.md").read_text() == "from-the-lead\n"
    subjects = git(sandbox.repo, "log", "--format=%s", "feat/u1").split()
    assert subjects[:2] == ["from-the-lead", "from-the-node"], subjects
    assert "runner" not in _units(sandbox)["u1"]
    # Leaving the node retired the unit's actor there: none on the cluster, no copy on the node.
    assert not _actor_alive(cluster, actor)
    assert not any(cluster.node_root(ray_cluster.NODE).glob("*u1*"))

    _ok(sandbox.unit("dismantle", "--unit", "u1", "--force", "u1"))
    assert not worktree.exists()
    assert "u1" not in _units(sandbox)
    assert not _actor_alive(cluster, actor)

    # A unit dismantled while still on the node: its `end-pair` retires the actor there.
    _ok(sandbox.create("u2", "--runner", "ray", "--node", ray_cluster.NODE, model=model))
    assert sandbox.wait_turn("u2")["status"] == "replied"
    second = f"unitmgr/{repository_id(sandbox.common_dir)}/u2"
    dismantled = _ok(sandbox.unit("dismantle", "--unit", "u2", "--force", "u2"))
    end_pair = next(step for step in dismantled["done"] if step["step"] == "end-pair")
    assert end_pair["detail"]["runner"] == {"actor": second, "released": True}, end_pair
    assert not _actor_alive(cluster, second)
    assert not any(cluster.node_root(ray_cluster.NODE).glob("*u2*"))


@pytest.mark.slow
def test_a_unit_moved_from_one_node_to_the_other(
    sandbox: Sandbox, cluster: ray_cluster.RayCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    ray_cluster.point_units_at(cluster, sandbox, monkeypatch)
    first, second = ray_cluster.HEAD, ray_cluster.NODE

    model = COMMIT.format(text="from-n1", name="N1.md")
    _ok(sandbox.create("u1", "--runner", "ray", "--node", first, model=model))
    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "replied" and receipt["runner"]["commits"]["fast_forwarded"]
    on_first = receipt["runner"]
    assert on_first["node_id"] == cluster.node_id(first), on_first
    assert Path(on_first["home"]).parent == cluster.node_root(first), on_first
    assert (Path(on_first["home"]) / "worktree" / "N1.md").read_text() == "from-n1\n"
    assert _units(sandbox)["u1"]["runner"]["node"] == first
    actor = f"unitmgr/{repository_id(sandbox.common_dir)}/u1"

    ray.init(address=cluster.address, namespace="unitmgr", log_to_driver=False)
    try:
        old = ray.get_actor(actor, namespace="unitmgr")
        assert ray.get(old.hello.remote(), timeout=30)["node_id"] == cluster.node_id(first)

        moved = COMMIT.format(text="from-n2", name="N2.md")
        restaff = ["restaff", "--unit", "u1", "--lead", "human", "--partner", "script"]
        restaff += ["--reason", "move", "--model", moved, "--runner", "ray", "--node", second]
        _ok(sandbox.unit(*restaff))
        after = sandbox.wait_turn("u1")
        assert after["status"] == "replied" and after["runner"]["commits"]["fast_forwarded"]
        on_second = after["runner"]
        assert on_second["node_id"] == cluster.node_id(second), on_second
        assert Path(on_second["home"]).parent == cluster.node_root(second), on_second
        # The node's copy was rebuilt from the lead's branch: n1's commit is under n2's.
        copy = Path(on_second["home"]) / "worktree"
        assert git(copy, "log", "--format=%s").split()[:2] == ["from-n2", "from-n1"]
        worktree = sandbox.worktree("u1")
        assert git(worktree, "log", "--format=%s").split()[:2] == ["from-n2", "from-n1"]
        assert git(sandbox.repo, "rev-parse", "feat/u1").strip() == on_second["commits"]["head"]
        # n1's actor is gone (the cluster says so) and so is n1's copy; the name is n2's now.
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(old.hello.remote(), timeout=30)
        assert not Path(on_first["home"]).exists()
        now = ray.get_actor(actor, namespace="unitmgr")
        assert ray.get(now.hello.remote(), timeout=30)["node_id"] == cluster.node_id(second)
        runner = _units(sandbox)["u1"]["runner"]
        assert (runner["kind"], runner["node"]) == ("ray", second), runner
    finally:
        ray.shutdown()

    _ok(sandbox.unit("dismantle", "--unit", "u1", "--force", "u1"))
    assert not _actor_alive(cluster, actor)
    assert not Path(on_second["home"]).exists()


@pytest.mark.slow
def test_a_units_bootstrap_runs_on_its_node_and_again_on_the_node_it_moves_to(
    sandbox: Sandbox,
    cluster: ray_cluster.RayCluster,
    fake_partners: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A streaming partner's session lives where its CLI ran, so `unit create --runner ray
    --node n1` bootstraps on n1 (in n1's copy of the worktree) and the turns there resume it;
    `unit restaff --node n2` bootstraps afresh on n2, whose turns resume that one. The lead's
    claude only answers the preflight (`--version`, `--help`): it never runs a turn."""
    from tests.test_runner_contract import node_fake_claude

    ray_cluster.point_units_at(cluster, sandbox, monkeypatch)
    node_log = sandbox.root / "node-partner.jsonl"
    staffing = {"partner": "claude", "model": None, "effort": "high"}
    with cluster.install_cli("claude", node_fake_claude(cluster, FAKE_LOG=str(node_log))):
        _ok(sandbox.create("u1", "--runner", "ray", "--node", ray_cluster.HEAD, **staffing))
        assert sandbox.wait_turn("u1")["status"] == "replied"
        restaff = ["restaff", "--unit", "u1", "--lead", "human", "--partner", "claude"]
        restaff += ["--effort", "high", "--reason", "move", "--runner", "ray"]
        _ok(sandbox.unit(*restaff, "--node", ray_cluster.NODE))
        assert sandbox.wait_turn("u1")["status"] == "replied"

    def where(call: dict[str, Any]) -> str:
        cwd = Path(call["cwd"]).resolve()
        nodes = (ray_cluster.HEAD, ray_cluster.NODE)
        return next(n for n in nodes if cwd.is_relative_to(cluster.node_root(n).resolve()))

    calls = [json.loads(line) for line in node_log.read_text().splitlines()]
    runs = [(where(call), "--resume" in call["argv"]) for call in calls]
    assert runs[0] == (ray_cluster.HEAD, False), runs  # the bootstrap on n1
    moved = runs.index((ray_cluster.NODE, False))  # the bootstrap on n2
    assert set(runs[1:moved]) == {(ray_cluster.HEAD, True)}, runs  # n1's turns resume n1's
    assert set(runs[moved + 1 :]) == {(ray_cluster.NODE, True)}, runs
    assert [call for call in fake_partners.calls("claude") if call["prompt"]] == []
    _ok(sandbox.unit("dismantle", "--unit", "u1", "--force", "u1"))
