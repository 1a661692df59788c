"""Concurrent creates that must all succeed (issue 21 item 5): 8 real `unit create`s per round
with room for all (`--max-active 8`), started together, while `unit status --all` reads.

Every create must be ok and no `status --all` may fail: neither may read another create's
half-written worktree (`failed to read .git/worktrees/<x>/commondir`, `bad object
worktrees/<x>/HEAD`). Run: `.venv/bin/python -m bench.create_storm [ROUNDS]` (default 20).
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

CREATES = 8
SAMPLES: list[str] = []  # the first few failures, for the report


def one_round() -> collections.Counter[str]:
    root = scratch()
    outcomes: collections.Counter[str] = collections.Counter()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        repo = sandbox(root, env)
        limits = ("--max-active", str(CREATES), "--max-held", str(CREATES))
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, str(repo)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        processes = [
            subprocess.Popen(
                create(repo, root, f"c{i}", *limits),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for i in range(CREATES)
        ]
        for process in processes:
            document = json.loads(process.communicate(timeout=600)[0])
            code = "ok" if document.get("ok") else str(document.get("code"))
            outcomes[f"create {code}"] += 1
            if code != "ok" and len(SAMPLES) < 3:
                SAMPLES.append(str(document.get("reason")))
        reader.terminate()
        for line in reader.communicate(timeout=60)[0].splitlines():
            outcomes[f"status --all {line.split(' ', 1)[0]}"] += 1
            if not line.startswith("ok") and len(SAMPLES) < 3:
                SAMPLES.append(line)
        for index in range(CREATES):  # let the first turns end before cleanup
            subprocess.run(
                ["pair", "wait", "--repo", str(root / f"c{index}"), "--timeout-min", "1"],
                env=env,
                capture_output=True,
                check=False,
            )
        return outcomes
    finally:
        shutil.rmtree(root, ignore_errors=True)


# Reads `status --all` in a loop until terminated; one line per read: `ok` or `CODE reason`.
READER = """
import json, subprocess, sys
while True:
    out = subprocess.run(["unit", "status", "--all", "--repo", sys.argv[1]],
                         capture_output=True, text=True).stdout
    doc = json.loads(out) if out.strip() else {"code": "no-output"}
    print("ok" if doc.get("ok") else f"{doc.get('code')} {doc.get('reason')}", flush=True)
"""


def report(rounds: int = 20) -> str:
    started = time.perf_counter()
    total: collections.Counter[str] = collections.Counter()
    for _ in range(rounds):
        total.update(one_round())
    seconds = round(time.perf_counter() - started, 1)
    return "\n".join(
        [
            "| measurement | result |",
            "|---|---|",
            f"| {rounds} rounds x {CREATES} concurrent creates (all admitted) while `status "
            f"--all` reads | {dict(sorted(total.items()))}; {seconds} s in total |",
        ]
    )


if __name__ == "__main__":
    print(report(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
    for sample in SAMPLES:
        print(sample[:2000])
