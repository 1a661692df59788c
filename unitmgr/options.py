"""Every `unit` command's options, declared once: name, flag, default and help.

A command module (unitmgr/commands/) builds its Typer signature from these classes, and the
lifecycle or view it calls receives the same object, so an option is added in one place. The
values are the command line's raw strings: the lifecycle validates them (SPEC 3.0 refusals).

This module must stay light (imported at every start) and know no Typer: the flag and help
text travel as each field's metadata. The classes are frozen keyword-only records built by
unitmgr/option_fields.py, not by `dataclasses` (SPEC 7 start-up); mypy sees frozen dataclasses.
"""

from __future__ import annotations

from unitmgr.option_fields import Field, declared, option, repeatable, required

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


LOCK_TIMEOUT_HELP = "Seconds to wait for locks (0 = do not wait)."
DRY_RUN_HELP = "Check and plan; change nothing."
WHY_STAFFING = "Why this staffing (recorded)."
UNIT_HELP = "The unit id."
NEW_UNIT = " Required for a new unit."
NEW_UNIT_OR_CONFIG = " Required for a new unit unless the config sets it."
LEADS = " One of claude|codex|cursor|opencode|grok|human."
PARTNERS = " One of claude|codex|cursor|opencode|grok|script."
MODEL_HELP = (
    "The partner's model: an id, an alias, CLI-default or latest:<family>; for partner script, "
    "the executor's command line, run with sh -c in the worktree (required for partner script)."
)
EFFORT_HELP = "Reasoning effort; required for claude, codex, grok and opencode."
OR_CONFIG = " Default: config {key}, unless --partner differs from the config's partner."
IDENTITY_HELP = "The partner's login (other than default only with partner codex)."
RUNNER_HELP = "Where its turns run: local or ray (SPEC 4.3; default: config runner, else local)."
NODE_HELP = (
    "With --runner ray: the node (its unitmgr-node-NAME resource); default any node offering "
    "unitmgr-executor."
)


def _lock_timeout() -> Any:
    return option("--lock-timeout", LOCK_TIMEOUT_HELP, "30", "SECONDS")


def _dry_run() -> Any:
    return option("--dry-run", DRY_RUN_HELP, False)


# None when not given: the project config's value applies (SPEC 3.16), else 2.
MAX_ACTIVE_HELP = "Refuse when this many units are active (default: config max_active, else 2)."
MAX_HELD_HELP = (
    "Bounds the units held for review plus those still active: free slots = min(max_active - "
    "active, max_held - held - active) (default: config max_held, else 2)."
)


@declared
class CreateOptions:
    # Checked by the command, not Typer, so one refusal names every missing option (SPEC 3.3).
    unit: str | None = option(
        "--unit", "The new unit's id: letters, digits and ._+- (64 at most). Required.", None, "ID"
    )
    worktree: str | None = option(
        "--worktree",
        "Where the new worktree goes; a relative path is taken from the current directory "
        "(optional when the config sets worktree_root).",
        metavar="PATH",
    )
    branch: str | None = option(
        "--branch", "The new branch to create." + NEW_UNIT, metavar="BRANCH"
    )
    base: str | None = option(
        "--base",
        "The branch to start from (origin's when it has one)." + NEW_UNIT,
        metavar="BRANCH",
    )
    scope: str | None = option(
        "--scope", "A one-line summary of the scope." + NEW_UNIT, metavar="TEXT"
    )
    validation: str | None = option(
        "--validation",
        "The shell command that proves the work (unit verify)." + NEW_UNIT_OR_CONFIG,
        metavar="COMMAND",
    )
    lead: str | None = option(
        "--lead", "Who drives the unit." + LEADS + NEW_UNIT_OR_CONFIG, metavar="LEAD"
    )
    partner: str | None = option(
        "--partner", "The executor's CLI." + PARTNERS + NEW_UNIT_OR_CONFIG, metavar="PARTNER"
    )
    reason: str | None = option("--reason", WHY_STAFFING + NEW_UNIT, metavar="TEXT")
    task: str | None = option(
        "--task",
        "The task, inline (1 MiB at most). Required for a new unit (or --task-file).",
        metavar="TEXT",
    )
    task_file: str | None = option(
        "--task-file",
        "The task, a text file (1 MiB at most), or - for standard input. Required for a new "
        "unit (or --task).",
        metavar="FILE",
    )
    paths: list[str] = repeatable(
        "--paths", "A glob the unit may write (repeatable; replaces config paths).", "GLOB"
    )
    model: str | None = option(
        "--model", MODEL_HELP + OR_CONFIG.format(key="model"), metavar="MODEL"
    )
    effort: str | None = option(
        "--effort", EFFORT_HELP + OR_CONFIG.format(key="effort"), metavar="EFFORT"
    )
    identity: str | None = option("--identity", IDENTITY_HELP, metavar="NAME")
    issue: str | None = option("--issue", "The GitHub issue number the unit works on.", metavar="N")
    setup: str | None = option(
        "--setup", "A shell command run once in the new worktree.", metavar="COMMAND"
    )
    ports: str | None = option(
        "--ports",
        "Lease N free TCP ports (UNIT_PORT, UNIT_PORTS; default: config ports, else 0).",
        metavar="N",
    )
    runner: str | None = option("--runner", RUNNER_HELP, metavar="local|ray")
    node: str | None = option("--node", NODE_HELP, metavar="NAME")
    max_active: str | None = option("--max-active", MAX_ACTIVE_HELP, metavar="N")
    max_held: str | None = option("--max-held", MAX_HELD_HELP, metavar="N")
    allow_overlap: bool = option(
        "--allow-overlap", "Allow --paths that overlap another unit's.", False
    )
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


