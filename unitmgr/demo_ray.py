"""`python -m unitmgr.demo --runner ray`: one pair's turn on the second node of a local Ray
cluster (SPEC 4.3), printed as it goes.

It starts a two-node `ray.cluster_utils.Cluster` of its own (token auth on, its own temp dir;
the second node carries `unitmgr-node-n2`), makes a throwaway repository, chooses the Ray
runner with `pair init --runner ray --node n2`, sends one writable task whose executor commits a
file on the node, and shows the receipt, the commit landed in the lead's branch and the file-only
`pair status`. At the end it stops only the cluster it started — never `ray stop`, which would
kill every Ray process on the machine.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

from unitmgr.demo import Demo, _show

TASK = """\
printf 'Hello from a Ray node.\\n' > HELLO.md
git add HELLO.md
git commit -q -m 'Add HELLO.md (on the node)'
echo committed HELLO.md on $(hostname)
"""


def main(keep: bool) -> int:
    root = Path(tempfile.mkdtemp(prefix="unitmgr-ray-demo-", dir="/tmp"))  # short socket paths
    demo = Demo(root)
    ray_env = {
        "RAY_TMPDIR": str(root / "ray"),
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "UNITMGR_NODE_ROOT": str(root / "nodes"),
        "RAY_USAGE_STATS_ENABLED": "0",
        # One turn: a warm supervisor server (pair.runners.ray_forkserver) would never serve a
        # second, and would outlive the demo.
        "UNITMGR_RAY_WARM_SERVER": "0",
    }
    (root / "ray").mkdir()
    demo.environment.update(ray_env)
    os.environ.update(ray_env)  # before ray is imported: it reads RAY_AUTH_MODE once
    cluster = None
    repo = root / "repo"
    try:
        demo.say("a local two-node Ray cluster (token auth; node n2 carries unitmgr-node-n2)")
        from ray.cluster_utils import Cluster

        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
        )
        cluster.add_node(num_cpus=1, resources={"unitmgr-node-n2": 1, "unitmgr-executor": 1})
        print(f"  address: {cluster.address}")

        demo.say("a throwaway repository; its pair's turns run on node n2")
        demo.run("git", "init", "-q", "-b", "main", str(repo))
        (repo / "README.md").write_text("# ray demo\n")
        demo.run("git", "-C", str(repo), "add", "README.md", show=False)
        demo.run("git", "-C", str(repo), "commit", "-q", "-m", "initial", show=False)
        session = demo.json(
            "pair", "init", "--repo", str(repo), "--partner", "script", "--model",
            "sed 1,2d | sh", "--role", "executor", "--runner", "ray", "--node", "n2",
            "--ray-address", cluster.address,
        )  # fmt: skip
        _show(session, ["status", "partner", "role"])

        demo.say("one writable turn: the executor commits on the node; the lead lands it")
        body = root / "task.md"
        body.write_text(TASK)
        receipt = demo.json(
            "pair", "send", "--repo", str(repo), "--kind", "task", "--body-file", str(body)
        )
        _show(
            receipt,
            ["status", "reply", "runner.node", "runner.actor", "runner.commits", "seconds"],
        )
        print(demo.run("git", "-C", str(repo), "log", "--oneline", "-2"), end="")

        demo.say("pair status reads only the lead's files (never the cluster)")
        status = demo.json("pair", "status", "--repo", str(repo))
        _show(status, ["seq", "in_flight", "latest_receipt.status"])
        print("\nDone: the turn ran on node n2 and its commit is in the lead's branch.")
        return 0
    finally:
        if cluster is not None:
            cluster.shutdown()  # type: ignore[no-untyped-call]  # only this demo's nodes
        if keep:
            print(f"(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)
