"""Which live processes a turn proves its own (SPEC 8 "Processes"), before `cancel` signals one
or `clear` calls one the turn's.

The in-flight marker is executor-writable: it can name any live process of the user with its
true start time, and any owner token. So a process the marker names counts only when:

- it carries the turn's token *and* this pair's state dir in its environment
  (`PAIR_TURN_TOKEN`, `PAIR_STATE_DIR`: the supervisor and the bootstrap set both in the
  partner's environment, which everything it starts inherits; the state dir binds the token,
  so another pair's token copied into this marker proves nothing here), or
- it runs with its working directory in this pair's state dir — the supervisor chdirs there
  (a forked supervisor's /proc environment is its launcher's, so no token can show there), or
- it descends from a supervisor proven that way, or
- (the launcher, which is never signalled) it is the parent of a process proven above, or the
  marker is younger than a launch can take.

The state dir is the caller's (found from git by `pair`, proven by `unit`), never the marker's.
This module reads processes; it signals nothing.
"""

from __future__ import annotations

import os

from pair.errors import StateError
from pair.paths import PairPaths
from registry.processes import ProcessIdentity, group_members, is_alive
from registry.proof import Proof, unproven
from registry.timeutil import parse_iso

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

TURN_TOKEN_VARIABLE = "PAIR_TURN_TOKEN"
STATE_DIR_VARIABLE = "PAIR_STATE_DIR"
# How long a launcher may hold a marker before a supervisor or partner of it shows: the
# handshake (10 s by default) and the bootstrap's preflight, with slack.
LAUNCH_GRACE_SECONDS = 60.0


def turn_environment(state_dir: str | os.PathLike[str], token: str) -> dict[str, str]:
    """What a turn's partner carries in its environment, so its processes can be proven."""
    return {TURN_TOKEN_VARIABLE: token, STATE_DIR_VARIABLE: os.path.realpath(state_dir)}


def turn_proof(
    state_dir: str | os.PathLike[str], token: str, *, supervisor: int | None = None
) -> Proof:
    """The proof for a partner of the turn `token` of the pair in `state_dir` (its descendants
    too); `supervisor`: the pid of its supervisor, already proven."""
    return Proof(
        environment=tuple(turn_environment(state_dir, token).items()),
        descends_from=(supervisor,) if supervisor is not None else (),
    )


def supervisor_proof(state_dir: str | os.PathLike[str]) -> Proof:
    return Proof(cwd_within=(os.path.realpath(state_dir),))


def proven_supervisor(paths: PairPaths, marker: Any) -> int | None:
    """The pid of the marker's supervisor when it lives and is proven, else None."""
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    if supervisor is None or not is_alive(supervisor):
        return None
    return None if unproven(supervisor.pid, supervisor_proof(paths.state_dir)) else supervisor.pid


def partner_proof(paths: PairPaths, marker: Any) -> Proof:
    return turn_proof(
        paths.state_dir, marker.owner_token, supervisor=proven_supervisor(paths, marker)
    )


def untrusted(paths: PairPaths, marker: Any) -> list[dict[str, Any]]:
    """`[{field, pid, found}]`: the processes the marker names that live (same pid and start
    time) but are not proven the turn's, the partner group's leader included."""
    found: list[dict[str, Any]] = []
    checks = (
        ("supervisor", marker.supervisor, supervisor_proof(paths.state_dir)),
        ("partner", marker.partner, partner_proof(paths, marker)),
    )
    for field, raw, proof in checks:
        identity = ProcessIdentity.from_json(raw)
        if identity is None:
            continue
        if is_alive(identity):
            what = unproven(identity.pid, proof)
            if what is not None:
                found.append({"field": field, "pid": identity.pid, "found": what})
        elif field == "partner" and identity.pgid is not None and identity.pgid > 1:
            # A dead partner's recorded group is a claim: every live member must be proven.
            for pid in group_members(identity.pgid):
                what = unproven(pid, proof)
                if what is not None:
                    found.append({"field": "partner.pgid", "pid": pid, "found": what})
                    break
    return found


def refuse_untrusted(paths: PairPaths, marker: Any, root: str) -> None:
    """Raise `record-untrusted` when the marker names a live process it does not prove."""
    found = untrusted(paths, marker)
    if not found:
        return
    first = found[0]
    raise StateError(
        "record-untrusted",
        f"the in-flight marker {paths.marker_file} names {first['field']} pid {first['pid']}, "
        f"but that is {first['found']}, not seq {marker.seq}'s — nothing was signalled; "
        f"pair clear --repo {root} releases a marker no proven process holds",
        detail={"field": first["field"], "recorded": first["pid"], "found": found},
        next_step=f"ps -o pid,lstart,args -p {first['pid']}",
    )


def proven_live_pid(paths: PairPaths, marker: Any) -> int | None:
    """The pid of a live process the marker names that is proven the turn's (partner first),
    or of a member of the partner's group proven so; None when none is (what `clear` asks)."""
    supervisor = proven_supervisor(paths, marker)
    proof = partner_proof(paths, marker)
    partner = ProcessIdentity.from_json(marker.partner)
    if partner is not None:
        if is_alive(partner) and unproven(partner.pid, proof) is None:
            return partner.pid
        if partner.pgid is not None and partner.pgid > 1:
            for pid in group_members(partner.pgid):
                if unproven(pid, proof) is None:
                    return pid
    if supervisor is not None:
        return supervisor
    launcher = ProcessIdentity.from_json(marker.launcher)
    if launcher is not None and is_alive(launcher) and _launching(paths, marker, launcher, proof):
        return launcher.pid
    return None


def _launching(paths: PairPaths, marker: Any, launcher: ProcessIdentity, proof: Proof) -> bool:
    """Whether the live launcher is still starting this turn: a child of it is proven (its
    supervisor by its directory, a bootstrap partner by the token), or the marker is younger
    than a launch takes (`started_at` is a claim, so this only ever delays a clear)."""
    import time

    import psutil

    try:
        children = psutil.Process(launcher.pid).children()
    except (psutil.Error, OSError):
        children = []
    for child in children:
        if not unproven(child.pid, supervisor_proof(paths.state_dir)):
            return True
        if not unproven(child.pid, proof):
            return True
    try:
        started = parse_iso(str(marker.started_at)).timestamp()
    except ValueError:
        return False
    return time.time() - started < LAUNCH_GRACE_SECONDS
