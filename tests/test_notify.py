"""Notifications (SPEC 3.15): the `command` and `url` sinks, the events `unit` and the pair
supervisor deliver, redaction, bounds, and failed deliveries that never fail a command.

Real parts: a local HTTP receiver on 127.0.0.1 (pytest-httpserver), a `command` sink writing to a
file, the real `unit` CLI with script partners."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from registry import notify
from tests.conftest import Sandbox, gone, wait_until

SECRET = "notify-secret-value-1234"


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def received(httpserver: Any) -> list[dict[str, Any]]:
    return [
        json.loads(request.get_data()) for request, _ in httpserver.log if request.path == "/hook"
    ]


def appending_to(sink_file: Path) -> str:
    """A sink command that appends each event as one line with one write: sinks of several
    units run at once, and a `cat >>` then `echo >>` of two of them can interleave."""
    return f't=$(mktemp); cat > "$t"; echo >> "$t"; cat "$t" >> {sink_file}; rm -f "$t"'


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def failures(path: Path) -> list[dict[str, Any]]:
    return [line for line in lines(path) if line.get("step") == "notify-failed"]


def target(tmp_path: Path, **settings: Any) -> notify.Target:
    return notify.Target(
        notify.NotifySettings(**settings), "u1", str(tmp_path), tmp_path / "events.jsonl"
    )


def write_config(sandbox: Sandbox, **notify_settings: Any) -> None:
    body = "".join(f"{key} = {json.dumps(value)}\n" for key, value in notify_settings.items())
    (sandbox.repo / ".unitmgr.toml").write_text(f"[notify]\n{body}")
    if "command" in notify_settings:  # the lead's own command, approved as a lead would (SPEC 8)
        approved = sandbox.unit("config", "--approve")
        assert approved.code == 0, approved.stdout


def test_both_sinks_get_the_redacted_bounded_event(
    tmp_path: Path, httpserver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTIFY_TEST_API_KEY", SECRET)
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    sink_file = tmp_path / "sink.jsonl"
    command = appending_to(sink_file)
    to = target(tmp_path, command=command, url=httpserver.url_for("/hook"))
    reply = f"done, key {SECRET}\n" + "x" * 100_000
    document = notify.payload(
        to, "turn-ended", receipt=notify.receipt_summary({"seq": 1, "reply": reply, "extra": 1})
    )
    assert notify.deliver(to, document) == []
    [posted] = received(httpserver)
    [request, _] = httpserver.log[0]
    assert request.headers["Content-Type"] == "application/json"
    [written] = lines(sink_file)
    for got in (posted, written):
        assert got["event"] == "turn-ended" and got["unit_id"] == "u1"
        assert got["repository"] == str(tmp_path) and got["at"].endswith("Z")
        assert got["receipt"]["reply"].startswith("done, key ***\n") and SECRET not in str(got)
        assert got["receipt"]["reply_trimmed"] is True and "extra" not in got["receipt"]
        assert len(json.dumps(got).encode()) <= notify.MAX_PAYLOAD_BYTES
    assert not failures(tmp_path / "events.jsonl")
    # Every string of a huge document is cut until the whole fits the bound.
    huge = notify.payload(to, "held", reason="y" * 200_000, why=["z" * 50_000] * 10)
    assert len(notify.encode(huge)) <= notify.MAX_PAYLOAD_BYTES and huge["event"] == "held"


def test_failed_deliveries_append_notify_failed_and_a_hang_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNITMGR_NOTIFY_TIMEOUT", "0.5")
    monkeypatch.setenv("NOTIFY_TEST_API_KEY", SECRET)
    events = tmp_path / "events.jsonl"
    pid_file = tmp_path / "hung.pid"
    failing = target(tmp_path, command=f"echo broke {SECRET} >&2; exit 3", url=closed_port_url())
    document = notify.payload(failing, "created")
    got = notify.deliver(failing, document)
    assert [(line["sink"], line["event"]) for line in got] == [
        ("command", "created"),
        ("url", "created"),
    ]
    assert failures(events) == got
    assert got[0]["reason"] == "the command exited 3: broke ***"
    assert "POST failed" in got[1]["reason"] and "127.0.0.1" not in got[1]["reason"]
    # A command that hangs (and its child) is killed as a group after the timeout.
    hung = target(tmp_path, command=f"sleep 60 & echo $! > {pid_file}; wait")
    started = time.monotonic()
    [timed_out] = notify.deliver(hung, notify.payload(hung, "attention"))
    assert time.monotonic() - started < 5  # the 0.5 s timeout, with room on a busy machine
    assert timed_out["sink"] == "command" and "timeout" in timed_out["reason"]
    wait_until(lambda: gone(int(pid_file.read_text())))
    assert len(failures(events)) == 3
    # Only the configured events: a sink that does not want it is never run.
    picky = target(tmp_path, command=f"touch {tmp_path / 'ran'}", events=("merged",))
    assert not picky.settings.wants("created") and picky.settings.wants("merged")
    assert not target(tmp_path).settings.wants("created")  # no sink: nothing to send


def test_a_batch_notifies_turn_ends_attention_and_lifecycle(
    sandbox: Sandbox, httpserver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTIFY_TEST_API_KEY", SECRET)
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    sink_file = sandbox.root / "sink.jsonl"
    write_config(
        sandbox,
        command=appending_to(sink_file),
        url=httpserver.url_for("/hook"),
        events=["attention", "turn-ended", "created", "dismantled"],
    )
    replying = sandbox.create("u1", model='cat >/dev/null; echo "ready $NOTIFY_TEST_API_KEY"')
    assert replying.code == 0, replying.stdout
    failing = sandbox.create("u2", model="cat >/dev/null; exit 3")
    assert failing.code in (0, 1), failing.stdout  # exit 1 when its turn had already failed
    # Both units' turns end: the supervisor tells the sinks; `unit` told them of each create.
    expected = {
        ("u1", "created"),
        ("u2", "created"),
        ("u1", "turn-ended"),
        ("u1", "attention"),
        ("u2", "turn-ended"),
        ("u2", "attention"),
    }

    def seen(documents: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(document["unit_id"], document["event"]) for document in documents}

    def both_sinks_saw_all() -> bool:
        return seen(received(httpserver)) >= expected and seen(lines(sink_file)) >= expected

    wait_until(both_sinks_saw_all)
    # One attention function (SPEC 3.4): the notification says what `status --all` says.
    looked = {
        unit["unit_id"]: unit["attention"] for unit in sandbox.unit("status", "--all")["units"]
    }
    for documents in (received(httpserver), lines(sink_file)):
        by = {(d["unit_id"], d["event"]): d for d in documents}
        assert by[("u1", "attention")]["attention"]["state"] == "waiting-on-lead"
        assert by[("u1", "attention")]["attention"]["why"] == "#1 task replied: ready ***"
        if "u1" in looked and looked["u1"]["state"] == "waiting-on-lead":
            assert by[("u1", "attention")]["attention"] == looked["u1"]
        assert by[("u1", "turn-ended")]["receipt"]["status"] == "replied"
        assert by[("u1", "turn-ended")]["receipt"]["reply"] == "ready ***"
        assert by[("u2", "attention")]["attention"]["state"] == "failed"
        assert by[("u2", "turn-ended")]["receipt"]["status"] == "failed"
        assert all(d["repository"] == str(sandbox.repo) for d in documents)
        assert SECRET not in json.dumps(documents)
    dismantled = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert dismantled.code == 0, dismantled.stdout
    wait_until(lambda: ("u1", "dismantled") in seen(received(httpserver)))
    wait_until(lambda: ("u1", "dismantled") in seen(lines(sink_file)))
    assert not failures(sandbox.registry / "events.jsonl")


def test_a_quiet_turn_is_announced_stuck_once_by_its_supervisor(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 3.15 `attention` on entering `stuck`: the supervisor sees the partner go quiet for
    the unit's threshold (here 0.3 s) and tells the sinks once for that quiet stretch, before
    the turn's end; a unit whose events leave out `attention` gets no alarm at all."""
    monkeypatch.setenv("UNITMGR_STUCK_MINUTES", "0.005")
    sink_file = sandbox.root / "sink.jsonl"
    write_config(
        sandbox,
        command=appending_to(sink_file),
        events=["attention", "turn-ended"],
    )
    # One quiet stretch from the start to `done`, however slowly a busy machine starts the
    # partner: an early line would split it in two, and a slow start ring once before it.
    quiet = "cat >/dev/null; sleep 1.5; echo done"
    created = sandbox.create("u1", model=quiet)
    assert created.code == 0, created.stdout

    def events_of(unit_id: str) -> list[tuple[str, str | None]]:
        return [
            (line["event"], (line.get("attention") or {}).get("state"))
            for line in lines(sink_file)
            if line["unit_id"] == unit_id
        ]

    wait_until(lambda: ("attention", "waiting-on-lead") in events_of("u1"), timeout=60)
    assert events_of("u1") == [
        ("attention", "stuck"),  # five thresholds of silence, one announcement
        ("turn-ended", None),
        ("attention", "waiting-on-lead"),
    ]
    stuck = next(line for line in lines(sink_file) if line["attention"]["state"] == "stuck")
    assert re.fullmatch(r"#\d+ task no output for \ds", stuck["attention"]["why"]), stuck
    assert stuck["attention"]["since"] and stuck["repository"] == str(sandbox.repo)

    write_config(sandbox, command=appending_to(sink_file), events=["turn-ended"])
    other = sandbox.create("u2", model=quiet)
    assert other.code == 0, other.stdout
    wait_until(lambda: ("turn-ended", None) in events_of("u2"), timeout=60)
    assert events_of("u2") == [("turn-ended", None)]
    assert not failures(sandbox.registry / "events.jsonl")


