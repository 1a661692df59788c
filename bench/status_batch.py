"""`unit status --all` over a realistic batch, as a ratio of one `git status --porcelain`.

SPEC 7 (revision 3): the case users have, not the easy one. Every unit is made by `unit create`
(script partner, no origin), then its executor's work is played into its worktree: one commit
ahead of the base and one dirty tracked file. A unit sitting at its base runs no diff at all,
so a bench of such units (bench/status_scale.py) times only the easy case.

The yardstick, `git status --porcelain` in one unit's worktree, is timed right before each
`status --all`, so both see the same load. Before timing, every unit's summary is checked
complete (worktree present, one commit ahead, one dirty file, pair readable).

Usage: `python -m bench.status_batch [COUNT ...]` (default 100 300 1000). Creating 1000 units
takes minutes; the counts run one after the other in one scratch repository that grows.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import environment, run, scratch
from bench.status_scale import seconds

COUNTS = (100, 300, 1000)
RUNS = 5
CREATORS = 4  # concurrent creates while building (the registry lock serializes only reserve)


def build(root: Path, env: dict[str, str]) -> Path:
    """The repository the units are made in, with its first commit."""
    repo = root / "repo"
    run(["git", "init", "-q", "-b", "main", str(repo)], env, root)
    (repo / "README.md").write_text("bench\n")
    run(["git", "-C", str(repo), "add", "README.md"], env, root)
    run(["git", "-C", str(repo), "commit", "-q", "-m", "initial"], env, root)
    (root / "task.md").write_text("bench task\n")
    return repo


def grow(root: Path, repo: Path, indices: range, limit: int, env: dict[str, str]) -> None:
    """Units `indices` more, each made by `unit create` and given its executor's work."""
    task = root / "task.md"
    unit = str(Path(sys.executable).with_name("unit"))

    def create(index: int) -> None:
        name = f"u{index:04d}"
        worktree = root / "wt" / name
        argv = [
            unit, "create", "--repo", str(repo), "--unit", name, "--worktree", str(worktree),
            "--branch", f"bench/{name}", "--base", "main", "--scope", "bench",
            "--validation", "true", "--lead", "human", "--partner", "script",
            "--model", "cat > /dev/null; echo ok", "--reason", "bench",
            "--task-file", str(task), "--max-active", str(limit), "--max-held", str(limit),
        ]  # fmt: skip
        run(argv, env, root)
        # The executor's work: a file of its own committed, then edited again and not committed
        # (its own: units sharing a dirty path would all overlap, n² pairs in the output).
        own = worktree / f"work-{name}.txt"
        own.write_text("done\n")
        run(["git", "-C", str(worktree), "add", own.name], env, root)
        run(["git", "-C", str(worktree), "commit", "-q", "-m", name], env, root)
        own.write_text("done, and more in progress\n")

    with ThreadPoolExecutor(max_workers=CREATORS) as pool:
        list(pool.map(create, indices))


def check_complete(document: dict[str, Any], count: int) -> None:
    """Every summary is whole: a null here means the bench would time a failing git call."""
    units = document["units"]
    assert len(units) == count, len(units)
    assert document["overlaps"] == [], document["overlaps"][:3]  # each unit's own file only
    for unit in units:
        worktree, pair = unit["worktree"], unit["pair"]
        assert worktree["present"], unit
        assert (worktree["ahead_of_base"], worktree["behind_base"]) == (1, 0), unit
        own = f" M work-{unit['unit_id']}.txt"
        assert worktree["dirty_files"] == 1 and worktree["dirty_sample"] == [own], unit
        assert "error" not in pair, unit


def measure(counts: tuple[int, ...]) -> Iterator[dict[str, Any]]:
    """A row per count, in one repository that grows from one count to the next (the units of
    a smaller count stay: building 1000 units once instead of 1400)."""
    unit = str(Path(sys.executable).with_name("unit"))
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        repo = build(root, env)
        made = 0
        for count in sorted(counts):
            started = time.perf_counter()
            grow(root, repo, range(made, count), max(counts), env)
            made = count
            built = time.perf_counter() - started
            note = f"{count} units built ({built:.0f} s for the new ones)"
            print(note, file=sys.stderr, flush=True)
            yardstick_worktree = root / "wt" / "u0000"
            status_samples, git_samples = [], []
            for _ in range(RUNS):
                one, _ = seconds(["git", "status", "--porcelain"], env, yardstick_worktree)
                git_samples.append(one)
                taken, output = seconds([unit, "status", "--all", "--repo", str(repo)], env, root)
                check_complete(json.loads(output), count)
                status_samples.append(taken)
            total = statistics.median(status_samples)
            yardstick = statistics.median(git_samples)
            yield {
                "units": count,
                "built_seconds": built,
                "status_all": total,
                "git_status": yardstick,
                "ratio": total / count / yardstick,
                "load": " ".join(f"{value:.1f}" for value in os.getloadavg()),
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(counts: tuple[int, ...] = COUNTS) -> Iterator[str]:
    """The table, a row as soon as its count is measured (1000 units take a while to build)."""
    yield from [
        "| units (made by `unit create`, 1 commit ahead, 1 dirty file) | `status --all` "
        "| per unit | one `git status --porcelain` | per unit / `git status` (goal: at most 1) "
        f"| built in ({CREATORS} creates at a time, the units new at this count) "
        "| load average after |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in measure(counts):
        yield (
            f"| {row['units']} | {row['status_all'] * 1000:.0f} ms "
            f"| {row['status_all'] * 1000 / row['units']:.2f} ms "
            f"| {row['git_status'] * 1000:.2f} ms | {row['ratio']:.2f} "
            f"| {row['built_seconds']:.0f} s | {row['load']} |"
        )


if __name__ == "__main__":
    chosen = tuple(int(word) for word in sys.argv[1:]) or COUNTS
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), file=sys.stderr)
    for line in report(chosen):
        print(line, flush=True)
