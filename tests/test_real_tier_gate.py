"""The real-CLI tier's gate: missing CLIs skip it loudly, or fail it under .ci/run (SPEC 4.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real import conftest as tier


def test_missing_clis_skip_the_tier_with_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tier, "NODE_BIN", tmp_path)
    monkeypatch.setattr(tier, "REQUIRE_REAL", False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        tier.require_binary("codex")
    assert "REAL-CLI TIER NOT RUN" in str(skipped.value)
    assert "npm ci --no-audit --no-fund" in str(skipped.value)


def test_missing_clis_fail_the_tier_when_it_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tier, "NODE_BIN", tmp_path)
    monkeypatch.setattr(tier, "REQUIRE_REAL", True)
    with pytest.raises(pytest.fail.Exception) as failed:
        tier.require_binary("claude")
    assert "UNITMGR_REQUIRE_REAL_CLIS=1" in str(failed.value)


def test_ci_installs_the_pinned_clis_and_requires_the_tier() -> None:
    script = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    install = script.index("npm ci --no-audit --no-fund")
    required = script.index("export UNITMGR_REQUIRE_REAL_CLIS=1")
    assert install < required < script.index("pytest")
