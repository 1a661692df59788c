"""Shared helpers for the benchmarks: timing, machine description, isolated environments."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from unitmgr.demo import isolated_environment


def environment(home: Path) -> dict[str, str]:
    """An isolated environment, with bytecode caching on: an installed unitmgr has its `.pyc`
    files, and a session that sets PYTHONDONTWRITEBYTECODE would time the compiler instead."""
    found = {
        **isolated_environment(home, name="bench", email="bench@unitmgr.invalid"),
        "UNITMGR_SKIP_GH_AUTH_TOKEN": "1",
    }
    found.pop("PYTHONDONTWRITEBYTECODE", None)
    return found


def median_seconds(action: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=True)


def machine() -> str:
    cpus = os.cpu_count()
    return (
        f"{platform.system()} {platform.machine()}, {cpus} cores, Python "
        f"{platform.python_version()}, "
        + subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    )


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="unitmgr-bench-"))


def rounds_against_yardstick(
    commands: dict[str, list[str]],
    env: dict[str, str],
    cwd: Path,
    rounds: int,
    settle: dict[str, list[str]] | None = None,
) -> list[tuple[str, float, float]]:
    """Each round runs every command once, in turn (so a load that comes and goes hits all of
    them); per command: (label, median seconds, median / the "python -c pass" row's median).
    A refusal is timed like a success: the start-up is the point. `settle[label]` runs untimed
    after that command (e.g. waits for what it started in the background)."""
    after = settle or {}

    def once(argv: list[str]) -> None:
        subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)

    for label, argv in commands.items():
        once(argv)  # once first: bytecode written, files cached
        if label in after:
            once(after[label])
    samples: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(rounds):
        for label, argv in commands.items():
            samples[label].append(median_seconds(lambda argv=argv: once(argv), 1))
            if label in after:
                once(after[label])
    baseline = statistics.median(samples["python -c pass"])
    return [
        (label, statistics.median(found), statistics.median(found) / baseline)
        for label, found in samples.items()
    ]


def ratio_table(rows: list[tuple[str, float, float]], goals: dict[str, float] | None = None) -> str:
    """A markdown table of the rows; with `goals` (label -> the ratio it may reach), a goal
    column and whether each row meets it."""
    if goals is None:
        lines = [
            "| command | median | ratio to `python -c pass` (goal: at most 5x) |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{label}` | {seconds * 1000:.0f} ms | {ratio:.1f}x |"
            for label, seconds, ratio in rows
        ]
        return "\n".join(lines)
    lines = [
        "| command | median | ratio to `python -c pass` | goal | met |",
        "|---|---|---|---|---|",
    ]
    for label, seconds, ratio in rows:
        goal = goals.get(label)
        met = "" if goal is None or label == "python -c pass" else "yes" if ratio <= goal else "NO"
        shown = "" if goal is None else f"{goal:g}x"
        lines.append(f"| `{label}` | {seconds * 1000:.0f} ms | {ratio:.1f}x | {shown} | {met} |")
    return "\n".join(lines)
