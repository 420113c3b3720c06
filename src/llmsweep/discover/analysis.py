"""The pure part of discovery: run-to-run noise, the knee, where to refine, and the proposed grid.

Every figure comes from runs: noise is the pooled spread of repeats of the same point (relative to the point's mean,
so one figure covers the arm's whole ladder); a step "separates" two points when the metric moves by more than two
single runs of the same point would by chance (at 95 %, with the noise of each concurrency: it depends on load);
the knee is the last concurrency whose throughput
per GPU still rises beyond noise over the point before it; the KV/HBM cliff is the first concurrency at which the
server reports its KV cache full or preempts requests (what the flattening is made of, on a real engine or the
simulator alike).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llmsweep.discover.model import CurvePoint, GridPoint, Knee, MetricNoise, Run
from llmsweep.metrics.registry import HOT_BY_NAME
from llmsweep.results.bands import t975
from llmsweep.results.frontier import Y_METRIC
from llmsweep.results.pareto import NORTH_STAR_X
from llmsweep.words import count_of

THROUGHPUT = Y_METRIC
"""The frontier's y: throughput per GPU (its flattening is the knee)."""
INTERACTIVITY = NORTH_STAR_X
"""The frontier's canonical x: P90 E2E-normalised interactivity."""
SEPARATION_METRICS: tuple[str, ...] = (THROUGHPUT, INTERACTIVITY)
"""Adjacent grid points must differ beyond noise in at least one of the frontier's two coordinates."""
NOISE_METRICS: tuple[str, ...] = (THROUGHPUT, INTERACTIVITY, "p50_intvty", "p90_ttft")
"""Metrics whose run-to-run noise the evidence reports."""
KV_SATURATED = 0.95
"""Peak KV-cache usage at or above which the server is at its KV/HBM cliff."""


def ladder(start: int, top: int) -> list[int]:
    """The coarse ladder: `start`, then the powers of two above it, up to and including `top`."""
    if start < 1 or top < start:
        raise ValueError(f"a ladder needs 1 <= start <= top (got {start}..{top})")
    out = [start]
    c = 1
    while c <= top:
        if c > start:
            out.append(c)
        c *= 2
    if out[-1] != top:
        out.append(top)
    return out


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def noise(runs: Sequence[Run], metric: str) -> MetricNoise:
    """Coefficient of variation of `metric` between repeats (same concurrency): per concurrency, and pooled."""
    groups: dict[int, list[float]] = {}
    for r in runs:
        v = r.metrics.get(metric)
        if _finite(v):
            groups.setdefault(r.conc, []).append(float(v))  # type: ignore[arg-type]
    ss, dof = 0.0, 0
    by_conc: dict[int, float] = {}
    for conc in sorted(groups):
        values = groups[conc]
        mean = sum(values) / len(values)
        if len(values) < 2 or mean == 0:
            continue
        dev = sum((v / mean - 1.0) ** 2 for v in values)
        by_conc[conc] = math.sqrt(dev / (len(values) - 1))
        ss += dev
        dof += len(values) - 1
    concs = sorted(by_conc)
    smoothed = {c: math.sqrt(sum(by_conc[n] ** 2 for n in concs[max(0, i - 1):i + 2]) / len(concs[max(0, i - 1):i + 2]))
                for i, c in enumerate(concs)}
    return MetricNoise(metric=metric, label=HOT_BY_NAME[metric].label, cv=math.sqrt(ss / dof) if dof else None,
                       dof=dof, by_conc=by_conc, smoothed=smoothed, t=t975(dof) if dof else None)


def identical_repeats(noise_by: Mapping[str, MetricNoise]) -> str | None:
    """Why run-to-run noise was not measured although points were repeated (None when it was): a frontier coordinate
    whose repeats gave the very same figure at every repeated concurrency. Runs that do not vary are no sample of
    noise; a zero band would call every difference real, and space the grid at every concurrency."""
    flat = [n.label for m in SEPARATION_METRICS if (n := noise_by.get(m)) is not None
            and n.dof > 0 and n.by_conc and all(cv == 0 for cv in n.by_conc.values())]
    if not flat:
        return None
    return (f"every repeat measured the same {' and '.join(flat)} as the others at its concurrency: the runs did not "
            "vary (the workload seed changes nothing this arm's server sees, as a Mooncake replay's rows on the "
            "simulator in virtual time), so no run-to-run noise was measured to space a grid by")


