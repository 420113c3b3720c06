"""A job is named the same way wherever a person names one: `render --job` and `run --job` both take a job id,
a unique id prefix or an exp-name; ids that travel between programs (`run --changed`) are matched exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.plan import jobs_from_files
from llmsweep.plan.job import Job
from llmsweep.plan.select import select_job
from llmsweep.plan.slices import resolve_job_ids

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"


@pytest.fixture(scope="module")
def jobs() -> list[Job]:
    return jobs_from_files([QUICKSTART])


def test_a_unique_prefix_or_exp_name_names_the_job_render_would_pick(jobs: list[Job]) -> None:
    one = jobs[0]
    prefix = one.id.split("_spec")[0] + "_"  # `..._conc1_kvnone_`: also a prefix of no `conc12` job
    picked = resolve_job_ids(jobs, [prefix], fix="x", selectors=True)
    assert [j.id for j in picked] == [select_job(jobs, prefix).id] == [one.id]
    both = resolve_job_ids(jobs, [prefix, jobs[-1].id, one.id], fix="x", selectors=True)
    assert [j.id for j in both] == [one.id, jobs[-1].id]  # plan order, each once


def test_an_ambiguous_prefix_lists_the_jobs_it_matches(jobs: list[Job]) -> None:
    conc1 = [j for j in jobs if "_conc1" in j.id]  # conc1 and conc12 of both arms
    assert len(conc1) > 1
    with pytest.raises(ConfigError) as err:
        resolve_job_ids(jobs, ["qwen3.5_tp8_conc1"], fix="x", selectors=True)
    assert f"matches {len(conc1)} jobs" in str(err.value) and all(j.id in str(err.value) for j in conc1)


def test_ids_that_travel_between_programs_are_matched_exactly(jobs: list[Job]) -> None:
    prefix = jobs[0].id.split("_spec")[0] + "_"
    with pytest.raises(ConfigError, match="not in the plan"):
        resolve_job_ids(jobs, [prefix], fix="x")


def test_an_eval_jobs_id_without_an_eval_selection_says_which_flag_plans_it(jobs: list[Job]) -> None:
    """`changelog check` lists eval-only jobs by their ids; given to `run --job` or `render --job` without
    --evals-only it matched nothing, and the error listed the throughput jobs with no word of the flag."""
    eval_id = jobs[-1].id.rsplit("_", 1)[0] + "_eval_0123456789ab"
    with pytest.raises(ConfigError) as err:
        resolve_job_ids(jobs, [eval_id], fix="x", selectors=True)
    assert "names an eval-only job" in err.value.message and "--evals-only" in (err.value.fix or "")
    with pytest.raises(ConfigError, match="; jobs:"):  # any other id still gets the listing
        select_job(jobs, "no-such-job")


def test_an_id_that_matches_nothing_names_the_closest_jobs_wherever_they_stand_in_the_plan(jobs: list[Job]) -> None:
    """The listing of an id that matched nothing showed the plan's first 20 jobs: in a sweep of hundreds, an id whose
    hash an edit of its recipe changed (or one keystroke off) left the user to search for the job they meant."""
    many = [j.model_copy(update={"id": j.id.replace("qwen3.5", model),
                                 "exp_name": j.exp_name.replace("qwen3.5", model)})
            for model in ("qwen3.5", "dsr1-fp4", "gptoss-120b") for j in jobs]  # three models' sweeps, 27 jobs
    wanted = many[-1]  # far beyond the first 20
    stale = wanted.id[:-12] + "0123456789ab"  # the same job under its recipe's earlier fingerprint
    with pytest.raises(ConfigError) as err:
        resolve_job_ids(many, [stale], fix="x", selectors=True)
    said = err.value.message
    assert "did you mean:" in said and wanted.id in said and said.count("\n  ") == 1, said
    typo = wanted.exp_name.replace("mtp", "mpt")
    with pytest.raises(ConfigError) as err:
        select_job(many, typo)
    assert err.value.message.splitlines()[1:] == [f"  {wanted.id}"], err.value.message
