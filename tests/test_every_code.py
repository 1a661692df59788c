"""Every `code` in references/json-output.md, failing for real (SPEC 3.0).

For each code the table lists, one representative failing call runs through the real CLI and
must print that `code`, exit with the table's exit code, and carry a non-empty `next`. A code
listed in the doc with no case here fails the test, so a new code cannot be documented without
being exercised.

Adding a case is one small function: `@case("the-code")` on a function that takes the `Env`
and returns the `Result` of the failing call.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import (
    FakePartners,
    Result,
    Sandbox,
    git,
    git_waiting_for_the_first_receipt,
    run_cli,
    wait_until,
    write_record,
)

ROOT = Path(__file__).resolve().parent.parent
TABLE = (ROOT / "references" / "json-output.md").read_text()
ROW = re.compile(r"^\| `([a-z-]+)` \| ([^|]+) \|", re.MULTILINE)
DOCUMENTED = {code: cell for code, cell in ROW.findall(TABLE)}
SHA = "a" * 40


@dataclass
class Env:
    sandbox: Sandbox
    partners: FakePartners
    request: pytest.FixtureRequest

    @property
    def github(self) -> Any:
        return self.request.getfixturevalue("github")

    def unit(self, *args: str, **environment: str) -> Result:
        return self.sandbox.unit(*args, env={**os.environ, **environment} if environment else None)

    def pair(self, *args: str, repo: Path | None = None, **environment: str) -> Result:
        env = {**os.environ, **environment} if environment else None
        return self.sandbox.pair(*args, repo=repo, env=env)

    def create(self, unit_id: str = "u1", *extra: str, **options: str | None) -> Result:
        return self.sandbox.create(unit_id, *extra, **options)

    def working(self, unit_id: str = "u1", **options: str | None) -> Path:
        """A created unit whose first turn has ended; returns its worktree."""
        created = self.create(unit_id, **options)
        assert created.code == 0, created.stdout
        self.sandbox.wait_turn(unit_id)
        return self.sandbox.worktree(unit_id)

    def edit_record(self, unit_id: str, **fields: Any) -> None:
        record = self.sandbox.record(unit_id)
        record.update(fields)
        (self.sandbox.registry / "units" / f"{unit_id}.json").write_text(json.dumps(record))

    def file(self, name: str, text: str) -> str:
        path = self.sandbox.root / name
        path.write_text(text)
        return str(path)

    def crash(self, point: str, *args: str) -> None:
        environment = {**os.environ, "UNITMGR_TEST_HOOKS": "1", "UNITMGR_TEST_CRASH_AFTER": point}
        assert self.sandbox.unit(*args, env=environment).code == -9

    def init_claude(self, *extra: str, **environment: str) -> Result:
        args = ["init", "--partner", "claude", "--lead", "human", "--effort", "high", *extra]
        return self.pair(*args, **environment)


CASES: dict[str, Callable[[Env], Result]] = {}


def case(code: str) -> Callable[[Callable[[Env], Result]], Callable[[Env], Result]]:
    def register(function: Callable[[Env], Result]) -> Callable[[Env], Result]:
        CASES[code] = function
        return function

    return register


def hold_lock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


# -- usage (2) -----------------------------------------------------------------------------------

case("usage")(lambda e: e.unit("create", "--no-such-option"))
case("missing-value")(lambda e: e.unit("create", "--unit", "--branch", "x"))
case("missing-option")(lambda e: e.unit("create", "--unit", "u1"))
case("invalid-unit-id")(lambda e: e.unit(*e.sandbox.create_args("abc\n")))
case("invalid-branch")(lambda e: e.create(branch="a..b"))
case("invalid-base")(lambda e: e.create(base="ma..in"))
case("worktree-inside-worktree")(lambda e: e.create(worktree=str(e.sandbox.repo / "inner")))
case("unknown-partner")(lambda e: e.create(partner="nope"))
case("unknown-shell")(lambda e: e.unit("shell-init", "tcsh"))
case("unknown-lead")(lambda e: e.create(lead="nope"))
case("lead-is-partner")(lambda e: e.create(lead="claude", partner="claude", effort="high"))
case("effort-required")(lambda e: e.create(partner="claude", model=None))
case("effort-refused")(lambda e: e.create(effort="high"))
case("identity-refused")(lambda e: e.create(partner="claude", effort="high", identity="work"))
case("invalid-identity")(lambda e: e.create(identity="bad name!"))
case("script-needs-model")(lambda e: e.create(model=None))
case("invalid-issue")(lambda e: e.create(issue="abc"))
case("invalid-limit")(lambda e: e.create(max_active="0"))
case("invalid-ports")(lambda e: e.create(ports="65"))
case("invalid-paths")(lambda e: e.create("u1", "--paths", ":(top)**"))
case("invalid-lock-timeout")(lambda e: e.unit("list", "--lock-timeout", "x"))
case("invalid-format")(lambda e: e.unit("list", "--format", "xml"))
case("task-file-missing")(lambda e: e.create(task_file="/nonexistent/task.md"))
case("task-file-empty")(lambda e: e.create(task_file=e.file("empty.md", "  \n")))
case("task-given-twice")(lambda e: e.create(task="inline as well"))
case("force-mismatch")(lambda e: e.unit("dismantle", "--unit", "u1", "--force", "u2"))
case("not-a-terminal")(lambda e: e.unit("watch"))
case("invalid-interval")(lambda e: e.unit("watch", "--interval", "0"))
case("serve-token-required")(lambda e: e.unit("serve", "--host", "0.0.0.0"))
case("invalid-port")(lambda e: e.unit("serve", "--port", "65536"))
case("invalid-since")(lambda e: e.unit("wait", "--since", "yesterday"))
case("invalid-duration")(lambda e: e.unit("prune", "--older-than", "soon"))
case("invalid-head")(lambda e: e.unit("merge", "--unit", "u1", "--head", "abc1234"))
case("invalid-method")(lambda e: e.unit("merge", "--unit", "u1", "--head", SHA, "--method", "x"))
case("unknown-role")(
    lambda e: e.pair("init", "--partner", "script", "--model", "cat", "--role", "x")
)
case("invalid-seq")(lambda e: e.pair("wait", "--seq", "0"))
case("not-a-directory")(lambda e: e.pair("status", repo=Path("/nonexistent/worktree")))
case("partner-not-installed")(lambda e: e.init_claude(UNITMGR_CLAUDE_BIN="/nonexistent/claude"))
case("invalid-model")(
    lambda e: run_cli(
        "pair", "resolve", "--partner", "codex", "--model", "latest", cwd=e.sandbox.root
    )
)
case("model-unresolved")(
    lambda e: run_cli(
        "pair", "resolve", "--partner", "claude", "--model", "latest:haiku", "--effort", "high",
        cwd=e.sandbox.root,
    )
)  # fmt: skip


@case("input-not-regular-file")
def _fifo(e: Env) -> Result:
    fifo = e.sandbox.root / "task.fifo"
    os.mkfifo(fifo)  # opened for reading it would block forever
    return e.create(task_file=str(fifo))


@case("input-too-large")
def _large(e: Env) -> Result:
    return e.create(task_file=e.file("big.md", "x" * (1024 * 1024 + 1)))


@case("config-invalid")
def _config_invalid(e: Env) -> Result:
    (e.sandbox.repo / ".unitmgr.toml").write_text('max_active = "four"\n')
    return e.unit("config")


@case("config-unapproved")
def _config_unapproved(e: Env) -> Result:
    (e.sandbox.repo / ".unitmgr.toml").write_text('setup = "make deps"\n')
    return e.create()


@case("script-command-not-found")
def _script_missing(e: Env) -> Result:
    return e.create(model="no-such-command-anywhere --flag")


@case("record-unreadable")
def _unreadable(e: Env) -> Result:
    write_record(e.sandbox, "u1", worktree="relative/not/normalized")
    return e.unit("status", "--unit", "u1")


@case("record-too-new")
def _too_new(e: Env) -> Result:
    write_record(e.sandbox, "u1", schema_version=3)
    return e.unit("status", "--unit", "u1")


@case("unknown-kind")
def _unknown_kind(e: Env) -> Result:
    return e.pair("send", "--kind", "nope", "--body-file", e.file("b.md", "hi\n"))


@case("write-and-read-only")
def _write_read(e: Env) -> Result:
    body = e.file("b.md", "hi\n")
    return e.pair("send", "--kind", "task", "--body-file", body, "--write", "--read-only")


@case("no-body-file")
def _no_body(e: Env) -> Result:
    assert e.pair("init", "--partner", "script", "--model", "cat").code == 0
    return e.pair("send", "--kind", "task", "--body-file", "/nonexistent/body.md")


@case("empty-body")
def _empty_body(e: Env) -> Result:
    assert e.pair("init", "--partner", "script", "--model", "cat").code == 0
    return e.pair("send", "--kind", "task", "--body-file", e.file("b.md", "\n"))


@case("invalid-budget")
def _budget(e: Env) -> Result:
    body = e.file("b.md", "hi\n")
    return e.pair("send", "--kind", "task", "--body-file", body, "--idle-min", "x")


@case("missing-body")
def _missing_body(e: Env) -> Result:
    """Only the library can omit the body (the CLI's typer says `usage`): the library's
    refusal, rendered by the same runner the CLIs use."""
    script = (
        "import sys\nfrom pair import api\nfrom registry.cli_runner import run\nimport typer\n"
        "app = typer.Typer()\n@app.command()\ndef send() -> None:\n"
        f"    api.send({str(e.sandbox.repo)!r}, kind='task', body=None)\n"
        "@app.command()\ndef other() -> None: ...\n"
        "sys.exit(run(app, ['send'], 'pair'))\n"
    )
    return run_cli(str(Path(os.sys.executable)), "-c", script, cwd=e.sandbox.root)


# -- state (1) -----------------------------------------------------------------------------------

case("not-a-git-repository")(
    lambda e: run_cli("unit", "list", "--repo", str(e.sandbox.root), cwd=e.sandbox.root)
)
case("no-such-unit")(lambda e: e.unit("status", "--unit", "nope"))
case("base-missing")(lambda e: e.create(base="no-such-base"))
case("github-not-configured")(lambda e: e.unit("intake", "--label", "ready"))
case("no-pair-session")(lambda e: e.pair("status"))


@case("admission-paused")
def _admission(e: Env) -> Result:
    write_record(e.sandbox, "u0")
    return e.create(max_active="1", max_held="1")


@case("ports-unavailable")
def _ports_unavailable(e: Env) -> Result:
    e.sandbox.machine_config.write_text('port_range = "29990-29991"\n')
    write_record(e.sandbox, "u0", ports=[29990, 29991])  # every port of the range is held
    return e.create(ports="1", max_active="3", max_held="3")


@case("conflict")
def _conflict(e: Env) -> Result:
    write_record(e.sandbox, "other", branch="feat/u1")
    return e.create()


@case("branch-exists")
def _branch_exists(e: Env) -> Result:
    git(e.sandbox.repo, "branch", "feat/u1")
    return e.create()


@case("worktree-exists")
def _worktree_exists(e: Env) -> Result:
    e.sandbox.worktree("u1").mkdir(parents=True)
    return e.create()


@case("unit-exists")
def _unit_exists(e: Env) -> Result:
    write_record(e.sandbox, "u1")
    return e.create()


@case("unit-vanished")
def _vanished(e: Env) -> Result:
    e.crash("create:reserve:done", *e.sandbox.create_args("u1"))
    lock = hold_lock(e.sandbox.registry / "locks" / "u1.lock")
    waiting = subprocess.Popen(
        ["unit", *e.sandbox.create_args("u1"), "--repo", str(e.sandbox.repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def sleeps() -> bool:
        assert waiting.poll() is None, waiting.communicate()
        return Path(f"/proc/{waiting.pid}/wchan").read_text() == "hrtimer_nanosleep"

    def waits_for_the_lock() -> bool:
        # The lock is polled (open, try, close, sleep): a contender is one that keeps sleeping
        # with no child of its own (its fetch and its git listings are done), not one caught
        # in a short sleep on its way there.
        for _ in range(5):
            if not sleeps() or psutil.Process(waiting.pid).children():
                return False
            time.sleep(0.05)
        return True

    wait_until(waits_for_the_lock)
    (e.sandbox.registry / "units" / "u1.json").unlink()
    os.close(lock)
    stdout, stderr = waiting.communicate(timeout=60)
    return Result(waiting.returncode, json.loads(stdout), stdout, stderr, tuple(waiting.args))


@case("cannot-resume")
def _cannot_resume(e: Env) -> Result:
    e.crash("create:reserve:done", *e.sandbox.create_args("u1"))
    return e.create(scope="another scope")


@case("manifest-differs")
def _manifest_differs(e: Env) -> Result:
    e.crash("create:manifest:done", *e.sandbox.create_args("u1"))
    (e.sandbox.registry / "tasks" / "u1.md").write_text("edited by hand\n")
    return e.create()


@case("manifest-missing")
def _manifest_missing(e: Env) -> Result:
    e.working()
    (e.sandbox.registry / "tasks" / "u1.md").unlink()
    return e.unit("addendum", "--unit", "u1", "--text", "more")


@case("worktree-branch-differs")
def _branch_differs(e: Env) -> Result:
    e.crash("create:worktree:started", *e.sandbox.create_args("u1"))
    git(e.sandbox.repo, "worktree", "add", "-q", "-b", "other", str(e.sandbox.worktree("u1")))
    return e.create()


@case("setup-failed")
def _setup_failed(e: Env) -> Result:
    return e.create(setup="exit 3")


@case("timeout")
def _timeout(e: Env) -> Result:
    return e.unit(*e.sandbox.create_args("u1", setup="sleep 30"), UNITMGR_SETUP_TIMEOUT="0.5")


@case("git-failed")
def _git_failed(e: Env) -> Result:
    git(e.sandbox.repo, "remote", "set-url", "origin", str(e.sandbox.root / "gone.git"))
    return e.create()


@case("step-failed")
def _step_failed(e: Env) -> Result:
    e.working()
    manifest = e.sandbox.registry / "tasks" / "u1.md"
    manifest.unlink()
    manifest.mkdir()  # the manifest step cannot unlink a directory: an unexpected OSError
    return e.unit("dismantle", "--unit", "u1", "--force", "u1")


@case("pair-missing")
def _pair_missing(e: Env) -> Result:
    e.crash("create:pair-init:done", *e.sandbox.create_args("u1"))
    record = e.sandbox.record("u1")
    session = Path(record["pair"]["state_dir"]) / "session.json"
    session.unlink()
    return e.create()


@case("pair-mismatch")
def _pair_mismatch(e: Env) -> Result:
    e.crash("create:pair-init:done", *e.sandbox.create_args("u1"))
    record = e.sandbox.record("u1")
    session = Path(record["pair"]["state_dir"]) / "session.json"
    data = json.loads(session.read_text())
    data["role"] = "peer"
    session.write_text(json.dumps(data))
    return e.create()


@case("no-merged-pr")
def _no_merged_pr(e: Env) -> Result:
    write_record(e.sandbox, "u1")
    return e.unit("dismantle", "--unit", "u1")


@case("no-turn")
def _no_turn(e: Env) -> Result:
    write_record(e.sandbox, "u1")  # a record with no pair has no turn to tail
    return e.unit("tail", "--unit", "u1")


@case("turn-in-flight")
def _in_flight(e: Env) -> Result:
    assert e.create(model="cat > /dev/null; sleep 60").code == 0
    try:
        return e.unit("dismantle", "--unit", "u1", "--force", "u1")
    finally:
        e.pair("clear", repo=e.sandbox.worktree("u1"))


@case("turn-lost")
def _turn_lost(e: Env) -> Result:
    assert e.pair("init", "--partner", "script", "--model", "cat > /dev/null; sleep 60").code == 0
    running = e.pair("send", "--kind", "task", "--body-file", e.file("b.md", "x\n"), "--background")
    assert running.code == 0, running.stdout
    for pid in (running["supervisor_pid"], running["partner_pid"]):
        os.killpg(pid, signal.SIGKILL)
    import psutil

    wait_until(lambda: not psutil.pid_exists(running["partner_pid"]))
    return e.pair("send", "--kind", "task", "--body-file", e.file("b.md", "y\n"))


@case("worktree-remove-failed")
def _remove_failed(e: Env) -> Result:
    worktree = e.working()
    (worktree / "dirty.txt").write_text("uncommitted\n")
    e.edit_record("u1", pr={"number": 1, "state": "merged", "proved": True})
    return e.unit("dismantle", "--unit", "u1")


@case("record-untrusted")
def _untrusted(e: Env) -> Result:
    write_record(e.sandbox, "u1", worktree=str(e.sandbox.repo), branch="main", base="dev")
    return e.unit("dismantle", "--unit", "u1", "--force", "u1")


@case("repo-config-untrusted")
def _config_untrusted(e: Env) -> Result:
    e.working()
    git(e.sandbox.worktree("u1"), "config", "core.fsmonitor", "planted")  # as an executor would
    return e.unit("verify", "--unit", "u1")


@case("wrong-lifecycle")
def _wrong_lifecycle(e: Env) -> Result:
    write_record(e.sandbox, "u1", lifecycle="create-failed", lead="human")
    return e.unit(*restaff_args())


def restaff_args(lead: str = "human") -> list[str]:
    return [
        "restaff", "--unit", "u1", "--lead", lead, "--partner", "script", "--model", "cat",
        "--reason", "codes",
    ]  # fmt: skip


@case("lead-differs")
def _lead_differs(e: Env) -> Result:
    write_record(e.sandbox, "u1", lead="human")
    return e.unit(*restaff_args("codex"))


@case("worktree-missing")
def _worktree_missing(e: Env) -> Result:
    write_record(e.sandbox, "u1", lead="human")
    return e.unit(*restaff_args())


@case("worktree-dirty")
def _dirty(e: Env) -> Result:
    (e.working() / "dirty.txt").write_text("uncommitted\n")
    return e.unit("verify", "--unit", "u1")


@case("outside-scope")
def _outside(e: Env) -> Result:
    commit = "cat > /dev/null; echo hi > OUT.md; git add OUT.md; git commit -qm out; echo done"
    e.working(model=commit, paths="src/**")
    return e.unit("scope", "--unit", "u1", "--approve")


@case("no-validation")
def _no_validation(e: Env) -> Result:
    e.working()
    e.edit_record("u1", validation="")
    return e.unit("verify", "--unit", "u1")


@case("no-head")
def _no_head(e: Env) -> Result:
    worktree = e.working()
    git(worktree, "checkout", "-q", "--orphan", "unborn")
    git(worktree, "rm", "-rfq", "--cached", ".")
    for path in worktree.iterdir():
        if path.name != ".git":
            path.unlink()
    return e.unit("verify", "--unit", "u1")


@case("validation-failed")
def _validation_failed(e: Env) -> Result:
    e.working(validation="false", model="cat > /dev/null; echo done")
    return e.unit("verify", "--unit", "u1")


@case("head-moved")
def _head_moved(e: Env) -> Result:
    e.working(validation="git commit -q --allow-empty -m moved", model="cat > /dev/null; echo ok")
    return e.unit("verify", "--unit", "u1")


@case("lock-busy")
def _lock_busy(e: Env) -> Result:
    write_record(e.sandbox, "u1")
    lock = hold_lock(e.sandbox.registry / "locks" / "u1.lock")
    try:
        return e.unit("dismantle", "--unit", "u1", "--force", "u1", "--lock-timeout", "0")
    finally:
        os.close(lock)


@case("pair-exists")
def _pair_exists(e: Env) -> Result:
    assert e.pair("init", "--partner", "script", "--model", "cat").code == 0
    return e.init_claude()


@case("pair-identity-differs")
def _identity_differs(e: Env) -> Result:
    args = ["init", "--partner", "codex", "--lead", "human", "--effort", "high"]
    assert e.pair(*args).code == 0
    return e.pair(*args, "--identity", "work")


@case("pair-session-unreadable")
def _session_unreadable(e: Env) -> Result:
    assert e.pair("init", "--partner", "script", "--model", "cat").code == 0
    (e.sandbox.common_dir / "pair" / "session.json").write_text("{torn")
    return e.pair("status")


@case("session-untrusted")
def _session_untrusted(e: Env) -> Result:
    assert e.pair("init", "--partner", "script", "--model", "cat").code == 0
    session = e.sandbox.common_dir / "pair" / "session.json"
    session.write_text(session.read_text().replace('"model": "cat"', '"model": "true"'))
    return e.pair("send", "--kind", "question", "--body-file", e.file("b.md", "x\n"))


@case("marker-unreadable")
def _marker_unreadable(e: Env) -> Result:
    assert e.pair("init", "--partner", "script", "--model", "cat").code == 0
    (e.sandbox.common_dir / "pair" / "in-flight.json").write_text("{torn")
    return e.pair("send", "--kind", "task", "--body-file", e.file("b.md", "x\n"))


@case("bootstrap-in-flight")
def _bootstrap_in_flight(e: Env) -> Result:
    slow = e.file("slow.sh", "#!/bin/sh\nsleep 60\n")
    os.chmod(slow, 0o755)
    first = subprocess.Popen(
        ["pair", "init", "--partner", "claude", "--lead", "human", "--effort", "high",
         "--repo", str(e.sandbox.repo)],
        env={**os.environ, "FAKE_SCENARIO": "hang"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        marker = e.sandbox.common_dir / "pair" / "in-flight.json"
        wait_until(marker.exists)
        return e.init_claude()
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)


@case("supervisor-failed")
def _supervisor_failed(e: Env) -> Result:
    """The real `pair send` entry point, in a process whose interpreter path is wrong, so the
    detached supervisor it starts exits at once (exec'd, as from a caller with threads: a forked
    one needs no interpreter path)."""
    assert e.pair("init", "--partner", "script", "--model", "cat").code == 0
    body = e.file("b.md", "x\n")
    script = (
        "import os, sys\nsys.executable = '/bin/false'\n"
        "os.environ['UNITMGR_PAIR_SUPERVISOR'] = 'exec'\nfrom pair.cli import main\n"
        f"sys.exit(main(['send', '--kind', 'task', '--body-file', {body!r},"
        f" '--repo', {str(e.sandbox.repo)!r}]))\n"
    )
    return run_cli(str(Path(os.sys.executable)), "-c", script, cwd=e.sandbox.root)


@case("model-mismatch")
def _model_mismatch(e: Env) -> Result:
    return e.init_claude("--model", "opus", FAKE_CLAUDE_MODEL="claude-sonnet-5")


@case("no-session-id")
def _no_session(e: Env) -> Result:
    return e.init_claude(FAKE_SCENARIO="no-session")


@case("bootstrap-hang")
def _bootstrap_hang(e: Env) -> Result:
    return e.init_claude("--idle-min", "0.02", FAKE_SCENARIO="hang")


@case("bootstrap-failed")
def _bootstrap_failed(e: Env) -> Result:
    return e.init_claude(FAKE_SCENARIO="fail")


@case("internal")
def _internal(e: Env) -> Result:
    (e.sandbox.registry).mkdir(parents=True)
    (e.sandbox.registry / "units").write_text("a file where the units directory belongs")
    return e.unit("list")


@case("interrupted")
def _interrupted(e: Env) -> Result:
    started = e.sandbox.root / "setup-started"
    process = subprocess.Popen(
        ["unit", *e.sandbox.create_args("u1", setup=f"touch {started}; sleep 60"),
         "--repo", str(e.sandbox.repo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_until(started.exists)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    return Result(process.returncode, json.loads(stdout), stdout, stderr, tuple(process.args))


@case("port-in-use")
def _port_in_use(e: Env) -> Result:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        return e.unit("serve", "--port", str(taken.getsockname()[1]))


# 192.0.2.1 (TEST-NET-1) is no address of this machine: binding it fails, nothing is sent.
case("bind-failed")(
    lambda e: e.unit(
        "serve", "--host", "192.0.2.1", UNITMGR_SERVE_TOKEN="serve-token-0123456789abcdef"
    )
)


# -- turns (receipts and the turn refusals) -------------------------------------------------------


def script_pair(e: Env, model: str) -> None:
    init = e.pair("init", "--partner", "script", "--model", model, "--role", "executor")
    assert init.code == 0, init.stdout


def send(e: Env, *extra: str, **environment: str) -> Result:
    return e.pair("send", "--kind", "task", "--body-file", e.file("b.md", "x\n"), *extra,
                  **environment)  # fmt: skip


def background(e: Env, started: Path) -> Result:
    """A writable script turn that runs until cancelled, once its partner has started."""
    script_pair(e, f"cat > /dev/null; touch {started}; sleep 60")
    running = send(e, "--background")
    assert running.code == 0, running.stdout
    wait_until(started.exists)
    return running


case("failed")(lambda e: (script_pair(e, "cat > /dev/null; echo oops >&2; exit 3"), send(e))[1])
case("empty-reply")(lambda e: (script_pair(e, "cat > /dev/null"), send(e))[1])
case("first-turn-failed")(
    lambda e: e.sandbox.unit(
        *e.sandbox.create_args("u1", model="cat > /dev/null; exit 3"),
        env=git_waiting_for_the_first_receipt(e.sandbox, "u1"),  # the turn has ended by then
    )
)


# -- where turns run (SPEC 4.3) -------------------------------------------------------------------

SCRIPT_INIT = ("init", "--partner", "script", "--model", "cat", "--role", "executor")
case("unknown-runner")(lambda e: e.pair(*SCRIPT_INIT, "--runner", "mainframe"))
case("invalid-node")(lambda e: e.pair(*SCRIPT_INIT, "--runner", "ray", "--node", "a node"))
case("invalid-ray-address")(
    lambda e: e.pair(*SCRIPT_INIT, "--runner", "ray", "--ray-address", "a b")
)
case("ray-auth-required")(
    lambda e: e.pair(*SCRIPT_INIT, "--runner", "ray", "--ray-address", "10.1.2.3:6379")
)


@case("runner-unavailable")
def _runner_unavailable(e: Env) -> Result:
    """Ray not installed: a `ray` package that does not import, first on the path."""
    shadow = e.sandbox.root / "no-ray"
    (shadow / "ray").mkdir(parents=True)
    (shadow / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    return e.pair(*SCRIPT_INIT, "--runner", "ray", PYTHONPATH=str(shadow))


@case("runner-untrusted")
def _runner_untrusted(e: Env) -> Result:
    """An executor rewrites the signed runner choice in its session: nothing is contacted."""
    from pair.runners.choice import RunnerChoice, sign_choice

    assert e.pair(*SCRIPT_INIT).code == 0
    session_file = e.sandbox.repo / ".git" / "pair" / "session.json"
    session = json.loads(session_file.read_text())
    # What `pair init --runner ray --node n2` stores (signed here: the case needs no Ray).
    session["runner"] = sign_choice(session_file.parent, RunnerChoice("ray", "n2", None))
    session["runner"]["address"] = "evil.example:6379"
    session_file.write_text(json.dumps(session))
    return send(e)


@case("hang-killed")
def _hang_killed(e: Env) -> Result:
    script_pair(e, "cat > /dev/null; sleep 60")
    return send(e, "--idle-min", "0.01")


@case("rate-limited")
def _rate_limited(e: Env) -> Result:
    """A real claude 429 transcript, replayed by the fake claude."""
    assert e.init_claude().code == 0
    return send(e, FAKE_SCENARIO="replay:claude-429.jsonl")


@case("cancelled")
def _cancelled(e: Env) -> Result:
    background(e, e.sandbox.root / "started")
    assert e.pair("cancel", "--reason", "codes").code == 0
    return e.pair("wait", "--timeout-min", "1")


@case("wait-timeout")
def _wait_timeout(e: Env) -> Result:
    background(e, e.sandbox.root / "started")
    try:
        return e.pair("wait", "--timeout-min", "0.005")
    finally:
        e.pair("cancel")


@case("worker-lost")
def _worker_lost(e: Env) -> Result:
    running = background(e, e.sandbox.root / "started")
    os.kill(running["supervisor_pid"], signal.SIGKILL)
    try:
        return e.pair("wait", "--timeout-min", "1")
    finally:
        os.killpg(running["partner_pid"], signal.SIGKILL)


@case("no-turn-in-flight")
def _no_turn(e: Env) -> Result:
    script_pair(e, "cat")
    return e.pair("cancel")


@case("cancel-unconfirmed")
def _cancel_unconfirmed(e: Env) -> Result:
    """A turn on a Ray node whose actor stops answering (its worker stopped): the node cannot
    confirm the cancel, so it is unknown, never `cancelled` (SPEC 4.3). The lead supervisor's poll
    bound, then the node's cancel bound (both shortened by the test hooks)."""
    from pair.paths import PairPaths, state_dir_for
    from pair.runners.ray import actor_name
    from pair.state import load_session
    from tests import ray_cluster

    cluster: ray_cluster.RayCluster = e.request.getfixturevalue("cluster")
    monkeypatch = e.request.getfixturevalue("monkeypatch")
    for name, value in cluster.environment.items():
        monkeypatch.setenv(name, value)
    # The node never answers: the supervisor's poll (5 s) cut to 1, its wait for the node's
    # confirmation (25 s) cut to 2.
    monkeypatch.setenv("UNITMGR_TEST_HOOKS", "1")
    monkeypatch.setenv("UNITMGR_TEST_RAY_POLL_SECONDS", "1")
    monkeypatch.setenv("UNITMGR_TEST_RAY_CANCEL_SECONDS", "2")
    import ray  # after the cluster: it reads RAY_AUTH_MODE once, when first imported

    node = ["--runner", "ray", "--node", ray_cluster.NODE, "--ray-address", cluster.address]
    init = e.pair(
        "init", "--partner", "script", "--model", "sed 1,2d | sh", "--role", "executor", *node
    )
    assert init.code == 0, init.stdout
    gate = e.sandbox.root / "gate"
    body = e.file("b.md", f"echo started\nwhile [ ! -f {gate} ]; do sleep 0.02; done\n")
    running = e.pair("send", "--kind", "task", "--body-file", body, "--background")
    assert running.code == 0, running.stdout
    paths = PairPaths(state_dir_for(e.sandbox.repo / ".git"))
    transcript = paths.turn_file(1, "task", ".log")
    wait_until(lambda: transcript.exists() and b"started" in transcript.read_bytes(), timeout=60)
    session = load_session(paths)
    assert session is not None
    ray.init(address=cluster.address, namespace="unitmgr", log_to_driver=False)
    try:
        actor = ray.get_actor(actor_name(paths, session), namespace="unitmgr")
        worker = ray.get(actor.hello.remote(), timeout=30)["pid"]
    finally:
        ray.shutdown()
    os.kill(worker, signal.SIGSTOP)
    try:
        return e.pair("cancel")
    finally:
        os.kill(worker, signal.SIGCONT)
        gate.write_text("open\n")


@case("partner-cli-unsupported")
def _cli_unsupported(e: Env) -> Result:
    """The installable grok's help names none of the adapter's flags."""
    return e.pair("init", "--partner", "grok", "--lead", "human", FAKE_HELP="bare")


@case("partner-refuses-root")
def _refuses_root(e: Env) -> Result:
    if os.geteuid() != 0:
        pytest.skip("the root refusal needs uid 0")
    environment = {key: value for key, value in os.environ.items() if key != "IS_SANDBOX"}
    args = ["init", "--partner", "claude", "--lead", "human", "--effort", "high"]
    return e.sandbox.pair(*args, "--role", "executor", env=environment)


# -- GitHub --------------------------------------------------------------------------------------


@case("github-unavailable")
def _unavailable(e: Env) -> Result:
    e.github.fail("GET", r"/issues$", 503, times=1000)
    return e.unit("intake", "--label", "ready", UNITMGR_GITHUB_RETRY_SECONDS="0")


@case("github-refused")
def _refused(e: Env) -> Result:
    e.github.fail("GET", r"/issues$", 404, times=1000)
    return e.unit("intake", "--label", "ready")


def _feedback_unit(e: Env, *, draft: bool = False) -> Any:
    """A recorded unit whose branch has an open PR with one trusted comment."""
    github = e.github
    write_record(e.sandbox, "u1")
    number = github.add_pull("feat/u1", SHA, draft=draft)
    github.comment(number, "alice", "please fix")
    return github


@case("no-open-pr")
def _no_open_pr(e: Env) -> Result:
    e.github.add_pull("feat/u1", SHA, state="merged")
    write_record(e.sandbox, "u1")
    return e.unit("feedback", "--unit", "u1")


@case("feedback-stale")
def _feedback_stale(e: Env) -> Result:
    github = _feedback_unit(e)
    pull = github.pulls[max(github.pulls)]
    github.when("GET", r"/issues/\d+/comments$", lambda: pull.update(head_sha="b" * 40))
    return e.unit("feedback", "--unit", "u1", "--send")


@case("feedback-not-sendable")
def _feedback_draft(e: Env) -> Result:
    _feedback_unit(e, draft=True)
    return e.unit("feedback", "--unit", "u1", "--send")


@case("feedback-untrusted")
def _feedback_planted(e: Env) -> Result:
    _feedback_unit(e)
    path = e.sandbox.registry / "units" / "u1.json"
    record = json.loads(path.read_text())  # an executor plants an addendum, with no MAC
    record["feedback"] = {"pending_send": {"text": "planted", "keys": {}, "branch": "feat/u1"}}
    path.write_text(json.dumps(record))
    return e.unit("feedback", "--unit", "u1", "--send")


case("invalid-max-bytes")(lambda e: e.unit("feedback", "--unit", "u1", "--max-bytes", "12"))
case("invalid-every")(lambda e: e.unit("feedback", "--all", "--auto", "--send", "--every", "5"))
case("invalid-only")(lambda e: e.unit("feedback", "--unit", "u1", "--only", "everything"))


@case("no-such-milestone")
def _milestone(e: Env) -> Result:
    e.github.add_milestone("Sprint 9")
    return e.unit("intake", "--label", "ready", "--milestone", "Sprint 10")


@case("held")
def _held(e: Env) -> Result:
    e.github  # noqa: B018  (configures GitHub)
    head = git(e.working(), "rev-parse", "HEAD")
    return e.unit("merge", "--unit", "u1", "--head", head)


@case("merge-refused")
def _merge_refused(e: Env) -> Result:
    from tests.test_github import deliverable

    _, head = deliverable(e.sandbox, e.github)
    e.github.move_head_on_merge = "7" * 40
    return e.unit("merge", "--unit", "u1", "--head", head)


# -- `next` is a command (SPEC 3.0) ---------------------------------------------------------------

# The codes where no command can help: `next` is one short fix naming the option, file or value
# to change (it starts with the option, e.g. `--branch: …`, or the variable, `NAME=…`).
SHORT_FIXES = {
    "missing-value", "missing-option", "invalid-unit-id", "invalid-branch", "invalid-base",
    "invalid-issue", "invalid-paths", "invalid-identity", "unknown-partner", "unknown-lead",
    "lead-is-partner", "script-needs-model", "script-command-not-found", "invalid-model",
    "model-unresolved", "model-mismatch", "task-file-missing", "task-file-empty",
    "input-not-regular-file", "input-too-large", "conflict", "branch-exists", "worktree-exists",
    "setup-failed", "no-validation", "not-a-git-repository",
    "github-refused", "no-such-milestone", "partner-cli-unsupported", "config-invalid",
    "ports-unavailable", "unknown-kind", "unknown-role", "write-and-read-only", "missing-body",
    "no-body-file", "empty-body", "invalid-budget", "not-a-directory", "internal",
    "record-too-new", "pair-session-unreadable", "unknown-runner",
    "invalid-node", "invalid-ray-address", "ray-auth-required",
}  # fmt: skip
BOILERPLATE = (
    "fix the cause", "then repeat", "--help lists", "repeat the command", "read reason",
    "fix the command line", "once the cause is fixed", "resend:",
)  # fmt: skip
SHELL_WORDS = {"unit", "pair", "git", "tail", "cd", "sleep", "mv", "npm", "ps", "cat", "pip"}
ASSIGNMENT = re.compile(r"[A-Z][A-Z0-9_]*=")
# A short fix opens with what to change: an option, a variable, a file, a config key.
SHORT_FIX = re.compile(r"(--[a-z-]+|[A-Z][A-Z0-9_]*=|/|[a-z_.]+( =|:| in )|a bug)")
# turn-in-flight's next step depends on the command by design: an addendum queues behind the
# turn (`--queue`, SPEC 3.6), every other command stops it first (`unit cancel`); it has no ALSO.


def command_words(line: str) -> list[str]:
    words = shlex.split(line)
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]  # `NAME=VALUE command …`: the environment of one command
    return words


