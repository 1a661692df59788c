"""A turn's own overhead (SPEC 7): `send` → partner started, and partner exit → receipt written.

The partner is the `script` partner whose first and last commands write a nanosecond timestamp
(`date +%s%N`, so the partner's own start-up counts against pair, not for it); the receipt's
time is its file's mtime (written once, atomically). Measured through the library, as `unit`
calls it (`pair.api.send` in-process, foreground), and through the `pair send` CLI, whose
Python start-up is included; for a writable turn (with the ref audit) and a read-only one. The
supervisor is forked from the sender (pair/launch.py); the rows marked "exec'd supervisor"
start it as a fresh interpreter instead (`UNITMGR_PAIR_SUPERVISOR=exec`: a caller with threads,
and every turn before the fork), in the same run.
Target: the two overheads together at most 150 ms; the yardstick is `python -c pass` in the
same run. Nothing per turn may wait on a call known to be refused.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import environment, run, scratch

RUNS = 15
TARGET_MS = 150.0


def _stamp(path: Path) -> float:
    return int(path.read_text().strip()) / 1e9


def _setup(root: Path) -> tuple[Path, dict[str, str], Path]:
    (root / "home").mkdir()
    env = environment(root / "home")
    repo = root / "repo"
    run(["git", "init", "-q", str(repo)], env, root)
    (repo / "README.md").write_text("bench\n")
    run(["git", "-C", str(repo), "add", "README.md"], env, root)
    run(["git", "-C", str(repo), "commit", "-qm", "initial"], env, root)
    marks = root / "marks"
    marks.mkdir()
    model = f"date +%s%N > {marks}/start; cat >/dev/null; echo ok; date +%s%N > {marks}/end"
    run(
        ["pair", "init", "--repo", str(repo), "--partner", "script", "--model", model,
         "--role", "executor"],
        env,
        root,
    )  # fmt: skip
    (root / "body.md").write_text("measure this turn\n")
    return repo, env, marks


def _one_turn(
    repo: Path, marks: Path, body: Path, write: bool, cli: bool, env: dict[str, str]
) -> tuple[float, float, float]:
    """(send → partner started, partner exit → receipt, send → send returned) in seconds."""
    for name in ("start", "end"):
        (marks / name).unlink(missing_ok=True)
    lease = "--write" if write else "--read-only"
    began = time.time()
    if cli:
        completed = subprocess.run(
            ["pair", "send", "--repo", str(repo), "--kind", "task", "--body-file", str(body),
             lease],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        import json

        receipt = json.loads(completed.stdout)
    else:
        from pair import api

        receipt = api.send(repo, kind="task", body_file=body, write=write)
    returned = time.time()
    assert receipt["status"] == "replied", receipt
    written = os.stat(receipt["receipt_file"]).st_mtime_ns / 1e9
    return _stamp(marks / "start") - began, written - _stamp(marks / "end"), returned - began


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    began = time.perf_counter()
    run(argv, env, cwd)
    return time.perf_counter() - began


def measure() -> tuple[list[tuple[str, float, float, float]], float, float]:
    """Per kind of turn (label, start, finish, whole) medians; the yardstick and the supervisor's
    own interpreter start-up with its imports, each sampled between the turns (the machine's load
    changes during a run, and a ratio holds only against a yardstick taken at the same time)."""
    root = scratch()
    saved = dict(os.environ)
    try:
        repo, env, marks = _setup(root)
        os.environ.clear()
        os.environ.update(env)  # the library runs in this process, with the bench's HOME
        body = root / "body.md"
        yardsticks: list[float] = []
        imports: list[float] = []
        supervisor_imports = [sys.executable, "-P", "-c", "import pair.supervisor, psutil"]
        rows = []
        for label, write, cli, forked in (
            ("library, writable (ref audit)", True, False, True),
            ("library, read-only", False, False, True),
            ("`pair send` CLI, writable", True, True, True),
            ("library, writable, exec'd supervisor", True, False, False),
            ("`pair send` CLI, writable, exec'd supervisor", True, True, False),
        ):
            turn_env = env if forked else {**env, "UNITMGR_PAIR_SUPERVISOR": "exec"}
            os.environ.clear()
            os.environ.update(turn_env)
            _one_turn(repo, marks, body, write, cli, turn_env)  # warm the page cache
            samples = []
            for _ in range(RUNS):
                yardsticks.append(_timed([sys.executable, "-c", "pass"], env, root))
                imports.append(_timed(supervisor_imports, env, root))
                samples.append(_one_turn(repo, marks, body, write, cli, turn_env))
            start = statistics.median(sample[0] for sample in samples)
            finish = statistics.median(sample[1] for sample in samples)
            whole = statistics.median(sample[2] for sample in samples)
            rows.append((label, start, finish, whole))
        return rows, statistics.median(yardsticks), statistics.median(imports)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)


def report() -> str:
    rows, baseline, imports = measure()
    lines = [
        f"Yardstick `python -c pass`: {baseline * 1000:.0f} ms; the supervisor's own interpreter "
        f"start-up and imports (`python -P -c 'import pair.supervisor, psutil'`): "
        f"{imports * 1000:.0f} ms ({imports / baseline:.1f}x). Target: start + finish ≤ "
        f"{TARGET_MS:.0f} ms.",
        "",
        "| turn | send → partner started | partner exit → receipt | overhead (sum) | "
        "sum / `python -c pass` | whole send |",
        "|---|---|---|---|---|---|",
    ]
    for label, start, finish, whole in rows:
        total = start + finish
        verdict = "within" if total * 1000 <= TARGET_MS else "over"
        lines.append(
            f"| {label} | {start * 1000:.0f} ms | {finish * 1000:.0f} ms | "
            f"{total * 1000:.0f} ms ({verdict} target) | {total / baseline:.1f}x | "
            f"{whole * 1000:.0f} ms |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
