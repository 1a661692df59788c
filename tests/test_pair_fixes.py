"""Regression tests for recent `pair` fixes: the supervisor's import path, partners that close
their output or leave background jobs, in-process `clear` after a killed supervisor, redaction of
Codex's own `-o` reply file and of URLs split across stream chunks, and Cursor's effort refusal.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from registry import redact as redact_module
from registry.errors import StateError
from registry.processes import group_members
from registry.redact import StreamRedactor, redact_bytes
from tests.conftest import PLANTED_TOKENS, FakePartners, Sandbox, git, gone, run_cli, wait_until
from tests.test_pair import body, init_script

# Never a GitHub environment token: only the URL-userinfo rule can catch it.
URL_SECRET = "UrlUserinfoSecretNeverWritten" + "0123456789" * 4  # not a token shape
URL = f"https://user:{URL_SECRET}@example.com/x"
MASKED_URL = "https://***@example.com/x"
LEFTOVER_NOTE = re.compile(r"\[pair: stopped (\d+) process\(es\) the partner left running\]")


def env(**changes: str) -> dict[str, str]:
    return {**os.environ, **changes}


# -- 1. the supervisor never imports a `pair/` package from the worktree or its cwd ------------


def plant_pair_package(directory: Path, marker: Path) -> None:
    package = directory / "pair"
    package.mkdir(parents=True)
    hostile = (
        "import pathlib, sys\n"
        f"pathlib.Path({str(marker)!r}).write_text('imported from ' + __file__)\n"
        "sys.exit(1)\n"
    )
    (package / "__init__.py").write_text(hostile)
    (package / "__main__.py").write_text(hostile)


@pytest.mark.parametrize("where", ["worktree", "linked-worktree", "state-dir"])
def test_supervisor_ignores_a_local_pair_package(sandbox: Sandbox, where: str) -> None:
    marker = sandbox.root / "hostile-pair-imported"
    repo = sandbox.repo
    if where == "linked-worktree":
        repo = sandbox.root / "linked"
        git(sandbox.repo, "worktree", "add", "-q", "-b", "linked", str(repo))
    session = init_script(sandbox, "cat >/dev/null; echo supervised", repo=repo)
    if where == "state-dir":
        # The supervisor's cwd: only `python -P` keeps it off sys.path.
        plant_pair_package(Path(session["state_dir"]), marker)
    else:
        plant_pair_package(repo, marker)
        git(repo, "add", "pair")
        git(repo, "commit", "-q", "-m", "a project with its own pair package")
    running = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), "--background", repo=repo
    )
    assert running.code == 0, running.stdout + running.stderr
    assert running["status"] in ("running", "replied")
    receipt = sandbox.pair("wait", "--timeout-min", "1", repo=repo)
    assert receipt.code == 0, receipt.stdout
    assert receipt["status"] == "replied" and receipt["reply"] == "supervised"
    assert receipt["seq"] == 1
    assert not marker.exists(), marker.read_text()
    log = Path(receipt["receipt_file"]).with_name("0001-task-supervisor.log")
    assert "Traceback" not in (log.read_text() if log.exists() else "")


# -- 2. a partner that closes its output but keeps running still hits its budget --------------


@pytest.mark.parametrize(
    ("budget", "reason_part"),
    [("--total-min", "total budget"), ("--idle-min", "no output for")],
)
def test_a_partner_that_closes_its_output_still_hits_the_budget(
    sandbox: Sandbox, budget: str, reason_part: str
) -> None:
    pids = sandbox.root / "pids"
    init_script(
        sandbox,
        f"cat >/dev/null; echo $$ > {pids}; exec >&- 2>&-; sleep 60 & echo $! >> {pids}; wait",
    )
    started = time.monotonic()
    result = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), budget, "0.02", timeout=30
    )
    elapsed = time.monotonic() - started
    assert result.code == 1, result.stdout
    assert result["status"] == "hang-killed", result.stdout
    assert reason_part in result["reason"]
    assert result["reply"] is None and result["partial_reply"] is False
    assert elapsed < 20, f"the budget of 1.2 s took {elapsed:.1f} s to apply"
    for pid in map(int, pids.read_text().split()):
        assert gone(pid), f"pid {pid} survived the hang kill"
    assert group_members(result["partner_pid"]) == []
    assert sandbox.pair("status")["in_flight"] is None


# -- 3. a background job holding the pipes open neither delays the reply nor survives ----------


@pytest.mark.parametrize(
    "model",
    [
        "cat >/dev/null; sleep 30 & echo $! > {pids}; echo done",
        "cat >/dev/null; (sleep 30 & echo $! > {pids}); echo done",
    ],
    ids=["background-job", "orphaned-grandchild"],
)
def test_a_background_job_holding_the_pipes_is_killed_after_the_reply(
    sandbox: Sandbox, model: str
) -> None:
    pids = sandbox.root / "pids"
    init_script(sandbox, model.format(pids=pids))
    started = time.monotonic()
    result = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), timeout=60)
    elapsed = time.monotonic() - started
    assert result.code == 0, result.stdout
    assert result["status"] == "replied" and result["reply"] == "done"
    assert elapsed < 15, f"the reply took {elapsed:.1f} s: pair waited for the background job"
    (leftover,) = map(int, pids.read_text().split())
    assert gone(leftover), "the background job outlived the turn"
    assert group_members(result["partner_pid"]) == []
    notes = LEFTOVER_NOTE.findall(Path(result["transcript"]).read_text())
    assert notes == ["1"]


def test_a_background_job_that_keeps_writing_does_not_hold_the_turn(sandbox: Sandbox) -> None:
    """Reported as a leftover on a busy machine too: pair keeps the pipes open until it has
    stopped the job (closed first, the job's next write could kill it unseen: SIGPIPE)."""
    pids = sandbox.root / "pids"
    init_script(
        sandbox,
        f"cat >/dev/null; (while :; do echo tick; sleep 0.05; done) & echo $! > {pids}; echo done",
    )
    started = time.monotonic()
    result = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), "--total-min", "0.5", timeout=60
    )
    elapsed = time.monotonic() - started
    assert result.code == 0, result.stdout
    assert result["status"] == "replied"
    assert elapsed < 15, f"{elapsed:.1f} s: the turn waited on its writing background job"
    assert result["reply"].splitlines()[0] in ("done", "tick")
    assert "done" in result["reply"].splitlines()
    (leftover,) = map(int, pids.read_text().split())
    assert gone(leftover)
    assert group_members(result["partner_pid"]) == []
    assert LEFTOVER_NOTE.search(Path(result["transcript"]).read_text())
    assert leftover in [item["pid"] for item in result["leftovers"]]


