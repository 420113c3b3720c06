"""Energy over a profile window from sampled GPU power (InferenceX `utils/aggregate_power.py`, wave-2 spec §3.2).

Per GPU: samples within ±`margin_s` of the window, duplicate timestamps averaged, power interpolated linearly at the
window's start and end, trapezoid over [start, interior samples, end]. The job's energy is the sum over GPUs. Power
is valid only when every check passes; each failed check adds its reason code (deduplicated, in discovery order),
spelled as InferenceX spells them. Where the driver keeps an energy counter, the counter's rise over the same window
(interpolated the same way) is reported beside the integral as an advisory cross-check.

Cost per million tokens and tokens per second per all-in MW come from the catalog's assumptions (`power.yaml`) and
the throughput per GPU; they do not depend on the samples and are labelled `assumption`. A job whose power was not
sampled at all (`run --power-backend off`) keeps them: its block holds the cost alone (`unsampled`).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmsweep.option_spellings import flag as _flag
from llmsweep.power.samples import GpuSample, TelemetryHeader, read_gpu_metrics

if TYPE_CHECKING:
    from llmsweep.metrics.model import PowerBlock

_POWER_BACKEND = _flag("power_backend")
_REUSE = _flag("reuse")

INTEGRATION_METHOD = "per_device_trapezoidal_with_linear_boundary_interpolation"
MARGIN_S = 3.0
"""Samples further than this outside the window are not considered (InferenceX: ±3 s)."""
COUNTER_TOLERANCE = 0.05
"""The energy counter agrees with the integral when within 5 % (advisory, as InferenceX's accumulator check)."""


@dataclass(frozen=True, slots=True)
class WorkDone:
    """What the client measured over the window: the denominators of the per-token figures."""

    start: float | None
    end: float | None
    duration_s: float
    successful: int
    input_tokens: int
    output_tokens: int
    total_tps_per_gpu: float
    output_tps_per_gpu: float
    gpus: int


@dataclass(frozen=True, slots=True)
class GpuEnergy:
    energy_j: float
    peak_w: float
    samples: int
    max_gap_s: float
    counter_j: float | None
    counter_reset: bool = False
    """The counter went down between two readings of the window (a driver reload, a wrapped accumulator): its rise
    over the window is then not the energy, whatever its sign."""


def _series(samples: Sequence[GpuSample], value: str) -> list[tuple[float, float]]:
    """(t, value) sorted by time, duplicates of one timestamp averaged, samples without the value dropped."""
    got = [(s.t, v) for s in samples if (v := getattr(s, value)) is not None and math.isfinite(v)]
    if all(a[0] < b[0] for a, b in itertools.pairwise(got)):  # one sample per time, in order (a sampler's file)
        return [(t, (float(v) + 0.0) / 1) for t, v in got]  # (what the average of one value is: sum() adds to 0)
    by_t: dict[float, list[float]] = defaultdict(list)
    for t, v in got:
        by_t[t].append(float(v))
    return [(t, sum(vs) / len(vs)) for t, vs in sorted(by_t.items())]


def _times(series: Sequence[tuple[float, float]]) -> list[float]:
    """A series' times (sorted, each once: `_series`), to bisect."""
    return [t for t, _ in series]


def _at(series: Sequence[tuple[float, float]], times: Sequence[float], t: float) -> float:
    """Linear interpolation of a bracketing series at t (in its first pair of samples around t)."""
    j = bisect.bisect_left(times, t)  # the first sample at or after t; a pair ends there unless t is the first's
    i = j - 1 if j > 0 else 0 if times and times[0] == t else -1
    if i < 0 or i + 1 >= len(series):
        raise ValueError("t is not bracketed")
    (t0, v0), (t1, v1) = series[i], series[i + 1]
    return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def integrate_gpu(series: Sequence[tuple[float, float]], times: Sequence[float], start: float, end: float) -> float:
    """Trapezoid of a bracketing (t, W) series over [start, end], interpolated at both edges; joules."""
    inside = series[bisect.bisect_right(times, start):bisect.bisect_left(times, end)]  # start < t < end
    points = [(start, _at(series, times, start)), *inside, (end, _at(series, times, end))]
    return sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in itertools.pairwise(points))


def _span(series: Sequence[tuple[float, float]], times: Sequence[float], start: float,
          end: float) -> Sequence[tuple[float, float]]:
    """A bracketing series from its last sample at or before start to its first at or after end."""
    first = bisect.bisect_right(times, start) - 1
    last = bisect.bisect_left(times, end)
    if first < 0 or last >= len(series):
        raise ValueError("the series does not bracket the window")
    return series[first:last + 1]


