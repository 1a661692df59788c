"""`LocalRunner`: turns run on this machine, under a detached supervisor (`pair.supervisor`).

The default implementation of `pair.runners.base.TurnRunner`. `start` launches the supervisor
(`pair.launch`: forked, or `python -m pair _supervise`); the supervisor records itself and the
partner in the in-flight marker, runs the turn, writes the transcript and the receipt, and
releases the marker. Everything else here reads those files and probes the processes the marker
names (pid and start time, never a bare pid): nothing is kept in memory between calls, so any
process — `pair`, `unit`, a test — may call any method. `cancel` signals the supervisor (which
owns the receipt and is the subreaper of the partner's descendants) and, when none is left,
stops the turn itself.

It never imports GitPython or PyGithub, and never touches another pair's state dir. Just over
400 lines because the Ray runner inherits its file-only half (probe, receipt, clear, cancel's
fallback) and overrides single steps of it: the steps stay in one place, each a method.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from collections.abc import Callable
from pathlib import Path

from pair.errors import StateError
from pair.launch import start_supervisor
from pair.paths import PairPaths
from pair.proof import (
    TURN_TOKEN_VARIABLE,
    partner_proof,
    proven_live_pid,
    refuse_untrusted,
    supervisor_proof,
    turn_environment,
    untrusted,
)
from pair.runners.base import (
    DEFAULT_CANCEL_REASON,
    TRANSCRIPT_READ_BYTES,
    BootstrapTurn,
    Liveness,
    Reaped,
    TranscriptChunk,
    TurnStart,
)
from pair.state import (
    BOOTSTRAP_KIND,
    Marker,
    MarkerUnreadable,
    Session,
    load_session,
    marker_mutex,
    read_marker,
    read_receipt,
    receipt_file_of,
    record_lost_turn,
    update_owned_marker,
    write_marker,
)
from registry import bounded
from registry import light_dataclass as dataclasses
from registry.atomic import remove_file, write_text_atomic
from registry.processes import (
    ProcessIdentity,
    group_members,
    is_alive,
    kill_tree,
    reap_processes_marked,
)
from registry.timeutil import iso_z

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from pair.turn import TurnResult

POLL_SECONDS = 0.05
CANCEL_GRACE_SECONDS = 5.0
# The supervisor's kill (SIGTERM, SIGKILL after 5 s), its sweep and its receipt, with slack.
CANCEL_WAIT_SECONDS = 20.0


class LocalRunner:
    """The turns of the pair in `state_dir`, run by detached supervisors on this machine."""

    def __init__(self, state_dir: Path) -> None:
        self.paths = PairPaths(state_dir)

    def start(self, turn: TurnStart) -> dict[str, Any]:
        # The marker holds the turn's base commit from its grant (`grant_turn`).
        return start_supervisor(self.paths, turn.worktree, turn.seq, turn.kind, turn.lease.token)

    def bootstrap(
        self,
        turn: BootstrapTurn,
        *,
        on_partner_start: Callable[[ProcessIdentity], None] | None = None,
    ) -> TurnResult:
        # In this process, not under a supervisor: `init` waits for the session id anyway, and
        # its caller (a unit's create) journals the partner as its own child (SPEC 8).
        from pair.environment import partner_environment
        from pair.partners import adapter_for
        from pair.turn import Budgets, run_turn

        def started(identity: ProcessIdentity) -> None:
            update_owned_marker(self.paths, turn.lease.token, partner=identity.to_json())
            if on_partner_start is not None:
                # With the token its environment carries: what proves it on a resume (SPEC 8).
                on_partner_start(dataclasses.replace(identity, token=turn.lease.token))

        # No subreaper here (the caller is `pair init` or `unit create`, whose other children
        # are not the turn's): what the partner started and left — even through `setsid` and a
        # double fork — is found by a variable only this turn's processes inherit (SPEC 8).
        environment = partner_environment(codex_home=turn.partner_home)
        environment.update(turn_environment(self.paths.state_dir, turn.lease.token))
        try:
            result = run_turn(
                adapter_for(turn.request.partner),
                turn.request,
                transcript=self.paths.transcript_file(turn.lease.epoch, BOOTSTRAP_KIND),
                budgets=Budgets(turn.idle_seconds, turn.total_seconds, raise_with="pair init"),
                environment=environment,
                on_partner_start=started,
            )
        finally:
            escaped = reap_processes_marked(TURN_TOKEN_VARIABLE, turn.lease.token)
        known = {item.get("pid") for item in result.leftovers}
        result.leftovers.extend(item for item in escaped if item["pid"] not in known)
        return result

    def read_transcript(
        self, seq: int, kind: str, *, offset: int = 0, limit: int = TRANSCRIPT_READ_BYTES
    ) -> TranscriptChunk:
        if offset < 0 or limit < 1:
            raise ValueError(f"offset {offset} and limit {limit}: want offset >= 0, limit >= 1")
        path = self.paths.transcript_file(seq, kind)
        try:  # bounded, never through a symlink, never a FIFO (SPEC 8)
            data, _ = bounded.read_range(path, offset, limit, below=self.paths.state_dir.parent)
        except (FileNotFoundError, bounded.Unreadable):
            data = b""
        return TranscriptChunk(data=data, offset=offset, next_offset=offset + len(data))

    def receipt(self, seq: int) -> dict[str, Any] | None:
        path = receipt_file_of(self.paths, load_session(self.paths), seq)
        receipt = read_receipt(path) if path else None
        if receipt is None:
            return None
        marker = self._marker_of(seq)
        # Written but not yet final: a supervisor still holding the lock may add a note to it.
        if marker is not None and is_alive(ProcessIdentity.from_json(marker.supervisor)):
            return None
        return receipt

    def probe(self, seq: int) -> Liveness:
        marker = self._marker_of(seq)
        if marker is None:
            # The supervisor releases the marker only after the turn's processes are gone. (An
            # unreadable marker reads as none here; `reap` refuses it.)
            return Liveness(held=False, alive=False)
        pid = marker.live_pid()
        return Liveness(
            held=True,
            alive=pid is not None,
            lost=_lost_reason(marker),
            pid=pid,
            kind=marker.kind,
            partner_pid=(marker.partner or {}).get("pid"),
        )

    def cancel(self, seq: int | None, *, reason: str) -> dict[str, Any] | None:
        session = load_session(self.paths)
        if session is None:
            return None  # no session, no turn: a bootstrap runs in its `pair init`, not here
        marker = _request_cancel(self.paths, session.worktree, seq, reason)
        if marker is None:
            return None
        return _await_cancel(
            self.paths,
            session,
            marker,
            wait_seconds=self.cancel_wait_seconds,
            unsupervised=self._unsupervised_stop(),
        )

    # How long a cancel waits for the turn's supervisor to write the receipt before it stops
    # the turn itself.
    cancel_wait_seconds = CANCEL_WAIT_SECONDS

    def _unsupervised_stop(self) -> Callable[[Session, Marker], tuple[str, str]] | None:
        """How a cancel stops a turn no supervisor is left to stop — `(status, how)` for its
        receipt — when the partner is not this machine's; None: kill its tree here."""
        return None

    def reattach(self, seq: int) -> bool:
        return False  # a local turn's partner dies with its supervisor (the subreaper's sweep)

    def release(self) -> dict[str, Any] | None:
        return None  # nothing of a local session lives anywhere but its files

    def reap(self) -> Reaped:
        paths = self.paths
        lock_file = str(paths.marker_file)
        if not paths.marker_file.exists():
            # Nothing to reap, and nothing written (not even the marker lock) where no pair is.
            return Reaped(status="already-cleared", lock_file=lock_file)
        with marker_mutex(paths):
            try:
                marker = read_marker(paths)
            except MarkerUnreadable:
                raise StateError(
                    "marker-unreadable",
                    f"the in-flight marker {paths.marker_file} cannot be read — inspect it by "
                    "hand and remove it once no partner process remains",
                ) from None
            if marker is None:
                return Reaped(status="already-cleared", lock_file=lock_file)
            # Only a process proven the turn's keeps its marker (SPEC 8): one the marker merely
            # names is not the turn's, is never signalled, and is listed in the answer.
            pid = proven_live_pid(paths, marker)
            if pid is not None:
                raise StateError(
                    "turn-in-flight",
                    f"seq {marker.seq} is still in flight as pid {pid} — clear it only after "
                    "that process is gone",
                    detail={"seq": marker.seq, "pid": pid},
                )
            strangers = untrusted(paths, marker)
            # The turn is lost, not gone: its receipt says so before its marker goes (SPEC 3.4).
            record_lost_turn(paths, marker, found_by="pair clear")
            remove_file(paths.marker_file)
        return Reaped(
            status="cleared", lock_file=lock_file, marker=marker.to_json(), untrusted=strangers
        )

    def _marker_of(self, seq: int) -> Marker | None:
        try:
            marker = read_marker(self.paths)
        except MarkerUnreadable:
            return None
        return marker if marker is not None and marker.seq == seq else None


