"""A Ray turn's overhead beside the local runner's (SPEC 4.3, 7), in one run, and a turn's bundle
round trip for 1 and 100 commits.

A real two-node `ray.cluster_utils.Cluster` on this machine (token auth on, its own temp dir;
stopped at the end — never `ray stop`). The units are made as users make them: a project with
history and a bare `origin`, `unit create --runner local` and `unit create --runner ray --node
n2` (the `[ray] address` approved in the machine's config), each unit's first turn its task;
then turns by the `pair send` CLI into the unit's worktree, each making one commit (which the
Ray runner brings back and lands), local and Ray turns alternating so both see the same load.
The partner is the `script` partner whose first and last commands write a nanosecond
timestamp, so on one machine the node's clock is the lead's: `send → partner started` (the CLI's
start to the partner's first command) and `partner exit → receipt` (its last command to the
receipt file's mtime). A third row moves the unit's branch under the node before each turn (a
teammate's commit): that turn's base travels as a delta bundle. The bundle rows time a turn that
makes N commits on the node: its `exit → receipt` is the node's bundle, the object store, the
lead's fetch, the ancestry check and the fast-forward.

    .venv/bin/python -m bench.ray_turn
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import environment, machine, run

RUNS = 7
MARK = "#bench"  # the script partner runs what follows this line of the prompt, nothing else
HISTORY = 40  # the project's commits before the units (files in a few folders)


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


def _git(env: dict[str, str], cwd: Path, *args: str) -> str:
    return run(["git", "-C", str(cwd), *args], env, cwd).stdout


def _project(root: Path, env: dict[str, str]) -> Path:
    """A project with `HISTORY` commits over a few folders, pushed to a bare `origin`."""
    origin, repo = root / "origin.git", root / "project"
    run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], env, root)
    run(["git", "clone", "-q", str(origin), str(repo)], env, root)
    for index in range(HISTORY):
        folder = repo / ("src", "docs", "tests")[index % 3]
        folder.mkdir(exist_ok=True)
        (folder / f"m{index % 12}.txt").write_text(f"line {index}\n" * (20 + index))
        _git(env, repo, "add", "-A")
        _git(env, repo, "commit", "-qm", f"history {index}")
    _git(env, repo, "push", "-q", "origin", "HEAD:main")
    return repo


def _unit(
    repo: Path, root: Path, env: dict[str, str], unit: str, marks: Path, extra: list[str]
) -> Path:
    """`unit create` as a user runs it; its first turn (the task) awaited. The unit's worktree."""
    marks.mkdir()
    task = root / f"{unit}-task.md"
    task.write_text("Keep a turn log in notes/.\n")
    model = (
        f"date +%s%N > {marks}/start; sed -n '/^{MARK}$/,$p' | sh; echo ok; "
        f"date +%s%N > {marks}/end"
    )
    worktree = root / unit
    run(
        ["unit", "create", "--unit", unit, "--worktree", str(worktree), "--branch", f"b/{unit}",
         "--base", "main", "--scope", "notes", "--validation", "true", "--lead", "human",
         "--partner", "script", "--reason", "bench", "--task-file", str(task), "--model", model,
         "--max-active", "4", "--max-held", "4", "--repo", str(repo), *extra],
        env, root,
    )  # fmt: skip
    receipt = json.loads(
        run(["pair", "wait", "--timeout-min", "2", "--repo", str(worktree)], env, root).stdout
    )
    assert receipt.get("status") == "replied", receipt
    return worktree


