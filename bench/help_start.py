"""`unit --help` start-up: the stored help pages (unitmgr/help_pages.py, printed by
unitmgr/entry.py without Typer) against `python -c pass` and against Typer rendering the same
page (`python -m unitmgr.cli --help`), 20 rounds, each round running every command once in turn
so a load that comes and goes hits all of them; medians. SPEC 7: at most 5x `python -c pass`."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from bench.common import environment, ratio_table, rounds_against_yardstick, scratch

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
        return rounds_against_yardstick(commands, env, root, RUNS)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report() -> str:
    return ratio_table(measure())


if __name__ == "__main__":
    print(report())
