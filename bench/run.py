"""Run every benchmark and rewrite references/benchmarks.md: `.venv/bin/python -m bench.run`."""

from __future__ import annotations

import datetime
from pathlib import Path

from bench import startup
from bench.common import machine

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    sections = [
        "# Benchmarks",
        "",
        "Written by `.venv/bin/python -m bench.run` "
        f"on {datetime.date.today().isoformat()}; machine: {machine()}.",
        "Each figure is a median of repeated runs of the real installed commands.",
        "",
        "## Start-up",
        "",
        startup.__doc__.strip().replace("\n", " ") if startup.__doc__ else "",
        "",
        startup.report(),
        "",
    ]
    (ROOT / "references" / "benchmarks.md").write_text("\n".join(sections))
    print("\n".join(sections))


if __name__ == "__main__":
    main()
