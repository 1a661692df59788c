"""`unit feedback --every SECONDS` (SPEC 3.17): the lead's loop, one `unit feedback` a round.

Each round is the whole command (`unitmgr/lifecycle/feedback.py`: gather, and with `--send
--auto` the send, under the unit lock, journaled), printed as one line `{"round": {n, at,
result}}` — wrapped, so no round can pass for the end. The loop ends with one closing line,
as `unit log --follow` does (references/decisions.md): `{ok: true, status: "done", why}` once
no unit it watches is `working` (nothing left to watch, exit 0), or the `interrupted` document
when Ctrl-C or SIGTERM arrives between rounds (exit 130 or 143; its `next` starts the loop
again). A signal inside a round is the command's own interruption: the journal stays and the
same command resumes it. A round that GitHub refuses or cannot answer is printed and the loop
goes on: the next round asks again (ETags: an idle round costs only 304s).

`SECONDS` is a whole number from 120 (GitHub's fair use for a poll; `UNITMGR_FEEDBACK_MIN_EVERY`
lowers it, for tests) to 86400.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import time

from registry.errors import Interrupted, Rewrite, ToolError, UsageError
from registry.output import Rendered, write_text
from registry.timeutil import iso_z
from unitmgr import option_fields
from unitmgr.options import FeedbackOptions

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

MAX_EVERY = 86400
DEFAULT_MIN_EVERY = 120


def min_every() -> int:
    raw = os.environ.get("UNITMGR_FEEDBACK_MIN_EVERY", "")
    return int(raw) if re.fullmatch(r"[1-9][0-9]{0,4}", raw) else DEFAULT_MIN_EVERY


def every_seconds(value: str, options: FeedbackOptions) -> int:
    """`--every`'s value, or `invalid-every` (exit 2); `--every` goes with reads and with
    `--send --auto` only (an explicit send is one command, not a loop)."""
    low = min_every()
    if not re.fullmatch(r"[0-9]{1,6}", value) or not low <= int(value) <= MAX_EVERY:
        raise UsageError(
            "invalid-every",
            f"--every must be a whole number of seconds from {low} to {MAX_EVERY}, got {value!r}",
            next_command=Rewrite(set_options={"--every": str(max(300, low))}),
        )
    if options.send and not options.auto:
        raise UsageError("usage", "--every with --send needs --auto: a loop sends only as --auto")
    if options.dry_run:
        raise UsageError("usage", "--every does not go with --dry-run: one dry run shows a round")
    return int(value)


def _line(value: dict[str, Any]) -> str:
    from registry.output import escape_raw_controls

    return escape_raw_controls(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _watching(repo: str, options: FeedbackOptions) -> bool:
    """Whether a unit this loop watches is still `working` (read from the registry, no GitHub)."""
    from unitmgr.workspace import Workspace

    workspace = Workspace.open(repo)
    ids = [options.unit] if options.unit else workspace.registry.unit_ids()
    for unit_id in ids:
        try:
            record = workspace.read_record(unit_id)
        except Exception:  # an unreadable record is not watched: `unit list` shows it
            continue
        if record is not None and record.lifecycle == "working":
            return True
    return False


def _command_line(repo: str, options: FeedbackOptions, seconds: int) -> str:
    words = ["unit", "feedback"]
    words += ["--unit", options.unit] if options.unit else ["--all"]
    words += ["--send"] * options.send + ["--queue"] * options.queue + ["--auto"] * options.auto
    if options.only:
        words += ["--only", options.only]
    if options.max_bytes != "16384":
        words += ["--max-bytes", options.max_bytes]
    words += ["--every", str(seconds), "--repo", repo]
    return shlex.join(words)


def run(repo: str, options: FeedbackOptions) -> Rendered:
    assert options.every is not None
    seconds = every_seconds(options.every, options)
    progress = {"rounds": 0, "between": False}
    try:
        return _loop(repo, options, seconds, progress)
    except (Interrupted, KeyboardInterrupt) as error:
        signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
        name = signal.Signals(signum).name
        rounds = int(progress["rounds"])
        where = (
            f"between rounds after {rounds}; nothing was being sent"
            if progress["between"]
            else f"in round {rounds}; a send it began stays journaled and this command resumes it"
        )
        document = {
            "ok": False,
            "code": "interrupted",
            "reason": f"interrupted by {name} {where}",
            "next": _command_line(repo, options, seconds),
            "detail": {"signal": name, "rounds": rounds},
        }
        return Rendered(_line(document), exit_code=128 + signum)


def _loop(repo: str, options: FeedbackOptions, seconds: int, progress: dict[str, Any]) -> Rendered:
    from unitmgr.lifecycle import feedback

    once = option_fields.replace(options, every=None)
    while True:
        progress["rounds"] += 1
        progress["between"] = False
        rounds = progress["rounds"]
        try:
            result: dict[str, Any] = feedback.run(repo, once)
        except UsageError:
            raise  # the call is wrong: no round will be right
        except ToolError as error:  # GitHub refused or did not answer: the next round asks
            if rounds == 1 and error.code in ("github-not-configured", "not-a-git-repository"):
                raise
            result = error.document()
        write_text(_line({"round": {"n": rounds, "at": iso_z(), "result": result}}) + "\n")
        progress["between"] = True
        if not _watching(repo, options):
            who = f"unit {options.unit} is not working" if options.unit else "no unit is working"
            document = {
                "ok": True,
                "status": "done",
                "rounds": rounds,
                "why": f"nothing left to watch: {who}",
            }
            return Rendered(_line(document))
        time.sleep(seconds)
