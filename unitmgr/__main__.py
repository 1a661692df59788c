"""`python -m unitmgr`: the `unit` command."""

from __future__ import annotations

from unitmgr.entry import run

run()
