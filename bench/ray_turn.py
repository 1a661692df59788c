"""A Ray turn's overhead beside the local runner's (SPEC 4.3), in one run, and a turn's bundle
round trip for 1 and 100 commits.

A real two-node `ray.cluster_utils.Cluster` on this machine (token auth on, its own temp dir;
stopped at the end — never `ray stop`). The partner is the `script` partner whose first and
last commands write a nanosecond timestamp, so on one machine the node's clock is the lead's:
`send → partner started` (the `pair send` CLI's start to the partner's first command) and
`partner exit → receipt` (its last command to the receipt file's mtime). The bundle rows time a
turn that makes N commits on the node: its `exit → receipt` is the node's bundle, the object
store, the lead's fetch, the ancestry check and the fast-forward.

    .venv/bin/python -m bench.ray_turn
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import environment, run

RUNS = 5


def _cluster(root: Path) -> tuple[Any, dict[str, str]]:
    ray_env = {
        "RAY_TMPDIR": str(root / "ray"),
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "UNITMGR_NODE_ROOT": str(root / "nodes"),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    (root / "ray").mkdir()
    os.environ.update(ray_env)  # before ray is imported: it reads RAY_AUTH_MODE once
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=1, resources={"unitmgr-node-n2": 1, "unitmgr-executor": 1})
    return cluster, {**ray_env}


def _repo(root: Path, name: str, env: dict[str, str], marks: Path, extra: list[str]) -> Path:
    repo = root / name
    run(["git", "init", "-q", str(repo)], env, root)
    (repo / "README.md").write_text("bench\n")
    run(["git", "-C", str(repo), "add", "README.md"], env, root)
    run(["git", "-C", str(repo), "commit", "-qm", "initial"], env, root)
    model = f"date +%s%N > {marks}/start; sed 1,2d | sh; echo ok; date +%s%N > {marks}/end"
    run(
        ["pair", "init", "--repo", str(repo), "--partner", "script", "--model", model,
         "--role", "executor", *extra],
        env,
        root,
    )  # fmt: skip
    return repo


def _turn(repo: Path, marks: Path, body: Path, env: dict[str, str]) -> tuple[float, float, float]:
    for name in ("start", "end"):
        (marks / name).unlink(missing_ok=True)
    sent = time.time()
    done = subprocess.run(
        ["pair", "send", "--repo", str(repo), "--kind", "task", "--body-file", str(body)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    whole = time.time() - sent
    receipt = json.loads(done.stdout)
    assert receipt.get("status") == "replied", receipt
    start = int((marks / "start").read_text()) / 1e9
    end = int((marks / "end").read_text()) / 1e9
    written = Path(receipt["receipt_file"]).stat().st_mtime
    return start - sent, written - end, whole


def _commits(count: int) -> str:
    lines = [
        f"echo {i} > f{i}.txt && git add f{i}.txt && "
        f"git -c user.name=b -c user.email=b@x commit -qm c{i}"
        for i in range(count)
    ]
    return "\n".join(lines) + "\n"


def report() -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))
    cluster = None
    try:
        cluster, ray_env = _cluster(root)
        (root / "home").mkdir()
        env = {**environment(root / "home"), **ray_env}
        address = cluster.address
        rows = []
        for label, extra in (
            ("local runner", []),
            ("Ray runner, node n2", ["--runner", "ray", "--node", "n2", "--ray-address", address]),
        ):
            marks = root / f"marks-{len(rows)}"
            marks.mkdir()
            repo = _repo(root, f"repo-{len(rows)}", env, marks, extra)
            body = root / "body.md"
            body.write_text("echo hi\n")
            samples = [_turn(repo, marks, body, env) for _ in range(RUNS + 1)][1:]  # warm
            rows.append((label, *(statistics.median(s[i] for s in samples) for i in range(3))))
        bundles = []
        marks = root / "marks-bundle"
        marks.mkdir()
        repo = _repo(
            root,
            "repo-bundle",
            env,
            marks,
            ["--runner", "ray", "--node", "n2", "--ray-address", address],
        )
        for count in (1, 100):
            body = root / f"commits-{count}.md"
            body.write_text(_commits(count))
            _, exit_to_receipt, whole = _turn(repo, marks, body, env)
            bundles.append((count, exit_to_receipt, whole))
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    lines = [
        f"{RUNS} turns each (median, after one warm-up), `pair send` CLI, writable `echo hi`:",
        "",
        "| runner | send → partner started | partner exit → receipt | whole send |",
        "|---|---|---|---|",
    ]
    for label, to_start, to_receipt, whole in rows:
        cells = [f"{seconds * 1000:.0f} ms" for seconds in (to_start, to_receipt, whole)]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    lines += [
        "",
        "| commits in the turn | partner exit → receipt (bundle round trip) | whole send |",
    ]
    lines.append("|---|---|---|")
    for count, to_receipt, whole in bundles:
        lines.append(f"| {count} | {to_receipt * 1000:.0f} ms | {whole * 1000:.0f} ms |")
    return lines


if __name__ == "__main__":
    print("\n".join(report()))
