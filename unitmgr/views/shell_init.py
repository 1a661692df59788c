"""`unit shell-init bash|zsh|fish` (SPEC 3.18): a `unit` shell function that adds `unit cd ID`.

A program cannot change its shell's directory, so — as zoxide's and Worktrunk's shell
integration do — the shell gets a function named `unit`: `unit cd ID` runs `unit path ID` and
`cd`s there (on a refusal it prints the document and returns its exit code, staying put), and
every other subcommand goes to the real `unit` (`command unit`) unchanged. Install it with
`eval "$(unit shell-init bash)"` in ~/.bashrc (zsh: ~/.zshrc), or
`unit shell-init fish | source` in ~/.config/fish/config.fish. Pure text: reads nothing.
"""

from __future__ import annotations

from registry.errors import UsageError
from registry.output import Rendered

POSIX = """\
# unit shell integration (unit shell-init {shell}): `unit cd ID` enters a unit's worktree.
unit() {{
  if [ "$1" = cd ]; then
    shift
    local __unit_path __unit_status
    __unit_path="$(command unit path "$@")"
    __unit_status=$?
    if [ "$__unit_status" -ne 0 ]; then
      printf '%s\\n' "$__unit_path"
      return "$__unit_status"
    fi
    builtin cd -- "$__unit_path"
  else
    command unit "$@"
  fi
}}
"""

FISH = """\
# unit shell integration (unit shell-init fish): `unit cd ID` enters a unit's worktree.
function unit --description 'unit, and `unit cd ID` to enter a unit worktree'
    if test (count $argv) -ge 1; and test "$argv[1]" = cd
        set -l __unit_path (command unit path $argv[2..-1] | string collect)
        set -l __unit_status $pipestatus[1]
        if test $__unit_status -ne 0
            printf '%s\\n' $__unit_path
            return $__unit_status
        end
        builtin cd -- $__unit_path
    else
        command unit $argv
    end
end
"""

SHELLS = ("bash", "zsh", "fish")


def run(shell: str) -> Rendered:
    if shell not in SHELLS:
        raise UsageError(
            "unknown-shell",
            f"unit shell-init takes bash, zsh or fish, not {shell!r}",
            next_step="unit shell-init bash",
        )
    return Rendered(FISH if shell == "fish" else POSIX.format(shell=shell))