def test_a_partner_without_leftovers_gets_no_note(sandbox: Sandbox) -> None:
    init_script(sandbox, "cat >/dev/null; echo done")
    result = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert result["status"] == "replied"
    assert not LEFTOVER_NOTE.search(Path(result["transcript"]).read_text())


# -- 4. in-process clear after the supervisor is SIGKILLed ---------------------------------------


def test_in_process_clear_after_a_killed_supervisor(sandbox: Sandbox) -> None:
    """A long-lived library caller (like `unit`) is the launcher of the turn, and stays alive:
    once the supervisor took the turn, the launcher must no longer keep the marker "alive"."""
    from pair import api

    gate = sandbox.root / "gate"
    init_script(sandbox, f"cat >/dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo late")
    running = api.send(sandbox.repo, kind="task", body="first", background=True)
    assert running["status"] == "running", running
    supervisor_pid, partner_pid = running["supervisor_pid"], running["partner_pid"]
    os.kill(supervisor_pid, signal.SIGKILL)
    lost = api.wait(sandbox.repo, timeout_min=1)
    assert lost["status"] == "worker-lost" and str(supervisor_pid) in lost["reason"]
    with pytest.raises(StateError) as refused:
        api.clear(sandbox.repo)  # the partner still runs
    assert refused.value.code == "turn-in-flight"
    assert refused.value.detail["pid"] == partner_pid
    os.killpg(partner_pid, signal.SIGKILL)

    def cleared() -> dict[str, Any] | None:
        try:
            return api.clear(sandbox.repo)
        except StateError as error:
            assert error.code == "turn-in-flight", error.reason
            assert error.detail["pid"] != os.getpid(), "the live launcher blocks clear"
            return None

    document = wait_until(cleared, timeout=10)
    assert document["status"] == "cleared"
    assert document["marker"]["seq"] == 1 and document["marker"]["launcher"] is None
    assert api.clear(sandbox.repo)["status"] == "already-cleared"
    gate.write_text("go")
    again = api.send(sandbox.repo, kind="task", body="second")
    assert again["status"] == "replied" and again["seq"] == 2 and again["reply"] == "late"
    assert sandbox.pair("status")["in_flight"] is None


# -- 5. Codex's own `-o` reply file is redacted -------------------------------------------------


CODEX_REPLY = f"token {PLANTED_TOKENS[0]} and https://bot:hunter2pw@example.com/x"
REDACTED_CODEX_REPLY = "token *** and https://***@example.com/x"


