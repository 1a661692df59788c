"""The admission race, many rounds (SPEC 3.3, 7): 32 racing real `unit create`s per round.

Each round is a fresh repository with a local bare origin; 32 full creates (the `script`
partner) start together with `--max-active 4`. Every round must admit exactly 4, and every loser
must be `admission-paused` — never `git-failed` from a fetch that read a worktree another create
was adding (the fetch lock covers `git worktree add` too). Run:
`.venv/bin/python -m bench.race_rounds [ROUNDS]` (default 30).
"""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys
import time

from bench.common import environment, scratch
from bench.creates import create, sandbox

RACERS = 32
MAX_ACTIVE = 4


SAMPLES: list[dict[str, object]] = []  # the first few unexpected refusals, for the report


def one_round() -> tuple[int, collections.Counter[str]]:
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        repo = sandbox(root, env)
        limits = ("--max-active", str(MAX_ACTIVE), "--max-held", str(MAX_ACTIVE))
        processes = [
            subprocess.Popen(
                create(repo, root, f"r{i}", *limits),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for i in range(RACERS)
        ]
        admitted = 0
        losers: collections.Counter[str] = collections.Counter()
        for process in processes:
            output, _ = process.communicate(timeout=600)
            document = json.loads(output)
            if document.get("ok"):
                admitted += 1
            else:
                losers[str(document.get("code"))] += 1
                if document.get("code") != "admission-paused" and len(SAMPLES) < 3:
                    SAMPLES.append(document)
        for index in range(RACERS):  # let the admitted units' first turns end before cleanup
            subprocess.run(
                ["pair", "wait", "--repo", str(root / f"r{index}"), "--timeout-min", "1"],
                env=env,
                capture_output=True,
                check=False,
            )
        return admitted, losers
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(rounds: int) -> dict[str, object]:
    started = time.perf_counter()
    exact = 0
    codes: collections.Counter[str] = collections.Counter()
    for _ in range(rounds):
        admitted, losers = one_round()
        exact += admitted == MAX_ACTIVE and sum(losers.values()) == RACERS - MAX_ACTIVE
        codes.update(losers)
    return {
        "rounds": rounds,
        "exact_rounds": exact,
        "loser_codes": dict(codes),
        "seconds": round(time.perf_counter() - started, 1),
    }


def report(rounds: int = 30) -> str:
    found = measure(rounds)
    return "\n".join(
        [
            "| measurement | result |",
            "|---|---|",
            f"| {found['rounds']} rounds x {RACERS} racing creates, `--max-active {MAX_ACTIVE}` "
            f"| {found['exact_rounds']} rounds admitted exactly {MAX_ACTIVE}; loser codes "
            f"{found['loser_codes']}; {found['seconds']} s in total |",
        ]
    )


if __name__ == "__main__":
    print(report(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
    for sample in SAMPLES:
        print(json.dumps(sample)[:4000])
