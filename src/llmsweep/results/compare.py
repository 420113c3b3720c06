"""Compare two sets of results point by point, with noise bands and honest verdicts.

Points match on their full identity (image, parallelism incl. pp/dcp/pcp, offload, spec method, concurrency,
scenario, isl/osl); fields the user chooses to ignore are named in the output. Results of different sources
(measured/simulated/predicted) are never compared unless `mix_sources` is set.

Verdicts per metric:
- `improvement` / `regression`: |Δ| exceeds a between-run band (repeats exist) and the direction is good / bad;
- `within noise`: |Δ| is inside the band (either kind);
- `unverified`: |Δ| exceeds only a within-run band, or there is no band at all — a single run cannot tell a change
  from run-to-run variance, so it does not claim one —, or a side's measurement of the point is invalid: its figures
  call no change (the point itself is a regression when B's is invalid and A's valid: `PointComparison.invalidated`),
  or the sides were timed on two clocks, virtual and wall-clock time (`PointComparison.clocks_differ`);
- `same inputs`: A and B ran the same inputs on the simulator in virtual time (`PointComparison.same_inputs`): its
  core is deterministic, so B's figures are A's again — no band (there is no noise to band), and no change by
  construction, not by measurement.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from llmsweep.errors import ConfigError
from llmsweep.metrics.model import CLOCK_WORDS, MEASURED, EvalBlock, GpuState, Hardware, source_words
from llmsweep.metrics.registry import HOT_BY_NAME, HOT_COLUMNS
from llmsweep.option_spellings import flag as _flag
from llmsweep.results.bands import (
    Band,
    RunValue,
    between_run_band,
    bootstrap_sd,
    error_ratio_sd,
    runs_count,
    runs_mean,
    within_run_band,
)
from llmsweep.results.identity import POINT_FIELDS, TOPOLOGY_FIELDS
from llmsweep.results.point import ResultPoint, build_unknown, configuration_keys, configurations, telling_apart
from llmsweep.results.repeats import finite_mean, mean_of
from llmsweep.results.samples import Samples, load_samples
from llmsweep.words import count_of, noun

_MIX_SOURCES = _flag("mix_sources")
_POWER_BACKEND = _flag("power_backend")
_REPEATS = _flag("repeats")
_REPEATS_FROM = _flag("repeats_from")
_B_REPEATS_FROM = _flag("b_repeats_from")


Verdict = Literal["improvement", "regression", "within noise", "unverified", "same inputs", "n/a"]

VERDICT_MEANING: Mapping[Verdict, str] = {
    "improvement": "beyond its between-run band (repeats), for the better",
    "regression": "beyond its between-run band (repeats), for the worse",
    "within noise": "inside its band",
    "unverified": "beyond only a within-run band, or no band, or a side invalid or timed on another clock: one run "
                  "cannot tell a change from run-to-run noise, so none is called",
    "same inputs": "A and B ran the same inputs on the simulator in virtual time: equal by construction",
    "n/a": "not compared: a side has no figure, or the evals' task or settings differ, or (a cost) the sides' assumed "
           "price of a GPU-hour differs",
}
"""What each verdict of a metric (or an eval score) means, as a legend under the table says it
(`report.markdown.verdict_legend`); the rules are the module's docstring and `_verdict`."""

DEFAULT_METRICS: tuple[str, ...] = (
    "tput_per_gpu", "output_tput_per_gpu", "p90_e2e_norm_intvty", "p50_intvty", "p90_intvty", "p50_ttft",
    "p90_ttft", "p50_tpot", "p90_tpot", "p50_e2el", "p90_e2el", "error_ratio",
)

WITHIN_RUN_METHOD = "exact bootstrap"
"""How a within-run band is computed (`bands.bootstrap_sd`): the spread over every resample of the requests, exactly —
no seed, no resample count (`--json`'s `within_run_band`)."""

POWER_METRICS: tuple[str, ...] = tuple(c.name for c in HOT_COLUMNS if c.metric.name.startswith("power."))
"""Compared by default too, when a point on either side has them (runs that sampled power, or priced their cost)."""
SAMPLED_METRICS: tuple[str, ...] = tuple(c.name for c in HOT_COLUMNS if c.metric.power)
"""The figures of the GPUs' power samples (`MetricDef.power`), not the assumed cost beside them (which needs none)."""
ASSUMED_METRICS: tuple[str, ...] = tuple(c.name for c in HOT_COLUMNS if c.metric.assumed)
"""The figures of the catalog's assumed price of a GPU-hour (`MetricDef.assumed`): judged only between results priced
alike (`priced_apart`)."""


@dataclass(frozen=True, slots=True)
class MetricDelta:
    metric: str
    a: float | None
    b: float | None
    delta: float | None
    rel: float | None
    band: Band | None
    verdict: Verdict

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "a": self.a, "b": self.b, "delta": self.delta, "rel": self.rel,
                "band": None if self.band is None else {"half_width": self.band.half_width, "kind": self.band.kind,
                                                        "runs": self.band.runs},
                "verdict": self.verdict}


EVAL_Z = 1.96
"""An eval score's band: 1.96 × the combined standard error of the two sides' scores (lm-eval's stderr; of a side
that is the mean of repeated evals, the standard error of that mean: `mean_score_stderr`)."""


@dataclass(frozen=True, slots=True)
class EvalDelta:
    """The eval scores of a matched point on both sides (same task), their difference against the scores' combined
    standard error, and each side's threshold verdict. `mode_a`/`mode_b`: what kind of job ran each side's eval —
    `run-eval` (after a throughput point, on its server) or `eval-only` — which may differ: both are the same
    measurement of the configuration's accuracy (`compare_points` pairs them)."""

    task: str
    a: float | None
    b: float | None
    delta: float | None
    band: float | None
    verdict: Verdict
    verdict_a: str
    verdict_b: str
    mode_a: str = ""
    mode_b: str = ""
    differs: str = ""
    """The settings the two sides' evals ran with that differ (`dataset a.jsonl vs b.jsonl; limit 4 vs 8`): the
    scores measure other things, so the verdict is `n/a`; "" when they agree."""
    runs_a: int = 1
    runs_b: int = 1
    """How many evals each side's score is the mean of (`run --repeats N`: one per repeat); its standard error is that
    mean's (`mean_score_stderr`)."""

    @property
    def band_words(self) -> str:
        """What the band is, as a table says it: `stderr`, `stderr, A the mean of 3 repeats`."""
        means = [f"{side} the mean of {n} repeats" for side, n in (("A", self.runs_a), ("B", self.runs_b)) if n > 1]
        return ", ".join(["stderr", *means])

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "a": self.a, "b": self.b, "delta": self.delta, "band": self.band,
                "band_kind": "stderr", "runs": {"a": self.runs_a, "b": self.runs_b},
                "verdict": self.verdict, "eval_verdict_a": self.verdict_a,
                "eval_verdict_b": self.verdict_b, "eval_mode_a": self.mode_a, "eval_mode_b": self.mode_b,
                "settings_differ": self.differs or None}


