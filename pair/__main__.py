"""`python -m pair`: the pair CLI, or the detached supervisor for `_supervise`."""

from __future__ import annotations

import sys

if sys.argv[1:2] == ["_supervise"]:
    # The supervisor skips Typer entirely: it starts for every turn and needs no CLI parsing,
    # and it ends its own way (pair/supervisor.py).
    from pair.supervisor import main as supervise

    sys.exit(supervise(sys.argv[2:]))
else:
    from pair.entry import run

    run()
