"""A pull request's verdict: per point improvement / regression / no change / unverified, and the sweep's success
rate.

Only a between-run band may call a change (`results.compare`): a point is a `regression` when any metric regressed
beyond its between-run band, an `improvement` when at least one improved and none regressed, `no change` when a band
that calls changes saw none (or A and B ran the same inputs: equal by construction), and `unverified` otherwise — no
repeats (within-run bands only), an invalid side, two clocks: nothing here says the point did not change, so it is
never counted as without change (`point_verdict`; what each verdict means: `POINT_VERDICT_MEANING`).

The success rate (InferenceX `calc_success_rate.py`: successful jobs over all attempted, per hardware bucket) is read
from the run's own record of its outcomes (`run.json`: `outcomes`), so a job that produced no result counts as a
failure; a reused job counts as a success. A run with no record of outcomes (an import) counts its results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from llmsweep.metrics.model import SUCCESS_STATUSES
from llmsweep.option_spellings import flag as _flag
from llmsweep.results.compare import Comparison, Lost, PointComparison, clock_words
from llmsweep.results.point import ResultPoint
from llmsweep.words import count_of

_REUSE = _flag("reuse")


PointVerdict = Literal["improvement", "regression", "no change", "unverified"]

POINT_VERDICT_MEANING: Mapping[PointVerdict, str] = {
    "improvement": "a metric or the eval score beyond its between-run band for the better, none for the worse",
    "regression": "a metric or the eval score beyond its between-run band for the worse, or B's measurement invalid "
                  "where A's is valid",
    "no change": "a between-run band saw no change (or A and B ran the same inputs: equal by construction)",
    "unverified": "no band here could call a change (no repeats, an invalid side, two clocks): not a verdict of no "
                  "change",
}
"""What each verdict of a point means, as a legend under the verdict says it (`report.markdown.verdict_legend`)."""


def _called_change(pc: PointComparison) -> Literal["improvement", "regression"] | None:
    """The change a band called at this point over its metrics and its eval score, if any: a regression of either (the
    score beyond its stderr band, `compare.EvalDelta`) makes it a regression, as it makes `Comparison.regressions`
    (`--fail-on-regression`); so does a measurement B made invalid where A's is valid (`PointComparison.invalidated`),
    whatever its figures."""
    if pc.invalidated:
        return "regression"
    verdicts = {d.verdict for d in pc.deltas} | ({pc.eval.verdict} if pc.eval is not None else set())
    if "regression" in verdicts:
        return "regression"
    if "improvement" in verdicts:
        return "improvement"
    return None


def _equal_by_construction(pc: PointComparison) -> bool:
    """A and B ran the same inputs on the simulator in virtual time (`PointComparison.same_inputs`), both valid, and
    every figure agrees as identical inputs make them: no change, by construction rather than by a band."""
    return pc.same_inputs and not (pc.invalid("a") or pc.invalid("b")) and all(
        d.verdict in ("same inputs", "n/a") for d in pc.deltas)


def point_verdict(pc: PointComparison) -> PointVerdict:
    """The point's verdict: the change a band called (`_called_change`); else `no change` where a band that calls
    changes could have called one (`point_called`) or the sides are equal by construction; else `unverified` — a
    point no band could call is not one without change (`uncalled_why` says why)."""
    if (change := _called_change(pc)) is not None:
        return change
    return "no change" if point_called(pc) or _equal_by_construction(pc) else "unverified"


def point_called(pc: PointComparison) -> bool:
    """Whether a band that calls changes could have called one at this point (False: the point is `unverified`, or
    equal by construction): a change it called was; else a between-run band of its metrics, or, for a point compared
    on its eval alone (no throughput deltas: an eval-only result), the eval score's stderr band."""
    if _called_change(pc) is not None:
        return True
    if pc.invalid("a") or pc.invalid("b") or pc.clocks_differ:  # an invalid measurement's figures call nothing,
        return False  # nor do figures timed on two clocks (`PointComparison.clocks_differ`)
    if pc.deltas:
        return any(d.band is not None and d.band.kind == "between-run" for d in pc.deltas)
    return pc.eval is not None and pc.eval.band is not None


@dataclass(frozen=True)
class SuccessRate:
    """Successful jobs over expected jobs, overall and per hardware."""

    success: int
    total: int
    by_status: Mapping[str, int] = field(default_factory=dict)
    by_hardware: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        return self.success / self.total if self.total else None

    def as_dict(self) -> dict[str, Any]:
        return {"success": self.success, "total": self.total, "rate": self.rate, "by_status": dict(self.by_status),
                "by_hardware": {h: {"n_success": s, "total": t} for h, (s, t) in self.by_hardware.items()}}


