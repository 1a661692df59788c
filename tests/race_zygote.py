"""Start many `unit` commands at the same instant, without paying Python's start-up for each.

Run as `python tests/race_zygote.py ARGVS_JSON OUT_DIR`: it imports the CLI once, then forks one
child per argument list; each child is a separate process (its own pid and file locks) that runs
the real entry point, `unitmgr.cli.main(argv)`, with stdout redirected to `OUT_DIR/<i>.json`. It
prints the children's exit codes as JSON. No lock is held when it forks.
"""

from __future__ import annotations

import json
import os
import sys

import typer.main

import unitmgr.lifecycle.create  # noqa: F401  (warmed before forking, like the CLI would load it)
from unitmgr.cli import app, main


def run(argvs: list[list[str]], out_dir: str) -> list[int]:
    typer.main.get_command(app)
    children = []
    for index, argv in enumerate(argvs):
        pid = os.fork()
        if pid == 0:  # the child: one racing lead
            fd = os.open(os.path.join(out_dir, f"{index}.json"), os.O_WRONLY | os.O_CREAT, 0o600)
            os.dup2(fd, 1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            sys.stdout = os.fdopen(1, "w", closefd=False)
            sys.stderr = os.fdopen(2, "w", closefd=False)
            code = main(argv)
            sys.stdout.flush()
            os._exit(code)
        children.append(pid)
    return [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]), sys.argv[2])))
