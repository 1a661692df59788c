"""The journal step names of every multi-step command (SPEC 2.2): the contract.

The journal, `events.jsonl`, `--dry-run` plans, `references/` and the crash tests all use these
tuples, so a new step cannot be forgotten by any of them.
"""

from __future__ import annotations

CREATE_STEPS = (
    "reserve",
    "manifest",
    "worktree",
    "pr-body-exclude",
    "copy-files",
    "setup",
    "pair-init",
    "pair-verify",
    "first-task",
    "working",
)
RESTAFF_STEPS = (
    "checkpoint",
    "end-old",
    "init-target",
    "verify-target",
    "send-checkpoint",
    "finalize",
)
ADDENDUM_STEPS = ("append", "notify")
# `unit feedback --send` (SPEC 3.17): the exact text into the ledger, then addendum's own two
# steps, then the sent keys into the ledger.
FEEDBACK_STEPS = ("journal", "append", "notify", "ledger")
DISMANTLE_STEPS = (
    "end-pair",
    "reap",
    "archive",
    "worktree",
    "local-branch",
    "remote-branch",
    "manifest",
    "record",
)

STEPS_BY_COMMAND = {
    "create": CREATE_STEPS,
    "restaff": RESTAFF_STEPS,
    "addendum": ADDENDUM_STEPS,
    "feedback": FEEDBACK_STEPS,
    "dismantle": DISMANTLE_STEPS,
}

# The lifecycle a create has reached once a step is done (SPEC 2.3).
CREATE_LIFECYCLE_AFTER = {
    "reserve": "creating",
    "manifest": "creating",
    "worktree": "setting-up",
    "pr-body-exclude": "setting-up",
    "copy-files": "setting-up",
    "setup": "initializing-pair",
    "pair-init": "initializing-pair",
    "pair-verify": "starting",
    "first-task": "starting",
    "working": "working",
}
CREATE_PHASES = ("creating", "setting-up", "initializing-pair", "starting")
