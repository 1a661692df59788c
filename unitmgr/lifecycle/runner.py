"""The one step runner of every journaled command (create, restaff, addendum, dismantle).

A command declares its steps as a mapping of step name -> handler, in journal order (SPEC 2.2),
and says what a failure means for it (`on_failure`: roll back, keep the journal, mark the
record). The runner owns the rest, so a fix to any of it is made once:

- skip what the journal already has `done` (or `skipped`): a repeated command resumes at the
  first unfinished step;
- journal each step before and after it acts (`Journal.step`), and a declared skip as `skipped`;
- classify a failure: a typed `ToolError` passes through with its `code`; anything else becomes
  `step-failed` naming the step, with the original exception kept as its `__cause__` and its
  (redacted) traceback in `detail.traceback`, so a programming error in a handler never looks
  like a git failure with no trace.

It must not know any one command's steps or resources, and it never decides whether to roll
back: that is the command's `on_failure`.

`@dry_run_aware` is the one wrapper every command with `--dry-run` enters through: a dry run
refuses exactly as the real command would, plus `dry_run: true`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from registry.errors import StateError, ToolError, UsageError, marking_dry_run
from registry.light_dataclass import dataclass
from registry.redact import redact
from unitmgr import git
from unitmgr.lifecycle.journal import Journal, StepOutcome

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any, Protocol, TypeVar
else:
    Protocol = object  # a structural type for mypy only: no `typing` at run time (SPEC 7)

Handler = Callable[[StepOutcome], None]


@dataclass(frozen=True)
class Step:
    """A step that needs more than its handler: a reason to journal it `skipped` instead of
    running it, or the detail of its `started` entry (what a resume must find there).

    `journals_itself` is for a step whose skip or started detail is only known once it has read
    something (addendum's `notify` reads the pair first): its handler journals through
    `Journal.step` / `Journal.skip` itself; the runner still skips it when done and classifies
    its failure.
    """

    handler: Handler | None = None
    skip: str | None = None
    started: dict[str, Any] | None = None
    journals_itself: bool = False


OnFailure = Callable[[ToolError, str | None], ToolError]


def unexpected(error: Exception, step: str | None) -> StateError:
    """`step-failed` for an exception no code raised on purpose; its cause and traceback stay."""
    from traceback import format_exception  # only on a failure: off the start-up path (SPEC 7)

    failed = StateError(
        "step-failed",
        f"{step} failed: {error}",
        detail={
            "step": step,
            "exception": type(error).__name__,
            "traceback": redact("".join(format_exception(error))),
        },
    )
    failed.__cause__ = error
    return failed


class StepRunner:
    """Runs one command's declared steps over its journal."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.current: str | None = None  # the step running (or that failed)

    def run(
        self,
        steps: Mapping[str, Handler | Step],
        *,
        on_failure: OnFailure,
        before: Callable[[str], None] | None = None,
        after: Callable[[str], None] | None = None,
    ) -> None:
        """Run every step not yet done, in the order given.

        `before(step)` runs before a step is journaled `started` (e.g. stop a child an earlier,
        killed attempt left); `after(step)` runs inside the step once its handler succeeded, so
        what it sets on the record is written with the step's `done` entry. On failure the error
        `on_failure(error, step)` returns is raised (it may raise one itself), chained to the
        original.
        """
        try:
            for name, declared in steps.items():
                if self.journal.is_done(name):
                    continue
                self.current = name
                step = declared if isinstance(declared, Step) else Step(handler=declared)
                if step.skip is not None:
                    if after is not None:
                        after(name)
                    self.journal.skip(name, step.skip)
                    continue
                if before is not None:
                    before(name)
                if step.journals_itself:
                    assert step.handler is not None
                    step.handler(StepOutcome())
                    continue
                with self.journal.step(name, step.started) as outcome:
                    if step.handler is not None:
                        step.handler(outcome)
                    if after is not None:
                        after(name)
        except ToolError as error:
            raise on_failure(error, self.current) from error
        except Exception as error:
            raise on_failure(unexpected(error, self.current), self.current) from error


class _DryRunOptions(Protocol):
    @property
    def dry_run(self) -> bool: ...


if TYPE_CHECKING:
    Options = TypeVar("Options", bound=_DryRunOptions)
    Command = Callable[[str, Options], dict[str, Any]]


def _writes(options: object) -> bool:
    """Whether the command writes: every one that enters here but `unit scope` without
    `--approve` and `unit feedback` without `--send`, which only report."""
    for flag in ("approve", "send"):
        if hasattr(options, flag):
            return bool(getattr(options, flag))
    return True


def dry_run_aware(command: Command[Options]) -> Command[Options]:
    """`command(repo, options)`, whose refusals carry `dry_run: true` under `--dry-run`.

    A command that writes first has the config audit (SPEC 8) accept the repository's git
    config, hooks and attributes, or refuse `repo-config-untrusted` — a dry run exactly so."""

    @functools.wraps(command)
    def run(repo: str, options: Options) -> dict[str, Any]:
        with marking_dry_run(options.dry_run), git.resolving_once(repo):
            first_use = None
            if _writes(options):
                from unitmgr import config_audit

                verb = command.__module__.rsplit(".", 1)[-1].removesuffix("_check")
                first_use = config_audit.require_trusted(
                    repo, command=f"unit {verb}", dry_run=options.dry_run
                )
            try:
                result = command(repo, options)
            except UsageError:
                # Bad input writes nothing (SPEC 8), not even the first use's baseline; a later
                # failure keeps it: the executor may have run by then.
                if first_use is not None and first_use["taken"]:
                    config_audit.forget_first_use(first_use)
                raise
            if first_use is not None and result.get("ok"):
                result["config_baseline"] = first_use
            return result

    return run
