"""Shared test fixtures: where the reference data lives (skipping cleanly when it is absent), and the tiny model the
real-engine tests serve; and the order xdist hands test files out in (the slow ones first)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

# Every Python process the suite starts (CLI runs, simulator servers, client workers: hundreds) imports numpy, whose
# OpenBLAS starts a thread per core at import: 0.35 CPU-s per import against 0.19 with one thread (measured
# 2026-12-02; two e2e files took 6 % less CPU). Nothing the tests run multiplies matrices large enough to use more.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_configure(config: pytest.Config) -> None:
    # xdist's loadfile orders files by their number of tests unless told not to; the order below is by cost instead
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a test marked `slow` first, the rest after in collection order: `pytest -n 3 --dist loadfile`
    hands files to workers in this order, so the long files start at once and the short ones fill in around them
    (ordered by test count, the minute-long files of few tests came last, and one worker ran alone for minutes)."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """`../shared` beside the checkout; tests that need it skip when it is not there."""
    if not (SHARED / "reference").is_dir():
        pytest.skip("../shared/reference is not present beside this checkout")
    return SHARED


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A servable 2-layer Llama with random weights whose EOS logits never win (no `ignore_eos` needed), made once
    per test process (`llmsweep model synth`'s `tiny` source). Tests that write beside it remove what they wrote."""
    from llmsweep.modelsynth import SynthRequest, synth_model

    out = tmp_path_factory.mktemp("models") / "tiny"
    synth_model(SynthRequest(source="tiny", out=out, weights="random"))
    return out
