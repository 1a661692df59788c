"""Port leases (SPEC 3.19): each unit gets its own TCP ports for its dev server and tests.

Through the real CLIs: ports are leased under the registry lock, distinct across units, never
one something else is bound to, carried as `UNIT_PORT`/`UNIT_PORTS` into the setup hook, the
validation and every turn of the unit's pair (whoever sends it), kept by a resumed create and a
restaff, released by dismantle, and shown by a dry run.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Sandbox, git, run_cli, wait_until, write_record

ZYGOTE = Path(__file__).with_name("race_zygote.py")
RACERS = 8  # at one instant, 8 racers contend as 20 would; the count is not the claim


# -- helpers ------------------------------------------------------------------------------------


def bindable(port: int) -> bool:
    """The test's own probe: nothing holds `port` on the IPv4 or IPv6 wildcard."""
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind((host, port))
            except OSError:
                return False
    return True


def free_block(size: int) -> int:
    """The first port of `size` consecutive free ports between the default range (so no other
    test's leases land there) and Linux's ephemeral ports (so no outgoing connection does)."""
    for _ in range(200):
        low = random.randrange(30000, 32700)
        if all(bindable(port) for port in range(low, low + size)):
            return low
    raise AssertionError("no free block of ports")


def set_range(sandbox: Sandbox, low: int, high: int) -> None:
    sandbox.machine_config.write_text(f'port_range = "{low}-{high}"\n')


def listening(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1 if host == "::1" else 0)
    try:
        server.bind((host, port))
    except OSError as error:
        server.close()
        pytest.skip(f"cannot listen on {host}: {error}")
    server.listen()
    return server


def env_file_ports(path: Path) -> tuple[str, str]:
    """`UNIT_PORT` and `UNIT_PORTS` from an `env` dump ('' when absent)."""
    found = dict(
        line.split("=", 1) for line in path.read_text().splitlines() if line.startswith("UNIT_")
    )
    return found.get("UNIT_PORT", ""), found.get("UNIT_PORTS", "")


def spoken(ports: list[int]) -> tuple[str, str]:
    return str(ports[0]), " ".join(str(port) for port in ports)


def dumping(path: Path) -> str:
    """A script executor that writes its environment (but its tokens) to `path` and replies."""
    return f"env | grep -v -e TOKEN -e KEY > {shlex.quote(str(path))}; cat > /dev/null; echo ok"


