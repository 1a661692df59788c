"""`unit serve`: what one page's polling costs, against `unit status --all` (SPEC 3.14, 7).

Over 300 units (bench/status_scale.py's repository: real worktrees, one untracked file each, a
pair session whose current transcript is 50 MB, sparse), one `unit serve --port 0` answers:
the first `/api/status` (every worktree scanned), then a poll after the shared document expired
(what the page pays every second: the process's `WorktreeScanner` skips unchanged worktrees), a
poll inside the shared second (cached bytes), and a unit's detail (the transcript's last 64 KiB
out of 50 MB). The yardstick is `unit status --all` run in the same minute. Every answer is
checked complete before it counts.
"""

from __future__ import annotations

import json
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import environment, scratch
from bench.status_scale import build, check_complete, resize, seconds

COUNT = 300
RUNS = 5


def _url(process: subprocess.Popen[bytes]) -> str:
    assert process.stderr is not None
    line = b""
    deadline = time.monotonic() + 60
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([process.stderr], [], [], deadline - time.monotonic())
        assert ready, "unit serve printed no address"
        line += process.stderr.read1(1)  # type: ignore[attr-defined]
    return line.decode().split("unit serve: ", 1)[1].split()[0]


def _get(url: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
    return time.perf_counter() - started, json.loads(body)


def measure() -> dict[str, float]:
    unit = str(Path(sys.executable).with_name("unit"))
    root = scratch()
    process = None
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        repo = build(root, COUNT, env)
        resize(root, 50 << 20)
        cli = []
        for _ in range(RUNS):
            taken, output = seconds([unit, "status", "--all", "--repo", str(repo)], env, root)
            check_complete(json.loads(output), COUNT)
            cli.append(taken)
        process = subprocess.Popen(
            [unit, "serve", "--port", "0", "--repo", str(repo)],
            env=env,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        base = _url(process)
        first, document = _get(base + "api/status")
        check_complete(document, COUNT)
        polls, cached, details = [], [], []
        for _ in range(RUNS):
            time.sleep(1.1)  # past the shared second: the poll computes a new document
            taken, document = _get(base + "api/status")
            check_complete(document, COUNT)
            polls.append(taken)
            cached.append(_get(base + "api/status")[0])
            taken, detail = _get(base + "api/units/u0000")
            assert detail["transcript"]["bytes"] == 50 << 20, detail["transcript"]
            details.append(taken)
        return {
            "cli": statistics.median(cli),
            "first": first,
            "poll": statistics.median(polls),
            "cached": statistics.median(cached),
            "detail": statistics.median(details),
        }
    finally:
        if process is not None:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def report() -> str:
    row = measure()
    return "\n".join(
        [
            f"| {COUNT} units, 50 MB transcripts | ms | / `unit status --all` |",
            "|---|---|---|",
            f"| `unit status --all` (the CLI, start-up included) | {row['cli'] * 1000:.0f} "
            "| 1.00 |",
            *(
                f"| {label} | {row[key] * 1000:.0f} | {row[key] / row['cli']:.2f} |"
                for label, key in (
                    ("`/api/status`, the first", "first"),
                    ("`/api/status`, a poll a second later (unchanged worktrees skipped)", "poll"),
                    ("`/api/status`, a second page in the same second (shared)", "cached"),
                    ("`/api/units/ID`, the 64 KiB tail of a 50 MB transcript", "detail"),
                )
            ),
        ]
    )


if __name__ == "__main__":
    print(report())
