"""A turn's transcript for a person (SPEC 3.14a, `unit tail`): which files a turn has, and its
lines rendered through the partner's adapter.

`turn_files` finds a turn's transcript and receipt from the session, the in-flight marker and a
listing of `transcripts/` (never a path built by a caller); `render_line` hands each line to the
adapter (`Partner.render`), which knows its CLI's stream format. Read-only and lock-free: it
writes nothing, takes no lock and never starts a process.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pair.paths import LOG_SUFFIX, PairPaths
from pair.state import MarkerUnreadable, load_session, read_marker
from registry.light_dataclass import dataclass


@dataclass(frozen=True)
class TurnFiles:
    seq: int
    kind: str
    partner: str
    transcript: Path
    receipt: Path
    in_flight: bool  # the marker names this turn (it may still be running)


def _kind_on_disk(paths: PairPaths, seq: int) -> str | None:
    """The kind of turn `seq` from its transcript's name (`NNNN-<kind>.log`)."""
    pattern = re.compile(rf"{seq:04d}-([a-z][a-z-]*?){re.escape(LOG_SUFFIX)}")
    try:
        names = sorted(os.listdir(paths.transcripts_dir))
    except FileNotFoundError:
        return None
    for name in names:
        match = pattern.fullmatch(name)
        if match and not match.group(1).endswith("-supervisor"):
            return match.group(1)
    return None


def turn_files(state_dir: str | Path, seq: int | None = None) -> TurnFiles | None:
    """Turn `seq` (default: the one in flight, else the latest), or None when there is none.

    Raises pair's `StateError` (`pair-session-unreadable`) for an unreadable session; a missing
    session is None."""
    paths = PairPaths(Path(state_dir))
    session = load_session(paths)
    if session is None:
        return None
    try:
        marker = read_marker(paths)
    except MarkerUnreadable:
        marker = None
    kind: str | None
    if seq is None:
        if marker is not None:
            seq, kind = marker.seq, marker.kind
        else:
            seq, kind = session.seq, session.latest_kind
    elif marker is not None and marker.seq == seq:
        kind = marker.kind
    elif seq == session.seq and session.latest_kind:
        kind = session.latest_kind
    else:
        kind = _kind_on_disk(paths, seq)
    if seq < 1 or not kind:
        return None
    return TurnFiles(
        seq=seq,
        kind=kind,
        partner=session.partner,
        transcript=paths.transcript_file(seq, kind),
        receipt=paths.receipt_file(seq, kind),
        in_flight=marker is not None and marker.seq == seq,
    )


def render_line(partner: str, line: str) -> list[str]:
    """One transcript line as the partner's adapter renders it for a person."""
    from pair.partners import adapter_for

    return adapter_for(partner).render(line)
