"""`unit merge` (SPEC 3.8): the merge hold, enforced in code.

A unit's pull request is merged through the GitHub API only when every gate holds:

- `single_open_pr` — exactly one open PR for the branch; `not_draft`; `base` — it targets the
  recorded base; `head_matches` — its head is `--head`;
- `scope_approval` — `unit scope --approve` was recorded on that head;
- `review_approved` — taking each reviewer's latest APPROVED or CHANGES_REQUESTED review, someone
  other than the author with write access (OWNER, MEMBER, COLLABORATOR) approved exactly that
  head, and nobody's latest review requests changes; each deleted account's review is its own
  reviewer;
- `checks_green` — the latest status per context and the latest check run per (app, check suite,
  name) on the head pass, and every check the base branch requires — classic protection and
  rulesets, from the app they name — is present;
- `verification` — a passing `unit verify` recorded on that head.

The merge call carries the head SHA, so GitHub refuses if the head moved in between; a refusal
quotes GitHub's own message and names the fix. The branch is never deleted here (dismantle does
that, after the worktree is gone).
"""

from __future__ import annotations

from registry import light_dataclass as dataclasses
from registry.errors import Rewrite, StateError, UsageError
from registry.records import UnitRecord
from registry.timeutil import iso_z
from unitmgr import notify, validation
from unitmgr.forge import (
    NOT_CONFIGURED,
    Check,
    Forge,
    PullRequest,
    RequiredChecks,
    Review,
    is_passing,
    latest_checks,
)
from unitmgr.github_remote import open_forge  # GitHub's adapter only for a repo on it
from unitmgr.lifecycle.runner import dry_run_aware
from unitmgr.options import MergeOptions
from unitmgr.units import load, locked, unsigned_fields
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from unitmgr.forge_github import GitHubRefused

METHODS = ("merge", "squash", "rebase")
GATES = (
    "single_open_pr",
    "not_draft",
    "base",
    "head_matches",
    "scope_approval",
    "review_approved",
    "checks_green",
    "verification",
)


