"""Repeats of one point: what a frontier and a published row stand for when a run measured a point more than once.

`run --repeats N` runs every job N times (`<job-id>-repeat<k>`, `workload.scenario.REPEAT_MARK`); the results of one
run that share a point identity *and* a configuration (`results.point.configuration_keys`: recipe and launch
fingerprints, the build that served it, source, clock, measurement) are repeats of one point. A frontier that takes
each repeat as a point of its own keeps the luckiest one and drops the others as dominated; an export that writes
each as a row publishes the point N times.
Both work on the combined point instead: the mean of the repeats' metrics, their count and spread kept beside it,
and a verdict that is valid only when every repeat's is.

A result that records no configuration (an imported row, a summary without provenance) is a repeat of nothing: it
stays a point of its own.

The run a repeat belongs to is the run it is read as part of (`ResultPoint.run_in_view`): a run that `run --reuse`
stood some of a point's repeats on stored results of another run (`run --reuse --repeats 3` over a run of two
repeats measures the third) stands on all of them, so they are one point, the mean of every repeat, and each says
where it came from (`Repeats.as_dict`, `Repeats.describe`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmsweep.results.extract import INVALID_VERDICTS
from llmsweep.results.point import ResultPoint, configuration_keys
from llmsweep.workload.scenario import repeat_index


def finite_mean(values: Iterable[float | None]) -> float | None:
    """The mean of the finite values, None when there is none."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def mean_of(point: ResultPoint) -> tuple[int, dict[str, float]]:
    """How many runs a result's figures are the mean of, and those runs' sample standard deviation by metric: an
    imported row of a point measured N times (`results export --format inferencex` wrote it as their mean, its
    `llmsweep.repeats` block kept as the point's provenance `repeats`) is the mean of N; any other result is one
    run's, (1, {}). `compare` weighs it as N runs, and their spread joins its noise band."""
    block = point.provenance.get("repeats")
    if not isinstance(block, Mapping):
        return 1, {}
    n = block.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        return 1, {}
    sd = block.get("sd")
    spread = {str(m): float(v) for m, v in sd.items()
              if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0} \
        if isinstance(sd, Mapping) else {}
    return n, spread


RepeatKey = tuple[str, str, str, bool]


def repeat_keys(points: Sequence[ResultPoint]) -> list[RepeatKey | None]:
    """Each result's (run in view, point identity, configuration, eval-only), in `points`' order — results sharing
    one are repeats of one point; None for a result that records no configuration (a repeat of nothing). The run is
    the one the result is read as part of (`ResultPoint.run_in_view`): a stored result `run --reuse` stood a job on
    is a repeat of the reusing run's point, beside the repeats that run measured itself. The configuration is the
    one every consumer reads (`results.point.configuration_keys`, as `configurations` groups them and a frontier
    names its series), taken among the results of one run, point and kind: a repeat that read no image digest (one
    measured on Slurm, beside one `run --reuse` stood on a docker result) is a repeat of its release's one digest
    there, so the frontier draws their mean, not the luckier one."""
    points = list(points)
    at: dict[tuple[str, str, bool], list[int]] = {}
    for i, p in enumerate(points):
        at.setdefault((p.run_in_view, p.identity.key(), p.eval_only), []).append(i)
    out: list[RepeatKey | None] = [None] * len(points)
    for (run, identity, eval_only), indices in at.items():
        for i, configuration in zip(indices, configuration_keys([points[i] for i in indices]), strict=True):
            out[i] = (run, identity, configuration, eval_only) if configuration else None
    return out


def _index(point: ResultPoint) -> int:
    """The repeat a result is of the point it is read as part of (`run --repeats`: the reusing run's job, for a result
    `run --reuse` stood one on)."""
    return repeat_index(point.job_in_view)


