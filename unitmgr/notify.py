"""The `unit` side of notifications (SPEC 3.15): the project's `[notify]` settings, the target a
unit's pair session stores, and the lifecycle events `unit` itself delivers.

`announce` is called by the lifecycle once an outcome is decided (`created`, `dismantled`,
`merged`, `held`, `create-failed`, `restaff-failed`, `dismantle-failed`); it hands the delivery to
a detached child (`registry.notify.spawn`), so the command's JSON never waits for a sink and a
failed delivery never fails the command. `session_target` is what `pair init` stores, so the pair
supervisor delivers `turn-ended` and `attention` itself (pair never imports unitmgr).

Without a configured `command` or `url` nothing is imported, started or sent: `registry.notify`
is imported only once a sink wants an event. It must not raise into a lifecycle step.

A `notify.command` the user has not approved (unitmgr/config_trust.py) is dropped here, before
it can reach a delivery or a pair session: the notification is skipped, never the command (SPEC
3.15), and `events.jsonl` gets one `notify-unapproved` line saying which command and file.
"""

from __future__ import annotations

import sys

from registry.errors import ToolError
from registry.redact import redact

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from registry.notify import NotifySettings, Target
    from unitmgr.workspace import Workspace


def settings(workspace: Workspace, unit_id: str | None = None) -> NotifySettings | None:
    """The effective `[notify]` settings (unitmgr/config.py), or None when no sink is
    configured. A config that does not load sends nothing: its `config-invalid` is the business
    of the commands that read their settings from it before they act, never of a step that has
    already acted. An unapproved `notify.command` is left out (`notify-unapproved`)."""
    from unitmgr.config import load_config

    try:
        config = load_config(workspace.toplevel, workspace.common_git_dir)
    except ToolError as error:
        print(redact(f"unit: no notifications: {error.reason}"), file=sys.stderr)
        return None
    found = config.notify
    if not found.configured:
        return None
    command = found.command
    if command is not None:
        from unitmgr import config_trust

        approvals = config_trust.read_approvals(workspace.common_git_dir)
        if not config_trust.is_approved(approvals, "notify.command", command):
            entry = config_trust.entry_for(config, "notify.command", command)
            _unapproved(workspace, entry, unit_id)
            command = None
    if command is None and found.url is None:
        return None
    from registry.notify import NotifySettings

    return NotifySettings(command=command, url=found.url, events=found.events)


def _unapproved(workspace: Workspace, entry: dict[str, Any], unit_id: str | None) -> None:
    """Say that an unapproved `notify.command` was not run: on stderr and in `events.jsonl`."""
    import json

    from registry.atomic import append_line
    from registry.timeutil import iso_z

    line = {
        "command": "notify",
        "step": "notify-unapproved",
        "status": "skipped",
        "unit": unit_id,
        "key": entry["key"],
        "file": entry["file"],
        "sha256": entry["sha256"],
        "next": f"unit config --approve --repo {workspace.toplevel}",
        "at": iso_z(),
    }
    print(
        redact(
            f"unit: notify.command from {entry['file']} is not approved: not run "
            f"(review it, then: unit config --approve --repo {workspace.toplevel})"
        ),
        file=sys.stderr,
    )
    try:
        append_line(workspace.registry.events_file, json.dumps(line, ensure_ascii=False))
    except OSError:
        pass  # nowhere left to tell: the command still succeeds


def target(workspace: Workspace, unit_id: str) -> Target | None:
    found = settings(workspace, unit_id)
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


def session_target(workspace: Workspace, unit_id: str, worktree: str) -> dict[str, Any] | None:
    """What `pair init` stores in the unit's session (None: its supervisors send nothing),
    signed for that session's state dir: the supervisor runs only a target the lead stored
    (SPEC 8; an executor can write its own session)."""
    found = target(workspace, unit_id)
    if found is None:
        return None
    from pair import api as pair_api
    from registry import signing

    state_dir = pair_api.paths_for(worktree).state_dir
    return signing.sign_target(workspace.registry.signer, state_dir, found.to_json())


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
