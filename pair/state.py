"""A pair's session and the one-turn-at-a-time marker, read and written in the files that
`pair.paths` names.

The marker is never taken over: a dead one is removed only by `clear`, after proving that none of
its processes (launcher, supervisor, partner and the partner's process group) is alive. Every
change to it happens under `in-flight.lock`, so a supervisor's update can never resurrect a marker
that `clear` removed or overwrite a newer turn's marker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

from pair.errors import StateError
from pair.paths import PairPaths
from registry import bounded
from registry import light_dataclass as dataclasses
from registry.atomic import remove_file, write_text_atomic
from registry.locks import Deadline, FileLock
from registry.processes import ProcessIdentity, group_members, is_alive
from registry.records import Record, RecordTooNew, RecordUnreadable

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

SESSION_SCHEMA_VERSION = 1
TURN_KINDS = ("task", "review", "question", "ready", "accepted", "blocked", "stalemate", "handoff")
BOOTSTRAP_KIND = "init"


@dataclasses.dataclass(kw_only=True)
class Session(Record):
    schema_version: int = SESSION_SCHEMA_VERSION
    partner: str
    sid: str
    seq: int = 0
    latest_kind: str | None = None
    lead: str = "lead"
    role: str = "executor"
    model: str | None = None
    effort: str | None = None
    identity: str = "default"
    identity_home: str | None = None
    model_resolved: str | None = None
    model_source: str | None = None
    resolved_at: str | None = None
    partner_bin: str | None = None
    partner_bin_version: str | None = None
    # The branch writable turns may move (the ref audit); None: the worktree's branch per turn.
    branch: str | None = None
    # The unit this pair works for (unitmgr passes it): UNITMGR_UNIT in the partner's environment.
    unit: str | None = None
    # identity -> why: the account cannot report rate limits, so no turn asks again.
    rate_limits_refused: dict[str, str] | None = None
    # Whom the supervisor tells when a turn ends (SPEC 3.15): `registry.notify.Target`'s JSON,
    # passed in at init by a caller like `unit`; None: nothing is sent.
    notify: dict[str, Any] | None = None
    # Variables every turn's partner gets, passed in at init by a caller like `unit` (a unit's
    # UNIT_PORT and UNIT_PORTS, SPEC 3.19); pair.environment.session_variables filters them.
    environment: dict[str, Any] | None = None
    # The lead's MAC of pair/session_trust.py's `SIGNED_SESSION_FIELDS`: {key, mac}.
    signature: dict[str, Any] | None = None
    # Where its turns run (SPEC 4.3): `pair.runners.choice.RunnerChoice`'s JSON with the lead's
    # MAC (`sign_choice`); None: this machine. Verified before any use (`runner-untrusted`).
    runner: dict[str, Any] | None = None
    worktree: str
    state_dir: str
    transcripts: str
    created_at: str


@dataclasses.dataclass(kw_only=True)
class Marker(Record):
    seq: int
    kind: str
    owner_token: str
    started_at: str
    write: bool = False
    idle_seconds: float | None = None
    total_seconds: float | None = None
    launcher: dict[str, Any] | None = None
    supervisor: dict[str, Any] | None = None
    partner: dict[str, Any] | None = None
    heavy_queue: dict[str, Any] | None = None
    cancel: dict[str, Any] | None = None  # {reason, requested_at}: `pair cancel` asked
    base_commit: str | None = None  # the worktree's HEAD when the turn was granted (the runner)
    # A turn on another machine (SPEC 4.3): `{kind, node, actor}`, the lead supervisor's last
    # heartbeat, and the partner as the node reported it (its pid is not this machine's).
    runner: dict[str, Any] | None = None
    runner_heartbeat_at: str | None = None
    remote_partner: dict[str, Any] | None = None

    def identities(self) -> list[ProcessIdentity]:
        found = []
        for raw in (self.partner, self.supervisor, self.launcher):
            identity = ProcessIdentity.from_json(raw)
            if identity is not None:
                found.append(identity)
        return found

    def live_pid(self) -> int | None:
        """The pid of the first live process of this turn (partner first), if any."""
        for identity in self.identities():
            if is_alive(identity):
                return identity.pid
        partner = ProcessIdentity.from_json(self.partner)
        if partner is not None and partner.pgid is not None:
            members = group_members(partner.pgid)
            if members:
                return members[0]
        return None


def check_kind(kind: str, where: str) -> None:
    """A turn's kind names its files (`transcripts/0001-<kind>-receipt.json`): a planted kind
    like `x/../../../.bashrc` would make a receipt written for it land anywhere."""
    if kind not in TURN_KINDS and kind != BOOTSTRAP_KIND:
        raise RecordUnreadable(f"{where} is not a turn kind: {kind[:64]!r}")


def crash_point(command: str, step: str) -> None:
    """SPEC 8's test hook, for pair's own steps: with `UNITMGR_TEST_HOOKS=1` and
    `UNITMGR_TEST_CRASH_AFTER=<command>:<step>:done`, SIGKILL this process right here."""
    if os.environ.get("UNITMGR_TEST_HOOKS") != "1":
        return
    if os.environ.get("UNITMGR_TEST_CRASH_AFTER") == f"{command}:{step}:done":
        os.kill(os.getpid(), signal.SIGKILL)


def read_json(path: Path, *, below: Path | None = None) -> Any:
    """A pair file through the bounded reader (SPEC 8): a regular file of at most 1 MiB, reached
    from `below` (the git dir that holds `pair/`) without following a symlink; anything else
    raises `bounded.Unreadable`, a `ValueError`, like a corrupt file."""
    return bounded.read_json(path, below=below)


def load_session(paths: PairPaths) -> Session | None:
    try:
        data = read_json(paths.session_file, below=paths.state_dir.parent)
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise StateError(
            "pair-session-unreadable",
            f"the pair session {paths.session_file} is unreadable: {error}",
            next_step=f"{paths.session_file}: inspect it, then move it aside",
        ) from None
    if not isinstance(data, dict):
        raise StateError(
            "pair-session-unreadable",
            f"the pair session {paths.session_file} is not an object",
            next_step=f"{paths.session_file}: inspect it, then move it aside",
        )
    version = data.get("schema_version")
    try:
        if isinstance(version, int) and version > SESSION_SCHEMA_VERSION:
            raise RecordTooNew(version)
        session = Session.decode(data, "session")
        if session.latest_kind is not None:
            check_kind(session.latest_kind, "session.latest_kind")
        return session
    except (RecordUnreadable, RecordTooNew) as error:
        raise StateError(
            "pair-session-unreadable",
            f"the pair session {paths.session_file} is unreadable: {error}",
            next_step=f"{paths.session_file}: inspect it, then move it aside",
        ) from None


def save_session(paths: PairPaths, session: Session) -> None:
    write_text_atomic(paths.session_file, json.dumps(session.to_json(), indent=2) + "\n")


class MarkerUnreadable(Exception):
    pass


def read_marker(paths: PairPaths) -> Marker | None:
    """The marker, None when there is none; `MarkerUnreadable` when it cannot be parsed."""
    try:
        data = read_json(paths.marker_file, below=paths.state_dir.parent)
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise MarkerUnreadable(str(error)) from None
    if not isinstance(data, dict):
        raise MarkerUnreadable("not an object")
    try:
        marker = Marker.decode(data, "marker")
        check_kind(marker.kind, "marker.kind")
        return marker
    except RecordUnreadable as error:
        raise MarkerUnreadable(str(error)) from None


@contextlib.contextmanager
def marker_mutex(paths: PairPaths, timeout_seconds: float = 10.0) -> Iterator[None]:
    """Serialize changes to the marker (held for milliseconds, never across a turn)."""
    subject = f"the in-flight marker of {paths.state_dir}"
    lock = FileLock(paths.marker_mutex_file, subject=subject, command="pair")
    with lock.hold(Deadline(timeout_seconds)):
        yield


def write_marker(paths: PairPaths, marker: Marker) -> None:
    """Write the marker (caller holds `marker_mutex`)."""
    write_text_atomic(paths.marker_file, json.dumps(marker.to_json(), indent=2) + "\n")


def _owned(paths: PairPaths, token: str) -> Marker | None:
    """The marker, if it is readable and `token` owns it (the caller holds its mutex)."""
    try:
        marker = read_marker(paths)
    except MarkerUnreadable:
        return None
    return marker if marker is not None and marker.owner_token == token else None


def update_owned_marker(paths: PairPaths, token: str, **changes: Any) -> Marker | None:
    """Apply `changes` to the marker if it is still the one `token` owns; else None."""
    with marker_mutex(paths):
        marker = _owned(paths, token)
        if marker is None:
            return None
        for key, value in changes.items():
            setattr(marker, key, value)
        write_marker(paths, marker)
        return marker


def release_owned_marker(paths: PairPaths, token: str) -> str | None:
    """Remove the marker if `token` owns it. Returns a note when someone else's is in place."""
    with marker_mutex(paths):
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            return f"left an unreadable in-flight marker at {paths.marker_file}"
        if marker is None:
            return None
        if marker.owner_token != token:
            return f"left an in-flight marker owned by seq {marker.seq}"
        remove_file(paths.marker_file)
        return None


