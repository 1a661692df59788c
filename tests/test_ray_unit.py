"""The `unit` side of turns on another machine (SPEC 4.3, 3.16): the `runner`/`[ray]` config,
the unit's staffing `runner`/`node`, `unit create`/`unit restaff --runner/--node` and their
refusals, and `runner {kind, node, heartbeat_at}` in the views — which read files only, never
the cluster (proved with no cluster running and `ray` unimportable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from registry.errors import ToolError, UsageError
from registry.records import Staffing
from tests.conftest import Sandbox, lead_signatures
from unitmgr.config import load_config, machine_file
from unitmgr.options import CreateOptions, RestaffOptions


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _ray_or_skip() -> None:
    try:
        import ray  # noqa: F401  (only whether it imports)
    except ImportError as error:
        if os.environ.get("UNITMGR_REQUIRE_RAY") == "1":
            pytest.fail(f"UNITMGR_REQUIRE_RAY=1 but ray does not import: {error}")
        pytest.skip(f"ray is not installed ({error}): pip install -e '.[ray]' runs these")


def _options(sandbox: Sandbox, unit_id: str, **extra: Any) -> CreateOptions:
    words = sandbox.create_args(unit_id)[3:]  # after `create --unit ID`
    values = {words[i].lstrip("-").replace("-", "_"): words[i + 1] for i in range(0, len(words), 2)}
    return CreateOptions(unit=unit_id, **{**values, **extra})


def _create(sandbox: Sandbox, options: CreateOptions) -> dict[str, Any]:
    from unitmgr.lifecycle import create

    return create.run(str(sandbox.repo), options)


# -- config ----------------------------------------------------------------------------------


def test_runner_and_ray_table_are_config_keys_shown_with_their_source(tmp_path: Path) -> None:
    top, common = tmp_path / "repo", tmp_path / "repo" / ".git"
    shared = _write(
        top / ".unitmgr.toml",
        'runner = "ray"\n[ray]\naddress = "ray://head.example:10001"\n',
    )
    _write(machine_file(common), '[ray]\nclone_url = "git@github.com:org/repo.git"\n')
    config = load_config(top, common)
    settings = config.describe()["settings"]
    assert settings["runner"] == {"value": "ray", "source": "repository", "file": str(shared)}
    assert settings["ray.address"]["value"] == "ray://head.example:10001"
    assert settings["ray.clone_url"]["source"] == "local"
    # A cluster address from a file is approved like a command: `unit config` says which.
    assert config.describe({"ray.address": "unapproved"})["settings"]["ray.address"][
        "approval"
    ] == ("unapproved")
    default = load_config(tmp_path / "none", tmp_path / "none" / ".git")
    assert (default.value("runner"), default.source("runner")) == ("local", "default")
    assert default.value("ray.address") is None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('runner = "k8s"\n', "runner"),
        ("[ray]\naddress = 6379\n", "ray.address"),
        ('[ray]\naddress = "host; rm -rf /"\n', "ray.address"),
        ('[ray]\nclone_url = "--upload-pack=evil"\n', "ray.clone_url"),
        ('[ray]\nnodes = ["a"]\n', "ray.nodes"),
        ('ray = "auto"\n', "ray"),
    ],
)
def test_a_bad_runner_or_ray_key_is_config_invalid(tmp_path: Path, text: str, key: str) -> None:
    path = _write(tmp_path / ".unitmgr.toml", text)
    with pytest.raises(UsageError) as raised:
        load_config(tmp_path, tmp_path / ".git")
    assert raised.value.code == "config-invalid"
    assert raised.value.detail["key"] == key and raised.value.detail["file"] == str(path)


# -- records ---------------------------------------------------------------------------------


def test_a_local_staffing_encodes_as_before_and_a_ray_one_carries_runner_and_node() -> None:
    """Old records keep their MAC (no new key appears), a ray staffing round-trips, and an
    unknown key survives beside the new ones."""
    old = {"partner": "codex", "identity": "default", "model": None, "effort": "high"}
    old |= {"reason": "r", "selected_at": None}
    assert Staffing.decode(dict(old)).to_json() == old
    ray = {**old, "runner": "ray", "node": "gpu1", "later": {"x": 1}}
    decoded = Staffing.decode(dict(ray))
    assert (decoded.runner, decoded.node, decoded.runner_kind) == ("ray", "gpu1", "ray")
    assert decoded.to_json() == ray
    assert Staffing.decode({**old, "runner": "ray"}).to_json() == {**old, "runner": "ray"}


# -- create and restaff refusals --------------------------------------------------------------


def _refused(sandbox: Sandbox, options: CreateOptions) -> ToolError:
    before = sandbox.snapshot()
    with pytest.raises(ToolError) as raised:
        _create(sandbox, options)
    assert sandbox.snapshot() == before  # refused before anything is written
    return raised.value


@pytest.mark.parametrize("dry_run", [False, True])
def test_create_refuses_a_runner_it_cannot_use_before_writing_anything(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    unavailable = _refused(sandbox, _options(sandbox, "u1", runner="ray", dry_run=dry_run))
    assert (unavailable.code, unavailable.exit_code) == ("runner-unavailable", 2)
    assert "pip install" in (unavailable.next_step or "")
    bad_node = _refused(sandbox, _options(sandbox, "u1", runner="ray", node="a b", dry_run=dry_run))
    assert bad_node.code == "invalid-node"
    local_node = _refused(sandbox, _options(sandbox, "u1", node="gpu1", dry_run=dry_run))
    assert local_node.code == "invalid-node" and "--runner" in (local_node.next_step or "")
    unknown = _refused(sandbox, _options(sandbox, "u1", runner="k8s", dry_run=dry_run))
    assert unknown.code == "unknown-runner"


def test_create_refuses_an_open_remote_cluster_and_an_unapproved_address(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ray_or_skip()
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    sandbox.machine_config.write_text('runner = "ray"\n[ray]\naddress = "ray://10.9.8.7:10001"\n')
    for dry_run in (True, False):
        refused = _refused(sandbox, _options(sandbox, "u1", dry_run=dry_run))
        assert refused.code == "ray-auth-required" and "RAY_AUTH_MODE=token" in str(
            refused.next_step
        )
    # With token auth configured the address is still the file's: approved first.
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "t" * 32)
    unapproved = _refused(sandbox, _options(sandbox, "u1", dry_run=True))
    assert unapproved.code == "config-unapproved" and unapproved.detail["key"] == "ray.address"
    assert "unit config --approve" in str(unapproved.next_step)
    approved = sandbox.unit("config", "--approve")
    assert approved.code == 0, approved.stdout + approved.stderr
    plan = _create(sandbox, _options(sandbox, "u1", node="gpu1", dry_run=True))
    pair_init = next(step for step in plan["plan"] if step["step"] == "pair-init")
    assert pair_init["detail"]["runner"] == {"kind": "ray", "node": "gpu1"}
    # A changed address is a new one: approved again before it is used.
    sandbox.machine_config.write_text('runner = "ray"\n[ray]\naddress = "ray://10.9.8.6:10001"\n')
    assert _refused(sandbox, _options(sandbox, "u1", dry_run=True)).code == "config-unapproved"


def test_a_ray_dry_run_plans_the_runner_and_a_flag_overrides_the_config(
    sandbox: Sandbox,
) -> None:
    _ray_or_skip()
    plan = _create(sandbox, _options(sandbox, "u1", runner="ray", node="gpu1", dry_run=True))
    pair_init = next(step for step in plan["plan"] if step["step"] == "pair-init")
    assert pair_init["detail"]["runner"] == {"kind": "ray", "node": "gpu1"}
    sandbox.machine_config.write_text('runner = "ray"\n')
    plan = _create(sandbox, _options(sandbox, "u1", runner="local", dry_run=True))
    pair_init = next(step for step in plan["plan"] if step["step"] == "pair-init")
    assert "runner" not in pair_init["detail"]


def test_restaff_plans_a_move_and_refuses_a_node_for_a_local_unit_or_a_missing_ray(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    from unitmgr.lifecycle import restaff

    created = sandbox.create("u1")
    assert created.code == 0, created.stdout + created.stderr
    sandbox.wait_turn("u1")
    common = {"unit": "u1", "lead": "human", "partner": "script", "reason": "move"}
    common["model"] = "cat > /dev/null; echo again"
    before = sandbox.record("u1")
    with pytest.raises(UsageError) as raised:
        restaff.run(str(sandbox.repo), RestaffOptions(**common, node="gpu1", dry_run=True))
    assert raised.value.code == "invalid-node"
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
        with pytest.raises(UsageError) as raised:
            restaff.run(str(sandbox.repo), RestaffOptions(**common, runner="ray"))
    assert raised.value.code == "runner-unavailable"
    assert sandbox.record("u1") == before
    _ray_or_skip()
    plan = restaff.run(
        str(sandbox.repo), RestaffOptions(**common, runner="ray", node="gpu2", dry_run=True)
    )
    init = next(step for step in plan["plan"] if step["step"] == "init-target")
    assert (init["detail"]["target"]["runner"], init["detail"]["target"]["node"]) == ("ray", "gpu2")
    assert sandbox.record("u1") == before


# -- views: files only, never the cluster -----------------------------------------------------


def _move_to_ray(sandbox: Sandbox, unit_id: str, node: str) -> None:
    """What `unit create --runner ray --node NODE` leaves behind, lead-signed, without a
    cluster: the pair session's runner signed by `pair init` and the staffing's in the record."""
    from pair import api as pair_api

    record = sandbox.record(unit_id)
    staffing = record["staffing"]["current"]
    pair_api.init(
        str(sandbox.worktree(unit_id)),
        partner="script",
        model=staffing["model"],
        role="executor",
        runner=pair_api.RunnerChoice(kind="ray", node=node),
    )
    staffing.update(runner="ray", node=node)
    record["signatures"] = lead_signatures(sandbox, record)
    (sandbox.registry / "units" / f"{unit_id}.json").write_text(json.dumps(record))


def _in_flight_on_ray(sandbox: Sandbox, unit_id: str, heartbeat: str) -> subprocess.Popen[bytes]:
    """A turn in flight as the lead's Ray supervisor keeps it: the marker with the heartbeat,
    held by a live process of this test's (it stands in for that supervisor)."""
    from pair.paths import PairPaths
    from pair.state import Marker, load_session, write_marker
    from registry.processes import identify

    holder = subprocess.Popen(["sleep", "300"])
    identity = identify(holder.pid)
    assert identity is not None
    paths = PairPaths(Path(sandbox.record(unit_id)["pair"]["state_dir"]))
    session = load_session(paths)
    assert session is not None
    marker = Marker(
        seq=session.seq + 1,
        kind="task",
        owner_token="test",
        started_at=heartbeat,
        supervisor=identity.to_json(),
        runner={"kind": "ray", "node": "gpu1", "actor": "unitmgr/x/u1"},
        runner_heartbeat_at=heartbeat,
    )
    write_marker(paths, marker)
    return holder


