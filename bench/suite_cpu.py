"""The test suite's cost in CPU seconds, a figure a shared, loaded machine does not distort.

Run as `python bench/suite_cpu.py [pytest arguments...]` from a checkout: it becomes the child
subreaper of everything pytest starts (so detached supervisors and the partners they run are
reaped here and their CPU counted), runs `python -m pytest` with the arguments, waits for every
descendant, and prints one JSON line: wall seconds, CPU seconds (user + system of all
descendants), the load average before and after, pytest's exit code. Wall time on a machine
other people use is noise; CPU seconds are what the suite costs the two cores.

It must not change what the suite runs; a descendant still alive 60 s after pytest ends is named
and left out of the count.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main(arguments: list[str]) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("cannot become a child subreaper (Linux only)", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    started = time.monotonic()
    pytest = subprocess.Popen([sys.executable, "-m", "pytest", *arguments])
    code: int | None = None
    deadline: float | None = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG if deadline else 0)
        except ChildProcessError:
            break
        if pid == pytest.pid:
            code = os.waitstatus_to_exitcode(status)
            pytest.returncode = code
            wall = time.monotonic() - started
            deadline = time.monotonic() + 60
        if deadline and pid == 0:
            if time.monotonic() > deadline:
                left = subprocess.run(
                    ["ps", "--ppid", str(os.getpid()), "-o", "pid,args"],
                    capture_output=True,
                    text=True,
                ).stdout
                print(f"still running, not counted:\n{left}", file=sys.stderr)
                break
            time.sleep(0.1)  # polls for the last descendants to exit
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "pytest_args": arguments,
                "exit_code": code,
                "wall_s": round(wall, 1),
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                "user_s": round(usage.ru_utime, 1),
                "system_s": round(usage.ru_stime, 1),
                "load_before": [round(value, 2) for value in load_before],
                "load_after": [round(value, 2) for value in os.getloadavg()],
            }
        )
    )
    return code or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