@declared
class DismantleOptions:
    unit: str = required("--unit", UNIT_HELP, "ID")
    force: str | None = option(
        "--force", "Repeat the unit id to abandon unmerged work.", metavar="ID"
    )
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


@declared
class RestaffOptions:
    unit: str = required("--unit", UNIT_HELP, "ID")
    lead: str | None = option("--lead", "Must equal the recorded lead. Required.", metavar="LEAD")
    partner: str | None = option(
        "--partner", "The new executor's CLI." + PARTNERS + " Required.", metavar="PARTNER"
    )
    reason: str | None = option("--reason", WHY_STAFFING + " Required.", metavar="TEXT")
    model: str | None = option("--model", MODEL_HELP, metavar="MODEL")
    effort: str | None = option("--effort", EFFORT_HELP, metavar="EFFORT")
    identity: str | None = option("--identity", IDENTITY_HELP, metavar="NAME")
    runner: str | None = option(
        "--runner",
        "Move its turns: local or ray (default: the unit's own runner and node).",
        metavar="local|ray",
    )
    node: str | None = option("--node", NODE_HELP, metavar="NAME")
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


@declared
class CancelOptions:
    unit: str = required("--unit", UNIT_HELP, "ID")
    reason: str | None = option(
        "--reason", "Why; recorded in the receipt and the event.", metavar="TEXT"
    )
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


@declared
class AddendumOptions:
    unit: str = required("--unit", UNIT_HELP, "ID")
    text: str | None = option("--text", "The addendum text (or --file).", metavar="TEXT")
    file: str | None = option("--file", "A file holding the text (or --text).", metavar="FILE")
    queue: bool = option("--queue", "Append now; notify once no turn is in flight.", False)
    restore_manifest: bool = option(
        "--restore-manifest", "Rewrite a lost manifest from the record.", False
    )
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


@declared
class ScopeOptions:
    unit: str = required("--unit", UNIT_HELP, "ID")
    approve: bool = option("--approve", "Record the scope approval.", False)
    allow_outside: bool = option("--allow-outside", "Approve files outside --paths.", False)
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


@declared
class VerifyOptions:
    unit: str = required("--unit", UNIT_HELP, "ID")
    validation: str | None = option(
        "--validation",
        "Supply the validation command again: it replaces the recorded one, signed by you (for "
        "a record whose command is not signed).",
        metavar="COMMAND",
    )
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


@declared
class MergeOptions:
    unit: str = required("--unit", UNIT_HELP, "ID")
    head: str | None = option(
        "--head", "The exact PR head commit to merge. Required.", metavar="SHA"
    )
    method: str = option("--method", "How GitHub merges the PR.", "merge", "merge|squash|rebase")
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


@declared
class WaitOptions:
    units: list[str] = repeatable(
        "--unit", "A unit to wait for (repeatable; default: every unit).", "ID"
    )
    since: str | None = option(
        "--since", "Changes after this ISO time (default: now; pass observed_at).", metavar="ISO"
    )
    timeout_min: str = option("--timeout-min", "Give up after this long.", "30", "MINUTES")


@declared
class TailOptions:
    unit: str = required("--unit", UNIT_HELP, "ID")
    seq: str | None = option(
        "--seq", "The turn (default: the one in flight, else the latest).", metavar="N"
    )
    follow: bool = option("--follow", "Keep printing until the turn's receipt lands.", False)
    raw: bool = option("--raw", "The transcript's (redacted) bytes, not rendered.", False)