def cv_at(n: MetricNoise, conc: int) -> float | None:
    """The metric's run-to-run coefficient of variation at `conc`: the smoothed figure of the repeats there (pooled
    with the neighbouring repeated concurrencies), else interpolated in log concurrency between the nearest repeated
    ones (held flat beyond the ends)."""
    if not n.smoothed:
        return n.cv
    xs = sorted(n.smoothed)
    return float(np.interp(math.log(conc), [math.log(c) for c in xs], [n.smoothed[c] for c in xs]))


def separation(n: MetricNoise, a: int, b: int, runs_a: int = 1, runs_b: int = 1) -> float:
    """Relative difference between the means of `runs_a` runs at conc a and `runs_b` runs at conc b that noise alone
    stays under 95 % of the time (0 when the noise is unknown)."""
    ca, cb = cv_at(n, a), cv_at(n, b)
    if ca is None or cb is None or n.t is None:
        return 0.0
    return n.t * math.sqrt(ca * ca / runs_a + cb * cb / runs_b)


def band_words(band: float, runs_a: int = 1, runs_b: int = 1) -> str:
    """A noise band as an explanation prints it, naming whose noise it is: `noise ±75.3% between single runs` (the
    proposed grid's, each point a single run of the official sweep) or `noise ±53.3% between means of 2 runs each`
    (the knee's, which judges the measured means): the two differ by √runs, and a figure printed without saying which
    it is read as a rise inside the band that called it beyond noise."""
    if runs_a == runs_b:
        whose = "single runs" if runs_a == 1 else f"means of {runs_a} runs each"
    else:
        whose = " and ".join("a single run" if n == 1 else f"the mean of {count_of(n, 'run')}"
                             for n in (runs_a, runs_b))
    return f"noise ±{band:.1%} between {whose}"


@dataclass(frozen=True)
class Move:
    """A metric's relative move from one concurrency to another beside the noise band it is judged against
    (:func:`separation` of the means of `runs_a` and `runs_b` runs): the one home of the figures a verdict rests on
    and of the words that explain it, so every explanation — the grid's table, the knee line, `--json` — prints the
    band its verdict used."""

    label: str
    rel: float
    band: float
    runs_a: int = 1
    runs_b: int = 1

    @property
    def rises(self) -> bool:
        """The metric rose beyond noise."""
        return self.rel > self.band

    @property
    def beyond(self) -> bool:
        """The metric moved, either way, beyond noise."""
        return abs(self.rel) > self.band

    def describe(self) -> str:
        """`Throughput per GPU +74.8% (noise ±53.3% between means of 2 runs each)`."""
        return f"{self.label} {self.rel:+.1%} ({band_words(self.band, self.runs_a, self.runs_b)})"


def move(n: MetricNoise, va: float, vb: float, a: int, b: int, runs_a: int = 1, runs_b: int = 1) -> Move:
    """How far the metric of `n` moves from `va` at conc a to `vb` at conc b, against the noise of the means of
    `runs_a` and `runs_b` runs (single runs by default)."""
    return Move(label=n.label, rel=(vb - va) / va if va else 0.0, band=separation(n, a, b, runs_a, runs_b),
                runs_a=runs_a, runs_b=runs_b)


def curve(runs: Sequence[Run]) -> list[CurvePoint]:
    """Means per concurrency, ascending; KV usage and preemptions are the worst run's."""
    by_conc: dict[int, list[Run]] = {}
    for r in runs:
        by_conc.setdefault(r.conc, []).append(r)
    out = []
    for conc in sorted(by_conc):
        group = by_conc[conc]
        means: dict[str, float | None] = {}
        for name in {k for r in group for k in r.metrics}:
            vals = [float(v) for r in group if _finite(v := r.metrics.get(name))]  # type: ignore[arg-type]
            means[name] = sum(vals) / len(vals) if vals else None
        kv = [r.kv_usage_max for r in group if _finite(r.kv_usage_max)]
        pre = [r.preemptions for r in group if _finite(r.preemptions)]
        out.append(CurvePoint(conc=conc, runs=len(group), means=dict(sorted(means.items())),
                              kv_usage_max=max(kv) if kv else None,  # type: ignore[type-var]
                              preemptions=max(pre) if pre else None))  # type: ignore[type-var]
    return out


