"""registry/pathtext.py spells paths as pathlib does, without importing it (SPEC 7)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from registry import pathtext


def test_joined_is_purepath_to_the_character() -> None:
    chooser = random.Random(3)
    pieces = ["", "/", "//", "///", ".", "..", "a", "b.c", "~", "~x", " ", "a/", "/a", "//a"]
    for _ in range(20_000):
        parts = [
            "".join(chooser.choice(pieces) for _ in range(chooser.randrange(4)))
            for _ in range(chooser.randrange(1, 4))
        ]
        assert pathtext.joined(*parts) == str(PurePosixPath(*parts)), parts


@pytest.mark.parametrize(
    "text", ["~", "~/", "~/a//b/.", "~root/x", "a/~", "", ".", "/abs//x/", "~nosuchuser-q9/x"]
)
def test_expanded_is_expanduser(text: str) -> None:
    try:
        expected: str | type[BaseException] = str(Path(text).expanduser())
    except RuntimeError:
        expected = RuntimeError
    if expected is RuntimeError:
        with pytest.raises(RuntimeError):
            pathtext.expanded(text)
    else:
        assert pathtext.expanded(text) == expected
        assert pathtext.home() == str(Path.home())


def test_resolved_is_resolve(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for name in ("real", "link", "link/", "link/../real/.", "missing/x"):
        text = f"{tmp_path}/{name}"
        assert pathtext.resolved(text) == str(Path(text).resolve())
    with pytest.raises(RuntimeError):
        Path(tmp_path / "loop").resolve()
    with pytest.raises(RuntimeError):
        pathtext.resolved(os.fspath(tmp_path / "loop"))


def test_pathtext_imports_no_pathlib() -> None:
    probe = "import sys; from registry import pathtext; print('pathlib' in sys.modules)"
    found = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    assert found.strip() == "False"