@dataclass(frozen=True, slots=True)
class PointComparison:
    key: str
    a: tuple[ResultPoint, ...]
    b: tuple[ResultPoint, ...]
    past: tuple[ResultPoint, ...]
    """Earlier stored results of A's point and A's configuration that joined A's noise estimate (`history`)."""
    deltas: tuple[MetricDelta, ...]
    eval: EvalDelta | None = None
    same_inputs: bool = False
    """A's and B's results ran the same inputs on the simulator in virtual time: each was recorded under the same reuse
    key (`changes.reuse`: recipe, launch, workload and seed, repeat, simulator code and catalogs, measurement
    definitions; `run.json`'s `reuse_keys`), and the core is deterministic, so B's figures are A's again: the deltas
    are zero by construction and carry no band (`same inputs`)."""
    served_apart: tuple[str, ...] = ()
    """What served or measured A's results and B's differently though the point (image tag included) is the same, read
    back from both (`served_apart`): another engine build (or, where no server reports one, installed engine
    version), image digest, simulator build, GPU power limit or maximum clock, power sampler backend, client release or
    measurement definitions. The verdict stands, but it is not a comparison of one configuration, and is said beside
    it (the table's `served apart` row, the Markdown's point or verdict cell, `--json`'s `served_apart`), not in a
    note; () where nothing recorded on both sides differs."""
    priced_apart: str = ""
    """The assumed prices of a GPU-hour A's and B's cost figures were figured at, where they differ (`priced_apart`):
    those figures (`MetricDef.assumed`) are then not judged (`n/a`), the comparison's notes say why; "" where the
    sides are priced alike."""

    @property
    def history(self) -> int:
        return len(self.past)

    def runs(self, side: Literal["a", "b", "past"]) -> int:
        """How many runs a side's results are (an imported row that is the mean of N repeats is N:
        `repeats.mean_of`)."""
        return sum(mean_of(p)[0] for p in {"a": self.a, "b": self.b, "past": self.past}[side])

    @property
    def label(self) -> str:
        i = self.a[0].identity
        # a disaggregated series label already names its topology (`disagg P2x(...) D1x(...)`)
        return f"{i.series_label()}{'' if i.workers else f' · {i.topology()}'} · conc {i.conc}"

    @property
    def order(self) -> tuple[str, str, int]:
        """Where the point goes in a table: by its series, topology, then concurrency as a number (4 before 16)."""
        i = self.a[0].identity
        return i.series_label(), i.topology(), i.conc

    def verdicts(self) -> dict[str, Verdict]:
        return {d.metric: d.verdict for d in self.deltas}

    def invalid(self, side: Literal["a", "b"]) -> tuple[ResultPoint, ...]:
        """The side's results of this point whose measurement is invalid (`ResultPoint.valid`)."""
        return tuple(p for p in (self.a if side == "a" else self.b) if not p.valid)

    @property
    def clocks(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The clocks A's and B's results of the point ran on (`ResultPoint.clock`: `virtual`, `wall`; a result that
        records none left out)."""
        return _clocks(self.a), _clocks(self.b)

    @property
    def clocks_differ(self) -> bool:
        """A's and B's throughput figures were timed on different clocks (the simulator's virtual time against
        wall-clock time, `--live` or a real engine): their deltas are mostly the live path's client and transport, not
        a change of configuration, so they call none (`unverified`)."""
        return bool(self.deltas) and _clocks_differ(self.a, self.b)

    @property
    def invalidated(self) -> bool:
        """B's measurement of a throughput point is invalid where A's is valid: the change left the point without a
        valid result — a regression, whatever its figures say (an invalid run's requests may fail fast and look
        quick)."""
        return bool(self.deltas) and bool(self.invalid("b")) and not self.invalid("a")


@dataclass(frozen=True, slots=True)
class Skipped:
    point: ResultPoint
    reason: str


@dataclass(frozen=True, slots=True)
class Lost:
    """A point of A's, valid, whose job B ran and ended without a result (B's run record: `failed`, `refused`, an
    invalid job whose summary is gone): the change lost the point — a regression, as a point B measured invalid is
    (`PointComparison.invalidated`) — not a point B did not have."""

    point: ResultPoint
    status: str
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    label_a: str
    label_b: str
    matched: tuple[PointComparison, ...]
    only_a: tuple[ResultPoint, ...]
    only_b: tuple[ResultPoint, ...]
    skipped: tuple[Skipped, ...]
    ignored_fields: tuple[str, ...] = ()
    mix_sources: bool = False
    notes: tuple[str, ...] = field(default=())
    sides: tuple[str, str] = ("", "")
    """What each side's compared figures are (`simulated, virtual time`, `measured, wall-clock time`), when the two
    sides differ in it (`--mix-sources`, or a virtual-time run against a live one); ("", "") when they do not."""
    lost: tuple[Lost, ...] = ()
    """A's valid points whose job B ran without a result (`results.verdict.lost_by_b`, from B's run record): among
    `only_a`, said apart from it."""
    unmatched: str = ""
    """Why no point of A matches a point of B, where neither side is empty and none did (`unmatched_why`: the identity
    fields that differ, and what `compare --ignore` would match); "" where a point matched or was refused. Among
    `notes` too."""
    mispaired: bool = False
    """Nothing matched, yet leaving out what the points were measured under (:data:`MEASURED_UNDER`: the image, the
    corpus) would match some: the sides measured the same points — a comparison set up wrong, which
    `--fail-on-regression` does not pass. False where B's points are other configurations (a new hardware, engine,
    concurrency: a pull request's new points)."""
    earlier: tuple[ResultPoint, ...] = ()
    """The results of A's run that B stood jobs on (`run --reuse`) as earlier measurements of A's jobs, which A has
    measured again since and keeps for B (`rundir.KEPT_ATTEMPTS`; `results.verdict.stood_on_earlier`): reused by B
    from A, listed under the result B stood on, and A's new measurement of such a job is not among `only_a` (B did
    not do without it: it stands on the earlier one)."""

    def side(self, which: Literal["a", "b"]) -> tuple[str, str]:
        """(label, what its figures are — "" unless the sides differ in it) of side A or B."""
        return (self.label_a, self.sides[0]) if which == "a" else (self.label_b, self.sides[1])

    @property
    def regressions(self) -> list[tuple[PointComparison, MetricDelta | EvalDelta]]:
        found: list[tuple[PointComparison, MetricDelta | EvalDelta]] = [
            (p, d) for p in self.matched for d in p.deltas if d.verdict == "regression"]
        return found + [(p, p.eval) for p in self.matched if p.eval is not None and p.eval.verdict == "regression"]

    @property
    def invalidated(self) -> list[PointComparison]:
        """The matched points B measured invalid where A's measurement is valid (`PointComparison.invalidated`)."""
        return [p for p in self.matched if p.invalidated]

    def reused_from_a(self, reused: Collection[str]) -> tuple[list[ResultPoint], list[ResultPoint]]:
        """(A's results B reused — `run --reuse` stood a job of B on that very stored result; `reused`: result ids;
        and the earlier measurements of A's jobs B stood on, which A measured again since (`earlier`) — and A's points
        B has none of and did not reuse). `results.verdict.reused_from_baseline` says the same."""
        taken = set(reused)
        again = {(p.run_id, p.job_id) for p in self.earlier}
        matched = [p for pc in self.matched for p in pc.a if p.result_id in taken]
        return ([*matched, *(p for p in self.only_a if p.result_id in taken), *self.earlier],
                [p for p in self.only_a if p.result_id not in taken and (p.run_id, p.job_id) not in again])

    def as_dict(self, reused: Collection[str] = ()) -> dict[str, Any]:
        """The comparison as data; `reused`: the stored result ids B stood jobs on (`run --reuse`): A's among them
        are `reused` (not measured again by B), not `only_a`, as the table and the Markdown list them."""
        def pid(p: ResultPoint) -> dict[str, Any]:
            return {"result_id": p.result_id, "run_id": p.run_id, "job_id": p.job_id, "source": p.source,
                    "origin": p.origin, "verdict": p.verdict}

        taken, only_a = self.reused_from_a(reused)
        gone = {x.point.result_id for x in self.lost}
        return {
            "a": self.label_a, "b": self.label_b, "within_run_band": WITHIN_RUN_METHOD, "mix_sources": self.mix_sources,
            "sides": {"a": self.sides[0] or None, "b": self.sides[1] or None},
            "ignored_fields": list(self.ignored_fields), "notes": list(self.notes),
            "matched": [{"key": m.key, "label": m.label, "identity": m.a[0].identity.as_dict(),
                         "a": [pid(p) for p in m.a], "b": [pid(p) for p in m.b],
                         "runs": {"a": m.runs("a"), "b": m.runs("b")}, "history_runs": m.history,
                         "history": [pid(p) for p in m.past], "invalidated": m.invalidated,
                         "same_inputs": m.same_inputs,
                         "served_apart": list(m.served_apart),
                         "priced_apart": m.priced_apart or None,
                         "deltas": [d.as_dict() for d in m.deltas],
                         "eval": m.eval.as_dict() if m.eval is not None else None} for m in self.matched],
            "reused": [pid(p) for p in taken],
            "lost": [{**pid(x.point), "b_status": x.status, "b_reasons": list(x.reasons)} for x in self.lost],
            "only_a": [pid(p) for p in only_a if p.result_id not in gone], "only_b": [pid(p) for p in self.only_b],
            "skipped": [{**pid(s.point), "reason": s.reason} for s in self.skipped],
        }


