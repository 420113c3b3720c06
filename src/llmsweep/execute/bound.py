"""How long `llmsweep run FILES --job ID` can take while every limit of its own holds: the CI workflow's timeouts.

A run bounds each thing it waits for — a server's start-up (the job's `serve.health-timeout`, else the launch's
default), each request (`--request-timeout`), a window's stragglers (the client's grace), a server's stop, an
accuracy eval (the harness's own limit) — and relaunches a server that died at most `max_relaunches` times. The sum
of those limits over what the job runs is the longest it can take without something hanging that none of them
bounds; past it, the run is hung, and the workflow stops it there (`changes.github`), not at GitHub's six hours.
What no limit of the run's bounds — the checkout, the installs, an engine image's pull — the workflow allows for
apart (`ci github --allowance-minutes`).

The limits are those `run` applies with its defaults, which are the workflow's: its runner jobs pass none of the
options that change them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmsweep.plan.job import Job

DEFAULT_ALLOWANCE_MINUTES = 30
"""What the CI workflow allows a sweep job beyond the longest its run can take (`ci github --allowance-minutes`'s
default): the engine image's pull within the run, and again for the job's checkout, installs and upload."""


@dataclass(frozen=True, slots=True)
class RunLimits:
    """The limits of one `llmsweep run` that bound how long it takes (seconds), at `run`'s defaults."""

    startup_s: float
    """How long it waits for the server to become ready."""
    launches: int
    """Launches of the server at most: the first and `max_relaunches` more after it died (a launch that lost its
    port to another process exits at once, and is relaunched at once)."""
    stop_s: float
    """How long it waits for a server to stop after SIGTERM before killing it."""
    request_timeout_s: float
    grace_s: float
    """How long a window's last requests may run past its end."""
    eval_s: float
    """How long an accuracy eval may run before it is stopped and failed."""


def run_limits(job: Job) -> RunLimits:
    """The limits `run`'s defaults set for `job` (its start-up deadline is its own: `serve.health-timeout`)."""
    from llmsweep.client.config import RunOptions
    from llmsweep.engines.base import startup_timeout_s
    from llmsweep.evals.harness import RUN_TIMEOUT_S
    from llmsweep.execute.lifecycle import LifecycleSettings

    settings, options = LifecycleSettings(), RunOptions()
    return RunLimits(startup_s=startup_timeout_s(job), launches=1 + settings.max_relaunches,
                     stop_s=settings.stop_grace_s, request_timeout_s=options.timeout_s, grace_s=options.grace_s,
                     eval_s=float(RUN_TIMEOUT_S))


def run_bound_s(job: Job) -> float | None:
    """The longest `run --job` of `job` takes while every limit of its own holds (`run_limits`): each launch's
    start-up and stop, each point's warm-up and profiling at its load (`workload.scenario.Load.bound_s`), and each
    accuracy eval (an eval-only job's on its launch; a `run-eval` row's on a relaunch after its point). None where
    a point's length is the workload's alone (a replay of a whole trace without a `duration`): nothing of the plan
    bounds it."""
    from llmsweep.plan.point import Point, one_point_per_job

    limits = run_limits(job)
    launch = limits.startup_s + limits.stop_s
    points = one_point_per_job([job])
    # a server that died is relaunched only for what is left to serve: at most once per point after the first
    total = min(limits.launches, len(points)) * launch
    for point in points:
        if not point.eval_only:
            load = Point.of(point).load.bound_s(request_timeout_s=limits.request_timeout_s, grace_s=limits.grace_s)
            if load is None:
                return None
            total += load
        if point.eval_only:  # the eval is what the job's own launch serves
            total += limits.eval_s
        elif point.run_eval:  # after the point, on a launch of its own
            total += launch + limits.eval_s
    return total
