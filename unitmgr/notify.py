"""The `unit` side of notifications (SPEC 3.15): the project's `[notify]` settings, the target a
unit's pair session stores, and the lifecycle events `unit` itself delivers.

`announce` is called by the lifecycle once an outcome is decided (`created`, `dismantled`,
`merged`, `held`, `create-failed`, `restaff-failed`, `dismantle-failed`); it hands the delivery to
a detached child (`registry.notify.spawn`), so the command's JSON never waits for a sink and a
failed delivery never fails the command. `session_target` is what `pair init` stores, so the pair
supervisor delivers `turn-ended` and `attention` itself (pair never imports unitmgr).

Without a configured `command` or `url` nothing is imported, started or sent: `registry.notify`
is imported only once a sink wants an event. It must not raise into a lifecycle step.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry.notify import NotifySettings, Target
    from unitmgr.workspace import Workspace


def settings(workspace: Workspace) -> NotifySettings | None:
    """The effective `[notify]` settings, or None when no sink is configured."""
    from unitmgr.notify_config import read_notify

    found = read_notify(workspace.toplevel, workspace.registry.root)
    return found if found is not None and (found.command or found.url) else None


def target(workspace: Workspace, unit_id: str) -> Target | None:
    found = settings(workspace)
    if found is None:
        return None
    from registry.notify import Target

    return Target(found, unit_id, str(workspace.toplevel), workspace.registry.events_file)


def session_target(workspace: Workspace, unit_id: str) -> dict[str, Any] | None:
    """What `pair init` stores in the unit's session (None: its supervisors send nothing)."""
    found = target(workspace, unit_id)
    return found.to_json() if found is not None else None


def announce(workspace: Workspace, event: str, unit_id: str, **fields: Any) -> None:
    """Deliver `event` about `unit_id` in a detached child, when a sink wants it. Never raises:
    a broken config or a spawn that fails costs the command nothing."""
    try:
        found = target(workspace, unit_id)
        if found is None or not found.settings.wants(event):
            return
        from registry import notify as delivery

        delivery.spawn(found, delivery.payload(found, event, **fields))
    except Exception as error:  # the command's outcome is already decided
        from registry.redact import redact

        print(redact(f"unit: notification {event} not sent: {error}"), file=sys.stderr)
