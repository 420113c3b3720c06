"""Fit the roofline's efficiency factors to measured runs.

Two fits live here. :func:`calibrate_runs` / :func:`fit_run` (what `llmsweep sim calibrate RUN_DIR` runs) replay
every measured point of a run directory on the simulator and fit its output throughput and TPOT/TTFT medians; it
needs only each job's `job.json` and `summary.json` (see the section further down). :func:`calibrate` fits the
per-request decode-step model below from full `records.jsonl` files.

Decode steps are the cleanest signal a client sees: between two streamed chunks of one request, exactly one engine
step ran. For each successful request we take its mean step time (decode span / (chunks − 1)), the mean number of
requests decoding alongside it, and their mean context; the roofline says

    step = (weight_bytes / TP + running x context x KV bytes per GPU) / (HBM bandwidth x mem)
           + step_s + per_layer_s x layers + per_seq_s x running

plus the prefills of other requests that completed inside this request's decode span (their FLOPs over peak x
compute, spread over its steps). That is linear in (fixed, per_seq_s, 1/mem, 1/compute), so ordinary least squares
recovers them — provided the records vary concurrency *and* context length (with one prompt length the KV term and
the per-sequence term are collinear; records that do not are refused, :data:`SEPARABLE`). The weight read is taken
from the roofline at the fitted `mem` and the rest of the fixed part becomes `step_s`. The frontend latency is the
median of TTFT minus the predicted prefill step over requests that arrived at an idle engine; when those span
several prompt lengths, a line through (prefill FLOPs, TTFT) gives `compute` (slope) and the frontend latency
(intercept) directly. Communication efficiency keeps its default (single-GPU records do not constrain it); mixed
prefill/decode steps are approximated additively, which biases the decode-fit `compute` low (the idle-TTFT line
replaces it when available).
"""

from __future__ import annotations

import bisect
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from llmsweep.client.files import RUN_FILE, SUMMARY_FILE
from llmsweep.errors import ConfigError, DatasetError, LlmsweepError, ResultError
from llmsweep.job_files import JOB_FILE, read_outcome, unjudged
from llmsweep.jsonline import load_json_file, numbered_values, read_json_text
from llmsweep.metrics.registry import HOT_BY_NAME, OUTPUT_TPUT, HotColumn, figure
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.perf import Batch, Efficiency, RooflineTimer
from llmsweep.spec.components import ScenarioId
from llmsweep.words import count_of

if TYPE_CHECKING:
    from llmsweep.metrics.model import Hardware, Summary
    from llmsweep.sim.calibration import CalibrationKey
    from llmsweep.spec.workload import ResolvedWorkload
    from llmsweep.workload.base import Workload

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Calibration:
    """Fitted efficiencies and how well the fit explains the measured decode steps."""

    efficiency: Efficiency
    samples: int
    r2: float
    mean_abs_pct_error: float

    def overrides(self) -> dict[str, float]:
        """Every factor, ready for `EngineConfig(efficiency=...)`."""
        return dict(asdict(self.efficiency))


_RECORD_TIMES = ("sent_at", "first_token_at", "end_at")
_RECORD_COUNTS = ("prompt_tokens", "completion_tokens", "cached_tokens")


