"""Records → `Summary` (`summary.json`): one streaming pass over `records.jsonl`, numpy columns built incrementally.

Follows AgentX §3 where it defines something: only successful profiling records feed latency, token, throughput and
QPS figures; warmup and failed records are counted in `requests`; QPS windows are 1 s wide from the first completion;
throughput divides by (last end − first send) of those records. Coverage of the profile window is measured from
each profiling request's in-flight span, the workload's scheduled think time excused (see the `gates` module doc).
The pass over the records is `accumulate`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from llmsweep import __version__
from llmsweep.errors import ResultError
from llmsweep.metrics import registry
from llmsweep.metrics.accumulate import Accumulator, accumulate
from llmsweep.metrics.gates import GateConfig, evaluate, idle_cap_from, window_coverage
from llmsweep.metrics.model import MEASURED, SCHEMA_VERSION, Summary, Validity
from llmsweep.metrics.server import summarise_server
from llmsweep.metrics.stats import PERCENTILES, clean, inverted_block, pkey, stat_block
from llmsweep.words import count_of

if TYPE_CHECKING:
    from llmsweep.power.samples import Telemetry


def _qps(ends: np.ndarray) -> dict[str, Any]:
    """Completions per 1-s window from the first completion, while the window end ≤ the last completion."""
    n = int(ends.size)
    if n < 2:
        return {"window_seconds": 1, "samples": 0}
    t0, t1 = float(ends.min()), float(ends.max())
    windows = int(np.floor(t1 - t0))
    if windows < 1:
        return {"window_seconds": 1, "samples": 0, "mean": n / (t1 - t0) if t1 > t0 else 0.0}
    idx = np.floor(ends - t0).astype(np.int64)
    if windows <= _QPS_DENSE_MAX:
        counts = np.bincount(idx[idx < windows], minlength=windows).astype(np.float64)
        block = stat_block(counts)
    else:  # one window per second of a span no run has (a time in ms): the empty windows are counted, not held
        block = _sparse_count_block(np.unique(idx[idx < windows], return_counts=True)[1], windows)
    block.pop("count")
    return {"window_seconds": 1, "samples": windows, **block}


_QPS_DENSE_MAX = 10_000_000
"""Windows held as an array up to this many (80 MB, 116 days); beyond, `_sparse_count_block`: a records file with
one time in the wrong unit spanned 50 years of 1-s windows, and their array took the machine's memory."""


def _sparse_count_block(nonzero: np.ndarray, windows: int) -> dict[str, Any]:
    """`stat_block` of `windows` counts of which all but `nonzero` are 0, without the array of zeros: numpy's linear
    percentiles between closest ranks of the sorted counts (the zeros first)."""
    nz = np.sort(nonzero.astype(np.float64))
    zeros = windows - nz.size

    def at(rank: np.ndarray) -> np.ndarray:
        return np.where(rank < zeros, 0.0, nz[np.clip(rank - zeros, 0, max(nz.size - 1, 0))] if nz.size else 0.0)

    ranks = np.asarray(PERCENTILES) / 100.0 * (windows - 1)
    lo = np.floor(ranks).astype(np.int64)
    hi = np.minimum(lo + 1, windows - 1)
    pct = at(lo) + (ranks - lo) * (at(hi) - at(lo))
    mean = float(nz.sum()) / windows
    out: dict[str, Any] = {"count": windows, "mean": mean}
    out.update({pkey(p): float(v) for p, v in zip(PERCENTILES, pct, strict=True)})
    out["std"] = float(np.sqrt((np.square(nz - mean).sum() + zeros * mean * mean) / windows))
    out["min"] = 0.0 if zeros else float(nz[0])
    out["max"] = float(nz[-1]) if nz.size else 0.0
    return out


