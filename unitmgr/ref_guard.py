"""The `reference-transaction` hook unitmgr installs (SPEC 4.1): an audit log of every ref an
executor updates, and the opt-in ref guard (`guard_refs = true` in the project config).

The log: for every update a process carrying `UNITMGR_UNIT` prepares (the pair
supervisor sets it for the executor's partner), the hook appends `EPOCH OLD NEW REF UNIT` to
the registry's `ref-audit.log` (registry/ref_ledger.py), in plain shell: an executor's commit
costs no interpreter. The supervisor reads it to charge a ref change to the unit that made it
(pair/ref_audit.py). The lead's own git never runs hooks (its calls are neutral, SPEC 8): what
it moves goes into the ledger instead.

The guard refuses, while `UNITMGR_UNIT` is set, any ref update outside what that unit's turn
may move. Allowed, as the ref audit allows (pair/git.py `_turn_may_move`): the unit's branch,
that branch's remote-tracking refs, tags it creates, and its own worktree's HEAD and pseudo-refs.
Everything else (`main`, another unit's branch, a tag that exists) is refused in the `prepared`
state, which aborts the transaction. It runs only while the registry's `guard-refs.on` flag is
there (`unit create` writes it when the config's `guard_refs` is on, removes it when off).

`install` writes the hook into the common dir's `hooks/` (or a `core.hooksPath` directory only
when it carries `OWNED_MARKER`: a hooks path unitmgr does not own is never written to). A hook
already there that is not ours is kept as `reference-transaction.unitmgr-chained`, run first
with the same arguments and input, and its refusal is respected. The guard reads the config and
the unit's record when it runs, so turning `guard_refs` off stops it refusing at once; the hook
is never removed (other units share it, and without `UNITMGR_UNIT` it does nothing).

The guard's check runs in the hook's process (`python -m unitmgr.ref_guard`); it fails closed
(refuses) when it cannot read what it needs. The config it reads is the repository's (the
record's top level) and this machine's, never the executor's worktree copy.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from pathlib import Path

from registry.lazy_re import lazy

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

HOOK_NAME = "reference-transaction"
CHAINED_SUFFIX = ".unitmgr-chained"
HOOK_MARKER = "# unitmgr-ref-guard"  # v2 logs too; an older hook of ours is rewritten
GUARD_FLAG = "guard-refs.on"  # in the registry: the guard refuses only while it is there
OWNED_MARKER = ".unitmgr-owned"  # in a core.hooksPath directory unitmgr may write to
_PSEUDO_REF = lazy(r"[A-Z][A-Z_]*")  # HEAD, ORIG_HEAD, FETCH_HEAD, ... (per worktree)
_PER_WORKTREE = ("refs/worktree/", "refs/bisect/", "refs/rewritten/")


def hook_text(python: str, *, audit_log: Path, guard_flag: Path) -> str:
    return f"""#!/bin/sh
{HOOK_MARKER} v2: installed by `unit create` (SPEC 4.1); do not edit.
# Runs the hook it replaced first; then, while UNITMGR_UNIT is set, logs each prepared ref
# update for the ref audit and, with guard_refs on, refuses one outside that unit's branch
# (unitmgr/ref_guard.py).
input=$(cat; echo .)
input=${{input%.}}
if [ -x "$0{CHAINED_SUFFIX}" ]; then
    printf '%s' "$input" | "$0{CHAINED_SUFFIX}" "$@" || exit $?
fi
[ -n "$UNITMGR_UNIT" ] || exit 0
case "$UNITMGR_UNIT" in *[!A-Za-z0-9_.+-]*) exit 0 ;; esac
[ "$1" = prepared ] || exit 0
# Logged before the update lands (a reader that sees the moved ref finds its line already);
# an update that then aborts moved nothing, so its line explains no change.
now=$(date +%s)
printf '%s\n' "$input" | while read -r old new ref; do
    [ -n "$ref" ] && printf '%s %s %s %s %s\n' "$now" "$old" "$new" "$ref" "$UNITMGR_UNIT"
