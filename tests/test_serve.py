"""`unit serve` (SPEC 3.14): the dashboard in a real headless browser, and its HTTP contract.

The browser test drives Debian's `/usr/bin/chromium` through playwright (no browser download):
three script-partner units — one replied, one running behind a gate file, one failed — appear
with those attention states, the gated turn ends while the page is open and its receipt shows
within 5 s, a click opens the transcript tail, the copy button copies the recovery command, and
the console logs no error. Without chromium or playwright the test skips, except under CI
(`CI` or `UNITMGR_REQUIRE_REAL_CLIS=1`), where it fails. `UNITMGR_DASHBOARD_SCREENSHOT=PATH`
saves a screenshot of the page (references/dashboard.png is made that way).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI_OUTPUTS, Sandbox, git, wait_until, write_record

CHROMIUM = "/usr/bin/chromium"
# Read before the isolation fixture clears the environment.
REQUIRED = bool(os.environ.get("CI")) or os.environ.get("UNITMGR_REQUIRE_REAL_CLIS") == "1"
SCREENSHOT = os.environ.get("UNITMGR_DASHBOARD_SCREENSHOT")
TOKEN = "serve-token-" + "0123456789abcdef"
SECRET = "deploy-" + "secret-value-42"


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
        request = urllib.request.Request(self.url.rstrip("/") + path, headers=headers or {})
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(request, timeout=30) as response:
                body = response.read()
                status, head = response.status, response.headers
        except urllib.error.HTTPError as error:
            body, status, head = error.read(), error.code, error.headers
        text = body.decode()
        CLI_OUTPUTS.append(text)
        is_json = "json" in (head.get("Content-Type") or "")
        return status, json.loads(text) if is_json and text else text, head


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _stderr_line(process: subprocess.Popen[bytes], timeout: float = 30.0) -> str:
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([process.stderr], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"unit serve printed no address; exit {process.poll()}"
        chunk = os.read(process.stderr.fileno(), 1)
        assert chunk, f"unit serve ended: exit {process.wait()}"
        line += chunk
    return line.decode()


@contextmanager
def serving(sandbox: Sandbox, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """`unit serve --port 0` on the sandbox; leaving stops it with Ctrl-C and checks it ended
    with its one document, exit 0."""
    process = subprocess.Popen(
        ["unit", "serve", "--port", "0", *args, "--repo", str(sandbox.repo)],
        cwd=sandbox.root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = _stderr_line(process)
        url = line.split("unit serve: ", 1)[1].split()[0].split("?")[0]
        port = url.rsplit(":", 1)[1].rstrip("/")
        yield Served(process, f"http://127.0.0.1:{port}/")
        process.send_signal(signal.SIGINT)
        out, err = (stream.decode() for stream in process.communicate(timeout=30))
        CLI_OUTPUTS.append(out + err)
        assert process.returncode == 0, out + err
        stopped = json.loads(out)
        assert stopped["ok"] and stopped["status"] == "stopped" and stopped["signal"] == "SIGINT"
        assert stopped["requests"] >= 1
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _without_clock(value: Any) -> Any:
    """A `status --all` or `list` document minus what moves with the wall clock."""
    if isinstance(value, list):
        return [_without_clock(item) for item in value]
    if not isinstance(value, dict):
        return value
    moving = {"observed_at", "seconds_since_output"}
    if "state" in value and "since" in value:
        moving.add("why")  # attention's `why` may name an age
    return {key: _without_clock(item) for key, item in value.items() if key not in moving}


def _hold(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _registry_files(sandbox: Sandbox) -> dict[str, bytes]:
    return {
        str(path): path.read_bytes()
        for root in (sandbox.registry, sandbox.common_dir / "worktrees")
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_serve_contract_token_locks_and_bind_errors(sandbox: Sandbox, github: Any) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    sha = git(sandbox.worktree("u1"), "rev-parse", "HEAD")
    number = github.add_pull("feat/u1", sha)
    github.status(sha, "ci", "success")
    github.check_run(sha, "lint", conclusion="failure")

    refused = sandbox.unit("serve", "--host", "0.0.0.0")
    assert refused.code == 2 and refused["code"] == "serve-token-required", refused.stdout
    assert "UNITMGR_SERVE_TOKEN" in refused["next"]
    short = sandbox.unit("serve", env={**os.environ, "UNITMGR_SERVE_TOKEN": "short"})
    assert short.code == 2 and short["code"] == "serve-token-required"
    assert sandbox.unit("serve", "--port", "70000")["code"] == "invalid-port"

    before = _registry_files(sandbox)
    environment = {**os.environ, "UNITMGR_SERVE_TOKEN": TOKEN, "DEPLOY_SECRET": SECRET}
    with serving(sandbox, "--host", "0.0.0.0", "--prs", env=environment) as served:
        # Every request needs the token: the page, the documents, and an unknown path.
        for path in ("/", "/api/status", "/api/list", "/api/units/u1", "/nope"):
            status, body, head = served.get(path)
            assert status == 401 and body["code"] == "unauthorized", (path, body)
            assert head["WWW-Authenticate"].startswith("Bearer")
        wrong = served.get("/api/status", {"Authorization": "Bearer " + TOKEN[:-1] + "x"})
        assert wrong[0] == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}

        # Locks held by a writer do not slow a reader down: it takes none.
        held = [
            _hold(sandbox.registry / "registry.lock"),
            _hold(sandbox.registry / "locks" / "u1.lock"),
        ]
        try:
            status, document, head = served.get("/api/status", bearer)
            assert status == 200 and head["Cache-Control"] == "no-store"
            listed = served.get("/api/list", bearer)[1]
            checks = served.get("/api/checks", bearer)[1]
            detail = served.get("/api/units/u1", bearer)[1]
            # The CLI reads the same held locks the same way (the unit reads `busy`, SPEC 3.4).
            cli = sandbox.unit("status", "--all")
            cli_listed = sandbox.unit("list", "--prs")
        finally:
            for fd in held:
                os.close(fd)
        assert document["units"][0]["attention"]["state"] == "busy"
        assert _without_clock(document) == _without_clock(cli.document)
        assert _without_clock(listed) == _without_clock(cli_listed.document)
        assert [pull["number"] for pull in listed["units"][0]["observed"]["pull_requests"]] == [
            number
        ]
        [summary] = checks["units"]["u1"]
        assert summary["number"] == number and summary["head_sha"] == sha
        assert summary["passing"] == ["ci (success)"]
        assert summary["failing"] == ["lint by github-actions (failure)"]
        assert detail["transcript"]["text"].strip() == "done"
        assert [turn["status"] for turn in detail["turns"]] == ["replied"]
        assert any(event["command"] == "create" for event in detail["events"])

        # The token in the address moves into an HttpOnly cookie, which then suffices.
        status, _, head = served.get(f"/?token={TOKEN}")
        assert status == 303 and head["Location"] == "/"
        cookie = head["Set-Cookie"].split(";")[0]
        assert "HttpOnly" in head["Set-Cookie"]
        status, page, head = served.get("/", {"Cookie": cookie})
        assert status == 200 and "<title>unitmgr dashboard</title>" in page
        assert "script-src 'self'" in head["Content-Security-Policy"]
        assert served.get("/api/units/nobody", bearer)[0] == 404
        assert served.get("/api/units/bad%20id", bearer)[1]["code"] == "invalid-unit-id"
        post = urllib.request.Request(served.url + "api/status", data=b"{}", headers=bearer)
        with pytest.raises(urllib.error.HTTPError) as refused_post:
            urllib.request.urlopen(post, timeout=30)
        assert refused_post.value.code == 405

        port = served.url.rsplit(":", 1)[1].rstrip("/")
        taken = sandbox.unit("serve", "--host", "0.0.0.0", "--port", port, env=environment)
        assert taken.code == 1 and taken["code"] == "port-in-use", taken.stdout
        assert "--port 0" in taken["next"]
        assert _registry_files(sandbox) == before  # read-only: not one byte of the registry moved

        # The tail is the last 64 KiB, from a cut line on, and redacted again when served.
        transcript = Path(detail["transcript"]["file"])
        with transcript.open("a") as grown:
            grown.write("filler line\n" * 8000 + f"leaked {SECRET} here\n")
        tail = served.get("/api/units/u1", bearer)[1]["transcript"]
        assert tail["truncated"] and tail["bytes"] > 64 * 1024 >= len(tail["text"].encode())
        assert tail["text"].startswith("filler line\n")
        assert tail["text"].endswith("leaked *** here\n") and SECRET not in json.dumps(tail)

        # A record naming another directory as its pair state: the path is derived from the
        # worktree's git dir on every read (SPEC 8), so nothing there is read — the unit's
        # own pair state is shown, and its events.
        outside = sandbox.root / "outside"
        (outside / "transcripts").mkdir(parents=True)
        (outside / "transcripts" / "0001-task.log").write_text("not the unit's\n")
        record = sandbox.record("u1")
        record["pair"]["state_dir"] = str(outside)
        (sandbox.registry / "units" / "u1.json").write_text(json.dumps(record))
        hostile = served.get("/api/units/u1", bearer)[1]
        assert "not the unit's" not in json.dumps(hostile)
        assert hostile["transcript"]["file"].startswith(str(sandbox.common_dir / "worktrees"))
        assert hostile["events"]


def test_a_loopback_server_refuses_a_foreign_host_header(sandbox: Sandbox) -> None:
    with serving(sandbox) as served:
        assert served.get("/api/status")[0] == 200
        status, body, _ = served.get("/api/status", {"Host": "attacker.example:80"})
        assert status == 403 and body["code"] == "forbidden-host"
        assert body["next"].startswith(f"open http://127.0.0.1:{served.url.rsplit(':', 1)[1]}")
        document = served.get("/api/status", {"Host": "localhost"})[1]
        assert document["ok"] and document["units"] == []


def _browser() -> Any:
    missing = None
    if not os.path.exists(CHROMIUM):
        missing = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = missing or "playwright is missing (pip install -e '.[test]')"
    if missing:
        if REQUIRED:
            pytest.fail(f"the browser test cannot run under CI: {missing}")
        pytest.skip(missing)
    return sync_playwright


def test_the_dashboard_in_a_real_browser(sandbox: Sandbox, tmp_path: Path) -> None:
    sync_playwright = _browser()
    limits = {"max_active": "4", "max_held": "4"}
    # Its first turn replies, its second fails: `failed` (a failed *first* turn is `recovery`).
    mark = tmp_path / "tried"
    second_fails = f"cat >/dev/null; [ -e {mark} ] && exit 3; touch {mark}; echo first done"
    gate = tmp_path / "gate"
    gated = (
        f"cat > /dev/null; echo thinking about it; while [ ! -e {gate} ]; do sleep 0.05; done; "
        "echo the gated turn is over"
    )
    models = {
        "replying": "cat > /dev/null; echo greeting written",
        "broken": second_fails,
        "running": gated,
    }
    with ThreadPoolExecutor(3) as pool:  # three creates at once: the registry serializes them
        created = list(
            pool.map(lambda unit: sandbox.create(unit, model=models[unit], **limits), models)
        )
    assert [result.code for result in created] == [0, 0, 0], [r.stdout for r in created]
    for unit in ("replying", "broken"):
        sandbox.wait_turn(unit)
    (tmp_path / "question.md").write_text("one more thing\n")
    again = ("send", "--kind", "question", "--body-file", str(tmp_path / "question.md"))
    assert sandbox.pair(*again, repo=sandbox.worktree("broken"))["status"] == "failed"
    # Its worktree was never made: recovery, worktree missing; its feedback ledger has counts.
    counts = {"ci": 1, "review": 2, "withheld": 0, "at": "2026-12-01T10:00:00Z"}
    write_record(sandbox, "gone", feedback={"counts": counts})

    messages: list[str] = []
    with serving(sandbox) as served, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.grant_permissions(["clipboard-read", "clipboard-write"])
            page = context.new_page()
            page.on(
                "console",
                lambda message: (
                    messages.append(f"{message.type}: {message.text}")
                    if message.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda error: messages.append(f"pageerror: {error}"))
            page.goto(served.url)

            def attention(unit: str) -> str | None:
                return page.get_attribute(f'tr[data-unit="{unit}"]', "data-attention")

            page.wait_for_selector('tr[data-unit="running"]', timeout=15000)
            assert page.locator("#units tbody tr").count() == 4
            wait_until(lambda: attention("running") == "running", timeout=10)
            assert attention("replying") == "waiting-on-lead"
            assert attention("broken") == "failed"
            assert attention("gone") == "recovery"
            banner = page.locator("#banner")
            assert banner.get_attribute("data-state") == "waiting"
            waiting = page.locator("#banner li").evaluate_all(
                "items => items.map(item => item.dataset.unit)"
            )
            assert sorted(waiting) == ["broken", "gone", "replying"]
            assert page.title() == "(3) unitmgr dashboard"
            assert "greeting written" in banner.inner_text()
            assert (
                "#2 question failed"
                in page.locator('tr[data-unit="broken"] .attention').inner_text()
            )

            gone = page.locator('tr[data-unit="gone"] .attention').inner_text()
            assert "feedback: 1 CI, 2 review pending, 0 withheld" in gone  # the ledger's counts
            # The missing worktree's recovery command, copied by its button.
            command = page.locator('tr[data-unit="gone"] .recovery code').inner_text()
            assert command.startswith("unit dismantle --unit gone --force gone")
            page.locator('tr[data-unit="gone"] .recovery button.copy').click()
            assert page.evaluate("navigator.clipboard.readText()") == command

            page.locator('tr[data-unit="running"]').click()
            # Selectors, not wait_for_function: the page's CSP forbids evaluating strings.
            transcript = page.locator("#transcript")
            transcript.filter(has_text="thinking about it").wait_for(timeout=10000)
            gate.touch()  # the gated turn ends while the page is open
            ended = time.monotonic()
            page.wait_for_selector(
                'tr[data-unit="running"][data-attention="waiting-on-lead"]', timeout=5000
            )
            shown_after = time.monotonic() - ended
            transcript.filter(has_text="the gated turn is over").wait_for(timeout=5000)
            assert "replied" in page.locator("#timeline").inner_text()
            assert (
                page.locator('tr[data-unit="running"] .turn')
                .inner_text()
                .startswith("#1 task replied")
            )
            if SCREENSHOT:
                page.screenshot(path=SCREENSHOT, full_page=True)
            page.keyboard.press("Escape")
            page.locator("#detail").wait_for(state="hidden", timeout=5000)
        finally:
            browser.close()
    assert shown_after < 5
    assert messages == []


def test_ci_installs_chromium_when_it_is_missing() -> None:
    script = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "if ! command -v chromium" in script
    assert "apt-get install -y --no-install-recommends chromium" in script
    assert script.index("chromium") < script.index(".venv/bin/python -m pytest")
