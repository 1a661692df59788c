"""The signed runner choice (SPEC 4.3): what a pair session may name, and what the lead trusts.

In-process: the value type, the MAC that binds a choice to its pair's state dir, and the
address rule (a non-loopback Ray address needs Ray's token auth). Nothing here needs Ray.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pair.errors import StateError, UsageError
from pair.runners import RunnerChoice, session_choice
from pair.runners.choice import (
    is_loopback,
    refuse_unauthenticated,
    sign_choice,
    verified_choice,
)
from tests import ray_cluster
from tests.conftest import Sandbox
from tests.test_pair import init_script


def test_a_signed_choice_verifies_only_where_and_as_the_lead_stored_it(sandbox: Sandbox) -> None:
    session = init_script(sandbox, "cat")
    state_dir = Path(session["state_dir"])
    choice = RunnerChoice("ray", "n2", "127.0.0.1:6379")
    stored = sign_choice(state_dir, choice)
    assert stored is not None and verified_choice(state_dir, stored) == choice
    assert sign_choice(state_dir, RunnerChoice()) is None  # local: nothing to trust
    assert verified_choice(state_dir, None) == RunnerChoice()
    forged = [
        {**stored, "address": "evil.example:6379"},  # the value changed under its MAC
        {key: value for key, value in stored.items() if key != "signature"},  # unsigned
        {**stored, "signature": {"key": stored["signature"]["key"], "mac": "hmac-sha256:00"}},
        "ray",
    ]
    for value in forged:
        with pytest.raises(StateError) as refused:
            verified_choice(state_dir, value)
        assert refused.value.code == "runner-untrusted"
    # Moved to another pair's state dir, the same MAC proves nothing there.
    other = sandbox.root / "other" / ".git" / "pair"
    other.mkdir(parents=True)
    with pytest.raises(StateError):
        verified_choice(other, stored)


def test_the_session_names_the_runner_its_turns_use(sandbox: Sandbox) -> None:
    ray_cluster.ray_or_skip()  # `pair init --runner ray` refuses without Ray
    session = init_script(sandbox, "cat", None, "--runner", "ray", "--node", "n2")
    state_dir = Path(session["state_dir"])
    assert session_choice(state_dir) == RunnerChoice("ray", "n2", None)
    # An executor rewrites it: refused with the command that lets the lead choose again.
    session_file = state_dir / "session.json"
    data = json.loads(session_file.read_text())
    data["runner"]["node"] = "n3"
    session_file.write_text(json.dumps(data))
    with pytest.raises(StateError) as refused:
        session_choice(state_dir)
    assert refused.value.code == "runner-untrusted"
    assert refused.value.next_step is not None and "--runner ray" in refused.value.next_step
    # The lead chooses again (a resumed init): signed afresh.
    init_script(sandbox, "cat", None, "--runner", "ray", "--node", "n3")
    assert session_choice(state_dir) == RunnerChoice("ray", "n3", None)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        (None, True),
        ("auto", True),
        ("127.0.0.1:6379", True),
        ("localhost:6379", True),
        ("ray://127.0.0.1:10001", True),
        ("[::1]:6379", True),
        ("10.0.0.5:6379", False),
        ("ray://head.example:10001", False),
        ("127.0.0.1.evil.example:6379", False),
    ],
)
def test_which_addresses_are_this_machine(address: str | None, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_a_remote_address_needs_rays_token_auth(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    remote = RunnerChoice("ray", None, "10.0.0.5:6379")
    with pytest.raises(UsageError) as refused:
        refuse_unauthenticated(remote)
    assert refused.value.code == "ray-auth-required"
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    with pytest.raises(UsageError):
        refuse_unauthenticated(remote)  # the mode alone is not a token
    token = tmp_path / "token"
    token.write_text("0" * 32)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    refuse_unauthenticated(remote)
    refuse_unauthenticated(RunnerChoice("ray", None, "127.0.0.1:6379"))


@pytest.mark.parametrize(
    ("kind", "node", "address", "code"),
    [
        ("mainframe", None, None, "unknown-runner"),
        ("ray", "a node", None, "invalid-node"),
        ("ray", None, "a b", "invalid-ray-address"),
        ("local", "n2", None, "invalid-node"),
    ],
)
def test_a_bad_choice_is_refused(
    kind: str, node: str | None, address: str | None, code: str
) -> None:
    with pytest.raises(UsageError) as refused:
        RunnerChoice(kind, node, address)
    assert refused.value.code == code
