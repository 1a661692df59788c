"""Every `unit` command's options, declared once: name, flag, default and help.

A command module (unitmgr/commands/) builds its Typer signature from these dataclasses, and the
lifecycle or view it calls receives the same dataclass, so an option is added in one place. The
values are the command line's raw strings: the lifecycle validates them (SPEC 3.0 refusals).

This module must stay light (imported at every start) and know no Typer: the flag and help
text travel as field metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def option(flag: str, help: str | None = None, default: Any = None) -> Any:
    """A field that is the command-line option `flag`."""
    return field(default=default, metadata={"flag": flag, "help": help})


def repeatable(flag: str, help: str | None = None) -> Any:
    """A field that is the repeatable option `flag` (a list, empty when not given)."""
    return field(default_factory=list, metadata={"flag": flag, "help": help})


def required(flag: str, help: str | None = None) -> Any:
    return field(metadata={"flag": flag, "help": help})


LOCK_TIMEOUT_HELP = "Seconds to wait for locks (0 = do not wait)."
DRY_RUN_HELP = "Check and plan; change nothing."
WHY_STAFFING = "Why this staffing."


@dataclass(frozen=True)
class CreateOptions:
    unit: str = required("--unit", "Unit id.")
    worktree: str | None = option("--worktree", "Absolute path.")
    branch: str | None = option("--branch")
    base: str | None = option("--base")
    scope: str | None = option("--scope", "Free-text scope summary.")
    validation: str | None = option("--validation", "The command that proves the work.")
    lead: str | None = option("--lead")
    partner: str | None = option("--partner")
    reason: str | None = option("--reason", WHY_STAFFING)
    task_file: str | None = option("--task-file")
    paths: list[str] = repeatable("--paths", "Write-scope glob (repeatable).")  # noqa: RUF009
    model: str | None = option("--model")
    effort: str | None = option("--effort")
    identity: str | None = option("--identity")
    issue: str | None = option("--issue")
    setup: str | None = option("--setup", "Shell command run in the worktree.")
    max_active: str = option("--max-active", default="2")
    max_held: str = option("--max-held", default="2")
    allow_overlap: bool = option("--allow-overlap", default=False)
    lock_timeout: str = option("--lock-timeout", LOCK_TIMEOUT_HELP, default="30")
    dry_run: bool = option("--dry-run", DRY_RUN_HELP, default=False)


@dataclass(frozen=True)
class DismantleOptions:
    unit: str = required("--unit")
    force: str | None = option("--force", "Repeat the unit id to abandon unmerged work.")
    lock_timeout: str = option("--lock-timeout", LOCK_TIMEOUT_HELP, default="30")
    dry_run: bool = option("--dry-run", DRY_RUN_HELP, default=False)


@dataclass(frozen=True)
class RestaffOptions:
    unit: str = required("--unit")
    lead: str | None = option("--lead", "Must equal the recorded lead.")
    partner: str | None = option("--partner")
    reason: str | None = option("--reason", WHY_STAFFING)
    model: str | None = option("--model")
    effort: str | None = option("--effort")
    identity: str | None = option("--identity")
    lock_timeout: str = option("--lock-timeout", LOCK_TIMEOUT_HELP, default="30")
    dry_run: bool = option("--dry-run", DRY_RUN_HELP, default=False)


@dataclass(frozen=True)
class CancelOptions:
    unit: str = required("--unit")
    reason: str | None = option("--reason", "Why; recorded in the receipt and the event.")
    lock_timeout: str = option("--lock-timeout", LOCK_TIMEOUT_HELP, default="30")
    dry_run: bool = option("--dry-run", DRY_RUN_HELP, default=False)


@dataclass(frozen=True)
class AddendumOptions:
    unit: str = required("--unit")
    text: str | None = option("--text", "The addendum text.")
    file: str | None = option("--file", "A file holding the text.")
    queue: bool = option("--queue", "Append now; notify once no turn is in flight.", False)
    restore_manifest: bool = option(
        "--restore-manifest", "Rewrite a lost manifest from the record.", False
    )
    lock_timeout: str = option("--lock-timeout", LOCK_TIMEOUT_HELP, default="30")
    dry_run: bool = option("--dry-run", DRY_RUN_HELP, default=False)


@dataclass(frozen=True)
class ScopeOptions:
    unit: str = required("--unit")
    approve: bool = option("--approve", "Record the scope approval.", False)
    allow_outside: bool = option("--allow-outside", "Approve files outside --paths.", False)
    lock_timeout: str = option("--lock-timeout", LOCK_TIMEOUT_HELP, default="30")
    dry_run: bool = option("--dry-run", DRY_RUN_HELP, default=False)


@dataclass(frozen=True)
class VerifyOptions:
    unit: str = required("--unit")
    lock_timeout: str = option("--lock-timeout", LOCK_TIMEOUT_HELP, default="30")
    dry_run: bool = option("--dry-run", DRY_RUN_HELP, default=False)


@dataclass(frozen=True)
class MergeOptions:
    unit: str = required("--unit")
    head: str | None = option("--head", "The exact PR head SHA.")
    method: str = option("--method", "merge|squash|rebase", "merge")
    lock_timeout: str = option("--lock-timeout", LOCK_TIMEOUT_HELP, default="30")
    dry_run: bool = option("--dry-run", DRY_RUN_HELP, default=False)


@dataclass(frozen=True)
class WaitOptions:
    units: list[str] = repeatable("--unit", "A unit to wait for (repeatable).")  # noqa: RUF009
    since: str | None = option("--since", "ISO time; default: now (use observed_at).")
    timeout_min: str = option("--timeout-min", default="30")


@dataclass(frozen=True)
class IntakeOptions:
    label: str | None = option("--label", "The ready-issue label.")
    milestone: str | None = option("--milestone", "A milestone title or number.")
    max_active: str = option("--max-active", default="2")
    max_held: str = option("--max-held", default="2")
    limit: str = option("--limit", default="30")


@dataclass(frozen=True)
class ConfigOptions:
    """`unit config` takes only the common `--repo` and `--format`."""
