"""The Point: one job at one concurrency, the unit `run`, `bench` (of a job) and `predict` each execute.

A job names its concurrencies; each point drives one of them. What a point sends, how long, on which route, with
which gates and on how many GPUs is decided once here, from the job's scenario — `llmsweep run` (through
`execute.lifecycle.bench_job`) sends it to a server, `llmsweep predict` to the simulated engine in virtual time, and
both read the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmsweep.plan.job import Job
from llmsweep.workload.base import Api
from llmsweep.workload.scenario import Load, Scenario, scenario_of

if TYPE_CHECKING:
    from llmsweep.metrics.gates import GateConfig
    from llmsweep.workload.base import Workload


@dataclass(frozen=True)
class Point:
    """One concurrency point of a job, with its scenario's stopping rule resolved."""

    job: Job
    concurrency: int

    @classmethod
    def of(cls, job: Job, concurrency: int | None = None) -> Point:
        """The point of `job` at `concurrency` (default: its first; a job run by `llmsweep run` has one)."""
        return cls(job, job.concs[0] if concurrency is None else concurrency)

    @property
    def scenario(self) -> Scenario:
        """What the job sends (`job.workload.scenario`), which may differ from the recipe block it came from."""
        return scenario_of(self.job.workload)

    @property
    def load(self) -> Load:
        """How the point drives the server: its concurrency and when it stops (prompt count, window, the trace)."""
        return self.scenario.load(self.job.workload, concurrency=self.concurrency, job_duration=self.job.duration)

    @property
    def api(self) -> Api:
        return self.scenario.api(self.job.workload)

    @property
    def gpus(self) -> int:
        """GPUs behind the endpoint, for per-GPU throughput (at least 1)."""
        return max(1, self.job.gpus)

    @property
    def max_error_ratio(self) -> float:
        """The failure ratio that stops the run early and fails the gate."""
        return self.scenario.gate.max_error_ratio

    def workload(self, *, simulated: bool = False, **overrides: Any) -> Workload:
        """The point's workload. `simulated`: prompts counted with the built-in tokenizer (the simulator's rule; the
        recipe's HF tokenizer is for real engines). `overrides` go to the workload's config."""
        if simulated:
            overrides.setdefault("tokenizer", None)
        return self.scenario.build(self.job.workload, concurrency=self.concurrency, point=self.job.id, **overrides)

    def gates(self, *, planned_duration_s: float | None = None,
              require_metrics_prefix: str | None = None) -> GateConfig:
        """The point's gate thresholds; `planned_duration_s` is the profiling window the run was given (if any)."""
        return self.scenario.gate.config(planned_duration_s=planned_duration_s,
                                         require_metrics_prefix=require_metrics_prefix)


def points_of(job: Job) -> list[Point]:
    """Every concurrency point of a job, in the job's order."""
    return [Point(job, conc) for conc in job.concs]