# -- many units at once --------------------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_creates_lease_distinct_free_ports(tmp_path: Path) -> None:
    """8 leads create at the same instant, each asking for 2 ports: every unit gets 2 ports no
    other unit has, each reaches the unit's setup and its executor, and none was in use."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "--bare", "origin.git")
    git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), str(repo))
    git(repo, "commit", "-q", "--allow-empty", "-m", "initial")
    git(repo, "push", "-q", "origin", "HEAD:main")
    task = tmp_path / "task.md"
    task.write_text("serve\n")
    argvs = [
        [
            "create", "--repo", str(repo), "--unit", f"r{index}",
            "--worktree", str(tmp_path / f"w{index}"), "--branch", f"ports/{index}",
            "--base", "main", "--scope", "ports", "--validation", "true", "--lead", "human",
            "--partner", "script", "--reason", "ports", "--task-file", str(task),
            "--model", dumping(tmp_path / f"env-r{index}.txt"),
            "--setup", f'echo "$UNIT_PORT|$UNIT_PORTS" > {tmp_path}/setup-r{index}.txt',
            "--ports", "2", "--max-active", str(RACERS), "--max-held", str(RACERS),
            "--lock-timeout", "300",
        ]
        for index in range(RACERS)
    ]  # fmt: skip
    out = tmp_path / "out"
    out.mkdir()
    completed = subprocess.run(
        [sys.executable, str(ZYGOTE), json.dumps(argvs), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    codes = json.loads(completed.stdout)
    outcomes = [json.loads((out / f"{index}.json").read_text()) for index in range(RACERS)]
    assert codes == [0] * RACERS, outcomes
    leased = {doc["unit"]["unit_id"]: doc["unit"]["ports"] for doc in outcomes}
    every = [port for ports in leased.values() for port in ports]
    assert all(len(ports) == 2 for ports in leased.values()), leased
    assert len(set(every)) == 2 * RACERS and all(20000 <= port <= 29999 for port in every), leased
    for unit_id, ports in leased.items():
        record = json.loads(
            (repo / ".git" / "orchestrate" / "units" / f"{unit_id}.json").read_text()
        )
        assert record["ports"] == ports
        first, all_ports = spoken(ports)
        assert (tmp_path / f"setup-{unit_id}.txt").read_text() == f"{first}|{all_ports}\n"
        executor = tmp_path / f"env-{unit_id}.txt"
        wait_until(
            lambda executor=executor: executor.exists() and "UNIT_PORTS" in executor.read_text(),
            timeout=120,
        )
        assert env_file_ports(executor) == (first, all_ports)
    # Nothing held them when they were leased, and no unit's process holds them now.
    assert all(bindable(port) for port in every)
    listed = run_cli("unit", "status", "--all", "--repo", str(repo), cwd=tmp_path)
    assert {unit["unit_id"]: unit["ports"] for unit in listed["units"]} == leased


# -- what is leased ------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::1", "::"])
def test_a_port_something_listens_on_is_skipped(sandbox: Sandbox, host: str) -> None:
    """A server already on the port the unit would get first, on any address: the lease takes
    the next free ones instead. A dry run names the ports a create would lease."""
    low = free_block(3)
    set_range(sandbox, low, low + 2)
    planned = sandbox.create("u1", "--dry-run", ports="2")
    assert planned.code == 0, planned.stdout
    (reserve,) = [step for step in planned["plan"] if step["step"] == "reserve"]
    would = reserve["detail"]["would_lease_ports"]
    assert len(would) == 2 and set(would) <= {low, low + 1, low + 2}
    assert not (sandbox.registry / "units").exists() or not list(
        (sandbox.registry / "units").iterdir()
    )
    server = listening(host, would[0])
    try:
        again = sandbox.create("u1", "--dry-run", ports="2")
        assert would[0] not in again["plan"][0]["detail"]["would_lease_ports"]
        created = sandbox.create("u1", ports="2")
        assert created.code == 0, created.stdout
        ports = created["unit"]["ports"]
        assert ports == again["plan"][0]["detail"]["would_lease_ports"]
        assert sorted(ports) == sorted({low, low + 1, low + 2} - {would[0]})
    finally:
        server.close()


def test_a_port_another_recorded_unit_holds_is_never_leased(sandbox: Sandbox) -> None:
    """Ports are held by the record, not by a running server: a unit that holds ports and
    runs nothing on them still keeps them (a record planted in the registry holds them too)."""
    low = free_block(3)
    set_range(sandbox, low, low + 2)
    write_record(sandbox, "other", ports=[low, low + 2])
    created = sandbox.create("u1", ports="1", max_active="3", max_held="3")
    assert created.code == 0, created.stdout
    assert created["unit"]["ports"] == [low + 1]
    refused = sandbox.create("u2", ports="1", max_active="3", max_held="3")
    assert refused.code == 1 and refused["code"] == "ports-unavailable", refused.stdout
    assert refused["detail"]["wanted"] == 1 and refused["detail"]["free"] == []
    assert f'port_range = "{low}-' in refused["next"]
    # Refused under the registry lock, before the reservation: nothing of u2 was made.
    assert not (sandbox.registry / "units" / "u2.json").exists()
    assert not sandbox.worktree("u2").exists()
    assert git(sandbox.repo, "branch", "--list", "feat/u2") == ""


def test_a_dismantled_units_ports_are_leased_again(sandbox: Sandbox) -> None:
    low = free_block(2)
    set_range(sandbox, low, low + 1)
    first = sandbox.create("u1", ports="2")
    assert first.code == 0, first.stdout
    assert sorted(first["unit"]["ports"]) == [low, low + 1]
    sandbox.wait_turn("u1")
    full = sandbox.create("u2", ports="1")
    assert full.code == 1 and full["code"] == "ports-unavailable"
    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert gone.code == 0, gone.stdout
    second = sandbox.create("u2", ports="2")
    assert second.code == 0, second.stdout
    assert sorted(second["unit"]["ports"]) == [low, low + 1]


# -- where the ports go --------------------------------------------------------------------------


def test_setup_validation_and_every_turn_see_the_units_ports(sandbox: Sandbox) -> None:
    """The setup hook, `unit verify`'s validation and every turn — the first task, an
    addendum's notice, a bare `pair send` from a lead's shell — get the unit's ports, and a
    lead's own `UNIT_PORT` never overrides them."""
    root = sandbox.root
    lead = {**os.environ, "UNIT_PORT": "1", "UNIT_PORTS": "1 2"}  # a lead inside another unit
    created = sandbox.unit(
        *sandbox.create_args(
            "u1",
            ports="3",
            setup=f'echo "$UNIT_PORT|$UNIT_PORTS" > {root}/setup.txt',
            validation=f'echo "$UNIT_PORT|$UNIT_PORTS" > {root}/verify.txt',
            model=dumping(root / "turn.txt"),
        ),
        env=lead,
    )
    assert created.code == 0, created.stdout
    ports = created["unit"]["ports"]
    first, every = spoken(ports)
    assert len(ports) == 3 and sandbox.record("u1")["ports"] == ports
    assert (root / "setup.txt").read_text() == f"{first}|{every}\n"
    sandbox.wait_turn("u1")
    assert env_file_ports(root / "turn.txt") == (first, every)

    (root / "turn.txt").unlink()
    noticed = sandbox.unit("addendum", "--unit", "u1", "--text", "Also serve /health.", env=lead)
    assert noticed.code == 0, noticed.stdout
    sandbox.wait_turn("u1")
    assert env_file_ports(root / "turn.txt") == (first, every)

    (root / "turn.txt").unlink()
    body = root / "question.md"
    body.write_text("Which port?\n")
    asked = sandbox.pair(
        "send",
        "--kind",
        "question",
        "--body-file",
        str(body),
        repo=sandbox.worktree("u1"),
        env=lead,
    )
    assert asked.code == 0, asked.stdout
    assert env_file_ports(root / "turn.txt") == (first, every)

    verified = sandbox.unit("verify", "--unit", "u1", env=lead)
    assert verified.code == 0, verified.stdout
    assert (root / "verify.txt").read_text() == f"{first}|{every}\n"

    status = sandbox.unit("status", "--unit", "u1")
    assert status["unit"]["ports"] == ports
    table = sandbox.unit("status", "--unit", "u1", "--format", "table")
    assert f"ports      {every}" in table.stdout
    listed = sandbox.unit("list", "--format", "table")
    assert f"{first}+2" in listed.stdout
    watched = sandbox.unit("watch", "--once")
    assert f"{first}+2" in watched.stdout


