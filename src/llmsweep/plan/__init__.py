"""Recipes → typed Jobs, exactly as InferenceX expands them; pure functions.

Public API:
    plan_jobs(recipes, options, fleet=None, evals=None, matrix=None) -> list[Job]   (eval rows marked among matrix's)
    full_sweep(recipes, fleet=None, evals=None, *, matrix=None, **filters) -> list[Job]
    test_config(recipes, config_keys, fleet=None, evals=None, **filters) -> list[Job]
    jobs_from_files(paths, config_keys=None, runner_config=None, evals=None) -> list[Job]   (raises on bad recipes)
    matrix_of(paths, evals=None, root=None) -> the recipes of the matrix the files belong to (spec.scope), or None
    select_job(jobs, selector) -> Job
    Job, Worker, Acceptance, SweepOptions, EvalOptions
"""

from __future__ import annotations

from llmsweep.plan.expand import SweepOptions, expand_config_keys
from llmsweep.plan.job import Acceptance, Job, Worker
from llmsweep.plan.matrix import EvalOptions, full_sweep, jobs_from_files, matrix_of, plan_jobs, test_config
from llmsweep.plan.select import select_job

__all__ = [
    "Acceptance",
    "EvalOptions",
    "Job",
    "SweepOptions",
    "Worker",
    "expand_config_keys",
    "full_sweep",
    "jobs_from_files",
    "matrix_of",
    "plan_jobs",
    "select_job",
    "test_config",
]
