"""What the supervisor tells the session's notify target when a turn ends (SPEC 3.15).

`turn-ended` for every turn, and `attention` when the turn leaves the unit waiting on someone:
`waiting-on-lead` (a reply: the executor is idle until the lead answers), `failed` or
`rate-limited` — the states SPEC 3.4 derives from the same receipt — and, while a turn runs,
`attention: stuck` once its partner has been quiet for the unit's stuck threshold
(`StuckAlarm`). The supervisor is already
detached, so it delivers here in-process, after the receipt is written and the marker released:
no caller waits for it, and the next turn may start meanwhile.

It imports `registry.notify` only for a session that has a target, reads nothing but what it is
handed (and the lead's key, to check the target's MAC), and never raises into the supervisor.
The session is the executor's to write, so a target runs only when the lead's MAC for this state
dir covers it (`registry.signing.verified_target`, SPEC 8); a planted one is ignored.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pair.attention import of_receipt

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    import threading
    from typing import Any

    from registry.notify import Target


def attention_for(receipt: dict[str, Any]) -> dict[str, Any] | None:
    """The attention the turn's end leaves (`{state, since, why}`), as every view computes it
    (pair/attention.py), or None when it waits on nobody."""
    found = of_receipt(receipt)
    return None if found["state"] == "idle" else found


def _lead_target(notify: dict[str, Any] | None, state_dir: Path) -> dict[str, Any] | None:
    """The session's target when the lead's MAC covers it at `state_dir`, else None."""
    if not notify:
        return None
    from registry.signing import verified_target

    found = verified_target(state_dir, notify)
    if found is None:
        print(
            "notification not sent: the session's target is not signed by the lead", file=sys.stderr
        )
    return found


def announce_turn_end(
    notify: dict[str, Any] | None, receipt: dict[str, Any], state_dir: Path
) -> None:
    """Deliver `turn-ended` and `attention` for `receipt` to the session's target, if any."""
    if not notify:
        return
    from registry import notify as delivery

    try:
        notify = _lead_target(notify, state_dir)
        if notify is None:
            return
        target = delivery.Target.from_json(notify)
        if target is None:
            return
        summary = delivery.receipt_summary(receipt)
        if target.settings.wants("turn-ended"):
            delivery.deliver(target, delivery.payload(target, "turn-ended", receipt=summary))
        attention = attention_for(receipt)
        if attention is not None and target.settings.wants("attention"):
            document = delivery.payload(target, "attention", attention=attention, receipt=summary)
            delivery.deliver(target, document)
    except Exception as error:  # a notification never costs the turn anything
        print(f"notification failed: {type(error).__name__}: {error}", file=sys.stderr)


class StuckAlarm:
    """`attention: stuck` (SPEC 3.4, 3.15) for a turn whose partner has gone quiet.

    The supervisor is the one process that sees the stream go quiet, so it announces it — once
    per quiet stretch, not once per reader that notices. The session's target carries the
    threshold (`stuck_seconds`, which unit derives as `status` does). Delivery runs in a thread
    so the streaming loop never waits on a sink; `join` waits for it (each sink has its own
    timeout) before the supervisor sweeps its descendants, which would kill a sink's process.
    """

    def __init__(self, target: Target, seconds: float, seq: int, kind: str) -> None:
        self.target, self.seconds, self.seq, self.kind = target, seconds, seq, kind
        self.deliveries: list[threading.Thread] = []

    def ring(self, quiet_seconds: float) -> None:
        import threading

        from registry import notify as delivery
        from registry.timeutil import ago, iso_from_epoch

        attention = {
            "state": "stuck",
            "since": iso_from_epoch(time.time() - quiet_seconds),
            "why": f"#{self.seq} {self.kind} no output for {ago(quiet_seconds)}",
        }
        document = delivery.payload(self.target, "attention", attention=attention)
        thread = threading.Thread(
            target=_deliver_quietly, args=(self.target, document), name="notify-stuck"
        )
        thread.start()
        self.deliveries.append(thread)

    def join(self) -> None:
        for thread in self.deliveries:
            thread.join()


def stuck_alarm(
    notify: dict[str, Any] | None, seq: int, kind: str, state_dir: Path
) -> StuckAlarm | None:
    """The alarm for turn `seq`, when the session's target wants `attention` and names a
    threshold; None otherwise (nothing imported)."""
    if not notify or not notify.get("stuck_seconds"):
        return None
    from registry import notify as delivery

    notify = _lead_target(notify, state_dir)
    if notify is None:
        return None

    target = delivery.Target.from_json(notify)
    if target is None or target.stuck_seconds is None or not target.settings.wants("attention"):
        return None
    return StuckAlarm(target, target.stuck_seconds, seq, kind)


def _deliver_quietly(target: Target, document: dict[str, Any]) -> None:
    from registry import notify as delivery

    try:
        delivery.deliver(target, document)
    except Exception as error:  # a notification never costs the turn anything
        print(f"notification failed: {type(error).__name__}: {error}", file=sys.stderr)
