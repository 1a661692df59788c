"""How soon `unit wait` wakes after a receipt lands (SPEC 3.11: within a second).

One unit whose script partner blocks until a gate file exists; per round a `unit wait` is
started (after `unit status --all`, whose `observed_at` is its `--since`), the gate is opened,
and the delay from the receipt file's mtime to the moment `wait`'s JSON arrives is measured.
Run with the inotify watch (registry/dirwatch.py) and with it disabled (the 0.25 s stat loop
alone), in the same run. `python -m bench.wait_wake`.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from bench.common import environment, machine, run, scratch

ROUNDS = 8
# The same `unit` entry with inotify unavailable: the fallback the stat loop alone gives.
WITHOUT_INOTIFY = (
    "import sys, registry.dirwatch as d; d._libc = lambda: None; "
    "from unitmgr.entry import main; sys.exit(main(sys.argv[1:]))"
)


def main() -> None:
    root = scratch()
    try:
        env = environment(root / "home")
        repo = root / "repo"
        run(["git", "init", "-q", "-b", "main", str(repo)], env, root)
        (repo / "README.md").write_text("bench\n")
        run(["git", "-C", str(repo), "add", "README.md"], env, root)
        run(["git", "-C", str(repo), "commit", "-q", "-m", "initial"], env, root)
        task, gate = root / "task.md", root / "gate"
        task.write_text("wait for the gate\n")
        gated = f"cat > /dev/null; while [ ! -f {gate} ]; do sleep 0.01; done; echo done"
        unit = ["unit"]
        run(
            [*unit, "create", "--unit", "u1", "--worktree", str(root / "wt"), "--branch", "b1",
             "--base", "main", "--scope", "s", "--validation", "true", "--lead", "human",
             "--partner", "script", "--reason", "bench", "--task-file", str(task),
             "--model", gated, "--repo", str(repo)],
            env, root,
        )  # fmt: skip
        results: dict[str, list[float]] = {"inotify": [], "stat loop only": []}
        for index in range(ROUNDS * 2):
            label = "inotify" if index % 2 == 0 else "stat loop only"
            waiter = ["unit"] if label == "inotify" else [sys.executable, "-c", WITHOUT_INOTIFY]
            if index:  # a new gated turn for this round
                gate.unlink()
                run(["pair", "send", "--kind", "question", "--body-file", str(task),
                     "--background", "--repo", str(root / "wt")], env, root)  # fmt: skip
            since = json.loads(run([*unit, "status", "--all", "--repo", str(repo)], env, root)
                               .stdout)["observed_at"]  # fmt: skip
            process = subprocess.Popen(
                [*waiter, "wait", "--since", since, "--timeout-min", "1", "--repo", str(repo)],
                env=env, cwd=root, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            time.sleep(0.6)  # let the waiter start and block before the receipt lands
            gate.write_text("go")
            assert process.stdout is not None
            output = process.stdout.read()
            arrived = time.time()
            process.wait()
            (change,) = json.loads(output)["changed"]
            landed = os.stat(change["latest_receipt"]["receipt_file"]).st_mtime
            results[label].append(arrived - landed)
        print(f"machine: {machine()}")
        for label, delays in results.items():
            print(
                f"{label}: receipt → wait's output, median {statistics.median(delays) * 1000:.0f}"
                f" ms, max {max(delays) * 1000:.0f} ms over {len(delays)} rounds"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
