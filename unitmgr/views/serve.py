"""`unit serve` (SPEC 3.14): a read-only web dashboard over `status --all`, `list` and the events.

One process serves one static page (unitmgr/views/dashboard/) and a few JSON endpoints until
Ctrl-C:

- `/api/status` and `/api/list` return exactly the `unit status --all` and `unit list [--prs]`
  documents (the same view functions, the same redacted JSON bytes);
- `/api/checks` (with `--prs`) returns each open PR's checks on its head, the latest report of
  each (`unitmgr.forge.latest_checks`, as the merge gate judges them);
- `/api/units/<id>` returns one unit's transcript tail (the last 64 KiB of its current or latest
  turn, redacted, never the whole file), its turns (receipt summaries) and its events from
  `events.jsonl` (read from a bounded tail), for the page's detail pane.

It writes nothing, takes no lock and never runs a turn: it only calls views and pair's read-only
API. A record is untrusted input (SPEC 2.5), so a transcript is read only from the pair state
dir git proves is the unit's worktree's (unitmgr/ownership.py), and only files under its
transcripts directory, opened without following symlinks. Loopback by default; any other host
needs `UNITMGR_SERVE_TOKEN`, compared in constant time on every request; a loopback server
refuses a `Host` header that is not loopback (a DNS-rebinding page cannot read it).

One `WorktreeScanner` held for the process skips the git calls of unchanged worktrees (SPEC 7),
and documents are shared between requests for at most a second (`--prs` answers for a minute:
GitHub's rate limit), so several open pages cost what one does. This module must not import the
lifecycle or typer.

Over ~400 lines because the server's guards (token, Host, bounded and symlink-free reads) must
sit beside every endpoint they guard, in one reviewable place.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import ipaddress
import json
import os
import re
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from registry import bounded
from registry.errors import Interrupted, Rewrite, StateError, ToolError, UsageError
from registry.output import dumps, progress
from registry.redact import redact
from registry.timeutil import seconds_from_env
from unitmgr import validation
from unitmgr.views import observe
from unitmgr.views.worktree_scan import WorktreeScanner
from unitmgr.workspace import Workspace, realpath

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from unitmgr.forge import Forge

TOKEN_VARIABLE = "UNITMGR_SERVE_TOKEN"
MIN_TOKEN_LENGTH = 16
# It travels in a header and a cookie: nothing that could end or split one.
TOKEN_SHAPE = re.compile(rf"[A-Za-z0-9._~+/=-]{{{MIN_TOKEN_LENGTH},}}")
COOKIE = "unitmgr_serve"
TAIL_BYTES = 64 * 1024  # SPEC 3.14: the transcript tail, never the whole file
EVENTS_TAIL_BYTES = 1024 * 1024  # events.jsonl grows for ever: only its end is read
EVENTS_LIMIT = 200
TURNS_LIMIT = 50
RECEIPT_MAX_BYTES = 256 * 1024
HANDLER_TIMEOUT_SECONDS = 30.0  # SPEC 8: no connection is served longer
TIMEOUT_VARIABLE = "UNITMGR_SERVE_TIMEOUT"  # overrides the 30 s, for tests
MAX_CONNECTIONS = 32  # SPEC 8: open connections at once; one more is answered 503
TURNED_AWAY_SECONDS = 1.0  # a 503'd connection is closed this long after its answer
MAX_TURNED_AWAY = 256  # beyond this many waiting to close, the oldest is closed at once
FRESH_SECONDS = 1.0  # a document younger than this answers every page that asks
PULLS_FRESH_SECONDS = 60.0  # `--prs`: one GitHub read per unit per minute, whatever polls
STATIC_DIR = Path(__file__).resolve().parent / "dashboard"
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def port_number(port: int) -> int:
    if not 0 <= port <= 65535:
        raise UsageError(
            "invalid-port",
            f"--port must be 0 to 65535 (0: any free port), got {port}",
            next_step="unit serve --port 8787",
            next_command=Rewrite(set_options={"--port": "8787"}),
        )
    return port


def serve_token(host: str) -> str | None:
    """The token every request must carry: required off loopback, honoured when set anyway."""
    token = os.environ.get(TOKEN_VARIABLE) or None
    if token is None and not is_loopback(host):
        raise UsageError(
            "serve-token-required",
            f"unit serve --host {host} is reachable from other machines: set "
            f"{TOKEN_VARIABLE} (at least {MIN_TOKEN_LENGTH} characters)",
            next_step=f'{TOKEN_VARIABLE}="$(openssl rand -hex 24)" unit serve --host {host}',
        )
    if token is not None and not TOKEN_SHAPE.fullmatch(token):
        raise UsageError(
            "serve-token-required",
            f"{TOKEN_VARIABLE} must be at least {MIN_TOKEN_LENGTH} characters of letters, "
            "digits and ._~+/=-",
            next_step=f'{TOKEN_VARIABLE}="$(openssl rand -hex 24)" unit serve --host {host}',
        )
    return token


# -- reading, bounded ----------------------------------------------------------------------------


def _small_json(path: Path, below: Path) -> dict[str, Any] | None:
    try:
        value = bounded.read_json(path, RECEIPT_MAX_BYTES, below=below)
    except (OSError, ValueError):  # missing, refused by the bounded reader, or not JSON
        return None
    return value if isinstance(value, dict) else None


class Snapshots:
    """The documents the page polls, computed at most once per `FRESH_SECONDS` for all pages.

    The lock serializes computation (the scanner remembers worktrees between calls); it is this
    process's own, never a registry lock.
    """

    def __init__(self, workspace: Workspace, *, prs: bool) -> None:
        self.workspace = workspace
        self.prs = prs
        self.scanner = WorktreeScanner(reuse=True, common_git_dir=workspace.common_git_dir)
        self._lock = threading.RLock()  # checks() reads the list document under it
        self._cache: dict[str, tuple[float, bytes]] = {}

    def _fresh(self, name: str, seconds: float, compute: Callable[[], dict[str, Any]]) -> bytes:
        with self._lock:
            cached = self._cache.get(name)
            if cached is not None and time.monotonic() - cached[0] < seconds:
                return cached[1]
            body = redact(dumps(compute())).encode()
            self._cache[name] = (time.monotonic(), body)
            return body

    def status(self) -> bytes:
        return self._fresh(
            "status", FRESH_SECONDS, lambda: observe.status_all(self.workspace, self.scanner)
        )

    def units(self) -> bytes:
        return self._fresh(
            "list",
            PULLS_FRESH_SECONDS if self.prs else FRESH_SECONDS,
            lambda: observe.list_units(self.workspace, with_pulls=self.prs),
        )

    def checks(self) -> bytes:
        return self._fresh("checks", PULLS_FRESH_SECONDS, self._checks)

    def _checks(self) -> dict[str, Any]:
        """`/api/checks` (with `--prs`): each open PR's checks on its head, latest report each."""
        if not self.prs:
            return {"ok": True, "units": {}, "why": "unit serve --prs reads PRs and checks"}
        from unitmgr.forge_github import open_forge

        forge = open_forge(self.workspace)
        if forge is None:
            return {"ok": True, "units": {}, "why": "GitHub is not configured"}
        found: dict[str, list[dict[str, Any]]] = {}
        for unit in json.loads(self.units()).get("units", []):
            pulls = (unit.get("observed") or {}).get("pull_requests")
            for pull in pulls if isinstance(pulls, list) else []:
                if pull.get("state") == "open" and pull.get("head_sha"):
                    found.setdefault(unit["unit_id"], []).append(pull_checks(forge, pull))
        return {"ok": True, "units": found}

    def unit(self, unit_id: str) -> bytes:
        return redact(dumps(unit_detail(self.workspace, unit_id))).encode()