def release_unclaimed_marker(paths: PairPaths, token: str) -> dict[str, Any] | None:
    """Remove the marker `token` owns unless a supervisor has claimed it; the claimant's recorded
    identity when one has (then the turn is running). Under the marker's mutex, so a supervisor
    that claims it later finds it gone and exits (`supervise`'s `EXIT_NOT_OWNER`)."""
    with marker_mutex(paths):
        marker = _owned(paths, token)
        if marker is None:
            return None
        if isinstance(marker.supervisor, dict):
            return marker.supervisor
        remove_file(paths.marker_file)
        return None


def read_receipt(path: Path) -> dict[str, Any] | None:
    """A receipt, None when there is none, `{unreadable, error}` when it cannot be used. It is
    reached from `<git-dir>` (or an archive's own dir), so a symlinked `pair/` or `transcripts/`
    is refused as well as a symlinked receipt."""
    try:
        data = read_json(path, below=path.parents[2] if len(path.parents) > 2 else None)
    except FileNotFoundError:
        return None
    except ValueError as error:
        reason = error.reason if isinstance(error, bounded.Unreadable) else f"not JSON: {error}"
        return {"unreadable": str(path), "error": reason}
    if isinstance(data, dict):
        return data
    return {"unreadable": str(path), "error": "not a JSON object"}