done >> {shlex.quote(str(audit_log))} 2>/dev/null
[ -f {shlex.quote(str(guard_flag))} ] || exit 0
printf '%s' "$input" | exec {shlex.quote(python)} -I -m unitmgr.ref_guard "$1"
"""


def install(toplevel: Path, common_git_dir: Path, *, guard: bool) -> dict[str, Any]:
    """Install (or refresh) the hook, and set the guard's flag to `guard`; `{installed,
    chained, guard}` or `{skipped: why}`."""
    from registry.atomic import write_text_atomic
    from registry.layout import registry_root
    from registry.ref_ledger import audit_log_path, prune_audit_log
    from unitmgr import git

    flag = registry_root(common_git_dir) / GUARD_FLAG
    if guard:
        write_text_atomic(flag, "guard_refs = true in the project config (unitmgr/ref_guard.py)\n")
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(flag)
    prune_audit_log(common_git_dir)

    configured = git.config_value("core.hooksPath", cwd=toplevel)
    directory = git.hooks_directory(cwd=toplevel)
    if configured is not None and not (directory / OWNED_MARKER).is_file():
        return {
            "skipped": f"core.hooksPath {configured} is not unitmgr's (no {OWNED_MARKER} there): "
            "no hook is written to it; the ref audit still reports foreign ref changes"
        }
    hook, chained = directory / HOOK_NAME, directory / (HOOK_NAME + CHAINED_SUFFIX)
    if os.path.lexists(hook) and not _is_ours(hook):
        if os.path.lexists(chained):
            return {
                "skipped": f"{hook} is not unitmgr's and {chained.name} exists already: move "
                "one of them away to let unitmgr chain the other"
            }
        os.rename(hook, chained)  # kept and run first by ours
    directory.mkdir(parents=True, exist_ok=True)
    text = hook_text(sys.executable, audit_log=audit_log_path(common_git_dir), guard_flag=flag)
    if not _is_ours(hook) or hook.read_text(encoding="utf-8") != text:
        write_text_atomic(hook, text, mode=0o755, staging=_staging(directory, flag.parent))
    # unitmgr's own hook (and the one it moved aside) is accepted, not foreign (SPEC 8).
    from unitmgr import config_audit

    config_audit.accept_paths(toplevel, common_git_dir, [hook, chained])
    return {
        "installed": str(hook),
        "chained": str(chained) if os.path.lexists(chained) else None,
        "guard": guard,
    }


def _staging(hooks: Path, registry: Path) -> Path | None:
    """Where the hook's temp file is written: the registry directory when it shares the hooks
    directory's filesystem (so `os.replace` is one rename), else beside the hook. A create
    SIGKILLed mid-write then leaves its temp where `unit create` sweeps it, not in the hooks
    directory, where the config audit would refuse the next command over it; the next install
    (a resumed create's) sweeps it."""
    from registry.atomic import ensure_private_dir, sweep_temp_files

    try:
        ensure_private_dir(registry)
        sweep_temp_files(registry)
        if os.stat(registry).st_dev == os.stat(hooks).st_dev:
            return registry
    except OSError:
        pass
    return None


def own_hook_fingerprint(common_git_dir: Path) -> str:
    """The config audit's fingerprint (pair/config_audit.py) of the hook `install` writes from
    this interpreter. Derived, not recorded: a hook a concurrent create has just written and not
    yet accepted is then no stranger to another create's audit, and a planted hook cannot match
    it without being, byte for byte, unitmgr's own."""
    from pair.config_audit import HASH_BYTES
    from registry.layout import registry_root
    from registry.redact import redact
    from registry.ref_ledger import audit_log_path
    from registry.userdirs import sha256

    flag = registry_root(common_git_dir) / GUARD_FLAG
    text = hook_text(sys.executable, audit_log=audit_log_path(common_git_dir), guard_flag=flag)
    data = redact(text).encode("utf-8")  # as write_text_atomic writes it
    return f"mode 755 bytes {len(data)} sha256 {sha256(data[:HASH_BYTES]).hexdigest()}"


def _is_ours(hook: Path) -> bool:
    try:
        with open(hook, "rb") as handle:
            return HOOK_MARKER.encode() in handle.read(4096)
    except OSError:
        return False


def refused_updates(unit_id: str, lines: list[str], *, cwd: Path) -> list[str]:
    """The refs of a `prepared` transaction's lines (`OLD NEW REF`) the unit may not update."""
    from registry.store import Registry
    from unitmgr import git
    from unitmgr.config import load_config
    from unitmgr.workspace import realpath

    here = git.resolve_repository(cwd)
    record = Registry(here.common_git_dir).read(unit_id)
    if record is None:
        return []  # no such unit (any more): nothing to guard
    config = load_config(Path(record.repository or here.toplevel), here.common_git_dir)
    if not config.value("guard_refs"):
        return []
    in_own_worktree = realpath(here.toplevel) == realpath(record.worktree)
    refused = []
    for line in lines:
        parts = line.split(" ", 2)
        if len(parts) != 3:
            continue
        ref = parts[2]
        if _may_update(ref, branch=record.branch, in_own_worktree=in_own_worktree):
            continue
        if ref.startswith("refs/tags/") and not git.ref_exists(ref, cwd=cwd):
            continue  # a tag the turn creates
        refused.append(ref)
    return refused


def _may_update(ref: str, *, branch: str, in_own_worktree: bool) -> bool:
    if ref == f"refs/heads/{branch}":
        return True
    remote = ref.removeprefix("refs/remotes/")
    suffix = "/" + branch
    if remote != ref and remote.endswith(suffix) and "/" not in remote[: -len(suffix)]:
        return True
    return in_own_worktree and (bool(_PSEUDO_REF.fullmatch(ref)) or ref.startswith(_PER_WORKTREE))


def main(argv: list[str] | None = None) -> int:
    """The hook's check: exit 1 (the transaction aborts) naming every refused ref."""
    args = sys.argv[1:] if argv is None else argv
    unit_id = os.environ.get("UNITMGR_UNIT", "")
    if not unit_id or args[:1] != ["prepared"]:
        return 0
    lines = sys.stdin.read().splitlines()
    try:
        refused = refused_updates(unit_id, lines, cwd=Path.cwd())
    except Exception as error:  # fail closed: a guard that cannot check refuses
        print(f"unitmgr ref guard: cannot check unit {unit_id}'s refs ({error})", file=sys.stderr)
        return 1
    if refused:
        print(
            f"unitmgr ref guard: unit {unit_id} may not update {', '.join(refused)} — only its "
            "branch, its remote-tracking refs, new tags and its worktree's HEAD (guard_refs)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
