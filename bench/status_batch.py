"""`unit status --all` over a realistic batch, as a ratio of one `git status --porcelain`.

SPEC 7 (revision 3): the case users have, not the easy one. Every unit is made by `unit create`
(script partner, no origin), then its executor's work is played into its worktree: one commit
ahead of the base and one dirty tracked file. A unit sitting at its base runs no diff at all,
so a bench of such units (bench/status_scale.py) times only the easy case.

The yardstick, `git status --porcelain` in one unit's worktree, is timed right before each
`status --all`, so both see the same load; both are timed in wall time and in CPU time (user +
sys of the process and every child it waited for), since on a shared machine the CPU figure
moves less. Before timing, every unit's summary is checked complete (worktree present, one
commit ahead, one dirty file, pair readable).

Usage: `python -m bench.status_batch [--keep DIR | --reuse DIR] [COUNT ...]` (default 100 300
1000). Each count is its own repository (a registry lives in its repository, so a batch of 1000
cannot be timed as 100). `--keep DIR` builds the batches in DIR, or finishes a build an earlier
`--keep` left half-way, and leaves them there; `--reuse DIR` times the batches kept in DIR and
builds nothing (a count not built and checked complete there is refused before anything is
timed). Without either, the batches are built in a scratch directory removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import environment, run, scratch

COUNTS = (100, 300, 1000)
RUNS = 5
CREATORS = 4  # concurrent creates while building (the registry lock serializes only reserve)
COMMITTED = "done\n"
DIRTY = "done, and more in progress\n"
MARKER = "complete.json"  # in a count's directory once its batch is built and checked


@dataclass(frozen=True)
class Batch:
    """Where one count's batch lives in the bench's directory."""

    root: Path
    count: int

    @property
    def directory(self) -> Path:
        return self.root / f"n{self.count}"

    @property
    def repo(self) -> Path:
        return self.directory / "repo"

    def worktree(self, index: int) -> Path:
        return self.directory / "wt" / f"u{index:04d}"

    @property
    def marker(self) -> Path:
        return self.directory / MARKER


def unit_command() -> str:
    return str(Path(sys.executable).with_name("unit"))


def init_repo(batch: Batch, env: dict[str, str]) -> None:
    """The repository the units are made in, with its first commit."""
    repo = batch.repo
    run(["git", "init", "-q", "-b", "main", str(repo)], env, batch.root)
    (repo / "README.md").write_text("bench\n")
    run(["git", "-C", str(repo), "add", "README.md"], env, batch.root)
    run(["git", "-C", str(repo), "commit", "-q", "-m", "initial"], env, batch.root)


def grow(batch: Batch, env: dict[str, str]) -> int:
    """Make the units of `batch` not made yet (each by `unit create`, then given its executor's
    work); the number made. A unit whose record exists is not created again, only given the
    work it lacks, so a build stopped half-way resumes."""
    task = batch.root / "task.md"
    records = batch.repo / ".git" / "orchestrate" / "units"

    def create(index: int) -> bool:
        name = f"u{index:04d}"
        worktree = batch.worktree(index)
        made = not (records / f"{name}.json").exists()
        if made:
            argv = [
                unit_command(), "create", "--repo", str(batch.repo), "--unit", name,
                "--worktree", str(worktree), "--branch", f"bench/{name}", "--base", "main",
                "--scope", "bench", "--validation", "true", "--lead", "human",
                "--partner", "script", "--model", "cat > /dev/null; echo ok",
                "--reason", "bench", "--task-file", str(task),
                "--max-active", str(batch.count), "--max-held", str(batch.count),
            ]  # fmt: skip
            run(argv, env, batch.root)
        # The executor's work: a file of its own committed, then edited again and not committed
        # (its own: units sharing a dirty path would all overlap, n² pairs in the output).
        own = worktree / f"work-{name}.txt"
        subject = run(["git", "-C", str(worktree), "log", "-1", "--format=%s"], env, batch.root)
        if subject.stdout.strip() != name:
            own.write_text(COMMITTED)
            run(["git", "-C", str(worktree), "add", own.name], env, batch.root)
            run(["git", "-C", str(worktree), "commit", "-q", "-m", name], env, batch.root)
        own.write_text(DIRTY)
        return made

    with ThreadPoolExecutor(max_workers=CREATORS) as pool:
        return sum(pool.map(create, range(batch.count)))


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


def status_all(batch: Batch, env: dict[str, str]) -> dict[str, Any]:
    completed = run([unit_command(), "status", "--all", "--repo", str(batch.repo)], env, batch.root)
    document: dict[str, Any] = json.loads(completed.stdout)
    return document


def build(batch: Batch, env: dict[str, str]) -> float:
    """Build `batch` (or finish it), check it complete, mark it; the seconds the creates took."""
    started = time.perf_counter()
    if not (batch.repo / ".git").is_dir():
        init_repo(batch, env)
    made = grow(batch, env)
    built = time.perf_counter() - started
    check_complete(status_all(batch, env), batch.count)
    batch.marker.write_text(
        json.dumps({"units": batch.count, "made_now": made, "built_seconds": built}) + "\n"
    )
    return built


def reused(batch: Batch, env: dict[str, str]) -> float:
    """The build time a kept, complete `batch` recorded; refused when it is not built there."""
    try:
        marker = json.loads(batch.marker.read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(
            f"{batch.directory}: no complete batch of {batch.count} units kept there ({error}); "
            f"build it with --keep {batch.root} {batch.count}"
        ) from error
    check_complete(status_all(batch, env), batch.count)
    return float(marker["built_seconds"])


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process and its waited-for children, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, completed.stdout


def measure(
    counts: tuple[int, ...], *, keep: Path | None = None, reuse: Path | None = None
) -> Iterator[dict[str, Any]]:
    """A row per count, each its own batch (built now unless `reuse`)."""
    root = reuse or keep or scratch()
    try:
        home = root / "home"
        home.mkdir(parents=True, exist_ok=True)
        (root / "task.md").write_text("bench task\n")
        env = environment(home)
        batches = [Batch(root, count) for count in sorted(counts)]
        if reuse is not None:
            built = {batch.count: reused(batch, env) for batch in batches}  # all before timing
        for batch in batches:
            if reuse is not None:
                seconds_built = built[batch.count]
            elif batch.marker.exists():  # kept complete by an earlier --keep: checked, not built
                seconds_built = reused(batch, env)
            else:
                seconds_built = build(batch, env)
                note = f"{batch.count} units built ({seconds_built:.0f} s)"
                print(note, file=sys.stderr, flush=True)
            argv = [unit_command(), "status", "--all", "--repo", str(batch.repo)]
            walls, cpus, git_walls, git_cpus = [], [], [], []
            for _ in range(RUNS):
                wall, cpu, _ = timed(["git", "status", "--porcelain"], env, batch.worktree(0))
                git_walls.append(wall)
                git_cpus.append(cpu)
                wall, cpu, output = timed(argv, env, batch.root)
                check_complete(json.loads(output), batch.count)
                walls.append(wall)
                cpus.append(cpu)
            total, yardstick = statistics.median(walls), statistics.median(git_walls)
            cpu_total, cpu_yardstick = statistics.median(cpus), statistics.median(git_cpus)
            yield {
                "units": batch.count,
                "built_seconds": seconds_built,
                "status_all": total,
                "git_status": yardstick,
                "ratio": total / batch.count / yardstick,
                "status_all_cpu": cpu_total,
                "git_status_cpu": cpu_yardstick,
                "cpu_ratio": cpu_total / batch.count / cpu_yardstick if cpu_yardstick else 0.0,
                "load": " ".join(f"{value:.1f}" for value in os.getloadavg()),
            }
    finally:
        if keep is None and reuse is None:
            shutil.rmtree(root, ignore_errors=True)


def report(
    counts: tuple[int, ...] = COUNTS, *, keep: Path | None = None, reuse: Path | None = None
) -> Iterator[str]:
    """The table, a row as soon as its count is measured (1000 units take a while to build)."""
    yield from [
        "| units (made by `unit create`, 1 commit ahead, 1 dirty file) | `status --all` "
        "| per unit | one `git status --porcelain` | per unit / `git status` (goal: at most 1) "
        "| CPU per unit / `git status` CPU "
        f"| built in ({CREATORS} creates at a time) | load average after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in measure(counts, keep=keep, reuse=reuse):
        yield (
            f"| {row['units']} | {row['status_all'] * 1000:.0f} ms "
            f"| {row['status_all'] * 1000 / row['units']:.2f} ms "
            f"| {row['git_status'] * 1000:.2f} ms | {row['ratio']:.2f} "
            f"| {row['status_all_cpu'] * 1000 / row['units']:.2f} ms / "
            f"{row['git_status_cpu'] * 1000:.2f} ms = {row['cpu_ratio']:.2f} "
            f"| {row['built_seconds']:.0f} s | {row['load']} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.status_batch")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--keep", type=Path, help="build the batches in DIR and leave them there")
    where.add_argument("--reuse", type=Path, help="time the batches kept in DIR, build nothing")
    parser.add_argument("counts", nargs="*", type=int, default=list(COUNTS))
    options = parser.parse_args(argv)
    keep = options.keep.resolve() if options.keep else None
    reuse = options.reuse.resolve() if options.reuse else None
    if reuse is not None and not reuse.is_dir():
        parser.error(f"--reuse {reuse}: no such directory")
    print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), file=sys.stderr)
    for line in report(tuple(options.counts), keep=keep, reuse=reuse):
        print(line, flush=True)


if __name__ == "__main__":
    main()