def parses(words: list[str]) -> None:
    """`words` parse with the CLI's own parser (options and choices exist), nothing run."""
    import typer.main

    if words[0] == "unit":
        from unitmgr.cli import whole_app as app_of
    else:
        from pair.cli import app

        def app_of() -> Any:
            return app

    root = typer.main.get_command(app_of())
    context = root.make_context(words[0], words[1:], resilient_parsing=True)
    arguments = [*context._protected_args, *context.args]
    if not arguments or arguments == ["--help"]:
        return
    name, command, rest = root.resolve_command(context, arguments)
    assert command is not None, words
    parsed = command.make_context(name, rest, parent=context, resilient_parsing=True)
    assert not parsed.args, (words, parsed.args)  # no words left over: no prose after it


def git_subcommand_exists(words: list[str]) -> bool:
    rest = words[1:]
    while rest and rest[0] == "-C":
        rest = rest[2:]
    probe = subprocess.run(["git", rest[0], "-h"], capture_output=True, text=True)
    return "is not a git command" not in probe.stderr


def template(code: str, next_step: str, argv: tuple[str, ...]) -> str:
    """What one code's next step is, with ids, paths and values abstracted: the command it
    names (or SAME: the failed one, changed) and the options it adds."""
    if code in SHORT_FIXES and SHORT_FIX.match(next_step):
        return next_step.split(maxsplit=1)[0].rstrip(":")
    words = command_words(next_step)
    head = words[:2] if words[:1] in (["unit"], ["pair"]) else words[:1]
    same = list(argv[: len(head)]) == head
    added = sorted({word for word in words if word.startswith("--") and word not in argv})
    return f"{'SAME' if same else ' '.join(head)} {' '.join(added)}".strip()


