"""Redaction (SPEC 8): secrets by value and by shape, URL userinfo only when it carries a secret;
idempotent, and text holding no secret is never changed (hypothesis properties)."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.redact import StreamRedactor, redact, redact_bytes

SECRETS = {
    "ANTHROPIC_API_KEY": "anthropic-value-0123456789",
    "OPENAI_API_KEY": "openai-value-abcdefghij",
    "FOO_SECRET": "foo-secret-value-42",
    "DB_PASSWORD": "hunter2-but-longer",
    "AWS_ACCESS_KEY": "AKIAEXAMPLEVALUE77",
}
SHAPES = [
    "ghp_" + "a1" * 18,
    "gho_" + "B2" * 10,
    "github_pat_" + "11ABC_" * 5,
    "sk-ant-api03-" + "x" * 20,
    "sk-proj-" + "Y9" * 12,
    "sk-" + "Q" * 40,
]
SAFE = [
    "ssh://git@github.com/o/r.git",
    "git@github.com:o/r.git",
    "https://github.com/o/r.git",
    "https://github.com/o/r@v1",
    "http://localhost:8080/path",
    "mail a@b.com",
    "ghp_",
    "sk-",
    "sk-ant-",
    "risk-proj-plan-2026",
    "task-ant-eaters",
    "x-access-token",
    "GITHUB_TOKEN=",
    "***",
    "user@host",
    "short",
]
SEPARATORS = st.sampled_from([" ", "\n", "\t", " / ", ", "])
# Random words that can never form a token shape, a URL userinfo or a planted value.
WORDS = st.text(alphabet=string.ascii_letters + string.digits + ".,;!?()#%&+=~", max_size=12)


@pytest.fixture
def secret_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def joined(pieces: list[str], separators: list[str]) -> str:
    out = []
    for index, piece in enumerate(pieces):
        out.append(piece)
        out.append(separators[index % len(separators)])
    return "".join(out)


clean_text = st.builds(
    joined, st.lists(st.one_of(WORDS, st.sampled_from(SAFE))), st.lists(SEPARATORS, min_size=1)
)
secret_text = st.builds(
    joined,
    st.lists(
        st.one_of(
            WORDS,
            st.sampled_from(SAFE),
            st.sampled_from(SHAPES),
            st.sampled_from(list(SECRETS.values())),
            st.sampled_from([f"https://user:{v}@example.com/x" for v in SECRETS.values()]),
            st.sampled_from(["https://x-access-token:abc123def@github.com/o/r.git"]),
            st.sampled_from([f"https://{shape}@github.com/o/r" for shape in SHAPES]),
        )
    ),
    st.lists(SEPARATORS, min_size=1),
)

FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


@FIXTURE_OK
@given(clean_text)
def test_text_holding_no_secret_is_never_changed(secret_environment: None, text: str) -> None:
    assert redact(text) == text
    assert redact_bytes(text.encode()) == text.encode()


@FIXTURE_OK
@given(secret_text)
def test_redaction_is_idempotent_and_leaves_no_secret(secret_environment: None, text: str) -> None:
    once = redact(text)
    assert redact(once) == once
    for secret in [*SECRETS.values(), *SHAPES, "abc123def"]:
        assert secret not in once


@FIXTURE_OK
@given(secret_text, st.lists(st.integers(min_value=1, max_value=40), min_size=1))
def test_the_stream_redactor_equals_redacting_the_whole(
    secret_environment: None, text: str, chunks: list[int]
) -> None:
    data = text.encode()
    redactor = StreamRedactor(max_hold_bytes=16, max_hold_seconds=60)
    out, offset, index = b"", 0, 0
    while offset < len(data):
        size = chunks[index % len(chunks)]
        out += redactor.feed(data[offset : offset + size], now=0)
        offset, index = offset + size, index + 1
    out += redactor.flush()
    assert out == redact_bytes(data)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ssh://git@github.com/o/r.git", "ssh://git@github.com/o/r.git"),
        ("git@github.com:o/r.git", "git@github.com:o/r.git"),
        ("https://user:pa55word@host/x", "https://***@host/x"),
        ("https://x-access-token:abc123def@github.com/o", "https://***@github.com/o"),
        ("https://ghp_" + "z" * 20 + "@github.com/o", "https://***@github.com/o"),
        ("key sk-" + "a" * 32 + " end", "key *** end"),
        ("key sk-" + "a" * 31 + " end", "key sk-" + "a" * 31 + " end"),
        ("the anthropic-value-0123456789 key", "the *** key"),
        ("FOO_SECRET=foo-secret-value-42", "FOO_SECRET=***"),
    ],
)
def test_redaction_examples(secret_environment: None, text: str, expected: str) -> None:
    assert redact(text) == expected


def _every_pattern_everywhere(text: str) -> str:
    """What `redact` computes, without its "can a match start here" checks."""
    from registry.redact import (
        _URL_USERINFO,
        MASK,
        TOKEN_SHAPE,
        _mask_userinfo,
        _values_pattern,
        secrets,
    )

    pattern = _values_pattern(secrets())
    if pattern is not None:
        text = pattern.sub(MASK, text)
    return _URL_USERINFO.sub(_mask_userinfo, TOKEN_SHAPE.sub(MASK, text))


# Pieces glued with no separator too: a shape right after a word, `-` or `_` is where the
# pre-checks could go wrong.
glued_text = st.builds(
    "".join,
    st.lists(
        st.one_of(
            WORDS,
            st.sampled_from(SAFE),
            st.sampled_from(SHAPES),
            st.sampled_from(["-", "_", "a", "://", "@", "task-", "sk-", "gh", "ghs_"]),
            st.sampled_from(list(SECRETS.values())),
        )
    ),
)


@FIXTURE_OK
@given(st.one_of(secret_text, glued_text))
def test_the_pre_checks_change_no_result(secret_environment: None, text: str) -> None:
    assert redact(text) == _every_pattern_everywhere(text)
