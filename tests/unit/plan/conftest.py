"""Fixtures for planner tests: recipes from inline YAML, the packaged fleet."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from llmsweep.catalog.fleet import FleetCatalog, default_fleet
from llmsweep.spec import Recipe, load_recipes


@pytest.fixture
def recipes_from(tmp_path: Path) -> Callable[[str], dict[str, Recipe]]:
    """Load recipes from YAML text; fail the test on any schema error."""

    def load(text: str) -> dict[str, Recipe]:
        path = tmp_path / f"r{len(list(tmp_path.iterdir()))}.yaml"
        path.write_text(textwrap.dedent(text))
        result = load_recipes([path])
        assert result.ok, "\n".join(f.render() for f in result.errors)
        return result.recipes

    return load


@pytest.fixture(scope="session")
def fleet() -> FleetCatalog:
    return default_fleet()
