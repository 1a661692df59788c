"""A real two-node Ray cluster on this machine for the Ray runner's tests (SPEC 4.3).

`ray.cluster_utils.Cluster`: a head carrying `unitmgr-node-n1` (and not `unitmgr-executor`: a
unit placed on "any executor node" lands on n2, deterministically, as on a cluster whose head is
the lead's own machine) and a second node carrying `unitmgr-node-n2` and `unitmgr-executor` —
two nodes a unit can be moved between with no third raylet. Each node has its own node root
(`UNITMGR_NODE_ROOT` in its raylet's environment), so where a node kept its copy of a worktree
says which node ran the turn. Each raylet also has `bin/` under the cluster's temp dir first on
its `PATH` (and the machine's PATH, never a test's): the partner CLIs a node's turns find are the
node's own (a test installs one there with `install_cli`), never the lead's. Token
authentication is on (the nodes listen on the machine's address, which the runner refuses
without it), health checks are tuned (a killed node is known in about a second), and the
cluster has its own temp dir and ports — never `ray stop`, which would
kill every Ray process on the machine. `stop` ends only what `start` started.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

NODE = "n2"
NODE_RESOURCES = {f"unitmgr-node-{NODE}": 1.0, "unitmgr-executor": 1.0}
HEAD = "n1"
HEAD_RESOURCES = {f"unitmgr-node-{HEAD}": 1.0}
HEALTH = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_initial_delay_ms": "500",
}


# Read at import (collection), before each test's isolated environment drops UNITMGR_* settings.
REQUIRE_RAY = os.environ.get("UNITMGR_REQUIRE_RAY") == "1"
# The machine's PATH, before any test puts its fake CLIs first: a node never sees a test's.
MACHINE_PATH = os.environ.get("PATH", "")


def ray_or_skip() -> Any:
    """`ray`, or a skip (a failure when `UNITMGR_REQUIRE_RAY=1`, as `.ci/run` sets)."""
    try:
        import ray
    except ImportError as error:
        if REQUIRE_RAY:
            pytest.fail(f"UNITMGR_REQUIRE_RAY=1 but ray does not import: {error}")
        pytest.skip(f"ray is not installed ({error}): pip install -e '.[ray]' runs these")
    return ray


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class RayCluster:
    cluster: Any
    address: str
    root: Path
    environment: dict[str, str]  # what the lead's processes need to reach it
    worker: Any = None
    removed: list[Any] = field(default_factory=list)

    def node_root(self, node: str) -> Path:
        """Where node `node` keeps its copies of units' worktrees (its raylet's
        `UNITMGR_NODE_ROOT`)."""
        return self.root / f"nodes-{node}"

    def node_id(self, node: str) -> str:
        """The Ray node id of node `node`, as the cluster names it."""
        handle = self.cluster.head_node if node == HEAD else self.worker
        return str(handle.node_id)

    @property
    def node_bin(self) -> Path:
        """First on every node's `PATH`: where this machine's nodes find partner CLIs."""
        return self.root / "bin"

    @contextlib.contextmanager
    def install_cli(self, name: str, script: str) -> Iterator[Path]:
        """The partner CLI `name` installed on the nodes (an executable `script`) while the
        `with` lasts, as an operator installs it on each machine."""
        path = self.node_bin / name
        path.write_text(script)
        path.chmod(0o755)
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)

    def kill_node(self) -> None:
        """The second node's machine is gone: its raylet and every worker on it killed."""
        self.cluster.remove_node(self.worker, allow_graceful=False)
        self.worker = None

    def add_node(self) -> None:
        with _environment({**self.environment, **_node_environment(self.root, NODE)}):
            self.worker = self.cluster.add_node(num_cpus=1, resources=NODE_RESOURCES)


def _node_environment(root: Path, node: str) -> dict[str, str]:
    """What a node's raylet (and so its workers and turns) gets beyond the lead's: its own node
    root, and its own partner CLIs first on `PATH`."""
    return {
        "UNITMGR_NODE_ROOT": str(root / f"nodes-{node}"),
        "PATH": os.pathsep.join([str(root / "bin"), MACHINE_PATH]),
    }


def start() -> RayCluster:
    root = Path(tempfile.mkdtemp(prefix="ur-", dir="/tmp"))  # short: Ray's socket paths
    environment = {
        "RAY_TMPDIR": str(root),
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "UNITMGR_NODE_ROOT": str(root / f"nodes-{NODE}"),  # the second node's; the head: n1
        "RAY_USAGE_STATS_ENABLED": "0",
        **HEALTH,
    }
    (root / "bin").mkdir()
    head = {**environment, **_node_environment(root, HEAD)}
    with _environment(head):  # before ray is imported: it reads RAY_AUTH_MODE once
        try:
            ray_or_skip()
        except BaseException:  # a skip (or the required failure): nothing left behind
            shutil.rmtree(root, ignore_errors=True)
            raise
        from ray.cluster_utils import Cluster

        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "resources": HEAD_RESOURCES,
            },
        )
    handle = RayCluster(
        cluster=cluster, address=cluster.address, root=root, environment=environment
    )
    handle.add_node()
    return handle


def stop(handle: RayCluster) -> None:
    with _environment(handle.environment):
        handle.cluster.shutdown()
    left = _kill_processes_below(handle.root)
    shutil.rmtree(handle.root, ignore_errors=True)
    if left:  # a node turn that outlived its test (and its watchdog): say so, never leave it
        warnings.warn(f"killed {len(left)} process(es) left on the nodes: {left}", stacklevel=2)


def _kill_processes_below(root: Path) -> list[str]:
    """Kill every process working in `root` (a node's copy of a worktree): a turn the cluster's
    shutdown did not take with it would otherwise run on after the suite (a gate loop left by
    an old bug loaded this machine for hours)."""
    import psutil

    prefix = os.path.realpath(root) + os.sep
    killed = []
    for process in psutil.process_iter(["pid", "cwd", "cmdline"]):
        try:
            cwd = process.info["cwd"]
            if process.pid != os.getpid() and cwd and os.path.realpath(cwd).startswith(prefix):
                killed.append(" ".join(process.info["cmdline"] or [])[:80])
                process.kill()
        except (psutil.Error, OSError):
            continue
    return killed


def point_units_at(cluster: RayCluster, sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a lead does once before `unit create --runner ray`: the cluster's environment in
    this test, and its address in the machine's config, approved (`unit config --approve`)."""
    for name, value in cluster.environment.items():
        monkeypatch.setenv(name, value)
    sandbox.machine_config.write_text(f'[ray]\naddress = "{cluster.address}"\n')
    approved = sandbox.unit("config", "--approve")
    assert approved.code == 0, approved.stdout + approved.stderr
