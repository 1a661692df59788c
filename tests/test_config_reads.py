"""A read is never blinded by the config (SPEC 3.16): a typo'd key, a wrong type or a file that
is no TOML in `.unitmgr.toml` or the machine's config leaves `list`, `status`, `watch`, `wait`,
`tail`, `serve` (and `log`) answering, exit 0, with the valid keys still in force and the
problem reported as `config_warning {file, key, reason}` in the document and one line in the
table or page — while a command that changes something still refuses `config-invalid`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Sandbox, wait_until, write_record
from tests.test_serve import serving

# (the file's text, the key the warning names — None for the whole file)
BROKEN = {
    "typo": ("stuck_minuts = 3\n", "stuck_minuts"),
    "wrong-type": ('max_active = "two"\n', "max_active"),
    "not-toml": ("max_active = = 2\n", None),
}


def _check_warning(document: dict[str, object], file: Path, key: str | None) -> None:
    warning = document.get("config_warning")
    assert isinstance(warning, dict), document
    assert warning["file"] == str(file) and warning["key"] == key, warning
    assert str(file) in str(warning["reason"]) and warning["next"] == "unit config", warning
    assert (key is None) or f"{key}:" in str(warning["reason"]), warning


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_every_read_answers_and_warns_where_a_write_refuses(sandbox: Sandbox, case: str) -> None:
    write_record(sandbox, "u1")
    text, key = BROKEN[case]
    config = sandbox.repo / ".unitmgr.toml"
    config.write_text(text)
    documents = {
        "list": sandbox.unit("list"),
        "status --all": sandbox.unit("status", "--all"),
        "status --unit": sandbox.unit("status", "--unit", "u1"),
        "wait": sandbox.unit("wait", "--unit", "u1", "--timeout-min", "0.001"),
    }
    for name, result in documents.items():
        assert result.code == 0, (name, result.stdout, result.stderr)
        assert result["ok"] is True, name
        _check_warning(result.document, config, key)
    # One line in each table, the watch banner and the serve page's JSON.
    for args in (("list", "--format", "table"), ("status", "--all", "--format", "table")):
        table = sandbox.unit(*args)
        assert table.code == 0 and "! config warning: invalid project config" in table.stdout
    watched = sandbox.unit("watch", "--once")
    assert watched.code == 0, watched.stdout + watched.stderr
    assert "config warning: invalid project config" in watched.stdout
    with serving(sandbox) as served:
        for path in ("/api/status", "/api/list"):
            status, document, _ = served.get(path)
            assert status == 200
            _check_warning(document, config, key)
    # A command that changes something still refuses the same file.
    created = sandbox.create("u2")
    assert created.code == 2 and created["code"] == "config-invalid", created.stdout
    assert not sandbox.worktree("u2").exists()


def test_the_machine_config_is_warned_of_too(sandbox: Sandbox) -> None:
    sandbox.machine_config.write_text("[notify]\nevents = 3\n")
    listed = sandbox.unit("list")
    assert listed.code == 0, listed.stdout
    _check_warning(listed.document, sandbox.machine_config, "notify.events")


def test_valid_keys_still_apply_beside_a_bad_one(sandbox: Sandbox) -> None:
    """`stuck_minutes` in the same file as a typo still makes a quiet turn `stuck`, in list,
    status and wait alike; every problem is counted, the first one named."""
    created = sandbox.create("u1", model="cat > /dev/null; sleep 60; echo done")
    assert created.code == 0, created.stdout
    config = sandbox.repo / ".unitmgr.toml"
    config.write_text('stuk = 1\nstuck_minutes = 0.01\nmax_held = "many"\n')
    status = wait_until(
        lambda: (
            (found := sandbox.unit("status", "--all")).document["units"][0]["attention"]["state"]
            == "stuck"
            and found
        ),
        timeout=30,
    )
    assert status.code == 0
    assert status["config_warning"]["key"] == "stuk" and status["config_warning"]["problems"] == 2
    listed = sandbox.unit("list")
    assert listed["units"][0]["attention"]["state"] == "stuck", listed.stdout
    one = sandbox.unit("status", "--unit", "u1")
    assert one["unit"]["attention"]["state"] == "stuck", one.stdout
    assert one["config_warning"]["problems"] == 2
    # Without the valid key the same turn is not stuck: the default is 10 minutes.
    config.write_text("stuk = 1\n")
    again = sandbox.unit("status", "--all")
    assert again["units"][0]["attention"]["state"] == "running", again.stdout
    assert again["config_warning"]["problems"] == 1
    cancelled = sandbox.unit("cancel", "--unit", "u1")
    assert cancelled.code == 0, cancelled.stdout


def test_tail_warns_on_stderr_and_keeps_the_transcript_clean(sandbox: Sandbox) -> None:
    created = sandbox.create("u1", model="cat > /dev/null; echo hello-from-the-turn")
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    config = sandbox.repo / ".unitmgr.toml"
    # A key an executor could make print escape sequences on the lead's terminal.
    config.write_text('"stuck\\u001b[2J" = 1\n')
    for extra in ((), ("--raw",)):
        tailed = sandbox.unit("tail", "--unit", "u1", *extra)
        assert tailed.code == 0, tailed.stdout + tailed.stderr
        assert "hello-from-the-turn" in tailed.stdout and "config" not in tailed.stdout
        assert "config warning: invalid project config" in tailed.stderr
        assert "\x1b" not in tailed.stderr and "\\x1b" in tailed.stderr
    table = sandbox.unit("status", "--all", "--format", "table")
    assert "\x1b" not in table.stdout and "\\x1b" in table.stdout
    assert json.loads(sandbox.unit("status", "--all").stdout)["config_warning"]["key"]