@dataclass(frozen=True, slots=True)
class Repeats:
    """One point and the results that measured it: `point` is the combined point (the ids, job and artifacts of the
    first repeat the run in view measured itself, else of the first repeat; the mean of every repeat's metrics, the
    worst verdict), `members` the results, first repeat first."""

    point: ResultPoint
    members: tuple[ResultPoint, ...]

    @property
    def n(self) -> int:
        return len(self.members)

    def spread(self, metric: str) -> float | None:
        """Sample standard deviation of `metric` over the repeats; None with fewer than two values."""
        vals = [v for p in self.members if (v := p.metric(metric)) is not None and math.isfinite(v)]
        return statistics.stdev(vals) if len(vals) >= 2 else None

    @property
    def reused(self) -> tuple[ResultPoint, ...]:
        """The repeats `run --reuse` stood the run in view's jobs on: results another run measured."""
        return tuple(p for p in self.members if p.reused_by is not None)

    def as_dict(self) -> dict[str, Any] | None:
        """What a table or a payload says of the repeats behind the point (None for a single result): their count,
        job and result ids, the run that measured each (`runs`), those `run --reuse` stood the run's jobs on
        (`reused`: the job of the run in view, and the run, job, result and verdict it stands on) and each metric's
        spread (`sd`)."""
        if self.n < 2:
            return None
        metrics = dict.fromkeys(m for p in self.members for m in p.metrics)
        return {"n": self.n, "combined": "mean", "job_ids": [p.job_id for p in self.members],
                "result_ids": [p.result_id for p in self.members], "runs": [p.run_id for p in self.members],
                "reused": [{"as": p.job_in_view, "run_id": p.run_id, "job_id": p.job_id, "result_id": p.result_id,
                            "verdict": p.verdict} for p in self.reused],
                "sd": {m: sd for m in metrics if (sd := self.spread(m)) is not None}}

    def describe(self) -> str:
        """`mean of 3 repeats` (empty for a single result), with the repeats `run --reuse` took from other runs
        (`mean of 3 repeats, 2 reused from run R`)."""
        return describe_repeats(self.n, [p.run_id for p in self.reused]) if self.n > 1 else ""


def describe_repeats(n: int, reused_from: Sequence[str] = ()) -> str:
    """What a point that is the mean of `n` repeats says of them (`mean of 3 repeats`), naming the runs that measured
    those `run --reuse` took from them, one run each (`reused_from`): `mean of 3 repeats, 2 reused from run R`.
    `Repeats.describe`, and summary.md from a payload's `repeats` (`Repeats.as_dict`)."""
    runs = sorted(set(reused_from))
    return f"mean of {n} repeats" + (
        f", {len(reused_from)} reused from run{'s' if len(runs) > 1 else ''} {', '.join(runs)}" if runs else "")


def _verdict(members: Sequence[ResultPoint]) -> tuple[str, tuple[str, ...]]:
    """The combined verdict: valid when every repeat is; else the worst repeat's (an invalid one before a smoke one),
    with each repeat that is not valid named in the reasons."""
    if all(p.verdict == "valid" for p in members):
        return "valid", ()
    worst = min((p for p in members if p.verdict != "valid"), key=lambda p: p.verdict not in INVALID_VERDICTS)
    reasons = tuple(f"repeat {_index(p)} of {len(members)} ({p.job_id}"
                    + (f", reused from run {p.run_id}" if p.reused_by is not None else "") + f") is {p.verdict}"
                    + (f": {'; '.join(p.reasons)}" if p.reasons else "")
                    for p in members if p.verdict != "valid")
    return worst.verdict, reasons


def _total(values: Iterable[int | None]) -> int | None:
    vals = list(values)
    return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)


def combined_point(members: Sequence[ResultPoint]) -> ResultPoint:
    """The point a group of repeats stands for (see `Repeats.point`); one result is itself. It is the run in view's
    own point where that run measured any of the repeats (under the first of those), a reused one only where it
    measured none."""
    if len(members) == 1:
        return members[0]
    first = next((p for p in members if p.reused_by is None), members[0])
    names = dict.fromkeys(m for p in members for m in p.metrics)
    verdict, reasons = _verdict(members)
    return dataclasses.replace(
        first, metrics={m: finite_mean(p.metric(m) for p in members) for m in names}, verdict=verdict,
        reasons=reasons, num_requests=_total(p.num_requests for p in members),
        num_successful=_total(p.num_successful for p in members))


def combine_repeats(points: Iterable[ResultPoint]) -> list[Repeats]:
    """Every point once, its repeats combined (`repeat_keys`), in the order of each point's first result."""
    points = list(points)
    groups: dict[object, list[ResultPoint]] = {}
    for p, key in zip(points, repeat_keys(points), strict=True):
        groups.setdefault(key if key is not None else ("single", p.run_in_view, p.result_id), []).append(p)
    out = []
    for members in groups.values():
        members.sort(key=_index)
        out.append(Repeats(combined_point(members), tuple(members)))
    return out