PENDING_STATES = ("pending", "queued", "in_progress", "requested", "waiting")


def pull_checks(forge: Forge, pull: dict[str, Any]) -> dict[str, Any]:
    """One PR's checks on its head: `{number, head_sha, passing, pending, failing}` (labels)."""
    from unitmgr.forge import is_passing, latest_checks

    summary: dict[str, Any] = {"number": pull.get("number"), "head_sha": pull.get("head_sha")}
    try:
        checks = latest_checks(forge.checks(pull["head_sha"]))
    except ToolError as error:
        return {**summary, "error": error.reason}
    summary["passing"] = sorted(check.label for check in checks if is_passing(check))
    summary["pending"] = sorted(c.label for c in checks if c.state in PENDING_STATES)
    summary["failing"] = sorted(
        c.label for c in checks if not is_passing(c) and c.state not in PENDING_STATES
    )
    return summary


def _proven_state_dir(workspace: Workspace, unit_id: str) -> Path | None:
    """The unit's pair state dir, as git proves it (None: no pair, or no worktree)."""
    from unitmgr.ownership import Ownership

    record = workspace.read_record(unit_id)
    if record is None:
        raise StateError(
            "no-such-unit",
            f"unit {unit_id} is not recorded",
            next_step="unit list",
        )
    ownership = Ownership(workspace, record, read_only=True)  # no sibling records: this reads
    return ownership.pair_state_dir(ownership.worktree())


