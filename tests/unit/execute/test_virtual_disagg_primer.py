"""`predict` of a disaggregated agentic job stops where AgentX aborts, and its summary says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.execute import virtual_disagg
from llmsweep.metrics.gates import ROOT_PRIMER_FAILED
from llmsweep.plan import jobs_from_files
from llmsweep.sim.disagg import DisaggConfig

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "disagg-agentic-sim.yaml"


def test_a_root_primer_the_deployment_refuses_makes_each_point_invalid_saying_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers whose KV pools (600 tokens) cannot hold a primer: each point (conc 2, conc 4) stops at its first root
    primer, and its summary says "run stopped early: a root primer failed" (the disaggregated path passed no stop
    reason on)."""
    real = virtual_disagg.disagg_config

    def small_pools(job: object) -> DisaggConfig:
        config = real(job)  # type: ignore[arg-type]
        return config.model_copy(update={
            role: getattr(config, role).model_copy(update={
                "engine": getattr(config, role).engine.model_copy(update={"kv_capacity_tokens": 600})})
            for role in ("prefill", "decode")})

    monkeypatch.setattr(virtual_disagg, "disagg_config", small_pools)
    points = [p for job in jobs_from_files([RECIPE]) for p in virtual_disagg.predict_job(job, duration=8)]
    assert sorted(p.point.concurrency for p in points) == [2, 4]
    for predicted in points:
        assert predicted.summary is not None
        validity = predicted.summary.validity
        assert validity.verdict == "invalid"
        assert any(r.startswith(f"run stopped early: {ROOT_PRIMER_FAILED} (lane ") for r in validity.reasons), \
            validity.reasons
        assert all(r["phase"] == "warmup" for r in predicted.records)
