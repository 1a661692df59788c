"""Start-up stays light (SPEC 7): a command line that names a command imports that command's
module only, for `unit` and for `pair`; `unit --help` still builds every command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Sandbox, git, wait_until, write_record

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import contextlib, io, json, sys

def loaded(prefix):
    return sorted(m for m in sys.modules if m.startswith(prefix))

repo = sys.argv[1]
found = {}
with contextlib.redirect_stdout(io.StringIO()):
    from unitmgr.cli import main as unit
    unit(["status", "--unit", "nobody", "--repo", repo])
    found["unit status"] = loaded("unitmgr.commands.")
    from pair.cli import main as pair
    pair(["status", "--repo", repo])
    found["pair status"] = loaded("pair.commands.")
    unit(["--help"])
    found["unit --help"] = loaded("unitmgr.commands.")
print(json.dumps(found))
"""


def test_a_named_command_imports_only_its_own_module(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "r")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    found = json.loads(completed.stdout)
    assert found["unit status"] == [
        "unitmgr.commands.common",
        "unitmgr.commands.status",
    ], found
    # `pair status` reads files: no send, init or wait module (and so no runner) behind it.
    assert found["pair status"] == ["pair.commands.shared", "pair.commands.status"], found
    from unitmgr.cli import COMMANDS

    every = {f"unitmgr.commands.{module}" for module in COMMANDS.values()}
    assert every <= set(found["unit --help"]), found