def _turns(state_dir: Path) -> list[dict[str, Any]]:
    from pair.api import is_receipt, paths_at

    transcripts = paths_at(state_dir).transcripts_dir
    try:
        names = sorted(name for name in os.listdir(transcripts) if is_receipt(name))
    except OSError:
        return []
    turns = []
    for name in names[-TURNS_LIMIT:]:
        receipt = _small_json(transcripts / name, state_dir.parent)
        if receipt is None:
            continue
        summary = observe.receipt_summary(receipt) or {}
        summary.update(
            {key: receipt.get(key) for key in ("started_at", "finished_at", "seconds", "ok")}
        )
        reply = receipt.get("reply")
        lines = reply.strip().splitlines() if isinstance(reply, str) else []
        summary["reply_first_line"] = lines[0][:300] if lines else None
        turns.append(summary)
    return turns


def _transcript(state_dir: Path) -> dict[str, Any] | None:
    from pair.api import paths_at, read_status

    turn = read_status(state_dir).get("turn")
    if not isinstance(turn, dict) or not isinstance(turn.get("seq"), int) or not turn.get("kind"):
        return None
    paths = paths_at(state_dir)
    path = paths.transcript_file(turn["seq"], str(turn["kind"]))
    view: dict[str, Any] = {"seq": turn["seq"], "kind": turn["kind"], "file": str(path)}
    if realpath(path.parent) != realpath(paths.transcripts_dir):
        return {**view, "error": "the turn's kind names a file outside the transcripts directory"}
    try:
        data, size, offset = bounded.read_tail(path, TAIL_BYTES, below=state_dir.parent)
    except FileNotFoundError:
        return {**view, "bytes": 0, "offset": 0, "truncated": False, "text": ""}
    except bounded.Unreadable as error:
        return {**view, "error": f"cannot read the transcript: {error.reason}"}
    except OSError as error:
        return {**view, "error": f"cannot read the transcript: {error.strerror or error}"}
    text = data.decode("utf-8", errors="replace")  # redacted with the whole answer
    return {**view, "bytes": size, "offset": offset, "truncated": offset > 0, "text": text}


def _events(workspace: Workspace, unit_id: str) -> list[dict[str, Any]]:
    try:
        data, _, _ = bounded.read_tail(
            workspace.registry.events_file, EVENTS_TAIL_BYTES, below=workspace.common_git_dir
        )
    except (OSError, ValueError):
        return []
    found = []
    for line in data.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("unit") == unit_id:
            found.append(event)
    return found[-EVENTS_LIMIT:]