def saturated(point: CurvePoint) -> str | None:
    """Why the server was at its KV/HBM cliff at this point (None when it was not)."""
    why = []
    if point.kv_usage_max is not None and point.kv_usage_max >= KV_SATURATED:
        why.append(f"KV cache peaks at {point.kv_usage_max:.0%}")
    if point.preemptions:
        why.append(count_of(round(point.preemptions), "preemption"))
    return " and ".join(why) or None


def collapse(a: CurvePoint, b: CurvePoint, tput: MetricNoise, intvty: MetricNoise) -> str | None:
    """Why going from a to b falls off the KV/HBM cliff (None when it does not): the server saturates at b and
    interactivity falls by more than throughput per GPU gains, beyond the noise of both (their product drops)."""
    at_b = saturated(b)
    ta, tb = a.means.get(THROUGHPUT), b.means.get(THROUGHPUT)
    ia, ib = a.means.get(INTERACTIVITY), b.means.get(INTERACTIVITY)
    if at_b is None or not (_finite(ta) and _finite(tb) and _finite(ia) and _finite(ib)) or not ta or not ia:
        return None
    gain, loss = tb / ta - 1.0, ib / ia - 1.0  # type: ignore[operator]
    product = (1.0 + gain) * (1.0 + loss) - 1.0
    band = math.hypot(separation(tput, a.conc, b.conc, a.runs, b.runs),
                      separation(intvty, a.conc, b.conc, a.runs, b.runs))
    if product >= -band:
        return None
    return (f"interactivity collapses from conc {a.conc} to {b.conc} ({intvty.label} {loss:+.1%} for throughput per "
            f"GPU {gain:+.1%}: their product {product:+.1%}, {band_words(band, a.runs, b.runs)}) as {at_b}")


def _measure_higher(cut: str | None) -> str:
    """How to measure past the top of what was measured: a higher ladder, or, when an interrupt or a failed stage cut
    the discovery short (`cut`: how, e.g. `was interrupted during stage ladder`), running it whole (the ladder's top
    was not what stopped it)."""
    return f"the discovery {cut} before measuring it: run it again" if cut else "raise --ladder-top"


UNDECIDED_GAIN = 0.10
"""A mean gain in throughput per GPU above this, from a point to a higher one, that run-to-run noise hides is not a
flat curve: `find_knee` places no knee there (it says the noise is too large), and no `max-conc` is proposed."""