def _turn(worktree: Path, marks: Path, body: Path, env: dict[str, str]) -> dict[str, Any]:
    for name in ("start", "end"):
        (marks / name).unlink(missing_ok=True)
    sent = time.time()
    done = subprocess.run(
        ["pair", "send", "--repo", str(worktree), "--kind", "task", "--body-file", str(body)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    whole = time.time() - sent
    receipt = json.loads(done.stdout)
    assert receipt.get("status") == "replied", receipt
    commits = (receipt.get("runner") or {}).get("commits") or {}
    assert "runner" not in receipt or commits.get("fast_forwarded"), receipt
    start = int((marks / "start").read_text()) / 1e9
    end = int((marks / "end").read_text()) / 1e9
    written = Path(receipt["receipt_file"]).stat().st_mtime
    base = (receipt.get("runner") or {}).get("base") or {}
    return {
        "start": start - sent,
        "receipt": written - end,
        "whole": whole,
        "base_bytes": base.get("bundle_bytes"),
        "delta": base.get("delta"),
    }


def _commits(count: int, tag: str) -> str:
    lines = [
        f"echo {tag} {i} > notes/{tag}-{i}.txt && git add notes && "
        f"git -c user.name=b -c user.email=b@x commit -qm '{tag} {i}'"
        for i in range(count)
    ]
    return f"{MARK}\nmkdir -p notes\n" + "\n".join(lines) + "\n"


def _teammate(worktree: Path, env: dict[str, str], index: int) -> None:
    """The unit's branch moves under the node: a teammate's commit, as the lead lands it."""
    team = worktree / "TEAM.md"
    team.write_text(f"teammate change {index}\n")
    _git(env, worktree, "add", "TEAM.md")
    _git(env, worktree, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "team")


def _config(repo: Path, env: dict[str, str], address: str) -> None:
    found = run(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from unitmgr.config import machine_file; print(machine_file(Path(sys.argv[1])))",
         str(repo / ".git")],
        env, repo,
    )  # fmt: skip
    config = Path(found.stdout.strip())
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[ray]\naddress = "{address}"\n')
    run(["unit", "config", "--approve", "--repo", str(repo)], env, repo)


def _bundles(runs: list[dict[str, Any]]) -> str:
    """How many turns sent their base, and how large (a delta: without what the node holds)."""
    sent = [sample for sample in runs if sample["base_bytes"]]
    if not sent:
        return "none (the node's copy held the base)"
    size = statistics.median(sample["base_bytes"] for sample in sent)
    kind = " (delta)" if all(sample["delta"] for sample in sent) else ""
    return f"{len(sent)} of {len(runs)} turns, median {size:.0f} B{kind}"


def _median(samples: list[dict[str, Any]], key: str) -> float:
    return statistics.median(sample[key] for sample in samples)


def _servers(env: dict[str, str]) -> list[str]:
    """The warm Ray supervisor servers (pair.runners.ray_forkserver) the turns started."""
    from pair.runners import ray_warm

    directory = ray_warm.run_directory(env)
    return [path.name for path in directory.glob("ray-*.sock")] if directory else []


def _stop_servers(env: dict[str, str]) -> None:
    from pair.runners import ray_warm

    directory = ray_warm.run_directory(env) if env else None
    if directory is not None:
        ray_warm.stop(directory)


def report() -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))  # short socket paths
    cluster = None
    env: dict[str, str] = {}
    try:
        cluster, ray_env = _cluster(root)
        (root / "home").mkdir()
        env = {**environment(root / "home"), **ray_env}
        repo = _project(root, env)
        _config(repo, env, cluster.address)
        on_ray = ["--runner", "ray", "--node", "n2"]
        units = {
            "local runner": _unit(repo, root, env, "u-local", root / "m-local", []),
            "Ray runner, node n2": _unit(repo, root, env, "u-ray", root / "m-ray", on_ray),
            "Ray, branch moved under the node": _unit(
                repo, root, env, "u-moved", root / "m-moved", on_ray
            ),
        }
        marks = dict(zip(units, (root / "m-local", root / "m-ray", root / "m-moved"), strict=True))
        samples: dict[str, list[dict[str, Any]]] = {label: [] for label in units}
        loads = [os.getloadavg()[0]]
        for index in range(RUNS + 1):  # the first round warms up
            for label, worktree in units.items():
                body = root / f"body-{index}.md"
                body.write_text(_commits(1, f"t{index}"))
                if label.startswith("Ray, branch moved"):
                    _teammate(worktree, env, index)
                sample = _turn(worktree, marks[label], body, env)
                if index:
                    samples[label].append(sample)
        loads.append(os.getloadavg()[0])
        servers = _servers(env)
        bundles = []
        for count in (1, 100):
            body = root / f"commits-{count}.md"
            body.write_text(_commits(count, f"c{count}"))
            bundles.append(
                (
                    count,
                    _turn(units["Ray runner, node n2"], marks["Ray runner, node n2"], body, env),
                )
            )
        loads.append(os.getloadavg()[0])
    finally:
        for log in (root / "home").rglob("ray-*.log"):
            sys.stderr.write(f"{log}:\n{log.read_text()}")  # a warm server's own errors
        _stop_servers(env)
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    local = samples["local runner"]
    lines = [
        f"machine: {machine()}; load average (1 min) {', '.join(f'{v:.1f}' for v in loads)} "
        "(start, after the rounds, at the end)",
        "",
        f"{RUNS} turns each (median, after one warm-up round), local and Ray alternating; "
        "`pair send` CLI, each turn one commit:",
        "",
        "| runner | send → partner started | Ray − local | partner exit → receipt | Ray − local "
        "| whole send | base bundle |",
        "|---|---|---|---|---|---|---|",
    ]
    lines[2:2] = [
        f"warm Ray supervisor server after the rounds: {servers or 'none'} "
        "(the first Ray turn, in the warm-up round, runs cold and starts it)",
        "",
    ]
    for label, runs in samples.items():
        to_start, to_receipt = _median(runs, "start"), _median(runs, "receipt")
        extra_start = to_start - _median(local, "start")
        extra_receipt = to_receipt - _median(local, "receipt")
        bundle = "—" if runs is local else _bundles(runs)
        cells = [
            f"{to_start * 1000:.0f} ms",
            "—" if runs is local else f"{extra_start * 1000:+.0f} ms",
            f"{to_receipt * 1000:.0f} ms",
            "—" if runs is local else f"{extra_receipt * 1000:+.0f} ms",
            f"{_median(runs, 'whole') * 1000:.0f} ms",
            bundle,
        ]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    lines += [
        "",
        "| commits in the turn | partner exit → receipt (bundle round trip) | whole send |",
        "|---|---|---|",
    ]
    for count, sample in bundles:
        lines.append(
            f"| {count} | {sample['receipt'] * 1000:.0f} ms | {sample['whole'] * 1000:.0f} ms |"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(report()))
