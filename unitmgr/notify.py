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

from registry.errors import ToolError
from registry.redact import redact

if TYPE_CHECKING:
    from registry.notify import NotifySettings, Target
    from unitmgr.workspace import Workspace


def settings(workspace: Workspace) -> NotifySettings | None:
    """The effective `[notify]` settings (unitmgr/config.py), or None when no sink is
    configured. A config that does not load sends nothing: its `config-invalid` is the business
    of the commands that read their settings from it before they act, never of a step that has
    already acted."""
    from unitmgr.config import load_config

    try:
        found = load_config(workspace.toplevel, workspace.common_git_dir).notify
    except ToolError as error:
        print(redact(f"unit: no notifications: {error.reason}"), file=sys.stderr)
        return None
    if not found.configured:
        return None
    from registry.notify import NotifySettings

    return NotifySettings(command=found.command, url=found.url, events=found.events)


def target(workspace: Workspace, unit_id: str) -> Target | None:
    found = settings(workspace)
    if found is None:
        return None
    from registry.notify import Target
    from unitmgr.config import stuck_seconds

    return Target(
        found,
        unit_id,
        str(workspace.toplevel),
        workspace.registry.events_file,
        stuck_seconds=stuck_seconds(workspace),
    )


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
        print(redact(f"unit: notification {event} not sent: {error}"), file=sys.stderr)
