"""`attention {state, since, why}` (SPEC 3.4): who a unit waits on, for a person and a lead.

One pure function, `derive`, turns what `status --all`, `list`, `status --unit` and `wait` have
already read — the lifecycle, the pair's state from `pair.api.read_status`, the unit's recovery
(SPEC 3.1) and the record's `updated_at` — into one state. It reads no file, runs no git, asks
no GitHub and never looks at the clock itself (`now` is passed in), so the table of cases in
tests/test_attention.py covers it without a CLI. It must not grow a read: a caller that needs a
new fact reads it, cheaply, and passes it in.

When several states apply, the one the lead must act on first wins (references/decisions.md):
recovery > failed > rate-limited > stuck > running > waiting-on-lead > idle.
"""

from __future__ import annotations

from pair.attention import first_line, of_receipt, state
from registry.timeutil import ago, parse_iso

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


# The states `unit watch`'s banner names and that notify (SPEC 3.15) announces: the lead acts.
NEEDS_LEAD = ("recovery", "failed", "rate-limited", "stuck", "waiting-on-lead")


def age_at(since: str | None, observed_at: str) -> str:
    """How long before `observed_at` the state began (`ago`), `?` when unknown."""
    if not since:
        return "?"
    try:
        return ago((parse_iso(observed_at) - parse_iso(since)).total_seconds())
    except ValueError:
        return "?"


def waiting_on_you(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The units the lead must act on (SPEC 3.10), in the order `unit watch`'s banner and the
    tables name them: the state to act on first, then the unit id."""
    rank = {state: index for index, state in enumerate(NEEDS_LEAD)}
    waiting = [unit for unit in units if (unit.get("attention") or {}).get("state") in rank]
    return sorted(waiting, key=lambda unit: (rank[unit["attention"]["state"]], unit["unit_id"]))


def feedback_summary(ledger: Any) -> str | None:
    """The record's feedback ledger in one line (SPEC 3.17): `feedback: 2 CI, 3 review
    pending, 1 withheld` — what the last send left, read without asking GitHub."""
    counts = ledger.get("counts") if isinstance(ledger, dict) else None
    if not isinstance(counts, dict):
        return None
    # The record is the executor's to write: a count that is no small whole number is none
    # (one planted string took `status --all` down for every unit).
    ci, review, withheld = (_count(counts.get(key)) for key in ("ci", "review", "withheld"))
    if not (ci or review or withheld):
        return None
    return f"feedback: {ci} CI, {review} review pending, {withheld} withheld"


CAPPED_NOT_OURS = (
    "feedback: the automatic rounds stopped; the ledger's note is not one this lead writes "
    "(an executor can write the record): unit feedback --unit <unit> --dry-run shows the PR's state"
)


def capped_why(value: Any) -> str:
    """The feedback ledger's cap note, as the lead shows it. The record is the executor's to
    write (SPEC 8): a note is shown only in the shape `unit feedback` writes it — one printable
    line starting `feedback:`, within the attention's bound — and a planted one of any other
    shape (many lines, escapes, megabytes: it reached every `status --all`) is replaced by
    a fixed sentence."""
    text = value if isinstance(value, str) else ""
    line = first_line(text)
    if line.startswith("feedback:") and line == text and line.isprintable():
        return line
    return CAPPED_NOT_OURS


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1_000_000:
        return value
    return 0


def _epoch(text: str | None) -> float | None:
    try:
        return parse_iso(text).timestamp() if text else None
    except ValueError:
        return None


def _state(name: str, since: str | None, why: str) -> dict[str, Any]:
    return state(name, since, why)


def busy_why(busy: dict[str, Any]) -> str:
    command = busy.get("command")
    if not command:
        return "a command of the lead's holds the unit lock"
    return f"{command} is running (pid {busy.get('pid')})"


def derive(
    *,
    lifecycle: str,
    pair: dict[str, Any] | None,
    recovery: dict[str, Any] | None,
    updated_at: str | None,
    now: float,
    stuck_after: float,
    busy: dict[str, Any] | None = None,
    feedback: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The unit's attention. `pair` is `pair.api.read_status`'s document (or None without a
    pair); `recovery` is `{needed, why, command}`; `stuck_after` is in seconds; `busy` is the
    unit lock's live holder (`registry.locks.held_by`), when one of the lead's own commands
    is running on the unit: then the unit waits on that command, never on a recovery."""
    if busy is not None:
        return _state("busy", busy.get("since") or updated_at, busy_why(busy))
    if recovery and recovery.get("needed"):
        return _state("recovery", updated_at, str(recovery.get("why") or "needs recovery"))
    if lifecycle == "unreadable":
        return _state("recovery", updated_at, "record unreadable")
    capped = feedback.get("capped") if isinstance(feedback, dict) else None
    if isinstance(capped, dict) and capped.get("why"):
        # SPEC 3.17: the automatic rounds are spent; the lead reads the PR and decides.
        since = capped.get("at") if isinstance(capped.get("at"), str) else None
        return _state("failed", since, capped_why(capped["why"]))
    pair = pair or {}
    if not pair.get("ok"):
        if pair.get("code") == "no-pair":
            return _state("idle", updated_at, "no pair session yet")
        return _state("failed", updated_at, f"pair state: {pair.get('reason') or 'unreadable'}")
    in_flight = pair.get("in_flight")
    if in_flight and "unreadable" in in_flight:
        return _state("failed", updated_at, f"in-flight marker unreadable: {in_flight['error']}")
    if in_flight and in_flight.get("alive") is False:
        # A dead marker: recovery names `pair clear` for a working unit; this is the rest.
        return _state("failed", in_flight.get("started_at"), f"#{in_flight.get('seq')} turn lost")
    if in_flight:
        return _in_flight(in_flight, pair.get("turn") or {}, now, stuck_after)
    receipt = pair.get("latest_receipt")
    if not receipt:
        return _state("idle", updated_at, "no turn yet")
    return of_receipt(receipt, updated_at=updated_at)


def _in_flight(
    in_flight: dict[str, Any], turn: dict[str, Any], now: float, stuck_after: float
) -> dict[str, Any]:
    seq, kind = in_flight.get("seq"), in_flight.get("kind") or turn.get("kind")
    label = f"#{seq} {kind}" if kind else f"#{seq}"
    started = in_flight.get("started_at")
    if (in_flight.get("heavy_queue") or {}).get("queued"):
        return _state("running", started, f"{label} queued on the heavy slot")
    last_output = turn.get("last_output_at") if turn.get("seq") == seq else None
    quiet_since = _epoch(last_output) or _epoch(started)
    quiet = now - quiet_since if quiet_since is not None else 0.0
    if quiet >= stuck_after:
        since = last_output or started
        return _state("stuck", since, f"{label} no output for {ago(quiet)}")
    if last_output:
        return _state("running", started, f"{label} running, last output {ago(quiet)} ago")
    return _state("running", started, f"{label} running, no output yet")


def of_view(
    view: dict[str, Any],
    pair: dict[str, Any] | None,
    *,
    now: float,
    stuck_after: float,
    busy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`derive` for a unit document that carries `lifecycle`, `recovery` and `updated_at`."""
    return derive(
        lifecycle=str(view.get("lifecycle")),
        pair=pair,
        recovery=view.get("recovery"),
        updated_at=view.get("updated_at"),
        now=now,
        stuck_after=stuck_after,
        busy=busy,
        feedback=view.get("feedback"),
    )