def test_failing_sinks_never_fail_or_delay_the_command(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNITMGR_NOTIFY_TIMEOUT", "2")
    write_config(sandbox, command="sleep 30", url=closed_port_url(), events=["created"])
    created = sandbox.create("u1", model="cat >/dev/null; echo done")
    assert created.code == 0, created.stdout
    events = sandbox.registry / "events.jsonl"
    # A delivery in the command would have appended its failures before the JSON came out: the
    # hanging sink is still being waited for, by the detached child, not by `unit`.
    assert failures(events) == []
    wait_until(lambda: len(failures(events)) == 2)
    got = failures(events)
    assert {(line["sink"], line["event"], line["unit"]) for line in got} == {
        ("command", "created", "u1"),
        ("url", "created", "u1"),
    }
    # `turn-ended` is not configured: the supervisor sent nothing, so nothing else failed.
    sandbox.wait_turn("u1")
    assert len(failures(events)) == 2


def test_without_a_config_nothing_is_imported_or_started(tmp_path: Path) -> None:
    probe = (
        "import sys; from unitmgr import notify; from unitmgr.workspace import Workspace; "
        f"w = Workspace.open({str(tmp_path / 'repo')!r}); "
        "notify.announce(w, 'created', 'u1'); "
        f"print(notify.session_target(w, 'u1', {str(tmp_path / 'repo')!r}), "
        "'registry.notify' in sys.modules)"
    )
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=os.environ
    )
    assert completed.stdout.split() == ["None", "False"]


