"""`unit config --approve` (SPEC 8 "Config files"): approve the `setup` and `notify.command`
the config files give now, so a create may run them (unitmgr/config_trust.py).

One write, in the user's config dir (the approvals file, atomic, 0600); it takes no registry
lock and runs nothing. It first moves an old machine file out of the common dir (inert, so
nothing of it is approved here). `--dry-run` writes nothing and says what it would approve.
"""

from __future__ import annotations

from unitmgr import config_trust
from unitmgr.config import load_naming_every_problem
from unitmgr.lifecycle.runner import dry_run_aware
from unitmgr.options import ConfigOptions
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


@dry_run_aware
def run(repo: str, options: ConfigOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    common_dir = workspace.common_git_dir
    migration = config_trust.migrate_legacy(common_dir, dry_run=options.dry_run)
    config = load_naming_every_problem(common_dir)
    waiting, already = config_trust.pending(config, config_trust.read_approvals(common_dir))
    document: dict[str, Any] = {"ok": True, "repository": str(workspace.toplevel)}
    if options.dry_run:
        document.update(dry_run=True, would_approve=waiting)
    else:
        if waiting:
            config_trust.store(common_dir, waiting)
        document["approved"] = waiting
    document["already_approved"] = already
    document["approvals_file"] = str(config_trust.approvals_file(common_dir))
    if migration is not None:
        document["config_migration"] = migration
    return document
