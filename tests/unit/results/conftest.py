"""Run directories fabricated from generated records; summaries come from the real `llmsweep.metrics.summarise`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

from llmsweep.results.rundir import RunDir

MakeRun = Callable[..., RunDir]


@pytest.fixture
def make_run(tmp_path: Path) -> MakeRun:
    """make_run(name, concs=(1, 4), speed=1.0, seed=0, **job_overrides) → RunDir under tmp_path/name."""

    def make(name: str, concs: tuple[int, ...] = (1, 4), *, speed: float = 1.0, seed: int = 0, requests: int = 80,
             source: str = "simulated", expected_extra: tuple[str, ...] = (), **job: object) -> RunDir:
        points = [SyntheticPoint(synthetic_job(conc=c, **job), speed=speed, requests=requests) for c in concs]  # type: ignore[arg-type]
        return write_synthetic_run(tmp_path / name, points, run_id=name, seed=seed, source=source,
                                   expected_extra=expected_extra)

    return make


@pytest.fixture
def store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh store, also exported as LLMSWEEP_STORE so CLI calls find it."""
    path = tmp_path / "store" / "results.sqlite"
    monkeypatch.setenv("LLMSWEEP_STORE", str(path))
    return path