def _window_gap(series: Sequence[tuple[float, float]], times: Sequence[float], start: float, end: float) -> float:
    """Longest gap between consecutive samples from the last one at or before start to the first at or after end."""
    return max((b[0] - a[0] for a, b in itertools.pairwise(_span(series, times, start, end))), default=0.0)


def gpu_energy(samples: Sequence[GpuSample], start: float, end: float, max_gap_s: float,
               reasons: list[str]) -> GpuEnergy | None:
    """One GPU's energy over the window, or None (with reason codes added) when its samples cannot give it."""
    margin = max(MARGIN_S, max_gap_s)  # a slower sampling interval allowed by --power-max-gap reaches further
    near = [s for s in samples if start - margin <= s.t <= end + margin]
    if any(s.power_w is not None and not math.isfinite(s.power_w) for s in near):
        reasons.append("invalid_power_sample")
    power = _series(near, "power_w")
    if not power:
        reasons.append("no_usable_power_samples")
        return None
    if len(power) < 2:
        reasons.append("insufficient_power_samples")
        return None
    if power[0][0] > start or power[-1][0] < end:
        reasons.append("benchmark_window_not_bracketed")
        return None
    times = _times(power)
    gap = _window_gap(power, times, start, end)
    if gap > max_gap_s:
        reasons.append("sampling_gap_exceeded")
    inside = [v for _, v in power[bisect.bisect_left(times, start):bisect.bisect_right(times, end)]]  # start..end
    peak = max([_at(power, times, start), _at(power, times, end), *inside])
    counter = _series(near, "energy_j")
    counter_j, reset = None, False
    if len(counter) >= 2 and counter[0][0] <= start and counter[-1][0] >= end:
        counter_times = _times(counter)
        counter_j = _at(counter, counter_times, end) - _at(counter, counter_times, start)
        reset = any(b < a for (_, a), (_, b) in itertools.pairwise(_span(counter, counter_times, start, end)))
    return GpuEnergy(integrate_gpu(power, times, start, end), peak, len(power), gap, counter_j, reset)


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


COST_FIGURES = ("usd_per_mtok_output", "usd_per_mtok_total", "tokens_per_s_per_mw_all_in")
"""The figures of a cost block (`cost_block`): each None where its assumption or the throughput is missing."""


def cost_block(sku: str | None, work: WorkDone) -> dict[str, Any] | None:
    """Cost per million tokens and provisioned tokens/s per MW from the catalog's assumptions, or None."""
    from llmsweep.catalog.power import find_power

    spec = find_power(sku)
    if spec is None:
        return None
    price = spec.usd_per_gpu_hour
    block: dict[str, Any] = {
        "assumption": True, "sku": spec.id, "usd_per_gpu_hour": price, "source": spec.cost_source,
        "date": spec.cost_date, "all_in_kw_per_gpu": spec.all_in_kw_per_gpu, "all_in_source": spec.all_in_source,
        **dict.fromkeys(COST_FIGURES),
    }
    if price is not None:
        if work.output_tps_per_gpu > 0:
            block["usd_per_mtok_output"] = price / (work.output_tps_per_gpu * 3600) * 1e6
        if work.total_tps_per_gpu > 0:
            block["usd_per_mtok_total"] = price / (work.total_tps_per_gpu * 3600) * 1e6
    if spec.all_in_kw_per_gpu is not None and work.total_tps_per_gpu > 0:
        block["tokens_per_s_per_mw_all_in"] = work.total_tps_per_gpu * 1000 / spec.all_in_kw_per_gpu
    return block


NOT_SAMPLED = "not_sampled"
"""The reason of a block whose job sampled no power (`unsampled`): nothing was asked to sample, so nothing was missed
(the verdict warns of no invalid power)."""


def unsampled(work: WorkDone, *, sku: str | None = None) -> dict[str, Any] | None:
    """The `power` block of a job whose GPU power was not sampled (`run --power-backend off`, a job folder without a
    `gpu_metrics.jsonl`): no source, no backend, no figure of power (reason `not_sampled`), and the assumed cost
    (`cost_block`), which needs only the throughput and the catalog's price; None where there is no cost either (an
    unknown SKU or one without a price, a server on no GPU, a job of no throughput: an eval): the summary then keeps
    the shape it had before power blocks existed."""
    cost = cost_block(sku, work)
    if cost is None or all(cost[k] is None for k in COST_FIGURES):
        return None
    return {"source": None, "backend": None, "power_valid": False, "reasons": [NOT_SAMPLED], "required": False,
            "cost": cost}