LOST_REASON = "its supervisor and partner are gone and left no receipt"


def record_lost_turn(paths: PairPaths, marker: Marker, *, found_by: str) -> dict[str, Any] | None:
    """Write the `worker-lost` receipt of the dead turn `marker` names, unless it has one
    (SPEC 3.4: whoever finds a lost turn first writes it, so it stays visible — `failed`, with
    the exact re-send in `next` — after `pair clear` removes the marker). A turn that never
    reached its partner (no partner recorded) gets none: it delivered nothing, and a resumed
    command sends it again (`never_started`). Callers prove the turn's processes dead first."""
    from pair.receipts import minimal_receipt

    if not marker.partner or marker.kind == BOOTSTRAP_KIND:
        return None  # a bootstrap's outcome is `pair init`'s own answer, not a turn's receipt
    receipt_file = paths.turn_file(marker.seq, marker.kind, "-receipt.json")
    existing = read_receipt(receipt_file)
    if existing is not None:
        return existing
    try:
        session = load_session(paths)
    except StateError:
        return None
    if session is None:
        return None
    supervisor = marker.supervisor or {}
    receipt = minimal_receipt(
        paths,
        session,
        marker,
        status="worker-lost",
        reason=f"turn {marker.seq} was lost: {LOST_REASON} (found by {found_by})",
        supervisor_pid=supervisor.get("pid") if isinstance(supervisor, dict) else None,
        started_at=marker.started_at,
        leftovers=[],
    )
    write_text_atomic(receipt_file, json.dumps(receipt, indent=2) + "\n")
    return receipt


def receipt_file_of(paths: PairPaths, session: Session | None, seq: int) -> Path | None:
    """Where turn `seq`'s receipt is (its kind is in the session for the latest turn; older
    turns are found by their number), None when no such file is named."""
    if session is not None and seq == session.seq and session.latest_kind:
        return paths.receipt_file(seq, session.latest_kind)
    # The names are derived, never listed: the directory is the executor's to fill.
    for kind in sorted((*TURN_KINDS, BOOTSTRAP_KIND)):
        path = paths.receipt_file(seq, kind)
        if os.path.lexists(path):
            return path
    return None


def acquire_marker(paths: PairPaths, build: Callable[[], Marker], root: Path) -> Marker:
    """Take the in-flight marker, or refuse naming who holds it.

    `build` makes the marker while the marker lock is held, so it can read the session's
    sequence number knowing no other turn can start in between. A dead holder's marker is never
    taken over: only `pair clear` removes it.
    """
    with marker_mutex(paths):
        try:
            holder = read_marker(paths)
        except MarkerUnreadable:
            raise StateError(
                "marker-unreadable",
                f"the in-flight marker {paths.marker_file} cannot be read, so a turn is treated "
                "as running — read it, confirm no partner process remains, then run pair clear",
            ) from None
        if holder is not None:
            pid = holder.live_pid()
            if pid is not None:
                raise StateError(
                    "turn-in-flight",
                    f"seq {holder.seq} is in flight as pid {pid} since {holder.started_at} — a "
                    "pair runs one turn at a time; wait for it",
                    detail={"seq": holder.seq, "pid": pid},
                    next_step=f"pair wait --repo {root} (or stop it: pair cancel --repo {root})",
                )
            raise StateError(
                "turn-lost",
                f"seq {holder.seq} was left in flight since {holder.started_at} and none of its "
                f"processes are alive — clear it with: pair clear --repo {root}",
                detail={"seq": holder.seq},
                next_step=f"pair clear --repo {root}",
            )
        marker = build()
        write_marker(paths, marker)
        return marker