@dry_run_aware
def run(repo: str, options: MergeOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    head = validation.commit_sha(validation.required(options.head, "--head", "merge"), "--head")
    if options.method not in METHODS:
        raise UsageError(
            "invalid-method",
            f"--method must be merge, squash or rebase, got {options.method!r}",
            next_command=Rewrite(set_options={"--method": "merge"}),
        )
    seconds = validation.lock_timeout(options.lock_timeout)
    record = load(workspace, unit_id)
    forge = open_forge(workspace)
    if forge is None:
        raise StateError("github-not-configured", f"merge {NOT_CONFIGURED}")
    if options.dry_run:
        pulls = forge.pulls_for_branch(record.branch)
        if _already_merged(pulls, head) is not None:
            plan = [{"step": "merge", "action": "skip", "detail": {"already_merged": head}}]
            return {
                "ok": True,
                "dry_run": True,
                "status": "already-merged",
                "gates": [],
                "plan": plan,
            }
        gates, pull = evaluate(forge, record, head, pulls, unsigned_fields(workspace, record))
        _refuse_held(gates)
        plan = [
            {
                "step": "merge",
                "action": "run",
                "detail": {
                    "pr": pull.number if pull else None,
                    "head": head,
                    "method": options.method,
                },
            }
        ]
        return {
            "ok": True,
            "dry_run": True,
            "gates": gates,
            "pr": pull.to_json() if pull else None,
            "plan": plan,
        }
    with locked(workspace, unit_id, command=f"unit merge --unit {unit_id}", seconds=seconds):
        record = load(workspace, unit_id)
        pulls = forge.pulls_for_branch(record.branch)
        merged = _already_merged(pulls, head)
        if merged is not None:
            return _done(workspace, record, merged, options.method, "already-merged")
        gates, pull = evaluate(forge, record, head, pulls, unsigned_fields(workspace, record))
        try:
            _refuse_held(gates)
        except StateError as held:
            url = pull.url if pull is not None else None
            notify.announce(workspace, "held", unit_id, reason=held.reason, url=url)
            raise
        assert pull is not None
        from unitmgr.forge_github import GitHubRefused

        try:
            merge_sha = forge.merge(pull.number, sha=head, method=options.method)
        except GitHubRefused as error:
            if error.status in (405, 409, 422):
                merged = _already_merged(forge.pulls_for_branch(record.branch), head)
                if merged is not None:  # a retried PUT whose first attempt had merged it
                    return _done(workspace, record, merged, options.method, "already-merged")
                current = forge.pull(pull.number)
                raise merge_refused(unit_id, current, head, options.method, error) from None
            raise
        merged_pull = dataclasses.replace(pull, state="merged", merge_commit_sha=merge_sha)
        return _done(workspace, record, merged_pull, options.method, "merged")


def merge_refused(
    unit_id: str, current: PullRequest, head: str, method: str, error: GitHubRefused
) -> StateError:
    """GitHub's refusal in its own words (a 405 has many causes), and the fix it points to."""
    said = error.message or f"HTTP {error.status}"
    reason = f"GitHub refused the merge of #{current.number} at {head}: {said}"
    again = f"unit merge --unit {unit_id} --head {head}"
    if current.head_sha != head:
        reason += f" (the head moved to {current.head_sha})"
        # The new head needs its own scope approval, verification and review first.
        fix = f"unit scope --unit {unit_id} --approve"
    elif "not allowed" in said.lower():  # "Merge commits are not allowed on this repository."
        others = [other for other in METHODS if other != method]
        fix = f"{again} --method {others[0]}"
    else:
        fix = f"unit status --unit {unit_id}"
    return StateError(
        "merge-refused",
        reason,
        detail={"status": error.status, "message": error.message, "pr": current.to_json()},
        next_step=fix,
    )


def _already_merged(pulls: list[PullRequest], head: str) -> PullRequest | None:
    for pull in pulls:
        if pull.state == "merged" and pull.head_sha == head:
            return pull
    return None


def _done(
    workspace: Workspace, record: UnitRecord, pull: PullRequest, method: str, status: str
) -> dict[str, Any]:
    summary = {
        "number": pull.number,
        "url": pull.url,
        "head": pull.head_sha,
        "merge_commit_sha": pull.merge_commit_sha,
        "method": method,
    }
    record.pr = {**summary, "state": "merged", "merged_recorded_at": iso_z()}
    workspace.registry.write(record)
    workspace.registry.append_event(
        {
            "command": "merge",
            "step": status,
            "status": "done",
            "at": iso_z(),
            "unit": record.unit_id,
            "detail": summary,
        }
    )
    if status == "merged":  # a repeat that finds it merged already told nobody anything new
        notify.announce(workspace, "merged", record.unit_id, url=pull.url)
    return {"ok": True, "status": status, "pr": summary, "unit_id": record.unit_id}


# A held merge's next step: the command that resolves its first failing gate (SPEC 3.8).
GATE_COMMANDS = {
    "scope_approval": ("unit", "scope"),
    "verification": ("unit", "verify"),
}


def gate_command(gate: str) -> Rewrite:
    return Rewrite(command=GATE_COMMANDS.get(gate, ("unit", "status")), keep=("--unit", "--repo"))


def gate_fix(gate: str) -> str:
    return f"{' '.join(GATE_COMMANDS.get(gate, ('unit', 'status')))} --unit ID"


def _refuse_held(gates: list[dict[str, Any]]) -> None:
    failing = [gate for gate in gates if not gate["ok"]]
    if failing:
        raise StateError(
            "held",
            f"held: {failing[0]['why']}",
            detail={"gates": gates},
            next_step=gate_fix(failing[0]["gate"]),
            next_command=gate_command(failing[0]["gate"]),
        )


def _gate(name: str, ok: bool, why: str) -> dict[str, Any]:
    return {"gate": name, "ok": ok, "why": why}


def evaluate(
    forge: Forge,
    record: UnitRecord,
    head: str,
    pulls: list[PullRequest],
    unsigned: list[str] | None = None,
) -> tuple[list[dict[str, Any]], PullRequest | None]:
    """Every gate, in order, each `{gate, ok, why}`; and the one open PR of the branch's `pulls`
    if there is exactly one. A gate whose record field is in `unsigned` (no MAC of the lead's:
    an executor may have written it, SPEC 8) is not passed, whatever it says."""
    unsigned = unsigned or []
    open_pulls = [pull for pull in pulls if pull.state == "open"]
    gates = []
    pull = open_pulls[0] if len(open_pulls) == 1 else None
    gates.append(
        _gate(
            "single_open_pr",
            pull is not None,
            f"#{pull.number} is the one open PR for {record.branch}"
            if pull
            else f"{len(open_pulls)} open PRs for branch {record.branch}",
        )
    )
    if pull is None:
        for name in GATES[1:]:
            gates.append(_gate(name, False, "no single open PR to check"))
        return gates, None
    gates.append(
        _gate("not_draft", not pull.draft, "draft PR" if pull.draft else "ready for review")
    )
    gates.append(
        _gate(
            "base",
            pull.base == record.base,
            f"targets {pull.base}" + ("" if pull.base == record.base else f", not {record.base}"),
        )
    )
    gates.append(
        _gate(
            "head_matches",
            pull.head_sha == head,
            f"PR head is {pull.head_sha}"
            + ("" if pull.head_sha == head else f", not --head {head}"),
        )
    )
    approval = (record.scope_approval or {}).get("sha")
    forged_approval = "scope_approval" in unsigned
    gates.append(
        _gate(
            "scope_approval",
            approval == head and not forged_approval,
            "the recorded scope approval is not signed by this lead — approve it again: unit "
            f"scope --unit {record.unit_id} --approve"
            if forged_approval
            else "scope approved on the head"
            if approval == head
            else "no scope approval recorded (unit scope --unit ID --approve)"
            if approval is None
            else f"head moved from {approval} to {head} after scope approval",
        )
    )
    gates.append(review_gate(forge.reviews(pull.number), pull, head))
    gates.append(checks_gate(forge.checks(head), forge.required_checks(record.base)))
    verification = record.verification or {}
    forged_verification = "verification" in unsigned
    verified = (
        verification.get("sha") == head
        and verification.get("exit_code") == 0
        and not forged_verification
    )
    gates.append(
        _gate(
            "verification",
            verified,
            "the recorded verification is not signed by this lead — verify again: unit verify "
            f"--unit {record.unit_id}"
            if forged_verification
            else "a passing unit verify is recorded on the head"
            if verified
            else "no verification recorded (unit verify --unit ID)"
            if not verification
            else f"the recorded verification is on {verification.get('sha')}, not {head}"
            if verification.get("sha") != head
            else f"the recorded verification failed: exit {verification.get('exit_code')}",
        )
    )
    return gates, pull


def review_gate(reviews: list[Review], pull: PullRequest, head: str) -> dict[str, Any]:
    latest: dict[str, Review] = {}
    decisive = [review for review in reviews if review.state in ("APPROVED", "CHANGES_REQUESTED")]
    # GitHub lists reviews oldest first; sorting makes "a later review replaces an earlier one"
    # independent of that.
    for review in sorted(decisive, key=lambda review: (review.submitted_at or "", review.id)):
        latest[review.reviewer] = review
    blocking = sorted(name for name, r in latest.items() if r.state == "CHANGES_REQUESTED")
    if blocking:
        return _gate("review_approved", False, "changes requested by " + ", ".join(blocking))
    on_head = [
        review
        for review in latest.values()
        if review.state == "APPROVED"
        and review.commit_id == head
        and (review.user is None or review.user != pull.author)
    ]
    counted = sorted(_who(r) for r in on_head if r.has_write_access)
    if counted:
        return _gate("review_approved", True, "approved on the head by " + ", ".join(counted))
    problems = []
    drive_by = sorted(_who(r) for r in on_head if not r.has_write_access)
    if drive_by:
        problems.append(
            "approved on the head only by " + ", ".join(drive_by) + ", without write access "
            "(an approval counts only from an OWNER, MEMBER or COLLABORATOR)"
        )
    stale = sorted(
        name
        for name, review in latest.items()
        if review.state == "APPROVED" and review.commit_id != head and review.has_write_access
    )
    if stale:
        problems.append("approved on an earlier head only (" + ", ".join(stale) + ")")
    if not problems:
        problems.append("no approval on the head from someone other than the author")
    return _gate("review_approved", False, "; ".join(problems))


def _who(review: Review) -> str:
    return f"{review.reviewer} ({review.author_association})"


def checks_gate(checks: list[Check], required: RequiredChecks) -> dict[str, Any]:
    latest = latest_checks(checks)
    failing = sorted(check.label for check in latest if not is_passing(check))
    missing = sorted(
        {need.label for need in required.checks if not any(need.met_by(c) for c in latest)}
    )
    problems = []
    if failing:
        problems.append("not green: " + ", ".join(failing))
    if missing:
        problems.append("required but missing: " + ", ".join(missing))
    if problems:
        return _gate("checks_green", False, "; ".join(problems))
    why = f"{len(latest)} check(s) green" if latest else "no checks reported"
    if required.unreadable:
        why += f" ({' and '.join(required.unreadable)} cannot be read (403/404)"
        if len(required.unreadable) == 2:
            why += "; only reported statuses and checks count"
        why += ")"
    return _gate("checks_green", True, why)
