"""The `script` partner: the user's own command line as the executor (SPEC 4.1).

Each turn runs `sh -c <model>` with the prompt on stdin, cwd = the worktree; stdout is the reply.
It never looks up a binary named `script` (util-linux script(1) would execute the prompt).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from pair.errors import Rewrite, UsageError
from pair.partners.base import (
    EMPTY_REPLY,
    Partner,
    TurnCommand,
    TurnOutcome,
    TurnOutput,
    TurnRequest,
)
from registry.environment import child_environment, program_path
from registry.lazy_re import lazy

NEEDS_MODEL = "the script partner needs --model '<command line>'"
MODEL_FIX = "--model: the command line the script partner runs (the prompt on its stdin)"
_PUNCTUATION = ";&|()<>"
_WORD = lazy(r"[^\s;&|()<>]+")
_ASSIGNMENT = lazy(r"[A-Za-z_][A-Za-z0-9_]*=")


def first_command_word(command_line: str) -> str:
    """The command a shell line starts with, past leading `NAME=value` assignments and shell
    punctuation, read the way `shlex.split` reads words (a quoted path with spaces is one)."""
    lexer = shlex.shlex(command_line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # unbalanced quotes: the shell refuses it too; name what it starts with
        words = [match.group(0).strip("'\"") for match in _WORD.finditer(command_line)]
    for word in words:
        if word and not _ASSIGNMENT.match(word) and not set(word) <= set(_PUNCTUATION):
            return word
    return command_line.strip()


class ScriptPartner(Partner):
    name = "script"
    bootstrap = False

    def binary(self) -> str:
        return "sh"  # never a binary named `script`: the user's command line runs in sh

    def verify_cli(self, binary: str) -> str | None:
        return None  # the user's own command line: no CLI whose flags an adapter relies on

    def validate_staffing(
        self, *, model: str | None, effort: str | None, identity: str, writable: bool = True
    ) -> None:
        if not model or not model.strip():
            raise UsageError("script-needs-model", NEEDS_MODEL, next_step=MODEL_FIX)
        if effort:
            raise UsageError(
                "effort-refused",
                "the script partner has no reasoning effort — drop --effort",
                next_command=Rewrite(drop=("--effort",)),
            )
        if identity != "default":
            raise UsageError(
                "identity-refused",
                "the script partner has no named identities — drop --identity or use default",
                next_command=Rewrite(drop=("--identity",)),
            )

    def preflight(self, *, model: str | None, worktree: Path) -> None:
        if not model or not model.strip():
            raise UsageError("script-needs-model", NEEDS_MODEL, next_step=MODEL_FIX)
        first_word = first_command_word(model)
        environment = child_environment()
        if os.sep not in first_word and os.path.isabs(program_path(first_word, environment)):
            return  # an executable on PATH, as `command -v` would find it: no shell to start
        # `command -v` in the same shell that runs the turn resolves builtins, keywords and PATH.
        try:
            completed = subprocess.run(
                ["sh", "-c", 'command -v -- "$1"', "sh", first_word],
                cwd=worktree,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=30,
                env=environment,
                check=False,
            )
            found = completed.returncode == 0
        except (OSError, subprocess.SubprocessError):
            found = False
        if not found:
            raise UsageError(
                "script-command-not-found",
                f"the script partner's command {first_word!r} does not resolve in {worktree}",
                next_step=f"--model: a command line whose first word resolves in {worktree}",
            )

    def command(self, request: TurnRequest) -> TurnCommand:
        assert request.model is not None
        argv = ["sh", "-c", request.model]
        return TurnCommand(argv=argv, stdin_file=request.prompt_file, recorded=argv)

    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        reply = output.stdout.decode("utf-8", "replace").rstrip()
        if output.exit_code != 0:
            # A failed turn has no reply; what it printed is in the transcript.
            return TurnOutcome(
                status="failed", reason=f"sh exited {output.exit_code} — read the transcript"
            )
        if not reply:
            return TurnOutcome(status="empty-reply", reason=EMPTY_REPLY)
        return TurnOutcome(status="replied", reply=reply)

    def partial_reply(self, output: TurnOutput) -> str | None:
        return output.stdout.decode("utf-8", "replace").rstrip() or None

    def render(self, line: str) -> list[str]:
        """The script's output as it is (SPEC 3.14a): it has no stream format."""
        return [line]


ADAPTER = ScriptPartner()
