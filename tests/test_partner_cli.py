"""Partner preflight and the root rule (SPEC 4.1), against the fake partner CLIs.

Preflight: the binary answers `--version` (recorded for every partner), and its `--help` names
every flag the adapter passes, else `partner-cli-unsupported` at init — never a failed turn.
Root: a writable claude session as root without `IS_SANDBOX=1` is refused before anything runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pair.partners import adapter_for
from tests.conftest import FakePartners, Sandbox


def env(**changes: str) -> dict[str, str]:
    return {**os.environ, **changes}


def without_sandbox_flag() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "IS_SANDBOX"}


def probes(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line)["argv"] for line in log.read_text().splitlines()]


@pytest.mark.parametrize(
    ("partner", "version"),
    [
        ("claude", "2.1.197 (Claude Code)"),
        ("codex", "codex-cli 0.171.0"),
        ("opencode", "1.18.33"),
        ("grok", "grok 1.0.5-fake"),
    ],
)
def test_init_records_every_partners_version(
    sandbox: Sandbox, fake_partners: FakePartners, partner: str, version: str
) -> None:
    created = sandbox.pair("init", "--partner", partner, "--lead", "human")
    assert created.code == 0, created.stdout
    assert created["partner_bin_version"] == version


def test_a_cli_whose_help_lacks_the_flags_is_refused_at_init(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    # The installable grok CLI takes none of the adapter's flags: a help that names none of them.
    refused = sandbox.pair(
        "init", "--partner", "grok", "--lead", "human", env=env(FAKE_HELP="bare")
    )
    assert refused.code == 2, refused.stdout
    assert refused["code"] == "partner-cli-unsupported"
    detail = refused["detail"]
    assert {"--prompt-file", "--output-format", "--session-id", "--resume"} <= set(
        detail["missing_flags"]
    )
    assert detail["version"] == "grok 1.0.5-fake"
    assert detail["verified_versions"] == []
    assert "--prompt-file" in refused["reason"] and "grok 1.0.5-fake" in refused["reason"]
    assert refused["next"]
    assert not fake_partners.calls("grok"), "no turn may run"
    assert not (sandbox.repo / ".git" / "pair" / "session.json").exists()


def test_the_real_help_texts_name_every_flag_the_adapters_pass(
    sandbox: Sandbox, fake_partners: FakePartners, tmp_path: Path
) -> None:
    # The fakes print the help recorded from claude 2.1.197, codex 0.171.0 and opencode 1.18.33.
    log = tmp_path / "probes.jsonl"
    for partner in ("claude", "codex", "opencode"):
        created = sandbox.pair(
            "init", "--partner", partner, "--lead", "human", env=env(FAKE_PROBE_LOG=str(log))
        )
        assert created.code == 0, created.stdout
        assert sandbox.pair("end").code == 0
    seen = probes(log)
    assert ["exec", "--help"] in seen and ["exec", "resume", "--help"] in seen
    assert ["run", "--help"] in seen and ["--help"] in seen


def test_preflight_is_cached_per_binary_and_redone_when_it_changes(
    sandbox: Sandbox, fake_partners: FakePartners, tmp_path: Path
) -> None:
    log = tmp_path / "probes.jsonl"
    watched = env(FAKE_PROBE_LOG=str(log))
    assert sandbox.pair("init", "--partner", "codex", "--lead", "human", env=watched).code == 0
    first = len(probes(log))
    assert first >= 3  # --version, exec --help, exec resume --help
    body = tmp_path / "body.md"
    body.write_text("go on\n")
    sent = sandbox.pair("send", "--kind", "question", "--body-file", str(body), env=watched)
    assert sent["status"] == "replied", sent.stdout
    assert len(probes(log)) == first, "an unchanged binary is not probed again"
    # The binary is replaced by a build whose help no longer names the flags: the next send
    # refuses before any turn starts.
    binary = fake_partners.bin_dir / "codex"
    binary.write_text(binary.read_text() + "\n# a new build\n")
    turns = len(fake_partners.calls("codex"))
    refused = sandbox.pair(
        "send", "--kind", "question", "--body-file", str(body), env=env(FAKE_HELP="bare")
    )
    assert refused.code == 2 and refused["code"] == "partner-cli-unsupported", refused.stdout
    assert len(fake_partners.calls("codex")) == turns
    assert sandbox.pair("status")["seq"] == 1


def test_flags_are_read_from_the_adapters_own_command_lines() -> None:
    codex = adapter_for("codex").flags_by_help()
    assert set(codex) == {("exec", "--help"), ("exec", "resume", "--help")}
    # resume takes -m and -c model_reasoning_effort too (SPEC 4.1: model and effort every turn)
    assert {"-m", "-c", "--json", "-o"} <= set(codex[("exec", "resume", "--help")])
    assert "-s" not in codex[("exec", "resume", "--help")]
    claude = adapter_for("claude").flags_by_help()[("--help",)]
    assert {"--resume", "--model", "--effort", "--permission-mode", "--no-chrome"} <= set(claude)


def test_every_turn_carries_the_sessions_model_and_effort(
    sandbox: Sandbox, fake_partners: FakePartners, tmp_path: Path
) -> None:
    body = tmp_path / "body.md"
    body.write_text("go on\n")
    for partner, model, effort in (
        ("codex", "gpt-6-astra", "high"),
        ("claude", "claude-sonnet-4-6", "low"),
        ("opencode", "anthropic/claude-sonnet-4-6", "low"),
    ):
        created = sandbox.pair(
            "init", "--partner", partner, "--lead", "human", "--model", model, "--effort", effort
        )
        assert created.code == 0, created.stdout
        sent = sandbox.pair("send", "--kind", "question", "--body-file", str(body))
        assert sent["status"] == "replied", sent.stdout
        assert sandbox.pair("end").code == 0
        bootstrap, resumed = fake_partners.calls(partner)
        if partner == "codex":
            # codex-cli 0.171 `exec resume` otherwise runs config.toml's model, else its default
            assert ["-m", model] == resumed["argv"][5:7]
            assert f'model_reasoning_effort="{effort}"' in resumed["argv"]
            assert "--disable" in resumed["argv"] and "shell_snapshot" in resumed["argv"]
        elif partner == "claude":
            assert "--model" in resumed["argv"] and "--effort" in resumed["argv"]
            assert resumed["argv"][resumed["argv"].index("--effort") + 1] == effort
        else:  # opencode keeps its session's model; the effort (variant) goes every turn
            assert "-m" in bootstrap["argv"] and "-m" not in resumed["argv"]
            assert resumed["argv"][resumed["argv"].index("--variant") + 1] == effort


def test_an_opencode_read_only_turn_denies_the_writing_tools(
    sandbox: Sandbox, fake_partners: FakePartners, tmp_path: Path
) -> None:
    # opencode 1.18.33's plan agent still ran a shell command that wrote a file (tests/real).
    body = tmp_path / "body.md"
    body.write_text("go on\n")
    assert sandbox.pair("init", "--partner", "opencode", "--lead", "human").code == 0
    for lease in ("--read-only", "--write"):
        sent = sandbox.pair("send", "--kind", "task", "--body-file", str(body), lease)
        assert sent["status"] == "replied", sent.stdout
    bootstrap, read_only, writable = fake_partners.calls("opencode")
    for turn in (bootstrap, read_only):
        assert json.loads(turn["opencode_permission"]) == {
            "edit": "deny",
            "bash": "deny",
            "webfetch": "deny",
        }
    assert writable["opencode_permission"] is None


# -- root ------------------------------------------------------------------------------------


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the root refusal needs uid 0")


@needs_root
def test_a_writable_claude_pair_as_root_is_refused_without_is_sandbox(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    bare = without_sandbox_flag()
    refused = sandbox.pair(
        "init", "--partner", "claude", "--lead", "human", "--role", "executor", env=bare
    )
    assert refused.code == 2, refused.stdout
    assert refused["code"] == "partner-refuses-root"
    assert refused["next"].startswith("IS_SANDBOX=1 pair init ") and "non-root" in refused["reason"]
    assert not fake_partners.calls("claude")
    assert not (sandbox.repo / ".git" / "pair" / "session.json").exists()
    # A peer (read-only by default) is not refused; with IS_SANDBOX=1 an executor is not either.
    assert sandbox.pair("init", "--partner", "claude", "--lead", "human", env=bare).code == 0


@needs_root
def test_unit_create_and_restaff_to_claude_as_root_are_refused(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    bare = without_sandbox_flag()
    before = sandbox.snapshot()
    refused = sandbox.unit(
        *sandbox.create_args("u1", partner="claude", model=None, effort="high"), env=bare
    )
    assert refused.code == 2 and refused["code"] == "partner-refuses-root", refused.stdout
    assert sandbox.snapshot() == before
    created = sandbox.create("u1")  # a script executor
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    restaff = [
        "restaff",
        "--unit",
        "u1",
        "--lead",
        "human",
        "--partner",
        "claude",
        "--reason",
        "stronger model",
        "--effort",
        "high",
    ]
    refused = sandbox.unit(*restaff, env=bare)
    assert refused.code == 2 and refused["code"] == "partner-refuses-root", refused.stdout
    assert sandbox.record("u1")["staffing"]["current"]["partner"] == "script"
    assert sandbox.unit(*restaff).code == 0  # IS_SANDBOX=1 (the suite's environment)
