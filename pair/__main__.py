"""`python -m pair`: the pair CLI, or the detached supervisor for `_supervise`."""

from __future__ import annotations

import sys


def _main() -> int:
    if sys.argv[1:2] == ["_supervise"]:
        # The supervisor skips Typer entirely: it starts for every turn and needs no CLI parsing.
        from pair.supervisor import main as supervise

        return supervise(sys.argv[2:])
    from pair.entry import main

    return main()


sys.exit(_main())
