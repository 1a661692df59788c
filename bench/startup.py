"""Start-up cost: `unit --help`, `unit status --all` and `unit list` on an empty registry, as a
ratio of `python -c pass` measured in the same rounds (SPEC 7: at most 5x, and faster than the
reference's `node unit.mjs list`, which cannot start faster than a bare `node -e 0`). Each round
runs the yardstick and every command once, in turn, so a load that comes and goes hits all of
them; the figures are medians over the rounds. Bytecode caching is on, as in an installed copy.
Also timed (SPEC 7 revision 3, at most 5x): every other `unit` and `pair` command, each refused
cheaply (no such unit, no session, a missing option), which the suite and lead agents run
thousands of times; and `unit status --unit` through the Typer app, for comparison.
`python -X importtime` shows where the rest goes."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from bench.common import environment, ratio_table, rounds_against_yardstick, run, scratch

RUNS = int(os.environ.get("BENCH_RUNS", "25"))


def measure() -> list[tuple[str, float, float]]:
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        run(["git", "init", "-q", str(root / "repo")], env, root)
        repo = root / "repo"
        bin_dir = Path(sys.executable).parent
        unit, pair = str(bin_dir / "unit"), str(bin_dir / "pair")
        at = ["--repo", str(repo)]
        nobody = ["--unit", "nobody", *at]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "unit --help": [unit, "--help"],
            "unit status --all (empty)": [unit, "status", "--all", *at],
            "unit list (empty)": [unit, "list", *at],
            "pair --help": [pair, "--help"],
        }
        # Every other command, each refused cheaply (no such unit, no session, a missing
        # option): start-up is the point (SPEC 7 revision 3: at most 5x).
        refused = {
            "unit --version": [unit, "--version"],
            "unit status -h": [unit, "status", "-h"],
            "unit create (missing options)": [unit, "create", "--unit", "nobody", *at],
            "unit status --unit": [unit, "status", *nobody],
            "unit dismantle": [unit, "dismantle", *nobody],
            "unit restaff (missing options)": [unit, "restaff", *nobody],
            "unit cancel": [unit, "cancel", *nobody],
            "unit addendum": [unit, "addendum", *nobody, "--text", "x"],
            "unit scope": [unit, "scope", *nobody],
            "unit verify": [unit, "verify", *nobody],
            "unit wait": [unit, "wait", *nobody],
            "unit intake (no --label)": [unit, "intake", *at],
            "unit merge": [unit, "merge", *nobody, "--head", "0" * 40],
            "unit watch (bad --lock-timeout)": [unit, "watch", *at, "--lock-timeout", "x"],
            "unit tail": [unit, "tail", *nobody],
            "unit serve (bad --lock-timeout)": [unit, "serve", *at, "--lock-timeout", "x"],
            "unit config": [unit, "config", *at],
            "unit doctor": [unit, "doctor", *at],
            "unit path": [unit, "path", "nobody", *at],
            "unit shell-init bash": [unit, "shell-init", "bash"],
            "pair --version": [pair, "--version"],
            "pair status (no session)": [pair, "status", *at],
            "pair send (no session)": [pair, "send", "--kind", "task", "--body-file", "b", *at],
            "pair wait (no session)": [pair, "wait", *at],
            "pair cancel (no session)": [pair, "cancel", *at],
            "pair clear (no session)": [pair, "clear", *at],
            "pair end (no session)": [pair, "end", *at],
            "pair init (unknown partner)": [pair, "init", "--partner", "nope", *at],
            "pair resolve (unknown partner)": [
                pair, "resolve", "--partner", "nope", "--model", "m"
            ],
            "unit status --unit through Typer": [
                sys.executable, "-m", "unitmgr.cli", "status", *nobody
            ],
        }  # fmt: skip
        commands |= refused
        if shutil.which("node"):
            commands["node -e 0"] = ["node", "-e", "0"]

        return rounds_against_yardstick(commands, env, root, RUNS)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report() -> str:
    return ratio_table(measure())


if __name__ == "__main__":
    print(report())
