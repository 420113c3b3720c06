"""Catalog tests run against the packaged data plus, where a test says so, a user catalog directory of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.catalog.sources import ENV_VAR


@pytest.fixture(scope="session")
def _empty_catalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("empty-catalog")


@pytest.fixture(autouse=True)
def hermetic_catalog(_empty_catalog_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's ~/.config/llmsweep/catalog: point the user layer at an empty directory."""
    monkeypatch.setenv(ENV_VAR, str(_empty_catalog_dir))


@pytest.fixture
def user_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh user catalog directory wired through LLMSWEEP_CATALOG_DIR."""
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    return tmp_path