def check_next(code: str, result: Result) -> None:
    next_step: str = result["next"]
    lowered = next_step.lower()
    assert not any(phrase in lowered for phrase in BOILERPLATE), (code, next_step)
    assert "\n" not in next_step, (code, next_step)
    if code in SHORT_FIXES and SHORT_FIX.match(next_step):
        assert len(next_step) <= 200, (code, next_step)
        return
    words = command_words(next_step)
    after_cd = False
    for segment in " ".join(shlex.quote(word) for word in words).split(" '&&' "):
        part = command_words(segment)  # each command of a `a && b` line
        if after_cd:
            break  # `cd W && COMMAND`: the rest is the recorded command itself (validation)
        assert part and part[0] in SHELL_WORDS, (code, next_step)  # no prose before it
        after_cd = part[0] == "cd"
        if part[0] in ("unit", "pair"):
            parses(part)
        elif part[0] == "git":
            assert git_subcommand_exists(part), (code, next_step)
    argv = result.argv
    if argv and argv[0] in ("unit", "pair"):
        if code == "interrupted":
            assert words == list(argv), next_step  # the bare command line resumes
        else:
            assert shlex.split(next_step) != list(argv), (code, next_step)  # never the failed one


# More commands that refuse with a code already provoked above: the same code must get the same
# next step from each (SPEC 3.0).
ALSO: dict[str, list[Callable[[Env], Result]]] = {
    "no-such-unit": [
        lambda e: e.unit("tail", "--unit", "nope"),
        lambda e: e.unit("verify", "--unit", "nope"),
        lambda e: e.unit("dismantle", "--unit", "nope", "--force", "nope"),
        lambda e: e.unit("addendum", "--unit", "nope", "--text", "more"),
    ],
    "invalid-unit-id": [lambda e: e.unit("status", "--unit", "bad id")],
    "invalid-lock-timeout": [lambda e: e.unit("status", "--all", "--lock-timeout", "x")],
    "lead-is-partner": [
        lambda e: (write_record(e.sandbox, "u1", lead="codex"), e.unit(
            "restaff", "--unit", "u1", "--lead", "codex", "--partner", "codex",
            "--effort", "high", "--reason", "codes"))[1],
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("code", "index"),
    [(code, i) for code, cases in sorted(ALSO.items()) for i in range(len(cases))],
)
def test_the_same_code_gets_the_same_next_from_every_command(
    code: str, index: int, sandbox: Sandbox, fake_partners: FakePartners,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    env = Env(sandbox, fake_partners, request)
    first, other = CASES[code](env), ALSO[code][index](Env(sandbox, fake_partners, request))
    assert other.document is not None and other["code"] == code, other.stdout
    check_next(code, first)
    check_next(code, other)
    assert template(code, first["next"], first.argv) == template(code, other["next"], other.argv), (
        first["next"], other["next"])  # fmt: skip


# -- the test ------------------------------------------------------------------------------------


def documented_exits(code: str) -> set[int]:
    return {int(number) for number in re.findall(r"\b(\d+)\b", DOCUMENTED[code])}


def test_every_documented_code_has_a_case() -> None:
    missing = sorted(set(DOCUMENTED) - set(CASES))
    assert not missing, f"codes in json-output.md with no case in this file: {missing}"


SLOW_CODES = {"cancel-unconfirmed"}  # a Ray turn whose node does not answer: ~5 s


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(c, marks=[pytest.mark.slow, pytest.mark.ray_cluster]) if c in SLOW_CODES else c
        for c in sorted(DOCUMENTED)
    ],
)
def test_a_failing_call_prints_its_code_exit_and_next(
    code: str,
    sandbox: Sandbox,
    fake_partners: FakePartners,
    request: pytest.FixtureRequest,
) -> None:
    if code not in CASES:
        pytest.fail(f"no case for {code} (see test_every_documented_code_has_a_case)")
    result = CASES[code](Env(sandbox, fake_partners, request))
    assert result.document is not None, result.stdout + result.stderr
    assert result["code"] == code, result.stdout
    assert result.code in documented_exits(code), (result.code, DOCUMENTED[code])
    assert isinstance(result.document.get("next"), str) and result["next"].strip(), result.stdout
    check_next(code, result)


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_create_kills_its_setup_and_resumes(
    sandbox: Sandbox, signum: int, exit_code: int
) -> None:
    started = sandbox.root / "setup-started"
    pid_file = sandbox.root / "setup.pid"
    setup = f"test -e {started} && exit 0; echo $$ > {pid_file}; touch {started}; sleep 60"
    args = sandbox.create_args("u1", setup=setup)
    process = subprocess.Popen(
        ["unit", *args, "--repo", str(sandbox.repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(started.exists)
    process.send_signal(signum)
    stdout, _ = process.communicate(timeout=60)
    document = json.loads(stdout)
    assert process.returncode == exit_code and document["code"] == "interrupted", stdout
    assert document["next"] == shlex.join(process.args), document["next"]  # the bare command
    from tests.conftest import gone

    assert gone(int(pid_file.read_text()))  # the setup's group was killed first
    assert sandbox.record("u1")["lifecycle"] == "setting-up"  # journal kept, not rolled back
    resumed = sandbox.unit(*args)
    assert resumed.code == 0 and resumed["status"] == "resumed", resumed.stdout