def reused_without_power(power: PowerBlock | None, run_id: str) -> str | None:
    """Why a job `run --reuse` stood on run `run_id`'s stored result, whose power block is `power`, has no GPU power,
    and how to get it, as `run` and its dashboard say it; None where the result recorded power (valid or not: its
    verdict says the rest). It recorded none where its run sampled none (`run --power-backend off`: no block, or the
    assumed cost's alone) or no backend could sample where it ran (`PowerBlock.unrecorded`); where the simulator
    models no power for the job, that reason alone (measuring it again would record none either)."""
    if power is None or power.reasons == [NOT_SAMPLED]:
        why = f"its run sampled none: {_POWER_BACKEND} off"
    elif power.unrecorded and "not_modelled" in power.reasons:
        # the simulator models no power for this job: running it again without --reuse records none either
        return power.unrecorded
    elif power.unrecorded:
        why = power.unrecorded
    else:
        return None
    return (f"{_REUSE} stands on run {run_id}'s stored result, which recorded no power ({why}); run without "
            f"{_REUSE} to record it")


def power_block(path: Path, work: WorkDone, *, sku: str | None = None) -> dict[str, Any]:
    """The summary's `power` block for a job whose `gpu_metrics.jsonl` is `path`."""
    header, samples, problems = read_gpu_metrics(path)
    return integrate(header, samples, work, sku=sku, problems=problems)


def integrate(header: TelemetryHeader | None, samples: Sequence[GpuSample], work: WorkDone, *,
              sku: str | None = None, problems: Sequence[str] = ()) -> dict[str, Any]:
    """Validate and integrate; every figure measured from samples is None unless `power_valid`."""
    header = header or TelemetryHeader(backend=None)
    reasons: list[str] = []
    if problems:
        reasons.append("telemetry_file_unreadable" if "telemetry_file_unreadable" in problems
                       else "invalid_timestamp_sample")
    start, end = work.start, work.end
    if start is None or end is None or not end > start:
        reasons.append("invalid_benchmark_window")
    elif abs(work.duration_s - (end - start)) > max(0.5, 0.01 * (end - start)):
        reasons.append("benchmark_duration_mismatch")
    if work.successful <= 0:
        reasons.append("invalid_successful_query_count")
    if work.input_tokens <= 0:
        reasons.append("invalid_input_token_count")
    if work.output_tokens <= 0:
        reasons.append("invalid_output_token_count")
    if header.not_modelled:  # nothing was to be sampled: the simulator does not model this job's power
        reasons.append("not_modelled")
    else:
        if header.backend is None or header.error:
            reasons.append("telemetry_unavailable")
        if not samples:
            reasons.append("telemetry_file_empty")
    by_gpu: dict[str, list[GpuSample]] = defaultdict(list)
    for s in samples:
        by_gpu[s.gpu].append(s)
    expected = header.expected_gpus if header.expected_gpus is not None else work.gpus
    if samples and len(by_gpu) != expected:
        reasons.append("expected_gpu_count_mismatch")
    if header.missing:
        reasons.append("node_telemetry_missing")
    for role, gpus in header.role_gpus.items():
        if samples and sum(1 for g in by_gpu if header.gpu_roles.get(g) == role) != gpus:
            reasons.append("role_gpu_count_mismatch")
    per_gpu: dict[str, GpuEnergy] = {}
    if start is not None and end is not None and end > start:
        # GPUs that read alike (a tensor-parallel group the simulator models draws alike, its GPUs next to each other)
        # have the same energy: what `gpu_energy` reads of a GPU's samples (time, power, counter) equal to the GPU
        # before's is not integrated again, its figures and reasons are that GPU's
        last: tuple[list[tuple[float, float | None, float | None]], GpuEnergy | None, list[str]] | None = None
        for gpu in sorted(by_gpu, key=_gpu_order):
            readings = [(s.t, s.power_w, s.energy_j) for s in by_gpu[gpu]]
            if last is None or last[0] != readings:
                found: list[str] = []
                last = (readings, gpu_energy(by_gpu[gpu], start, end, header.max_gap_s, found), found)
            reasons.extend(last[2])
            if last[1] is not None:
                per_gpu[gpu] = last[1]
    reasons = list(dict.fromkeys(reasons))
    valid = not reasons and bool(per_gpu)
    block: dict[str, Any] = {
        "source": header.source if samples else None, "backend": header.backend, "power_valid": valid,
        "reasons": reasons,
        "required": header.require, "integration_method": INTEGRATION_METHOD,
        "window": {"start": start, "end": end}, "interval_s": header.interval_s, "max_gap_s": header.max_gap_s,
        "expected_gpus": expected, "observed_gpus": len(by_gpu), "observed_gpu_ids": sorted(by_gpu, key=_gpu_order),
        "per_gpu_sample_counts": {g: e.samples for g, e in per_gpu.items()},
        "per_gpu_max_sample_gap_s": {g: round(e.max_gap_s, 3) for g, e in per_gpu.items()},
        "per_gpu_energy_j": {g: round(e.energy_j, 3) for g, e in per_gpu.items()},
        "cost": cost_block(sku, work),
    }
    if header.error:
        block["error"] = header.error
    if header.read_failures:
        block["read_failures"] = header.read_failures
        block["read_error"] = header.read_error
    if header.missing:
        block["missing"] = list(header.missing)
    if header.gpu_roles or header.role_gpus:
        block["roles"] = role_power(header, by_gpu, per_gpu if valid else {}, work)
    if valid and start is not None and end is not None:
        energy = sum(e.energy_j for e in per_gpu.values())
        seconds = end - start
        total_power = energy / seconds
        tokens = work.input_tokens + work.output_tokens
        block.update({
            "energy_j": energy,
            "avg_total_gpu_power_w": total_power,
            "avg_power_w": total_power / len(per_gpu),
            "peak_power_w": max(e.peak_w for e in per_gpu.values()),
            "joules_per_successful_query": energy / work.successful,
            "joules_per_input_token": energy / work.input_tokens,
            "joules_per_output_token": energy / work.output_tokens,
            "joules_per_total_token": energy / tokens,
            "tokens_per_joule": tokens / energy if energy > 0 else None,
            "output_tokens_per_joule": work.output_tokens / energy if energy > 0 else None,
            # Throughput over the client's duration against the GPUs' measured power over the same window.
            "tokens_per_s_per_mw": _ratio(work.total_tps_per_gpu * work.gpus, total_power / 1e6),
            "output_tokens_per_s_per_mw": _ratio(work.output_tps_per_gpu * work.gpus, total_power / 1e6),
        })
        counters = [e.counter_j for e in per_gpu.values()]
        if counters and all(c is not None for c in counters):
            counted = sum(c for c in counters if c is not None)
            deviation = abs(counted - energy) / energy if energy > 0 else None
            # a counter that went down anywhere in the window (a reset, a wrap) is a negative delta even when it
            # ended above where it began: its rise is then no measure of the energy
            negative = any(c is not None and c < 0 for c in counters) or any(e.counter_reset
                                                                              for e in per_gpu.values())
            block["counter_check"] = {
                "energy_j": counted, "deviation": deviation, "negative_delta": negative,
                "within_tolerance": deviation is not None and deviation <= COUNTER_TOLERANCE and not negative,
            }
    return block