def unit_detail(workspace: Workspace, unit_text: str) -> dict[str, Any]:
    """`/api/units/<id>`: the transcript tail, the turns and the events of one unit."""
    unit_id = validation.unit_id(unit_text)
    detail: dict[str, Any] = {"ok": True, "unit_id": unit_id}
    try:
        state_dir = _proven_state_dir(workspace, unit_id)
    except StateError as error:
        if error.code == "no-such-unit":
            raise
        # An untrusted pair path is shown as such; the unit's events are still the registry's.
        state_dir, detail["untrusted"] = None, error.reason
    detail["transcript"] = _transcript(state_dir) if state_dir else None
    detail["turns"] = _turns(state_dir) if state_dir else []
    detail["events"] = _events(workspace, unit_id)
    return detail


# -- HTTP ----------------------------------------------------------------------------------------


def _refusal(code: str, reason: str, next_step: str) -> bytes:
    return dumps({"ok": False, "code": code, "reason": reason, "next": next_step}).encode()


class Dashboard:
    """What every request handler shares: the documents, the token and the allowed hosts."""

    def __init__(self, snapshots: Snapshots, *, token: str | None, loopback: bool) -> None:
        self.snapshots = snapshots
        self.token = token
        self.loopback = loopback
        self.requests = 0
        self.url = "http://127.0.0.1:PORT/"  # set once bound
        self._count = threading.Lock()

    def counted(self) -> None:
        with self._count:
            self.requests += 1

    def authorized(self, handler: BaseHTTPRequestHandler, query: dict[str, list[str]]) -> bool:
        if self.token is None:
            return True
        offered = [*query.get("token", [])]
        header = handler.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            offered.append(header[len("Bearer ") :])
        for part in handler.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE:
                offered.append(value)
        expected = self.token.encode()
        # Every offer is compared in full: constant time per offer, whatever matches.
        matches = [hmac.compare_digest(value.encode(), expected) for value in offered]
        return any(matches)

    def host_allowed(self, handler: BaseHTTPRequestHandler) -> bool:
        """A loopback server without a token answers only a loopback `Host`: a page on another
        site whose name resolves to 127.0.0.1 (DNS rebinding) is refused."""
        if self.token is not None or not self.loopback:
            return True
        host = handler.headers.get("Host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return is_loopback(name)


def handler_for(dashboard: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "unitmgr-serve"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:
            """No access log: a person runs this in a terminal, and a URL may carry the token."""

        def _send(
            self,
            status: int,
            body: bytes,
            content_type: str = "application/json; charset=utf-8",
            extra: dict[str, str] | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in {**SECURITY_HEADERS, **(extra or {})}.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:
            dashboard.counted()
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if not dashboard.host_allowed(self):
                self._send(
                    HTTPStatus.FORBIDDEN,
                    _refusal(
                        "forbidden-host",
                        f"this dashboard answers only a loopback Host, not {self.headers['Host']}",
                        f"open {dashboard.url} (or set UNITMGR_SERVE_TOKEN)",
                    ),
                )
                return
            if not dashboard.authorized(self, query):
                self._send(
                    HTTPStatus.UNAUTHORIZED,
                    _refusal(
                        "unauthorized",
                        "this dashboard needs its token",
                        "open /?token=<UNITMGR_SERVE_TOKEN>, or send "
                        "Authorization: Bearer <UNITMGR_SERVE_TOKEN>",
                    ),
                    extra={"WWW-Authenticate": 'Bearer realm="unit serve"'},
                )
                return
            if "token" in query and url.path == "/":
                # The token goes into an HttpOnly cookie and out of the address bar and history.
                self._send(
                    HTTPStatus.SEE_OTHER,
                    b"",
                    extra={
                        "Location": "/",
                        "Set-Cookie": f"{COOKIE}={query['token'][0]}; HttpOnly; "
                        "SameSite=Strict; Path=/",
                    },
                )
                return
            try:
                self._route(url.path)
            except ToolError as error:
                status = {2: HTTPStatus.BAD_REQUEST, 75: HTTPStatus.SERVICE_UNAVAILABLE}.get(
                    error.exit_code,
                    HTTPStatus.NOT_FOUND if error.code == "no-such-unit" else HTTPStatus.CONFLICT,
                )
                self._send(status, redact(dumps(error.document())).encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the page went away mid-answer
            except Exception as error:
                # One bad answer, not a dead server; the trace goes to stderr, redacted.
                import traceback

                progress(f"unit serve: {self.path.split('?')[0]}: {traceback.format_exc()}")
                reason = f"unexpected error: {type(error).__name__}: {error}"
                self._send(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    redact(
                        dumps(
                            {
                                "ok": False,
                                "code": "internal",
                                "reason": reason,
                                "next": "a bug: report it with unit serve's stderr",
                            }
                        )
                    ).encode(),
                )

        do_HEAD = do_GET

        def _route(self, path: str) -> None:
            if path in STATIC:
                name, content_type = STATIC[path]
                self._send(HTTPStatus.OK, (STATIC_DIR / name).read_bytes(), content_type)
            elif path == "/api/status":
                self._send(HTTPStatus.OK, dashboard.snapshots.status())
            elif path == "/api/list":
                self._send(HTTPStatus.OK, dashboard.snapshots.units())
            elif path == "/api/checks":
                self._send(HTTPStatus.OK, dashboard.snapshots.checks())
            elif path.startswith("/api/units/"):
                self._send(HTTPStatus.OK, dashboard.snapshots.unit(unquote(path[11:])))
            else:
                self._send(
                    HTTPStatus.NOT_FOUND,
                    _refusal(
                        "not-found",
                        f"no such page: {path}",
                        "GET /, /api/status, /api/list, /api/checks or /api/units/<id>",
                    ),
                )

        def _read_only(self) -> None:
            dashboard.counted()
            self._send(
                HTTPStatus.METHOD_NOT_ALLOWED,
                _refusal("read-only", "unit serve only reads: GET or HEAD", "use GET"),
                extra={"Allow": "GET, HEAD"},
            )

        do_POST = do_PUT = do_DELETE = do_PATCH = _read_only

    return Handler


BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
    b"Connection: close\r\nRetry-After: 2\r\n\r\n"
    + _refusal(
        "busy",
        f"unit serve has {MAX_CONNECTIONS} connections open, its limit",
        "retry the request after 2 s (Retry-After), or close idle dashboard pages",
    )
)


def _cut(connection: Any) -> None:
    """End a connection that ran over its deadline: its handler's next read or write fails."""
    import socket

    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


class DashboardServer(ThreadingHTTPServer):
    """One thread per connection, at most `MAX_CONNECTIONS` at once (SPEC 8): one more is
    answered 503 and closed at once, without a thread. Each connection has a socket timeout
    and a deadline for the whole exchange (`handler_timeout`), so a client that trickles its
    request a byte at a time (slowloris) or never reads its answer holds a slot 30 s at most."""

    daemon_threads = True  # a page left open never holds up Ctrl-C
    allow_reuse_address = True
    # The kernel's queue of connections not yet accepted: at socketserver's 5, a burst of
    # clients waits out SYN retries (seconds) before the cap can even answer them.
    request_queue_size = 128
    handler_timeout = HANDLER_TIMEOUT_SECONDS

    def server_activate(self) -> None:
        super().server_activate()
        self.handler_timeout = seconds_from_env(TIMEOUT_VARIABLE, HANDLER_TIMEOUT_SECONDS)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.turned_away: list[tuple[float, Any]] = []

    def _turn_away(self, request: Any) -> None:
        """503 and end-of-stream at once, from the serving thread (never waiting on the
        client); the socket itself is closed a moment later by `service_actions`, once the
        client has had time to send its request and read the answer — closing a socket with
        its request unread would reset the connection before the 503 is read."""
        import socket

        with contextlib.suppress(OSError):
            request.setblocking(False)
            request.send(BUSY)  # what fits the socket buffer, which is all of it
            request.shutdown(socket.SHUT_WR)
        self.turned_away.append((time.monotonic() + TURNED_AWAY_SECONDS, request))
        while len(self.turned_away) > MAX_TURNED_AWAY:
            self._close(self.turned_away.pop(0)[1])

    def service_actions(self) -> None:
        super().service_actions()
        now = time.monotonic()
        while self.turned_away and self.turned_away[0][0] <= now:
            self._close(self.turned_away.pop(0)[1])

    @staticmethod
    def _close(request: Any) -> None:
        with contextlib.suppress(OSError):
            request.recv(65536)  # what the client sent meanwhile: read, so close sends no reset
        with contextlib.suppress(OSError):
            request.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self._turn_away(request)
            return
        # The slot is the thread's from the moment it starts (it releases it when done), so it
        # is released here only while no thread was started. A stop signal landing right after
        # the start must not release it a second time: the `ValueError` of an over-released
        # semaphore would replace the interrupt, socketserver would print it, and the server
        # would go on serving after being told to stop.
        try:
            request.settimeout(self.handler_timeout)
            thread = threading.Thread(
                target=self.process_request_thread, args=(request, client_address), daemon=True
            )
        except BaseException:
            self.slots.release()
            raise
        try:
            thread.start()
        except RuntimeError:  # no thread could be started: nothing else will release the slot
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        watchdog = threading.Timer(self.handler_timeout, _cut, (request,))
        watchdog.daemon = True
        watchdog.start()
        try:
            super().process_request_thread(request, client_address)
        finally:
            watchdog.cancel()
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that timed out, was cut or went away says nothing; anything else is
        one redacted trace on stderr (socketserver's own would print it unredacted)."""
        import sys
        import traceback

        if isinstance(sys.exc_info()[1], OSError):
            return
        progress(f"unit serve: {traceback.format_exc()}")


def bind(host: str, port: int, dashboard: Dashboard) -> DashboardServer:
    import socket

    class Server(DashboardServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        return Server((host.strip("[]"), port), handler_for(dashboard))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise StateError(
                "port-in-use",
                f"port {port} on {host} is in use by another process",
                detail={"host": host, "port": port},
                next_step=f"unit serve --host {host} --port 0",  # any free port
            ) from None
        raise StateError(
            "bind-failed",
            f"cannot listen on {host}:{port}: {error.strerror or error}",
            detail={"host": host, "port": port, "errno": error.errno},
            next_step="unit serve --host 127.0.0.1",
        ) from None


def run(repo: str, *, host: str, port: int, prs: bool) -> dict[str, Any]:
    """Serve until SIGINT or SIGTERM; then one document saying it stopped (exit 0)."""
    port = port_number(port)
    token = serve_token(host)
    workspace = Workspace.open(repo)
    dashboard = Dashboard(Snapshots(workspace, prs=prs), token=token, loopback=is_loopback(host))
    server = bind(host, port, dashboard)
    bound_port = server.server_address[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    url = dashboard.url = f"http://{shown}:{bound_port}/"
    progress(
        f"unit serve: {url}" + (f"?token=${TOKEN_VARIABLE}" if token else "") + " — read-only, "
        "Ctrl-C stops"
    )
    stopped_by = None
    try:
        server.serve_forever(poll_interval=0.25)
    except (Interrupted, KeyboardInterrupt) as signal_received:
        import signal

        signum = getattr(signal_received, "signum", signal.SIGINT)
        stopped_by = signal.Signals(signum).name
    finally:
        server.server_close()
    return {
        "ok": True,
        "status": "stopped",
        "url": url,
        "signal": stopped_by,
        "requests": dashboard.requests,
    }