def success_rate(meta: Mapping[str, Any], points: Sequence[ResultPoint]) -> SuccessRate:
    """The sweep's success rate from its run record (`outcomes`), else from its results' verdicts. A job's hardware
    comes from its result, else from the run record's plan (`job_hardware`): a job that failed or was refused is
    counted under its hardware, not as unknown."""
    planned = meta.get("job_hardware")
    hardware = {str(j): str(h) for j, h in planned.items()} if isinstance(planned, Mapping) else {}
    hardware.update({p.job_id: p.identity.hardware or hardware.get(p.job_id, "unknown") for p in points})
    outcomes = meta.get("outcomes")
    if isinstance(outcomes, list) and outcomes:
        rows = [(str(o.get("job_id")), str(o.get("status"))) for o in outcomes if isinstance(o, dict)]
    else:  # no record of outcomes: the results
        rows = [(p.job_id, p.verdict) for p in points]
    # and every expected job neither records as missing (a narrower `--resume` records the jobs it ran, and the run's)
    have = {job for job, _ in rows}
    expected = meta.get("expected_job_ids") or meta.get("expected_jobs") or []
    rows += [(str(j), "missing") for j in expected if str(j) not in have]
    status = Counter(s for _, s in rows)
    per: dict[str, list[int]] = {}
    for job, s in rows:
        cell = per.setdefault(hardware.get(job, "unknown"), [0, 0])
        cell[0] += s in SUCCESS_STATUSES
        cell[1] += 1
    return SuccessRate(sum(n for s, n in status.items() if s in SUCCESS_STATUSES), len(rows), dict(status),
                       {h: (s, t) for h, (s, t) in sorted(per.items())})


def uncalled_why(pc: PointComparison) -> str:
    """Why a point's verdict says no more than it does: B's (or A's) measurement is invalid — named with its first
    reason —, the sides ran on two clocks (virtual and wall-clock time), the same inputs on the simulator (equal by
    construction: `PointComparison.same_inputs`; or, where a figure differs all the same, that identical inputs cannot
    explain it), or no between-run band could call a change; "" when a band could, or when it is a regression for B's
    invalid measurement, said the same way."""
    sides: tuple[Literal["a", "b"], ...] = ("b", "a")
    for side in sides:
        if bad := pc.invalid(side):
            reasons = "; ".join(bad[0].reasons) or "no reason given"
            return f"{side.upper()}'s measurement is {bad[0].verdict}: {reasons}"
    if pc.clocks_differ:
        clocks_a, clocks_b = pc.clocks
        return f"A ran in {clock_words(clocks_a)}, B in {clock_words(clocks_b)}"
    if pc.same_inputs and _called_change(pc) is None:
        if _equal_by_construction(pc):
            return "A and B ran the same inputs on the simulator in virtual time: equal by construction"
        return ("A and B ran the same inputs on the simulator in virtual time, yet their figures differ: identical "
                "inputs cannot explain it")
    return "" if point_called(pc) else "no between-run band"


def verdict_counts(comp: Comparison) -> dict[PointVerdict, int]:
    """How many matched points have each verdict (`point_verdict`): an `unverified` point is counted as such, never
    as one without change."""
    counts: dict[PointVerdict, int] = {"improvement": 0, "regression": 0, "no change": 0, "unverified": 0}
    for pc in comp.matched:
        counts[point_verdict(pc)] += 1
    return counts


def reused_from_baseline(comp: Comparison, reused: Collection[str]) -> tuple[list[ResultPoint], list[ResultPoint]]:
    """The baseline's results the run under test reused and the baseline's points it has no point of: (those it
    reused — `run --reuse` stood a job on that very stored result, `reused`: result ids; a point of which B measured
    other repeats too among them (`partly_reused`) — and the points B has none of that it did not reuse, which it
    did not run)."""
    return comp.reused_from_a(reused)


def partly_reused(comp: Comparison, reused: Collection[str]) -> list[str]:
    """A note per compared point of which the run under test stood some repeats on the baseline's own results (`run
    --reuse --repeats N` over a baseline of fewer repeats) and measured the others: its point stands on all of them
    (its frontier and dashboard draw their mean), but those are A's measurements, so B's side here holds only the
    repeats B measured."""
    taken = set(reused)
    out = []
    for pc in comp.matched:
        also = sum(1 for p in pc.a if p.result_id in taken)
        if also:
            out.append(f"{pc.label}: B stood {also} of its repeats on A's results (`run {_REUSE}`), not measured "
                       f"again (listed as reused by B); B's side here is the {count_of(len(pc.b), 'repeat')} B "
                       "measured, its point (frontier, dashboard) the mean of them all")
    return out


def _a_points(comp: Comparison) -> dict[tuple[str, str], ResultPoint]:
    """A's points in the comparison (matched, only in A, matched but not compared), by (run, job)."""
    points = [*(p for pc in comp.matched for p in pc.a), *comp.only_a, *(s.point for s in comp.skipped)]
    return {(p.run_id, p.job_id): p for p in points if p.run_id == comp.label_a}


def stood_on_earlier(comp: Comparison, stood: Mapping[str, ResultPoint]) -> tuple[ResultPoint, ...]:
    """The results B's jobs stand on (`stood`: what `run --reuse` stood them on, as the store reads it —
    `sides.reused_points_of`) that are earlier measurements of A's jobs, which A has measured again since (`run
    --force`, a `--resume` after an edit) and keeps for B (`rundir.KEPT_ATTEMPTS`): of A's run and a job A holds a
    point of, but not that point (`Comparison.earlier`). B's run record names the job's result id, which A's new
    measurement holds now: `compare` had listed that one as reused by B."""
    now = _a_points(comp)
    ids = {p.result_id for p in now.values()}
    return tuple(p for p in stood.values()
                 if p.run_id == comp.label_a and (p.run_id, p.job_id) in now and p.result_id not in ids)


