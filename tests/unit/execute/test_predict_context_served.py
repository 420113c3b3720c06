"""`llmsweep predict` records the context its simulator serves (`launch.context_served`), as a virtual-time `run` of
the job does: the one length `SimConfig.served_context` gives (the context flag within the KV pool less a step's
lookahead), not a second computation of it. A prediction recorded none."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.execute.predict_pool import PointUnit, Settings, plan, predict_unit
from llmsweep.execute.virtual import engine_config
from llmsweep.plan import Job, jobs_from_files

RECIPES = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


def _served(job: Job) -> int:
    """The context the simulator serves the job at, from the one function that says it."""
    return engine_config(engines.render(job, simulate=True)).sim_config().served_context()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("context", [True, False])
def test_a_predicted_point_records_the_context_its_simulator_serves(context: bool) -> None:
    job = min(jobs_from_files([RECIPES / "fixed-sim.yaml"]), key=lambda j: j.concs[0])
    if not context:  # no context flag: the pool, less a step's lookahead, bounds the context
        job = job.model_copy(update={"max_model_len": None})
    expected = _served(job)
    config = engine_config(engines.render(job, simulate=True)).sim_config()
    assert expected == (job.max_model_len if context else config.pool_tokens - 1)

    (unit,) = (u for u in plan([job], {}) if isinstance(u, PointUnit))
    (outcome,) = predict_unit(unit, Settings(max_requests=2))
    assert outcome.summary is not None and outcome.summary.provenance is not None
    launch = outcome.summary.provenance.launch
    assert launch is not None and launch.context_served == expected
    assert outcome.doc()["summary"]["provenance"]["launch"]["context_served"] == expected  # `predict --json`'s row


@pytest.mark.timeout(180)
def test_a_predicted_disaggregated_point_records_its_first_decode_workers_context() -> None:
    """A live deployment's router answers `/v1/models` with its first decode worker's (`llmsweep.router`), as its
    virtual-time `run` records: so does its prediction."""
    from llmsweep.execute.predict_pool import DisaggUnit
    from llmsweep.execute.virtual_disagg import disagg_config, is_disaggregated

    job = min((j for j in jobs_from_files([RECIPES / "disagg-sim.yaml"]) if is_disaggregated(j)),
              key=lambda j: j.concs[0])
    job = job.model_copy(update={"conc": job.concs[0]})
    (unit,) = plan([job], {})
    assert isinstance(unit, DisaggUnit)
    (outcome,) = predict_unit(unit, Settings(max_requests=2))
    assert outcome.summary is not None and outcome.summary.provenance is not None
    launch = outcome.summary.provenance.launch
    expected = disagg_config(job).decode.engine.sim_config().served_context()
    assert launch is not None and launch.context_served == expected is not None
