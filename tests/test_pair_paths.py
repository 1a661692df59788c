"""pair names its own files (issue 15): `pair.api.paths_for` / `paths_at` agree with what the
commands report, and no unitmgr module builds a `<git-dir>/pair/...` path itself."""

from __future__ import annotations

import re
from pathlib import Path

from pair import api
from tests.conftest import Sandbox, git
from tests.test_pair import body, init_script

# The names only pair.paths may spell: a unitmgr module that writes one builds a pair path.
PAIR_FILE_NAMES = re.compile(
    r"""["'](?:transcripts|session\.json|in-flight\.(?:json|lock))["']"""
    r"""|["'][^"']*-(?:receipt\.json|prompt\.md|reply\.md|supervisor\.log)["']"""
    r"""|/\s*["']pair["']"""
)
ROOT = Path(__file__).resolve().parent.parent


def test_paths_agree_with_what_the_commands_report(sandbox: Sandbox) -> None:
    linked = sandbox.root / "linked"
    git(sandbox.repo, "worktree", "add", "-q", "-b", "linked", str(linked))
    session = init_script(sandbox, "cat >/dev/null; echo done", repo=linked)
    paths = api.paths_for(linked)
    assert str(paths.state_dir) == session["state_dir"]
    assert paths.state_dir != api.paths_for(sandbox.repo).state_dir
    assert str(paths.session_file) == session["state_file"]
    assert str(paths.transcripts_dir) == session["transcripts"]
    receipt = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), repo=linked)
    assert receipt["status"] == "replied", receipt.document
    assert str(paths.receipt_file(1, "task")) == receipt["receipt_file"]
    assert str(paths.transcript_file(1, "task")) == receipt["transcript"]
    assert api.paths_at(session["state_dir"]) == paths
    # The git dir of the linked worktree is where its state lives.
    admin = Path(git(linked, "rev-parse", "--absolute-git-dir").strip())
    assert api.state_dir_for(admin) == paths.state_dir
    assert api.is_receipt(Path(receipt["receipt_file"]).name)
    assert api.is_log(Path(receipt["transcript"]).name)
    assert not api.is_log(Path(receipt["receipt_file"]).name)
    assert paths.marker_mutex_file in paths.lock_files and paths.marker_file not in paths.lock_files


def test_unitmgr_never_spells_a_pair_file_name() -> None:
    offenders = []
    for path in sorted((ROOT / "unitmgr").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PAIR_FILE_NAMES.search(line.split("#")[0]):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "ask pair.api for pair paths:\n" + "\n".join(offenders)