def test_the_gh_token_is_asked_only_of_an_executable_gh_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gh auth token` is found on PATH without shutil (kept off the start-up path); its token
    is masked, and a `gh` that is no executable file is never run."""
    from registry import redact

    token = "opaque-gh-token-" + "9" * 12  # no known token shape: only asking gh masks it
    tools = tmp_path / "tools"
    tools.mkdir()
    gh = tools / "gh"
    gh.write_text(f"#!/bin/sh\necho {token}\n")
    monkeypatch.delenv("UNITMGR_SKIP_GH_AUTH_TOKEN")
    monkeypatch.setenv("PATH", f"{tmp_path / 'missing'}:{tools}")  # no other gh to find
    redact.gh_auth_token.cache_clear()
    try:
        assert redact.gh_auth_token() is None  # not executable yet: not a program to run
        redact.gh_auth_token.cache_clear()
        gh.chmod(0o755)
        assert redact.redact(f"pushed with {token}.") == "pushed with ***."
    finally:
        redact.gh_auth_token.cache_clear()


LIGHT_PROBE = """
import contextlib, io, json, sys
program, argv = sys.argv[1], json.loads(sys.argv[2])
if program == "unit":
    from unitmgr.entry import main
else:
    from pair.entry import main
with contextlib.redirect_stdout(io.StringIO()) as document:
    main(argv)
print(json.dumps(sorted(m for m in ("typer", "rich", "github", "git") if m in sys.modules)))
print(json.dumps(sorted(m for m in json.loads(sys.argv[3]) if m in sys.modules)))
print(json.dumps(document.getvalue()))
"""


def probe(program: str, arguments: list[str], banned: list[str]) -> list[str]:
    """Run `program arguments` in a fresh interpreter through LIGHT_PROBE: its three lines (the
    heavy modules loaded, the `banned` ones loaded, the document)."""
    completed = subprocess.run(
        [sys.executable, "-c", LIGHT_PROBE, program, json.dumps(arguments), json.dumps(banned)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return completed.stdout.splitlines()


# What no command line below loads either (SPEC 7 revision 3: together most of the 5x budget):
# `dataclasses` with `inspect` (registry/light_dataclass.py builds the classes), `typing` (only
# under TYPE_CHECKING), `uuid` (registry/ids.py), OpenSSL through `hashlib`/`hmac`/`secrets`
# (registry/signing.py's own HMAC), ctypes (an inotify watch only once a wait sleeps), socket
# (a port probe), textwrap (a table), traceback (a failure).
LEAN = (
    "dataclasses", "inspect", "typing", "uuid", "_hashlib", "ctypes", "socket", "textwrap",
    "traceback",
)  # fmt: skip


@pytest.mark.parametrize(
    ("program", "argv"),
    [
        ("unit", ["status", "--unit", "nobody"]),
        ("unit", ["dismantle", "--unit", "nobody"]),
        ("unit", ["path", "nobody"]),
        ("unit", ["create", "--unit", "nobody"]),
        ("unit", ["wait", "--unit", "nobody"]),
        ("unit", ["verify", "--unit", "nobody"]),
        ("unit", ["log", "--unit", "nobody"]),
        ("unit", ["feedback", "--unit", "nobody", "--dry-run"]),  # no GitHub: refused
        ("pair", ["status"]),
        ("pair", ["wait"]),
        ("pair", ["init", "--partner", "script", "--model", "cat"]),
        ("pair", ["send", "--kind", "task", "--body-file", "b"]),
        ("pair", ["--help"]),
        ("pair", ["send", "-h"]),
    ],
)
def test_every_command_starts_without_typer(tmp_path: Path, program: str, argv: list[str]) -> None:
    """SPEC 7 revision 3: importing Typer alone costs about 5x `python -c pass`, so a plainly
    spelled command (and a stored help page) never imports it."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    help_page = argv[-1] in ("--help", "-h")
    arguments = argv if help_page else [*argv, "--repo", str(tmp_path / "r")]
    heavy, lean, _ = probe(program, arguments, LEAN)
    assert json.loads(heavy) == [], (program, argv)
    assert json.loads(lean) == [], (program, argv)


def test_the_start_up_stand_ins_give_what_the_standard_library_gives() -> None:
    """registry/signing.py's HMAC-SHA256 and registry/ids.py's uuid4 (kept off the start-up
    path instead of `hmac`, `hashlib` and `uuid`) give exactly what those modules give."""
    import hashlib
    import hmac
    import os
    import uuid

    from registry.ids import uuid4, uuid4_hex
    from registry.signing import compare_digest, hmac_sha256

    for key_bytes in (0, 1, 32, 63, 64, 65, 200):
        for data_bytes in (0, 7, 64, 1000):
            key, data = os.urandom(key_bytes), os.urandom(data_bytes)
            assert hmac_sha256(key, data) == hmac.new(key, data, hashlib.sha256).hexdigest()
    assert compare_digest("ab12", "ab12") and not compare_digest("ab12", "ab13")
    for _ in range(200):
        made = uuid.UUID(uuid4())
        assert made.version == 4 and made.variant == uuid.RFC_4122 and str(made) == str(made)
        assert uuid.UUID(hex=uuid4_hex()).version == 4
    assert len({uuid4_hex() for _ in range(100)}) == 100


def _median_seconds(argv: list[str], runs: int) -> float:
    import statistics
    import time

    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def test_a_once_typer_command_starts_within_a_coarse_bound(tmp_path: Path) -> None:
    """`unit status --unit` (once 10x through Typer) within 3x SPEC 7's 5x target, in
    interleaved rounds so a load spike hits the yardstick too (bench/startup.py measures the
    real ratio)."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    unit = str(Path(sys.executable).parent / "unit")
    command = [unit, "status", "--unit", "nobody", "--repo", str(tmp_path / "r")]
    ratios = []
    for _ in range(3):
        baseline = _median_seconds([sys.executable, "-c", "pass"], 5)
        ratios.append(_median_seconds(command, 5) / baseline)
    assert min(ratios) <= 15, ratios


COMMAND_MODULES_PROBE = """
import importlib, json, sys
from unitmgr.cli import COMMANDS

heavy = ("typer", "click", "dataclasses", "inspect")
found = {}
for module in COMMANDS.values():
    importlib.import_module(f"unitmgr.commands.{module}")
    found[module] = sorted(name for name in heavy if name in sys.modules)
print(json.dumps(found))
"""


def test_no_unit_command_module_imports_typer_or_dataclasses() -> None:
    """Every command module with its options class imports neither Typer (SPEC 7: about 5x
    `python -c pass` alone; `prune` and `log` once did) nor `dataclasses` (with `inspect`, `ast`
    and `dis`: unitmgr/option_fields.py builds the options classes without it), so a command
    pays for those only if its own work needs them."""
    completed = subprocess.run(
        [sys.executable, "-c", COMMAND_MODULES_PROBE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    found = json.loads(completed.stdout)
    assert {module: names for module, names in found.items() if names} == {}, found


NO_POOL_MODULES = ("concurrent.futures", "logging", "traceback", "rich", "typer")


@pytest.mark.parametrize("argv", [["status", "--all"], ["scope", "--unit", "u1"]])
def test_the_views_run_git_side_by_side_without_concurrent_futures(
    sandbox: Sandbox, argv: list[str]
) -> None:
    """`status --all` and `scope` run their git calls in registry/threads.py's pool:
    `concurrent.futures` would import `logging` (with `traceback`, `textwrap`, `tokenize`)."""
    worktree = sandbox.root / "worktrees" / "u1"
    git(sandbox.repo, "worktree", "add", "-q", "-b", "feat/u1", str(worktree))
    (worktree / "new.txt").write_text("dirty\n")
    write_record(sandbox, "u1")
    lines = probe("unit", [*argv, "--repo", str(sandbox.repo)], NO_POOL_MODULES)
    heavy, lean, _ = lines
    assert json.loads(heavy) == [] and json.loads(lean) == [], (argv, lines)


def test_the_pool_answers_as_concurrent_futures_did() -> None:
    """registry/threads.py: answers in submission order, the task's own exception raised again
    by `result()`, `first_done` as FIRST_COMPLETED, `shutdown(cancel_pending=True)` dropping
    what had not started and waiting for what had."""
    import threading

    from registry.threads import Cancelled, Pool

    side_by_side = threading.Barrier(4, timeout=10)  # broken unless all four run at once
    with Pool(4) as pool:
        tasks = [pool.submit(lambda n: (side_by_side.wait(), n)[1], n) for n in range(4)]
        assert [task.result() for task in tasks] == [0, 1, 2, 3]
        assert pool.map(lambda n: n * n, range(5)) == [0, 1, 4, 9, 16]
        error = KeyError("mine")

        def fail() -> None:
            raise error

        with pytest.raises(KeyError) as raised:
            pool.submit(fail).result()
        assert raised.value is error
        assert pool.submit(dict, a=1).result() == {"a": 1}
        gate = threading.Event()
        waiting = {pool.submit(gate.wait, 5), pool.submit(int)}
        done, pending = pool.first_done(waiting)
        assert len(done) == 1 and len(pending) == 1
        gate.set()
    one = Pool(1)
    began, release = threading.Event(), threading.Event()
    running = one.submit(lambda: (began.set(), release.wait(10))[0])
    queued = one.submit(int)
    assert began.wait(5)
    stopping = threading.Thread(target=one.shutdown, kwargs={"cancel_pending": True})
    stopping.start()
    wait_until(queued.done, timeout=10)  # dropped while the running task still runs
    assert not running.done()
    release.set()
    stopping.join(10)
    assert running.done() and running.result() is None
    with pytest.raises(Cancelled):
        queued.result()
    with pytest.raises(RuntimeError):
        one.submit(int)


def test_the_commands_on_a_real_unit_stay_light(sandbox: Sandbox) -> None:
    """On a real unit: `unit verify` journals its validation's identity with the start time
    read from /proc (psutil's import is a third of the command's start-up), the very time psutil
    gives; dismantle's and create's dry runs load no `tarfile`/`shutil` (with zlib, bz2, lzma:
    only a forced dismantle saves files, only a rollback removes a tree)."""
    import psutil

    from registry.processes import child_create_time

    child = subprocess.Popen(["sleep", "5"])
    try:
        assert abs(child_create_time(child.pid) - psutil.Process(child.pid).create_time()) < 0.01
    finally:
        child.kill()
        child.wait()
    commit = "cat > /dev/null; echo hi > GREETING.md; git add -A; git commit -qm g; echo ok"
    assert sandbox.create("u1", validation="true", model=commit).code == 0
    sandbox.wait_turn("u1")
    create = sandbox.create_args("u2")
    for argv, ok in (
        (["verify", "--unit", "u1"], True),
        (["dismantle", "--unit", "u1", "--dry-run"], False),  # no merged PR: refused
        ([*create, "--dry-run"], True),
    ):
        banned = ["psutil", "tarfile", "shutil", "zlib", *NO_POOL_MODULES]
        lines = probe("unit", [*argv, "--repo", str(sandbox.repo)], banned)
        heavy, lean, document = lines
        assert json.loads(heavy) == [] and json.loads(lean) == [], (argv, lines)
        assert json.loads(json.loads(document))["ok"] is ok, document


def test_has_remote_answers_as_git_remote_from_the_shared_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`unit create` asked `git remote` twice (a process each): the config listing every git
    call shares answers it, and `git remote` runs only where git's own rules decide (a legacy
    `remotes/` file, an `insteadOf`)."""
    from pair import gitconfig
    from unitmgr import git as unit_git

    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    ran: list[list[str]] = []
    real = unit_git.run_git

    def counting(args: list[str], **options: object) -> object:
        ran.append(list(args))
        return real(args, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(unit_git, "run_git", counting)

    def both(name: str = "origin") -> tuple[bool, bool]:
        gitconfig.LISTINGS._entries.clear()
        listed = subprocess.run(
            ["git", "remote"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.split()
        return unit_git.has_remote(repo, name), name in listed

    assert both() == (False, False)
    subprocess.run(["git", "-C", str(repo), "config", "remote.origin.prune", "true"], check=True)
    assert both() == (True, True)  # any remote.origin.* key: what `git remote` lists
    assert both("Origin") == (False, False) and both("origin.x") == (False, False)
    subprocess.run(["git", "-C", str(repo), "config", "remote.origin.url", "/x"], check=True)
    assert both() == (True, True)
    assert ran == []
    (repo / ".git" / "remotes").mkdir()
    (repo / ".git" / "remotes" / "legacy").write_text("URL: /y\n")
    assert both("legacy") == (False, False) and ran == [["remote"]]


def test_a_turns_two_audits_run_at_once_and_leave_no_thread() -> None:
    """The supervisor's ref and config audits (a git process each) run side by side before the
    partner starts and after it ends; no thread of theirs is left when the partner starts."""
    import threading

    from pair.supervisor import side_by_side

    both_running = threading.Barrier(2, timeout=10)  # broken unless the two overlap

    def first() -> int:
        both_running.wait()
        return threading.get_ident()

    def second() -> str:
        both_running.wait()
        return "second"

    threads = threading.active_count()
    ident, answer = side_by_side(first, second)
    assert ident != threading.get_ident() and answer == "second"
    assert threading.active_count() == threads

    def failing() -> None:
        raise ValueError("the ref audit failed")

    with pytest.raises(ValueError, match="the ref audit failed"):
        side_by_side(failing, lambda: None)
    assert threading.active_count() == threads


def test_the_snapshots_before_a_turn_run_while_its_partner_is_set_up() -> None:
    """`started_side_by_side`: both snapshots start at once and run while the caller goes on
    (here it releases them, so they cannot have finished before it ran); the answers come with
    both threads ended, and an error in either is raised only after both have."""
    import threading

    from pair.supervisor import started_side_by_side

    both_running = threading.Barrier(2, timeout=10)
    caller_went_on = threading.Event()
    finished: list[str] = []

    def snapshot(name: str) -> str:
        both_running.wait()
        assert caller_went_on.wait(10), "the caller waited for the snapshots before going on"
        finished.append(name)
        return name

    threads = threading.active_count()
    answers = started_side_by_side(lambda: snapshot("refs"), lambda: snapshot("config"))
    caller_went_on.set()  # the caller's own work, while both snapshots wait for it
    assert answers() == ("refs", "config")
    assert threading.active_count() == threads

    failed, slow_done = threading.Event(), threading.Event()

    def failing() -> None:
        failed.set()
        raise ValueError("the ref audit failed")

    def slow() -> None:  # ends only after the other has failed
        assert failed.wait(10)
        slow_done.set()

    answers = started_side_by_side(failing, slow)
    with pytest.raises(ValueError, match="the ref audit failed"):
        answers()
    assert slow_done.is_set() and threading.active_count() == threads


SUBREAPER_PROBE = """
import os, sys, time
from pair.reaper import become_subreaper
assert become_subreaper()
loaded = "ctypes" in sys.modules
read_end, write_end = os.pipe()
child = os.fork()
if child == 0:
    middle = os.getpid()
    if os.fork() == 0:  # the grandchild, orphaned when `middle` exits at once
        deadline = time.monotonic() + 10
        while os.getppid() == middle and time.monotonic() < deadline:
            time.sleep(0.01)  # a bounded wait for the kernel to reparent it
        os.write(write_end, str(os.getppid()).encode())
        os._exit(0)
    os._exit(0)
os.close(write_end)
os.waitpid(child, 0)
adopted_by = int(os.read(read_end, 32) or b"0")
print(loaded, adopted_by == os.getpid())
"""


def test_the_supervisor_adopts_its_orphans_without_importing_ctypes() -> None:
    """`become_subreaper` (every turn's supervisor, before its partner starts): a grandchild
    whose parent exits is adopted by this process, not by init — through `_ctypes`, so `ctypes`
    itself (~2 ms of each turn's start) is never imported."""
    completed = subprocess.run(
        [sys.executable, "-c", SUBREAPER_PROBE], capture_output=True, text=True, cwd=ROOT
    )
    assert completed.stdout.split() == ["False", "True"], completed.stdout + completed.stderr
