"""Where a pair's turns run (SPEC 4.3): the one chooser, `runner_for(state_dir)`.

`base` holds the `TurnRunner` protocol and its value types, `local` the default runner (a
detached supervisor on this machine), `ray` the Ray runner (the same supervisor driving one
detached actor per unit on another machine), `choice` the signed `RunnerChoice` the pair
session names. Nothing here imports a runner until one is chosen, and `ray` is imported only by
`pair.runners.ray` (and its node side), lazily.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pair.runners.choice import RunnerChoice

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from pair.runners.base import TurnRunner
    from pair.state import Session

__all__ = ["RunnerChoice", "check_choice", "runner_for", "session_choice"]


def check_choice(choice: RunnerChoice) -> None:
    """Refuse a choice that cannot run here: `ray-auth-required` (a non-loopback address
    without Ray's token auth), `runner-unavailable` (Ray does not import). Contacts nothing."""
    from pair.runners.choice import refuse_unauthenticated

    if choice.kind == "ray":
        from pair.runners.ray import require_ray

        refuse_unauthenticated(choice)
        require_ray()


def session_choice(state_dir: str | Path, session: Session | None = None) -> RunnerChoice:
    """The runner the pair session in `state_dir` names (or `session`, one `pair init` is
    creating there and has not saved yet), verified (`runner-untrusted` when an unsigned or
    forged choice is there); local when there is no session or no choice."""
    from pair.paths import PairPaths
    from pair.runners.choice import verified_choice
    from pair.state import load_session

    paths = PairPaths(Path(state_dir))
    if session is None:
        session = load_session(paths)
    if session is None or session.runner is None:
        return RunnerChoice()
    again = shlex.join(["pair", "init", "--repo", session.worktree, "--partner", session.partner])
    if session.partner == "script" and session.model:
        again += " " + shlex.join(["--model", session.model])
    again += " --runner ray"
    return verified_choice(paths.state_dir, session.runner, untrusted_next=again)


def runner_for(state_dir: str | Path, *, session: Session | None = None) -> TurnRunner:
    """The runner of the pair in `state_dir` (`session`: the one being created there): the one
    place a runner is chosen."""
    choice = session_choice(state_dir, session)
    if choice.kind == "ray":
        from pair.runners.ray import RayRunner

        return RayRunner(Path(state_dir), choice)
    from pair.runners.local import LocalRunner

    return LocalRunner(Path(state_dir))