def load_records(source: Path | str | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request records of a `records.jsonl` (or an iterable of them), each checked to be a record whose fields
    the decode-step fit reads have their types: a line that is not one is refused naming the file and line, not met
    as a traceback inside the fit."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        fix = "pass the records.jsonl a benchmark run wrote"
        try:
            text = read_json_text(path)
        except (OSError, ValueError) as exc:
            raise DatasetError(f"sim calibrate: cannot read records from {path}: {exc}", fix=fix) from exc
        return [_checked_record(record, f"{path}:{number}") for number, record in numbered_values(
            text, lambda number, exc: DatasetError(f"sim calibrate: {path}:{number}: not JSON ({exc})", fix=fix))]
    return [_checked_record(r, f"record {n}") for n, r in enumerate(source, 1)]


def _checked_record(record: Any, where: str) -> dict[str, Any]:
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    problem = None
    if not isinstance(record, dict):
        problem = f"a JSON {type(record).__name__}, not a request record (an object)"
    elif bad := [k for k in _RECORD_TIMES if record.get(k) is not None and not number(record[k])]:
        problem = f"{bad[0]} is {record[bad[0]]!r}, not a unix time in seconds"
    elif bad := [k for k in _RECORD_COUNTS if record.get(k) is not None and not isinstance(record[k], int)]:
        problem = f"{bad[0]} is {record[bad[0]]!r}, not a token count"
    elif not isinstance(chunks := record.get("chunk_times") or [], list) or not all(map(number, chunks)):
        problem = "chunk_times is not a list of unix times in seconds"
    if problem is not None:
        raise DatasetError(f"sim calibrate: {where}: {problem}",
                           fix="pass the records.jsonl a benchmark run wrote (`llmsweep bench` or `run`), unedited")
    checked: dict[str, Any] = record
    return checked


class _Intervals:
    """Intervals sorted by start; answers "how many were active, on average, over [a, b]"."""

    def __init__(self, intervals: Iterable[tuple[float, float]]) -> None:
        self.items = sorted(intervals)
        self.starts = [s for s, _ in self.items]
        self.longest = max((e - s for s, e in self.items), default=0.0)

    def mean_active(self, a: float, b: float) -> float:
        if b <= a:
            return 0.0
        # only intervals starting at most `longest` before `a` can reach into [a, b]
        lo = bisect.bisect_left(self.starts, a - self.longest)
        hi = bisect.bisect_right(self.starts, b)
        total = 0.0
        for s, e in self.items[lo:hi]:
            lo_, hi_ = max(s, a), min(e, b)
            if hi_ > lo_:
                total += hi_ - lo_
        return total / (b - a)


def calibrate(records: Iterable[dict[str, Any]] | Path | str, config: EngineConfig) -> Calibration:
    """Fit `mem`, `step_s`, `per_seq_s` and `frontend_s` for `config`'s model and hardware from measured records."""
    rows = [r for r in load_records(records) if r.get("error_class") is None and r.get("first_token_at") is not None
            and r.get("end_at") is not None and len(r.get("chunk_times") or []) >= 3]
    if len(rows) < 5:
        raise ResultError(f"sim calibrate: need at least 5 successful streamed requests with 3+ chunks, got "
                          f"{len(rows)}",
                          fix="calibrate from a streaming run with max_tokens >= 8 and a few dozen requests")
    inputs = config.perf_inputs()
    base = config.efficiency_factors()
    tp = config.tp
    rows.sort(key=lambda r: r["first_token_at"])
    decode = [(r["first_token_at"], r["end_at"]) for r in rows]
    starts = [s for s, _ in decode]
    decoding = _Intervals(decode)
    ctx_of = [(r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0) / 2 for r in rows]
    kv_gpu = inputs.kv_bytes_per_token_per_gpu(tp, config.dp_attention)
    timer = RooflineTimer(inputs, tp=tp, ep=config.ep, efficiency=base, dp=config.dp_attention)
    firsts = [r["first_token_at"] for r in rows]
    computed = [max(0, (r.get("prompt_tokens") or 0) - (r.get("cached_tokens") or 0)) for r in rows]
    flop_s = 2.0 * inputs.params_active / (tp * inputs.flops)
    x, y = [], []
    for i, r in enumerate(rows):
        a, b = r["first_token_at"], r["end_at"]
        steps = len(r["chunk_times"]) - 1
        running = max(decoding.mean_active(a, b), 1.0)
        lo, hi = bisect.bisect_left(starts, a - decoding.longest), bisect.bisect_right(starts, b)
        ctx = [c for (s, e), c in zip(decode[lo:hi], ctx_of[lo:hi], strict=True) if e > a]
        ctx_mean = sum(ctx) / len(ctx) if ctx else ctx_of[i]
        # prefills of other requests that finished inside this request's decode span stalled its steps
        lo_i, hi_i = bisect.bisect_right(firsts, a), bisect.bisect_right(firsts, b)
        prefill = sum(computed[lo_i:hi_i]) * flop_s / steps
        # (with DP attention the step waits for the busiest rank's KV reads, as the timer prices them)
        load = timer.rank_load(round(running)) if config.dp_attention > 1 else 1.0
        x.append([1.0, running, running * ctx_mean * kv_gpu * load / inputs.hbm_bw, prefill])
        y.append((b - a) / steps)
    X, Y = np.asarray(x), np.asarray(y)
    _refuse_collinear(X, ctx_of)
    coef, *_ = np.linalg.lstsq(X, Y, rcond=None)
    fixed, per_seq, inv_mem, inv_compute = (float(v) for v in coef)
    mem = min(1.0, max(0.05, 1.0 / inv_mem)) if inv_mem > 0 else base.mem
    compute = min(1.0, max(0.05, 1.0 / inv_compute)) if inv_compute > 0 else base.compute
    per_seq = max(0.0, per_seq)
    tokens = max(1, round(float(np.median(X[:, 1]))))
    weights_s = timer.weight_bytes_read(tokens) / tp / (inputs.hbm_bw * mem)
    step_s = max(0.0, fixed - weights_s - base.per_layer_s * inputs.n_layers)
    fitted = X @ np.array([weights_s + step_s + base.per_layer_s * inputs.n_layers, per_seq, 1.0 / mem,
                           1.0 / compute])
    ss_res = float(((Y - fitted) ** 2).sum())
    ss_tot = float(((Y - Y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    mape = float(np.mean(np.abs(fitted - Y) / Y))
    eff = base.with_(mem=mem, compute=compute, step_s=step_s, per_seq_s=per_seq)
    flights = _Intervals((r["sent_at"], r["end_at"]) for r in rows if r.get("sent_at") is not None)
    idle: list[tuple[int, float]] = []
    for r in rows:
        if r.get("sent_at") is None or r["first_token_at"] <= r["sent_at"]:
            continue
        # itself covers the whole span (1.0); anything more means another request was in flight
        if flights.mean_active(r["sent_at"], r["first_token_at"]) - 1.0 < 0.05:
            prompt = max(1, (r.get("prompt_tokens") or 0) - (r.get("cached_tokens") or 0))
            idle.append((prompt, r["first_token_at"] - r["sent_at"]))
    overhead = eff.step_s + eff.per_layer_s * inputs.n_layers + eff.per_seq_s
    sizes = [p for p, _ in idle]
    if len(idle) >= 4 and max(sizes) >= 1.5 * min(sizes):
        # TTFT at an idle engine = frontend + overhead + prefill FLOPs / (peak x compute): intercept and slope
        attention = inputs.attention_flops[0]
        flops = [(2.0 * inputs.params_active * p + attention * p * (p + 1) / 2) / (tp * inputs.flops) for p in sizes]
        A = np.column_stack([np.ones(len(idle)), flops])
        (intercept, slope), *_ = np.linalg.lstsq(A, np.array([t for _, t in idle]), rcond=None)
        if slope > 0:
            eff = eff.with_(compute=min(1.0, max(0.05, 1.0 / float(slope))),
                            frontend_s=max(0.0, float(intercept) - overhead))
    elif idle:
        timer = RooflineTimer(inputs, tp=tp, ep=config.ep, efficiency=eff, dp=config.dp_attention)
        rest = [t - timer.step_time(Batch(prefill_tokens=p, prefill_attn=p * (p + 1) / 2, new_seqs=1)) for p, t in idle]
        eff = eff.with_(frontend_s=max(0.0, float(np.median(rest))))
    return Calibration(efficiency=eff, samples=len(rows), r2=r2, mean_abs_pct_error=mape)


SEPARABLE = 0.05
"""Least normalised singular value of the decode fit's fixed, per-sequence and KV-read columns below which the records
cannot tell them apart. Records of one concurrency, or one prompt length, make two columns proportional (0, or
0.001-0.02 with the ramp of a run); the step model then comes back with `mem` at a bound and the fixed cost moved
into `per_seq_s` (R^2 of -1e28 on a single-level run). Two concurrencies by two prompt lengths give 0.07-0.36 and
recover the factors that produced them."""


def _refuse_collinear(X: np.ndarray, ctx: list[float]) -> None:
    """Refuse records that do not vary concurrency and context length independently (the decode fit's columns)."""
    cols = X[:, :3]
    norms = np.linalg.norm(cols, axis=0)
    least = float(np.linalg.svd(cols / np.where(norms > 0, norms, 1.0), compute_uv=False)[-1]) if norms.all() else 0.0
    if least >= SEPARABLE:
        return
    running = X[:, 1]
    raise ResultError(
        f"sim calibrate: the records cannot separate a decode step's fixed cost, its per-sequence cost and its KV "
        f"reads: {np.percentile(running, 10):.0f}-{np.percentile(running, 90):.0f} requests decoded at once, at a "
        f"context of {np.percentile(ctx, 10):,.0f}-{np.percentile(ctx, 90):,.0f} tokens (10th-90th percentile), and "
        f"the two did not vary independently (separability {least:.3f} < {SEPARABLE})",
        fix="calibrate from records of at least two concurrencies and two prompt lengths (e.g. 1k and 6k tokens at "
            "conc 1, 4, 16), or fit a run directory with `llmsweep sim calibrate RUN_DIR`")


# ------------------------------------------------------------------------------------------ fit from a run directory
#
# What a run directory always holds is one `job.json` and one `summary.json` per point (`records.jsonl` may be a
# slice, as in examples/results/). So the run-level fit replays every measured point on the simulator — the same
# workload shape, concurrency and engine knobs — and moves the efficiency factors until the predicted medians and
# throughput match the measured ones: least squares on log(predicted / measured) (Levenberg-Marquardt over the
# log of each factor, finite-difference Jacobian; the simulator is deterministic, so differences are clean). It fits
# the simulator's *own* error, mixed prefill/decode steps and queueing included, which the per-record decode fit
# above only approximates.

FIT_FACTORS: tuple[str, ...] = ("mem", "compute", "step_s", "per_seq_s", "frontend_s")
SPEC_FACTORS: tuple[str, ...] = ("draft_layer_fraction",)
"""Fitted on top of FIT_FACTORS when the points ran speculative decoding: the cost of one draft pass."""
LOAD_FACTORS: tuple[str, ...] = ("frontend_per_request_s",)
"""Fitted on top of FIT_FACTORS when the points ran at two or more concurrencies, one above 1: the front end's latency
per request in flight. At one concurrency the requests in flight hardly change, so it is `frontend_s` again."""
FACTOR_BOUNDS: dict[str, tuple[float, float]] = {
    "mem": (0.05, 1.0), "compute": (0.01, 1.0), "step_s": (1e-5, 0.05), "per_seq_s": (1e-7, 2e-3),
    "frontend_s": (1e-4, 0.5), "per_layer_s": (1e-7, 1e-3), "draft_layer_fraction": (0.01, 50.0),
    "frontend_per_request_s": (1e-6, 5e-3),
}
FIT_START: dict[str, float] = {"frontend_per_request_s": 1e-4}
"""Where the search starts a factor whose default is 0 (off), which the fit's log scale cannot hold: the least it
starts from (0.1 ms per request in flight, 13 ms at 128, inside the 0.5 ms the vLLM runs' histograms show). The
*before* of the comparison is still the default."""
PRIOR_WEIGHT = 0.03
"""Weight of a weak pull (per factor, log units) towards the starting factors when a draft cost is fitted. With one
draft length K the draft passes and `step_s` are both a fixed cost per decode step, so the data fix only their sum;
the pull splits it the least-change way instead of wherever the iterations wander. Points at two or more K separate
them (the draft term scales with K, `step_s` does not) and the pull is then negligible."""
COMPARED: tuple[HotColumn, ...] = (figure(OUTPUT_TPUT), HOT_BY_NAME["p50_tpot"], HOT_BY_NAME["p50_ttft"])
"""The figures a run-level fit compares, measured against replayed, each read, keyed (`--json`'s `measured`, `before`,
`after`, `weights`) and shown (`sim calibrate`'s table) as the metric table has it, a latency in seconds: the TPOT and
TTFT medians, and the endpoint's output throughput (`output_tput`: the whole server's, what a replay of the point
serves; not the stored `output_tput_per_gpu`)."""
OUTPUT, TPOT_P50, TTFT_P50 = METRICS = tuple(c.name for c in COMPARED)
FEWER_FIRST: tuple[str, ...] = ("mem", "step_s", "frontend_s", "compute", "per_seq_s", "draft_layer_fraction")
"""Which factors a fit of too few points is told to keep first (`--factors`): the decode step's bandwidth and fixed
cost, then the frontend and prefill."""


@dataclass(frozen=True)
class PoolReplay:
    """The GPU KV pool a point was replayed at: the one its engine reported (`KvCache.pool_tokens`), not the one the
    simulator sizes for the launch from HBM, weights and memory fraction (its memory model can be far off: a
    compressed or sparse cache, an engine's own reserve)."""

    reported: int
    """Tokens the engine's pool held, summed over its engines, as its /metrics said."""
    simulated: int | None
    """Tokens the simulator sizes for the same launch (None: it cannot size one, e.g. the model does not fit)."""
    unused: str | None = None
    """Why the replay did not take the reported pool (it runs at the simulator's own then): fewer engines said it
    than the job's DP ranks, so it may be one rank's pool, not the deployment's."""

    @property
    def ratio(self) -> float | None:
        """simulated / reported: how far the simulator's own pool is from the engine's."""
        return self.simulated / self.reported if self.simulated else None


POOL_SAID_FROM = 0.05
"""A replay's pool is said when the simulator's own differs from the engine's by more than this fraction."""


@dataclass(frozen=True)
class MeasuredPoint:
    """One measured job: what it ran (job.json), what it measured (summary.json) and how much each metric counts."""

    path: Path
    job: dict[str, Any]
    config: EngineConfig
    concurrency: int
    scenario: str
    measured: dict[str, float]
    weights: dict[str, float]
    excess_hit_rate: float
    """Prefix-cache hits the workload did not plan (observed - theoretical): prefill work the engine skipped."""
    provenance: dict[str, Any]
    acceptance_length: float | None = None
    """Realised acceptance length the engine's counters read over the window (speculative points only); the replay
    runs at this value, not at the pin."""
    corpus_digest: str | None = None
    """Fingerprint of the traces the run replayed (agentic points; None when the run did not record one)."""
    tokens_per_request: tuple[float, float] | None = None
    """Mean input and output tokens of the measured requests: what a replay of a run without a corpus digest is
    checked against (:func:`unverifiable`)."""
    hardware: Hardware | None = None
    """What the run recorded of the machine it ran on (provenance's `hardware`: the server's host CPU, its GPUs'
    power limits): :func:`mixed_machines` compares the points of one key by it."""
    seed: int | None = None
    """The seed the point's workload sampled with, as its summary records it (`Provenance.workload_seed`): what a
    replay draws with. A repeat measured before repeats were paired across arms (`workload.scenario.sample_name`) drew
    with a seed its job id no longer gives; None when not recorded (the job id's, then)."""
    kv_pool: PoolReplay | None = None
    """The engine's reported KV pool the point replays at (None: the run read none, and the simulator sizes it)."""

    @property
    def run(self) -> str:
        """The run the point came from, as a warning names it: its run id and directory."""
        return f"{self.provenance.get('run_id')} at {self.path.parent.parent}"

    @property
    def label(self) -> str:
        if self.scenario == ScenarioId.AGENTIC_CODING:
            return f"agentic c{self.concurrency}"
        return f"fixed {self.job.get('isl')}/{self.job.get('osl')} c{self.concurrency}"

    @property
    def key(self) -> CalibrationKey:
        return self.config.calibration_key()


def _get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def job_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """Job folders under each path: a job folder itself, a run directory (`jobs/*/`) or a folder of runs."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if (path / JOB_FILE).is_file():
            found.append(path)
            continue
        hits = sorted(p.parent for p in path.glob(f"**/{JOB_FILE}") if (p.parent / SUMMARY_FILE).is_file())
        # a job folder inside another is an earlier attempt it keeps (attempts/N/: run --force, a rerun), superseded
        # by the folder around it: not a point of its own
        folders = set(hits)
        hits = [h for h in hits if folders.isdisjoint(h.parents)]
        if not hits:
            raise DatasetError(f"sim calibrate: no job folder ({JOB_FILE} + {SUMMARY_FILE}) under {path}",
                               fix="pass a run directory `llmsweep run --out` wrote, or its jobs/<id>/ folders")
        found.extend(hits)
    # one folder reached twice (a run named relative and absolute, through a link, or beside its own job folder)
    # is one point: fitted twice it would count double and the stored calibration would claim jobs it did not see
    unique: dict[Path, Path] = {}
    for folder in found:
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values())


NOT_MEASURED_FIX = ("calibrate against a run on a real engine: `llmsweep run` of a recipe whose engine is not `sim`, "
                    "without --simulate (its summaries say source: measured)")


class NotMeasured(ConfigError):
    """A job folder whose summary the simulator produced (source `simulated` or `predicted`): not a measurement."""

    def __init__(self, message: str, *, fix: str, source: str) -> None:
        super().__init__(message, fix=fix)
        self.source = source


def measured_point(path: Path, config_for: Any) -> MeasuredPoint:
    """Read one job folder; `config_for(job_dict)` gives the EngineConfig the simulator would run for it, reading the
    dict as a planned job (the CLI's `_config_for_job`: a pydantic ValidationError says job.json is not a job).

    What the engine did overrides what the job asked where the run read it back: a speculative point replays at the
    realised acceptance length from the engine's counters (refused when the run has none), and a point whose
    planned prefix hits never happened (vLLM turns prefix caching off for hybrid models) replays without the cache.
    """
    from pydantic import ValidationError

    from llmsweep.metrics.model import MEASURED, Summary

    try:
        job = load_json_file(path / JOB_FILE)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"sim calibrate: cannot read {path / JOB_FILE}: {exc}",
                           fix="restore the file from the run's evidence, or leave this job folder out") from exc
    if not isinstance(job, dict):
        raise DatasetError(f"sim calibrate: {path / JOB_FILE} is not a JSON object (a job)",
                           fix="restore the file from the run's evidence, or leave this job folder out")
    try:
        summary = Summary.load(path / SUMMARY_FILE)
    except ResultError as exc:
        raise DatasetError(f"sim calibrate: {exc.message}", fix=exc.fix) from exc
    except (OSError, ValueError) as exc:
        raise DatasetError(f"sim calibrate: cannot read {path / SUMMARY_FILE}: {exc}",
                           fix=f"`llmsweep summarize {path}` rebuilds it from its records.jsonl") from exc
    if summary.source != MEASURED:
        # the simulator's own output: fitting the simulator to it calibrates nothing (and its replays take minutes)
        raise NotMeasured(f"{path.name}: its summary's source is {summary.source}, not measured (the simulator "
                          "produced it): calibration fits measurements only",
                          fix=NOT_MEASURED_FIX, source=summary.source)
    if (why := unjudged(summary.validity.verdict, read_outcome(path))) is not None:
        # the client wrote the summary before the job's checks (read-back, power, the server found alive) and no
        # outcome closed the job after them, or one closed it failed: its figures are not the job's result, as the
        # report, the store and --resume read it (`job_files.unjudged`, their one definition)
        raise ResultError(f"sim calibrate: {path.name} is not the job's result, {why}",
                          fix=f"`llmsweep run RECIPE --out {path.parent.parent} --resume` runs the job again; "
                              "calibrate from jobs the run closed")
    if job.get("eval-only") or (summary.eval is not None and summary.eval.mode == "eval-only"):
        # it measured accuracy on a relaunched server: no throughput or latency of the job to fit
        raise ResultError(f"sim calibrate: {path.name} is an eval-only point: it measures accuracy, no throughput "
                          "to fit", fix="calibrate on the throughput points of the same engine, GPU and model class")
    if job.get("disagg"):
        # the replay renders one aggregated server for the job: a measurement of prefill and decode pools fitted to
        # it would move the aggregated key's factors towards a deployment it does not model
        raise ResultError(f"sim calibrate: {path.name} is a disaggregated point (prefill and decode pools), and the "
                          "fit replays one aggregated server",
                          fix="calibrate on aggregated points of the same engine, GPU and model class; the "
                              "simulator's disaggregated predictions use those factors per role")
    checks = summary.readback.checks if summary.readback is not None else []
    failed = [c.reason or c.check for c in checks if c.ok is False]
    if failed:
        # the engine did not run what the job says (a wrong acceptance pin that reached it): no replay of the job
        # describes what was measured
        raise ResultError(f"sim calibrate: {path.name} failed its read-back ({'; '.join(failed)})",
                          fix="calibrate from points whose engine ran what the job asked")
    if summary.validity.verdict == "invalid":
        # a gate failed (requests errored, the client saturated, the run stopped early, ...): the figures are not
        # what the engine does for this job, and fitting them would move every factor of the key towards them
        reasons = [r for r in summary.validity.reasons if not r.startswith("smoke run")] or summary.validity.reasons
        raise ResultError(f"sim calibrate: {path.name} is invalid ({'; '.join(reasons)}): its figures are not a "
                          "measurement of the job",
                          fix="re-run the point once what its gates name is fixed; valid and smoke points are fitted")
    measured = _compared(summary)
    if not measured:  # nothing the fit compares (no request completed): replaying it would fit nothing, every pass
        raise ResultError(f"sim calibrate: {path.name} measured none of the metrics a fit compares", fix="calibrate "
                          "on points whose requests completed")
    scenario = str(_get(job, "workload", "scenario") or job.get("scenario"))
    excess = max(0.0, (summary.cache.observed_hit_rate or 0.0) - (summary.cache.theoretical_hit_rate or 0.0))
    # Prefill-side numbers of a point whose prompts came partly from the cache unplanned (the cross-job reuse bug of
    # the first H200 run) understate the engine's prefill cost: count them less, in proportion. An agentic point's
    # output rate is set by the traces' idle gaps, not by the engine: it is reported, not fitted.
    # An agentic turn's median output is a handful of tokens, so its TPOT is a few inter-token gaps, biased by how
    # the first chunks after the prefill bunch up: it counts a quarter of a fixed-length point's 200+ token TPOT.
    prefill_w = max(0.25, 1.0 - 2.0 * excess)
    agentic = scenario == ScenarioId.AGENTIC_CODING
    weights = {OUTPUT: 0.0 if agentic else prefill_w, TPOT_P50: 0.25 if agentic else 1.0, TTFT_P50: prefill_w}
    prov = summary.provenance
    launch = prov.launch
    run_json = next((p / RUN_FILE for p in path.parents if (p / RUN_FILE).is_file() and p != path), None)
    run_id = None
    if run_json is not None:
        try:
            run_id = load_json_file(run_json).get("run_id")
        except (OSError, ValueError):
            run_id = None
    provenance = {
        "run_id": run_id or path.parent.parent.name,
        "date": dt.datetime.fromtimestamp(prov.started_at, dt.UTC).date().isoformat() if prov.started_at else None,
        "engine_version": (launch.engine_version_reported or launch.engine_version) if launch else None,
        "engine": launch.engine if launch else None,
        "gpu": prov.gpu_name,
        "model": job.get("model"),
        "verdict": summary.validity.verdict,
    }
    try:  # `config_for` reads the job as a plan's Job (the caller's: the simulator does not import the planner)
        config: EngineConfig = config_for(job)
    except ValidationError as exc:  # a field missing or ill-typed is named, not met as a traceback
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(job)'}: {e['msg']}" for e in exc.errors()[:3])
        raise DatasetError(f"sim calibrate: {path / JOB_FILE} is not a job this llmsweep reads "
                           f"({count_of(exc.error_count(), 'problem')}: {problems})",
                           fix="restore the file from the run's evidence, or calibrate with the llmsweep release "
                               "that ran the job") from exc
    measured_on = job.get("engine") or (launch.engine if launch else None)
    if measured_on and measured_on != config.engine_style:
        # the simulator stands in for any engine in vLLM's or SGLang's style, and a calibration is keyed by that
        # style: a TensorRT-LLM or ATOM point would be fitted with vLLM's points and stored (and applied) as vLLM's
        raise ResultError(
            f"sim calibrate: {path.name} was measured on {measured_on}, which the simulator replays in "
            f"{config.engine_style}'s style: its factors would be fitted and stored as {config.engine_style}'s "
            f"(calibrations are keyed by engine: vllm, sglang)",
            fix="calibrate vLLM and SGLang runs; the simulator has no calibration key for other engines")
    realised = None
    if config.spec is not None:
        sd = summary.server_metrics.spec_decode
        realised = sd.acceptance_length if sd is not None else None
        if realised is None:
            raise ResultError(
                f"sim calibrate: {path.name} ran speculative decoding ({config.spec.method}) but its summary has no "
                "realised acceptance length (the engine's spec-decode counters were not read)",
                fix="calibrate from a run whose /metrics scrapes carry the spec-decode counters")
        provenance["acceptance_length"] = {"realised": realised, "pinned": config.spec.acceptance_length}
        al = min(max(float(realised), 1.0), config.spec.k + 1.0)
        config = config.model_copy(update={"spec": config.spec.model_copy(update={"acceptance_length": al})})
    pool = None
    kv = summary.server_metrics.kv_cache
    reported = kv.pool_tokens if kv is not None else None
    if kv is not None and reported is not None and reported >= config.block_size:
        # the engine's own pool, not the simulator's sizing of it: preemptions, evictions and prefix hits of the
        # replay then follow the memory the engine had (a fit at the wrong pool moves the step factors instead)
        try:
            own: int | None = config.kv_pool_tokens()
        except LlmsweepError:
            own = None
        ranks = config.dp_attention
        unused = (f"said by {count_of(kv.pool_engines, 'engine')} where the job ran {ranks} DP ranks (it may be one "
                  "rank's pool): replayed at the simulator's own"
                  if kv.pool_engines is not None and kv.pool_engines < ranks else None)
        # (said per point, `kv_pool`: not in the provenance, which a fit of several points takes from its first)
        pool = PoolReplay(reported=int(reported), simulated=own or None, unused=unused)
        if unused is None:
            config = config.model_copy(update={"kv_capacity_tokens": pool.reported})
    planned, observed = summary.cache.theoretical_hit_rate or 0.0, summary.cache.observed_hit_rate
    if config.prefix_caching and planned > 0.05 and observed is not None and observed < 0.01 * planned:
        config = config.model_copy(update={"prefix_caching": False})
        provenance["prefix_caching"] = f"off: planned hit rate {planned:.2f}, observed {observed:.2f}"
    return MeasuredPoint(path=path, job=job, config=config, concurrency=int(job["conc"]), scenario=scenario,
                         measured=measured, weights=weights, excess_hit_rate=excess, provenance=provenance,
                         acceptance_length=realised, corpus_digest=prov.corpus_digest,
                         tokens_per_request=(summary.tokens.input.mean, summary.tokens.output.mean)
                         if summary.tokens.output.count else None,
                         hardware=prov.hardware if not isinstance(prov.hardware, str) else None,
                         seed=prov.workload_seed, kv_pool=pool)


MACHINE_FACTS: dict[str, Callable[[Hardware], str | None]] = {
    "host CPU": lambda h: h.host.cpu_model if h.host is not None else None,
    # the distinct limits of the point's GPUs: a TP 2 point on the same machine as a TP 1 one is no difference
    "GPU power limit": lambda h: " / ".join(f"{w:g} W" for w in sorted(set(h.power_limits_w or ()))) or None,
}
"""What a calibration key's points must share to be fitted by one set of factors (a host-bound engine, a small model
on vLLM, measured up to 42 % apart on three hosts of one GPU SKU and driver), read from each point's recorded
hardware."""


def mixed_machines(points: Iterable[MeasuredPoint]) -> list[str]:
    """One line per fact of :data:`MACHINE_FACTS` on which the points differ, naming each value with the runs (and
    their point counts) that recorded it. Points that did not record a fact (evidence older than the field, a host
    not read) are not compared on it: absence is no difference."""
    said = []
    for fact, read in MACHINE_FACTS.items():
        runs: dict[str, dict[str, int]] = {}
        for p in points:
            value = read(p.hardware) if p.hardware is not None else None
            if value is not None:
                by_run = runs.setdefault(value, {})
                by_run[p.run] = by_run.get(p.run, 0) + 1
        if len(runs) > 1:
            said.append(f"the {fact} differs between its points: " + "; ".join(
                f"{value} in " + ", ".join(f"{run} ({n} point{'s' if n > 1 else ''})" for run, n in by_run.items())
                for value, by_run in runs.items()))
    return said


MIXED_FIX = ("one set of factors fits the machines' average, neither machine: calibrate each machine's run on "
             "its own (one run directory per `sim calibrate`) for a key per machine, or keep several runs of each "
             "for a key of the fleet (docs/gpu.md section 16)")


@dataclass
class _Replay:
    """A measured point's workload, built once and replayed under many candidate factors."""

    point: MeasuredPoint
    workload: Any
    duration: float
    max_requests: int | None
    open_loop: bool = False
    """The point ran on its workload's own arrival times (a Mooncake replay with `timestamps`), not closed loop at its
    concurrency: replayed the same way (`Scenario.load`, as `predict_point` reads it)."""
    warmup_requests: int = 0
    """The client's warm-up phase (`Load.warmup_requests`): the window opens when it has ended, as measured."""
    tokens_per_request: tuple[float, float] | None = None
    """Mean input and output tokens of the replay's requests, as of its last prediction."""


def _replays(points: list[MeasuredPoint], *, fit_requests_per_lane: int | None = None) -> list[_Replay]:
    from llmsweep.spec.workload import ResolvedWorkload
    from llmsweep.workload.build import build_workload
    from llmsweep.workload.scenario import scenario_of

    out = []
    for p in points:
        resolved = ResolvedWorkload.model_validate(p.job["workload"])
        # how the point drove the server, as `run` and `predict_point` read it: closed loop or on the workload's own
        # arrival times, and the window it was cut to (an agentic point's; a Mooncake replay's `duration` cap)
        load = scenario_of(resolved).load(resolved, concurrency=p.concurrency, job_duration=p.job.get("duration"))
        extra: dict[str, Any] = {"tokenizer": None}  # the simulator counts with the built-in tokenizer
        if resolved.scenario != ScenarioId.AGENTIC_CODING:
            extra["api"] = "chat" if resolved.use_chat_template else "completions"
        # until the prompts (or the replayed rows) run out, as the measured run did, unless a window cut it
        duration = float(load.duration_s) if load.duration_s is not None else float("inf")
        # while fitting, a fixed-length point may stop after a few requests per lane (its medians settle early);
        # the reported before/after comparison always replays the whole measured run
        cap = p.concurrency * fit_requests_per_lane if fit_requests_per_lane and duration == float("inf") else None
        if kept := _kept_corpus(p, resolved):
            extra["source"] = str(kept)  # the synthetic corpus the run kept: the traces it replayed, whatever the
            # generator gives today (`workload.traces.kept`; checked against the digest below all the same)
        # the seed the measured run drew its sample with, as its summary records it; else the point's own, as
        # `Scenario.seed` gives it today (fixed-length points salt it, a repeat draws its `sample_name`'s)
        if p.seed is not None:
            extra["seed"] = p.seed
        workload = build_workload(resolved, concurrency=p.concurrency, point=p.job.get("id") or None, **extra)
        check_corpus(p, workload)
        out.append(_Replay(p, workload, duration, cap, open_loop=load.concurrency is None,
                           warmup_requests=load.warmup_requests))
    return out


def _kept_corpus(point: MeasuredPoint, resolved: ResolvedWorkload) -> Path | None:
    """The synthetic corpus the point's run kept beside it, when the point replayed one and recorded its digest."""
    from llmsweep.workload.traces.kept import kept_corpus

    traces = resolved.traces
    if point.corpus_digest is None or traces is None or traces.synthetic is None:
        return None
    return kept_corpus(point.path, point.corpus_digest)


def check_corpus(point: MeasuredPoint, workload: Workload) -> None:
    """Refuse a replay whose rebuilt traces are not the ones the measured run replayed; warn when the run recorded
    no fingerprint to check against (older evidence). Workloads without a trace corpus pass."""
    from llmsweep.workload.agentic import AgenticWorkload

    if not isinstance(workload, AgenticWorkload):
        return
    rebuilt = workload.corpus_digest
    if point.corpus_digest is None:
        log.warning("sim calibrate: %s (%s) recorded no corpus digest: the rebuilt traces (%s) cannot be verified "
                    "against the ones it replayed", point.path, point.label, rebuilt)
        return
    if rebuilt != point.corpus_digest:
        source = workload.config.source or "synthetic"
        raise DatasetError(
            f"sim calibrate: {point.path} ({point.label}) replayed traces {point.corpus_digest}, but its recorded "
            f"trace source ({source}) now gives {rebuilt}: replaying it would fit other traces under this run's name",
            fix="keep the trace file the run replayed with its evidence and point the job's traces at it, or "
                "calibrate with the llmsweep version whose generator made the run's corpus")


def predict_metrics(replay: _Replay, efficiency: dict[str, float]) -> dict[str, float]:
    """The COMPARED figures of one point, predicted with `efficiency` (stored calibrations not applied)."""
    from llmsweep.metrics import summarise
    from llmsweep.metrics.model import PREDICTED
    from llmsweep.sim.engine import build_core
    from llmsweep.sim.predict import Predictor

    config = replay.point.config.model_copy(update={"efficiency": efficiency, "calibrated": False})
    replay.workload.bind_worker(0, 1)  # rewinds a fixed-length workload's prompt cursor (a no-op for replays)
    records = Predictor(build_core(config)).run(replay.workload, concurrency=replay.point.concurrency,
                                               duration=replay.duration, max_requests=replay.max_requests,
                                               open_loop=replay.open_loop,
                                               warmup_requests=replay.warmup_requests)
    s = summarise(records, gpus=int(replay.point.job.get("gpus") or config.tp), source=PREDICTED)
    replay.tokens_per_request = (s.tokens.input.mean, s.tokens.output.mean) if s.tokens.output.count else None
    return _compared(s)


TOKEN_MISMATCH = 2.0
"""How far (a factor either way) a replay's mean input or output tokens per request may stray from the measured
run's before the replay is taken for other traces than the run replayed (a run without a corpus digest)."""


def unverifiable(replay: _Replay) -> str | None:
    """Why an agentic point that recorded no corpus digest cannot be replayed as measured, or None: its replay's
    requests are not the measured ones' size (the trace generator changed since: the H200 Llama run's answers of ~4
    tokens came back 60-150x longer after the synthetic generator stopped scaling them), so its TTFT and TPOT would
    be fitted on other work. A point with a digest is checked exactly (:func:`check_corpus`); others pass."""
    point = replay.point
    if point.scenario != ScenarioId.AGENTIC_CODING or point.corpus_digest is not None:
        return None
    measured, replayed = point.tokens_per_request, replay.tokens_per_request
    if measured is None or replayed is None:
        return None
    for what, m, r in (("input", measured[0], replayed[0]), ("output", measured[1], replayed[1])):
        if m > 0 and r > 0 and max(m / r, r / m) > TOKEN_MISMATCH:
            return (f"{point.path.name} ({point.label}): recorded no corpus digest, and the rebuilt traces' requests "
                    f"average {r:,.0f} {what} tokens where the measured ones averaged {m:,.0f}: the trace source now "
                    "gives other traces than the run replayed")
    return None


def _compared(s: Summary) -> dict[str, float]:
    """The COMPARED figures of a summary, those it measured (> 0)."""
    return {c.name: v for c in COMPARED if (v := c.read(s)) is not None and v > 0}


@dataclass(frozen=True)
class PointComparison:
    """Measured vs predicted for one point, before and after the fit."""

    label: str
    concurrency: int
    scenario: str
    measured: dict[str, float]
    before: dict[str, float]
    after: dict[str, float]
    weights: dict[str, float]
    excess_hit_rate: float
    acceptance_length: float | None = None
    """The realised acceptance length the point was replayed at (speculative points)."""
    kv_pool: PoolReplay | None = None
    """The engine's KV pool the point was replayed at, where its run read one back."""


def pool_lines(points: list[PointComparison]) -> list[str]:
    """What the table's replays took from the engine's reported KV pool where the simulator sizes another: one line
    per distinct (reported, simulated) pair, naming its points."""
    said: dict[tuple[int, int | None, str | None], list[str]] = {}
    for p in points:
        pool = p.kv_pool
        if pool is not None and (pool.unused or pool.ratio is None or abs(pool.ratio - 1.0) > POOL_SAID_FROM):
            said.setdefault((pool.reported, pool.simulated, pool.unused), []).append(p.label)
    lines = []
    for (reported, simulated, unused), labels in said.items():
        own = "cannot size one for its launch" if simulated is None else \
            f"sizes {simulated:,} for its launch, {simulated / reported:.3g}x"
        if unused:
            lines.append(f"not replayed at the KV pool its /metrics said, {reported:,} tokens: {unused} (the "
                         f"simulator {own}): {', '.join(labels)}")
        else:
            lines.append(f"replayed at the engine's KV pool, {reported:,} tokens as its /metrics said (the simulator "
                         f"{own}): {', '.join(labels)}")
    return lines



BEFORE_DEFAULTS = "the engine's defaults"
"""What a fit's *before* replays where no calibration of its key is in effect."""


@dataclass(frozen=True)
class RunCalibration:
    """The outcome of a run-level fit: factors, per-point comparison and the error before and after."""

    key: CalibrationKey
    base: Efficiency
    efficiency: Efficiency
    fitted: tuple[str, ...]
    points: list[PointComparison]
    error_before: float
    """The error of the *before* column: the calibration in effect for the key where one is (`in_effect`), else the
    engine's defaults."""
    error_after: float
    iterations: int
    provenance: dict[str, Any]
    started_from: str = "the defaults"
    """Where the search that won began: "the defaults" or "the stored calibration" (`fit_run`'s `start`)."""
    in_effect: str | None = None
    """The id of the stored calibration predictions of this key use now, which the *before* replays; None: the key is
    uncalibrated and the *before* is the engine's defaults."""
    error_defaults: float | None = None
    """The error with the engine's defaults (what a saved entry records as its `error_before`); None: as
    `error_before` (no calibration in effect)."""
    in_effect_efficiency: dict[str, float] = field(default_factory=dict)
    """The factors the calibration in effect sets (all of them, fitted now or not)."""
    left_out: list[str] = field(default_factory=list)
    """Points not fitted, each with its reason (agentic points whose traces cannot be verified)."""
    mixed_machines: list[str] = field(default_factory=list)
    """How the fitted points' machines differ (:func:`mixed_machines`): a fit across hosts fits their average."""

    def overrides(self) -> dict[str, float]:
        """The fitted factors only (what a stored calibration holds)."""
        return {k: getattr(self.efficiency, k) for k in self.fitted}

    @property
    def before(self) -> str:
        """What the *before* column replays, in words: the calibration in effect, or the engine's defaults."""
        return BEFORE_DEFAULTS if self.in_effect is None else f"the calibration in effect, '{self.in_effect}'"

    @property
    def improves(self) -> bool:
        """Whether the fit predicts the points better than the *before* does, on the error reported (whole replays,
        :func:`fit_error`): a fit that does not is never saved (:meth:`not_saved`)."""
        return bool(self.error_after < self.error_before)

    def before_value(self, name: str) -> float:
        """Factor `name` as the *before* has it: the calibration in effect's where it sets it, else the default."""
        return float(self.in_effect_efficiency.get(name, getattr(self.base, name)))

    def dropped(self) -> list[str]:
        """The factors the calibration in effect sets that this fit does not: a saved fit replaces the entry as a
        whole, so they would go back to the engine's defaults."""
        return [name for name in self.in_effect_efficiency if name not in self.fitted]

    @property
    def defaults_error(self) -> float:
        """The error with the engine's defaults."""
        return self.error_before if self.error_defaults is None else self.error_defaults

    def not_saved(self) -> str | None:
        """Why the fit must not be stored (it does not improve on the *before*), or None when it may be."""
        if self.improves:
            return None
        stays = "it stays in effect" if self.in_effect is not None else "the key stays uncalibrated"
        return (f"{self.key.label}: the fit's error {100 * self.error_after:.1f}% is not below the "
                f"{100 * self.error_before:.1f}% of {self.before}; {stays}")

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.as_json(),
                "efficiency": self.overrides(), "base": {k: getattr(self.base, k) for k in self.fitted},
                "before": self.before, "in_effect": self.in_effect,
                "in_effect_efficiency": self.in_effect_efficiency,
                "error_before": self.error_before, "error_after": self.error_after,
                "error_defaults": self.defaults_error, "improves": self.improves, "iterations": self.iterations,
                "started_from": self.started_from, "left_out": self.left_out,
                "mixed_machines": self.mixed_machines, "provenance": self.provenance,
                "points": [asdict(p) for p in self.points]}


def fit_error(points: Iterable[tuple[dict[str, float], dict[str, float], dict[str, float]]]) -> float:
    """Weighted mean of |predicted / measured - 1| over (measured, predicted, weights) of every fitted metric."""
    num = den = 0.0
    for measured, predicted, weights in points:
        for m, w in weights.items():
            if w > 0 and m in measured and m in predicted:
                num += w * abs(predicted[m] / measured[m] - 1.0)
                den += w
    return num / den if den else float("nan")


HEARTBEAT_S = 10.0
"""How often, at most, a fit says which replay it is at between its iteration lines (one iteration replays every
point once per fitted factor and once per trial step: minutes on a large run)."""


class _Heartbeat:
    """Says, at most every `every_s` seconds, where a fit is: the iteration, its pass over the points (a factor's
    sensitivity, a trial step), the point just replayed (k of N) and the seconds since the iteration began."""

    def __init__(self, say: Callable[[str], None] | None, every_s: float) -> None:
        self.say, self.every_s = say, every_s
        self.head, self.detail = "", ""
        self.since = self.last = time.monotonic()

    def begin(self, head: str) -> None:
        self.head, self.detail, self.since = head, "", time.monotonic()

    def at(self, detail: str) -> None:
        self.detail = detail

    def replayed(self, k: int, n: int, label: str) -> None:
        if self.say is None:
            return
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last = now
        where = f"{self.head}, {self.detail}" if self.detail else self.head
        self.say(f"{where}: point {k}/{n} replayed ({label}), {now - self.since:.0f} s in")


def _residuals(replays: list[_Replay], eff: dict[str, float],
               tick: Callable[[int, int, str], None] | None = None) -> tuple[np.ndarray, list[dict[str, float]]]:
    preds = []
    for k, replay in enumerate(replays, 1):
        preds.append(predict_metrics(replay, eff))
        if tick is not None:
            tick(k, len(replays), replay.point.label)
    res = []
    for r, pred in zip(replays, preds, strict=True):
        for m in METRICS:
            w = r.point.weights.get(m, 0.0)
            if w > 0 and m in r.point.measured:
                # a metric the prediction lacks (no profiled request) counts as a factor-of-e miss
                res.append(np.sqrt(w) * (np.log(pred[m] / r.point.measured[m]) if m in pred else 1.0))
    return np.asarray(res), preds


def default_factors(points: Iterable[MeasuredPoint]) -> tuple[str, ...]:
    """FIT_FACTORS, plus the front end's latency per request in flight when the points ran at two or more
    concurrencies (one above 1), plus the draft pass's cost when they ran speculative decoding."""
    points = list(points)
    concurrencies = {p.concurrency for p in points}
    load = LOAD_FACTORS if len(concurrencies) > 1 and max(concurrencies) > 1 else ()
    spec = SPEC_FACTORS if any(p.config.spec is not None for p in points) else ()
    return FIT_FACTORS + load + spec


def fit_run(points: list[MeasuredPoint], *, factors: tuple[str, ...] | None = None, max_iter: int = 8,
            start: Efficiency | None = None, fit_requests_per_lane: int | None = 4,
            say: Callable[[str], None] | None = None, heartbeat_s: float | None = None,
            in_effect: tuple[str, dict[str, float]] | None = None) -> RunCalibration:
    """Fit `factors` (default: :func:`default_factors`) so the simulator reproduces the measured points (all of one
    calibration key). `say` hears a line per iteration (each replays every point once per factor and more) and,
    between them, at most every `heartbeat_s` seconds (default :data:`HEARTBEAT_S`), the replay under way.

    The search starts from the engine's defaults (what a draft cost's pull leans to) and, when `start` is given (the
    key's stored calibration), from it too; the end with the lower reported error (:func:`fit_error` over whole
    replays, not the search's squared log error over request-capped ones) wins. From the defaults alone a few
    iterations can stop well short of factors already known (2026-12-03: the H200 Llama run refitted to 15.6 % while
    its stored factors still gave 11.4 %). The *before* of the comparison is `in_effect` (the id and factors of the
    calibration predictions of the key use now) where given, else the defaults: a fit that does not improve on it
    says so (:attr:`RunCalibration.improves`) and is not saved. Agentic points that cannot be shown to replay the
    measured traces (:func:`unverifiable`) are left out, with the reason in `left_out`."""
    if not points:
        raise ResultError("sim calibrate: no measured points to fit", fix="pass a run directory with job folders")
    factors = factors or default_factors(points)
    keys = {p.key for p in points}
    if len(keys) > 1:
        raise ResultError(f"sim calibrate: the points span several calibration keys "
                          f"{', '.join(k.label for k in sorted(keys))}",
                          fix="fit one calibration key at a time (calibrate_runs groups them)")
    fitted_metrics = sum(1 for p in points for m, w in p.weights.items() if w > 0 and m in p.measured)
    if fitted_metrics < len(factors) + 1:
        fewer = sorted(factors, key=lambda f: FEWER_FIRST.index(f) if f in FEWER_FIRST else len(FEWER_FIRST))
        fewer = fewer[:fitted_metrics - 1]
        raise ResultError(f"sim calibrate: {fitted_metrics} measured metrics cannot constrain {len(factors)} factors "
                          f"({', '.join(factors)})",
                          fix="measure more concurrency points (at least two, better four or more)"
                              + (f", or fit fewer factors: --factors {','.join(fewer)}" if fewer else ""))
    unknown = [f for f in factors if f not in FACTOR_BOUNDS]
    if unknown:
        raise ResultError(f"sim calibrate: cannot fit {unknown}", fix=f"fit a subset of {sorted(FACTOR_BOUNDS)}")
    replays = _replays(points, fit_requests_per_lane=fit_requests_per_lane)
    config = points[0].config.model_copy(update={"efficiency": {}, "calibrated": False})
    base = config.efficiency_factors()
    lo = np.log([FACTOR_BOUNDS[f][0] for f in factors])
    hi = np.log([FACTOR_BOUNDS[f][1] for f in factors])

    def eff_of(x: np.ndarray) -> dict[str, float]:
        return {f: float(np.exp(v)) for f, v in zip(factors, x, strict=True)}

    def start_of(eff: Efficiency) -> np.ndarray:  # a factor off by default starts at FIT_START (no log of 0)
        return np.clip(np.log([max(getattr(eff, f), FIT_START.get(f, 0.0)) for f in factors]), lo, hi)

    x0 = start_of(base)
    defaults = {f: float(getattr(base, f)) for f in factors}
    off = any(FIT_START.get(f, 0.0) > defaults[f] for f in factors)  # the *before* then replays the defaults
    prior = PRIOR_WEIGHT if set(SPEC_FACTORS) & set(factors) else 0.0

    heartbeat = _Heartbeat(say, HEARTBEAT_S if heartbeat_s is None else heartbeat_s)

    def residuals(xv: np.ndarray) -> tuple[np.ndarray, list[dict[str, float]]]:
        data, preds = _residuals(replays, eff_of(xv), heartbeat.replayed)
        return (np.concatenate([data, prior * (xv - x0)]) if prior else data), preds

    label = points[0].key.label
    mixed = mixed_machines(points)
    if say is not None:
        for line in mixed:  # said before minutes of fitting, and kept with the fit (`RunCalibration.mixed_machines`)
            say(f"warning: {label}: {line}; {MIXED_FIX}")
        say(f"{label}: replaying {count_of(len(points), 'point')} at the engine's defaults (where the fit starts)")
    heartbeat.begin(f"  {label}: replay at the defaults")
    r0, preds0 = residuals(x0)  # every point replayed once at the defaults: an agentic replay now knows its sizes
    left_out = [why for why in map(unverifiable, replays) if why is not None]
    if left_out:
        replays = [rp for rp in replays if unverifiable(rp) is None]
        points = [rp.point for rp in replays]
        if say is not None:
            for why in left_out:
                say(f"{label}: left out {why}")
        fitted_metrics = sum(1 for p in points for m, w in p.weights.items() if w > 0 and m in p.measured)
        if fitted_metrics < len(factors) + 1:
            raise ResultError(f"sim calibrate: {label}: {fitted_metrics} measured metrics remain once the points "
                              f"whose traces cannot be verified are left out ({'; '.join(left_out)})",
                              fix="calibrate from a run that recorded its corpus digest, or keep the trace file it "
                                  "replayed with its evidence and point its jobs at it")
        r0, preds0 = residuals(x0)
    starts: list[tuple[str, np.ndarray | None]] = [("the defaults", None)]
    if start is not None:
        starts.append(("the stored calibration", start_of(start)))
    if say is not None:
        say(f"calibrating {label}: {count_of(len(points), 'point')}, fitting {', '.join(factors)} (at most {max_iter} "
            f"iterations from {' and from '.join(name for name, _ in starts)})")
    ends: list[tuple[np.ndarray, list[dict[str, float]], int, str]] = []
    for name, x_start in starts:
        heartbeat.begin(f"  {label}: replay at {name}")
        at = (x0, r0, preds0) if x_start is None else (x_start, *residuals(x_start))
        x_end, _cost, preds, iterations = _levenberg_marquardt(residuals, *at, lo, hi, max_iter,
                                                               _prefixed(say, f"  {label} (from {name}): "),
                                                               heartbeat, factors, f"  {label} (from {name}): ")
        ends.append((x_end, preds, iterations, name))
    # a point the fit replayed whole (no request cap: an agentic point, or fit_requests_per_lane=None) already has
    # its predictions at the start and at the fitted factors (the simulator is deterministic); only the capped
    # points are replayed again, whole, for the comparison
    capped = [rp.max_requests is not None for rp in replays]
    for rp in replays:
        rp.max_requests = None

    def whole(x_at: np.ndarray, preds_at: list[dict[str, float]]) -> list[dict[str, float]]:
        return [predict_metrics(rp, eff_of(x_at)) if cap else p
                for rp, cap, p in zip(replays, capped, preds_at, strict=True)]

    def error_of(predicted: list[dict[str, float]]) -> float:
        return fit_error((p.measured, d, p.weights) for p, d in zip(points, predicted, strict=True))

    # each search's end is judged on the error the comparison reports (whole replays) and the lower one kept: the
    # search's squared log error over capped replays can end lower where the reported error ends higher
    if say is not None and len(ends) > 1:
        say(f"{label}: replaying every point whole at the end of each search (the lower reported error is kept)")
    judged = []
    for x_end, preds, iterations, name in ends:
        predicted = whole(x_end, preds)
        judged.append((error_of(predicted), predicted, x_end, iterations, name))
    error_after, after, x, iterations, started_from = min(judged, key=lambda j: float(np.nan_to_num(j[0], nan=np.inf)))
    fitted_eff = base.with_(**eff_of(x))
    defaults_before = [predict_metrics(rp, defaults if off else eff_of(x0)) if cap or off else p
                       for rp, cap, p in zip(replays, capped, preds0, strict=True)]
    error_defaults = error_of(defaults_before)
    before, error_before = defaults_before, error_defaults
    if in_effect is not None:  # the *before* is what predictions of this key use now: the fit must beat that
        if say is not None:
            say(f"{label}: replaying every point at calibration '{in_effect[0]}' (in effect: the before)")
        before = [predict_metrics(rp, dict(in_effect[1])) for rp in replays]
        error_before = error_of(before)
    comparisons = [PointComparison(label=p.label, concurrency=p.concurrency, scenario=p.scenario,
                                   measured=p.measured, before=b, after=a, weights=p.weights,
                                   excess_hit_rate=p.excess_hit_rate, acceptance_length=p.acceptance_length,
                                   kv_pool=p.kv_pool)
                   for p, b, a in zip(points, before, after, strict=True)]
    prov = dict(points[0].provenance)
    # what a stored calibration's label says (engine version, GPU, date) is every fitted point's, not the first's:
    # points of two runs (two engine versions, two days) are said as both
    for name in ("run_id", "date", "engine", "engine_version", "gpu", "model"):
        values = list(dict.fromkeys(str(p.provenance[name]) for p in points if p.provenance.get(name)))
        prov[name] = " + ".join(sorted(values) if name == "date" else values) or None
    prov["jobs"] = len(points)
    return RunCalibration(
        key=points[0].key, base=base, efficiency=fitted_eff, fitted=tuple(factors), points=comparisons,
        error_before=error_before, error_after=error_after, iterations=iterations, provenance=prov,
        started_from=started_from, left_out=left_out, mixed_machines=mixed,
        in_effect=None if in_effect is None else in_effect[0],
        error_defaults=None if in_effect is None else error_defaults,
        in_effect_efficiency={} if in_effect is None else dict(in_effect[1]),
    )


def _prefixed(say: Callable[[str], None] | None, prefix: str) -> Callable[[str], None] | None:
    return None if say is None else (lambda line: say(prefix + line))


def _levenberg_marquardt(residuals: Callable[[np.ndarray], tuple[np.ndarray, list[dict[str, float]]]],
                         x: np.ndarray, r: np.ndarray, preds: list[dict[str, float]], lo: np.ndarray,
                         hi: np.ndarray, max_iter: int, say: Callable[[str], None] | None,
                         heartbeat: _Heartbeat | None = None, names: tuple[str, ...] = (), prefix: str = "",
                         ) -> tuple[np.ndarray, float, list[dict[str, float]], int]:
    """Least squares from `x` (residuals `r`, predictions `preds` there) inside [lo, hi]: the end point, its squared
    error and predictions, and the iterations taken (finite-difference Jacobian; stops at < 0.1 % improvement).
    `heartbeat` hears which pass of which iteration runs (`names`: the factors, for the Jacobian's passes)."""
    cost = float(r @ r)
    lam, h, iterations = 1e-2, 0.1, 0
    for _ in range(max_iter):
        iterations += 1
        if say is not None:
            say(f"iteration {iterations}/{max_iter}, squared error {cost:.4g} (one pass over the points per factor, "
                "then one per trial step)")
        if heartbeat is not None:
            heartbeat.begin(f"{prefix}iteration {iterations}/{max_iter}")
        J = np.empty((len(r), len(x)))
        for j in range(len(x)):
            if heartbeat is not None:
                heartbeat.at(f"sensitivity to {names[j] if j < len(names) else j} ({j + 1}/{len(x)})")
            xj = x.copy()
            # step away from the nearer bound so the difference stays inside the box
            xj[j] += h if xj[j] + h <= hi[j] else -h
            rj, _ = residuals(xj)
            J[:, j] = (rj - r) / (xj[j] - x[j])
        improved = False
        for trial in range(6):
            if heartbeat is not None:
                heartbeat.at(f"trial step {trial + 1}")
            A = J.T @ J
            step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-9), -J.T @ r)
            x_new = np.clip(x + np.clip(step, -1.0, 1.0), lo, hi)
            r_new, p_new = residuals(x_new)
            c_new = float(r_new @ r_new)
            if c_new < cost:
                improved = cost - c_new > 1e-3 * cost
                x, r, cost, lam, preds = x_new, r_new, c_new, max(lam / 3, 1e-4), p_new
                break
            lam *= 4
        if not improved:
            break
    return x, cost, preds, iterations


def measured_groups(paths: Iterable[Path | str],
                    config_for: Any) -> tuple[dict[CalibrationKey, list[MeasuredPoint]], list[str]]:
    """The measured points under `paths` grouped by calibration key; points the simulator cannot model are skipped
    with a reason (a model without figures, a speculative run without its realised acceptance length), and so are
    points the simulator produced (:class:`NotMeasured`); when those are all there is, a ConfigError says so."""
    groups: dict[CalibrationKey, list[MeasuredPoint]] = {}
    skipped: list[str] = []
    paths = list(paths)
    folders = job_dirs(paths)
    unmeasured: dict[str, int] = {}
    for path in folders:
        try:
            point = measured_point(path, config_for)
            key = point.key
        except NotMeasured as exc:
            unmeasured[exc.source] = unmeasured.get(exc.source, 0) + 1
            skipped.append(exc.message)
            continue
        except LlmsweepError as exc:
            skipped.append(f"{path.name}: {exc.one_line()}")
            continue
        groups.setdefault(key, []).append(point)
    if folders and sum(unmeasured.values()) == len(folders):
        what = " and ".join(f"{n} {source}" for source, n in sorted(unmeasured.items()))
        raise ConfigError(
            f"sim calibrate: these are simulated results, not measurements: every point under "
            f"{', '.join(str(p) for p in paths)} ({what}) was produced by the simulator, and fitting the simulator "
            "to its own output calibrates nothing", fix=NOT_MEASURED_FIX)
    for pts in groups.values():
        pts.sort(key=lambda p: (p.scenario, p.concurrency, str(p.job.get("isl")), str(p.path)))
    return groups, skipped


def calibrate_runs(paths: Iterable[Path | str], config_for: Any, *, factors: tuple[str, ...] | None = None,
                   max_iter: int = 8, fit_requests_per_lane: int | None = 4,
                   say: Callable[[str], None] | None = None, heartbeat_s: float | None = None,
                   from_stored: bool = True) -> tuple[list[RunCalibration], list[str]]:
    """Fit every calibration key found under `paths`; points the simulator cannot model, or that it produced
    itself, are skipped with a reason (said first). `say` hears what is being fitted as it goes (`fit_run`). With
    `from_stored`, a key that has a stored calibration is also searched from it. Either way a stored calibration of
    the key is the fit's *before* (the calibration in effect, which a fit must improve on to be saved). A key whose
    fit fails is skipped too, said when it fails."""
    from llmsweep.sim.calibration import find_calibration

    groups, skipped = measured_groups(paths, config_for)
    if say is not None:
        for line in skipped:
            say(f"left out {line}")
    results = []
    for key, pts in groups.items():
        stored = find_calibration(key)
        start = None if stored is None or not from_stored else pts[0].config.model_copy(
            update={"efficiency": dict(stored[1].efficiency), "calibrated": False}).efficiency_factors()
        in_effect = None if stored is None else (stored[0], dict(stored[1].efficiency))
        try:
            results.append(fit_run(pts, factors=factors, max_iter=max_iter, start=start,
                                   fit_requests_per_lane=fit_requests_per_lane, say=say, heartbeat_s=heartbeat_s,
                                   in_effect=in_effect))
        except ResultError as exc:
            skipped.append(f"{key.label}: {exc.one_line()}")
            if say is not None:
                say(f"left out {skipped[-1]}")
    return results, skipped


@dataclass(frozen=True)
class HoldOut:
    """Out-of-sample check: factors fitted without some points, then asked to predict those points."""

    key: CalibrationKey
    patterns: tuple[str, ...]
    fit: RunCalibration
    """The fit on the in-sample points only (its own before/after errors are in-sample)."""
    points: list[PointComparison]
    """The held-out points: measured / predicted with the defaults (before) / with the in-sample fit (after)."""
    error_before: float
    error_after: float
    left_out: list[str] = field(default_factory=list)
    """Held-out points not predicted, each with its reason (agentic points whose traces cannot be verified)."""

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.as_json(),
                "patterns": list(self.patterns), "in_sample": self.fit.to_json(),
                "held_out": [asdict(p) for p in self.points], "left_out": self.left_out,
                "error_before": self.error_before, "error_after": self.error_after}


