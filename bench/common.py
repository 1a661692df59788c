"""Shared helpers for the benchmarks: timing, machine description, isolated environments."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from unitmgr.demo import isolated_environment


def environment(home: Path) -> dict[str, str]:
    """An isolated environment, with bytecode caching on: an installed unitmgr has its `.pyc`
    files, and a session that sets PYTHONDONTWRITEBYTECODE would time the compiler instead."""
    found = {
        **isolated_environment(home, name="bench", email="bench@unitmgr.invalid"),
        "UNITMGR_SKIP_GH_AUTH_TOKEN": "1",
    }
    found.pop("PYTHONDONTWRITEBYTECODE", None)
    return found


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