def _verdict(metric: str, delta: float | None, band: Band | None) -> Verdict:
    if delta is None:
        return "n/a"
    if band is None:
        return "unverified"
    if abs(delta) <= band.half_width:
        return "within noise"
    if band.kind != "between-run":
        return "unverified"
    better = (delta > 0) == (HOT_BY_NAME[metric].polarity == "max")
    return "improvement" if better else "regression"


class _SampleCache:
    """Records are read once per result; a result without records simply has no within-run band, nor has one whose
    records are not the requests its summary measured (`sliced`)."""

    def __init__(self) -> None:
        self._cache: dict[str, Samples | None] = {}
        self.sliced: dict[str, ResultPoint] = {}
        """Results whose records.jsonl holds other requests than their summary counted: a slice packed as evidence
        for a repository (the first 20 records of hundreds), whose bootstrap would band 20 requests' noise."""

    def get(self, point: ResultPoint) -> Samples | None:
        if point.result_id not in self._cache:
            path = point.records_path
            samples = load_samples(path) if path is not None else None
            if samples is not None and not _whole(samples, point):
                self.sliced[point.result_id] = point
                samples = None
            self._cache[point.result_id] = samples
        return self._cache[point.result_id]


def _whole(samples: Samples, point: ResultPoint) -> bool:
    """Whether the records hold the requests the point's summary measured: its finished and successful profiling
    requests, counted the same way (cancelled and implausible ones out of both); a count the point does not record
    is not checked."""
    return (point.num_requests is None or samples.total == point.num_requests) and \
        (point.num_successful is None or samples.n == point.num_successful)


