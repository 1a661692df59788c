"""Whether a pair session is the lead's (SPEC 8): its staffing, signed at `pair init`.

The session file is in the git dir an executor can write, and the supervisor runs what it
names: a script partner's model is a shell command, every partner starts from `partner_bin`.
So the fields a turn runs or trusts carry one MAC by the lead (`registry.signing.sign_at`,
key outside the common dir, bound to the state dir): made at init (and the bootstrap that
completes it; a restaff is a new init), checked by `send` before anything runs and by the
supervisor before it starts the partner. It starts nothing.

A MAC alone does not tell the session the lead signed last from an older one it signed at the
same state dir (a restaff files the old session under `ended/` and inits the new pair there):
copied back, the old one verified and its replaced staffing ran. So `sign_session` also keeps
the MAC it made in the lead's state directory, outside the common dir
(`$XDG_STATE_HOME/unitmgr/sessions/<sha256 of the state dir>`, one small bounded file), and a
session whose MAC is not that one is not trusted. A state dir with no such file (a session
signed before it existed) is judged by its MAC alone.
"""

from __future__ import annotations

from pathlib import Path

from pair.errors import StateError

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from pair.paths import PairPaths
    from pair.state import Session

# What the supervisor runs or the lead trusts from the session (SPEC 8: an executor can write
# it): the partner and its command line (a script partner's model is a shell command), the
# binary and home it runs with, the session it resumes, its write role, the worktree it runs
# in and the branch and unit its ref audit allows. Signed by the lead at `pair init` (a
# restaff is a new init), verified before every turn; adding a field is one line here.
SIGNED_SESSION_FIELDS = (
    "partner",
    "sid",
    "role",
    "model",
    "model_resolved",
    "effort",
    "identity",
    "identity_home",
    "partner_bin",
    "worktree",
    "branch",
    "unit",
    # The runner choice carries its own MAC, and the environment is filtered, yet an older
    # signed choice spliced into this session moved the unit's turns silently, and a planted
    # variable reached the partner: both are the lead's only as part of this session.
    "runner",
    "environment",
)
# What sessions signed before `runner` and `environment` were covered carry a MAC over.
LEGACY_SESSION_FIELDS = SIGNED_SESSION_FIELDS[:-2]


def lead_key_id(paths: PairPaths) -> str:
    """The lead's signing key for this repository (`registry.signing`): named by its common
    dir, kept outside it (SPEC 8)."""
    from pair.git import common_dir
    from registry.userdirs import repository_id

    return repository_id(common_dir(paths.state_dir.parent))


def signed_values(
    session: Session, fields: tuple[str, ...] = SIGNED_SESSION_FIELDS
) -> dict[str, Any]:
    """The values the session's signature covers."""
    return {name: getattr(session, name) for name in fields}


def sign_session(paths: PairPaths, session: Session, key_id: str) -> None:
    """Sign the session's `SIGNED_SESSION_FIELDS` with the lead's key for this repository
    (`key_id`: `registry.userdirs.repository_id` of its common dir), bound to its state dir."""
    from registry.signing import SESSION_FIELD, Signer, sign_at

    signer = Signer(key_id)
    session.signature = sign_at(signer, paths.state_dir, SESSION_FIELD, signed_values(session))
    _remember(paths, str(session.signature["mac"]))


def _last_signed_file(paths: PairPaths) -> Path:
    import os

    from registry.userdirs import sha256, state_home  # CPython's own: no OpenSSL (SPEC 7)

    where = os.path.realpath(paths.state_dir).encode("utf-8", "surrogateescape")
    return state_home() / "sessions" / sha256(where).hexdigest()[:40]


def _remember(paths: PairPaths, mac: str) -> None:
    from registry.atomic import write_text_atomic
    from registry.userdirs import private_dir

    path = _last_signed_file(paths)
    private_dir(path.parent)
    write_text_atomic(path, mac + "\n")


def _last_signed(paths: PairPaths) -> str | None:
    """The MAC of the session the lead signed last at this state dir ("" when that cannot be
    read: nothing matches it), None when it never kept one."""
    from registry import bounded

    try:
        return bounded.read_bytes(_last_signed_file(paths), 512).decode("ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return ""


def session_trusted(paths: PairPaths, session: Session) -> bool:
    """Whether the lead's MAC covers the session's signed fields at this state dir."""
    from registry.signing import SESSION_FIELD, verified_at

    last = _last_signed(paths)
    if last is None:
        # Signed before the lead kept its last MAC: it may cover only the legacy fields.
        return any(
            verified_at(paths.state_dir, SESSION_FIELD, signed_values(session, fields), signed)
            for fields, signed in (
                (SIGNED_SESSION_FIELDS, session.signature),
                (LEGACY_SESSION_FIELDS, session.signature),
            )
        )
    if not verified_at(paths.state_dir, SESSION_FIELD, signed_values(session), session.signature):
        return False
    return last == (session.signature or {}).get("mac")


def untrusted_session_error(paths: PairPaths, root: Path | str) -> StateError:
    """`session-untrusted`: the session's partner, command or binary is not the lead's."""
    import shlex

    fields = ", ".join(SIGNED_SESSION_FIELDS)
    return StateError(
        "session-untrusted",
        f"the pair session {paths.session_file} is not signed by this lead (its {fields} "
        "drive the turn, and an executor can write the file; a session from before signatures "
        "carries none) — nothing was run; end it and run pair init again",
        detail={"session_file": str(paths.session_file), "signed_fields": fields},
        next_step=f"pair end --repo {shlex.quote(str(root))}",
    )


def require_trusted(paths: PairPaths, session: Session, root: Path | str) -> Session:
    """`session`, when the lead signed it; else `session-untrusted`, before anything runs."""
    if not session_trusted(paths, session):
        raise untrusted_session_error(paths, root)
    return session