def test_a_unit_without_ports_gets_none_of_its_leads(sandbox: Sandbox) -> None:
    """A unit that leased nothing must not inherit the ports of the lead running `unit`."""
    lead = {**os.environ, "UNIT_PORT": "1", "UNIT_PORTS": "1 2"}
    created = sandbox.unit(
        *sandbox.create_args(
            "u1", setup=f'echo "[$UNIT_PORT|$UNIT_PORTS]" > {sandbox.root}/setup.txt'
        ),
        env=lead,
    )
    assert created.code == 0, created.stdout
    assert created["unit"]["ports"] == []
    assert (sandbox.root / "setup.txt").read_text() == "[|]\n"


def test_a_killed_create_resumed_keeps_its_ports(sandbox: Sandbox) -> None:
    """Killed while its setup runs, the unit still holds its ports (another create gets
    others); the recovery command resumes with exactly the recorded ports."""
    low = free_block(4)
    set_range(sandbox, low, low + 3)
    setup = f'echo "$UNIT_PORTS" >> {sandbox.root}/setup-runs.txt'
    args = sandbox.create_args("u1", ports="2", setup=setup)
    crash = {
        **os.environ,
        "UNITMGR_TEST_HOOKS": "1",
        "UNITMGR_TEST_CRASH_AFTER": "create:setup:started",
    }
    assert sandbox.unit(*args, env=crash).code == -9
    ports = sandbox.record("u1")["ports"]
    assert len(ports) == 2
    other = sandbox.create("u2", ports="2")
    assert other.code == 0, other.stdout
    assert sorted(ports + other["unit"]["ports"]) == list(range(low, low + 4))

    different = sandbox.create("u1", ports="3", setup=setup)
    assert different.code == 1 and different["reason"] == "unit u1 cannot resume: ports differs"
    (unit,) = [u for u in sandbox.unit("list")["units"] if u["unit_id"] == "u1"]
    command = unit["recovery"]["command"]
    assert "--ports 2" in command
    resumed = run_cli(*shlex.split(command), cwd=sandbox.root)
    assert resumed.code == 0, resumed.stdout + resumed.stderr
    assert resumed["status"] == "resumed" and resumed["unit"]["ports"] == ports
    assert (sandbox.root / "setup-runs.txt").read_text().splitlines()[-1] == " ".join(
        str(port) for port in ports
    )