def compare_points(
    a: Sequence[ResultPoint],
    b: Sequence[ResultPoint],
    *,
    label_a: str = "A",
    label_b: str = "B",
    repeats_a: Sequence[ResultPoint] = (),
    repeats_b: Sequence[ResultPoint] = (),
    history: Sequence[ResultPoint] = (),
    metrics: Sequence[str] = DEFAULT_METRICS,
    ignore: Iterable[str] = (),
    mix_sources: bool = False,
    inputs: Mapping[str, str] | None = None,
    measurements: Mapping[str, str] | None = None,
    ignorable: Collection[str] = (),
) -> Comparison:
    """Match A and B by identity and compute every metric's delta, band and verdict.

    `repeats_a`/`repeats_b` are further runs of the same points on each side; `history` holds earlier stored runs of
    A's points (e.g. from the store) that inform run-to-run variance only, as repeats of the baseline: only the valid
    ones of the same configuration as A's (`same_configuration`) count, and each comparison names them (`past`).
    Points in A or B that share a key and a configuration within one side (in-run repeats) are repeats too; a side
    holding two configurations of one point pools neither (`_mixed_configurations`). In virtual time, results of one
    configuration and seed count once (`distinct_samples`).

    `inputs`: the reuse key each result was recorded under, by result id (`results.sides.recorded_inputs`: a run's
    `run.json` `reuse_keys`); a point whose A and B results all ran in virtual time under the same keys ran the same
    inputs (`PointComparison.same_inputs`): said, not banded. A result without one is never taken for the same.

    `measurements`: the measurement definitions each result was measured under, by result id
    (`results.sides.recorded_measurements`: its run's `run.json`; "" where the run records none): a point whose sides
    were measured under others says so beside its verdict (`served_apart`); a result not in it was not read.

    Evals pair on the point identity whatever kind of job ran them: a `run-eval` job's eval (after its throughput
    point, on the same server) and an `eval-only` job's eval of the same point identity measure the same accuracy, so
    main's full sweep is judged against a pull request's `--evals-only` run (`_cross_kind_evals`).

    `ignorable`: the identity fields the caller may leave out of matching (`compare --ignore`'s choices): where no
    point matches, the note that says why names those of them that would match some (`unmatched_why`).
    """
    ignored = frozenset(ignore)
    if topology := sorted(ignored & set(TOPOLOGY_FIELDS)):
        raise ConfigError(f"compare: --ignore {', '.join(topology)} would match aggregated and disaggregated points",
                          fix="compare aggregated with aggregated and disaggregated with disaggregated results "
                              f"(their series are kept apart); leave {', '.join(topology)} out of `compare --ignore`")
    cache = _SampleCache()
    if metrics is DEFAULT_METRICS:
        metrics = (*DEFAULT_METRICS, *(m for m in POWER_METRICS if any(p.metric(m) is not None for p in (*a, *b))))

    def grouped(points: Sequence[ResultPoint]) -> dict[str, list[ResultPoint]]:
        out: dict[str, list[ResultPoint]] = {}
        for p in points:
            out.setdefault(_match_key(p, ignored), []).append(p)
        return out

    side_a, side_b = grouped(a), grouped(b)
    rep_a, rep_b, hist = grouped(repeats_a), grouped(repeats_b), grouped(history)
    matched: list[PointComparison] = []
    skipped: list[Skipped] = []
    notes: list[str] = []
    replayed = 0  # virtual-time results that repeat another's configuration and seed: one sample, counted once
    twice: set[str] = set()  # result ids given more than once (`_once`)
    for k, pa in side_a.items():
        pb = side_b.get(k)
        if pb is None:
            continue
        sources = {p.source for p in pa + pb}
        if len(sources) > 1 and not mix_sources:
            skipped.extend(Skipped(p, f"sources differ ({', '.join(sorted(sources))}); pass {_MIX_SOURCES} to compare")
                           for p in pa + pb)
            continue
        if mixed := _mixed_configurations(pa, pb):
            skipped.extend(Skipped(p, mixed) for p in pa + pb)
            continue
        # one result is one run, however often it was named (A's own run in --repeats-from, a run given twice):
        # counted twice it would pass for a repeat that agreed exactly and shrink the band to nothing
        every_a = _once(pa + _repeats_of(pa, rep_a.get(k, []), sources, mix_sources, _REPEATS_FROM, notes), twice)
        every_b = _once(pb + _repeats_of(pb, rep_b.get(k, []), sources, mix_sources, _B_REPEATS_FROM, notes),
                        twice)
        every_past = _once(same_configuration(pa, hist.get(k, [])), twice, {p.result_id for p in every_a})
        runs_a, runs_b = distinct_samples(every_a), distinct_samples(every_b)
        past = distinct_samples([*runs_a, *every_past])[len(runs_a):]
        replayed += len(every_a) + len(every_b) + len(every_past) - len(runs_a) - len(runs_b) - len(past)
        same = _same_inputs(runs_a, runs_b, inputs or {})
        prices = priced_apart(runs_a, runs_b)
        deltas = () if pa[0].eval_only else tuple(
            _metric_delta(m, runs_a, runs_b, past, cache, same_inputs=same, priced_apart=bool(prices))
            for m in metrics)
        # an invalid measurement's figures call no change, nor do figures timed on two clocks (the live path's
        # client and transport against none: the same configuration in virtual and wall-clock time "regressed")
        if any(not p.valid for p in (*runs_a, *runs_b)) or _clocks_differ(runs_a, runs_b):
            deltas = tuple(replace(d, verdict="unverified") if d.verdict in ("improvement", "regression") else d
                           for d in deltas)
        matched.append(PointComparison(k, tuple(runs_a), tuple(runs_b), tuple(past), deltas,
                                       _eval_delta(runs_a, runs_b), same and bool(deltas),
                                       served_apart(runs_a, runs_b, measurements or {}),
                                       prices if any(d.metric in ASSUMED_METRICS for d in deltas) else ""))
        if unknown := _build_unknown_note(matched[-1]):
            notes.append(unknown)
    paired = _cross_kind_evals(side_a, side_b, matched, skipped, mix_sources)
    # by series, then by concurrency as a number (the sides come in job-id order, where conc 12 sorts before 4)
    matched.sort(key=lambda m: (m.a[0].identity.series_key(), m.a[0].identity.conc))
    only_a = tuple(p for k, ps in side_a.items() if k not in side_b for p in ps if p.result_id not in paired)
    only_b = tuple(p for k, ps in side_b.items() if k not in side_a for p in ps if p.result_id not in paired)
    for m in matched:
        bad = [f"{side} {p.job_id} is {p.verdict} ({'; '.join(p.reasons) or 'no reason given'})"
               for side, runs in (("A", m.a), ("B", m.b)) for p in runs if not p.valid]
        if bad:
            notes.append(f"{m.label}: " + ", ".join(bad) + " — its deltas describe an invalid measurement")
        # a smoke result is sound but short (a window below the scenario's minimum): beside a full one its figures
        # differ by the window too, so it is said, as an invalid one is (its figures still call changes)
        smoke = [f"{side} {p.job_id} is smoke ({'; '.join(p.reasons) or 'no reason given'})"
                 for side, runs in (("A", m.a), ("B", m.b)) for p in runs if p.verdict == "smoke"]
        if smoke:
            notes.append(f"{m.label}: " + ", ".join(smoke) + " — too short a measurement to publish: its deltas "
                         "describe a window below the scenario's minimum")
    if cache.sliced:  # its records are a slice: the summary's figures stand, their sampling noise is not known
        sliced = sorted({f"{p.run_id}/{p.job_id}" for p in cache.sliced.values()})
        notes.append(f"{count_of(len(sliced), 'result')} {noun(len(sliced), 'keeps', 'keep')} other requests than "
                     f"{noun(len(sliced), 'its', 'their')} summary measured (records.jsonl is "
                     "a slice, as evidence packed for a repository is, or not the records the summary was computed "
                     f"from): no within-run band from them ({', '.join(sliced)})")
    for side, label, points in (("A", label_a, a), ("B", label_b, b)):  # not "no point matches: see --ignore"
        if not points:
            notes.append(f"{side} ({label}) has no result: nothing of it to compare")
    # neither side is empty and not one point matched: which identity fields keep them apart, and what would match
    unmatched, mispaired = unmatched_why(a, b, ignored, ignorable) if a and b and not matched and not skipped \
        else ("", False)
    if unmatched:
        notes.append(unmatched)
    if a and {p.result_id for p in a} == {p.result_id for p in b}:
        notes.insert(0, f"A and B are the same results (run {', '.join(sorted({p.run_id for p in a}))}): every "
                        "delta is zero by construction")
    # the clock times throughput figures: an eval is served live whatever clock its job's throughput point ran on
    clocks_a = sorted({p.clock for m in matched if m.deltas for p in m.a if p.clock})
    clocks_b = sorted({p.clock for m in matched if m.deltas for p in m.b if p.clock})
    if clocks_a and clocks_b and clocks_a != clocks_b:
        # the simulator's HTTP server in wall-clock time adds the client, the transport and the event loop to what
        # the core models in virtual time: a delta between the two is mostly that, not a change of configuration
        notes.append(f"A ran in {clock_words(clocks_a)}, B in {clock_words(clocks_b)}: the deltas include "
                     "the live path's client and transport, not only a change of configuration, so a point timed on "
                     "two clocks calls no regression or improvement (compare runs of one clock)")
    notes += _priced_apart_notes(matched)
    if unread := _unrecorded(matched, measurements or {}):
        notes.append("not recorded, so not checked for a difference between A and B: " + "; ".join(unread))
    if ignored:
        notes.append(f"points matched ignoring: {', '.join(sorted(ignored))}")
    if twice:
        notes.append(f"{count_of(len(twice), 'result')} {noun(len(twice), 'was', 'were')} given more than once (A or B "
                     f"again in {_REPEATS_FROM} or "
                     f"{_B_REPEATS_FROM}, or one run named twice): each is one run, counted once")
    if replayed:
        notes.append(f"{count_of(replayed, 'virtual-time result')} ran a configuration and seed another compared "
                     "result ran: "
                     "the simulator's core is deterministic, so each is that result again, counted once (a repeat "
                     f"draws its own sample: `run {_REPEATS}`, or another workload seed)")
    for m in matched:  # a result that is the mean of N runs: its count and spread are in the band, said
        means = [f"{side} {p.job_id} is the mean of {n} repeats ({p.run_id}'s exported row)"
                 for side, runs in (("A", m.a), ("B", m.b)) for p in runs if (n := mean_of(p)[0]) > 1]
        if means and m.deltas:
            notes.append(f"{m.label}: " + ", ".join(means) + " — counted as that many runs, their spread (sd) "
                         "joining the noise band")
    if same_inputs := [m for m in matched if m.same_inputs]:
        differ = [f"{m.label} ({', '.join(d.metric for d in m.deltas if d.delta)})" for m in same_inputs
                  if any(d.delta for d in m.deltas)]
        notes.append(f"{count_of(len(same_inputs), 'compared point')} ran the same inputs on the simulator in virtual "
                     "time on "
                     "both sides (the same reuse key: recipe, launch, workload and seed, simulator code and catalogs): "
                     "its core is deterministic, so B's figures are A's again — no noise band, and no change by "
                     "construction, not by measurement (a change to the simulator or the recipe gives other inputs)"
                     + (f"; yet these figures differ, which identical inputs cannot explain: {'; '.join(differ)}"
                        if differ else ""))
    compared = [m for m in matched if m.deltas and not m.same_inputs]  # same inputs want no band: none is missing
    if compared and not any(d.band is not None and d.band.kind == "between-run"  # said only when true
                            for m in compared for d in m.deltas):
        notes.append("no repeats: bands are within-run only, so no change is called a regression or improvement "
                     f"(re-run with {_REPEATS}, or pass {_REPEATS_FROM})")
    words_a = sorted({source_words(p.source, p.clock if m.deltas else None) for m in matched for p in m.a})
    words_b = sorted({source_words(p.source, p.clock if m.deltas else None) for m in matched for p in m.b})
    sides = (" and ".join(words_a), " and ".join(words_b)) if words_a != words_b else ("", "")
    if words_a == words_b and matched:
        # the same kinds on both sides, so no side heading says them: a comparison of simulated runs (a pull
        # request's comment) must still not read as a comparison of measurements
        simulated = [m for m in matched if any(p.source != MEASURED for p in (*m.a, *m.b))]
        if len(simulated) == len(matched):
            notes.append(f"A and B are both {' and '.join(words_a)}: the simulator's figures, not measurements")
        elif simulated:  # `--mix-sources`: each side holds measured and simulated points; say which are which
            kinds = " and ".join(w for w in words_a if not w.startswith(MEASURED))
            at = "; ".join(m.label for m in simulated)
            notes.append(f"A and B each hold measured and {kinds} points: {len(simulated)} of "
                         f"{count_of(len(matched), 'compared point')} {noun(len(simulated), 'is', 'are')} the "
                         f"simulator's figures, not measurements ({at})")
    return Comparison(label_a, label_b, tuple(matched), only_a, only_b, tuple(skipped), tuple(sorted(ignored)),
                      mix_sources, tuple(notes), sides, unmatched=unmatched,
                      mispaired=mispaired)


def _match_key(p: ResultPoint, ignored: frozenset[str]) -> str:
    """The key a result is matched on: its point identity without the ignored fields; an eval-only result matches
    eval-only results only (it has no throughput)."""
    return p.identity.key(ignored) + (_EVAL_ONLY if p.eval_only else "")


def _values(points: Sequence[ResultPoint], name: str) -> list[str]:
    """The values the points' identities hold of one field, in words, each once (sorted; `–` for none)."""
    return sorted({str(v) if (v := getattr(p.identity, name)) not in ("", None) else "–" for p in points})


MEASURED_UNDER: frozenset[str] = frozenset({"image", "corpus"})
"""The identity fields that say what a point was measured under (the engine build, the prompts), not which
configuration it is: two runs whose points differ only in these measured the same points, and a comparison that
paired none of them was set up wrong (`Comparison.mispaired`). A point of another hardware, model, engine,
precision or parallelism is another configuration — a pull request's new one —, never a mispairing."""


