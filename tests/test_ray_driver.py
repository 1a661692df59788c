"""The lead supervisor's Ray import (`pair.runners.ray_driver`, SPEC 7): the packages it defers.

A deferred package is a stand-in in `sys.modules` until something reads an attribute of it:
then the real one is imported, once, and the stand-in answers for it — so a Ray version that
does use one at its import (or a driver call that needs it) still gets it. Real modules written
to a temp dir; no Ray needed.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pair.runners import ray_driver


@pytest.fixture
def package(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A package `deferme_<n>` whose import appends a line to a file (how often it ran)."""
    name = f"deferme_{tmp_path.name.replace('-', '_')}"
    ran = tmp_path / "ran"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(
        f"with open({str(ran)!r}, 'a') as f:\n    f.write('ran\\n')\nVALUE = 42\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield name, ran
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def test_a_deferred_package_imports_at_its_first_attribute_read_and_once(
    package: tuple[str, Path],
) -> None:
    name, ran = package
    assert ray_driver.defer((name, "not_a_module_anywhere")) == [name]
    stand_in = importlib.import_module(name)  # as Ray's `import requests` finds it
    again = __import__(name)  # a second import: the spec's `_initializing` read, nothing run
    assert isinstance(stand_in, ray_driver.Deferred) and again is stand_in
    assert not ran.exists()
    assert stand_in.VALUE == 42
    assert ran.read_text() == "ran\n"
    real = sys.modules[name]
    assert real is not stand_in and real.VALUE == 42
    assert stand_in.VALUE == 42 and ran.read_text() == "ran\n"  # never imported twice


def test_an_imported_package_is_left_as_it_is(package: tuple[str, Path]) -> None:
    name, ran = package
    real = importlib.import_module(name)
    assert ray_driver.defer((name,)) == []
    assert sys.modules[name] is real and ran.read_text() == "ran\n"
