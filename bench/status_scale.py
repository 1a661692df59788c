"""`unit status --all` over 300 and 1000 units, as a ratio of one `git status --porcelain`.

SPEC 7: per unit, `status --all` costs at most one `git status --porcelain` in a worktree of the
same repository, measured in the same run (the yardstick is timed right before each `status
--all`, so both see the same load); and its time grows with units, not with transcript size.
Every unit is a real git worktree on a branch off an explicit `main`, with a registry record
naming `main`, one untracked file, and a pair session whose current transcript is 1 MB or 50 MB.
Transcripts are sparse files (truncated to size): status only `stat`s them, which the 50 MB row
proves. Before timing, every unit's summary is checked complete (worktree present, ahead/behind
and dirty files counted, pair readable): a bench whose records name a base the repository lacks
would time nothing real.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import environment, run, scratch

COUNTS = (300, 1000)
SIZES = {"1 MB": 1 << 20, "50 MB": 50 << 20}
RUNS = 5


def build(root: Path, count: int, env: dict[str, str]) -> Path:
    repo = root / "repo"
    run(["git", "init", "-q", "-b", "main", str(repo)], env, root)
    (repo / "README.md").write_text("bench\n")
    run(["git", "-C", str(repo), "add", "README.md"], env, root)
    run(["git", "-C", str(repo), "commit", "-q", "-m", "initial"], env, root)
    units = repo / ".git" / "orchestrate" / "units"
    units.mkdir(parents=True)
    for index in range(count):
        name = f"u{index:04d}"
        worktree = root / "wt" / name
        run(
            ["git", "-C", str(repo), "worktree", "add", "-q", "-b", f"bench/{name}", str(worktree)],
            env,
            root,
        )
        # A file of its own: units sharing a path would all overlap (n² pairs in the output).
        (worktree / f"notes-{name}.txt").write_text("work in progress\n")
        state = repo / ".git" / "worktrees" / name / "pair"
        transcripts = state / "transcripts"
        transcripts.mkdir(parents=True)
        session = {
            "schema_version": 1, "partner": "script", "sid": f"script-{name}", "seq": 1,
            "latest_kind": "task", "worktree": str(worktree), "state_dir": str(state),
            "transcripts": str(transcripts), "created_at": "2026-11-29T00:00:00Z", "model": "cat",
        }  # fmt: skip
        (state / "session.json").write_text(json.dumps(session))
        receipt = {"seq": 1, "kind": "task", "status": "replied", "ok": True,
                   "receipt_file": str(transcripts / "0001-task-receipt.json")}  # fmt: skip
        (transcripts / "0001-task-receipt.json").write_text(json.dumps(receipt))
        (transcripts / "0001-task.log").touch()
        record = {
            "schema_version": 1, "unit_id": name, "worktree": str(worktree),
            "branch": f"bench/{name}", "base": "main", "base_ref": "refs/heads/main",
            "lifecycle": "working", "staffing": {"current": {"partner": "script", "model": "cat"}},
            "pair": {"sid": f"script-{name}", "state_dir": str(state), "latest_seq": 1},
        }  # fmt: skip
        (units / f"{name}.json").write_text(json.dumps(record))
    return repo


def check_complete(document: dict[str, Any], count: int) -> None:
    """Every summary is whole: a null here means the bench would time a failing git call."""
    units = document["units"]
    assert len(units) == count, len(units)
    assert document["overlaps"] == [], document["overlaps"][:3]
    for unit in units:
        worktree, pair = unit["worktree"], unit["pair"]
        assert worktree["present"], unit
        assert (worktree["ahead_of_base"], worktree["behind_base"]) == (0, 0), unit
        own_file = f"?? notes-{unit['unit_id']}.txt"
        assert worktree["dirty_files"] == 1 and worktree["dirty_sample"] == [own_file], unit
        assert "error" not in pair and pair["latest_receipt"]["status"] == "replied", unit


def resize(root: Path, size: int) -> None:
    for log in root.glob("repo/.git/worktrees/*/pair/transcripts/0001-task.log"):
        with open(log, "r+b") as handle:
            handle.truncate(size)


def seconds(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    completed = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, completed.stdout


def measure() -> list[dict[str, Any]]:
    rows = []
    unit = str(Path(sys.executable).with_name("unit"))
    for count in COUNTS:
        root = scratch()
        try:
            (root / "home").mkdir()
            env = environment(root / "home")
            repo = build(root, count, env)
            yardstick_worktree = root / "wt" / "u0000"
            for label, size in SIZES.items():
                resize(root, size)
                status_samples, git_samples = [], []
                for _ in range(RUNS):
                    one, _ = seconds(["git", "status", "--porcelain"], env, yardstick_worktree)
                    git_samples.append(one)
                    taken, output = seconds(
                        [unit, "status", "--all", "--repo", str(repo)], env, root
                    )
                    check_complete(json.loads(output), count)
                    status_samples.append(taken)
                total = statistics.median(status_samples)
                yardstick = statistics.median(git_samples)
                rows.append(
                    {
                        "units": count,
                        "transcript": label,
                        "status_all": total,
                        "git_status": yardstick,
                        "ratio": total / count / yardstick,
                    }
                )
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def report() -> str:
    lines = [
        "| units | transcript | `status --all` | per unit | one `git status --porcelain` "
        "| per unit / `git status` (goal: at most 1) |",
        "|---|---|---|---|---|---|",
    ]
    for row in measure():
        lines.append(
            f"| {row['units']} | {row['transcript']} | {row['status_all'] * 1000:.0f} ms "
            f"| {row['status_all'] * 1000 / row['units']:.2f} ms "
            f"| {row['git_status'] * 1000:.2f} ms | {row['ratio']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
