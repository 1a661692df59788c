"""Start-up cost: `unit --help` and `unit status --all` on an empty registry, as a ratio of
`python -c pass` (SPEC 7: heavy imports load lazily)."""

from __future__ import annotations

import shutil
import sys

from bench.common import environment, median_seconds, run, scratch

RUNS = 15


def measure() -> list[tuple[str, float, float]]:
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        run(["git", "init", "-q", str(root / "repo")], env, root)
        repo = root / "repo"
        baseline = median_seconds(lambda: run([sys.executable, "-c", "pass"], env, root), RUNS)
        rows = [("python -c pass", baseline, 1.0)]
        for label, argv in (
            ("unit --help", ["unit", "--help"]),
            ("unit status --all (empty)", ["unit", "status", "--all", "--repo", str(repo)]),
            ("unit list (empty)", ["unit", "list", "--repo", str(repo)]),
            ("pair --help", ["pair", "--help"]),
        ):
            seconds = median_seconds(lambda argv=argv: run(argv, env, root), RUNS)
            rows.append((label, seconds, seconds / baseline))
        return rows
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report() -> str:
    lines = [
        "| command | median | ratio to `python -c pass` |",
        "|---|---|---|",
    ]
    for label, seconds, ratio in measure():
        lines.append(f"| `{label}` | {seconds * 1000:.0f} ms | {ratio:.1f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