def _rate(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def summarise(
    records: Iterable[dict[str, Any]] | Path | str,
    *,
    gpus: int,
    server_metrics: Path | str | Iterable[dict[str, Any]] | None = None,
    source: str = MEASURED,
    provenance: dict[str, Any] | None = None,
    gates: GateConfig | None = None,
    client: dict[str, Any] | None = None,
    telemetry: Telemetry | None = None,
) -> Summary:
    """Aggregate raw request records into the typed, versioned summary (see `docs/contracts.md`).

    `client` is what only the live run knows (worker CPU, connection waits, open-file limit, stop reason); the run
    writes it to `run.json` so `llmsweep summarize` reproduces the same summary from the directory. The power block
    integrates the `gpu_metrics.jsonl` beside records read from a file, else `telemetry` (what that file holds:
    `llmsweep predict` integrates its modelled power in memory).
    """
    if gpus < 1:
        raise ResultError(f"summarise: gpus={gpus}", fix="pass the number of GPUs serving the endpoint (>= 1)")
    gates = gates or GateConfig()
    client = client or {}
    acc = accumulate(records)

    duration = acc.last_end - acc.first_send if acc.successful and acc.last_end > acc.first_send else 0.0
    tpot = clean(acc.tpot.numpy())
    e2e_norm = clean(acc.e2e_norm.numpy())
    requests = {
        "total": acc.total,
        "successful": acc.successful,
        "failed": acc.failed,
        "cancelled": acc.cancelled,
        "warmup": acc.warmup,
        "warmup_failed": acc.warmup_failed,
        "warmup_cancelled": acc.warmup_cancelled,
        "context_overflow": acc.context_overflow,
        "error_categories": dict(sorted(acc.categories.items())),
        # undefined, not 0, when no profiling request finished (all cancelled, or none sent): 0.0 read as "no errors"
        "error_ratio": acc.failed / (acc.successful + acc.failed) if acc.successful + acc.failed else None,
        "output_length_mismatch": acc.osl_mismatch,
        "short_outputs": acc.short_outputs,
        **({"long_outputs": acc.long_outputs} if acc.long_outputs else {}),  # absent when none, as `implausible`
        "unreadable": acc.unreadable,
        **({"implausible": acc.implausible} if acc.implausible else {}),  # absent when none: summaries keep their bytes
    }
    tput: dict[str, Any] = {
        "duration_s": duration,
        "request_rps": _rate(acc.successful, duration) or 0.0,
        "input_tps": _rate(acc.input_sum, duration) or 0.0,
        "output_tps": _rate(acc.output_sum, duration) or 0.0,
        "total_tps": _rate(acc.input_sum + acc.output_sum, duration) or 0.0,
        "gpus": gpus,
    }
    tput["per_gpu"] = {k: tput[k] / gpus for k in ("input_tps", "output_tps", "total_tps")}

    window_start = acc.profile_first_send if acc.profile_first_send != float("inf") else None
    window_end = acc.last_end if acc.last_end != float("-inf") else None
    coverage_end: float | None
    if window_start is not None and gates.planned_duration_s is not None:
        planned_end = window_start + gates.planned_duration_s
        coverage_end = planned_end
    else:
        coverage_end = window_end
    coverage: float | None = None
    coverage_detail: dict[str, Any] | None = None
    if window_start is not None and coverage_end is not None and coverage_end > window_start:
        idle_cap = gates.max_idle_gap_s if gates.max_idle_gap_s is not None else idle_cap_from(provenance)
        coverage_detail = window_coverage(
            acc.span_start.numpy(), acc.span_end.numpy(),
            window_start=window_start, window_end=coverage_end, idle_cap_s=idle_cap,
        )
        coverage = coverage_detail["coverage"]

    server = summarise_server(
        Path(server_metrics) if isinstance(server_metrics, str) else server_metrics,
        start=window_start, end=window_end, require_prefix=gates.require_metrics_prefix,
    )
    from llmsweep.metrics.roles import deployment_blocks

    roles = deployment_blocks(provenance, Path(server_metrics) if isinstance(server_metrics, str) else server_metrics,
                              window_start, window_end)
    health = _client_health(acc, client)
    cache = {
        "theoretical_hit_rate": _rate(acc.theo_cached, acc.theo_input),
        "observed_hit_rate": _rate(acc.cached, acc.cached_prompt),
        "theoretical_cached_tokens": acc.theo_cached,
        "observed_cached_tokens": acc.cached,
    }
    # Energy over the window the tokens and the throughput were counted over (first successful send to last end):
    # a failed first request must not widen one and not the other (`benchmark_duration_mismatch`, or joules per
    # token over a longer window than its tokens).
    tput_start = acc.first_send if acc.successful and acc.first_send != float("inf") else window_start
    power = _power(records, telemetry, acc, tput, duration, tput_start, window_end, provenance)
    ttft = stat_block(clean(acc.ttft.numpy()))
    validity = _verdict(gates, requests=requests, coverage=coverage, coverage_detail=coverage_detail,
                        duration=duration, server=server, health=health, cache=cache, power=power,
                        latency_samples=int(ttft["count"]))
    for name, share in ((power or {}).get("roles") or {}).items():  # each role's watts beside what it did
        if name in (roles.get("roles") or {}):
            roles["roles"][name] = {**roles["roles"][name], "power": share}
    return Summary.model_validate({
        "schema_version": SCHEMA_VERSION,
        "source": source,
        "requests": requests,
        "latency": {
            "ttft": ttft,
            "tpot": stat_block(tpot),
            "itl": acc.itl.stat_block(),
            "e2el": stat_block(clean(acc.e2el.numpy())),
        },
        "interactivity": inverted_block(tpot),
        "e2e_norm_interactivity": inverted_block(e2e_norm),
        "tokens": {
            "input": stat_block(clean(acc.isl.numpy(), positive=False)),
            "output": stat_block(clean(acc.osl.numpy(), positive=False)),
            "input_total": acc.input_sum,
            "output_total": acc.output_sum,
        },
        "throughput": tput,
        "qps": _qps(acc.ends.numpy()),
        "cache": cache,
        "server_metrics": server,
        "client_health": health,
        "coverage": coverage,
        "validity": validity,
        "units": registry.units(),
        "provenance": {"client_version": __version__, **(provenance or {})},
        **({"power": power} if power is not None else {}),
        **roles,
    })


def invalid_power_note(power: dict[str, Any]) -> str:
    """What a verdict says of a power block that is not valid: its reasons, and their cause where the sampler knew
    it — why nothing could be sampled (and how to get power, `power.sampler.PowerProbe`), or the reads of the backend
    that failed during the job."""
    note = "power not valid: " + ", ".join(power["reasons"] or ["no samples"])
    if power.get("error"):
        note += f" ({power['error']})"
    elif power.get("read_failures"):
        note += (f" ({count_of(power['read_failures'], 'read')} of the power backend failed during the job; last: "
                 f"{power['read_error']})")
    return note


def _verdict(gates: GateConfig, *, requests: dict[str, Any], coverage: float | None,
             coverage_detail: dict[str, Any] | None, duration: float, server: dict[str, Any], health: dict[str, Any],
             cache: dict[str, Any], power: dict[str, Any] | None, latency_samples: int) -> dict[str, Any]:
    """The gates' verdict on a window's figures, power's requirement last: what `summarise` and `rejudge` share."""
    from llmsweep.power.integrate import NOT_SAMPLED

    validity = evaluate(
        gates,
        latency_samples=latency_samples,
        cache=cache,
        requests=requests,
        coverage=coverage,
        profile_duration_s=duration,
        server_metrics=server,
        client_health=health,
        stop_reason=health.get("stop_reason"),
        coverage_detail=coverage_detail,
    )
    if power is not None and not power["power_valid"] and power["reasons"] != [NOT_SAMPLED]:  # none asked for
        note = invalid_power_note(power)
        if power["required"]:  # after the gates' reasons: a window without requests has no power either
            validity["verdict"] = "invalid"
            validity["reasons"].append("required " + note)
        else:
            validity["warnings"].append(note)
    return validity


def rejudge(stored: Summary, gates: GateConfig, *, note: str) -> Summary:
    """The gates applied again to the figures a stored summary measured over its run's window, `note` (why the raw
    files could not be re-summarised) among the warnings; the read-back checks are cleared for the caller to apply.

    For a job folder whose raw files are a slice (evidence packed for a repository): the window, its requests and
    its server counters are the run's, as its summary recorded them; only the judgement is redone, by today's gates.
    """
    detail = stored.validity.coverage
    validity = _verdict(
        gates, requests=stored.requests.model_dump(), coverage=stored.coverage,
        coverage_detail=detail.model_dump() if detail is not None else None, duration=stored.throughput.duration_s,
        server=stored.server_metrics.model_dump(), health=stored.client_health.model_dump(),
        cache=stored.cache.model_dump(), power=stored.power.model_dump() if stored.power is not None else None,
        latency_samples=stored.latency.ttft.count,
    )
    validity["warnings"].append(note)
    judged = stored.model_copy(deep=True)
    judged.validity = Validity.model_validate(validity)
    judged.readback = None
    return judged


def _power(records: object, telemetry: Telemetry | None, acc: Accumulator, tput: dict[str, Any], duration: float,
           start: float | None, end: float | None, provenance: dict[str, Any] | None) -> dict[str, Any] | None:
    """The `power` block from the `gpu_metrics.jsonl` beside the records, else from `telemetry`; where power was not
    sampled, the block of the assumed cost alone (`power.integrate.unsampled`; None without a price either)."""
    from llmsweep.power.integrate import WorkDone, integrate, unsampled
    from llmsweep.power.samples import GPU_METRICS_FILE, read_gpu_metrics

    path = Path(records).parent / GPU_METRICS_FILE if isinstance(records, (str, Path)) else None
    sampled: tuple[Any, Any, Any] | None = None
    if path is not None and path.is_file():
        sampled = read_gpu_metrics(path)
    elif telemetry is not None:
        sampled = (*telemetry, [])
    hardware = (provenance or {}).get("hardware")
    sku = hardware.get("sku") if isinstance(hardware, dict) else hardware if isinstance(hardware, str) else None
    if isinstance(hardware, dict) and hardware.get("gpus") == 0:  # served on no GPU: no GPU-hour of the SKU to price
        sku = None
    work = WorkDone(start=start, end=end, duration_s=duration, successful=acc.successful,
                    input_tokens=int(acc.input_sum), output_tokens=int(acc.output_sum),
                    total_tps_per_gpu=tput["per_gpu"]["total_tps"], output_tps_per_gpu=tput["per_gpu"]["output_tps"],
                    gpus=int(tput["gpus"]))
    if sampled is None:  # the cost needs no samples: only the throughput and the catalog's price
        return unsampled(work, sku=sku)
    header, samples, problems = sampled
    return integrate(header, samples, work, sku=sku, problems=problems)


MIN_CPU_SHARE_WALL_S = 1.0
"""The shortest worker wall time whose CPU share can flag a saturated client. Over a few milliseconds (every request
answered 401 at once) the loop is busy start to end with its start-up and the burst of answers, a share near 100 %
that says nothing of whether it kept up with a load: the share is recorded, not judged."""


def _client_health(acc: Accumulator, client: dict[str, Any]) -> dict[str, Any]:
    """Schedule lag from the records, worker CPU and connection waits from the live run; flags saturation."""
    lag = acc.lag.numpy()
    lag_block = {
        "count": int(lag.size),
        "p50": float(np.percentile(lag, 50)) if lag.size else 0.0,
        "p99": float(np.percentile(lag, 99)) if lag.size else 0.0,
        "max": float(lag.max()) if lag.size else 0.0,
    }
    workers = [dict(w) for w in client.get("workers", [])]
    cpu_limit = float(client.get("saturation_cpu_ratio", 0.9))
    lag_limit = float(client.get("saturation_lag_p99_s", 0.05))
    reasons = []
    for w in workers:
        share_ = w.get("cpu_s", 0.0) / w["wall_s"] if w.get("wall_s") else 0.0
        w["cpu_share"] = share_
        if share_ >= cpu_limit and w.get("wall_s", 0.0) >= MIN_CPU_SHARE_WALL_S:
            reasons.append(f"worker {w.get('worker')} used {share_:.0%} CPU (limit {cpu_limit:.0%})")
    if lag_block["p99"] > lag_limit:
        reasons.append(f"p99 schedule lag {lag_block['p99'] * 1e3:.1f} ms above {lag_limit * 1e3:.0f} ms")
    tokens = acc.output_sum
    cpu_total = sum(w.get("cpu_s", 0.0) + w.get("helper_cpu_s", 0.0) for w in workers)  # loops and record helpers
    return {
        "workers": workers,
        "cpu_s_total": cpu_total,
        "cpu_us_per_output_token": cpu_total / tokens * 1e6 if tokens and workers else None,
        "schedule_lag_s": lag_block,
        "connection_queue_wait_s": sum(w.get("conn_queue_wait_s", 0.0) for w in workers),
        "connect_s": sum(w.get("connect_s", 0.0) for w in workers),
        "connections_opened": sum(w.get("connects", 0) for w in workers),
        "requests_retried": sum(w.get("retried", 0) for w in workers),
        "max_inflight": sum(w.get("max_inflight", 0) for w in workers),
        "fd_limit": client.get("fd_limit", {}),
        "stop_reason": client.get("stop_reason"),
        "saturated": bool(reasons),
        "saturation_reasons": reasons,
    }
