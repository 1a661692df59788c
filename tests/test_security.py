"""Security (SPEC 8): ids and branch names cannot escape the registry or inject git options."""

from __future__ import annotations

import pytest

from tests.conftest import Sandbox, run_cli


@pytest.mark.parametrize(
    ("option", "value", "code"),
    [
        ("branch", "--upload-pack=touch /tmp/pwned", "invalid-branch"),
        ("base", "--upload-pack=touch /tmp/pwned", "invalid-base"),
        ("branch", "-c", "invalid-branch"),
        ("unit", "../../hooks/pre-commit", "invalid-unit-id"),
        ("unit", "-rf", "invalid-unit-id"),
    ],
)
def test_option_injection_is_refused(sandbox: Sandbox, option: str, value: str, code: str) -> None:
    before = sandbox.snapshot()
    args = sandbox.create_args("u1", **({} if option == "unit" else {option: None}))
    if option == "unit":
        args = [args[0], *args[3:]]  # drop `--unit u1`
    # The `=` form reaches our validation intact (a separate value starting with -- would be a
    # missing value, see below).
    args.append(f"--{option}={value}")
    result = sandbox.unit(*args)
    assert result.code == 2 and result["code"] == code, result.stdout
    assert sandbox.snapshot() == before


def test_a_value_that_looks_like_an_option_is_a_missing_value(sandbox: Sandbox) -> None:
    result = run_cli(
        "unit", "create", "--unit", "u1", "--branch", "--upload-pack=x", cwd=sandbox.repo
    )
    assert result.code == 2 and result["code"] == "missing-value"
    assert result["reason"] == "missing value for --branch"
