"""Fixtures shared by the simulator's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llmsweep.catalog.sources import clear_caches


@pytest.fixture
def user_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty user catalog directory, so a developer's own calibrations cannot leak into a test (a test module
    whose every test needs it says `pytestmark = pytest.mark.usefixtures("user_catalog")`)."""
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(tmp_path / "catalog"))
    (tmp_path / "catalog").mkdir()
    clear_caches()
    yield tmp_path / "catalog"
    clear_caches()