def earlier_note(comp: Comparison) -> str:
    """The note that names the earlier measurements of A's jobs B stands on (`Comparison.earlier`), with A's now."""
    now = _a_points(comp)
    return (f"B ({comp.label_b}) stood {count_of(len(comp.earlier), 'job')} on earlier measurements of A's jobs, which "
            "A measured again since and keeps for B (in the job's attempts/): listed as reused by B under the result B "
            "stood on, A's new measurement not compared: " + "; ".join(
                f"{p.job_id} (B stands on {p.result_id}, A's measurement now is {now[(p.run_id, p.job_id)].result_id})"
                for p in comp.earlier))


def stood_on_left_out(comp: Comparison, stood: Mapping[str, ResultPoint]) -> tuple[ResultPoint, ...]:
    """The results B's jobs stand on (`stood`, as the store reads them: `sides.reused_points_of`) that are of A's run
    but of a job A holds no point of — A retired it since (its recipe no longer plans it: the store keeps its result
    for B, `rundir.RETIRED`) —: compared with nothing, and listed nowhere else (`stood_on_earlier` takes those A
    holds a newer point of, a third run's are named apart)."""
    now = _a_points(comp)
    return tuple(p for p in stood.values() if p.run_id == comp.label_a and (p.run_id, p.job_id) not in now)


def left_out_note(comp: Comparison, points: Sequence[ResultPoint], retired: Collection[str]) -> str:
    """The note that names the results of A's run B stands on that A holds no point of (`stood_on_left_out`);
    `retired`: A's retired job ids (`rundir.retired_of`), said as retired."""
    gone = [p for p in points if p.job_id in retired]
    why = ("A retired them since (its recipe no longer plans them; their results are kept for B in A's retired/)"
           if len(gone) == len(points) else "A holds no point of their jobs" + (
               f" ({len(gone)} of them retired since: their results are kept for B in A's retired/)" if gone else ""))
    return (f"B ({comp.label_b}) stood {count_of(len(points), 'job')} on results of A's run that are not A's points: "
            f"{why}; "
            "not compared here: " + ", ".join(f"{p.job_id} ({p.result_id})" for p in points))


def lost_by_b(comp: Comparison, meta_b: Mapping[str, Any]) -> list[Lost]:
    """A's valid points B has none of whose job B's run record (`outcomes`) says ran and ended without a success
    (`failed`, `refused`, `invalid`): the same job id, so the same planned point (its id holds the point's
    fingerprinted fields). A job B did not run (a narrower run, not in its outcomes) or reused is not lost."""
    outcomes = meta_b.get("outcomes")
    ended = {str(o.get("job_id")): o for o in outcomes if isinstance(o, Mapping)} if isinstance(outcomes, list) else {}
    out = []
    for p in comp.only_a:
        o = ended.get(p.job_id)
        if o is None or not p.valid or str(o.get("status")) in SUCCESS_STATUSES:
            continue
        reasons = o.get("reasons")
        out.append(Lost(p, str(o.get("status")), tuple(str(r) for r in reasons) if isinstance(reasons, list) else ()))
    return out


def lost_lines(lost: Sequence[Lost]) -> list[str]:
    """A's points B ran without a result (`lost_by_b`), one line per status and reasons: `refused (why): JOB, JOB`."""
    by: dict[str, list[str]] = {}
    for x in lost:
        by.setdefault(f"{x.status} ({'; '.join(x.reasons) or 'no reason given'})", []).append(x.point.job_id)
    return [f"{why}: {', '.join(jobs)}" for why, jobs in by.items()]


def lost_note(lost: Sequence[Lost]) -> str:
    """The note that names A's points B ran without a result (`lost_by_b`)."""
    return (f"B ran {len(lost)} of A's valid points without a result — points the change lost, each a regression "
            "(as a point B measured invalid is): " + "; ".join(lost_lines(lost)))


def verdict_as_dict(comp: Comparison, success: SuccessRate, reused: Collection[str] = ()) -> dict[str, Any]:
    """The pull request's verdict as data (what `compare --baseline A B --format markdown` writes as a table): each
    matched point's verdict and whether a between-run band could call it, the counts, the success rate, and the
    baseline's jobs the run under test reused rather than measured again (`reused`: the result ids it stood on)."""
    taken, _ = reused_from_baseline(comp, reused)
    return {
        "counts": verdict_counts(comp),
        "points": [{"key": pc.key, "label": pc.label, "verdict": point_verdict(pc), "called": point_called(pc),
                    "why": uncalled_why(pc) or None, "served_apart": list(pc.served_apart)} for pc in comp.matched],
        "success_rate": success.as_dict(),
        "reused": [p.job_id for p in taken],
        "lost": [p.point.job_id for p in comp.lost],
    }