def find_knee(points: Sequence[CurvePoint], tput: MetricNoise, intvty: MetricNoise | None = None,
              cut: str | None = None, failed: Mapping[int, str] | None = None) -> Knee | None:
    """The lowest concurrency that no higher measured one beats in throughput per GPU beyond noise, or whose next
    point falls off the KV/HBM cliff (:func:`collapse`), whichever comes first. `cut`: how an interrupt or a failed
    stage stopped the discovery short (`was interrupted during stage ladder`; what was measured ends there, not at the
    ladder's top). `failed`: concurrencies whose runs
    failed or were invalid (none valid), with why: throughput still rising at the top valid point with a failed one
    above it is a knee between the two, not one "above the ladder" — that concurrency was measured, and did not serve.

    Judged against every higher point, not only the next one, so one noisy pair does not end the curve early."""
    pts = [p for p in points if _finite(p.means.get(THROUGHPUT))]
    if not pts:
        return None
    hidden: str | None = None  # why the latest point could not be called flat (a rise the noise hides)
    rising: str | None = None  # the latest point's rise beyond noise, as its verdict judged it
    cliff = next(((p.conc, why) for p in pts if (why := saturated(p)) is not None), (None, None))
    cliff_text = f"from conc {cliff[0]} the server is at its KV/HBM cliff: {cliff[1]}" if cliff[0] else None
    for i, a in enumerate(pts[:-1]):
        fell = collapse(a, pts[i + 1], tput, intvty) if intvty is not None else None
        if fell is not None:
            return Knee(conc=a.conc, next_conc=pts[i + 1].conc, reason=fell, cliff_conc=cliff[0], cliff=cliff_text)
        ta = float(a.means[THROUGHPUT])  # type: ignore[arg-type]
        # each against the noise of the two means it compares: the band the verdict and its reason share
        gains = [(move(tput, ta, float(b.means[THROUGHPUT]), a.conc, b.conc, a.runs, b.runs), b)  # type: ignore[arg-type]
                 for b in pts[i + 1:]]
        if any(m.rises for m, _ in gains):
            m, b = max(((m, b) for m, b in gains if m.rises), key=lambda g: g[0].rel - g[0].band)
            hidden, rising = None, f"conc {b.conc} over conc {a.conc}: {m.describe()}"
            continue
        nxt = pts[i + 1]
        best_move, best = max(gains, key=lambda g: g[0].rel - g[0].band)
        rise, riser = max(gains, key=lambda g: g[0].rel)
        if rise.rel > UNDECIDED_GAIN:  # a sizeable mean gain the noise hides is no flat curve: no knee is earned here
            hidden = (f"throughput per GPU rose from conc {a.conc} to {riser.conc} inside its run-to-run noise, "
                      f"{rise.describe()}: too noisy to place a knee (raise --repeats or --duration)")
            rising = None
            continue
        at_next = saturated(nxt)
        reason = (f"no higher concurrency (measured up to {pts[-1].conc}) raises throughput per GPU beyond noise over "
                  f"conc {a.conc}: the best, conc {best.conc}: {best_move.describe()}"
                  + (f"; at conc {nxt.conc} {at_next}" if at_next else ""))
        return Knee(conc=a.conc, next_conc=nxt.conc, reason=reason, cliff_conc=cliff[0], cliff=cliff_text)
    top = pts[-1]
    broke = min((c for c in (failed or {}) if c > top.conc), default=None)
    if broke is not None and failed is not None:
        return Knee(conc=top.conc, next_conc=broke, cliff_conc=cliff[0], cliff=cliff_text,
                    reason=f"throughput per GPU still rose at conc {top.conc}, the highest that ran valid"
                           + (f" ({rising})" if rising else "")
                           + f"; conc {broke} did not serve ({failed[broke]}): the knee lies between them")
    if hidden is not None:
        return Knee(conc=None, above=top.conc, next_conc=None, undecided=True, cliff_conc=cliff[0], cliff=cliff_text,
                    reason=hidden)
    measured = "what was measured" if cut else "the ladder"
    reason = (f"throughput per GPU still rises beyond noise at the top of {measured} (conc {top.conc})"
              + (f": {rising}" if rising else "") + f"; the knee lies above it ({_measure_higher(cut)})"
              if len(pts) > 1 else
              f"only conc {top.conc} was measured: no rise or fall to judge a knee by ({_measure_higher(cut)})")
    return Knee(conc=None, above=top.conc, next_conc=None, cliff_conc=cliff[0], cliff=cliff_text, reason=reason)


