"""The turn runner's contract (`pair.runners.base.TurnRunner`), written against the interface only.

The `harness` fixture yields a runner and what only its own machine can do (see whether a process
there is alive, open a gate file the turn polls, lose the process that would write the receipt);
it is parametrized over `LocalRunner` and `RayRunner` (SPEC 4.3: a unit's actor on the second
node of a real two-node `ray.cluster_utils.Cluster`, started once for the module,
tests/ray_cluster.py), and both pass these tests unchanged — except the bootstrap case, whose
fake partner takes its scenario from this process's environment, which a node's partner never
gets (SPEC 4.3): the Ray runner's bootstrap, on the node, makes the same checks in its own case
at the end. The Ray runner's own cases (a node killed mid-turn and the re-send after it, a stale
epoch's bundle, a lead supervisor killed and re-attached, `pair clear` stopping the node's turn
or answering `unknown`) follow at the end. The cluster (the `cluster` fixture,
tests/conftest.py) is started once per xdist worker that runs a Ray test.

Each turn's work is the shell script in its body: the pair's script partner runs
`sed 1,2d | sh` (the prompt without its header line and the blank line after it).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pair.bootstrap import grant_bootstrap
from pair.commands.send import grant_turn
from pair.errors import StateError
from pair.partners.base import TurnRequest
from pair.paths import PairPaths, state_dir_for
from pair.runners.base import BootstrapTurn, Liveness, TurnRunner, TurnStart
from pair.runners.local import LocalRunner
from pair.state import release_owned_marker
from tests import ray_cluster
from tests.conftest import Sandbox, git, wait_until
from tests.test_pair import init_script

RUN_THE_BODY = "sed 1,2d | sh"
PIDS = re.compile(rb"pids ([0-9 ]+)\n")


@dataclass
class Harness:
    sandbox: Sandbox
    runner: TurnRunner
    gate_file: Path

    def begin(self, script: str) -> tuple[TurnStart, dict[str, Any]]:
        """Grant a turn as `send` does (the lease is pair's), then ask the runner to start it."""
        granted = grant_turn(self.sandbox.repo, kind="task", body=script, write=True)
        return granted.turn, self.runner.start(granted.turn)

    def open_gate(self) -> None:
        self.gate_file.write_text("open\n")

    def process_alive(self, pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # A zombie is dead: only its parent's wait() is missing.
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def lose_supervisor(self, running: dict[str, Any]) -> None:
        """The machine loses the process that would write the receipt, and the partner too."""
        os.kill(running["supervisor_pid"], signal.SIGKILL)
        os.killpg(running["partner_pid"], signal.SIGKILL)


RAY = pytest.param("ray", marks=[pytest.mark.slow, pytest.mark.ray_cluster])
RUNNERS = ["local", RAY]


def ray_options(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`pair init`'s options for the second node, with the lead's environment to reach it."""
    handle: ray_cluster.RayCluster = request.getfixturevalue("cluster")
    for name, value in handle.environment.items():
        monkeypatch.setenv(name, value)
    return ["--runner", "ray", "--node", ray_cluster.NODE, "--ray-address", handle.address]


@pytest.fixture(params=RUNNERS)
def harness(
    request: pytest.FixtureRequest, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Harness]:
    from pair.runners import runner_for

    extra = ray_options(request, monkeypatch) if request.param == "ray" else []
    session = init_script(sandbox, RUN_THE_BODY, None, *extra)
    runner = runner_for(Path(session["state_dir"]))
    assert type(runner).__name__ == ("RayRunner" if extra else "LocalRunner")
    yield Harness(sandbox=sandbox, runner=runner, gate_file=sandbox.root / "gate")


def gated(before: str, after: str, gate: Path) -> str:
    return f"{before}\nwhile [ ! -f {gate} ]; do sleep 0.02; done\n{after}\n"


def receipt_of(harness: Harness, turn: TurnStart) -> dict[str, Any]:
    return wait_until(lambda: harness.runner.receipt(turn.seq), timeout=30)


def test_start_then_receipt(harness: Harness) -> None:
    head = git(harness.sandbox.repo, "rev-parse", "HEAD").strip()
    turn, running = harness.begin("echo hello")
    assert turn.lease.epoch == turn.seq == 1 and turn.base_commit == head
    assert running["seq"] == turn.seq and running["status"] in ("running", "replied"), running
    receipt = receipt_of(harness, turn)
    assert receipt["seq"] == turn.seq and receipt["status"] == "replied", receipt
    assert receipt["reply"] == "hello" and receipt["write"] is True
    assert receipt["base_commit"] == head
    # The next turn runs under the next epoch.
    second, _ = harness.begin("echo again")
    assert second.lease.epoch == 2 and receipt_of(harness, second)["reply"] == "again"


def test_the_transcript_streams_by_byte_offset(harness: Harness) -> None:
    turn, _ = harness.begin(gated("echo first", "echo second", harness.gate_file))

    def first_chunk() -> Any:
        chunk = harness.runner.read_transcript(turn.seq, turn.kind)
        return chunk if b"first\n" in chunk.data else None

    first = wait_until(first_chunk, timeout=30)
    assert first.offset == 0 and first.next_offset == len(first.data)
    running = harness.runner.probe(turn.seq)
    assert running.held and running.alive and running.lost is None
    assert harness.runner.receipt(turn.seq) is None  # no receipt while it runs
    harness.open_gate()

    def newer() -> Any:
        chunk = harness.runner.read_transcript(turn.seq, turn.kind, offset=first.next_offset)
        return chunk if b"second\n" in chunk.data else None

    rest = wait_until(newer, timeout=30)
    assert rest.offset == first.next_offset and b"first" not in rest.data
    receipt = receipt_of(harness, turn)
    assert receipt["status"] == "replied", receipt
    whole = harness.runner.read_transcript(turn.seq, turn.kind)
    assert whole.data.startswith(first.data) and b"second\n" in whole.data[len(first.data) :]
    end = harness.runner.read_transcript(turn.seq, turn.kind, offset=whole.next_offset)
    assert end.data == b"" and end.next_offset == whole.next_offset
    small = harness.runner.read_transcript(turn.seq, turn.kind, offset=1, limit=3)
    assert small.data == whole.data[1:4] and small.next_offset == 4


def test_cancel_returns_only_when_every_process_is_dead(harness: Harness) -> None:
    # A child that left the partner's process group, and the partner's own shell.
    turn, _ = harness.begin('setsid sleep 300 &\necho "pids $$ $!"\nwait\n')

    def pids() -> list[int] | None:
        found = PIDS.search(harness.runner.read_transcript(turn.seq, turn.kind).data)
        return [int(pid) for pid in found.group(1).split()] if found else None

    processes = wait_until(pids, timeout=30)
    assert len(processes) == 2 and all(harness.process_alive(pid) for pid in processes)
    receipt = harness.runner.cancel(turn.seq, reason="the contract says stop")
    assert receipt is not None and receipt["status"] == "cancelled", receipt
    assert "the contract says stop" in receipt["reason"] and receipt["seq"] == turn.seq
    # At once, no polling: cancel returned only after they were gone.
    assert [pid for pid in processes if harness.process_alive(pid)] == []
    after = harness.runner.probe(turn.seq)
    assert not after.alive and not after.held
    assert harness.runner.cancel(turn.seq, reason="again") is None  # nothing in flight
    assert harness.runner.receipt(turn.seq) == receipt


def test_liveness_is_false_after_the_end(harness: Harness) -> None:
    turn, _ = harness.begin("echo done")
    assert receipt_of(harness, turn)["status"] == "replied"
    ended = harness.runner.probe(turn.seq)
    assert not ended.alive and not ended.held and ended.lost is None


def test_reap_refuses_a_live_turn_and_leaves_nothing_of_a_lost_one(harness: Harness) -> None:
    turn, running = harness.begin(gated("echo started", "echo never", harness.gate_file))
    assert running["status"] == "running", running
    with pytest.raises(StateError) as refused:
        harness.runner.reap()
    assert refused.value.code == "turn-in-flight"
    assert harness.runner.probe(turn.seq).alive
    harness.lose_supervisor(running)
    lost = wait_until(lambda: p if (p := harness.runner.probe(turn.seq)).lost else None, timeout=30)
    assert lost.held and harness.runner.receipt(turn.seq) is None
    reaped = wait_until(lambda: _reap_when_dead(harness.runner), timeout=30)
    assert reaped.status == "cleared" and reaped.marker is not None
    assert reaped.marker["seq"] == turn.seq
    gone = harness.runner.probe(turn.seq)
    assert not gone.held and not gone.alive
    assert harness.runner.reap().status == "already-cleared"
    # Nothing is left holding the pair: the next turn starts and ends.
    harness.open_gate()
    again, _ = harness.begin("echo next")
    assert receipt_of(harness, again)["reply"] == "next"


def _reap_when_dead(runner: TurnRunner) -> Any:
    try:
        return runner.reap()
    except StateError as error:
        assert error.code == "turn-in-flight", error.reason
        return None


@pytest.fixture
def fresh_runner(sandbox: Sandbox) -> TurnRunner:
    """A runner for a worktree with no pair yet (what `pair init` asks to bootstrap). The Ray
    runner's bootstrap runs on the unit's node, with the node's own CLI and environment (a
    partner's session lives where its CLI ran), so the test's fake partner and the scenario it
    sets in this process's environment are not the node's: the Ray runner's bootstrap is
    proved by `test_a_bootstrap_on_ray_runs_on_the_node_and_names_its_partner_first` below,
    with every check of this case and the CLI installed on the node."""
    return LocalRunner(state_dir_for(sandbox.repo / ".git"))


def test_a_bootstrap_runs_in_the_foreground_and_names_its_partner_first(
    fresh_runner: TurnRunner,
    sandbox: Sandbox,
    fake_partners: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`pair init`'s bootstrap (a streaming partner: the fake claude, in the real stream
    format): the partner is named before anything waits on it and is alive then, the call
    returns once it is gone, with its session id, and the lease stays the caller's. What the
    partner left running — here a double-forked `setsid` grandchild, no descendant of anything
    the runner started any more — is killed and listed (SPEC 8: no orphan on any path)."""
    seconds = str(random.randint(4100, 4899))  # a command line no other test has
    monkeypatch.setenv("FAKE_SCENARIO", "orphan")
    monkeypatch.setenv("FAKE_ORPHAN_SECONDS", seconds)
    runner, paths = fresh_runner, PairPaths(state_dir_for(sandbox.repo / ".git"))
    paths.transcripts_dir.mkdir(parents=True)
    lease = grant_bootstrap(paths, sandbox.repo, idle_minutes=1, total_minutes=2)
    prompt = paths.turn_file(0, "init", "-prompt.md")
    prompt.write_text("Reply now with one line saying you are ready.\n")
    request = TurnRequest(
        partner="claude",
        sid="",
        seq=0,
        kind="init",
        write=False,
        model=None,
        effort=None,
        worktree=sandbox.repo,
        prompt_file=prompt,
        reply_file=paths.turn_file(0, "init", "-reply.md"),
        bootstrap=True,
    )
    named: list[tuple[int, bool, Any]] = []

    def partner_started(identity: Any) -> None:
        named.append((identity.pid, _alive(identity.pid), runner.probe(0)))

    turn = BootstrapTurn(
        lease=lease, request=request, idle_seconds=60, total_seconds=120, partner_home=None
    )
    result = runner.bootstrap(turn, on_partner_start=partner_started)
    assert len(named) == 1, named
    pid, alive_when_named, probed = named[0]
    assert alive_when_named and probed.held and probed.partner_pid == pid, named
    assert not _alive(pid)  # it returns once the partner is gone
    assert result.status == "replied" and result.outcome.sid == "claude-session-1", result
    assert b'"session_id"' in runner.read_transcript(0, "init").data
    assert [item["argv"] for item in result.leftovers] == [["sleep", seconds]], result.leftovers
    assert not _sleeping(seconds)
    held = runner.probe(0)
    # The lease is still the caller's (it saves the session, then releases): its holder is us.
    assert held.held and held.pid == os.getpid(), held
    release_owned_marker(paths, lease.token)
    assert runner.probe(0) == Liveness(held=False, alive=False)


def _sleeping(seconds: str) -> bool:
    found = subprocess.run(["pgrep", "-f", f"^sleep {seconds}$"], capture_output=True)
    return found.returncode == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_status_reads_files_and_never_loads_a_runner() -> None:
    code = (
        "import sys; import pair.commands.status\n"
        "loaded = sorted(m for m in ('pair.runners', 'pair.runners.local', 'pair.runners.ray',"
        " 'ray', 'pair.launch', 'pair.supervisor') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


# Modules through which a command would reach a turn's processes behind the runner's back.
BEHIND_THE_SEAM = {
    "pair.runners.local",
    "pair.runners.ray",
    "pair.runners.ray_node",
    "pair.launch",
    "pair.supervisor",
    "pair.reaper",
    "ray",
}
PROCESS_CONTROL = {"signal", "subprocess"}


def test_commands_reach_a_turn_only_through_the_runner() -> None:
    import ast

    root = Path(__file__).resolve().parent.parent
    # `pair init`'s bootstrap too: it grants the lease and judges the result, the runner runs it.
    modules = [*sorted((root / "pair" / "commands").glob("*.py")), root / "pair" / "bootstrap.py"]
    for path in modules:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
            else:
                continue
            bad = names & (BEHIND_THE_SEAM | PROCESS_CONTROL | {"pair.turn.run_turn"})
            assert not bad, f"{path.relative_to(root)} imports {sorted(bad)}: ask pair.runners"


# -- the Ray runner's own failures (SPEC 4.3) ------------------------------------------------------


@pytest.fixture
def on_ray(
    request: pytest.FixtureRequest,
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    cluster: ray_cluster.RayCluster,  # named: it puts the test in the Ray group (conftest)
) -> Harness:
    """A script pair whose turns run on the second node."""
    from pair.runners import runner_for

    session = init_script(sandbox, RUN_THE_BODY, None, *ray_options(request, monkeypatch))
    runner = runner_for(Path(session["state_dir"]))
    return Harness(sandbox=sandbox, runner=runner, gate_file=sandbox.root / "gate")


COMMIT = (
    'echo "{text}" > {name}\ngit add {name}\n'
    'git -c user.name=n -c user.email=n@x commit -qm "{text}"\necho committed\n'
)


@pytest.mark.slow
def test_a_killed_lead_supervisor_is_reattached(on_ray: Harness) -> None:
    """The lead's supervisor dies mid-turn; the actor runs on, and `pair wait` starts a new
    supervisor that follows the turn from the transcript's end (no byte twice) to its receipt,
    and lands its commit."""
    from pair import api

    script = COMMIT.format(text="from the node", name="node.txt")
    turn, running = on_ray.begin(gated("echo first", script + "echo second", on_ray.gate_file))
    first = wait_until(
        lambda: b"first\n" in on_ray.runner.read_transcript(turn.seq, turn.kind).data, timeout=30
    )
    assert first and running["status"] == "running", running
    from pair.commands.status import read_status

    def heartbeat() -> dict[str, Any] | None:
        """File-only status: where the turn runs, and the lead supervisor's heartbeat."""
        view = read_status(state_dir_for(on_ray.sandbox.repo / ".git"))["in_flight"] or {}
        runner = view.get("runner") or {}
        return runner if runner.get("heartbeat_at") else None

    beat = wait_until(heartbeat, timeout=30)
    assert beat["kind"] == "ray" and beat["node"] == ray_cluster.NODE, beat
    os.kill(running["supervisor_pid"], signal.SIGKILL)
    lost = wait_until(lambda: p if (p := on_ray.runner.probe(turn.seq)).lost else None, timeout=30)
    assert lost.held
    assert on_ray.process_alive(running["partner_pid"])  # the node's turn runs on
    on_ray.open_gate()
    receipt = api.wait(on_ray.sandbox.repo, seq=turn.seq, timeout_min=1)
    assert receipt["status"] == "replied", receipt
    assert receipt["supervisor_pid"] != running["supervisor_pid"]
    transcript = on_ray.runner.read_transcript(turn.seq, turn.kind).data
    assert transcript.count(b"first\n") == 1 and b"second\n" in transcript, transcript
    commits = receipt["runner"]["commits"]
    assert commits["fast_forwarded"] and (on_ray.sandbox.repo / "node.txt").exists(), commits
    assert git(on_ray.sandbox.repo, "rev-parse", "HEAD").strip() == commits["head"]


# The partner's first command counts its turn's watchdogs that are no longer the actor
# worker's children (`ray::…`, the nearest such ancestor): a launcher not yet forked away is not
# counted, for the node's loss would take it with the worker.
WATCHDOGS = r"""
w=$$
while [ "$w" -gt 1 ]; do
  case "$(tr '\0' ' ' < /proc/$w/cmdline)" in ray::*) break ;; esac
  w=$(sed 's/.*) //' /proc/$w/stat | cut -d' ' -f2)
done
n=0
for p in /proc/[0-9]*; do
  c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null) || continue
  case "$c" in *"ray_node watchdog "*" $PAIR_TURN_TOKEN "*) ;; *) continue ;; esac
  [ "$(sed 's/.*) //' $p/stat | cut -d' ' -f2)" = "$w" ] || n=$((n+1))
done
echo "watchdogs $n"
"""


@pytest.mark.slow
def test_a_node_turns_watchdog_is_armed_before_its_partner_starts(on_ray: Harness) -> None:
    """The partner's first command finds exactly one watchdog for its turn, already forked away
    from the actor's worker (its launcher gone): a node lost the moment after the partner's
    start — the last CI's failure, at load 4 — cannot take the watchdog's launcher with it and
    leave the turn running."""
    turn, _ = on_ray.begin(WATCHDOGS)
    receipt = receipt_of(on_ray, turn)
    assert receipt["status"] == "replied" and receipt["reply"] == "watchdogs 1", receipt


def test_a_stale_epochs_bundle_is_refused(sandbox: Sandbox) -> None:
    """The lead lands a turn's commits only for the marker's epoch and token, and only when they
    descend from the lease's base: a bundle from a lost node's old turn changes nothing."""
    from pair.runners.ray import land_commits
    from pair.runners.ray_node import OUT_REF
    from pair.state import load_session

    init_script(sandbox, RUN_THE_BODY)
    granted = grant_turn(sandbox.repo, kind="task", body="echo x", write=True)
    turn, paths = granted.turn, granted.paths
    node = sandbox.root / "node"
    git(sandbox.root, "clone", "-q", str(sandbox.repo), str(node))
    (node / "n.txt").write_text("node work\n")
    git(node, "add", "n.txt")
    git(node, "-c", "user.name=n", "-c", "user.email=n@x", "commit", "-qm", "node work")
    git(node, "update-ref", OUT_REF, "HEAD")
    bundle_file = sandbox.root / "turn.bundle"
    git(node, "bundle", "create", str(bundle_file), OUT_REF, f"^{turn.base_commit}")
    data = bundle_file.read_bytes()
    session = load_session(paths)
    assert session is not None
    for epoch, token in ((turn.seq - 1 or 99, turn.lease.token), (turn.seq, "not-the-token")):
        refused = land_commits(paths, session, token, epoch, turn.base_commit, data)
        assert "stale epoch" in refused.get("refused", ""), refused
    refs = git(sandbox.repo, "for-each-ref", "refs/unitmgr/")
    assert refs.strip() == "" and not (sandbox.repo / "n.txt").exists()
    # Not descending from the base: refused too, and its ref removed again.
    unrelated = land_commits(paths, session, turn.lease.token, turn.seq, "0" * 40, data)
    assert "descend" in unrelated.get("refused", ""), unrelated
    landed = land_commits(paths, session, turn.lease.token, turn.seq, turn.base_commit, data)
    assert landed["fast_forwarded"] and (sandbox.repo / "n.txt").read_text() == "node work\n"
    assert landed["ref"] == f"refs/unitmgr/pair/e{turn.seq}"
    release_owned_marker(paths, turn.lease.token)


@pytest.mark.slow
def test_the_node_copy_stays_warm_and_a_moved_branch_sends_only_the_delta(
    on_ray: Harness,
) -> None:
    """The node keeps its copy between turns: a turn whose base it holds sends no bundle (one
    call starts it); when the lead's branch moved underneath it (a teammate's commit) the next
    turn sends only what the copy lacks and runs on the new base; a released actor (a restaff,
    a dismantle) leaves nothing, so the next turn's copy is rebuilt from a whole bundle."""
    repo = on_ray.sandbox.repo

    def turn(script: str) -> dict[str, Any]:
        started, _ = on_ray.begin(script)
        receipt = receipt_of(on_ray, started)
        assert receipt["status"] == "replied", receipt
        base = receipt["runner"]["base"]
        assert base["commit"] == started.base_commit, base
        return receipt

    first = turn("echo cold")["runner"]["base"]
    assert first["bundle_bytes"] > 0 and first["delta"] is False, first
    landed = turn(COMMIT.format(text="from the node", name="node.txt"))
    assert landed["runner"]["commits"]["fast_forwarded"], landed
    assert turn("echo warm")["runner"]["base"]["bundle_bytes"] == 0  # the node's own commit
    (repo / "mate.txt").write_text("a teammate's line\n")
    git(repo, "add", "mate.txt")
    git(repo, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-qm", "teammate")
    moved = turn("cat mate.txt")
    assert moved["reply"] == "a teammate's line", moved
    delta = moved["runner"]["base"]
    whole = on_ray.sandbox.root / "whole.bundle"
    git(repo, "bundle", "create", str(whole), "HEAD")
    assert delta["delta"] is True and 0 < delta["bundle_bytes"] < whole.stat().st_size, delta
    assert turn("echo warm again")["runner"]["base"]["bundle_bytes"] == 0
    import ray

    connected = ray.is_initialized()
    try:
        assert on_ray.runner.release()["released"] is True  # what a restaff does to the old node
    finally:
        if not connected:
            ray.shutdown()  # a driver left connected would keep the cluster from stopping a node
    rebuilt = turn("cat node.txt mate.txt")
    assert rebuilt["reply"] == "from the node\na teammate's line", rebuilt
    assert rebuilt["runner"]["base"]["delta"] is False
    assert rebuilt["runner"]["base"]["bundle_bytes"] > 0


@pytest.mark.slow
def test_the_units_actor_never_imports_from_the_lead_supervisors_directory(
    on_ray: Harness,
) -> None:
    """Ray puts a driver's working directory first on the path of its job's workers — the
    unit's actor's — and the lead supervisor runs in the pair's state dir, which an executor
    can write (SPEC 8): a `pair` package planted there is never what the actor imports."""
    from pair.runners.local import LocalRunner

    assert isinstance(on_ray.runner, LocalRunner)
    planted = on_ray.runner.paths.state_dir / "pair"
    witness = on_ray.sandbox.root / "planted-ran"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(witness)!r}, 'w').close()\n")
    turn, _ = on_ray.begin("echo safe")
    receipt = receipt_of(on_ray, turn)
    assert receipt["status"] == "replied" and receipt["reply"] == "safe", receipt
    assert not witness.exists()


@pytest.mark.slow
def test_a_node_killed_mid_turn_ends_node_lost(
    on_ray: Harness, cluster: ray_cluster.RayCluster
) -> None:
    """Last (it kills the second node, then brings a fresh one up): the turn ends `lost`,
    code `node-lost`, within 20 s; the lock is released; the earlier turn's commit is intact in
    the lead's branch; and nothing of the turn runs on — its watchdog killed it, even the part
    that left the partner's session. Then the receipt's `next`, `pair send`, re-places the unit
    on the fresh node and rebuilds its copy from the lead's branch: the lost turn's commit,
    made on the node and never bundled, is in neither the node's copy nor the lead's branch."""
    earlier, _ = on_ray.begin(COMMIT.format(text="earlier", name="earlier.txt"))
    done = receipt_of(on_ray, earlier)
    assert done["status"] == "replied" and done["runner"]["commits"]["fast_forwarded"], done
    head = git(on_ray.sandbox.repo, "rev-parse", "HEAD").strip()
    unbundled = COMMIT.format(text="lost-work", name="lost.txt")
    turn, _ = on_ray.begin(
        gated(unbundled + 'setsid sleep 300 &\necho "pids $$ $!"', "echo never", on_ray.gate_file)
    )

    def pids() -> list[int] | None:
        found = PIDS.search(on_ray.runner.read_transcript(turn.seq, turn.kind).data)
        return [int(pid) for pid in found.group(1).split()] if found else None

    processes = wait_until(pids, timeout=30)
    assert all(on_ray.process_alive(pid) for pid in processes)
    import time

    killed_at = time.monotonic()
    cluster.kill_node()
    try:
        receipt = receipt_of(on_ray, turn)
        took = time.monotonic() - killed_at
        assert receipt["status"] == "lost" and receipt["code"] == "node-lost", receipt
        assert took < 20, took
        assert receipt["next"].startswith("pair send --repo"), receipt["next"]
        assert not on_ray.runner.probe(turn.seq).held
        assert git(on_ray.sandbox.repo, "rev-parse", "HEAD").strip() == head
        assert (on_ray.sandbox.repo / "earlier.txt").read_text() == "earlier\n"
        # The watchdog's poll is 0.5 s; SPEC 4.3 allows 10 s from the actor's loss.
        wait_until(lambda: not any(on_ray.process_alive(pid) for pid in processes), timeout=10)
    finally:
        cluster.add_node()
    body = on_ray.sandbox.root / "again.md"
    body.write_text(COMMIT.format(text="after", name="after.txt"))
    sent = on_ray.sandbox.pair("send", "--kind", "task", "--body-file", str(body), "--write")
    assert sent.code == 0 and sent.document is not None, sent.stdout + sent.stderr
    again = sent.document
    assert again["status"] == "replied" and again["runner"]["commits"]["fast_forwarded"], again
    placed = again["runner"]
    assert placed["node_id"] == cluster.node_id(ray_cluster.NODE) != done["runner"]["node_id"]
    copy = Path(placed["home"]) / "worktree"
    for where in (copy, on_ray.sandbox.repo):
        assert git(where, "log", "--format=%s").split()[:2] == ["after", "earlier"], where
        assert "lost-work" not in git(where, "log", "--format=%s"), where
    assert not (copy / "lost.txt").exists()


@pytest.mark.slow
def test_clear_stops_the_nodes_turn_once_its_lead_supervisor_is_gone(on_ray: Harness) -> None:
    """The lead's supervisor dies while the node runs the turn on (what `pair clear` is for):
    `pair clear` has the node stop the turn — its shell's group and the `setsid` loop that left
    it — before the lock goes, says the node confirmed it, and nothing of the turn is left
    there: its processes are gone when clear returns and the file the loop wrote every 100 ms
    stops growing. The pair's next turn runs."""
    import psutil

    from registry.processes import group_members

    ticks = on_ray.sandbox.root / "ticks"
    loop = f"setsid sh -c 'while :; do echo x >> {ticks}; sleep 0.1; done' &\n"
    turn, running = on_ray.begin(loop + 'echo "pids $$ $!"\nwait\n')

    def pids() -> list[int] | None:
        found = PIDS.search(on_ray.runner.read_transcript(turn.seq, turn.kind).data)
        return [int(pid) for pid in found.group(1).split()] if found else None

    shell, looping = wait_until(pids, timeout=30)
    pgid = os.getpgid(shell)
    wait_until(lambda: ticks.exists() and ticks.stat().st_size > 0, timeout=30)
    os.kill(running["supervisor_pid"], signal.SIGKILL)
    lost = wait_until(lambda: p if (p := on_ray.runner.probe(turn.seq)).lost else None, timeout=30)
    assert lost.held and on_ray.process_alive(looping)  # the node runs the turn on

    cleared = on_ray.sandbox.pair("clear")
    assert cleared.code == 0 and cleared.document is not None, cleared.stdout + cleared.stderr
    document = cleared.document
    assert document["status"] == "cleared", document
    assert document["runner"]["node_turn"] == "stopped" and document["runner"]["pgid"] == pgid
    # From the node (this machine's processes): nothing of the turn is left, at once.
    assert not on_ray.process_alive(shell) and not on_ray.process_alive(looping)
    assert group_members(pgid) == []
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(ticks) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == [], leftovers
    size = ticks.stat().st_size
    # The loop's 100 ms tick: a file still growing would have grown within a second.
    assert not _grows(ticks, size, seconds=1.0)
    assert not on_ray.runner.probe(turn.seq).held
    again, _ = on_ray.begin("echo next")
    assert receipt_of(on_ray, again)["reply"] == "next"


def _grows(path: Path, size: int, *, seconds: float) -> bool:
    """Whether `path` grows past `size` within `seconds` (a poll with a deadline)."""
    try:
        wait_until(lambda: path.stat().st_size > size or None, timeout=seconds)
    except AssertionError:
        return False
    return True


@pytest.mark.slow
def test_clear_says_unknown_when_the_node_cannot_confirm(on_ray: Harness) -> None:
    """A dead turn's lock whose unit has no actor on the cluster (nothing there can say what
    runs): `pair clear` releases it — a lost node must not hold the pair for good — and says
    `unknown`, never `stopped`."""
    from pair.state import Marker, load_session, write_marker
    from registry.processes import identify

    gone = subprocess.Popen(["true"])
    identity = identify(gone.pid)
    gone.wait()
    assert identity is not None
    paths = PairPaths(state_dir_for(on_ray.sandbox.repo / ".git"))
    session = load_session(paths)
    assert session is not None
    marker = Marker(
        seq=session.seq + 1,
        kind="task",
        owner_token="gone",
        started_at="2026-12-02T08:00:00Z",
        supervisor=identity.to_json(),
        runner={"kind": "ray", "node": ray_cluster.NODE},
    )
    write_marker(paths, marker)
    cleared = on_ray.sandbox.pair("clear")
    assert cleared.code == 0 and cleared.document is not None, cleared.stdout + cleared.stderr
    assert cleared.document["status"] == "cleared", cleared.document
    node = cleared.document["runner"]
    assert node["node_turn"] == "unknown" and "not on the cluster" in node["reason"], node
    assert not on_ray.runner.probe(marker.seq).held


NODE_FAKE = """#!{python} -S
import os, sys
os.environ.update({environment!r})
sys.path.insert(0, {fakes!r})
from partner_fake import main
main("claude")
"""


def node_fake_claude(cluster: ray_cluster.RayCluster, **environment: str) -> str:
    """The fake claude as a node has it installed: its own scenario and log, not the lead's."""
    from tests.conftest import FAKES

    return NODE_FAKE.format(python=sys.executable, environment=environment, fakes=str(FAKES))


@pytest.mark.slow
@pytest.mark.ray_cluster
def test_a_bootstrap_on_ray_runs_on_the_node_and_names_its_partner_first(
    sandbox: Sandbox,
    fake_partners: Any,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Ray runner's bootstrap (SPEC 4.3), with every check of the contract's bootstrap case
    (`test_a_bootstrap_runs_in_the_foreground_and_names_its_partner_first`): it runs on the
    unit's node — the node's own claude, in the node's copy of the worktree, where the later
    turns resume the session it creates — in the caller's foreground; the partner is named (to
    the caller and in the marker) while it is alive, before anything waits on it; the call
    returns once it is gone, with its session id; the transcript streams back; what it left
    running on the node (a double-forked `setsid` grandchild) is killed and listed; the lease
    stays the caller's. The lead's own fake claude is never run."""
    from pair.runners.choice import RunnerChoice
    from pair.runners.ray import RayRunner

    ray_options(request, monkeypatch)
    cluster: ray_cluster.RayCluster = request.getfixturevalue("cluster")
    seconds = str(random.randint(4900, 5699))  # a command line no other test has
    node_log = sandbox.root / "node-partner.jsonl"
    # The node's partner waits, once it has replied, for the gate `partner_started` opens: a
    # partner on another machine is named after a poll, and a fake that exits at once could
    # be gone by then (the local case names a child it has just spawned).
    exit_gate = sandbox.root / "exit-gate"
    script = node_fake_claude(
        cluster,
        FAKE_SCENARIO="orphan",
        FAKE_ORPHAN_SECONDS=seconds,
        FAKE_LOG=str(node_log),
        FAKE_EXIT_GATE=str(exit_gate),
    )
    state_dir = state_dir_for(sandbox.repo / ".git")
    runner = RayRunner(state_dir, RunnerChoice("ray", ray_cluster.NODE, cluster.address))
    paths = PairPaths(state_dir)
    paths.transcripts_dir.mkdir(parents=True)
    lease = grant_bootstrap(paths, sandbox.repo, idle_minutes=1, total_minutes=2)
    prompt = paths.turn_file(0, "init", "-prompt.md")
    prompt.write_text("Reply now with one line saying you are ready.\n")
    turn_request = TurnRequest(
        partner="claude",
        sid="",
        seq=0,
        kind="init",
        write=False,
        model=None,
        effort=None,
        worktree=sandbox.repo,
        prompt_file=prompt,
        reply_file=paths.turn_file(0, "init", "-reply.md"),
        bootstrap=True,
    )
    named: list[tuple[int, bool, Any]] = []

    def partner_started(identity: Any) -> None:
        named.append((identity.pid, _alive(identity.pid), runner.probe(0)))
        exit_gate.write_text("named\n")

    turn = BootstrapTurn(
        lease=lease, request=turn_request, idle_seconds=60, total_seconds=120, partner_home=None
    )
    with cluster.install_cli("claude", script):
        result = runner.bootstrap(turn, on_partner_start=partner_started)
    assert len(named) == 1, named
    pid, alive_when_named, probed = named[0]
    assert alive_when_named and probed.held and probed.partner_pid == pid, named
    assert not _alive(pid)  # it returns once the partner is gone
    assert result.status == "replied" and result.outcome.sid == "claude-session-1", result
    assert b'"session_id"' in runner.read_transcript(0, "init").data
    assert [item["argv"] for item in result.leftovers] == [["sleep", seconds]], result.leftovers
    assert not _sleeping(seconds)
    held = runner.probe(0)
    assert held.held and held.pid == os.getpid(), held
    release_owned_marker(paths, lease.token)
    assert runner.probe(0) == Liveness(held=False, alive=False)
    # Where it ran: the node's CLI, in the node's copy (under the node's own root), never the
    # lead's.
    calls = [json.loads(line) for line in node_log.read_text().splitlines()]
    assert len(calls) == 1 and "--resume" not in calls[0]["argv"], calls
    node_root = cluster.node_root(ray_cluster.NODE)
    assert Path(calls[0]["cwd"]).resolve().is_relative_to(node_root.resolve()), calls
    assert fake_partners.calls("claude") == []
