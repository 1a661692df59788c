"""`unit --help` start-up: the stored help pages (unitmgr/help_pages.py, printed by
unitmgr/entry.py without Typer) against `python -c pass` and against Typer rendering the same
page (`python -m unitmgr.cli --help`), 20 rounds, each round running every command once in turn
so a load that comes and goes hits all of them; medians. SPEC 7: at most 5x `python -c pass`."""

from __future__ import annotations

import shutil
import statistics
import sys
from pathlib import Path

from bench.common import environment, median_seconds, run, scratch

RUNS = 20


def measure() -> list[tuple[str, float, float]]:
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        unit = str(Path(sys.executable).parent / "unit")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "unit --help": [unit, "--help"],
            "unit": [unit],
            "unit create --help": [unit, "create", "--help"],
            "unit --version": [unit, "--version"],
            "unit --help through Typer": [sys.executable, "-m", "unitmgr.cli", "--help"],
        }
        for argv in commands.values():
            run(argv, env, root)  # once first: bytecode written, files cached
        samples: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(RUNS):
            for label, argv in commands.items():
                samples[label].append(median_seconds(lambda argv=argv: run(argv, env, root), 1))
        baseline = statistics.median(samples["python -c pass"])
        return [
            (label, statistics.median(found), statistics.median(found) / baseline)
            for label, found in samples.items()
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report() -> str:
    lines = ["| command | median | ratio to `python -c pass` (goal: at most 5x) |", "|---|---|---|"]
    for label, seconds, ratio in measure():
        lines.append(f"| `{label}` | {seconds * 1000:.0f} ms | {ratio:.1f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
