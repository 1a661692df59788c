"""`pair clear` (SPEC 4.1): remove a dead turn's in-flight marker; refuses while any of its
processes lives. A live process the marker names but does not prove the turn's (SPEC 8,
`pair.proof`) does not keep the marker: it is listed in `untrusted` and never signalled. For a
turn on a Ray node whose lead supervisor is gone, the runner first stops what runs of it on the
node and `runner.node_turn` says what the node confirmed (`stopped`, `not-running`) or
`unknown`.
"""

from __future__ import annotations

from pathlib import Path

from pair.commands.shared import locate_paths
from pair.runners import runner_for

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def clear(repo: str | Path) -> dict[str, Any]:
    _, paths = locate_paths(repo)
    return clear_state(paths.state_dir)


def clear_state(state_dir: str | Path) -> dict[str, Any]:
    """`clear` for a known state dir (works when the worktree directory itself is gone)."""
    reaped = runner_for(state_dir).reap()
    document: dict[str, Any] = {"ok": True, "status": reaped.status, "lock_file": reaped.lock_file}
    if reaped.marker is not None:
        document["marker"] = reaped.marker
    if reaped.runner is not None:
        # A turn on a Ray node: stopped there (the node confirmed it), or `unknown`.
        document["runner"] = reaped.runner
    if reaped.untrusted:
        # Named by the marker, alive, but not proven the turn's: left alone, and said so.
        document["untrusted"] = reaped.untrusted
    return document
