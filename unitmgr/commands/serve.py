"""`unit serve` (SPEC 3.14): a read-only web dashboard for people; it serves until Ctrl-C."""

from __future__ import annotations

from typing import Annotated

import typer

from unitmgr.commands.common import LockTimeout, Repo, Result


def command(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on; off loopback it needs UNITMGR_SERVE_TOKEN.",
            metavar="HOST",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="Port to listen on (0: any free port).", metavar="PORT")
    ] = 8787,
    prs: Annotated[
        bool, typer.Option("--prs", help="Also show each branch's PRs (read from GitHub).")
    ] = False,
    repo: Repo = ".",
    lock_timeout: LockTimeout = "30",
) -> Result:
    """A read-only web dashboard. What needs you, every unit, its transcript, live in a browser."""
    from unitmgr import quick_reads
    from unitmgr.views import serve

    quick_reads.lock_free(lock_timeout)
    return serve.run(repo, host=host, port=port, prs=prs)
