"""`pair end` (SPEC 4.1): end the session (refused while a turn is in flight), keeping its files in
`ended/`; and `close_state`, what a unit does before it replaces or removes a pair.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pair.commands.clear import clear_state
from pair.commands.shared import locate_paths, require_session
from pair.errors import StateError, ToolError
from pair.paths import PairPaths
from pair.state import marker_mutex
from registry.atomic import ensure_private_dir
from registry.timeutil import stamp

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def end(repo: str | Path) -> dict[str, Any]:
    _, paths = locate_paths(repo)
    return end_state(paths.state_dir)


def end_state(state_dir: str | Path) -> dict[str, Any]:
    """`end` for a known state dir (works when the worktree directory itself is gone)."""
    paths = PairPaths(Path(state_dir))
    require_session(paths)  # refuses before the marker lock creates anything
    with marker_mutex(paths):
        if paths.marker_file.exists():
            raise StateError(
                "turn-in-flight",
                f"a turn is in flight (or its marker remains) at {paths.marker_file} — wait for "
                "it to finish, or run pair clear first",
            )
        session = require_session(paths)
        # Ending keeps the record of the session: it moves into ended/ (archived by dismantle),
        # so a later init in this worktree starts clean without losing a transcript.
        # The sid is the session's (an executor can write it): only its plain characters name
        # the directory, so a planted `../..` cannot move the transcripts out of `ended/`.
        safe_sid = "".join(c if c.isalnum() or c in "-_" else "_" for c in session.sid[:80])
        destination = paths.ended_dir / f"{stamp()}-{safe_sid}"
        ensure_private_dir(destination)
        if paths.transcripts_dir.exists():
            shutil.move(str(paths.transcripts_dir), str(destination / "transcripts"))
        shutil.move(str(paths.session_file), str(destination / "session.json"))
    return {"ok": True, "status": "ended", "sid": session.sid, "ended_dir": str(destination)}


def close_state(state_dir: str | Path) -> dict[str, Any]:
    """Clear a dead turn's marker, then end the session if there is one: what a unit does before
    it replaces or removes a pair. `{"cleared": status | None, "ended_dir": path | None}`.
    A live turn is refused (`turn-in-flight`)."""
    paths = PairPaths(Path(state_dir))
    cleared = clear_state(paths.state_dir)["status"] if paths.marker_file.exists() else None
    released = release_runner(paths) if paths.session_file.exists() else None
    ended = end_state(paths.state_dir)["ended_dir"] if paths.session_file.exists() else None
    closed: dict[str, Any] = {"cleared": cleared, "ended_dir": ended}
    if released is not None:
        closed["runner"] = released
    return closed


def release_runner(paths: PairPaths) -> dict[str, Any] | None:
    """What the session's runner holds elsewhere, freed (SPEC 4.3: a Ray node's actor retired
    and killed, so no unit leaves one behind); None for a local session. Best effort: a cluster
    that cannot be reached, or a runner choice that is not the lead's (`runner-untrusted`,
    nothing contacted), leaves the session to end all the same, the reason in
    `{released: false, error}`."""
    from pair.runners import runner_for

    try:
        return runner_for(paths.state_dir).release()
    except ToolError as error:
        return {"released": False, "error": error.code}
    except Exception as error:  # the cluster's own errors are many; none may block the end
        return {"released": False, "error": type(error).__name__}
