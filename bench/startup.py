"""Start-up cost: `unit --help`, `unit status --all` and `unit list` on an empty registry, as a
ratio of `python -c pass` measured in the same rounds (SPEC 7: at most 5x, and faster than the
reference's `node unit.mjs list`, which cannot start faster than a bare `node -e 0`). Each round
runs the yardstick and every command once, in turn, so a load that comes and goes hits all of
them; the figures are medians over the rounds. Bytecode caching is on, as in an installed copy.
Also timed: the Typer path of a command that is not a fast read (`unit status --unit`, `pair
status`, each refused here: no such unit, no session), which the suite and lead agents run
thousands of times. `python -X importtime` shows where the rest goes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from bench.common import environment, ratio_table, rounds_against_yardstick, run, scratch

RUNS = 25


def measure() -> list[tuple[str, float, float]]:
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        run(["git", "init", "-q", str(root / "repo")], env, root)
        repo = root / "repo"
        bin_dir = Path(sys.executable).parent
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "unit --help": [str(bin_dir / "unit"), "--help"],
            "unit status --all (empty)": [
                str(bin_dir / "unit"), "status", "--all", "--repo", str(repo)
            ],
            "unit list (empty)": [str(bin_dir / "unit"), "list", "--repo", str(repo)],
            "pair --help": [str(bin_dir / "pair"), "--help"],
            "unit status --unit (Typer path, no such unit)": [
                str(bin_dir / "unit"), "status", "--unit", "nobody", "--repo", str(repo)
            ],
            "pair status (Typer path, no session)": [
                str(bin_dir / "pair"), "status", "--repo", str(repo)
            ],
        }  # fmt: skip
        if shutil.which("node"):
            commands["node -e 0"] = ["node", "-e", "0"]

        return rounds_against_yardstick(commands, env, root, RUNS)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report() -> str:
    return ratio_table(measure())


if __name__ == "__main__":
    print(report())
