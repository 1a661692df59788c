"""Run every benchmark and rewrite references/benchmarks.md: `.venv/bin/python -m bench.run`."""

from __future__ import annotations

import datetime
from pathlib import Path

from bench import creates, race_rounds, serve, startup, status_scale, turn_overhead
from bench.common import machine

ROOT = Path(__file__).resolve().parent.parent


def _section(title: str, module: object, table: str) -> list[str]:
    doc = (getattr(module, "__doc__", "") or "").strip()
    return [f"## {title}", "", doc, "", table, ""]


def main() -> None:
    lines = [
        "# Benchmarks",
        "",
        "Written by `.venv/bin/python -m bench.run` "
        f"on {datetime.date.today().isoformat()}; machine: {machine()}.",
        "Each figure is measured on the real installed commands (medians where repeated).",
        "",
    ]
    lines += _section("Start-up", startup, startup.report())
    lines += _section("`status --all` at scale", status_scale, status_scale.report())
    lines += _section("Concurrent creates and the admission race", creates, creates.report())
    lines += _section("The admission race, many rounds", race_rounds, race_rounds.report())
    lines += _section("A turn's own overhead", turn_overhead, turn_overhead.report())
    lines += _section("`unit serve`: what an open page costs", serve, serve.report())
    (ROOT / "references" / "benchmarks.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
