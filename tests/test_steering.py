"""Steering working units: restaff, addendum, scope, verify and wait (SPEC 3.5–3.7, 3.11, 3.12)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time

import psutil

from tests.conftest import FakePartners, Sandbox, git, run_cli, wait_until

GATED = "cat > /dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo released"


def env(**changes: str) -> dict[str, str]:
    return {**os.environ, **changes}


def working_unit(sandbox: Sandbox, unit_id: str = "u1", **options: str) -> dict:
    created = sandbox.create(unit_id, **options)
    assert created.code == 0, created.stdout + created.stderr
    sandbox.wait_turn(unit_id)
    return created.document


def restaff_args(unit_id: str = "u1", **changes: str) -> list[str]:
    values = {
        "lead": "human",
        "partner": "claude",
        "reason": "needs a stronger model",
        "effort": "high",
    }
    values.update(changes)
    args = ["restaff", "--unit", unit_id]
    for key, value in values.items():
        args += [f"--{key}", value]
    return args


# -- restaff ---------------------------------------------------------------------------------


def test_restaff_keeps_the_worktree_and_hands_over_a_checkpoint(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    working_unit(sandbox)
    worktree = sandbox.worktree("u1")
    (worktree / "half-done.txt").write_text("work in progress\n")
    old_sid = sandbox.record("u1")["pair"]["sid"]
    result = sandbox.unit(*restaff_args())
    assert result.code == 0, result.stdout + result.stderr
    assert result["status"] == "restaffed"
    unit = result["unit"]
    assert unit["lifecycle"] == "working" and unit["restaff_phase"] is None
    assert unit["pending_staffing"] is None and unit["journal"] == []
    assert unit["staffing"]["current"]["partner"] == "claude"
    (previous,) = unit["staffing"]["history"]
    assert previous["partner"] == "script" and previous["ended_at"]
    checkpoint = previous["checkpoint"]
    assert checkpoint["pair_sid"] == old_sid
    assert checkpoint["head"] == git(worktree, "rev-parse", "HEAD")
    assert any("half-done.txt" in line for line in checkpoint["worktree_status"])
    assert checkpoint["receipt"]["status"] == "replied"
    assert (worktree / "half-done.txt").read_text() == "work in progress\n"  # nothing reset
    assert unit["pair"]["sid"] == "claude-session-1" and unit["pair"]["latest_seq"] == 1
    sandbox.wait_turn("u1")
    _, first_turn = fake_partners.calls("claude")
    manifest = sandbox.registry / "tasks" / "u1.md"
    assert str(manifest) in first_turn["prompt"]
    assert "Add a greeting file." in first_turn["prompt"]
    assert "half-done.txt" in first_turn["prompt"]
    ended = list((sandbox.common_dir / "worktrees" / "u1" / "pair" / "ended").iterdir())
    assert len(ended) == 1 and ended[0].name.endswith(old_sid)


def test_restaff_refuses_an_in_flight_turn_and_a_different_lead(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    gate = sandbox.root / "gate"
    assert sandbox.create("u1", model=GATED.format(gate=gate)).code == 0
    busy = sandbox.unit(*restaff_args())
    assert busy.code == 1 and busy["code"] == "turn-in-flight"
    gate.write_text("go")
    sandbox.wait_turn("u1")
    other_lead = sandbox.unit(*restaff_args(lead="codex"))
    assert other_lead.code == 1 and other_lead["code"] == "lead-differs"
    assert sandbox.record("u1")["lifecycle"] == "working"


def test_a_restaff_with_a_different_target_is_refused_by_field(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    working_unit(sandbox)
    crash = env(UNITMGR_TEST_HOOKS="1", UNITMGR_TEST_CRASH_AFTER="restaff:end-old:done")
    assert sandbox.unit(*restaff_args(), env=crash).code == -9
    differing = sandbox.unit(*restaff_args(reason="another reason"))
    assert differing.code == 1 and differing["code"] == "cannot-resume"
    assert differing["reason"] == "unit u1 cannot resume restaff: reason differs"
    other_partner = sandbox.unit(*restaff_args(partner="codex"))
    assert other_partner["reason"] == "unit u1 cannot resume restaff: partner differs"
    assert sandbox.unit(*restaff_args()).code == 0


def test_a_failed_restaff_is_recorded_and_resumes(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    working_unit(sandbox)
    failing = sandbox.unit(*restaff_args(), env=env(FAKE_SCENARIO="no-session"))
    assert failing.code == 1 and failing["code"] == "no-session-id"
    record = sandbox.record("u1")
    assert record["lifecycle"] == "restaff-failed"
    assert record["restaff_phase"] == "initializing-target"
    assert record["error"]
    (unit,) = sandbox.unit("list")["units"]
    assert unit["recovery"]["command"].startswith(
        "unit restaff --unit u1 --lead human --partner claude"
    )
    resumed = sandbox.unit(*restaff_args())
    assert resumed.code == 0 and resumed["status"] == "resumed"
    assert resumed["resumed_from"] == "restaff-failed"


# -- addendum --------------------------------------------------------------------------------


def test_addendum_appends_the_exact_header_and_notifies(sandbox: Sandbox) -> None:
    working_unit(sandbox, model="cat")
    result = sandbox.unit("addendum", "--unit", "u1", "--text", "Also greet in French.  \n\n")
    assert result.code == 0, result.stdout
    assert result["status"] == "sent" and result["notice_seq"] == 2
    manifest = (sandbox.registry / "tasks" / "u1.md").read_text()
    header = r"\n## Addendum — \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n"
    assert re.fullmatch(r"Add a greeting file\.\n" + header + r"Also greet in French\.\n", manifest)
    receipt = sandbox.wait_turn("u1")
    assert receipt["seq"] == 2
    assert str(sandbox.registry / "tasks" / "u1.md") in receipt["reply"]
    assert "re-read the whole manifest" in receipt["reply"].lower()
    assert manifest.rstrip() in receipt["reply"]
    assert sandbox.record("u1")["pending_notice"] is None


def test_addendum_in_flight_is_refused_or_queued_then_sent_by_status(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    assert sandbox.create("u1", model=GATED.format(gate=gate)).code == 0
    manifest = sandbox.registry / "tasks" / "u1.md"
    before = manifest.read_bytes()
    refused = sandbox.unit("addendum", "--unit", "u1", "--text", "More.")
    assert refused.code == 1 and refused["code"] == "turn-in-flight"
    assert manifest.read_bytes() == before
    queued = sandbox.unit("addendum", "--unit", "u1", "--text", "More.", "--queue")
    assert queued.code == 0 and queued["status"] == "queued"
    assert sandbox.record("u1")["pending_notice"]["sha256"]
    (unit,) = sandbox.unit("list")["units"]
    assert unit["recovery"]["why"] is None  # a turn is in flight: the notice simply waits
    gate.write_text("go")
    sandbox.wait_turn("u1")
    (unit,) = sandbox.unit("list")["units"]
    assert unit["recovery"] == {
        "needed": True,
        "why": "pending notice",
        "command": f"unit status --unit u1 --repo {sandbox.repo}",
    }
    again = sandbox.unit("addendum", "--unit", "u1", "--text", "More.", "--queue")
    assert again.code == 0 and again["status"] == "sent"  # same sha256: resumes at notify
    assert manifest.read_text().count("## Addendum — ") == 1
    assert sandbox.record("u1")["pending_notice"] is None


def test_a_queued_notice_is_sent_by_status_unit(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    assert sandbox.create("u1", model=GATED.format(gate=gate)).code == 0
    assert (
        sandbox.unit("addendum", "--unit", "u1", "--text", "Later.", "--queue")["status"]
        == "queued"
    )
    gate.write_text("go")
    sandbox.wait_turn("u1")
    status = sandbox.unit("status", "--unit", "u1")
    assert status.code == 0 and status["notice_seq"] == 2
    assert status["unit"]["pending_notice"] is None


def test_concurrent_addenda_serialize_and_never_truncate(sandbox: Sandbox) -> None:
    working_unit(sandbox, model="cat")
    processes = [
        subprocess.Popen(
            [
                "unit",
                "addendum",
                "--unit",
                "u1",
                "--text",
                f"Point {index}.",
                "--queue",
                "--repo",
                str(sandbox.repo),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for index in range(6)
    ]
    results = [json.loads(process.communicate(timeout=60)[0]) for process in processes]
    assert all(result["ok"] for result in results), results
    manifest = (sandbox.registry / "tasks" / "u1.md").read_text()
    assert manifest.startswith("Add a greeting file.\n")
    blocks = re.findall(r"\n## Addendum — [0-9TZ:-]+\nPoint (\d)\.\n", manifest)
    assert sorted(blocks) == [str(i) for i in range(6)]
    assert len(manifest) == len("Add a greeting file.\n") + sum(
        len(m.group(0)) for m in re.finditer(r"\n## Addendum — [0-9TZ:-]+\nPoint \d\.\n", manifest)
    )


# -- scope -----------------------------------------------------------------------------------

COMMIT_TWO = (
    "cat > /dev/null; mkdir -p src docs; echo a > src/a.py; echo x > docs/x.md; "
    "git add -A; git commit -qm work; echo committed"
)


def test_scope_lists_outside_files_and_gates_approval(sandbox: Sandbox) -> None:
    working_unit(sandbox, model=COMMIT_TWO, paths="src/**")
    report = sandbox.unit("scope", "--unit", "u1")
    assert report.code == 0, report.stdout
    assert report["files"] == ["docs/x.md", "src/a.py"]
    assert report["outside_paths"] == ["docs/x.md"]
    head = git(sandbox.worktree("u1"), "rev-parse", "HEAD")
    assert report["head"] == head
    assert report["merge_base"] == git(sandbox.repo, "rev-parse", "origin/main")
    refused = sandbox.unit("scope", "--unit", "u1", "--approve")
    assert refused.code == 1 and refused["code"] == "outside-scope"
    assert sandbox.record("u1")["scope_approval"] is None
    approved = sandbox.unit("scope", "--unit", "u1", "--approve", "--allow-outside")
    assert approved.code == 0, approved.stdout
    assert sandbox.record("u1")["scope_approval"]["sha"] == head
    (sandbox.worktree("u1") / "scratch.txt").write_text("dirty")
    dirty = sandbox.unit("scope", "--unit", "u1", "--approve", "--allow-outside")
    assert dirty.code == 1 and dirty["code"] == "worktree-dirty"


def test_a_unit_without_paths_has_every_file_outside(sandbox: Sandbox) -> None:
    working_unit(sandbox, model=COMMIT_TWO)
    assert sandbox.unit("scope", "--unit", "u1")["outside_paths"] == ["docs/x.md", "src/a.py"]


def test_two_units_editing_one_file_show_as_overlaps(sandbox: Sandbox) -> None:
    model = "cat > /dev/null; echo {text} > shared.txt; git add -A; git commit -qm s; echo ok"
    working_unit(sandbox, "a1", model=model.format(text="one"), max_active="4", max_held="4")
    working_unit(sandbox, "a2", model=model.format(text="two"), max_active="4", max_held="4")
    working_unit(sandbox, "a3", model="cat", max_active="4", max_held="4")
    overview = sandbox.unit("status", "--all")
    assert overview["overlaps"] == [{"units": ["a1", "a2"], "files": ["shared.txt"]}]
    report = sandbox.unit("scope", "--unit", "a1")
    assert report["overlaps"] == [{"unit": "a2", "files": ["shared.txt"]}]


# -- verify ----------------------------------------------------------------------------------

COMMIT = "cat > /dev/null; echo hi > GREETING.md; git add -A; git commit -qm g; echo ok"


def test_verify_records_a_failing_validation_against_the_exact_head(sandbox: Sandbox) -> None:
    working_unit(sandbox, model=COMMIT, validation="echo checking; echo broken >&2; exit 4")
    head = git(sandbox.worktree("u1"), "rev-parse", "HEAD")
    failed = sandbox.unit("verify", "--unit", "u1")
    assert failed.code == 1 and failed["code"] == "validation-failed"
    assert failed["reason"] == "validation failed: exit 4"
    verification = sandbox.record("u1")["verification"]
    assert verification["sha"] == head and verification["exit_code"] == 4
    assert "checking" in verification["output_tail"] and "broken" in verification["output_tail"]
    assert failed["detail"]["verification"] == verification
    assert "checking" in failed.stderr  # streamed to stderr as it ran


def test_verify_records_a_pass_and_refuses_a_dirty_tree(sandbox: Sandbox) -> None:
    working_unit(sandbox, model=COMMIT, validation="test -f GREETING.md")
    passed = sandbox.unit("verify", "--unit", "u1")
    assert passed.code == 0 and passed["verification"]["exit_code"] == 0
    (sandbox.worktree("u1") / "stray.txt").write_text("x")
    dirty = sandbox.unit("verify", "--unit", "u1")
    assert dirty.code == 1 and dirty["code"] == "worktree-dirty"
    dry = sandbox.unit("verify", "--unit", "u1", "--dry-run")
    assert dry.code == 1 and dry["dry_run"] is True


def test_verify_refuses_to_record_when_head_moves(sandbox: Sandbox) -> None:
    working_unit(sandbox, model=COMMIT, validation="git commit -q --allow-empty -m sneaky")
    moved = sandbox.unit("verify", "--unit", "u1")
    assert moved.code == 1 and moved["code"] == "head-moved"
    assert sandbox.record("u1")["verification"] is None


def test_verify_refuses_to_record_when_a_tracked_file_changes(sandbox: Sandbox) -> None:
    """HEAD and the tracked changes come from one `git status --porcelain=v2 --branch` before
    and after the validation: a tracked file it edits (HEAD unmoved) records nothing either;
    an untracked file it leaves does not count."""
    working_unit(sandbox, model=COMMIT, validation="echo edited >> README.md")
    moved = sandbox.unit("verify", "--unit", "u1")
    assert moved.code == 1 and moved["code"] == "head-moved", moved.stdout
    assert moved["detail"]["head_before"] == moved["detail"]["head_after"]
    assert sandbox.record("u1")["verification"] is None
    git(sandbox.worktree("u1"), "checkout", "--", "README.md")
    passed = sandbox.unit("verify", "--unit", "u1", "--validation", "touch untracked.txt")
    assert passed.code == 0, passed.stdout
    assert passed["verification"]["sha"] == git(sandbox.worktree("u1"), "rev-parse", "HEAD")


# -- wait ------------------------------------------------------------------------------------


def test_wait_returns_within_a_second_of_a_receipt(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    assert sandbox.create("u1", model=GATED.format(gate=gate)).code == 0
    since = sandbox.unit("status", "--all")["observed_at"]
    waiter = subprocess.Popen(
        ["unit", "wait", "--since", since, "--timeout-min", "1", "--repo", str(sandbox.repo)],
        stdout=subprocess.PIPE,
        text=True,
    )
    measured = psutil.Process(waiter.pid)
    time.sleep(2.0)  # let it wait a while: it must sit idle, not burn CPU
    cpu = measured.cpu_times()
    gate.write_text("go")
    output, _ = waiter.communicate(timeout=30)
    returned = time.time()
    document = json.loads(output)
    (change,) = document["changed"]
    assert change["unit_id"] == "u1" and change["latest_receipt"]["status"] == "replied"
    written = os.stat(change["latest_receipt"]["receipt_file"]).st_mtime
    # Within a second is the target, plus what any `unit` command costs on this machine right
    # now (its start, its reads, its exit): on a loaded machine that alone can take seconds.
    measured_at = time.monotonic()
    assert sandbox.unit("status", "--all").code == 0
    command_seconds = time.monotonic() - measured_at
    bound = 3 * (1 + command_seconds)
    assert returned - written < bound, (
        f"wait returned {returned - written:.2f}s after the receipt (bound {bound:.1f}s)"
    )
    assert cpu.user + cpu.system < 0.6, f"wait used {cpu.user + cpu.system:.2f}s of CPU"


def test_wait_times_out_with_nothing_changed(sandbox: Sandbox) -> None:
    working_unit(sandbox)
    started = time.monotonic()
    result = sandbox.unit("wait", "--timeout-min", "0.02")
    assert result.code == 0 and result["changed"] == []
    assert 1.0 < time.monotonic() - started < 10


def test_wait_without_units_returns_at_once(sandbox: Sandbox) -> None:
    result = sandbox.unit("wait")
    assert (
        result.code == 0 and result["changed"] == [] and result["reason"] == "no units to wait for"
    )


def test_wait_wakes_on_a_lifecycle_change(sandbox: Sandbox) -> None:
    working_unit(sandbox)
    # `--since` (status's observed_at) makes the wait see the change whether it starts blocking
    # before or after the dismantle: no sleep to let it get going.
    since = sandbox.unit("status", "--all")["observed_at"]
    results: list = []
    thread = threading.Thread(
        target=lambda: results.append(
            sandbox.unit("wait", "--unit", "u1", "--since", since, "--timeout-min", "1")
        )
    )
    thread.start()
    assert sandbox.unit("dismantle", "--unit", "u1", "--force", "u1").code == 0
    thread.join(timeout=30)
    # The lead's own dismantle is no news to the lead (issue 21): the wait does not report it,
    # and with nothing left to wait for it returns — unless it saw the change before the
    # dismantle took the unit's lock, when the change is reported as one.
    woke = results[0]
    assert woke.code == 0, woke.stdout
    if woke["changed"]:
        (change,) = woke["changed"]
        assert change["lifecycle"] in ("dismantling", "dismantled")
    else:
        assert woke["reason"] == "no units to wait for"


def test_a_repeated_addendum_adopts_the_notice_its_killed_attempt_sent(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    assert sandbox.create("u1", model=GATED.format(gate=gate)).code == 0
    gate.write_text("go")
    sandbox.wait_turn("u1")
    gate.unlink()
    crash = env(UNITMGR_TEST_HOOKS="1", UNITMGR_TEST_CRASH_AFTER="addendum:notify:started")
    assert sandbox.unit("addendum", "--unit", "u1", "--text", "More.", env=crash).code == -9
    # The killed attempt got its notice out before it could journal it: turn 2 is in flight.
    notice = sandbox.root / "notice.md"
    notice.write_text("The task manifest changed.\n")
    worktree = sandbox.worktree("u1")
    sent = sandbox.pair(
        "send", "--kind", "task", "--body-file", str(notice), "--background", repo=worktree
    )
    assert sent.code == 0 and sent["seq"] == 2
    again = sandbox.unit("addendum", "--unit", "u1", "--text", "More.")
    assert again.code == 0, again.stdout
    assert again["status"] == "sent" and again["notice_seq"] == 2
    record = sandbox.record("u1")
    assert record["pending_notice"] is None and record["journal"] == []
    assert record["pair"]["latest_seq"] == 2
    gate.write_text("go")
    assert sandbox.wait_turn("u1")["seq"] == 2
    assert sandbox.pair("status", repo=worktree)["seq"] == 2  # never a second notice


def test_status_unit_still_answers_when_a_queued_notice_cannot_go(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    assert sandbox.create("u1", model=GATED.format(gate=gate)).code == 0
    queued = sandbox.unit("addendum", "--unit", "u1", "--text", "Later.", "--queue")
    assert queued["status"] == "queued"
    gate.write_text("go")
    sandbox.wait_turn("u1")
    assert sandbox.pair("end", repo=sandbox.worktree("u1")).code == 0  # behind unitmgr's back
    status = sandbox.unit("status", "--unit", "u1")
    assert status.code == 0, status.stdout
    assert status["write_back"].startswith("failed: ")
    assert status["unit"]["pending_notice"] is not None  # still owed, nothing half-done
    assert status["unit"]["journal"] == []


def test_a_lost_turn_is_flagged_with_the_command_that_clears_it(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    assert sandbox.create("u1", model=GATED.format(gate=gate)).code == 0
    worktree = sandbox.worktree("u1")
    in_flight = sandbox.pair("status", repo=worktree)["in_flight"]
    partner = psutil.Process(in_flight["partner_pid"])
    os.kill(in_flight["supervisor_pid"], 9)
    os.killpg(in_flight["partner_pid"], 9)
    wait_until(lambda: not partner.is_running() or partner.status() == psutil.STATUS_ZOMBIE)
    (unit,) = sandbox.unit("status", "--all")["units"]
    assert unit["recovery"] == {
        "needed": True,
        "why": "turn lost",
        "command": f"pair clear --repo {worktree}",
    }
    cleared = run_cli(*unit["recovery"]["command"].split(), cwd=sandbox.root)
    assert cleared.code == 0 and cleared["status"] == "cleared", cleared.stdout
    # Cleared, the lost turn stays visible (SPEC 3.4 rev 3): its worker-lost receipt makes the
    # lost first task a recovery that sends it again, never "nothing to do".
    (unit,) = sandbox.unit("list")["units"]
    assert unit["observed"]["latest_receipt"]["status"] == "worker-lost"
    assert unit["recovery"]["why"] == "first turn failed"
    assert unit["recovery"]["command"].startswith("pair send")
