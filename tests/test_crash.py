"""Crash safety: a `unit create` SIGKILLed right after each journal write resumes when repeated.

The test hook (SPEC 8) kills the process after the named journal entry is written; the exact
recovery command `unit list` prints is then run, and the unit must reach `working` with exactly
one first-task turn, then dismantle without leaving anything behind.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from registry.locks import FileLock
from tests.conftest import Result, Sandbox, git, run_cli
from unitmgr.steps import STEPS_BY_COMMAND


def crash_environment(point: str) -> dict[str, str]:
    return dict(os.environ, UNITMGR_TEST_HOOKS="1", UNITMGR_TEST_CRASH_AFTER=point)


def assert_nothing_left(sandbox: Sandbox, unit_id: str) -> None:
    worktree = sandbox.worktree(unit_id)
    assert not worktree.exists()
    assert git(sandbox.repo, "branch", "--list", f"feat/{unit_id}") == ""
    assert str(worktree) not in git(sandbox.repo, "worktree", "list")
    assert not list(sandbox.registry.rglob(".*.tmp"))
    assert not (sandbox.registry / "units" / f"{unit_id}.json").exists()
    for lock in [*(sandbox.registry / "locks").glob("*.lock"), sandbox.registry / "registry.lock"]:
        if lock.exists():  # nobody holds it: a killed holder's flock died with it
            probe = FileLock(lock, subject=lock.name, command="test")
            assert probe.try_acquire(), f"{lock} is still held"
            probe.release()
    for process in psutil.process_iter(["cwd"]):
        assert not (process.info["cwd"] or "").startswith(str(worktree))


CRASH_POINTS = [
    (command, step, status)
    for command, steps in STEPS_BY_COMMAND.items()
    for step in steps
    for status in ("started", "done")
]


def prepare(
    sandbox: Sandbox, command: str, request: pytest.FixtureRequest | None = None
) -> list[str]:
    """The arguments of the command to crash, after whatever it needs exists (`feedback` also
    needs the fake GitHub, from `request`)."""
    if command == "create":
        # A copy list, so the copy-files step runs (and resumes) too.
        (sandbox.repo / ".env").write_text("SECRET_PLACE=here\n")
        with (sandbox.common_dir / "info" / "exclude").open("a") as exclude:
            exclude.write(".env\n")
        (sandbox.registry).mkdir(exist_ok=True)
        sandbox.machine_config.write_text('copy = [".env"]\n')
        return sandbox.create_args("u1", setup="echo ran >> ../setup-runs.log")
    working = sandbox.create("u1", model="cat")
    assert working.code == 0, working.stdout + working.stderr
    sandbox.wait_turn("u1")
    if command == "restaff":
        model = "cat > /dev/null; echo new executor"
        return [
            "restaff",
            "--unit",
            "u1",
            "--lead",
            "human",
            "--partner",
            "script",
            "--model",
            model,
            "--reason",
            "crash test",
        ]
    if command == "addendum":
        return ["addendum", "--unit", "u1", "--text", "Also greet in French."]
    if command == "feedback":
        assert request is not None
        github = request.getfixturevalue("github")
        number = github.add_pull("feat/u1", "ab" * 20)
        github.comment(number, "alice", "Also greet in French.")
        return ["feedback", "--unit", "u1", "--send"]
    (sandbox.worktree("u1") / "notes.txt").write_text("untracked work a forced dismantle keeps\n")
    return ["dismantle", "--unit", "u1", "--force", "u1"]


def assert_final(sandbox: Sandbox, command: str, result) -> None:
    if command == "dismantle":
        assert sandbox.unit("list")["units"] == []
        assert_nothing_left(sandbox, "u1")
        # However often the archive step ran, one archive dir holds the saves (SPEC 3.9).
        (archive,) = (sandbox.registry / "archive").glob("u1-*")
        if result.document:  # (a dismantle killed once it had finished printed nothing)
            assert result["abandoned"]["saved"]["untracked"] == str(archive / "untracked.tar")
        with tarfile.open(archive / "untracked.tar") as saved:
            assert saved.getnames() == ["notes.txt"]
        return
    # feedback prints no unit: its record says where it ended
    unit = sandbox.record("u1") if command == "feedback" else result["unit"]
    assert unit["lifecycle"] == "working" and unit["journal"] == []
    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "replied"
    # The turns that ran: a turn a killed `send` took but never started has no receipt (and is
    # sent again, never adopted — test_a_turn_taken_but_never_started_is_sent_again_not_adopted).
    transcripts = sandbox.common_dir / "worktrees" / "u1" / "pair" / "transcripts"
    ran = sorted(path.name[:4] for path in transcripts.glob("*-receipt.json"))
    assert int(ran[-1]) == receipt["seq"] == unit["pair"]["latest_seq"], (ran, receipt["seq"])
    if command == "create":
        assert len(ran) == 1  # never a second first task
        assert (sandbox.worktree("u1") / ".env").read_text() == "SECRET_PLACE=here\n"
    elif command == "restaff":
        assert unit["staffing"]["current"]["model"] == "cat > /dev/null; echo new executor"
        assert len(unit["staffing"]["history"]) == 1  # the checkpoint is pushed exactly once
        assert len(ran) == 1 and receipt["reply"] == "new executor"
    else:
        manifest = (sandbox.registry / "tasks" / "u1.md").read_text()
        assert manifest.count("## Addendum — ") == 1  # never appended twice
        if command == "feedback":
            ledger = sandbox.record("u1")["feedback"]
            assert ledger["pending_send"] is None and len(ledger["sent"]) == 1, ledger
        assert unit["pending_notice"] is None and len(unit["addenda"]) == 1
        assert len(ran) == 2  # the first task, and exactly one notice turn
    assert sandbox.unit("list")["units"][0]["recovery"]["needed"] is False
    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert gone.code == 0, gone.stdout
    assert_nothing_left(sandbox, "u1")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "step", "status"), CRASH_POINTS, ids=[":".join(point) for point in CRASH_POINTS]
)
def test_a_command_killed_after_each_journal_write_resumes(
    sandbox: Sandbox, command: str, step: str, status: str, request: pytest.FixtureRequest
) -> None:
    args = prepare(sandbox, command, request)
    crashed = sandbox.unit(*args, env=crash_environment(f"{command}:{step}:{status}"))
    assert crashed.code == -signal.SIGKILL, crashed.stdout + crashed.stderr
    assert not list(sandbox.registry.rglob(".*.tmp"))
    listed = sandbox.unit("list")
    assert listed.code == 0
    if command == "dismantle" and (step, status) == ("record", "done"):
        assert listed["units"] == []  # finished: only the event of its last step was left
        assert_nothing_left(sandbox, "u1")
        return
    (unit,) = listed["units"]
    recovery = unit["recovery"]
    assert recovery["needed"] is True, unit
    assert recovery["command"].startswith(f"unit {command} ")
    if command == "create":
        assert "--task-file" not in recovery["command"]
    resumed = run_cli(*shlex.split(recovery["command"]), cwd=sandbox.root)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert_final(sandbox, command, resumed)


def test_every_journal_step_has_crash_points() -> None:
    assert len(CRASH_POINTS) == 2 * sum(len(steps) for steps in STEPS_BY_COMMAND.values()) == 60


def test_resume_kills_the_journaled_setup_child_first(sandbox: Sandbox) -> None:
    marker = sandbox.root / "second-run"
    pid_file = sandbox.root / "setup.pid"
    setup = f"echo $$ >> {pid_file}; test -f {marker} || sleep 120"
    args = sandbox.create_args("u1", setup=setup)
    process = psutil.Popen(
        ["unit", *args, "--repo", str(sandbox.repo)],
        cwd=sandbox.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = sandbox.registry / "units" / "u1.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if record.exists() and '"child"' in record.read_text() and pid_file.exists():
            break
        time.sleep(0.02)
    else:
        pytest.fail("setup never started")
    first_setup = int(pid_file.read_text().split()[0])
    process.kill()  # the lead dies; its setup hook, in its own process group, lives on
    process.wait()
    assert psutil.pid_exists(first_setup)
    marker.write_text("go")
    resumed = sandbox.unit(*args)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert resumed["resumed_from"] == "setting-up"
    assert not psutil.pid_exists(first_setup) or psutil.Process(first_setup).status() == "zombie"
    assert "stopping the earlier setup" in resumed.stderr


def test_a_resume_with_a_different_field_is_refused_by_name(sandbox: Sandbox) -> None:
    args = sandbox.create_args("u1")
    assert sandbox.unit(*args, env=crash_environment("create:setup:done")).code == -9
    before = sandbox.record("u1")
    differing = sandbox.create("u1", scope="something else")
    assert differing.code == 1 and differing["code"] == "cannot-resume"
    assert differing["reason"] == "unit u1 cannot resume: scope differs"
    assert differing["detail"]["recorded"] == "a greeting file"
    other_task = sandbox.root / "other-task.md"
    other_task.write_text("Something else entirely\n")
    task = sandbox.create("u1", task_file=str(other_task))
    assert task.code == 1 and task["reason"] == "unit u1 cannot resume: task differs"
    assert sandbox.record("u1") == before  # a refused resume writes nothing
    resumed = sandbox.unit(*args)
    assert resumed.code == 0 and resumed["resumed_from"] == "initializing-pair"


def test_a_resume_keeps_a_manifest_with_addenda_and_refuses_an_edited_one(sandbox: Sandbox) -> None:
    args = sandbox.create_args("u1")
    assert sandbox.unit(*args, env=crash_environment("create:pair-init:started")).code == -9
    manifest = sandbox.registry / "tasks" / "u1.md"
    manifest.write_text(
        manifest.read_text() + "\n## Addendum — 2026-01-01T00:00:00Z\nAlso greet in French.\n"
    )
    kept = manifest.read_bytes()
    resumed = sandbox.unit(*args)
    assert resumed.code == 0, resumed.stdout
    assert manifest.read_bytes() == kept
    prompt = Path(sandbox.wait_turn("u1")["prompt_file"]).read_text()
    assert prompt.endswith(
        "\n\nAdd a greeting file.\n\n## Addendum — 2026-01-01T00:00:00Z\nAlso greet in French.\n"
    )

    args2 = sandbox.create_args("u2", max_active="3", max_held="3")
    assert sandbox.unit(*args2, env=crash_environment("create:setup:done")).code == -9
    (sandbox.registry / "tasks" / "u2.md").write_text("edited by hand\n")
    refused = sandbox.unit(*args2)
    assert refused.code == 1 and refused["code"] == "manifest-differs"


def test_a_missing_manifest_is_rewritten_from_the_task(sandbox: Sandbox) -> None:
    args = sandbox.create_args("u1")
    assert sandbox.unit(*args, env=crash_environment("create:worktree:done")).code == -9
    (sandbox.registry / "tasks" / "u1.md").unlink()
    resumed = sandbox.unit(*args)
    assert resumed.code == 0, resumed.stdout
    assert (sandbox.registry / "tasks" / "u1.md").read_text() == "Add a greeting file.\n"


def test_a_dismantle_cut_off_mid_removal_leaves_unlinked_files_to_a_person(
    sandbox: Sandbox,
) -> None:
    assert sandbox.create("u1", model="cat").code == 0
    sandbox.wait_turn("u1")
    worktree = sandbox.worktree("u1")
    (worktree / "notes.txt").write_text("uncommitted\n")
    args = ["dismantle", "--unit", "u1", "--force", "u1"]
    assert sandbox.unit(*args, env=crash_environment("dismantle:worktree:started")).code == -9
    # `git worktree remove` deletes the files first and its admin dir last: cut off half-way,
    # the `.git` file is gone and git reports the entry prunable, with files left behind.
    (worktree / ".git").unlink()
    assert "prunable" in git(sandbox.repo, "worktree", "list", "--porcelain")
    resumed = sandbox.unit(*args)
    # Cut off after `.git` went, the files no longer link back to git's entry: git proves
    # nothing about them (a forged `gitdir` looks exactly the same, SPEC 2.5), so the repeat
    # refuses and names the path; once a person has removed what is left, it finishes.
    assert resumed.code == 1 and resumed["code"] == "record-untrusted", resumed.stdout
    assert resumed["detail"]["cause"]["field"] == "worktree"
    assert (worktree / "notes.txt").read_text() == "uncommitted\n"
    assert resumed["next"]
    shutil.rmtree(worktree)
    finished = sandbox.unit(*args)
    assert finished.code == 0, finished.stdout
    assert_nothing_left(sandbox, "u1")


@pytest.mark.parametrize("forced", [False, True])
def test_a_directory_git_does_not_report_is_never_removed(sandbox: Sandbox, forced: bool) -> None:
    """SPEC 2.5: a path no `git worktree list` entry proves is the unit's is left untouched,
    even with --force (the record alone never proves a destructive act)."""
    assert sandbox.create("u1", model="cat").code == 0
    sandbox.wait_turn("u1")
    worktree = sandbox.worktree("u1")
    (worktree / ".git").unlink()
    git(sandbox.repo, "worktree", "prune", "--expire", "now")
    record = sandbox.record("u1")
    record["pr"] = {"number": 1, "state": "merged", "proved": True}  # proof already recorded
    (sandbox.registry / "units" / "u1.json").write_text(json.dumps(record))
    extra = ["--force", "u1"] if forced else []
    refused = sandbox.unit("dismantle", "--unit", "u1", *extra)
    assert refused.code == 1 and refused["code"] == "record-untrusted", refused.stdout
    assert refused["detail"]["cause"]["field"] == "worktree" and refused["next"]
    assert (worktree / "README.md").exists()


def test_an_addendum_that_looks_like_an_option_resumes_from_its_recovery_command(
    sandbox: Sandbox,
) -> None:
    assert sandbox.create("u1", model="cat").code == 0
    sandbox.wait_turn("u1")
    text = "--force is never the answer; ask first."
    crashed = sandbox.unit(
        "addendum",
        "--unit",
        "u1",
        f"--text={text}",
        env=crash_environment("addendum:append:done"),
    )
    assert crashed.code == -9
    (unit,) = sandbox.unit("list")["units"]
    assert unit["recovery"]["why"] == "unfinished addendum"
    resumed = run_cli(*shlex.split(unit["recovery"]["command"]), cwd=sandbox.root)
    assert resumed.code == 0, resumed.stdout
    manifest = (sandbox.registry / "tasks" / "u1.md").read_text()
    assert manifest.count("## Addendum — ") == 1 and manifest.rstrip().endswith(text)


# Where a random kill lands: anywhere in a run of the command (uncut, a create takes ~0.5-1 s
# here, a restaff ~0.5-0.8 s, a dismantle ~0.3-0.6 s, an addendum ~0.3-0.5 s), so mid-step
# moments — inside `git worktree add`, between a removal and its journal entry — are hit, not
# only the journal writes the hook stops at.
RANDOM_KILL_WINDOW = {"create": 1.2, "restaff": 1.0, "dismantle": 0.8, "addendum": 0.6}


def finished(sandbox: Sandbox, command: str) -> bool:
    """Whether a killed command had already done all its work (its journal cleared, its effect
    in the record): a lead who repeats it then asks for it again — a second restaff or addendum
    (SPEC 3.6 dedupes an addendum only while its notice is pending) or a refusal (create's
    `unit-exists`, dismantle's `no-such-unit`) — so this test checks the state instead."""
    path = sandbox.registry / "units" / "u1.json"
    if command == "dismantle":
        return not path.exists()
    if not path.exists():
        return False
    record = json.loads(path.read_text())
    if any(entry.get("command") == command for entry in record.get("journal", [])):
        return False
    if command == "create":
        return bool(record.get("lifecycle") == "working")
    if command == "restaff":
        return bool((record.get("staffing") or {}).get("history"))
    return len(record.get("addenda") or []) == 1


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(2))
@pytest.mark.parametrize("command", sorted(RANDOM_KILL_WINDOW))
def test_a_command_killed_at_a_random_moment_resumes(
    sandbox: Sandbox, command: str, attempt: int
) -> None:
    """SIGKILL at a random moment (SPEC 8), then the same command again: it completes, and
    nothing is left but what it made. The seed is in every failure message."""
    seed = random.randrange(2**32)
    delay = random.Random(seed).uniform(0, RANDOM_KILL_WINDOW[command])
    args = prepare(sandbox, command)
    process = subprocess.Popen(
        [sys.executable, "-m", "unitmgr", *args],
        cwd=sandbox.repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    killer = threading.Timer(delay, process.send_signal, args=(signal.SIGKILL,))
    killer.start()
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        killer.cancel()
    where = f"seed {seed}: killed at {delay:.3f} s (exit {process.returncode})"
    if process.returncode != -signal.SIGKILL:  # it finished first: one document, a whole unit
        assert process.returncode == 0, f"{where}: {stdout.decode()}{stderr.decode()}"
        result = Result(0, json.loads(stdout), stdout.decode(), stderr.decode())
    elif finished(sandbox, command):
        result = (
            Result(0, {}, "", "")
            if command == "dismantle"
            else sandbox.unit("status", "--unit", "u1")
        )
    else:
        result = run_cli("unit", *args, cwd=sandbox.repo)
    assert result.code == 0, f"{where}; then: {result.stdout}{result.stderr}"
    try:
        assert_final(sandbox, command, result)
    except AssertionError as failure:
        raise AssertionError(f"{where}: {failure}") from failure


# A `send` killed between taking its turn and starting it: the seq advanced and the lock is held
# by a process that is gone; no partner ever ran.
TAKE_THE_TURN_AND_DIE = (
    "import os, sys\n"
    "from pair.commands.send import grant_turn\n"
    "grant_turn(sys.argv[1], kind='task', body='never delivered', write=True)\n"
    "os._exit(0)\n"
)


def test_a_turn_taken_but_never_started_is_sent_again_not_adopted(sandbox: Sandbox) -> None:
    """An addendum killed inside its `notify` step, after pair took the turn and before the
    turn started, left the seq advanced with nothing delivered. Its repeat must not adopt that
    turn as the notice that was sent (the executor would never see the addendum): it releases
    the dead lock and sends the notice. Create's first task and restaff's checkpoint adopt the
    same way, through the same check (`pair.api.never_started`)."""
    from pair import api as pair_api

    args = prepare(sandbox, "addendum")
    crashed = sandbox.unit(*args, env=crash_environment("addendum:notify:started"))
    assert crashed.code == -signal.SIGKILL, crashed.stdout
    worktree = sandbox.worktree("u1")
    subprocess.run([sys.executable, "-c", TAKE_THE_TURN_AND_DIE, str(worktree)], check=True)
    state_dir = sandbox.common_dir / "worktrees" / "u1" / "pair"
    taken = pair_api.read_status(state_dir)
    assert taken["seq"] == 2 and taken["in_flight"]["alive"] is False, taken
    assert pair_api.never_started(taken)

    repeated = run_cli("unit", *args, cwd=sandbox.repo)
    assert repeated.code == 0 and repeated["status"] == "sent", repeated.stdout
    assert repeated["notice_seq"] == 3
    receipt = sandbox.wait_turn("u1")
    assert receipt["seq"] == 3 and receipt["status"] == "replied", receipt
    assert "Also greet in French." in Path(receipt["prompt_file"]).read_text()
    assert not pair_api.never_started(pair_api.read_status(state_dir))


def test_a_first_task_taken_but_never_started_is_sent_not_adopted(sandbox: Sandbox) -> None:
    """The same for create's `first-task`: SPEC 3.3 adopts the turn an earlier attempt sent,
    "never a second one" — but a turn that never started was never a first one."""
    from pair import api as pair_api

    args = prepare(sandbox, "create")
    crashed = sandbox.unit(*args, env=crash_environment("create:first-task:started"))
    assert crashed.code == -signal.SIGKILL, crashed.stdout
    subprocess.run(
        [sys.executable, "-c", TAKE_THE_TURN_AND_DIE, str(sandbox.worktree("u1"))], check=True
    )
    state_dir = sandbox.common_dir / "worktrees" / "u1" / "pair"
    assert pair_api.never_started(pair_api.read_status(state_dir))
    resumed = run_cli("unit", *args, cwd=sandbox.repo)
    assert resumed.code == 0 and resumed["status"] == "resumed", resumed.stdout
    receipt = sandbox.wait_turn("u1")
    assert receipt["seq"] == 2 and receipt["status"] == "replied", receipt
    assert "never delivered" not in Path(receipt["prompt_file"]).read_text()


def test_a_worktree_step_cut_off_after_git_made_the_branch_resumes(sandbox: Sandbox) -> None:
    """Killed inside `git worktree add`, after git wrote the branch and before the worktree was
    registered: the resume finds the branch at the recorded base (the name was reserved by this
    unit) and checks it out, rather than failing to create it again."""
    args = prepare(sandbox, "create")
    crashed = sandbox.unit(*args, env=crash_environment("create:worktree:started"))
    assert crashed.code == -signal.SIGKILL, crashed.stdout
    base_sha = sandbox.record("u1")["base_sha"]
    git(sandbox.repo, "branch", "--no-track", "feat/u1", base_sha)  # what the killed git left
    resumed = run_cli("unit", *args, cwd=sandbox.repo)
    assert resumed.code == 0 and resumed["status"] == "resumed", resumed.stdout
    assert git(sandbox.worktree("u1"), "rev-parse", "--abbrev-ref", "HEAD") == "feat/u1"
    upstream = subprocess.run(
        ["git", "config", "--get", "branch.feat/u1.merge"], cwd=sandbox.repo, capture_output=True
    )
    assert upstream.returncode == 1  # no upstream: the branch tracks nothing, as a new one


KILL_IN_HOOK_WRITE = """\
import os, signal
_replace = os.replace
def _killing_replace(source, destination, *args, **kwargs):
    if os.path.basename(os.fspath(destination)) == "reference-transaction":
        os.kill(os.getpid(), signal.SIGKILL)  # the hook's temp is written, not yet renamed
    return _replace(source, destination, *args, **kwargs)
os.replace = _killing_replace
"""


def test_a_create_killed_while_writing_the_ref_hook_leaves_nothing_the_audit_refuses(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Killed between writing unitmgr's hook to a temp file and renaming it into place (the
    last CI's random kill landed there): the temp file is not in the hooks directory, so the
    repeated create is not refused `repo-config-untrusted` over it, and its sweep removes it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(KILL_IN_HOOK_WRITE)
    args = prepare(sandbox, "create")
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), *sys.path]))
    crashed = subprocess.run(
        [sys.executable, "-m", "unitmgr", *args],
        cwd=sandbox.repo,
        env=environment,
        capture_output=True,
        timeout=120,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout.decode()
    hooks = sandbox.common_dir / "hooks"
    assert not (hooks / "reference-transaction").exists()
    assert [path.name for path in hooks.glob(".*")] == []
    (left,) = sandbox.registry.glob(".reference-transaction.*.tmp")  # where it was staged
    resumed = run_cli("unit", *args, cwd=sandbox.repo)
    assert resumed.code == 0, resumed.stdout
    assert (hooks / "reference-transaction").is_file()
    assert not left.exists()
    assert_final(sandbox, "create", resumed)