def role_power(header: TelemetryHeader, by_gpu: dict[str, list[GpuSample]], per_gpu: dict[str, GpuEnergy],
               work: WorkDone) -> dict[str, dict[str, Any]]:
    """Each role's share of a disaggregated deployment's energy (InferenceX's multinode aggregation, wave-2 spec
    §3.3): the role's GPUs' energy over the whole window (not only while the role worked), its average power per GPU,
    and the energy per token of the tokens the role handles (prefill: input tokens, decode: output tokens). Figures
    are None unless the deployment's power is valid (`per_gpu` empty)."""
    roles = dict.fromkeys([*header.role_gpus, *dict.fromkeys(header.gpu_roles.values())])
    out: dict[str, dict[str, Any]] = {}
    seconds = (work.end - work.start) if work.start is not None and work.end is not None else 0.0
    for role in roles:
        ids = sorted((g for g in by_gpu if header.gpu_roles.get(g) == role), key=_gpu_order)
        energies = [per_gpu[g] for g in ids if g in per_gpu]
        gpus = header.role_gpus.get(role, len(ids))
        block: dict[str, Any] = {"expected_gpus": gpus, "observed_gpus": len(ids), "gpu_ids": ids,
                                 "energy_j": None, "avg_total_power_w": None, "avg_power_w": None,
                                 "peak_power_w": None, "joules_per_input_token": None,
                                 "joules_per_output_token": None}
        if energies and seconds > 0:
            energy = sum(e.energy_j for e in energies)
            block.update(energy_j=energy, avg_total_power_w=energy / seconds,
                         avg_power_w=energy / seconds / len(energies), peak_power_w=max(e.peak_w for e in energies))
            if role == "prefill" and work.input_tokens > 0:
                block["joules_per_input_token"] = energy / work.input_tokens
            if role == "decode" and work.output_tokens > 0:
                block["joules_per_output_token"] = energy / work.output_tokens
        out[role] = block
    return out


def _gpu_order(gpu: str) -> tuple[int, str]:
    return (int(gpu), "") if gpu.isdigit() else (1 << 30, gpu)
