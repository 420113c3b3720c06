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


@pytest.fixture
def poor_h200_calibration(user_catalog: Path) -> Path:
    """The user catalog of `user_catalog`, holding a calibration of the committed H200 llama run's key (vLLM, H200,
    dense-tiny, BF16, TP 1) that predicts it badly (it replaces the packaged `vllm-h200-dense-tiny`, which a quick
    fit of a factor or two does not beat): a test that saves such a fit has a calibration in effect to improve on,
    as `sim calibrate` saves only a fit that predicts better than what is in effect."""
    from llmsweep.sim.calibration import CalibrationEntry, CalibrationProvenance, save_calibration

    entry = CalibrationEntry(engine="vllm", hardware="h200", model_class="dense-tiny", precision="bf16", tp=1,
                             kv_dtype="bf16", efficiency={"mem": 0.1, "compute": 0.05},
                             provenance=CalibrationProvenance(run_id="a poor guess", date="2026-01-01"))
    save_calibration(user_catalog / "sim_calibration.yaml", "vllm-h200-dense-tiny", entry)
    clear_caches()
    return user_catalog
