"""Notification delivery (SPEC 3.15): what a sink costs the process that delivers, and that a
hanging sink costs a `unit` command only the spawn of its detached delivery child.

In-process `registry.notify.deliver` to a local HTTP receiver and to a `cat` command, and
`registry.notify.spawn` (what `unit` calls) with a command that hangs: the caller's cost per
spawn, then every child's `notify-failed` once its timeout (`UNITMGR_NOTIFY_TIMEOUT`, 1 s here)
killed the hang. Run: `.venv/bin/python -m bench.notify`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

RUNS = 20


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _median_ms(action: Any) -> float:
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    os.environ["UNITMGR_NOTIFY_TIMEOUT"] = "1"
    import psutil

    from registry import notify

    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = Path(tempfile.mkdtemp(prefix="bench-notify-"))
    events = root / "events.jsonl"

    def target(**settings: Any) -> notify.Target:
        return notify.Target(notify.NotifySettings(**settings), "u1", str(root), events)

    url = target(url=f"http://127.0.0.1:{server.server_port}/hook")
    document = notify.payload(url, "created")
    posted = _median_ms(lambda: notify.deliver(url, document))
    print(f"deliver, url sink (in-process): {posted:.1f} ms")
    command = target(command="cat >/dev/null")
    ran = _median_ms(lambda: notify.deliver(command, document))
    print(f"deliver, command sink `cat`: {ran:.1f} ms")
    hung = target(command="sleep 30")
    pids: list[int | None] = []
    spent = _median_ms(lambda: pids.append(notify.spawn(hung, document)))
    print(f"spawn, hanging command sink (the caller's cost): {spent:.1f} ms")
    started = time.monotonic()
    for pid in pids:
        if pid is not None:
            try:
                psutil.Process(pid).wait(30)
            except psutil.NoSuchProcess:
                pass
    failed = len(events.read_text().splitlines()) if events.exists() else 0
    print(
        f"{failed} of {len(pids)} hanging deliveries killed and reported as notify-failed "
        f"within {time.monotonic() - started:.1f} s"
    )
    server.shutdown()


if __name__ == "__main__":
    main()
