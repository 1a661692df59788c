"""`unit create`, `status`, `list` and forced `dismantle` through the real CLI on real repos."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from pathlib import Path

import psutil

from tests.conftest import Sandbox, git, git_verbs, logging_git
from unitmgr.steps import CREATE_STEPS

PUSHING_MODEL = (
    "cat > /dev/null; echo hello > GREETING.md; git add GREETING.md; "
    "git commit -qm greeting; git push -q origin HEAD; echo pushed"
)


def test_create_reaches_working_and_dismantle_leaves_nothing(sandbox: Sandbox) -> None:
    result = sandbox.create("u1", model=PUSHING_MODEL)
    assert result.code == 0, result.stdout + result.stderr
    assert result["status"] == "created"
    unit = result["unit"]
    worktree = sandbox.worktree("u1")
    assert unit["lifecycle"] == "working"
    assert unit["worktree"] == os.path.realpath(worktree)
    assert unit["pair"]["latest_seq"] == 1
    assert unit["base_ref"] == "refs/remotes/origin/main"
    assert unit["base_sha"] == git(sandbox.repo, "rev-parse", "origin/main")
    assert unit["journal"] == []
    assert unit["observed"]["worktree"]["branch"] == "feat/u1"
    assert (sandbox.registry / "tasks" / "u1.md").read_text() == "Add a greeting file.\n"
    # progress of long steps goes to stderr, the document alone to stdout
    assert "git worktree add" in result.stderr

    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "replied" and receipt["reply"] == "pushed"
    assert receipt["seq"] == 1 and receipt["kind"] == "task"
    prompt = Path(receipt["prompt_file"]).read_text()
    assert prompt.startswith("[agent human -> script kind=task sid=script-")
    assert prompt.endswith("\n\nAdd a greeting file.\n")  # the manifest is the first task's body
    assert git(sandbox.repo, "ls-remote", "origin", "refs/heads/feat/u1")

    everything = sandbox.unit("status", "--all")
    assert everything.code == 0
    (summary,) = everything["units"]
    assert summary["lifecycle"] == "working"
    assert summary["pair"]["latest_receipt"]["status"] == "replied"
    assert summary["pair"]["turn"]["seq"] == 1
    assert summary["pair"]["turn"]["bytes"] > 0
    assert summary["worktree"]["ahead_of_base"] == 1
    assert "task" not in summary and "observed" not in summary

    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert gone.code == 0, gone.stdout
    assert gone["status"] == "dismantled" and gone["forced"] is True
    assert gone["abandoned"]["ahead_of_base"] == 1
    assert [step["step"] for step in gone["done"]] == [
        "end-pair",
        "reap",
        "archive",
        "worktree",
        "local-branch",
        "remote-branch",
        "manifest",
        "record",
    ]
    assert Path(gone["archive"], "transcripts").exists() or any(
        Path(gone["archive"]).rglob("*-receipt.json")
    )
    assert not worktree.exists()
    assert git(sandbox.repo, "branch", "--list", "feat/u1") == ""
    assert git(sandbox.repo, "ls-remote", "origin", "refs/heads/feat/u1") == ""
    assert not (sandbox.registry / "units" / "u1.json").exists()
    assert not (sandbox.registry / "tasks" / "u1.md").exists()
    assert str(worktree) not in git(sandbox.repo, "worktree", "list")
    for process in psutil.process_iter(["cwd"]):
        assert not (process.info["cwd"] or "").startswith(str(worktree))
    assert sandbox.unit("list")["units"] == []


def test_status_unit_reconciles_the_pair_head(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    status = sandbox.unit("status", "--unit", "u1")
    assert status.code == 0
    unit = status["unit"]
    assert unit["observed"]["latest_receipt"]["status"] == "replied"
    assert unit["pair"]["latest_receipt_file"].endswith("0001-task-receipt.json")
    assert (
        sandbox.record("u1")["pair"]["latest_receipt_file"] == unit["pair"]["latest_receipt_file"]
    )
    table = sandbox.unit("status", "--all", "--format", "table")
    assert table.code == 0 and "u1" in table.stdout and "replied" in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80


def test_status_all_writes_nothing(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    (sandbox.worktree("u1") / "new-file.txt").write_text("dirty\n")
    before = sandbox.snapshot()
    index = sandbox.repo / ".git" / "worktrees" / "u1" / "index"
    index_mtime = index.stat().st_mtime_ns
    result = sandbox.unit("status", "--all")
    assert result.code == 0
    assert result["units"][0]["worktree"]["dirty_files"] == 2  # GREETING.md and new-file.txt
    assert sandbox.snapshot() == before
    assert index.stat().st_mtime_ns == index_mtime


def test_create_without_origin_falls_back_to_the_local_base(
    sandbox_without_origin: Sandbox,
) -> None:
    box = sandbox_without_origin
    result = box.create("u1")
    assert result.code == 0, result.stdout
    assert result["unit"]["base_ref"] == "refs/heads/main"
    box.wait_turn("u1")
    gone = box.unit("dismantle", "--unit", "u1", "--force", "u1")
    remote = next(step for step in gone["done"] if step["step"] == "remote-branch")
    assert remote["status"] == "skipped" and remote["detail"]["skipped"] == "no origin"


def test_missing_base_is_refused(sandbox: Sandbox) -> None:
    before = sandbox.snapshot()
    result = sandbox.create("u1", base="no-such-base")
    assert result.code == 1 and result["code"] == "base-missing"
    assert "no-such-base does not exist at origin or locally" in result["reason"]
    after = sandbox.snapshot()
    # Only the fetch lock (created once, never deleted) may appear: no record, no manifest.
    assert {k: v for k, v in after["contents"].items() if "/locks/" not in k} == before["contents"]
    assert after["refs"] == before["refs"] and after["worktrees"] == before["worktrees"]


def test_pr_body_is_excluded_once(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    assert sandbox.create("u2", max_active="3", max_held="3").code == 0
    exclude = (sandbox.repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/PR_BODY.md") == 1


def test_failing_setup_rolls_back_completely(sandbox: Sandbox) -> None:
    before = sandbox.snapshot()
    result = sandbox.create("u1", setup="echo preparing; exit 3")
    assert result.code == 1, result.stdout
    assert result["code"] == "setup-failed" and result["reason"].startswith("setup exited 3")
    assert "preparing" in result.stderr  # the hook's output is streamed to stderr
    rollback = {entry["resource"]: entry["ok"] for entry in result["detail"]["rollback"]}
    assert rollback == {
        "pr-body-exclude": True,
        "worktree": True,
        "local-branch": True,
        "task-file": True,
    }
    assert result["detail"]["recovery_record"] is None
    # The exclude line this create added is gone again (no other unit needs it).
    exclude = sandbox.common_dir / "info" / "exclude"
    assert "/PR_BODY.md" not in exclude.read_text().splitlines()
    after = sandbox.snapshot()
    assert after["refs"] == before["refs"] and after["worktrees"] == before["worktrees"]
    assert not sandbox.worktree("u1").exists()
    assert not (sandbox.registry / "units" / "u1.json").exists()
    assert not (sandbox.registry / "tasks" / "u1.md").exists()
    events = (sandbox.registry / "events.jsonl").read_text()
    assert '"step": "setup", "status": "failed"' in events


def test_a_rollback_stops_what_setup_left_running_in_the_worktree(sandbox: Sandbox) -> None:
    pid_file = sandbox.root / "daemon.pid"
    # A daemon in a session of its own: the setup hook's group kill cannot reach it.
    setup = f"setsid sleep 300 < /dev/null > /dev/null 2>&1 & echo $! > {pid_file}; exit 3"
    result = sandbox.create("u1", setup=setup)
    assert result.code == 1 and result["code"] == "setup-failed", result.stdout
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    (worktree,) = [e for e in result["detail"]["rollback"] if e["resource"] == "worktree"]
    assert worktree["ok"] is True
    assert pid in [process["pid"] for process in worktree["reaped"]["processes"]]
    assert not sandbox.worktree("u1").exists()


def test_failing_pair_init_rolls_back_and_names_the_archive(sandbox: Sandbox) -> None:
    result = sandbox.create("u1", model="./tools/not-here")
    assert result.code == 1, result.stdout
    assert result["detail"]["step"] == "pair-init"
    assert result["code"] == "script-command-not-found"
    assert not sandbox.worktree("u1").exists()
    assert git(sandbox.repo, "branch", "--list", "feat/u1") == ""
    assert not (sandbox.registry / "units" / "u1.json").exists()
    assert sandbox.unit("list")["units"] == []


def test_setup_timeout_kills_the_hook(sandbox: Sandbox) -> None:
    pid_file = sandbox.root / "setup.pid"
    environment = dict(os.environ, UNITMGR_SETUP_TIMEOUT="1")
    started = time.monotonic()
    result = sandbox.unit(
        *sandbox.create_args("u1", setup=f"echo $$ > {pid_file}; sleep 60"), env=environment
    )
    assert result.code == 1 and result["code"] == "timeout"
    assert result["reason"] == "setup timed out after 1s"
    assert time.monotonic() - started < 20
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_conflicts_with_recorded_units_and_existing_refs(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", issue="7").code == 0
    same_branch = sandbox.create("u2", branch="feat/u1", max_active="5", max_held="5")
    assert same_branch.code == 1 and same_branch["code"] == "conflict"
    assert "same branch" in same_branch["reason"]
    same_issue = sandbox.create("u2", issue="7", max_active="5", max_held="5")
    assert same_issue.code == 1 and "same issue #7" in same_issue["reason"]
    git(sandbox.repo, "branch", "taken")
    taken = sandbox.create("u2", branch="taken", max_active="5", max_held="5")
    assert taken.code == 1 and taken["code"] == "branch-exists"
    occupied = sandbox.root / "occupied"
    occupied.mkdir()
    exists = sandbox.create("u2", worktree=str(occupied), max_active="5", max_held="5")
    assert exists.code == 1 and exists["code"] == "worktree-exists"
    repeat = sandbox.create("u1")
    assert repeat.code == 1 and repeat["code"] == "unit-exists"
    assert "already exists in phase working" in repeat["reason"]


def test_overlapping_write_scopes_are_refused_unless_allowed(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", paths="src/api/**").code == 0
    refused = sandbox.create("u2", paths="src/**", max_active="5", max_held="5")
    assert refused.code == 1 and "overlapping --paths" in refused["reason"]
    allowed = sandbox.create("u2", "--allow-overlap", paths="src/**", max_active="5", max_held="5")
    assert allowed.code == 0, allowed.stdout
    disjoint = sandbox.create("u3", paths="docs/**", max_active="5", max_held="5")
    assert disjoint.code == 0


def test_admission_counts_recorded_units(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", max_active="1").code == 0
    refused = sandbox.create("u2", max_active="1")
    assert refused.code == 1 and refused["code"] == "admission-paused"
    capacity = refused["detail"]
    assert capacity["active"] == 1 and capacity["slots"] == 0
    assert capacity["pr_state"] == "not-configured"
    assert [unit["unit_id"] for unit in capacity["units"]] == ["u1"]
    # The reason names the limits and counts; the next step is this create with the limit that
    # binds raised, and only that one (SPEC 3.3 Defaults).
    assert (
        "max_active 1: 1 active, 0 free; max_held 2: 0 held + 1 active, 1 free"
        in (refused["reason"])
    )
    assert "without GitHub every recorded unit counts as active" in refused["reason"]
    assert "max_active/max_held in .unitmgr.toml" in refused["reason"]
    expected = shlex.join(["unit", *sandbox.create_args("u2", max_active="2"), "--repo"])
    assert refused["next"] == f"{expected} {sandbox.repo}", refused["next"]
    # max_held counts against the active units too (SPEC 3.2): "0 held" still binds.
    held_bound = sandbox.create("u2", max_active="5", max_held="1")
    assert held_bound.code == 1 and held_bound["detail"]["slots"] == 0
    assert "max_held 1: 0 held + 1 active, 0 free" in held_bound["reason"]
    assert "--max-active 5 --max-held 2 --repo" in held_bound["next"]
    paste = held_bound["next"].split()
    assert paste[:2] == ["unit", "create"]
    # The next step, run as given, creates the unit.
    assert sandbox.unit(*shlex.split(held_bound["next"])[1:]).code == 0


def test_dry_run_plans_and_writes_nothing(sandbox: Sandbox) -> None:
    sandbox.registry.mkdir(exist_ok=True)
    sandbox.machine_config.write_text('copy = [".env"]\n')  # copy-files runs too
    before = sandbox.snapshot()
    result = sandbox.create("u1", "--dry-run", setup="true")
    assert result.code == 0, result.stdout
    assert result["dry_run"] is True
    # The step names themselves are pinned in test_architecture.
    assert [step["step"] for step in result["plan"]] == list(CREATE_STEPS)
    assert {step["action"] for step in result["plan"]} == {"run"}
    assert result["plan"][2]["detail"]["base_sha"] == git(sandbox.repo, "rev-parse", "origin/main")
    assert result["plan"][4]["detail"] == {"copy": [".env"]}
    assert sandbox.snapshot() == before
    refused = sandbox.create("u1", "--dry-run", base="nope")
    assert refused.code == 1 and refused["code"] == "base-missing"


def test_a_dry_run_refuses_as_the_create_would_when_two_checks_fail(sandbox: Sandbox) -> None:
    """A request refused on two counts gets the same code from `--dry-run` as from the create
    itself (SPEC 3.0): both run admission before the base and the base before the branch."""
    assert sandbox.create("u1", max_active="1").code == 0
    for extra in (["--dry-run"], []):
        full_and_no_base = sandbox.create("u2", *extra, max_active="1", base="nope")
        assert full_and_no_base.code == 1, full_and_no_base.stdout
        assert full_and_no_base["code"] == "admission-paused", (extra, full_and_no_base.stdout)
        assert full_and_no_base.document.get("dry_run") is (True if extra else None)
    before = sandbox.snapshot()
    dry = sandbox.create("u1", "--dry-run", max_active="1", scope="something else")
    real = sandbox.create("u1", max_active="1", scope="something else")
    assert (dry["code"], dry["detail"]) == (real["code"], real["detail"]), (dry.stdout, real.stdout)
    assert sandbox.snapshot() == before


def test_a_dry_run_refuses_a_partner_that_is_not_installed_as_the_create_would(
    sandbox: Sandbox,
) -> None:
    missing = {**os.environ, "UNITMGR_OPENCODE_BIN": str(sandbox.root / "no-such-opencode")}
    before = sandbox.snapshot()
    for extra in (["--dry-run"], []):
        args = sandbox.create_args("u1", partner="opencode", model=None, effort="high")
        refused = sandbox.unit(*args, *extra, env=missing)
        assert refused.code == 2 and refused["code"] == "partner-not-installed", refused.stdout
        assert refused.document.get("dry_run") is (True if extra else None)
    assert sandbox.snapshot() == before


def test_list_names_the_recovery_for_a_missing_worktree(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    shutil.rmtree(sandbox.worktree("u1"))
    listed = sandbox.unit("list")
    assert listed.code == 0
    (unit,) = listed["units"]
    assert unit["recovery"]["needed"] is True
    assert unit["recovery"]["why"] == "worktree missing"
    assert (
        unit["recovery"]["command"] == f"unit dismantle --unit u1 --force u1 --repo {sandbox.repo}"
    )
    assert unit["observed"]["worktree"]["prunable"] is not None
    assert sandbox.worktree("u1").exists() is False  # never re-created automatically
    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert gone.code == 0, gone.stdout
    assert git(sandbox.repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_failed_dismantle_resumes_where_it_stopped(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", model=PUSHING_MODEL).code == 0
    sandbox.wait_turn("u1")
    assert sandbox.origin is not None
    hidden = sandbox.origin.with_name("origin-away.git")
    sandbox.origin.rename(hidden)  # origin unreachable: the remote-branch step must fail
    failed = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert failed.code == 1, failed.stdout
    assert failed["detail"]["step"] == "remote-branch"
    assert sandbox.record("u1")["lifecycle"] == "dismantle-failed"
    (unit,) = sandbox.unit("list")["units"]
    assert unit["recovery"]["why"] == "lifecycle dismantle-failed"
    expected = f"unit dismantle --unit u1 --force u1 --repo {sandbox.repo}"
    assert unit["recovery"]["command"] == expected
    hidden.rename(sandbox.origin)
    resumed = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert resumed.code == 0, resumed.stdout
    steps = [(entry["step"], entry["status"]) for entry in resumed["done"]]
    assert steps.count(("worktree", "done")) == 1  # finished steps are not run again
    assert ("remote-branch", "done") in steps
    assert git(sandbox.repo, "ls-remote", "origin", "refs/heads/feat/u1") == ""


def test_status_write_back_is_skipped_while_the_unit_is_busy(sandbox: Sandbox) -> None:
    from registry.locks import Deadline, FileLock

    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    record_file = sandbox.registry / "units" / "u1.json"
    record = json.loads(record_file.read_text())
    record["pair"]["latest_receipt_file"] = None
    record_file.write_text(json.dumps(record))
    holder = FileLock(sandbox.registry / "locks" / "u1.lock", subject="unit u1", command="test")
    holder.acquire(Deadline(0))
    try:
        busy = sandbox.unit("status", "--unit", "u1")
        assert busy.code == 0 and busy["write_back"] == "skipped: busy"
        assert sandbox.record("u1")["pair"]["latest_receipt_file"] is None
    finally:
        holder.release()
    written = sandbox.unit("status", "--unit", "u1")
    assert written["write_back"] == "written"
    assert sandbox.record("u1")["pair"]["latest_receipt_file"].endswith("0001-task-receipt.json")


def test_a_dry_run_asks_origin_once_for_its_base_and_branch(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """One `ls-remote` answers both a dry run's base and whether its branch is already at
    origin (a round trip each to a remote host otherwise); the local refs in one process."""
    env, log = logging_git(tmp_path, sandbox.repo)
    planned = sandbox.unit(*sandbox.create_args("u1"), "--dry-run", env=env)
    assert planned.code == 0, planned.stdout
    verbs = git_verbs(log)
    assert verbs.count("ls-remote") == 1 and "fetch" not in verbs, verbs
    assert verbs.count("for-each-ref") == 1 and "show-ref" not in verbs, verbs
    # A teammate's branch that only origin has (never fetched here) is still found.
    head = git(sandbox.repo, "rev-parse", "HEAD")
    assert sandbox.origin is not None
    git(sandbox.origin, "update-ref", "refs/heads/feat/u2", head)
    log.unlink()
    taken = sandbox.unit(*sandbox.create_args("u2"), "--dry-run", env=env)
    assert taken.code == 1 and taken["code"] == "branch-exists", taken.stdout
    assert taken["reason"] == "branch feat/u2 already exists at origin"
    assert git_verbs(log).count("ls-remote") == 1
    # The create itself refuses it the same way. ls-remote matches a pattern against the tail
    # of each name: a branch whose name only ends in the unit's is not the unit's branch.
    assert sandbox.create("u2")["code"] == "branch-exists"
    git(sandbox.origin, "update-ref", "refs/heads/old/refs/heads/feat/u3", head)
    assert "refs/heads/feat/u3" in git(sandbox.repo, "ls-remote", "origin", "refs/heads/feat/u3")
    planned = sandbox.unit(*sandbox.create_args("u3"), "--dry-run")
    assert planned.code == 0, planned.stdout


def test_a_junk_packed_refs_line_still_finds_the_branch(sandbox: Sandbox) -> None:
    """One junk line in `packed-refs` (an executor can write the common dir) makes the one
    `for-each-ref` fail; the branch is then asked for on its own and still found."""
    git(sandbox.repo, "branch", "feat/u4")  # a loose ref
    with (sandbox.common_dir / "packed-refs").open("a") as packed:
        packed.write("this is not a packed ref\n")
    taken = sandbox.create("u4", "--dry-run")
    assert taken.code == 1, taken.stdout + taken.stderr
    assert taken["code"] == "branch-exists", taken.stdout
    assert taken["reason"] == "branch feat/u4 already exists at refs/heads/feat/u4"
    # The create itself stops sooner, at its fetch, which the same line makes fatal: refused,
    # nothing made.
    refused = sandbox.create("u4")
    assert refused.code == 1 and refused["code"] == "git-failed", refused.stdout
    assert sandbox.unit("list")["units"] == []
