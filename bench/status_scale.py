"""`unit status --all` over 10, 100 and 300 units with 1 MB and 50 MB transcripts.

SPEC 7: the time must grow with units, not with transcript size. Every unit is a real git
worktree with a registry record and a pair session whose current transcript is 1 MB or 50 MB.
Transcripts are sparse files (truncated to size): status only `stat`s them, which this benchmark
proves — the 50 MB column would otherwise cost 50 times the 1 MB one.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from bench.common import environment, run, scratch

COUNTS = (10, 100, 300)
SIZES = {"1 MB": 1 << 20, "50 MB": 50 << 20}
RUNS = 3


def build(root: Path, count: int, env: dict[str, str]) -> Path:
    repo = root / "repo"
    run(["git", "init", "-q", str(repo)], env, root)
    run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "initial"], env, root)
    units = repo / ".git" / "orchestrate" / "units"
    units.mkdir(parents=True)
    for index in range(count):
        name = f"u{index:03d}"
        worktree = root / "wt" / name
        run(
            ["git", "-C", str(repo), "worktree", "add", "-q", "-b", f"bench/{name}", str(worktree)],
            env,
            root,
        )
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


def resize(root: Path, size: int) -> None:
    for log in root.glob("repo/.git/worktrees/*/pair/transcripts/0001-task.log"):
        with open(log, "r+b") as handle:
            handle.truncate(size)


def measure() -> list[tuple[int, str, float]]:
    rows = []
    for count in COUNTS:
        root = scratch()
        try:
            (root / "home").mkdir()
            env = environment(root / "home")
            repo = build(root, count, env)
            for label, size in SIZES.items():
                resize(root, size)
                samples = []
                for _ in range(RUNS):
                    started = time.perf_counter()
                    completed = subprocess.run(
                        ["unit", "status", "--all", "--repo", str(repo)],
                        env=env, capture_output=True, text=True, check=True,
                    )  # fmt: skip
                    samples.append(time.perf_counter() - started)
                    assert len(json.loads(completed.stdout)["units"]) == count
                rows.append((count, label, statistics.median(samples)))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def report() -> str:
    rows = measure()
    lines = [
        "| units | transcript | `status --all` | per unit |",
        "|---|---|---|---|",
    ]
    for count, label, seconds in rows:
        lines.append(
            f"| {count} | {label} | {seconds * 1000:.0f} ms | {seconds * 1000 / count:.1f} ms |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