@declared
class IntakeOptions:
    label: str | None = option("--label", "The ready-issue label. Required.", metavar="LABEL")
    milestone: str | None = option(
        "--milestone", "Only issues of this milestone (title or number).", metavar="MILESTONE"
    )
    max_active: str | None = option("--max-active", MAX_ACTIVE_HELP, metavar="N")
    max_held: str | None = option("--max-held", MAX_HELD_HELP, metavar="N")
    limit: str = option("--limit", "Read at most this many issues.", "30", "N")


@declared
class ConfigOptions:
    """`unit config` reads; `--approve` (with `--dry-run`) records the configured commands."""

    approve: bool = option(
        "--approve",
        "Approve the commands the config files now give: setup, validation, model, notify.command.",
        False,
    )
    dry_run: bool = _dry_run()


@declared
class DoctorOptions:
    """`unit doctor` (SPEC 8's config audit): what in the repository can make git run something."""

    trust: bool = option(
        "--trust",
        "Accept the current git config, hooks and attributes as the trusted baseline.",
        False,
    )


# -- unit feedback (SPEC 3.17) -------------------------------------------------------------------


@declared
class FeedbackOptions:
    unit: str | None = option("--unit", "The unit (or --all).", metavar="ID")
    all: bool = option("--all", "Every recorded unit (or --unit).", False)
    send: bool = option("--send", "Deliver the pending items as one addendum.", False)
    queue: bool = option("--queue", "With --send: append now; notify once no turn runs.", False)
    auto: bool = option(
        "--auto", "With --send: only as the loop may (round caps; working, checks done).", False
    )
    only: str | None = option("--only", "Gather only this kind.", metavar="ci|reviews|comments")
    max_bytes: str = option("--max-bytes", "The addendum's bound in bytes.", "16384", "N")
    every: str | None = option(
        "--every", "Repeat every SECONDS (at least 120) until Ctrl-C or none is working.",
        metavar="SECONDS",
    )  # fmt: skip
    lock_timeout: str = _lock_timeout()
    dry_run: bool = _dry_run()


# -- the read commands that once declared their own Typer signature (now declared here, so
# unitmgr/entry.py runs them without Typer, SPEC 7) ---------------------------------------------


@declared
class StatusOptions:
    unit: str | None = option("--unit", "One unit, read and brought up to date.", metavar="ID")
    all_units: bool = option("--all", "Every unit, lock-free, offline.", False)
    lock_timeout: str = _lock_timeout()


@declared
class ListOptions:
    prs: bool = option("--prs", "Also read each branch's PRs.", False)
    lock_timeout: str = _lock_timeout()


@declared
class WatchOptions:
    interval: float = option("--interval", "Seconds between redraws.", 3.0, "SECONDS")
    once: bool = option("--once", "Draw one frame and exit.", False)
    lock_timeout: str = _lock_timeout()


@declared
class ServeOptions:
    host: str = option(
        "--host", "Address to listen on; off loopback it needs UNITMGR_SERVE_TOKEN.", "127.0.0.1",
        "HOST",
    )  # fmt: skip
    port: int = option("--port", "Port to listen on (0: any free port).", 8787, "PORT")
    prs: bool = option("--prs", "Also show each branch's PRs (read from GitHub).", False)
    lock_timeout: str = _lock_timeout()


# -- getting around (SPEC 3.18) ----------------------------------------------------------------


def argument(help: str, metavar: str) -> Any:
    """A field that is a required positional argument (`unit path ID`)."""
    return Field({"flag": None, "help": help, "metavar": metavar, "argument": True})


@declared
class PathOptions:
    unit: str = argument("The unit id.", "ID")
    lock_timeout: str = _lock_timeout()


@declared
class ShellInitOptions:
    shell: str = argument("bash, zsh or fish.", "SHELL")


# -- old archives and the event log (SPEC 3.18) -----------------------------------------------


@declared
class PruneOptions:
    older_than: str = option(
        "--older-than",
        "Remove archives older than this: a number and s, m, h, d or w.",
        "30d",
        "DURATION",
    )
    dry_run: bool = option("--dry-run", "List what would go; remove nothing.", False)
    lock_timeout: str = _lock_timeout()


@declared
class LogOptions:
    unit: str | None = option("--unit", "Only this unit's events.", metavar="ID")
    since: str | None = option("--since", "Only events at or after this time.", metavar="ISO")
    follow: bool = option(
        "--follow", "Keep printing new events (one per line) until Ctrl-C.", False
    )
