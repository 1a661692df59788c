"""Shared helpers for the benchmarks: timing, machine description, isolated environments."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

VENV_BIN = str(Path(sys.executable).parent)


def environment(home: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GH_", "GITHUB_", "GIT_", "UNITMGR_"))
    }
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([VENV_BIN, env.get("PATH", "/usr/bin:/bin")]),
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@unitmgr.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@unitmgr.invalid",
        GIT_CONFIG_NOSYSTEM="1",
        UNITMGR_SKIP_GH_AUTH_TOKEN="1",
    )
    return env


def median_seconds(action: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=True)


def machine() -> str:
    cpus = os.cpu_count()
    return (
        f"{platform.system()} {platform.machine()}, {cpus} cores, Python "
        f"{platform.python_version()}, "
        + subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    )


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="unitmgr-bench-"))