def hold_out(points: list[MeasuredPoint], patterns: Iterable[str], *, factors: tuple[str, ...] | None = None,
             max_iter: int = 8, fit_requests_per_lane: int | None = 4,
             say: Callable[[str], None] | None = None) -> HoldOut:
    """Fit on the points whose label matches none of `patterns` (shell-style, e.g. `fixed 1024/128 c4`,
    `agentic *`), then predict the matching ones with those factors and with the defaults."""
    from fnmatch import fnmatchcase

    pats = tuple(patterns)
    held = [p for p in points if any(fnmatchcase(p.label, pat) for pat in pats)]
    kept = [p for p in points if not any(fnmatchcase(p.label, pat) for pat in pats)]
    if not held or not kept:
        raise ResultError(
            f"sim calibrate --hold-out {' '.join(pats)}: {len(held)} of {len(points)} points match; a hold-out needs "
            "points on both sides",
            fix=f"match some, not all, of: {', '.join(p.label for p in points)}")
    replays = _replays(held)
    before = [predict_metrics(rp, {}) for rp in replays]  # before the fit: a hold-out with nothing to predict stops
    left_out = [why for why in map(unverifiable, replays) if why is not None]  # as the fit leaves them out
    before = [b for rp, b in zip(replays, before, strict=True) if unverifiable(rp) is None]
    replays = [rp for rp in replays if unverifiable(rp) is None]
    held = [rp.point for rp in replays]
    if not held:
        raise ResultError(f"sim calibrate --hold-out {' '.join(pats)}: every held-out point is left out, none is "
                          f"left to predict ({'; '.join(left_out)})",
                          fix="hold out points whose replay can be verified (fixed-length points, or agentic runs "
                              "that recorded their corpus digest)")
    fit = fit_run(kept, factors=factors or default_factors(points), max_iter=max_iter,
                  fit_requests_per_lane=fit_requests_per_lane, say=say)
    after = [predict_metrics(rp, fit.overrides()) for rp in replays]
    comparisons = [PointComparison(label=p.label, concurrency=p.concurrency, scenario=p.scenario,
                                   measured=p.measured, before=b, after=a, weights=p.weights,
                                   excess_hit_rate=p.excess_hit_rate, acceptance_length=p.acceptance_length,
                                   kv_pool=p.kv_pool)
                   for p, b, a in zip(held, before, after, strict=True)]
    return HoldOut(key=points[0].key, patterns=pats, fit=fit, points=comparisons, left_out=left_out,
                   error_before=fit_error((c.measured, c.before, c.weights) for c in comparisons),
                   error_after=fit_error((c.measured, c.after, c.weights) for c in comparisons))