def unmatched_why(a: Sequence[ResultPoint], b: Sequence[ResultPoint], ignored: frozenset[str] = frozenset(),
                  ignorable: Collection[str] = ()) -> tuple[str, bool]:
    """Why no point of A matches a point of B (`Comparison.unmatched`): the identity fields whose values differ between
    the sides, with each side's values, and how many points leaving out one of them that is `ignorable` (`compare
    --ignore`; or all of those, where no one alone does) would match. Said in the table, the Markdown and `--json`'s
    notes, and by `--fail-on-regression`; with whether leaving out only fields of :data:`MEASURED_UNDER` would match
    a point (`Comparison.mispaired`), which that gate does not pass."""
    def matches(ignore: frozenset[str]) -> int:
        keys_b = {_match_key(p, ignore) for p in b}
        return len({k for p in a if (k := _match_key(p, ignore)) in keys_b})

    differ = [f for f in POINT_FIELDS if f not in ignored and _values(a, f) != _values(b, f)]
    if not differ:  # each field's values are on both sides, but no point's combination of them is
        if {p.identity.key(ignored) for p in a} & {p.identity.key(ignored) for p in b}:  # only eval-only apart
            only = "B" if all(p.eval_only for p in b) else "A"
            return (f"no point of A matches a point of B: {only}'s results are evals alone "
                    f"(`{_flag('evals_only')}`), which pair only with evals, and the other side ran none of the same "
                    "points"), False
        return ("no point of A matches a point of B: each side holds the same values of every identity field, but "
                "no point of one holds the other's combination of them"), False

    def said(name: str) -> str:
        va, vb = _values(a, name), _values(b, name)
        return f"{name} (A {_few(va)}; B {_few(vb)})"

    may = [f for f in differ if f in ignorable and f not in TOPOLOGY_FIELDS]
    tries = [(f,) for f in may] + ([tuple(may)] if len(may) > 1 else [])
    found = [(fields, n) for fields in tries if (n := matches(ignored | frozenset(fields)))]
    if len(may) > 1 and any(len(fields) == 1 for fields, _ in found):  # one alone does: not all of them
        found = [(fields, n) for fields, n in found if len(fields) == 1]
    head = (f"no point of A matches a point of B: {'every point differs' if len(differ) == 1 else 'they differ'} in "
            + ", ".join(said(f) for f in differ))
    if found:
        ignore = ", ".join(f"`compare --ignore {','.join(fields)}` matches {count_of(n, 'point')}"
                           for fields, n in found)
        return f"{head}; {ignore}", any(set(fields) <= MEASURED_UNDER for fields, _ in found)
    return (f"{head}; leaving out what `compare --ignore` may matches no point" if may else head), False


def _few(values: Sequence[str], most: int = 3) -> str:
    """At most `most` values, joined, with how many more there are."""
    return ", ".join(values[:most]) + (f" and {len(values) - most} more" if len(values) > most else "")


@dataclass(frozen=True, slots=True)
class _Served:
    """One thing a result reads back of what served or measured it: `of` its values for a result, () where the result
    does not record it (`recordable`: where one could, and where a missing one is named; a server on the host has no
    image to have a digest of); `how` where it was read, said after a difference; `tag`: what an image tag names (a
    moving tag, a nightly or `latest`, serves other builds under one image name, which the point identity holds), so
    a difference under one tag says so; `by_values`: compared by the values each side read, a result that records
    none hiding nothing (else only where every result of both sides records it); `unread`: how a missing one is named
    after its name (`B's engine build as its server reported it`); `rerun`: what to do about a difference, given A's
    values (`rerun B where 4.57.0 is installed`), said after `how`."""

    name: str
    of: Callable[[ResultPoint], tuple[str, ...]]
    how: str = ""
    tag: bool = False
    by_values: bool = False
    unread: str = ""
    recordable: Callable[[ResultPoint], bool] = lambda p: True
    rerun: Callable[[Sequence[str]], str] | None = None


def _gpu_state(p: ResultPoint) -> list[GpuState]:
    """The server's GPUs as the driver said them when it was ready (`Hardware.gpu_state`); [] where none was read."""
    hardware = p.summary.provenance.hardware if p.summary is not None else None
    return list(hardware.gpu_state or ()) if isinstance(hardware, Hardware) else []


def _max_clocks(p: ResultPoint) -> tuple[str, ...]:
    """The GPUs' maximum SM clocks (GFX on AMD, said so), one per distinct value (`1980 MHz`, `2100 MHz GFX`); ()
    where none was read. The clock when the server was ready is a moment's reading of an idle GPU, not a setting: not
    compared."""
    return tuple(sorted({f"{g.sm_clock_max_mhz:g} MHz" + (" GFX" if g.clock_domain == "gfx" else "")
                         for g in _gpu_state(p) if g.sm_clock_max_mhz is not None}))


def _client_version(p: ResultPoint) -> tuple[str, ...]:
    """The llmsweep release whose client measured the result (`Provenance.client_version`); () where not recorded
    (an imported row)."""
    version = p.summary.provenance.client_version if p.summary is not None else None
    return (version,) if version else ()


def _installed_engine(p: ResultPoint) -> tuple[str, ...]:
    """The engine version the python that ran the server had installed (`Launch.engine_version_installed`, read on the
    host), for a result whose server reported none (`ResultPoint.engine_build` "": `transformers serve`); () where the
    server reported one (that is compared) or nothing was read."""
    launch = p.summary.provenance.launch if p.summary is not None else None
    installed = launch.engine_version_installed if launch is not None else None
    return (installed,) if installed and not p.engine_build else ()


def _power_backend(p: ResultPoint) -> tuple[str, ...]:
    """The sampler backend that read the GPUs' power of a result with power figures (`PowerBlock.backend`: `nvml`,
    `nvidia-smi`, `amd-smi`, `dcgm`, the simulator's `sim`); () for a result without power figures."""
    power = p.summary.power if p.summary is not None else None
    if power is None or not power.backend or all(p.metric(m) is None for m in SAMPLED_METRICS):
        return ()
    return (power.backend,)


def _rerun_power_backend(a: Sequence[str]) -> str:
    """What to do about another power backend: B rerun with A's, where `run` offers it."""
    from llmsweep.power.sampler import RUN_BACKEND_CHOICES

    return f"rerun B with {_POWER_BACKEND} {a[0]}" if len(a) == 1 and a[0] in RUN_BACKEND_CHOICES \
        else "rerun B with A's backend"


def _rerun_power_limit(a: Sequence[str]) -> str:
    """What to do about another GPU power limit: B's GPUs set to A's (`700 W`; each driver's own tool), or B rerun on
    A's GPUs."""
    watts = a[0].removesuffix(" W") if len(a) == 1 else "WATTS"
    return (f"set B's GPUs to A's power limit, `nvidia-smi -pl {watts}` or `amd-smi set --power-cap {watts}`, or "
            "rerun B on A's GPUs")


_SERVED: tuple[_Served, ...] = (
    _Served("engine build", lambda p: (p.engine_build,) if p.engine_build else (), "as the servers reported it",
            tag=True, by_values=True, unread="as its server reported it",
            recordable=lambda p: not _installed_engine(p),
            rerun=lambda a: f"rerun B on A's engine build {', '.join(a)}: an image pinned by its @sha256 digest, not "
                            "a moving tag, or that version installed"),
    _Served("installed engine version", _installed_engine,
            "the engine package the python that ran each server had installed; the servers report no version",
            by_values=True, recordable=lambda p: False,
            rerun=lambda a: f"rerun B where {', '.join(a)} is installed"),
    _Served("image digest", lambda p: (p.image_digest_short,) if p.image_digest else (),
            "the registry's build of the tag", tag=True, by_values=True, recordable=lambda p: bool(p.served_image),
            rerun=lambda a: "rerun B with its image pinned to A's digest, `IMAGE@sha256:…`"),
    _Served("simulator build", lambda p: (p.simulator_build,) if p.simulator_build else (),
            "its code and catalogs, as each simulated result records them", by_values=True,
            recordable=lambda p: False, rerun=lambda a: "run or predict B again on A's llmsweep checkout, or A on B's"),
    _Served("GPU power limit", lambda p: tuple(f"{w:g} W" for w in p.power_limits_w or ()), rerun=_rerun_power_limit),
    _Served("power backend", _power_backend,
            "the sampler that read the GPUs' power: nvml, dcgm and amd-smi read it beside an energy counter, "
            "nvidia-smi samples power.draw without one, sim is the simulator's model",
            by_values=True, recordable=lambda p: False, rerun=_rerun_power_backend),
    _Served("GPU max clock", _max_clocks, "the driver's maximum SM clock, GFX on AMD",
            recordable=lambda p: any(g.sm_clock_mhz is not None for g in _gpu_state(p)),
            rerun=lambda a: f"rerun B on A's GPUs, or on GPUs whose maximum clock is {', '.join(a)}: another model "
                            "or board firmware sets another"),
    _Served("client version", _client_version,
            "the llmsweep release that produced it: measured, or predicted in virtual time",
            recordable=lambda p: p.summary is not None,
            rerun=lambda a: f"rerun B with llmsweep {', '.join(a)}, A's release, or A with B's"),
)
"""What served or measured a result, as it reads it back (`ResultPoint.engine_build`, `image_digest`,
`simulator_build`, `power_limits_w`, the GPUs' maximum clocks and the client's release from its summary's typed
provenance, the engine version installed where its server reported none and the power sampler's backend): `served_apart`
compares it where both sides record it, `_unrecorded` names where a measured side does not (a simulator build never: a
measured result has none; a maximum clock only where the GPUs' clocks were read; an engine build not where the
installed version stands for it; an installed version and a power backend never: a server that reports its version has
none compared, a result without power figures no backend). The measurement definitions are read from each result's
run record, not its summary (`_measurement`)."""


