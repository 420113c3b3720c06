"""Shared test fixtures: where the reference data lives, and skipping cleanly when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """`../shared` beside the checkout; tests that need it skip when it is not there."""
    if not (SHARED / "reference").is_dir():
        pytest.skip("../shared/reference is not present beside this checkout")
    return SHARED