def hold_out_splits(groups: dict[CalibrationKey, list[MeasuredPoint]],
                    patterns: Iterable[str]) -> tuple[list[CalibrationKey], list[str]]:
    """The keys with points on both sides of `patterns`, and why each other key has no hold-out check; a
    ConfigError when no key has one (a pattern matching no label, or every label), listing the labels there are."""
    from fnmatch import fnmatchcase

    pats = tuple(patterns)
    split, notes = [], []
    for key, pts in groups.items():
        held = sum(1 for p in pts if any(fnmatchcase(p.label, pat) for pat in pats))
        if 0 < held < len(pts):
            split.append(key)
        else:
            notes.append(f"{key.label}: --hold-out {' '.join(repr(p) for p in pats)} matches {held} of its "
                         f"{count_of(len(pts), 'point')} ({', '.join(p.label for p in pts)}); a hold-out needs points "
                         "on both sides")
    if groups and not split:
        raise ConfigError(f"sim calibrate: no hold-out to check: {'; '.join(notes)}",
                          fix="give --hold-out shell patterns that match some, not all, of a key's point labels "
                              "(e.g. 'fixed 1024/128 c4', 'agentic *')")
    return split, notes


def hold_out_runs(paths: Iterable[Path | str], config_for: Any, patterns: Iterable[str], *,
                  factors: tuple[str, ...] | None = None, max_iter: int = 8,
                  fit_requests_per_lane: int | None = 4,
                  say: Callable[[str], None] | None = None) -> tuple[list[HoldOut], list[str]]:
    """:func:`hold_out` for every calibration key under `paths` that has points on both sides of `patterns`, and
    why each other key has none: no points on one side (:func:`hold_out_splits`), or a hold-out that fails (too few
    in-sample points for the factors, nothing left to predict) — said through `say` when it fails, as `fit_run`
    says each hold-out fit, and not an end to the command: the main fit stands without it."""
    pats = tuple(patterns)
    groups, _ = measured_groups(paths, config_for)
    split, notes = hold_out_splits(groups, pats)
    out = []
    for key in split:
        try:
            out.append(hold_out(groups[key], pats, factors=factors, max_iter=max_iter, say=say,
                                fit_requests_per_lane=fit_requests_per_lane))
        except ResultError as exc:
            notes.append(f"{key.label}: the hold-out failed: {exc.one_line()}")
            if say is not None:
                say(f"no hold-out check for {notes[-1]}")
    return out, notes
