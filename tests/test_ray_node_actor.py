"""The unit's actor class on its own (`pair.runners.ray_node.UnitActor`, SPEC 4.3), no Ray.

`UnitActor` is a plain class Ray wraps; here it runs in this process with a real script
partner and a real git copy under a temp node root: a start whose base the copy lacks asks for
it (`need_base`, naming what it holds) and takes nothing; a bundle made without those commits
lands it; a poll answers as soon as there is news — bytes, then the result — not after its wait.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from pair.runners.ray_node import UnitActor
from tests.conftest import Sandbox, git

# Turn tokens no other test has: a turn's processes are found (and reaped) by their token, and
# this file's tests run beside each other in other workers.
TOKENS = {n: f"t{n}-{secrets.token_hex(8)}" for n in (1, 2, 3)}


def _spec(base: str, script: str) -> dict[str, Any]:
    return {
        "partner": "script",
        "sid": "script-test",
        "kind": "task",
        "write": True,
        "model": script,
        "effort": None,
        "prompt": "header\n\nbody\n",
        "idle_seconds": 60,
        "total_seconds": 60,
        "base_commit": base,
        "environment": None,
        "unit": "u1",
    }


def _bundle(repo: Path, out: Path, base: str, *known: str) -> bytes:
    git(repo, "update-ref", "refs/unitmgr/base", base)
    git(repo, "bundle", "create", str(out), "refs/unitmgr/base", *(f"^{sha}" for sha in known))
    return out.read_bytes()


def _result(actor: UnitActor, epoch: int) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = actor.poll(epoch, 0, wait=1.0)
        if "result" in answer:
            return answer
    raise AssertionError("the turn did not end")


def test_a_cold_copy_asks_for_the_base_and_a_delta_refreshes_a_warm_one(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNITMGR_NODE_ROOT", str(sandbox.root / "nodes"))
    repo = sandbox.repo
    first = git(repo, "rev-parse", "HEAD").strip()
    actor = UnitActor("unitmgr/r/u1", "unitmgr-executor")
    assert actor.start(
        1, TOKENS[1], _spec(first, "cat >/dev/null; echo one"), None, False, "other"
    ) == {"moved": "unitmgr-executor"}
    asked = actor.start(1, TOKENS[1], _spec(first, "cat >/dev/null; echo one"), None)
    assert asked == {"need_base": True, "holds": []}
    assert actor.epoch == 0  # nothing taken: the same epoch starts once the base came
    whole = _bundle(repo, sandbox.root / "whole.bundle", first)
    assert actor.start(1, TOKENS[1], _spec(first, "cat >/dev/null; echo one"), whole)["started"]
    assert _result(actor, 1)["result"]["reply"] == "one"

    # Warm: the copy holds the base, so no bundle is asked for.
    assert actor.start(2, TOKENS[2], _spec(first, "cat >/dev/null; echo two"), None)["started"]
    assert _result(actor, 2)["result"]["reply"] == "two"

    # The lead's branch moved: the copy names what it holds; a bundle without it is enough.
    (repo / "mate.txt").write_text("teammate\n")
    git(repo, "add", "mate.txt")
    git(repo, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-qm", "mate")
    moved = git(repo, "rev-parse", "HEAD").strip()
    asked = actor.start(3, TOKENS[3], _spec(moved, "cat >/dev/null; cat mate.txt"), None)
    assert asked["need_base"] and first in asked["holds"], asked
    delta = _bundle(repo, sandbox.root / "delta.bundle", moved, *asked["holds"])
    assert len(delta) < len(_bundle(repo, sandbox.root / "again.bundle", moved))
    assert actor.start(3, TOKENS[3], _spec(moved, "cat >/dev/null; cat mate.txt"), delta)["started"]
    assert _result(actor, 3)["result"]["reply"] == "teammate"


def test_a_poll_answers_with_news_at_once_and_waits_only_without(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNITMGR_NODE_ROOT", str(sandbox.root / "nodes"))
    gate = sandbox.root / "gate"
    base = git(sandbox.repo, "rev-parse", "HEAD").strip()
    actor = UnitActor("unitmgr/r/u2", "unitmgr-executor")
    script = f"cat >/dev/null; echo early; while [ ! -f {gate} ]; do sleep 0.02; done; echo late"
    bundle = _bundle(sandbox.repo, sandbox.root / "b.bundle", base)
    assert actor.start(1, TOKENS[1], _spec(base, script), bundle)["started"]
    deadline = time.monotonic() + 30
    while b"early" not in (seen := actor.poll(1, 0, wait=1.0)["data"]):
        assert time.monotonic() < deadline
    offset = len(seen)
    began = time.monotonic()
    quiet = actor.poll(1, offset, wait=0.3)  # nothing new: held back for its wait, no longer
    assert quiet["data"] == b"" and "result" not in quiet
    assert 0.25 <= time.monotonic() - began < 1.0
    gate.write_text("open\n")
    ended = actor.poll(1, offset, wait=1.0)
    while "result" not in ended:  # the bytes first, then the end
        offset += len(ended["data"])
        ended = actor.poll(1, offset, wait=1.0)
    assert ended["result"]["reply"] == "early\nlate", ended
    began = time.monotonic()
    again = actor.poll(1, offset, wait=1.0)  # the turn is over: that is news, answered at once
    assert "result" in again and time.monotonic() - began < 0.5
