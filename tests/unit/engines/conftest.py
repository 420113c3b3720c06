"""Plan jobs from YAML text, as a user's recipe would be planned."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llmsweep.plan import Job, full_sweep
from llmsweep.spec import loads_recipes


def _plan(text: str) -> list[Job]:
    loaded = loads_recipes(text, "t.yaml").raise_on_error()
    return full_sweep(loaded.recipes)


@pytest.fixture
def plan() -> Callable[[str], list[Job]]:
    return _plan
