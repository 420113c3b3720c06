"""An eval-only job of a speculative configuration on the simulator serves speculation, as a run-eval row's eval does:
the method at K, nothing pinned (an eval never pins acceptance), at the typical acceptance the simulator realises —
recorded as its estimate, so the job's `spec_decoding` label is one the launch earned."""

from __future__ import annotations

import pytest
from support.recipes import QWEN35_FP8, flag, recipe_text

from llmsweep import engines
from llmsweep.engines.sim import simulated_acceptance
from llmsweep.execute.lifecycle import simulator_provenance
from llmsweep.execute.virtual import engine_config
from llmsweep.plan import Job, full_sweep
from llmsweep.plan.matrix import EvalOptions
from llmsweep.sim.config import typical_acceptance
from llmsweep.spec import loads_recipes

RECIPE = recipe_text(framework="sglang", image="lmsysorg/sglang:v0.5.16-cu129", served=QWEN35_FP8, runner="h200",
                     key="spec-eval-sim", isl=8192, osl=1024, tp=8, concs="[16]", arm=", spec-decoding: mtp")
SERVED = (recipe_text(framework="sglang", image="lmsysorg/sglang:v0.5.16-cu129", served=QWEN35_FP8, runner="h200",
                      key="spec-eval-sim", isl=8192, osl=1024, tp=8, concs="[16]", arm=", spec-decoding: mtp",
                      engine="name: sim")
          + '    spec-decoding: { method: eagle, num-steps: 2, topk: 1, num-draft-tokens: 3, thinking: "on" }\n')


def eval_only_job(text: str) -> Job:
    (job,) = full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes, evals=EvalOptions(evals_only=True))
    assert job.eval_only and job.spec_decoding == "mtp"
    return job


@pytest.mark.parametrize(("text", "method", "k"), [(SERVED, "eagle", 2), (RECIPE, "mtp", 3)],
                         ids=["recipe-spec", "recipe-less"])
def test_an_eval_only_speculative_job_serves_its_method_at_the_estimate_it_records(
        text: str, method: str, k: int) -> None:
    job = eval_only_job(text)
    spec = engines.render(job, simulate=True, port=0)
    assert flag(spec.argv, "--spec-method") == method and flag(spec.argv, "--spec-k") == str(k), spec.argv
    assert "--acceptance-length" not in spec.argv  # an eval never pins acceptance
    served = engine_config(spec).spec  # what `sim serve` realises from that very command line
    assert served is not None and served.acceptance_length == typical_acceptance(method, k)
    # the result records the acceptance served, as the simulator's estimate
    estimate = simulated_acceptance(job)
    assert estimate is not None and estimate.source == "estimate" and estimate.value == served.acceptance_length
    assert simulator_provenance(job)["acceptance"] == {"value": served.acceptance_length, "source": "estimate",
                                                       "basis": estimate.basis}
    (note,) = [n for n in spec.notes if "eval-only job" in n]
    assert f"typical {method} acceptance at K={k}, {served.acceptance_length:g}" in note
    assert "without speculative decoding" not in " ".join(spec.notes)


@pytest.mark.parametrize("text", [SERVED, RECIPE], ids=["recipe-spec", "recipe-less"])
def test_the_acceptance_a_result_records_is_metrics_models_one_shape(text: str) -> None:
    """`provenance.acceptance` was a dict written by hand beside `metrics.model.AcceptanceProvenance`: a field added to
    the record and not to the hand-written dict would be left empty in every result. The estimate writes the record
    itself (`AcceptanceEstimate.record`), every field of it filled, and the result reads back that record."""
    from llmsweep.metrics.model import AcceptanceProvenance, Provenance

    estimate = simulated_acceptance(eval_only_job(text))
    assert estimate is not None
    record = estimate.record()
    assert isinstance(record, AcceptanceProvenance)
    assert set(AcceptanceProvenance.model_fields) == set(record.model_dump(exclude_none=True))
    assert Provenance.model_validate(estimate.provenance()).acceptance == record