def refine_targets(points: Sequence[CurvePoint], knee: Knee, resolution: int) -> list[int]:
    """Concurrencies to measure next: the midpoint of the knee's interval, and of the cliff's when it lies below."""
    measured = {p.conc for p in points}
    out: list[int] = []
    if knee.conc is not None and knee.next_conc is not None and knee.next_conc - knee.conc > resolution:
        out.append((knee.conc + knee.next_conc) // 2)
    if knee.cliff_conc is not None and knee.cliff_conc <= knee.last:
        below = [p.conc for p in points if p.conc < knee.cliff_conc]
        if below and knee.cliff_conc - below[-1] > resolution:
            out.append((below[-1] + knee.cliff_conc) // 2)
    return sorted({c for c in out if c not in measured})


def _interp(points: Sequence[CurvePoint], metric: str, conc: int) -> float | None:
    xs = [math.log(p.conc) for p in points if _finite(p.means.get(metric))]
    ys = [float(p.means[metric]) for p in points if _finite(p.means.get(metric))]  # type: ignore[arg-type]
    if not xs:
        return None
    return float(np.interp(math.log(conc), xs, ys))


def _moves(points: Sequence[CurvePoint], a: int, b: int,
           noise_by: dict[str, MetricNoise]) -> tuple[bool, str]:
    """Whether going from conc a to b moves a frontier coordinate beyond the noise of two single runs (each point of
    the official grid is one), and the figures that say so."""
    moves = []
    for metric in SEPARATION_METRICS:
        va, vb, n = _interp(points, metric, a), _interp(points, metric, b), noise_by.get(metric)
        if va is None or vb is None or not va or n is None:
            continue
        moves.append(move(n, va, vb, a, b))
    return any(m.beyond for m in moves), ", ".join(m.describe() for m in moves)


STEP_RATIO = math.sqrt(2)
"""The finest step the proposed grid takes: half an octave of concurrency. The ladder measures octaves (powers of two)
and the grid reads the curve linear in log concurrency between measured points, so where the noise is small (the
simulator's one or two per cent) the noise rule alone put a point at nearly every concurrency — points no run
measured, each a job of the official sweep (the rising fixed-length arm's 4 concurrencies became 68). With every step
at least half an octave, a grid holds at most two points per doubling of the users, however quiet the noise."""


def step_floor(conc: int) -> int:
    """The lowest concurrency a proposed step from `conc` may take: :data:`STEP_RATIO` above it, rounded up."""
    return max(conc + 1, math.ceil(conc * STEP_RATIO - 1e-9))


def propose_grid(points: Sequence[CurvePoint], start: int, knee: Knee, noise_by: dict[str, MetricNoise],
                 recipe: Sequence[int] = (), cut: str | None = None) -> list[GridPoint]:
    """The official grid from `start` to the knee: each point the first concurrency (on the measured curve, linear
    in log concurrency between measured points) that moves throughput per GPU or interactivity beyond the noise of
    a single run and lies half an octave or more above the point before it (:data:`STEP_RATIO`); the knee itself ends
    the grid (taking the last point's place when the noise cannot tell the two apart, or they lie closer than half an
    octave).

    When the knee was not reached, the measurements say nothing past their top: the grid runs the same way to the
    top measured concurrency, and the `recipe`'s concurrencies above it follow as they are (nothing is cut where
    nothing was measured)."""
    measured = {p.conc for p in points}

    def note(c: int) -> str:
        return "" if c in measured else " (interpolated between measured points)"

    top = max(knee.last, start)
    end = (f"the knee, where the grid stops: {knee.reason}" if knee.found else
           f"the highest measured concurrency; the knee was not reached: {knee.reason}")
    grid = [GridPoint(conc=start, why=f"the arm's first concurrency (the recipe's){note(start)}")]
    last, floor, finer = start, step_floor(start), False
    for c in range(start + 1, top + 1):
        beyond, figures = _moves(points, last, c, noise_by)
        if beyond and c < floor:
            finer = True  # the noise would tell a closer point apart: the half-octave floor sets this step
            continue
        if beyond:
            first = (f"half an octave from conc {last}, the finest step proposed (a closer one separates too)"
                     if finer else f"first step that separates from conc {last}")
            grid.append(GridPoint(conc=c, why=f"{first}: {figures}{note(c)}"))
            last, floor, finer = c, step_floor(c), False
    if grid[-1].conc != top:
        beyond, figures = _moves(points, grid[-1].conc, top, noise_by)
        if (not beyond or top < step_floor(grid[-1].conc)) and len(grid) > 1:
            grid.pop()  # too close to the knee to tell apart, or under half an octave: the knee takes its place
            figures = _moves(points, grid[-1].conc, top, noise_by)[1]
        grid.append(GridPoint(conc=top, why=f"{end}; vs conc {grid[-1].conc}: {figures}{note(top)}"))
    else:
        grid[-1] = GridPoint(conc=top, why=f"{grid[-1].why}; {end}")
    if not knee.found:
        grid += [GridPoint(conc=c, why=f"the recipe's, kept: nothing was measured above conc {top}, where the knee "
                                       f"lies ({_measure_higher(cut)})")
                 for c in sorted(set(recipe)) if c > top]
    return grid


def min_step(concs: Sequence[int]) -> int | None:
    ordered = sorted(set(concs))
    return min((b - a for a, b in itertools.pairwise(ordered)), default=None)