def init_codex(sandbox: Sandbox) -> None:
    created = sandbox.pair(
        "init", "--partner", "codex", "--effort", "high", "--lead", "human", "--role", "executor"
    )
    assert created.code == 0, created.stdout


def test_codex_reply_file_is_redacted(sandbox: Sandbox, fake_partners: FakePartners) -> None:
    init_codex(sandbox)
    result = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), env=env(FAKE_REPLY=CODEX_REPLY)
    )
    assert result.code == 0, result.stdout
    assert result["status"] == "replied" and result["reply"] == REDACTED_CODEX_REPLY
    (turn,) = fake_partners.calls("codex")[1:]
    reply_file = Path(turn["argv"][turn["argv"].index("-o") + 1])
    assert result["reply_file"] == str(reply_file)
    assert reply_file.read_text() == REDACTED_CODEX_REPLY + "\n"
    assert "hunter2pw" not in reply_file.read_text()


def test_codex_reply_file_of_a_failed_turn_is_redacted(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    init_codex(sandbox)
    result = sandbox.pair(
        "send",
        "--kind",
        "task",
        "--body-file",
        body(sandbox),
        env=env(FAKE_REPLY=CODEX_REPLY, FAKE_SCENARIO="fail-after-reply-file"),
    )
    assert result.code == 1, result.stdout
    assert result["status"] == "failed" and result["reply"] is None
    (turn,) = fake_partners.calls("codex")[1:]
    reply_file = Path(turn["argv"][turn["argv"].index("-o") + 1])
    assert reply_file.parent == Path(result["transcript"]).parent
    text = reply_file.read_text()  # the CLI's own file stays, but redacted
    assert text == REDACTED_CODEX_REPLY + "\n"
    assert oct(reply_file.stat().st_mode & 0o777) == oct(0o600)


# -- 6. a URL with credentials split across stream chunks ---------------------------------------


def _url_case(keep: int, *, inside: int) -> tuple[bytes, int]:
    """A long line with `URL` placed so a cut at len(first feed) - keep lands `inside` bytes
    into the URL. Returns the data and the length of the first feed."""
    filler = b"A" * 300 + b" "
    data = filler + URL.encode() + b" tail " + b"z" * 200 + b"\n"
    first = len(filler) + inside + keep
    assert data.index(b"\n") > first  # the first feed is line-less
    return data, first


def _feed_in_two(data: bytes, first: int) -> bytes:
    redactor = StreamRedactor(max_hold_bytes=64, max_hold_seconds=60)
    return (
        redactor.feed(data[:first], now=0) + redactor.feed(data[first:], now=0) + redactor.flush()
    )


USERINFO_START = len("https://")
USERINFO_END = len(URL) - len("@example.com/x")


def test_stream_redactor_holds_back_an_unfinished_url_userinfo() -> None:
    keep = StreamRedactor()._keep
    for inside in [0, 1, 4, *range(USERINFO_START, USERINFO_END + 1)]:
        data, first = _url_case(keep, inside=inside)
        out = _feed_in_two(data, first)
        assert URL_SECRET.encode() not in out, f"leaked with a cut {inside} bytes into the URL"
        assert out == redact_bytes(data) == data.replace(URL.encode(), MASKED_URL.encode())


def test_the_userinfo_cases_leak_without_the_hold_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sensitivity check of the test above: without `_UNFINISHED_URL` the same cuts leak."""
    monkeypatch.setattr(redact_module, "_UNFINISHED_URL", re.compile(rb"(?!)"))
    keep = StreamRedactor()._keep
    for inside in range(USERINFO_START, USERINFO_END + 1):
        data, first = _url_case(keep, inside=inside)
        assert URL_SECRET.encode() in _feed_in_two(data, first)


@pytest.mark.parametrize("inside", [5, 6, 7])
def test_stream_redactor_cut_inside_the_scheme_separator(inside: int) -> None:
    keep = StreamRedactor()._keep
    data, first = _url_case(keep, inside=inside)
    assert URL_SECRET.encode() not in _feed_in_two(data, first)


def test_stream_redactor_long_line_in_small_chunks() -> None:
    redactor = StreamRedactor()  # the real limits: 64 KiB held at most
    keep = redactor._keep
    chunk = 1000
    # The first size cut happens at the first chunk boundary past 64 KiB, minus `keep`: put it
    # 20 bytes into the URL's userinfo.
    first_cut = (64 * 1024 // chunk + 1) * chunk - keep
    url_start = first_cut - USERINFO_START - 20
    data = b"B" * url_start + URL.encode() + b" " + b"C" * 70_000 + b" " + URL.encode() + b"\n"
    out = b"".join(
        redactor.feed(data[offset : offset + chunk], now=0) for offset in range(0, len(data), chunk)
    )
    out += redactor.flush()
    assert URL_SECRET.encode() not in out
    assert out == data.replace(URL.encode(), MASKED_URL.encode())


def test_long_line_url_credentials_never_reach_the_transcript(sandbox: Sandbox) -> None:
    """One line over 64 KiB, written in two parts: the first ends inside a URL's userinfo, so
    the redactor must release a line-less buffer while the URL is still unfinished."""
    head = sandbox.root / "head.txt"
    rest = sandbox.root / "rest.txt"
    split = URL.index(URL_SECRET) + 40  # 40 characters into the secret
    head.write_text("x" * 100_000 + " " + URL[:split])
    rest.write_text(URL[split:] + " end\n")
    # The pause lets the supervisor release the held head (after 1 s) before the rest arrives.
    init_script(sandbox, f"cat >/dev/null; cat {head}; sleep 1.6; cat {rest}")
    result = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), timeout=60)
    assert result.code == 0, result.stdout[-2000:]
    assert result["status"] == "replied"
    transcript = Path(result["transcript"]).read_bytes()
    assert URL_SECRET.encode() not in transcript
    assert URL_SECRET[:20].encode() not in transcript
    assert transcript.endswith(f" {MASKED_URL} end\n".encode())
    assert len(transcript) > 100_000
    for path in Path(result["transcript"]).parent.iterdir():
        assert URL_SECRET[:20].encode() not in path.read_bytes(), path


# -- 7. Cursor refuses --effort without latest:<family> ------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--effort", "high"],
        ["--model", "composer-2.5", "--effort", "high"],
        ["--model", "kimi-k3-high", "--effort", "max"],
    ],
    ids=["no-model", "explicit-model", "model-with-effort-inside"],
)
def test_cursor_effort_without_a_family_is_refused(
    sandbox: Sandbox, fake_partners: FakePartners, args: list[str]
) -> None:
    before = sandbox.snapshot()
    refused = sandbox.pair("init", "--partner", "cursor", "--lead", "human", *args)
    assert refused.code == 2, refused.stdout
    assert refused["code"] == "effort-refused"
    assert "omit --effort" in refused["reason"] and "latest:<family>" in refused["reason"]
    resolve = run_cli("pair", "resolve", "--partner", "cursor", *args, cwd=sandbox.root)
    if "--model" in args:
        assert resolve.code == 2 and resolve["code"] == "effort-refused", resolve.stdout
    assert sandbox.snapshot() == before
    assert not (sandbox.repo / ".git" / "pair").exists()
    assert fake_partners.calls() == []


def test_unit_create_refuses_cursor_effort_without_a_family(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    before = sandbox.snapshot()
    refused = sandbox.create("u1", partner="cursor", model=None, effort="high")
    assert refused.code == 2, refused.stdout + refused.stderr
    assert refused["code"] == "effort-refused"
    assert sandbox.snapshot() == before
    assert not sandbox.worktree("u1").exists()
    assert fake_partners.calls() == []


def test_cursor_family_with_effort_is_still_accepted(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    created = sandbox.pair(
        "init",
        "--partner",
        "cursor",
        "--model",
        "latest:kimi",
        "--effort",
        "high",
        "--lead",
        "human",
    )
    assert created.code == 0, created.stdout
    assert created["model_resolved"] == "kimi-k3-high"


def test_a_turn_that_ends_between_waits_two_reads_is_never_called_lost(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor writes the receipt, then releases the marker. A `wait` that read "no
    receipt" just before and finds no marker just after — past the no-marker grace, as in a
    long turn on a loaded machine — answers with the receipt, not `worker-lost`."""
    from pair import api
    from pair.commands import wait as wait_module
    from pair.runners import runner_for

    init_script(sandbox, "cat >/dev/null; echo done")
    replied = api.send(sandbox.repo, kind="task", body="first")
    assert replied["status"] == "replied", replied

    class ReceiptSeenLate:
        """The real runner, whose first receipt read comes just before the receipt's write."""

        def __init__(self, state_dir: Any) -> None:
            self.runner = runner_for(state_dir)
            self.reads = 0

        def receipt(self, seq: int) -> Any:
            self.reads += 1
            return None if self.reads == 1 else self.runner.receipt(seq)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.runner, name)

    monkeypatch.setattr(wait_module, "runner_for", ReceiptSeenLate)
    monkeypatch.setattr(wait_module, "NO_MARKER_GRACE_SECONDS", -1.0)  # the grace is over
    waited = api.wait(sandbox.repo, timeout_min=1)
    assert waited["status"] == "replied" and waited["seq"] == 1, waited