def test_unit_tells_held_merged_and_create_failed(
    sandbox: Sandbox, github: Any, httpserver: Any
) -> None:
    from tests.test_github_gates import HEAD, ready_unit

    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    write_config(sandbox, url=httpserver.url_for("/hook"))  # every event, by default
    number = ready_unit(sandbox, github)
    github.reviews[number] = []
    held = sandbox.unit("merge", "--unit", "u1", "--head", HEAD)
    assert held.code == 1 and held["code"] == "held", held.stdout
    [told] = wait_until(lambda: received(httpserver))
    assert told["event"] == "held" and told["unit_id"] == "u1"
    assert told["reason"] == held["reason"] and told["url"].endswith(f"/pull/{number}")
    github.review(number, "alice", "APPROVED", HEAD, association="MEMBER")
    merged = sandbox.unit("merge", "--unit", "u1", "--head", HEAD)
    assert merged.code == 0 and merged["status"] == "merged", merged.stdout
    told = wait_until(lambda: received(httpserver)[1:])[0]
    assert (told["event"], told["url"]) == ("merged", merged["pr"]["url"])
    failed = sandbox.create("u2", setup="echo broken; exit 4")
    assert failed.code == 1, failed.stdout
    told = wait_until(lambda: received(httpserver)[2:])[0]
    assert (told["event"], told["unit_id"], told["code"]) == ("create-failed", "u2", failed["code"])
    assert told["reason"] == failed["reason"]
    assert len(received(httpserver)) == 3  # the rolled-back create never reached `created`


def test_unit_tells_restaff_failed_and_dismantle_failed(
    sandbox: Sandbox, fake_partners: Any, httpserver: Any
) -> None:
    """The two failure events no other test provokes through the CLI: a restaff whose new
    partner gives no session id, a dismantle whose origin is gone. Each carries the failed
    command's code and reason, and the next step the lead was given."""
    from tests.test_create import PUSHING_MODEL
    from tests.test_steering import env, restaff_args, working_unit

    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    write_config(
        sandbox,
        url=httpserver.url_for("/hook"),
        events=["restaff-failed", "dismantle-failed"],
    )

    def told(event: str) -> dict[str, Any]:
        found = wait_until(lambda: [d for d in received(httpserver) if d["event"] == event])
        assert len(found) == 1, found
        return found[0]

    working_unit(sandbox, "u1")
    restaff = sandbox.unit(*restaff_args(), env=env(FAKE_SCENARIO="no-session"))
    assert restaff.code == 1 and restaff["code"] == "no-session-id", restaff.stdout
    document = told("restaff-failed")
    assert (document["unit_id"], document["code"]) == ("u1", "no-session-id")
    assert document["reason"] == restaff["reason"] and document["next"] == restaff["next"]

    working_unit(sandbox, "u2", model=PUSHING_MODEL)
    assert sandbox.origin is not None
    sandbox.origin.rename(sandbox.origin.with_name("origin-away.git"))  # the push must fail
    dismantle = sandbox.unit("dismantle", "--unit", "u2", "--force", "u2")
    assert dismantle.code == 1 and dismantle["detail"]["step"] == "remote-branch"
    document = told("dismantle-failed")
    assert (document["unit_id"], document["code"]) == ("u2", dismantle["code"])
    assert document["reason"] == dismantle["reason"]
    assert {d["event"] for d in received(httpserver)} == {"restaff-failed", "dismantle-failed"}