def _request_cancel(paths: PairPaths, worktree: str, seq: int | None, why: str) -> Marker | None:
    """Record the cancel in the marker of the turn in flight; None when none (or not `seq`)."""
    with marker_mutex(paths):
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            raise StateError(
                "marker-unreadable",
                f"the in-flight marker {paths.marker_file} cannot be read — inspect it, confirm "
                "no partner process remains, then run pair clear",
                next_step=shlex.join(["pair", "clear", "--repo", str(worktree)]),
            ) from None
        if marker is None or (seq is not None and marker.seq != seq):
            return None
        if marker.seq == 0:
            raise StateError(
                "bootstrap-in-flight",
                f"a bootstrap is in flight in {paths.state_dir}, not a turn — interrupt the pair "
                "init that runs it",
                next_step="interrupt the running pair init (or unit create); then pair clear",
            )
        refuse_untrusted(paths, marker, worktree)  # before anything is written or signalled
        if marker.cancel is None:  # a cancel already asked is waited for, not asked again
            marker.cancel = {"reason": why, "requested_at": iso_z()}
            write_marker(paths, marker)
        return marker


def _await_cancel(
    paths: PairPaths,
    session: Session,
    marker: Marker,
    *,
    wait_seconds: float = CANCEL_WAIT_SECONDS,
    unsupervised: Callable[[Session, Marker], tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Signal the turn's supervisor until its receipt is written and the marker released; stop
    the turn without it (`unsupervised`: the runner's way, which says the receipt's status)
    when none is left or it has not answered within `wait_seconds`. The receipt.

    Every round proves again what the marker names (it can be rewritten meanwhile): a live
    process it does not prove is `record-untrusted`, and nothing is signalled."""
    receipt_file = paths.turn_file(marker.seq, marker.kind, "-receipt.json")
    deadline = time.monotonic() + wait_seconds
    signalled: set[int] = set()
    while True:
        try:
            current = read_marker(paths)
        except MarkerUnreadable:
            current = marker
        if current is None or current.owner_token != marker.owner_token:
            receipt = read_receipt(receipt_file)
            if receipt is not None and "unreadable" not in receipt:
                _confirm_dead(paths, marker)
                return receipt
        else:
            marker = current  # the latest view: the partner may have been recorded since
            refuse_untrusted(paths, marker, session.worktree)
            supervisor = ProcessIdentity.from_json(marker.supervisor)
            launcher = ProcessIdentity.from_json(marker.launcher)
            stuck = time.monotonic() > deadline
            if supervisor is not None and is_alive(supervisor) and not stuck:
                if supervisor.pid not in signalled:
                    os.kill(supervisor.pid, signal.SIGTERM)
                    signalled.add(supervisor.pid)
            elif supervisor is not None or stuck or not is_alive(launcher):
                # Nobody left (or able) to write the receipt: a dead supervisor, a send killed
                # before its supervisor took the turn, or a supervisor that does not answer.
                if supervisor is not None:
                    kill_tree(supervisor, proof=supervisor_proof(paths.state_dir), grace_seconds=0)
                receipt = _cancel_unsupervised(paths, session, marker, unsupervised)
                if receipt is not None:
                    _confirm_dead(paths, marker)
                    return receipt
        time.sleep(POLL_SECONDS)


def _cancel_unsupervised(
    paths: PairPaths,
    session: Session,
    marker: Marker,
    stop: Callable[[Session, Marker], tuple[str, str]] | None = None,
) -> dict[str, Any] | None:
    """Stop what remains of a turn with no supervisor (`stop`: the runner's way; default: kill
    the partner's tree here), write its receipt and release its marker; None when the marker
    stopped being this turn's meanwhile (its supervisor finished)."""
    from pair.receipts import minimal_receipt

    leftovers: list[dict[str, Any]] = []
    if stop is None:
        partner = ProcessIdentity.from_json(marker.partner)
        proof = partner_proof(paths, marker)
        killed = (
            kill_tree(partner, proof=proof, grace_seconds=CANCEL_GRACE_SECONDS) if partner else []
        )
        leftovers = [{"pid": pid, "argv": []} for pid in killed if partner and pid != partner.pid]
        status, how = "cancelled", "no supervisor was left; cancel stopped the partner itself"
    else:
        status, how = stop(session, marker)
    why = str((marker.cancel or {}).get("reason") or DEFAULT_CANCEL_REASON)
    word = "cancelled" if status == "cancelled" else "cancel unconfirmed"
    receipt = minimal_receipt(
        paths,
        session,
        marker,
        status=status,
        reason=f"{word}: {why} ({how})",
        supervisor_pid=(marker.supervisor or {}).get("pid"),
        started_at=None,
        leftovers=leftovers,
    )
    with marker_mutex(paths):
        try:
            current = read_marker(paths)
        except MarkerUnreadable:
            current = marker
        if current is None or current.owner_token != marker.owner_token:
            return None
        write_text_atomic(Path(receipt["receipt_file"]), json.dumps(receipt, indent=2) + "\n")
        remove_file(paths.marker_file)
    return receipt


def _confirm_dead(paths: PairPaths, marker: Marker) -> None:
    """No process of the cancelled turn may be alive when cancel returns (only those proven
    the turn's are signalled: the marker may have been planted)."""
    partner = ProcessIdentity.from_json(marker.partner)
    if partner is not None and (
        is_alive(partner) or (partner.pgid is not None and group_members(partner.pgid))
    ):
        kill_tree(partner, proof=partner_proof(paths, marker), grace_seconds=CANCEL_GRACE_SECONDS)
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    # It has written its receipt and released the marker: it only has to exit.
    if supervisor is not None and not _gone_within(supervisor, CANCEL_GRACE_SECONDS):
        kill_tree(supervisor, proof=supervisor_proof(paths.state_dir), grace_seconds=0.0)


def _gone_within(identity: ProcessIdentity, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while is_alive(identity):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True


def _lost_reason(marker: Marker) -> str | None:
    """Why this marker's turn can no longer produce a receipt, or None while it still can."""
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    if supervisor is not None:
        if is_alive(supervisor):
            return None
        return f"the supervisor pid {supervisor.pid} exited before it wrote a receipt"
    launcher = ProcessIdentity.from_json(marker.launcher)
    if launcher is not None and is_alive(launcher):
        return None
    return "the turn's launcher exited before a supervisor took the turn"