_MEASUREMENT_HOW = ("llmsweep's measurement definitions, `metrics.version` and the metric table's digest, as each "
                    "result's run.json records them")


def _measurement(measurements: Mapping[str, str]) -> _Served:
    """The measurement definitions a result was measured under (`changes.reuse.recorded_measurement`, by result id:
    `measurements`), as one more `_Served`: compared by the values each side read; a result whose run records none
    ("") is named as not recorded, one not in `measurements` was not read and is not."""
    return _Served("measurement version", lambda p: (m,) if (m := measurements.get(p.result_id)) else (),
                   _MEASUREMENT_HOW, by_values=True, unread="as its run.json records it",
                   recordable=lambda p: p.result_id in measurements,
                   rerun=lambda a: "rerun B with A's llmsweep release, or A with B's, to compare one measurement")


def served_apart(a: Sequence[ResultPoint], b: Sequence[ResultPoint],
                 measurements: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """What served or measured A's results of a point and B's differently: the engine build its server reported, the
    image's registry digest and, for a simulated result, the simulator's build, where each side holds a result that
    records it (what a tag names, compared by the values read: a result of A's release that read no digest, counted
    as of A's build by `results.point.configuration_keys`, does not hide that B's build is another); the GPUs'
    enforced power limit and maximum clock, and the release of the client that measured it, where every result of
    both sides records it; where no server reported its engine version, the version its python had installed; the
    backend that sampled the GPUs' power of results with power figures; and the measurement definitions each result's
    run records (`measurements`, by result id: `compare_points`'), by the values each side read. A side that does not
    record one tells nothing of it (`_unrecorded` says so); "under one image tag" where the point identity's image is
    the same (it is, unless `--ignore image`). What to do follows each difference (`rerun`)."""
    tag = ", under one image tag" if len({p.identity.image for p in (*a, *b)}) == 1 else ""
    said = []
    for served in (*_SERVED, _measurement(measurements or {})):
        va, vb = {served.of(p) for p in a}, {served.of(p) for p in b}
        if served.by_values:
            va, vb = va - {()}, vb - {()}
        if va and vb and () not in va | vb and va != vb:
            values = [sorted({v for read in side for v in read}) for side in (va, vb)]
            words = [", ".join(side) for side in values]
            how = "; ".join(filter(None, (served.how, served.rerun(values[0]) if served.rerun else "")))
            said.append(f"{served.name} {words[0]} vs {words[1]}" + (f" ({how})" if how else "")
                        + (tag if served.tag else ""))
    return tuple(said)


def _prices(points: Sequence[ResultPoint]) -> dict[float | None, str]:
    """The assumed prices of a GPU-hour the points' cost figures (`ASSUMED_METRICS`) were figured at, each with how it
    is said (`PowerCost.price_words`); None for a figure whose price is not recorded. Points without a cost figure
    are left out."""
    out: dict[float | None, str] = {}
    for p in points:
        if all(p.metric(m) is None for m in ASSUMED_METRICS):
            continue
        cost = p.cost
        if cost is None or cost.usd_per_gpu_hour is None:
            out.setdefault(None, "a price it does not record")
        else:
            out.setdefault(cost.usd_per_gpu_hour, cost.price_words())
    return out


def priced_apart(a: Sequence[ResultPoint], b: Sequence[ResultPoint]) -> str:
    """The assumed prices of a GPU-hour A's and B's cost figures were figured at, in words, where the sides are not
    priced alike (`A at $1.00/GPU-h for mi300x (our contract, 2026-12-07), B at $2.20/GPU-h for mi300x (…)`); "" where
    every result of both with a cost figure records one and the same price, or a side has no cost figure.

    A price is an assumption (the catalog's `power.yaml`, or the user's), not a measurement: the cost per million
    tokens moves with it whatever ran, so a cost figure priced otherwise calls no regression or improvement. Priced
    alike, the cost is that price over the output throughput per GPU, and is judged as that throughput is: its change
    is what the throughput's change costs at the one price both sides assumed."""
    prices_a, prices_b = _prices(a), _prices(b)
    if not prices_a or not prices_b:
        return ""
    if None not in prices_a and len(prices_a) == 1 and prices_a.keys() == prices_b.keys():
        return ""
    return f"A at {' and '.join(prices_a.values())}, B at {' and '.join(prices_b.values())}"


def _priced_apart_notes(matched: Sequence[PointComparison]) -> list[str]:
    """Why cost figures were not judged (`PointComparison.priced_apart`), said once per pair of prices."""
    by_prices: dict[str, list[PointComparison]] = {}
    for m in matched:
        if m.priced_apart:
            by_prices.setdefault(m.priced_apart, []).append(m)
    notes = []
    for prices, points in by_prices.items():
        figures = list(dict.fromkeys(d.metric for m in points for d in m.deltas if d.metric in ASSUMED_METRICS))
        where = count_of(len(points), "compared point")
        notes.append(f"the assumed price of a GPU-hour differs at {where}, {prices}: {', '.join(figures)} "
                     f"{noun(len(figures), 'is', 'are')} not judged there (n/a) — a price is an assumption, not a "
                     "measurement, and the cost moves with it whatever ran; the throughput figures say what changed "
                     "(to compare costs, price both sides alike: the catalog's power.yaml, or yours under "
                     "$LLMSWEEP_CATALOG_DIR)")
    return notes


def _build_unknown_note(m: PointComparison) -> str:
    """The results of a compared point that recorded their engine version but no image digest in an image whose tag
    does not move, counted as of the digest the other results of their release on that side read
    (`results.point.configuration_keys`), in words; "" where there are none. A's history is A's side."""
    said = []
    for side, points in (("A", [*m.a, *m.past]), ("B", list(m.b))):
        unknown = build_unknown(points)
        if not unknown:
            continue
        digests = sorted({p.image_digest_short for p in points if p.image_digest})
        names = ", ".join(f"{p.run_id}/{p.job_id}" for p in unknown)
        versions = ", ".join(sorted({p.engine_build for p in unknown}))
        images = ", ".join(sorted({p.served_image for p in unknown}))
        said.append(f"{side}'s {names} recorded engine {versions} without an image digest, in {images} (a "
                    f"reference that names one release, not a moving tag): counted as the same release as {side}'s "
                    f"{noun(sum(1 for p in points if p.image_digest), 'result')} of "
                    f"{noun(len(digests), 'image digest')} "
                    f"{', '.join(digests)}, the build that served it unknown (not another "
                    "configuration)")
    return f"{m.label}: " + "; ".join(said) if said else ""


def apart_words(apart: Sequence[str]) -> str:
    """`not the same configuration: engine build 0.5.16 vs 0.5.17 (...)`: what `served_apart` found, in words."""
    return "not the same configuration: " + "; ".join(apart)


def _unrecorded(matched: Sequence[PointComparison], measurements: Mapping[str, str]) -> list[str]:
    """What the measured results of compared points do not record of what served or measured them (`served_apart`
    checks only what both sides record; `measurements`: its), by side: `B's engine build as its server reported it
    (2 of 2 points)`."""
    said = []
    throughput = [m for m in matched if m.deltas]
    for side in ("a", "b"):
        for served in (*_SERVED, _measurement(measurements)):
            points = [m for m in throughput if any(p.source == MEASURED and served.recordable(p) and not served.of(p)
                                                   for p in (m.a if side == "a" else m.b))]
            if points:
                said.append(f"{side.upper()}'s {' '.join(filter(None, (served.name, served.unread)))} "
                            f"({len(points)} of {count_of(len(throughput), 'point')})")
    return said


def clock_words(clocks: Iterable[str]) -> str:
    """`virtual time`, `wall-clock time`, `virtual time and wall-clock time`: the clocks results ran on, in words."""
    return " and ".join(CLOCK_WORDS.get(c, f"{c} time") for c in clocks)


def _clocks(points: Sequence[ResultPoint]) -> tuple[str, ...]:
    return tuple(sorted({p.clock for p in points if p.clock}))


def _clocks_differ(a: Sequence[ResultPoint], b: Sequence[ResultPoint]) -> bool:
    """A's and B's results record clocks, and not the same ones (`PointComparison.clocks_differ`)."""
    ca, cb = _clocks(a), _clocks(b)
    return bool(ca) and bool(cb) and ca != cb


def _mixed_configurations(pa: Sequence[ResultPoint], pb: Sequence[ResultPoint]) -> str:
    """Why a matched point is not compared when a side holds results of more than one configuration of it
    (`ResultPoint.configuration`: e.g. one recipe key at MTP K=3 and another at K=1, both at conc 8): they are not
    repeats of one measurement, and pooled their mean would be neither configuration's and the gap between them
    would pass for run-to-run noise. "" when each side holds one configuration. What tells them apart is named as a
    frontier names the series it splits them into (`telling_apart`)."""
    said = []
    for side, points in (("A", pa), ("B", pb)):
        groups = list(configurations(points).values())
        if len(groups) > 1:
            facet = telling_apart(groups)
            named = f"{facet.plural} {', '.join(facet.of(g[0]) for g in groups)}" if facet is not None \
                else f"jobs {', '.join(g[0].job_id for g in groups)}"
            said.append(f"{side} holds {len(groups)} configurations of this point ({named})")
    if not said:
        return ""
    return " and ".join(said) + ": not repeats of one measurement, so not pooled and not compared"


def sample_key(point: ResultPoint) -> tuple[str, str] | None:
    """What decides a virtual-time result: its configuration (the simulator's build among it:
    `ResultPoint.simulator_build`) and the seed its workload sampled with — the one its provenance's workload records,
    else the run's seed with the job's id (which names the sample the job drew, `workload.scenario.sample_name`). The
    simulator's core in virtual time is deterministic, so two results with
    one key are the same numbers: one sample of run-to-run variance, not two. None for a wall-clock result (every
    run is a sample of its own) or one that records no configuration."""
    configuration = point.configuration
    if point.clock != "virtual" or not configuration:
        return None
    workload = point.provenance.get("workload")
    seed = workload.get("seed") if isinstance(workload, Mapping) else None
    return configuration, (f"workload-seed={seed}" if seed is not None
                           else f"seed={point.provenance.get('seed')}|job={point.job_id}")


def _once(points: Sequence[ResultPoint], twice: set[str], seen: Iterable[str] = ()) -> list[ResultPoint]:
    """`points` with each result once (by result id; those already in `seen` left out), in order; the ids met again
    are added to `twice`."""
    known = set(seen)
    out = []
    for p in points:
        if p.result_id in known:
            twice.add(p.result_id)
            continue
        known.add(p.result_id)
        out.append(p)
    return out


def distinct_samples(points: Sequence[ResultPoint]) -> list[ResultPoint]:
    """`points` with each virtual-time sample once (`sample_key`: its first result kept), in order."""
    seen: set[tuple[str, str]] = set()
    out = []
    for p in points:
        key = sample_key(p)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        out.append(p)
    return out


def _repeats_of(side: Sequence[ResultPoint], candidates: Sequence[ResultPoint], sources: set[str], mix_sources: bool,
                flag: str, notes: list[str]) -> list[ResultPoint]:
    """The results of `--repeats-from` (or `--b-repeats-from`) that repeat the side's point: of its source (unless
    sources are mixed) and of its configuration; a note names those of another configuration, left out."""
    usable = [p for p in candidates if mix_sources or p.source in sources]
    keys = configuration_keys([*side, *usable])  # one configuration per side (`_mixed_configurations`)
    configs, theirs = set(keys[:len(side)]), keys[len(side):]
    other = [p for p, key in zip(usable, theirs, strict=True) if key not in configs]
    if other:
        notes.append(f"{side[0].identity.series_label()} · conc {side[0].identity.conc}: "
                     f"{count_of(len(other), 'result')} of "
                     f"{flag} ({', '.join(f'{p.run_id}/{p.job_id}' for p in other)}) ran another configuration than "
                     f"{side[0].run_id}'s: not pooled as its repeats")
    return [p for p, key in zip(usable, theirs, strict=True) if key in configs]


def same_configuration(side_a: Sequence[ResultPoint], history: Iterable[ResultPoint]) -> list[ResultPoint]:
    """The history results that are repeats of A's point: valid, and of the configuration one of A's results ran
    (`ResultPoint.configuration`: recipe and launch fingerprints, source, clock, and the measurement — window,
    request and warm-up counts, resolved workload). An earlier run of another configuration of the same point — the
    pull request's own engine args, or the same recipe with a 900 s window instead of 1,800 s — measured something
    else: pooled into A's variance it would widen the band until any change reads as noise. A result that records no
    launch, or no client options, joins no history. One that read its engine version but no image digest is of
    A's build where A's results of its release read one digest (`results.point.configuration_keys`)."""
    valid = [p for p in history if p.verdict == "valid"]
    keys = configuration_keys([*side_a, *valid])  # a result of A's release without a digest: of A's build, unknown
    configs = {c for c in keys[:len(side_a)] if c}
    return [p for p, key in zip(valid, keys[len(side_a):], strict=True) if key in configs]


_EVAL_ONLY = "|eval-only"
"""The suffix of an eval-only result's matching key: it matches eval-only results only in the throughput pairing
(it has no throughput), and any eval of its point identity in the eval pairing (`_cross_kind_evals`)."""


def _cross_kind_evals(side_a: Mapping[str, list[ResultPoint]], side_b: Mapping[str, list[ResultPoint]],
                      matched: list[PointComparison], skipped: list[Skipped], mix_sources: bool) -> set[str]:
    """Pair the evals the throughput pairing left uncompared: at one point identity, a `run-eval` job's eval on one
    side and an `eval-only` job's on the other (same model, hardware, engine, precision, image, parallelism, spec,
    ISL/OSL, concurrency...: the same accuracy measurement). The eval is put on the point's matched comparison when
    that has none (A's run-eval point matched B's throughput-only point), else on a comparison of its own, without
    throughput deltas. Sources that differ are refused as the throughput pairing refuses them (`skipped`). Returns
    the result ids now compared or refused, which are no longer "only in" a side."""
    done = {p.result_id for m in matched if m.eval is not None for p in (*m.a, *m.b)}
    done |= {s.point.result_id for s in skipped}
    by_key = {m.key: i for i, m in enumerate(matched)}
    paired: set[str] = set()
    bases = dict.fromkeys(k.removesuffix(_EVAL_ONLY) for k in (*side_a, *side_b))
    for base in bases:
        ea, eb = ([p for k in (base, base + _EVAL_ONLY) for p in side.get(k, [])
                   if p.eval is not None and p.result_id not in done] for side in (side_a, side_b))
        if not ea or not eb:
            continue
        sources = {p.source for p in ea + eb}
        if len(sources) > 1 and not mix_sources:
            skipped.extend(Skipped(p, f"sources differ ({', '.join(sorted(sources))}); pass {_MIX_SOURCES} to compare")
                           for p in ea + eb)
            paired |= {p.result_id for p in ea + eb}
            continue
        delta = _eval_delta(ea, eb)
        at = by_key.get(base)
        if at is not None and matched[at].eval is None:
            matched[at] = replace(matched[at], eval=delta)
        else:
            matched.append(PointComparison(base + "|eval", tuple(ea), tuple(eb), (), (), delta))
        paired |= {p.result_id for p in ea + eb}
    return paired


def _modes(points: Sequence[ResultPoint]) -> str:
    """The kinds of job that ran these points' evals (`run-eval`, `eval-only`, or both joined by `+`)."""
    return "+".join(sorted({e.mode for p in points if (e := p.eval) is not None}))


EVAL_SETTINGS = (("dataset", "dataset"), ("limit", "limit"), ("few-shot", "num_fewshot"),
                 ("context", "context_length"), ("max tokens", "max_tokens"))
"""What an eval scores besides its task (`EvalBlock`'s fields, in words): two evals whose settings differ are not
compared."""


def _eval_delta(runs_a: list[ResultPoint], runs_b: list[ResultPoint]) -> EvalDelta | None:
    """The eval comparison of a matched point, when both sides ran one (None otherwise)."""
    ea = [e for p in runs_a if (e := p.eval) is not None]
    eb = [e for p in runs_b if (e := p.eval) is not None]
    if not ea or not eb:
        return None
    verdict_a, verdict_b = _eval_verdict(ea), _eval_verdict(eb)
    modes = _modes(runs_a), _modes(runs_b)
    va, vb = finite_mean(e.score for e in ea), finite_mean(e.score for e in eb)
    if ea[0].task != eb[0].task:
        return EvalDelta(f"{ea[0].task} vs {eb[0].task}", va, vb, None, None, "n/a", verdict_a, verdict_b, *modes,
                         runs_a=len(ea), runs_b=len(eb))
    differs = "; ".join(f"{what} {x} vs {y}" for what, field in EVAL_SETTINGS
                        if (x := getattr(ea[0], field)) != (y := getattr(eb[0], field)))
    if differs:  # other samples, another budget: not one measurement's noise, whatever the scores say
        return EvalDelta(ea[0].task, va, vb, None, None, "n/a", verdict_a, verdict_b, *modes, differs=differs,
                         runs_a=len(ea), runs_b=len(eb))
    delta = vb - va if va is not None and vb is not None else None
    se_a, se_b = mean_score_stderr(ea), mean_score_stderr(eb)
    band = EVAL_Z * math.sqrt(se_a ** 2 + se_b ** 2) if se_a is not None and se_b is not None else None
    verdict: Verdict
    if delta is None:
        verdict = "n/a"
    elif band is None:
        verdict = "unverified"
    elif abs(delta) <= band:
        verdict = "within noise"
    else:
        verdict = "improvement" if delta > 0 else "regression"  # a higher score is better
    return EvalDelta(ea[0].task, va, vb, delta, band, verdict, verdict_a, verdict_b, *modes, runs_a=len(ea),
                     runs_b=len(eb))


def _eval_verdict(evals: Sequence[EvalBlock]) -> str:
    """A side's eval verdict beside its score, the mean of its evals (one per repeat): `valid` only where every one
    is, as one eval is valid only where every run of it reached its thresholds (`EvalBlock.verdict`); `invalid` where
    any missed them; else `smoke` (it passed on too few samples to stand: `--eval-limit`, or a local file's score
    within its error of the threshold)."""
    if all(e.verdict == "valid" for e in evals):
        return "valid"
    return "invalid" if any(e.verdict == "invalid" for e in evals) else "smoke"


def mean_score_stderr(evals: Sequence[EvalBlock]) -> float | None:
    """The standard error of a side's score, the mean of its evals (one per repeat of the point, `run --repeats N`);
    None where an eval has no score or stderr.

    One eval's stderr (lm-eval's: the sd of the per-question scores over √questions) holds two parts: which questions
    the task's sample holds, and the answers one run happened to give. Repeats score the *same* questions (lm-eval's
    first `limit` samples, its fixed few-shot seed, temperature 0), so averaging them does not shrink the first part:
    the mean is not known to se/√N. Their spread s (sample sd of the N scores) estimates the second part, which the
    mean does average down. So var(mean) = mean(se²) − (1 − 1/N)·s², and never less than s²/N — what the spread
    alone says of a mean of N (repeats that scatter beyond their stderr: then the spread is the noise). One eval: its
    own stderr, as before."""
    scores = [e.score for e in evals]
    errors = [e.score_stderr for e in evals]
    if not evals or any(x is None or not math.isfinite(x) for x in (*scores, *errors)):
        return None
    n = len(evals)
    mean_var = sum(se * se for se in errors if se is not None) / n
    if n == 1:
        return math.sqrt(mean_var)
    spread_var = statistics.variance(x for x in scores if x is not None)
    return math.sqrt(max(mean_var - (1 - 1 / n) * spread_var, spread_var / n))


def _metric_delta(metric: str, runs_a: list[ResultPoint], runs_b: list[ResultPoint], past: list[ResultPoint],
                  cache: _SampleCache, *, same_inputs: bool = False, priced_apart: bool = False) -> MetricDelta:
    """A metric of a matched point: each side's mean, their delta, its band and verdict. `same_inputs`: the sides ran
    the same inputs (`PointComparison.same_inputs`): no band, and `same inputs` where the figures agree as identical
    inputs make them; a delta they do not explain calls nothing (`unverified`, and a note names it). `priced_apart`:
    the sides' cost figures were figured at other assumed prices (`priced_apart`): such a figure (`ASSUMED_METRICS`)
    is `n/a`, its delta the price's; priced alike, its band leaves out earlier results priced otherwise."""
    values_a, values_b = _run_values(runs_a, metric), _run_values(runs_b, metric)
    # a side's mean is of every run behind it: an imported row that is the mean of N repeats counts N
    va, vb = runs_mean(values_a), runs_mean(values_b)
    delta = vb - va if va is not None and vb is not None else None
    rel = delta / abs(va) if delta is not None and va else None
    if metric in ASSUMED_METRICS:
        if priced_apart:
            return MetricDelta(metric, va, vb, delta, rel, None, "n/a")
        past = [p for p in past if _prices([p]).keys() <= _prices(runs_a).keys()]
    if same_inputs:
        verdict: Verdict = "n/a" if delta is None else "same inputs" if delta == 0 else "unverified"
        return MetricDelta(metric, va, vb, delta, rel, None, verdict)
    # one run's request-sampling spread per side, scaled to the means compared: of runs_count(values) runs each
    within = within_run_band(_sd(runs_a[0], metric, cache), _sd(runs_b[0], metric, cache), runs_count(values_a),
                             runs_count(values_b))
    between = between_run_band(values_a, values_b, _run_values(past, metric), within)
    band = between or within
    return MetricDelta(metric, va, vb, delta, rel, band, _verdict(metric, delta, band))


def _same_inputs(a: Sequence[ResultPoint], b: Sequence[ResultPoint], inputs: Mapping[str, str]) -> bool:
    """Whether A's and B's results of a point all ran in virtual time under reuse keys that are the same on both sides
    (`PointComparison.same_inputs`); False where any result records no key or ran in wall-clock time (the live path's
    timing is its own on every run), and where A and B are the same results (a run against itself, said apart)."""
    both = (*a, *b)
    if not a or not b or any(p.clock != "virtual" or not inputs.get(p.result_id) for p in both):
        return False
    if {p.result_id for p in a} == {p.result_id for p in b}:  # a run against itself: said as the same results
        return False
    return {inputs[p.result_id] for p in a} == {inputs[p.result_id] for p in b}


def _run_values(points: Sequence[ResultPoint], metric: str) -> list[RunValue]:
    """Each result's value of `metric` as a sample of run-to-run variance: one run's, or the mean of N runs with
    their spread (`repeats.mean_of`: an imported row of a point measured N times)."""
    out = []
    for p in points:
        value = p.metric(metric)
        if value is not None:
            n, spread = mean_of(p)
            out.append(RunValue(value, n, spread.get(metric)))
    return out


def _sd(point: ResultPoint, metric: str, cache: _SampleCache) -> float:
    samples = cache.get(point)
    if samples is None:
        return float("nan")
    if metric == "error_ratio":
        return error_ratio_sd(samples)
    return bootstrap_sd(samples, metric, point.gpus)
