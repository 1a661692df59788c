"""The pair steps create and restaff share: initialize, verify, send the first turn (or adopt it).

Each works on the unit's worktree through `pair.api` in-process, never through a subprocess.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pair import api as pair_api
from registry.errors import StateError
from registry.output import progress
from registry.records import PairRef, Staffing, UnitRecord
from unitmgr import port_leases
from unitmgr.lifecycle.journal import Journal, StepOutcome
from unitmgr.ownership import Ownership
from unitmgr.units import first_turn_resend

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from unitmgr.config import ProjectConfig


def runner_choice(
    runner: str | None,
    node: str | None,
    config: ProjectConfig | Callable[[], ProjectConfig],
    *,
    current: Staffing | None = None,
) -> pair_api.RunnerChoice:
    """Where a unit's turns run (SPEC 4.3): `--runner` (with `--node`, else any node), else
    `current`'s runner (a restaff keeps the unit's own, and its node unless `--node` names
    another: a unit never moves runner silently), else the config's `runner`;
    a ray choice takes the config's `[ray] address`. Refused before anything is written:
    `unknown-runner`, `invalid-node` (a bad name, or `--node` without ray),
    `ray-auth-required` (a non-loopback address without Ray's token auth) and
    `runner-unavailable` (Ray does not import). Contacts no cluster;
    `config` may be a function that loads it: a restaff that stays local never reads it."""

    def loaded() -> ProjectConfig:
        return config() if callable(config) else config

    if runner is None and current is not None:
        kind = current.runner_kind
        node = node if node is not None else current.node
    else:
        kind = runner if runner is not None else str(loaded().value("runner"))
    address = loaded().value("ray.address") if kind == "ray" else None
    choice = pair_api.RunnerChoice(kind=kind, node=node, address=address)
    pair_api.check_choice(choice)
    return choice


def session_runner(record: UnitRecord, staffing: Staffing) -> pair_api.RunnerChoice:
    """The choice `pair init` signs into the session: the staffing's runner and node, and the
    config's `[ray] address` now (approved again when a file gives it: it may have changed
    since the command's first check)."""
    if staffing.runner_kind == "local":
        return pair_api.RunnerChoice()
    from unitmgr import config_trust
    from unitmgr.config import load_config

    common_dir = Path(record.common_git_dir)
    config = load_config(Path(record.repository), common_dir)
    config_trust.require_approved(
        config, "ray.address", common_dir=common_dir, toplevel=Path(record.repository)
    )
    choice = pair_api.RunnerChoice(
        kind=staffing.runner_kind, node=staffing.node, address=config.value("ray.address")
    )
    return choice


def init_pair(
    record: UnitRecord,
    journal: Journal,
    step: str,
    staffing: Staffing,
    notify: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`pair init` (executor role) for `staffing` in the unit's worktree; records `record.pair`.

    The bootstrap child is journaled in `step` before anything waits on it. A bootstrap of this
    unit's that was cut off (its journaled child already stopped) leaves a dead marker, which is
    cleared first.
    """
    progress(f"unit {journal.command} {record.unit_id}: pair init ({staffing.partner})")
    record.resources.pair = True  # from here a rollback or dismantle ends whatever pair exists
    state_dir = pair_api.paths_for(record.worktree).state_dir
    if not pair_api.read_status(state_dir).get("ok"):
        pair_api.clear_state(state_dir)  # a cut-off bootstrap's dead marker, if any
    result = pair_api.init(
        record.worktree,
        partner=staffing.partner,
        lead=record.lead,
        identity=staffing.identity,
        model=staffing.model,
        effort=staffing.effort,
        role="executor",
        on_partner_start=lambda child: journal.note_child(step, child),
        branch=record.branch,  # the one branch its writable turns may move (the ref audit)
        unit=record.unit_id,  # UNITMGR_UNIT for the ref guard hook (SPEC 4.1)
        notify=notify,  # whom its supervisors tell when a turn ends (SPEC 3.15)
        # Every turn's partner gets the unit's ports (SPEC 3.19), whoever sends the turn.
        environment=port_leases.variables(record.ports),
        # Where its turns run (SPEC 4.3), signed into the session: always passed, so a unit
        # moved back to this machine leaves no earlier ray choice behind.
        runner=session_runner(record, staffing),
    )
    record.pair = PairRef(
        sid=result["sid"],
        state_dir=result["state_dir"],
        latest_seq=result["seq"],
        identity=result["identity"],
        identity_home=result["identity_home"],
        model_resolved=result["model_resolved"],
        model_source=result["model_source"],
        resolved_at=result["resolved_at"],
    )
    return {"status": result["status"], "sid": result["sid"], "state_dir": result["state_dir"]}


def verify_pair(record: UnitRecord, staffing: Staffing) -> dict[str, Any]:
    """The pair in the worktree must be the one the staffing asks for."""
    assert record.pair is not None
    status = pair_api.read_status(str(record.pair.state_dir))
    if not status.get("ok"):
        raise StateError(
            "pair-missing", f"cannot prove the initialized pair: {status.get('reason')}"
        )
    expected = {
        "partner": staffing.partner,
        "role": "executor",
        "model": staffing.model,
        "effort": staffing.effort,
        "identity": staffing.identity,
    }
    for name, wanted in expected.items():
        if status.get(name) != wanted:
            raise StateError(
                "pair-mismatch",
                f"recorded pair {name} differs: expected {wanted or 'CLI-default'}, observed "
                f"{status.get(name) or 'CLI-default'}",
                next_step=f"unit dismantle --unit {record.unit_id} --force {record.unit_id}",
            )
    record.pair.sid = status["sid"]
    return {"sid": status["sid"]}


def send_or_adopt(record: UnitRecord, *, body: str, what: str) -> dict[str, Any]:
    """Send the first task turn of a new pair, or adopt the one an earlier attempt sent."""
    assert record.pair is not None
    status = pair_api.read_status(str(record.pair.state_dir))
    if not status.get("ok"):
        raise StateError("pair-missing", f"cannot prove the pair: {status.get('reason')}")
    in_flight = status.get("in_flight")
    if pair_api.never_started(status):
        # An earlier attempt took the turn and was killed before starting it: nothing reached
        # the partner, so there is nothing to adopt. Release its dead lock and send.
        pair_api.clear_state(str(record.pair.state_dir))
    elif status["seq"] >= 1 or in_flight:
        # Never a second first turn: the earlier attempt's turn is the one.
        record.pair.latest_seq = (in_flight or {}).get("seq") or status["seq"]
        # Derived from the pair's own state dir, never a path a receipt names (SPEC 8).
        record.pair.latest_receipt_file = receipt_path(status, record.pair.latest_seq)
        return {"adopted": True, "seq": record.pair.latest_seq}
    progress(f"unit {record.unit_id}: sending {what}")
    running = pair_api.send(
        record.worktree, kind="task", body=body, lead=record.lead, background=True
    )
    record.pair.latest_seq = running["seq"]
    record.pair.latest_receipt_file = running["receipt_file"]
    return {"seq": running["seq"], "receipt_file": running["receipt_file"]}


def receipt_path(status: dict[str, Any], seq: int) -> str | None:
    state_dir = status.get("state_dir")
    kind = (status.get("turn") or {}).get("kind")
    if not state_dir or not kind:
        return None
    return str(pair_api.paths_at(state_dir).receipt_file(seq, kind))


def report_first_turn(document: dict[str, Any], record: UnitRecord) -> None:
    """SPEC 3.3 First turn: when the first turn has already ended as create prints, its receipt
    goes into the output as `first_turn`; a failed one refuses (`first-turn-failed`, exit 1)
    with the receipt in `detail` — the unit stays `working`, and its recovery resends the task
    or restaffs it."""
    if record.pair is None or not record.pair.state_dir or not record.pair.latest_seq:
        return
    receipt = pair_api.ended_receipt(record.pair.state_dir, record.pair.latest_seq)
    if receipt is None:
        return
    settle_view(document.get("unit"), receipt)
    if receipt.get("ok"):
        document["first_turn"] = receipt
        return
    raise StateError(
        "first-turn-failed",
        f"unit {record.unit_id} was created, but its first turn ended {receipt.get('status')}: "
        f"{receipt.get('reason')}",
        detail={"receipt": receipt, "unit": document.get("unit")},
        next_step=first_turn_resend(record),
    )


def settle_view(unit: Any, receipt: dict[str, Any]) -> None:
    """The described unit's pair as the ended turn's receipt says (one source of truth): the
    view was read before the turn ended, so it may still show that turn in flight while
    `first_turn` says it replied. The receipt is written before the marker goes, so it wins."""
    observed = unit.get("observed") if isinstance(unit, dict) else None
    if not isinstance(observed, dict):
        return
    pair = observed.get("pair")
    if not isinstance(pair, dict) or not pair.get("ok"):
        return
    in_flight = pair.get("in_flight")
    if isinstance(in_flight, dict) and in_flight.get("seq") == receipt.get("seq"):
        pair["in_flight"] = None
    if pair.get("seq") == receipt.get("seq"):
        pair["latest_receipt"] = receipt
        observed["latest_receipt"] = receipt


def end_proven_pair(ownership: Ownership, outcome: StepOutcome, *, skipped: str) -> bool:
    """End the pair session of the worktree git proves is the unit's (SPEC 2.5: ending a pair is
    destructive, so never a state dir the record merely names). Fills `outcome` (`ended`,
    `cleared`, or `skipped`); returns whether a session was ended."""
    state_dir = ownership.pair_state_dir(ownership.worktree())
    closed = pair_api.close_state(state_dir) if state_dir is not None else {}
    if not closed.get("ended_dir"):
        outcome.skip(skipped)
        return False
    if closed["cleared"]:
        outcome["cleared"] = closed["cleared"]
    if closed.get("runner"):  # a Ray session's actor, retired (or why it could not be)
        outcome["runner"] = closed["runner"]
    outcome["ended"] = closed["ended_dir"]
    return True
