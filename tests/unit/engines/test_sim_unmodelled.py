"""What a job sets that the simulator does not model is named, so a simulated point's planned label is never read as
modelled (a walkthrough saw `P2x(tp8 ep8 dpa)` on a point the simulator ran without DP attention)."""

from __future__ import annotations

from pathlib import Path

from llmsweep.engines.sim import unmodelled
from llmsweep.plan import jobs_from_files

RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


def test_a_pool_that_plans_dp_attention_is_named() -> None:
    (job,) = jobs_from_files([RUN / "disagg-sim.yaml"])
    assert job.prefill is not None and job.prefill.dp_attn and job.decode is not None and not job.decode.dp_attn
    assert unmodelled(job) == ["DP attention"]


def test_an_aggregated_job_names_pp_and_context_parallelism_and_a_plain_one_nothing() -> None:
    plain = jobs_from_files([RUN / "fixed-sim.yaml"])[0]
    assert unmodelled(plain) == []
    wide = plain.model_copy(update={"pp": 2, "dp_attn": True, "dcp_size": 4})
    assert unmodelled(wide) == ["DP attention", "pipeline parallelism (pp 2)", "decode context parallelism (dcp 4)"]
