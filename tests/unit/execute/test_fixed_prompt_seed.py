"""Jobs that share one server must not share fixed-length prompts (the engine's prefix cache would serve them)."""

from __future__ import annotations

from pathlib import Path

from llmsweep.execute.lifecycle import _workload
from llmsweep.plan import Job, jobs_from_files
from llmsweep.workload.fixed import FixedLengthWorkload
from llmsweep.workload.scenario import point_seed

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "examples" / "gpu" / "llama-1b-bf16-h200-vllm.yaml"
FLEET = ROOT / "examples" / "gpu" / "fleet.yaml"


def fixed_prompt_seed(job: Job) -> int:
    return point_seed(job.workload.seed, job.id)


def _fixed_jobs():
    jobs = [j for j in jobs_from_files([RECIPE], runner_config=FLEET) if j.scenario == "fixed-seq-len"]
    assert len(jobs) >= 2
    return jobs


def test_each_fixed_job_of_a_shared_server_gets_its_own_prompts() -> None:
    jobs = _fixed_jobs()
    seeds = [fixed_prompt_seed(j) for j in jobs]
    assert len(set(seeds)) == len(seeds)
    first = [_workload(j, "simulated") for j in jobs[:2]]
    assert all(isinstance(w, FixedLengthWorkload) for w in first)
    first_fixed = [w for w in first if isinstance(w, FixedLengthWorkload)]
    assert [w.config.seed for w in first_fixed] == seeds[:2]
    for index in range(4):  # not even the first 16-token block (vLLM's prefix-cache page) is shared
        assert first_fixed[0].prompt_ids(index, 64)[:16] != first_fixed[1].prompt_ids(index, 64)[:16]


def test_the_seed_is_a_pure_function_of_the_job() -> None:
    job = _fixed_jobs()[0]
    assert fixed_prompt_seed(job) == fixed_prompt_seed(job.model_copy())
    workload = _workload(job, "simulated")
    assert isinstance(workload, FixedLengthWorkload) and workload.config.seed == fixed_prompt_seed(job)