def test_views_of_units_on_ray_read_files_only_with_no_cluster_and_no_ray(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """`status --all`, `list`, `watch --once` and `wait` answer for units on Ray with no
    cluster running and `ray` unimportable (importing it would leave a trace and fail)."""
    _ray_or_skip()
    for unit_id in ("u1", "u2", "u3"):
        created = sandbox.create(unit_id, "--max-active", "3", "--max-held", "3")
        assert created.code == 0, created.stdout + created.stderr
        sandbox.wait_turn(unit_id)
    _move_to_ray(sandbox, "u1", "gpu1")
    _move_to_ray(sandbox, "u2", "gpu2")
    heartbeat = "2026-12-02T08:00:01Z"
    holder = _in_flight_on_ray(sandbox, "u1", heartbeat)
    trap = tmp_path / "no-ray"
    imported = tmp_path / "ray-was-imported"
    _write(
        trap / "ray" / "__init__.py",
        f"open({str(imported)!r}, 'w').close()\nraise ImportError('no ray here: files only')\n",
    )
    env = {**os.environ, "PYTHONPATH": str(trap)}
    try:
        status = sandbox.unit("status", "--all", env=env)
        listed = sandbox.unit("list", env=env)
        watched = sandbox.unit("watch", "--once", env=env)
        table = sandbox.unit("status", "--all", "--format", "table", env=env)
        one = sandbox.unit("status", "--unit", "u2", env=env)
        waited = sandbox.unit(
            "wait", "--unit", "u2", "--since", "2000-01-01T00:00:00Z", env=env, timeout=60
        )
    finally:
        holder.kill()
        holder.wait()
    assert not imported.exists(), "a read imported ray"
    for result in (status, listed, watched, table, one, waited):
        assert result.code == 0, result.stdout + result.stderr
    assert status.document is not None and listed.document is not None
    units = {unit["unit_id"]: unit for unit in status.document["units"]}
    assert units["u1"]["runner"] == {"kind": "ray", "node": "gpu1", "heartbeat_at": heartbeat}
    assert units["u1"]["attention"]["state"] in ("running", "stuck")
    assert units["u2"]["runner"] == {"kind": "ray", "node": "gpu2", "heartbeat_at": None}
    assert "runner" not in units["u3"]  # a unit on this machine shows nothing more
    listed_units = {unit["unit_id"]: unit for unit in listed.document["units"]}
    assert listed_units["u1"]["runner"]["heartbeat_at"] == heartbeat
    assert listed_units["u2"]["staffing"]["current"]["node"] == "gpu2"
    assert "runner" not in listed_units["u3"]
    assert "ray gpu1" in watched.stdout and "ray gpu2" in watched.stdout
    assert f"u1 runs on ray gpu1, heartbeat {heartbeat}" in table.stdout
    assert one.document is not None
    assert one.document["unit"]["runner"] == {"kind": "ray", "node": "gpu2", "heartbeat_at": None}
    assert waited.document is not None and waited.document["changed"]
