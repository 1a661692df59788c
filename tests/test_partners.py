"""The five real partner adapters, driven through `pair` against fake CLIs that speak each
CLI's real headless stream format (tests/fakes/partner_fake.py)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.conftest import FakePartners, Sandbox, run_cli

PARTNERS = {
    # partner: (effort for init, expected sid or None for a generated one)
    "claude": ("high", "claude-session-1"),
    "codex": ("high", "codex-thread-1"),
    "cursor": (None, "cursor-chat-1"),
    "opencode": ("high", "ses_open_1"),
    "grok": ("high", None),
}
BINARIES = {"cursor": "cursor-agent"}
READ_ONLY_FLAGS = {
    "claude": ["--permission-mode", "plan"],
    "codex": ['sandbox_mode="read-only"'],
    "cursor": ["--mode", "plan"],
    "opencode": ["--agent", "plan"],
    "grok": ["--permission-mode", "plan"],
}
WRITE_FLAGS = {
    "claude": ["--permission-mode", "bypassPermissions"],
    "codex": ['sandbox_mode="danger-full-access"', 'approval_policy="never"'],
    "cursor": ["--force"],
    "opencode": ["--auto"],
    "grok": ["--permission-mode", "bypassPermissions", "--always-approve"],
}


def env(**changes: str) -> dict[str, str]:
    return {**os.environ, **changes}


def init(sandbox: Sandbox, partner: str, *extra: str, environment: dict[str, str] | None = None):
    effort = PARTNERS[partner][0]
    args = ["init", "--partner", partner, "--lead", "human", "--role", "executor", *extra]
    if effort and "--effort" not in extra:
        args += ["--effort", effort]
    return sandbox.pair(*args, env=environment)


def body(sandbox: Sandbox, text: str = "please do it") -> str:
    path = sandbox.root / "body.md"
    path.write_text(text + "\n")
    return str(path)


def contains(argv: list[str], flags: list[str]) -> bool:
    return all(flag in argv for flag in flags)


@pytest.mark.parametrize("partner", sorted(PARTNERS))
def test_init_send_and_resume_for_every_partner(
    sandbox: Sandbox, fake_partners: FakePartners, partner: str
) -> None:
    created = init(sandbox, partner)
    assert created.code == 0, created.stdout
    expected_sid = PARTNERS[partner][1]
    sid = created["sid"]
    if expected_sid:
        assert sid == expected_sid
    else:
        uuid.UUID(sid)  # grok: a session id we generated and handed to it
    assert created["partner"] == partner and created["seq"] == 0
    binary = BINARIES.get(partner, partner)
    (bootstrap,) = fake_partners.calls(binary)
    assert contains(
        bootstrap["argv"], READ_ONLY_FLAGS[partner] if partner != "codex" else ["-s", "read-only"]
    )
    assert "pair partner" in bootstrap["prompt"] and "ready" in bootstrap["prompt"]
    assert bootstrap["cwd"] == str(sandbox.repo)
    assert Path(created["transcript"]).name == "0000-init.log"

    write_turn = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), "--write")
    assert write_turn.code == 0, write_turn.stdout
    assert write_turn["status"] == "replied"
    assert write_turn["reply"] == f"{partner} did the work"
    assert write_turn["sid"] == sid and write_turn["write"] is True
    read_turn = sandbox.pair(
        "send", "--kind", "question", "--body-file", body(sandbox), "--read-only"
    )
    assert read_turn["status"] == "replied" and read_turn["write"] is False
    _, turn_one, turn_two = fake_partners.calls(binary)
    assert contains(turn_one["argv"], WRITE_FLAGS[partner])
    assert contains(turn_two["argv"], READ_ONLY_FLAGS[partner])
    for turn in (turn_one, turn_two):
        assert sid in turn["argv"], f"{partner} must resume the recorded session"
        assert f"sid={sid}]" in turn["prompt"]
        assert turn["prompt"].startswith(f"[agent human -> {partner} kind=")
    assert write_turn["command"][1:] == turn_one["argv"][: len(write_turn["command"]) - 1]
    assert sandbox.pair("status")["seq"] == 2


@pytest.mark.parametrize(
    ("partner", "scenario", "status", "reason_part"),
    [
        ("claude", "fail", "failed", "exited 3"),
        ("claude", "is-error", "failed", "API Error: 500 Internal server error"),
        ("claude", "empty", "empty-reply", "no reply"),
        ("codex", "turn-failed", "failed", "turn.failed"),
        ("codex", "empty", "empty-reply", "no reply"),
        ("cursor", "is-error", "failed", "cursor-agent: model unavailable"),
        ("opencode", "fail", "failed", "exited 3"),
        ("grok", "cancelled", "failed", "grok-cancelled"),
        ("grok", "empty", "empty-reply", "no reply"),
    ],
)
def test_failed_and_empty_turns(
    sandbox: Sandbox,
    fake_partners: FakePartners,
    partner: str,
    scenario: str,
    status: str,
    reason_part: str,
) -> None:
    assert init(sandbox, partner).code == 0
    result = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), env=env(FAKE_SCENARIO=scenario)
    )
    assert result.code == 1, result.stdout
    assert result["status"] == status and reason_part in result["reason"]


@pytest.mark.parametrize("partner", sorted(PARTNERS))
def test_a_hung_partner_is_killed_with_its_process_group(
    sandbox: Sandbox, fake_partners: FakePartners, partner: str
) -> None:
    assert init(sandbox, partner).code == 0
    pids = sandbox.root / "pids"
    result = sandbox.pair(
        "send",
        "--kind",
        "task",
        "--body-file",
        body(sandbox),
        "--idle-min",
        "0.02",
        env=env(FAKE_SCENARIO="hang", FAKE_PIDS=str(pids)),
    )
    assert result["status"] == "hang-killed", result.stdout
    assert result["partial_reply"] is True and result["reply"]
    for pid in map(int, pids.read_text().split()):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("partner", ["claude", "codex", "cursor", "opencode"])
def test_init_refuses_a_partner_that_gives_no_session_id(
    sandbox: Sandbox, fake_partners: FakePartners, partner: str
) -> None:
    result = init(sandbox, partner, environment=env(FAKE_SCENARIO="no-session"))
    assert result.code == 1 and result["code"] == "no-session-id", result.stdout
    assert "produced no session id" in result["reason"]
    assert not (sandbox.repo / ".git" / "pair" / "session.json").exists()
    assert not (sandbox.repo / ".git" / "pair" / "in-flight.json").exists()


def test_a_throttled_turn_carries_signals(sandbox: Sandbox, fake_partners: FakePartners) -> None:
    assert init(sandbox, "claude").code == 0
    result = sandbox.pair(
        "send",
        "--kind",
        "task",
        "--body-file",
        body(sandbox),
        env=env(FAKE_SCENARIO="rate-limited"),
    )
    assert result["status"] == "replied"
    # the rate_limit_event line and the stderr 429 line
    assert result["throttle_signals"]["rate_limit_lines"] == 2
    assert result["rate_limits"]["source"] == "claude rate_limit_event"
    assert result["rate_limits"]["status"] == "allowed_warning"
    assert result["rate_limits"]["resets_at"] == "2026-08-29T10:40:00Z"


def test_codex_receipts_carry_app_server_rate_limits(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    created = init(sandbox, "codex")
    assert created["partner_bin_version"] == "codex-cli 0.171.0"
    assert created["partner_bin"] == str(fake_partners.bin_dir / "codex")
    ok = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert ok["rate_limits"]["primary"] == {
        "window_minutes": 10080,
        "used_percent": 42,
        "resets_at": "2026-08-29T10:40:00Z",
    }
    refused = sandbox.pair(
        "send",
        "--kind",
        "task",
        "--body-file",
        body(sandbox),
        env=env(FAKE_CODEX_RATE_LIMITS="fail"),
    )
    assert refused["status"] == "replied"
    assert "not logged in" in refused["rate_limits"]["error"]


def test_claude_lead_inside_claude_code_is_refused(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    inside = env(CLAUDECODE="1", CLAUDE_CODE_ENTRYPOINT="cli")
    refused = sandbox.pair("init", "--partner", "claude", "--effort", "high", env=inside)
    assert refused.code == 2 and refused["code"] == "lead-is-partner"
    assert "claude" in refused["reason"]
    allowed = sandbox.pair("init", "--partner", "codex", "--effort", "high", env=inside)
    assert allowed.code == 0, allowed.stdout
    turn = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), env=inside)
    assert turn.code == 0
    assert all(call["markers"] == [] for call in fake_partners.calls("codex"))
    assert allowed["lead"] == "claude"  # detected from the environment
    assert (
        turn.document["reply"] and "[agent claude -> codex" in Path(turn["prompt_file"]).read_text()
    )


def test_codex_may_pair_with_codex_under_another_identity(
    sandbox: Sandbox, fake_partners: FakePartners, isolated_environment: Path
) -> None:
    same = sandbox.pair("init", "--partner", "codex", "--lead", "codex", "--effort", "high")
    assert same.code == 2 and same["code"] == "lead-is-partner"
    missing = sandbox.pair(
        "init", "--partner", "codex", "--lead", "codex", "--effort", "high", "--identity", "work"
    )
    assert missing.code == 2 and missing["code"] == "identity-refused"
    home = isolated_environment / ".codex-profiles" / "work"
    home.mkdir(parents=True)
    other = sandbox.pair(
        "init", "--partner", "codex", "--lead", "codex", "--effort", "high", "--identity", "work"
    )
    assert other.code == 0, other.stdout
    assert other["identity"] == "work" and other["identity_home"] == str(home)
    sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert {call["codex_home"] for call in fake_partners.calls("codex")} == {str(home)}
    wrong = sandbox.pair("init", "--partner", "claude", "--effort", "high", "--identity", "work")
    assert wrong.code in (1, 2)


@pytest.mark.parametrize(
    ("partner", "request_", "effort", "resolved", "source"),
    [
        ("codex", "latest:sol", "high", "gpt-5.6-sol", "codex app-server model/list"),
        ("codex", "latest:astra", "xhigh", "gpt-6-astra", "codex app-server model/list"),
        ("grok", "latest:grok", "high", "grok-4.11", "grok models"),
        ("cursor", "latest:kimi", "high", "kimi-k3-high", "cursor-agent --list-models"),
        ("codex", "gpt-5.5-sol", "high", "gpt-5.5-sol", "explicit"),
    ],
)
def test_latest_family_resolution(
    sandbox: Sandbox,
    fake_partners: FakePartners,
    partner: str,
    request_: str,
    effort: str,
    resolved: str,
    source: str,
) -> None:
    resolution = run_cli(
        "pair",
        "resolve",
        "--partner",
        partner,
        "--model",
        request_,
        "--effort",
        effort,
        cwd=sandbox.root,
    )
    assert resolution.code == 0, resolution.stdout
    assert resolution["model_resolved"] == resolved and resolution["model_source"] == source
    created = sandbox.pair(
        "init", "--partner", partner, "--model", request_, "--effort", effort, "--lead", "human"
    )
    assert created.code == 0, created.stdout
    assert created["model"] == request_ and created["model_resolved"] == resolved
    assert created["model_source"] == source and created["resolved_at"]
    (bootstrap,) = fake_partners.calls(BINARIES.get(partner, partner))
    assert resolved in bootstrap["argv"]


@pytest.mark.parametrize(
    ("partner", "request_", "effort", "code"),
    [
        ("codex", "latest:sol", "max", "effort-refused"),
        ("codex", "latest:nova", "high", "model-unresolved"),
        ("cursor", "latest:kimi", "max", "effort-refused"),
        ("cursor", "latest:kimi", None, "effort-required"),
        ("opencode", "latest:big", "high", "model-unresolved"),
        ("claude", "latest:haiku", "high", "model-unresolved"),
        ("codex", "latest", "high", "invalid-model"),
    ],
)
def test_unresolvable_requests_are_refused(
    sandbox: Sandbox,
    fake_partners: FakePartners,
    partner: str,
    request_: str,
    effort: str | None,
    code: str,
) -> None:
    args = ["resolve", "--partner", partner, "--model", request_]
    if effort:
        args += ["--effort", effort]
    result = run_cli("pair", *args, cwd=sandbox.root)
    assert result.code == 2 and result["code"] == code, result.stdout


def test_claude_alias_is_pinned_and_checked(sandbox: Sandbox, fake_partners: FakePartners) -> None:
    created = sandbox.pair(
        "init",
        "--partner",
        "claude",
        "--model",
        "latest:opus",
        "--effort",
        "high",
        "--lead",
        "human",
    )
    assert created.code == 0, created.stdout
    assert created["model_resolved"] == "claude-opus-5"
    sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    _, turn = fake_partners.calls("claude")
    assert turn["argv"][turn["argv"].index("--model") + 1] == "claude-opus-5"
    other = sandbox.root / "other"
    os.system(f"git -C {sandbox.repo} worktree add -q -b other {other}")
    mismatch = sandbox.pair(
        "init",
        "--partner",
        "claude",
        "--model",
        "opus",
        "--effort",
        "high",
        "--lead",
        "human",
        repo=other,
        env=env(FAKE_CLAUDE_MODEL="claude-sonnet-5"),
    )
    assert mismatch.code == 1 and mismatch["code"] == "model-mismatch", mismatch.stdout
    assert "not a opus model" in mismatch["reason"]


def test_missing_partner_binary(sandbox: Sandbox, fake_partners: FakePartners) -> None:
    result = sandbox.pair(
        "init",
        "--partner",
        "codex",
        "--effort",
        "high",
        env=env(UNITMGR_CODEX_BIN="/nonexistent/codex"),
    )
    assert result.code == 2 and result["code"] == "partner-not-installed"
    assert "UNITMGR_CODEX_BIN" in result["reason"]


def test_binary_override(sandbox: Sandbox, fake_partners: FakePartners, tmp_path: Path) -> None:
    renamed = tmp_path / "my-claude"
    renamed.write_text((fake_partners.bin_dir / "claude").read_text())
    renamed.chmod(0o755)
    created = sandbox.pair(
        "init",
        "--partner",
        "claude",
        "--effort",
        "high",
        "--lead",
        "human",
        env=env(UNITMGR_CLAUDE_BIN=str(renamed)),
    )
    assert created.code == 0, created.stdout
    turn = sandbox.pair(
        "send",
        "--kind",
        "task",
        "--body-file",
        body(sandbox),
        env=env(UNITMGR_CLAUDE_BIN=str(renamed)),
    )
    assert turn["command"][0] == str(renamed)


def test_heavy_slot_pauses_the_budgets(sandbox: Sandbox, fake_partners: FakePartners) -> None:
    assert init(sandbox, "codex").code == 0
    gate = sandbox.root / "heavy-gate"
    environment = env(
        FAKE_SCENARIO="heavy", FAKE_HEAVY_GATE=str(gate), UNITMGR_HEAVY_PROBE_SECONDS="0.1"
    )
    running = sandbox.pair(
        "send",
        "--kind",
        "task",
        "--body-file",
        body(sandbox),
        "--idle-min",
        "0.03",
        "--background",
        env=environment,
    )
    assert running.code == 0, running.stdout
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        in_flight = sandbox.pair("status")["in_flight"]
        if in_flight and (in_flight.get("heavy_queue") or {}).get("queued"):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the queued heavy job never showed in the in-flight marker")
    assert in_flight["heavy_queue"]["job"]["command"] == "sh -c echo heavy job ran"
    time.sleep(3.5)  # well past the 1.8 s idle budget: a queued job must not count as idle
    gate.write_text("go")
    receipt = sandbox.pair("wait", "--timeout-min", "1")
    assert receipt["status"] == "replied", receipt.stdout
    assert receipt["heavy_queue"]["episodes"] == 1 and receipt["heavy_queue"]["seconds"] >= 3


def test_unit_create_with_a_codex_family_records_the_resolved_model(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    created = sandbox.create(
        "u1",
        lead="claude",
        partner="codex",
        model="latest:sol",
        effort="high",
    )
    assert created.code == 0, created.stdout + created.stderr
    pair = created["unit"]["pair"]
    assert pair["model_resolved"] == "gpt-5.6-sol"
    assert pair["model_source"] == "codex app-server model/list" and pair["resolved_at"]
    assert created["unit"]["staffing"]["current"]["model"] == "latest:sol"
    sandbox.wait_turn("u1")
    summary = sandbox.unit("status", "--all")["units"][0]
    assert summary["partner"] == "codex" and summary["identity"] == "default"
    assert summary["pair"]["latest_receipt"]["rate_limits"]["primary"]["used_percent"] == 42


def test_throttle_signals_reach_unit_status_all(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    created = sandbox.unit(
        *sandbox.create_args("u1", lead="codex", partner="claude", model=None, effort="high"),
        env=env(FAKE_SCENARIO="rate-limited"),
    )
    assert created.code == 0, created.stdout + created.stderr
    sandbox.wait_turn("u1")
    receipt = sandbox.unit("status", "--all")["units"][0]["pair"]["latest_receipt"]
    assert receipt["throttle_signals"]["rate_limit_lines"] >= 1
    assert receipt["rate_limits"]["rate_limit_type"] == "five_hour"


def test_unit_create_refuses_a_claude_partner_inside_claude_code(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    before = sandbox.snapshot()
    refused = sandbox.unit(
        *sandbox.create_args("u1", lead="human", partner="claude", model=None, effort="high"),
        env=env(CLAUDECODE="1"),
    )
    assert refused.code == 2 and refused["code"] == "lead-is-partner"
    assert sandbox.snapshot() == before


def test_unit_create_refuses_an_effort_the_catalog_lacks(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    before = sandbox.snapshot()
    refused = sandbox.create("u1", lead="claude", partner="codex", model="latest:sol", effort="max")
    assert refused.code == 2 and refused["code"] == "effort-refused", refused.stdout
    assert sandbox.snapshot() == before


def test_a_create_killed_during_the_bootstrap_resumes(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    import subprocess

    pids = sandbox.root / "pids"
    args = sandbox.create_args("u1", lead="codex", partner="claude", model=None, effort="high")
    hanging = subprocess.Popen(
        ["unit", *args, "--repo", str(sandbox.repo)],
        cwd=sandbox.root,
        env=env(FAKE_SCENARIO="hang", FAKE_PIDS=str(pids)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = sandbox.registry / "units" / "u1.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if record.exists() and '"child"' in record.read_text() and pids.exists():
            break
        time.sleep(0.02)
    else:
        pytest.fail("the bootstrap never started")
    hanging.kill()
    hanging.wait()
    bootstrap_pid = int(pids.read_text().split()[0])
    assert psutil.pid_exists(bootstrap_pid)  # the partner outlives the killed lead
    status = sandbox.pair("status", repo=sandbox.worktree("u1"))
    assert status.code == 1  # no session yet: the bootstrap never finished
    resumed = sandbox.unit(*args)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert resumed["resumed_from"] == "initializing-pair"
    assert resumed["unit"]["pair"]["sid"] == "claude-session-1"
    gone = (
        not psutil.pid_exists(bootstrap_pid) or psutil.Process(bootstrap_pid).status() == "zombie"
    )
    assert gone, "the journaled bootstrap must be killed before the step runs again"