def test_restaff_keeps_the_ports_for_the_new_executor(sandbox: Sandbox) -> None:
    created = sandbox.create("u1", ports="2", model="cat > /dev/null; echo first")
    assert created.code == 0, created.stdout
    ports = created["unit"]["ports"]
    sandbox.wait_turn("u1")
    restaffed = sandbox.unit(
        "restaff", "--unit", "u1", "--lead", "human", "--partner", "script",
        "--model", dumping(sandbox.root / "restaffed.txt"), "--reason", "ports follow the unit",
    )  # fmt: skip
    assert restaffed.code == 0, restaffed.stdout
    assert restaffed["unit"]["ports"] == ports == sandbox.record("u1")["ports"]
    sandbox.wait_turn("u1")
    assert env_file_ports(sandbox.root / "restaffed.txt") == spoken(ports)


# -- bad input and hostile files -----------------------------------------------------------------


@pytest.mark.parametrize("count", ["65", "-1", "two", "1.5", "007"])
def test_a_bad_port_count_is_refused_and_writes_nothing(sandbox: Sandbox, count: str) -> None:
    before = sandbox.snapshot()
    refused = sandbox.create("u1", ports=count)
    assert refused.code == 2 and refused["code"] == "invalid-ports", refused.stdout
    assert "--ports" in refused["reason"] and refused["next"]
    assert sandbox.snapshot() == before


def test_the_config_supplies_the_count_and_a_flag_overrides_it(sandbox: Sandbox) -> None:
    low = free_block(3)
    (sandbox.repo / ".unitmgr.toml").write_text(f'ports = 2\nport_range = "{low}-{low + 2}"\n')
    configured = sandbox.create("u1")
    assert configured.code == 0, configured.stdout
    assert len(configured["unit"]["ports"]) == 2
    flagged = sandbox.create("u2", ports="0")
    assert flagged.code == 0, flagged.stdout
    assert flagged["unit"]["ports"] == []


@pytest.mark.parametrize("ports", [[70000], [0], [20001, 20001], list(range(20000, 20065)), ["x"]])
def test_a_record_with_impossible_ports_is_unreadable(sandbox: Sandbox, ports: list) -> None:
    """An executor can write the registry: a record claiming non-ports (or every port) is not
    believed — it is `unreadable` and pauses admission, as any malformed record."""
    write_record(sandbox, "planted", ports=ports)
    (unit,) = sandbox.unit("list")["units"]
    assert unit["lifecycle"] == "unreadable", unit
    refused = sandbox.create("u1", ports="1")
    assert refused.code == 1 and refused["code"] == "admission-paused"


def test_variables_planted_in_the_pair_session_never_steer_the_partner(
    sandbox: Sandbox,
) -> None:
    """The pair session is writable by the executor: its `environment` is covered by the
    lead's MAC (pair/session_trust.py), so a planted one — a loader's variable, one pair sets
    itself — makes the session untrusted and nothing runs (before, they were only filtered)."""
    created = sandbox.create("u1", ports="1", model=dumping(sandbox.root / "turn.txt"))
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    before = (sandbox.root / "turn.txt").read_text()
    assert f"UNIT_PORT={created['unit']['ports'][0]}" in before
    session_file = sandbox.common_dir / "worktrees" / "u1" / "pair" / "session.json"
    session = json.loads(session_file.read_text())
    session["environment"] = {
        **session["environment"],
        "LD_PRELOAD": "/tmp/evil.so",
        "PATH": "/nonexistent",
        "UNITMGR_UNIT": "someone-else",
        "GIT_DIR": "/tmp/elsewhere",
        "lower": "x",
    }
    session_file.write_text(json.dumps(session))
    body = sandbox.root / "q.md"
    body.write_text("ports?\n")
    asked = sandbox.pair(
        "send", "--kind", "question", "--body-file", str(body), repo=sandbox.worktree("u1")
    )
    assert asked.code == 1 and asked["code"] == "session-untrusted", asked.stdout
    assert (sandbox.root / "turn.txt").read_text() == before  # no turn ran


@pytest.fixture(autouse=True)
def _no_inherited_ports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test process's own environment carries no port variables."""
    monkeypatch.delenv("UNIT_PORT", raising=False)
    monkeypatch.delenv("UNIT_PORTS", raising=False)
    yield
