"""An unexpected exception keeps its cause and traceback (issue 15 item 4).

Inside a journaled step the exception is provoked by a hostile file in the way, not by patching
product code: a directory where the unit's manifest belongs makes dismantle's `manifest` step
fail with `IsADirectoryError`, which no code raises on purpose.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from registry import crashlog
from registry.outcome import deliver
from tests.conftest import Sandbox


def _log_of(detail: dict[str, Any], registry: Path) -> str:
    log = Path(detail["log"])
    assert log.parent == registry / "logs"
    assert log.name.startswith("internal-")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    return log.read_text()


def test_an_unexpected_error_in_a_step_keeps_its_traceback_in_detail_and_a_log(
    sandbox: Sandbox,
) -> None:
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    manifest = sandbox.registry / "tasks" / "u1.md"
    manifest.unlink()
    manifest.mkdir()

    result = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")

    assert result.code == 1, result.stdout
    assert result["code"] == "step-failed"
    assert result["reason"].startswith("dismantle step manifest failed: ")
    cause = result["detail"]["cause"]
    assert cause["exception"] == "IsADirectoryError"
    assert "IsADirectoryError" in cause["traceback"]
    assert "_manifest" in cause["traceback"]  # the frame that failed, not just a message
    text = _log_of(result["detail"], sandbox.registry)
    assert "unit dismantle --unit u1" in text
    assert "IsADirectoryError" in text and "_manifest" in text
    # The journal still says which step failed, and the repeat resumes there.
    record = sandbox.record("u1")
    assert record["lifecycle"] == "dismantle-failed"
    assert record["cleanup"][-1]["step"] == "manifest"
    assert record["cleanup"][-1]["status"] == "failed"
    manifest.rmdir()
    assert sandbox.unit("dismantle", "--unit", "u1", "--force", "u1").code == 0


def test_an_unexpected_error_at_the_edge_is_internal_with_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(crashlog, "_opened", [])  # this process's registry, for this test only
    (tmp_path / ".git").mkdir()
    crashlog.remember(tmp_path / ".git" / "orchestrate")

    def broken() -> None:
        {}["missing"]

    assert deliver(broken, "unit status --all") == 1
    document = json.loads(capsys.readouterr().out)
    assert document["code"] == "internal"
    assert "KeyError" in document["detail"]["traceback"]
    text = _log_of(document["detail"], tmp_path / ".git" / "orchestrate")
    assert "unit status --all" in text and "in broken" in text


def test_a_typed_refusal_writes_no_log(sandbox: Sandbox) -> None:
    result = sandbox.unit("status", "--unit", "nobody")

    assert result.code == 1 and result["code"] == "no-such-unit"
    assert "log" not in (result["detail"] or {})
    assert not (sandbox.registry / "logs").exists()
