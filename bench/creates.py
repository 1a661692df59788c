"""Concurrent creates and the admission race (SPEC 7).

- 8 concurrent creates with a 5-second setup hook, against one create: wall time ratio (goal:
  under 2x — the setups overlap, only the short critical sections serialize).
- 32 racing creates with `--max-active 4`: exactly 4 admitted, and the total time.
Every create is the real `unit create`, with the `script` partner, against a repository with a
local bare origin.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from bench.common import environment, run, scratch


def sandbox(root: Path, env: dict[str, str]) -> Path:
    run(["git", "init", "-q", "--bare", "origin.git"], env, root)
    run(["git", "clone", "-q", str(root / "origin.git"), "repo"], env, root)
    repo = root / "repo"
    run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "initial"], env, root)
    run(["git", "-C", str(repo), "push", "-q", "origin", "HEAD:main"], env, root)
    (root / "task.md").write_text("bench\n")
    return repo


def create(repo: Path, root: Path, name: str, *extra: str) -> list[str]:
    return [
        "unit", "create", "--repo", str(repo), "--unit", name, "--worktree", str(root / name),
        "--branch", f"bench/{name}", "--base", "main", "--scope", "bench", "--validation", "true",
        "--lead", "human", "--partner", "script", "--reason", "bench",
        "--task-file", str(root / "task.md"), "--model", "cat > /dev/null; echo ok",
        "--lock-timeout", "300", *extra,
    ]  # fmt: skip


def timed(commands: list[list[str]], env: dict[str, str]) -> tuple[float, list[int]]:
    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        for command in commands
    ]
    codes = []
    for process in processes:
        output, _ = process.communicate()
        codes.append(0 if json.loads(output).get("ok") else process.returncode)
    return time.perf_counter() - started, codes


def measure() -> dict[str, float]:
    results: dict[str, float] = {}
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        repo = sandbox(root, env)
        one, codes = timed([create(repo, root, "one", "--setup", "sleep 5")], env)
        assert codes == [0]
        limits = ("--max-active", "20", "--max-held", "20", "--setup", "sleep 5")
        eight, codes = timed([create(repo, root, f"c{i}", *limits) for i in range(8)], env)
        assert codes == [0] * 8, codes
        results.update(one=one, eight=eight)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        repo = sandbox(root, env)
        limits = ("--max-active", "4", "--max-held", "4")
        race, codes = timed([create(repo, root, f"r{i}", *limits) for i in range(32)], env)
        results.update(race=race, admitted=float(codes.count(0)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def report() -> str:
    found = measure()
    return "\n".join(
        [
            "| measurement | result |",
            "|---|---|",
            f"| one create, 5 s setup | {found['one']:.2f} s |",
            f"| 8 concurrent creates, 5 s setup each | {found['eight']:.2f} s "
            f"({found['eight'] / found['one']:.2f}x one create; goal under 2x) |",
            f"| 32 racing creates, `--max-active 4` | {int(found['admitted'])} admitted, "
            f"{found['race']:.2f} s in total |",
        ]
    )


if __name__ == "__main__":
    print(report())
