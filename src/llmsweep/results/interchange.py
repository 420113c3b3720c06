"""Export and import of results: our JSON/CSV, and InferenceX aggregate rows (inferencex-core-spec §6.2/§6.3).

InferenceX rows are flat: identity keys (`hw`, `conc`, `image`, `model`, `infmax_model_prefix`, `framework`,
`precision`, `spec_decoding`, `disagg`, `isl`, `osl`, `tp`, `ep`, `dp_attention`, …), per-GPU throughput and
latencies in seconds as `mean_/median_/p90_/p99_/p99.9_/std_<metric>`, interactivity as `<stat>_intvty`. Newer
agentic aggregates (v3) nest metrics under `request_metrics` and `server_metrics`; both are read (`_flat`).

Exported rows carry an `llmsweep` block (source, verdict, reasons, ids) so a round trip keeps the source; imported
rows without it are `measured` with origin `inferencex`. Imported rows become their own run in the store, so they
are compared or plotted only when asked for by run id.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from llmsweep.errors import ResultInputError
from llmsweep.jsonline import FOREIGN_ENCODING, finite_or_null, load_json_file
from llmsweep.metrics.model import MEASURED, SOURCES, VIRTUAL, InvertedStats, Stats, Summary, Verdict
from llmsweep.metrics.registry import HOT_BY_NAME, HOT_COLUMNS, HOT_NAMES, HotColumn
from llmsweep.option_spellings import flag as _flag
from llmsweep.results.evals import EVAL_HALF_OF, inferencex_eval_rows, is_eval_row, points_from_eval_rows
from llmsweep.results.extract import extract_hot
from llmsweep.results.frontier import is_agentic
from llmsweep.results.identity import (
    PointIdentity,
    agentic_scenario,
    dp_attention_of,
    get_field,
    gpus_of,
    identity_from_dict,
    identity_from_job,
    scenario_id_of,
)
from llmsweep.results.import_checks import (
    IDENTITY_LEAST,
    PEAKS,
    TOPOLOGY_LEAST,
    Figure,
    ceiling,
    judge,
    read_summary,
    summary_counts,
    summary_figures,
    whole,
)
from llmsweep.results.point import RESULT_COLUMNS, ResultPoint, describe, result_id_for
from llmsweep.results.repeats import Repeats, combine_repeats
from llmsweep.words import count_of, noun

_FORCE = _flag("force")
_FORMAT = _flag("format")
_GPUS = _flag("gpus")
_OUT = _flag("out")


EXPORT_FORMAT = "llmsweep-results"
EXPORT_VERSION = 1
_STATS = (("mean", "mean"), ("median", "p50"), ("p90", "p90"), ("p99", "p99"), ("p99.9", "p99.9"), ("std", "std"))
_AGENTIC_STATS = (("mean", "mean"), ("median", "p50"), ("p75", "p75"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"),
                  ("p99.9", "p99.9"), ("std", "std"))
"""An AgentX row's statistics: its aggregates' (agentx-spec §6.2: `{mean|median|p75|p90|p95|p99|std}_<metric>`) and the
p99.9 every InferenceX row has (std last: `_stat_fields` leaves it out of interactivity)."""
_LATENCIES = ("ttft", "tpot", "itl", "e2el")


def _dig(doc: Mapping[str, Any], path: str) -> Any:
    """Follow a dotted path through an InferenceX row (a foreign format: ours are read as a typed Summary)."""
    node: Any = doc
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _number(doc: Mapping[str, Any], *keys: str) -> float | None:
    """The first finite number under one of `keys` of an InferenceX row (bools are not numbers here)."""
    for key in keys:
        value = doc.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


# ------------------------------------------------------------------------------------------------ export


def _latency_blocks(summary: Summary, *, agentic: bool = False) -> dict[str, Stats]:
    """InferenceX's latency blocks of a summary. `itl` means two things there: a fixed-length row's is
    benchmark_serving's pooled gaps between stream chunks (our `latency.itl`); an AgentX row's is AIPerf's per-request
    inter-token latency, (E2EL − TTFT)/(OSL − 1), the samples of our `tpot` (agentx-spec §3.3), from which the app
    re-derives interactivity — the chunk gaps there read MTP's ~3.4-token chunks as one token each, and the
    interactivity the app drew was a third of what the run measured."""
    lat = summary.latency
    return {"ttft": lat.ttft, "tpot": lat.tpot, "itl": lat.tpot if agentic else lat.itl, "e2el": lat.e2el}


def _worker_gpus(worker: Mapping[str, Any]) -> int:
    n = int(get_field(worker, "num-worker") or 1)
    return (n * int(get_field(worker, "tp") or 1) * int(get_field(worker, "pp") or 1)
            * int(get_field(worker, "pcp-size") or 1))


def _multinode_fields(point: ResultPoint, row: dict[str, Any]) -> None:
    """Prefill/decode topology and its per-GPU figures: a fixed-length row's §6.2 normalisation (output per decode
    GPU, input per prefill GPU); an agentic row's every figure per GPU of the whole deployment, as AgentX divides them
    (its `per_gpu` = totals / prefill + decode GPUs) and as the summary's `throughput.per_gpu` does."""
    prefill, decode = get_field(point.job, "prefill"), get_field(point.job, "decode")
    if not (isinstance(prefill, Mapping) and isinstance(decode, Mapping)):
        return
    row["is_multinode"] = True
    dpa = dp_attention_of(point.job)
    for role, w in (("prefill", prefill), ("decode", decode)):
        row.update({f"{role}_tp": get_field(w, "tp"), f"{role}_pp": get_field(w, "pp") or 1,
                    f"{role}_dcp_size": get_field(w, "dcp-size") or 1,
                    f"{role}_pcp_size": get_field(w, "pcp-size") or 1,
                    f"{role}_ep": get_field(w, "ep"), f"{role}_dp_attention": dpa.role_flag(role),
                    f"{role}_num_workers": get_field(w, "num-worker") or 1})
        row.pop(role, None)
    p_gpus, d_gpus = _worker_gpus(prefill), _worker_gpus(decode)
    row["num_prefill_gpu"], row["num_decode_gpu"] = p_gpus, d_gpus
    for key in ("tp", "pp", "dcp_size", "pcp_size", "ep", "dp_attention"):
        row.pop(key, None)
    if point.summary is not None:
        total, out = point.summary.throughput.total_tps, point.summary.throughput.output_tps
        every = p_gpus + d_gpus
        row["tput_per_gpu"] = total / every
        if is_agentic(point):
            row["output_tput_per_gpu"], row["input_tput_per_gpu"] = out / every, (total - out) / every
        else:
            row["output_tput_per_gpu"] = out / (d_gpus or every)
            row["input_tput_per_gpu"] = (total - out) / p_gpus if p_gpus else None


def inferencex_row(point: ResultPoint) -> dict[str, Any]:
    """One InferenceX aggregate row for a result (single-node shape, or the multinode one for disagg jobs). A row
    imported from InferenceX exports as it was published (its multinode topology, per-GPU throughput and power
    fields as they came), with the `llmsweep` block of where it is stored now."""
    if point.summary is None and point.imported.get("hw") is not None:
        published = {k: v for k, v in point.imported.items() if k != "llmsweep"}
        block = _llmsweep_block(point)
        came = point.imported.get("llmsweep")
        if isinstance(came, Mapping) and "power" in came and "power" not in block:
            block["power"] = came["power"]  # how its run measured power, as that run's export said (no summary here)
        published["llmsweep"] = block
        return published
    i, job = point.identity, point.job
    runner = get_field(job, "runner-label", "runner") or i.hardware
    row: dict[str, Any] = {
        "hw": runner, "conc": i.conc, "image": i.image, "model": i.model,
        "infmax_model_prefix": get_field(job, "model-prefix") or i.model_short,
        "framework": i.engine, "precision": i.precision, "spec_decoding": i.spec, "disagg": i.disagg,
        "is_multinode": False, "tp": i.tp, "pp": i.pp, "dcp_size": i.dcp, "pcp_size": i.pcp, "ep": i.ep,
        # Single node: the DP_ATTENTION string process_result.py received (core spec §6.2, wave-2 §5.1), from the
        # job record as eval rows read it (`dp_attention_of`); a multinode row has its roles' booleans instead.
        "dp_attention": dp_attention_of(job).inferencex(), "kv_offloading": i.offload,
        "recipe_fingerprint": get_field(job, "recipe-fingerprint") or point.provenance.get("recipe_fingerprint"),
        "num_requests_total": point.num_requests, "num_requests_successful": point.num_successful,
    }
    if i.router:
        name, _, version = i.router.partition("@")
        row["router"] = {"name": name, "version": version}
    if i.offload_backend:
        row["kv_offload_backend"] = {"name": i.offload_backend}
    if i.isl is not None and i.osl is not None and not is_agentic(point):
        row["isl"], row["osl"] = i.isl, i.osl
    else:
        row["scenario_type"] = i.scenario
    for col in ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu"):
        row[col] = point.metric(col)
    _multinode_fields(point, row)
    if point.summary is not None:
        row.update(_stat_fields(point.summary, agentic=is_agentic(point)))
        row.update(_power_fields(point.summary))
    else:  # a row imported from elsewhere: the statistics it published
        flat = _flat(point.imported)
        for name in (*_LATENCIES, "intvty", "e2e_norm_intvty"):
            for prefix in dict.fromkeys(p for p, _ in (*_STATS, *_AGENTIC_STATS)):
                if (value := _number(flat, f"{prefix}_{name}")) is not None:
                    row[f"{prefix}_{name}"] = value
    row["llmsweep"] = _llmsweep_block(point)
    return row


def _llmsweep_block(point: ResultPoint) -> dict[str, Any]:
    """Our block of an exported row: source, verdict, ids, hardware, corpus and how power was measured."""
    i = point.identity
    block: dict[str, Any] = {"source": point.source, "verdict": point.verdict, "reasons": list(point.reasons),
                             "result_id": point.result_id, "run_id": point.run_id, "job_id": point.job_id,
                             "origin": point.origin, "hardware": i.hardware, "corpus": i.corpus or None}
    if isinstance(repeats := (point.provenance or {}).get("repeats"), dict):  # an imported mean of repeats, again
        block["repeats"] = repeats
    if clock := (point.provenance or {}).get("clock"):  # virtual or wall-clock time: what a comparison tells apart
        block["clock"] = clock
    # every figure of the point's as it is stored, exact: the row's InferenceX fields lack some (a fixed-length row
    # has no requests per second, cache hit rate or KV peak) and round others (power to 3 places, J per token to 6,
    # whose efficiency an import had recomputed); an import of the row reads them back from here
    block["metrics"] = {name: point.metrics.get(name) for name in HOT_NAMES}
    power = point.summary.power if point.summary is not None else None
    if power is not None:
        block["power"] = {"source": power.source, "backend": power.backend, "reasons": list(power.reasons),
                          "tokens_per_joule": power.tokens_per_joule,
                          "cost": power.cost.model_dump(mode="json") if power.cost is not None else None}
    return block


POWER_SCHEMA_VERSION = 2
"""InferenceX's `power_metric_schema_version` (wave-2 spec §3.2)."""
_POWER_FIELDS = (("total_gpu_energy_j", "energy_j", 3), ("avg_total_gpu_power_w", "avg_total_gpu_power_w", 3),
                 ("avg_power_w", "avg_power_w", 3), ("joules_per_successful_query", "joules_per_successful_query", 6),
                 ("joules_per_input_token", "joules_per_input_token", 6),
                 ("joules_per_output_token", "joules_per_output_token", 6),
                 ("joules_per_total_token", "joules_per_total_token", 6))
"""(InferenceX field, power block field, decimals): `_w`/`_j` to 3 places, ratios to 6, as aggregate_power writes."""
_ROLE_POWER_FIELDS = (("prefill", "gpu_energy_j", "energy_j", 3), ("prefill", "avg_power_w", "avg_power_w", 3),
                      ("prefill", "joules_per_input_token", "joules_per_input_token", 6),
                      ("decode", "gpu_energy_j", "energy_j", 3), ("decode", "avg_power_w", "avg_power_w", 3),
                      ("decode", "joules_per_output_token", "joules_per_output_token", 6))
"""(role, InferenceX field after `<role>_`, role power field, decimals): the per-role keys a multinode row carries
beside the seven whole-deployment ones (aggregate_power_multinode, wave-2 spec §3.3): each role's GPU energy over the
whole window, its average power per GPU, J per input token (prefill) and per output token (decode)."""
LEGACY_FIELDS = {"gpu_energy_j": "total_gpu_energy_j"}
"""Fields earlier llmsweep exports spelled otherwise than InferenceX (core spec §6.2): renamed on import."""


def _power_fields(summary: Summary) -> dict[str, Any]:
    """InferenceX's power keys: `power_metric_schema_version`, `power_valid` 1/0 and, when valid, the energy figures
    (a 0 verdict carries none, as the app deletes them at ingest), with a disaggregated deployment's per-role figures
    where the run measured or modelled them (`power.roles`). A job that sampled no power (`run --power-backend off`) has
    the 0 verdict, as InferenceX's power step gives every row it has no samples for; a figure the run did not record
    is absent, never zero. Where the watts came from (measured or the simulator's model) is the `llmsweep` block's
    `power.source`, as the run recorded it."""
    power = summary.power
    row: dict[str, Any] = {"power_metric_schema_version": POWER_SCHEMA_VERSION,
                           "power_valid": int(power is not None and power.power_valid)}
    if power is None or not power.power_valid:
        return row
    for name, attr, places in _POWER_FIELDS:
        value = getattr(power, attr)
        if value is not None:
            row[name] = round(float(value), places)
    for role, name, attr, places in _ROLE_POWER_FIELDS:
        share = (power.roles or {}).get(role)
        value = getattr(share, attr) if share is not None else None
        if value is not None:
            row[f"{role}_{name}"] = round(float(value), places)
    return row


AGENTX_SCALARS: dict[str, str] = {
    "gpu_cache_hit_rate": "server_gpu_cache_hit_rate",
    "gpu_kv_usage_max": "gpu_kv_cache_usage_pct",
    "request_qps": "mean_qps",
}
"""Hot column -> the AgentX row's scalar: what an agentic row exports (`_stat_fields`) and an import reads back into
the column (`request_qps` is the mean of the completions per 1-s window, AgentX's `qps` block's and ours alike,
agentx-spec §3.4). The ratios are fractions, as the columns are: AgentX's `gpu_kv_cache_usage_pct` too, whatever its
name says
(its aggregation's `normalize_fraction` divides an engine's gauge above 1.5 by 100; the app's ingest keeps 0.82 as
0.82, agentx-spec §3.7). An import reads a KV usage above `PERCENT_ABOVE` as a percentage, as AgentX does: our exports
before 2026-12 wrote it ×100."""

AGENTX_POOL = "kv_cache_pool_tokens"
"""The AgentX aggregate's GPU KV pool (tokens, the deployment's engines summed): `KvCache.pool_tokens`, which we read
from the engines' /metrics where AgentX parses their start-up logs (agentx-spec §3.7)."""

PERCENT_ABOVE = 1.5
"""A KV usage above this is a percentage (AgentX's `normalize_fraction`: a peak gauge may exceed 1 a little)."""


def _stat_fields(summary: Summary, *, agentic: bool = False) -> dict[str, float]:
    """InferenceX's `<stat>_<metric>` fields of one of our summaries (latencies in seconds; a statistic without a
    sample, as of a point whose every request failed, is absent); an AgentX row's statistics and scalars as its
    aggregates flatten them (agentx-spec §6.2)."""
    row: dict[str, float | None] = {}
    stats = _AGENTIC_STATS if agentic else _STATS
    for name, block in _latency_blocks(summary, agentic=agentic).items():
        for prefix, stat in stats:
            row[f"{prefix}_{name}"] = block.stat(stat)
    intv: InvertedStats = summary.interactivity
    for prefix, stat in stats[:-1]:  # std of an inverted quantity is meaningless (InferenceX flaw); not exported
        row[f"{prefix}_intvty"] = intv.stat(stat)
    if agentic:  # completions per 1-s window, as AgentX's `qps` block flattens (its mean: `AGENTX_SCALARS`)
        q = summary.qps
        row.update({"mean_qps": q.mean, "median_qps": q.p50, "p75_qps": q.p75, "p90_qps": q.p90, "p95_qps": q.p95,
                    "p99_qps": q.p99, "p99.9_qps": q.p99_9, "std_qps": q.std})
        tput, server = summary.throughput, summary.server_metrics
        kv, cache = server.kv_cache, server.cache
        row.update(input_tput_tps=tput.input_tps, output_tput_tps=tput.output_tps, total_tput_tps=tput.total_tps,
                   theoretical_cache_hit_rate=summary.cache.theoretical_hit_rate,
                   server_cpu_cache_hit_rate=cache.cpu_hit_rate if cache is not None else None)
        row[AGENTX_SCALARS["gpu_cache_hit_rate"]] = cache.gpu_hit_rate if cache is not None else None
        # AgentX's KV usage is max-first: the peak over the window, not the mean occupancy
        row[AGENTX_SCALARS["gpu_kv_usage_max"]] = kv.gpu_usage_max if kv is not None else None
        # the pool its engines reported, summed over them, as AgentX's aggregate has it (its figure from their logs)
        row[AGENTX_POOL] = kv.pool_tokens if kv is not None else None
    norm = summary.e2e_norm_interactivity
    for prefix, stat in (("median", "p50"), ("p75", "p75"), ("p90", "p90")):
        row[f"{prefix}_e2e_norm_intvty"] = norm.stat(stat)
    return {k: v for k, v in row.items() if v is not None and math.isfinite(v)}


RowKind = Literal["throughput", "eval"]


def unpublished(point: ResultPoint, row: RowKind = "throughput") -> str | None:
    """Why InferenceX would not publish a result's throughput or eval row, or None: the one rule of both exports.

    InferenceX publishes measurements on real hardware: a simulated or predicted point's row is neither (an eval on
    the simulator scores about 0). A throughput row it publishes for a job that passed, so a smoke, invalid or failed
    point has none. An eval row it publishes for every completed eval run whatever the score gate said (the upload
    and collect-evals run on failure too, the gate fails the job apart: wave-2 spec §1.7, §1.8, §1.10; the row
    carries the gate's verdict), so for an eval row the verdict keeps nothing out."""
    if point.source != MEASURED:
        return point.source
    if row == "throughput" and point.verdict != "valid":
        return point.verdict
    return None


DID_NOT_COMPLETE = "eval did not complete, no score"
"""Why an eval run has no InferenceX row: it failed (lm-eval exited, or never ran). InferenceX's collector reads the
completed concurrencies only (wave-2 spec §1.8)."""


def _eval_row_unpublished(point: ResultPoint, row: Mapping[str, Any]) -> str | None:
    """Why InferenceX would not publish one eval row of a result (`unpublished`, then a run that did not complete);
    None when it would."""
    if (why := unpublished(point, "eval")) is not None:
        return why
    return DID_NOT_COMPLETE if row["llmsweep"]["status"] != "completed" else None


def left_out(points: Sequence[ResultPoint], row: RowKind = "throughput") -> dict[str, int]:
    """How many throughput points (or eval rows: one per run of an eval, failed runs included) an InferenceX export
    without `include_unpublished` leaves out, by reason (a point measured N times is one point, as it is exported:
    `repeat_row`)."""
    out: dict[str, int] = {}
    if row == "eval":
        for p in points:
            for eval_row in inferencex_eval_rows(p, failed=True):
                if (why := _eval_row_unpublished(p, eval_row)) is not None:
                    out[why] = out.get(why, 0) + 1
        return out
    for p in (r.point for r in combine_repeats(points)):
        if not p.eval_only and (why := unpublished(p, row)) is not None:
            out[why] = out.get(why, 0) + 1
    return out


def _outcome(point: ResultPoint, why: str) -> dict[str, str]:
    """The mark of a row InferenceX's app drops at ingest (`benchmark_outcome.status == failed`, wave-2 §5.3)."""
    reasons = "; ".join(point.reasons)
    return {"status": "failed", "reason": f"{why}" + (f": {reasons}" if reasons and why == point.verdict else "")}


def _unpublished_row(point: ResultPoint, why: str, repeats: Repeats | None = None) -> dict[str, Any]:
    """A throughput row InferenceX's app drops at ingest, with a top-level `source` for a point not measured on real
    hardware."""
    row = repeat_row(repeats) if repeats is not None else inferencex_row(point)
    row["benchmark_outcome"] = _outcome(point, why)
    if point.source != MEASURED:
        row["source"] = point.source
    return row


_SUMMED = frozenset({"num_requests_total", "num_requests_successful"})
"""Counts a row of repeats sums (the requests behind it); every other number that differs is the repeats' mean."""


def repeat_row(repeats: Repeats) -> dict[str, Any]:
    """One InferenceX row for a point measured N times (`run --repeats`): the repeats' rows combined — every number
    that differs between them is their mean (request counts: their sum; `power_valid`: 1 only when every repeat's
    is), a field one repeat lacks is left out — and its `llmsweep` block says so (`repeats`: count, jobs, each
    metric's spread). One result's row is `inferencex_row`'s."""
    rows = [inferencex_row(p) for p in repeats.members]
    if len(rows) == 1:
        return rows[0]
    out: dict[str, Any] = {}
    for key, first in rows[0].items():
        if key == "llmsweep" or any(key not in r for r in rows):
            continue
        values = [r[key] for r in rows]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        if key in _SUMMED:
            out[key] = sum(values) if numbers else None
        elif not numbers or all(v == first for v in values):
            out[key] = first  # the point's identity: the same in every repeat
        elif key == "power_valid":
            out[key] = min(values)
        else:
            out[key] = sum(values) / len(values)
    if not out.get("power_valid", 1):  # as `_power_fields` writes a 0 verdict: no energy figure beside it
        energy = {f for f, _, _ in _POWER_FIELDS} | {f"{role}_{name}" for role, name, _, _ in _ROLE_POWER_FIELDS}
        out = {k: v for k, v in out.items() if k not in energy}
    block = _llmsweep_block(repeats.point)
    members = [_llmsweep_block(p) for p in repeats.members]
    if "power" in block:  # how the repeats measured power, and its figures as the row's: their mean, not the first's
        block["power"] = _mean_of([m.get("power") for m in members])
    out["llmsweep"] = {**block, "repeats": repeats.as_dict()}
    return out


def _mean_of(values: Sequence[Any]) -> Any:
    """What several repeats' copies of one field say together, as `repeat_row` combines their rows: the value where
    they agree, the mean of numbers that differ, each object's fields so, the texts of lists that differ (each once);
    None where they say different things of another kind (a text, one lacking it), no one repeat's value standing for
    all."""
    first = values[0]
    if all(v == first for v in values):
        return first
    if all(isinstance(v, Mapping) for v in values):
        return {k: _mean_of([v.get(k) for v in values]) for k in first}
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sum(values) / len(values)
    if all(isinstance(v, list) for v in values):
        return list(dict.fromkeys(x for v in values for x in v))
    return None


def _eval_rows(points: Sequence[ResultPoint], include_unpublished: bool) -> list[dict[str, Any]]:
    """The eval rows of `inferencex-evals`, by the throughput export's rule (`unpublished`): a row that is not a
    measurement, or of a run that did not complete (no score), only with `include_unpublished`, then marked failed
    (`benchmark_outcome`, with the run's error; its `llmsweep` block names the source and the run's status, as the
    top-level `source` is the lm-eval results file)."""
    rows: list[dict[str, Any]] = []
    for p in points:
        for row in inferencex_eval_rows(p, failed=include_unpublished):
            why = _eval_row_unpublished(p, row)
            if why is not None and not include_unpublished:
                continue
            if why is not None:
                outcome = _outcome(p, why) if why != DID_NOT_COMPLETE else {"status": "failed", "reason": why}
                ours = row["llmsweep"]
                if ours["status"] != "completed":  # why it has no score
                    failure = f"{DID_NOT_COMPLETE} ({ours['error'] or 'no reason recorded'})"
                    outcome["reason"] = failure if why == DID_NOT_COMPLETE else f"{outcome['reason']}; {failure}"
                row["benchmark_outcome"] = outcome
            rows.append(row)
    return rows



def csv_column(column: str) -> str:
    """The CSV export's header of a result column (`RESULT_COLUMNS`): a hot metric's name with its unit where the
    name lacks it (`p50_ttft_s`: a spreadsheet has no other place to say it), else the column's own name. Only the
    latencies' (seconds) lack it: the other columns' names say theirs (`tput_per_gpu`, `avg_power_w`, ratios)."""
    hot = HOT_BY_NAME.get(column)
    return f"{column}_s" if hot is not None and hot.metric.unit == "s" else column


CSV_COLUMNS: tuple[str, ...] = tuple(csv_column(c) for c in (*RESULT_COLUMNS, "warnings"))
"""The CSV export's columns: a result's flat row and what its run warned of it, as `results list --json` has them,
a latency's with its unit (`csv_column`)."""


def _csv_cell(value: Any) -> Any:
    """A CSV cell of a flat row's value: a list (reasons, warnings) as a JSON array, which a reason holding `;` or `,`
    leaves unambiguous (joined with `;`, two reasons and one holding a `;` read alike) and any reader splits back;
    anything else as the csv module writes it (None: an empty cell)."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list) else value

Warned = Mapping[tuple[str, str], Sequence[str]]
"""(run id, job id) -> what the run warned of the job's result (`Store.job_warnings`: under the simulator, the engine
rules it ran despite and what it does not model)."""


def export_points(points: Sequence[ResultPoint], fmt: str, *, include_unpublished: bool = False,
                  warnings: Warned | None = None, stood_on: Sequence[ResultPoint] = (),
                  started: Mapping[str, str | None] | None = None) -> str:
    """Serialise results as `json` (ours, lossless), `csv` (flat hot columns), `inferencex` (list of throughput rows)
    or `inferencex-evals` (InferenceX's eval rows: one per completed eval run, i.e. per concurrency).

    Both InferenceX formats hold only what InferenceX publishes (`unpublished`; `left_out` counts the rest):
    `inferencex` valid, measured points, `inferencex-evals` the evals of measured points; unless
    `include_unpublished`: then every row, each unpublishable one marked failed (`benchmark_outcome`) and, for a
    throughput row not measured, with its `source`. A point a run measured N times (`run --repeats`) is one
    `inferencex` row, the mean of its repeats (`repeat_row`); `json` and `csv` keep every result. `warnings`: what the
    runs warned of their jobs, which `json` carries (a point's `warnings`) so an import keeps its ⚠ marks, and `csv`
    in its `warnings` column. `stood_on`: the stored results `run --reuse` stood the exported run's jobs on
    (`sides.reused_points_of`): an `inferencex` point the run measured in part is the mean of every repeat it stands
    on, as its frontier and dashboard give it; one reused whole is exported under the run that measured it.
    `started`: when each run started (`Store.runs`), which `json` carries (`runs`: run id -> `started`) so an import
    keeps it."""
    if fmt == "json":
        warned = warnings or {}
        doc = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION,
               "results": [{**_our_row(p), "warnings": list(warned.get((p.run_id, p.job_id), ()))} for p in points]}
        runs = {run_id: {"started": when} for run_id in dict.fromkeys(p.run_id for p in points)
                if (when := (started or {}).get(run_id))}
        if runs:  # (a key of its own: an export without it, as every one before 2026-12-07, imports as it did)
            doc["runs"] = runs
        return _strict_json(doc, sort_keys=True)
    if fmt == "inferencex":  # throughput rows: an eval-only result has none (its row is in `inferencex-evals`)
        published: list[dict[str, Any]] = []
        for r in combine_repeats([*points, *stood_on]):  # a point measured N times is one row: its repeats' mean
            if all(m.reused_by is not None for m in r.members):
                continue  # reused whole: the measuring run's row
            p = r.point
            why = None if p.eval_only else unpublished(p)
            if p.eval_only or (why is not None and not include_unpublished):
                continue
            row = repeat_row(r) if why is None else _unpublished_row(p, why, r)
            if said := (warnings or {}).get((p.run_id, p.job_id)):  # what its run warned of it: an import keeps ⚠
                row.setdefault("llmsweep", {})["warnings"] = list(said)
            published.append(row)
        return _strict_json(published)
    if fmt == "inferencex-evals":  # InferenceX's agg_eval_all.json: one row per completed eval run (concurrency)
        return _strict_json(_eval_rows(points, include_unpublished))
    if fmt == "csv":  # a result's flat row (`RESULT_COLUMNS`, eval columns included) and its run's warnings, as
        # `results list --json` gives them: a point a real engine would refuse keeps its ⚠ in a spreadsheet too
        from llmsweep.results.frontier import labelled_listed_series

        warned = warnings or {}
        series = labelled_listed_series(list(points))
        rows = [{**describe(p), "series": series[p.result_id], "warnings": list(warned.get((p.run_id, p.job_id), ()))}
                for p in points]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({csv_column(k): _csv_cell(v) for k, v in row.items()})
        return buf.getvalue()
    raise ResultInputError(f"unknown export format {fmt!r}",
                           fix="use one of json, csv, inferencex, inferencex-evals")


def _strict_json(doc: Any, *, sort_keys: bool = False) -> str:
    """An export's JSON text: strict JSON, a number that is not finite written null (`jsonline.finite_or_null`)."""
    return json.dumps(finite_or_null(doc), indent=1, sort_keys=sort_keys, default=str, allow_nan=False)


def _our_row(p: ResultPoint) -> dict[str, Any]:
    return {"result_id": p.result_id, "run_id": p.run_id, "job_id": p.job_id, "source": p.source,
            "origin": p.origin, "verdict": p.verdict, "reasons": list(p.reasons), "gpus": p.gpus,
            "num_requests": p.num_requests, "num_successful": p.num_successful, "job": p.job,
            "identity": p.identity.as_dict(), "metrics": p.metrics,
            "summary": p.summary.dump() if p.summary is not None else p.imported, "provenance": p.provenance}


# ------------------------------------------------------------------------------------------------ import


class Imported(NamedTuple):
    """What `read_import` makes of a file."""

    run_id: str
    """The file's own run id (`import:<stem>-<digest>`), for rows that name no run."""
    origin: str
    points: list[ResultPoint]
    warned: dict[tuple[str, str], list[str]]
    """What the exporting run warned of each (run, job)."""
    copies: tuple[int, ...] = ()
    """Rows left out as copies of an earlier row of the file (InferenceX rows without our block, the same content)."""
    started: Mapping[str, str] = {}
    """When each run of the file started, where our JSON export says (`runs`): original run id -> time."""


def import_file(path: Path) -> tuple[str, str, list[ResultPoint]]:
    """:func:`read_import` without the warnings."""
    run_id, origin, points, *_ = read_import(path)
    return run_id, origin, points


_AIPERF_FIX = (f"read its folder with `llmsweep peer import DIR {_OUT} RUN --served-by measured|simulated` (records "
               f"and a summary under llmsweep's definitions; `{_GPUS} N` for per-GPU figures)")
_NO_IMPORTER_FIX = ("llmsweep reads no {tool} results: run the load with `llmsweep bench` (or `peer crosscheck` beside "
                    "aiperf), or import aiperf artifacts with `llmsweep peer import`")


def _peer_file(path: Path, doc: Any) -> tuple[str, str] | None:
    """What another benchmark client's result file is, and the fix, for a file `results import` cannot take."""
    if path.name.startswith("profile_export") or (isinstance(doc, Mapping) and "aiperf_version" in doc):
        return "an aiperf export", _AIPERF_FIX
    if isinstance(doc, Mapping) and isinstance(doc.get("benchmarks"), list):
        return "a guidellm report", _NO_IMPORTER_FIX.format(tool="guidellm")
    if isinstance(doc, Mapping) and "backend" in doc and any(str(k).endswith("_ttft_ms") for k in doc):
        return "a vllm bench serve / benchmark_serving result", _NO_IMPORTER_FIX.format(tool="vllm bench serve")
    return None


def _our_csv(path: Path) -> bool:
    """Whether a file that is not JSON is our CSV export, as written or after a spreadsheet saved it again (a byte-order
    mark, quoted headers, `;` between cells, CRLF line ends): its header names our first columns."""
    try:
        with path.open(encoding=FOREIGN_ENCODING, errors="replace", newline="") as fh:
            head = fh.readline(4096)
    except OSError:
        return False
    for delimiter in (",", ";", "\t"):
        names = [c.strip().strip('"').strip() for c in head.strip().split(delimiter)]
        if names[:3] == list(CSV_COLUMNS[:3]):
            return True
    return False


def read_import(path: Path) -> Imported:
    """Parse an export of ours, an InferenceX aggregate JSON or eval rows (`inferencex-evals`, InferenceX's
    agg_eval_all.json: stored as evals, `points_from_eval_rows`) into (run id, origin, points); a file without a result
    row is bad input (an empty run in the store would stand in `results list` as if something had been imported).

    The run id is the file's own (`import:<stem>-<digest>`); a row that names the run it came from (every row of our
    exports) keeps that run: its point carries the original run id, so an export of several runs imports as those
    runs (`import_into`). Job ids repeated within one run (InferenceX rows without one of their own) get the row's
    index, so every row is kept."""
    try:
        doc = load_json_file(path)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        if (peer := _peer_file(path, None)) is not None:
            raise ResultInputError(f"{path} is {peer[0]}, not an export", fix=peer[1]) from exc
        if _our_csv(path):
            raise ResultInputError(
                f"{path} is a CSV export (`results export {_FORMAT} csv`), a flat view of results for a spreadsheet: "
                "results import reads JSON",
                fix=f"export the run again with `llmsweep results export {_FORMAT} json` (lossless) or `{_FORMAT} "
                    "inferencex`, and import that file") from exc
        raise ResultInputError(f"cannot read {path}: {exc}", fix="pass a JSON file written by `results export` "
                          "or an InferenceX agg_*.json / aggregate result list") from exc
    digest = hashlib.sha1(path.read_bytes()).hexdigest()[:8]
    run_id = f"import:{path.stem}-{digest}"
    if isinstance(doc, Mapping) and doc.get("format") == EXPORT_FORMAT:
        version = doc.get("version", EXPORT_VERSION)
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= EXPORT_VERSION:
            raise ResultInputError(f"{path} is an llmsweep export of version {version!r}; this llmsweep reads "
                                   f"version {EXPORT_VERSION} (its rows would be read as that version's)",
                                   fix="import it with the llmsweep release that wrote it, or a newer one")
        results = doc.get("results", [])
        if not isinstance(results, list) or not all(isinstance(r, Mapping) for r in results):
            raise ResultInputError(f"{path}: `results` is not a list of result rows",
                              fix=f"export again with `llmsweep results export {_FORMAT} json`")
        _refuse_twice(path, results, key=lambda r: (r.get("run_id") or run_id, r.get("job_id") or r.get("result_id")),
                      what="names the same run and job as")
        points = _nonempty(path, _unique_jobs([_from_our_row(run_id, r, n, path) for n, r in enumerate(results)]))
        warned = {(p.run_id, p.job_id): [str(w) for w in r["warnings"]] for p, r in zip(points, results, strict=True)
                  if isinstance(r.get("warnings"), list) and r["warnings"]}
        return Imported(run_id, "llmsweep-export", points, warned, started=_runs_started(path, doc.get("runs")))
    rows = doc if isinstance(doc, list) else [doc] if isinstance(doc, Mapping) and "hw" in doc else None
    if rows is None or not all(isinstance(r, Mapping) for r in rows):
        if (peer := _peer_file(path, doc)) is not None:
            raise ResultInputError(f"{path} is {peer[0]}, not an export", fix=peer[1])
        raise ResultInputError(f"{path} is neither an llmsweep export nor a list of InferenceX rows",
                          fix=f"export with `llmsweep results export {_FORMAT} json|inferencex`")
    # a row published twice (a copy appended by hand, two files concatenated) would be stored as a second result of
    # its point, and `compare` would read the pair as repeats agreeing to the last digit. A row of ours (its
    # `llmsweep` block names one run's job) twice is a damaged export: refused. An InferenceX row without our block
    # has nothing that tells a copy from another run that measured the same figures (two runs of a deterministic
    # simulator): it is stored once, and the copies are said (`Imported.copies`), never kept as repeats.
    copies = _copies(rows)
    for n, first in copies.items():
        if "llmsweep" in rows[n]:
            raise _twice(path, n, "is a copy of", first)
    numbered = [(n, r) for n, r in enumerate(rows) if n not in copies]  # each row keeps its place in the file
    # eval rows (`inferencex-evals`, InferenceX's agg_eval_all.json) are evals; the others throughput points
    points = [from_inferencex_row(run_id, r, n) for n, r in numbered if not is_eval_row(r)]
    points += points_from_eval_rows(run_id, [(n, r) for n, r in numbered if is_eval_row(r)])
    origin = "llmsweep-export" if rows and all("llmsweep" in r for r in rows) else "inferencex"
    points = _nonempty(path, _unique_jobs(points))
    # what the exporting run warned of a job (our block's `warnings`), as the json export carries it
    throughput = [r for _, r in numbered if not is_eval_row(r)]
    warned = {(p.run_id, p.job_id): [str(w) for w in block["warnings"]]
              for p, r in zip(points, throughput, strict=False)
              if isinstance(block := r.get("llmsweep"), Mapping) and isinstance(block.get("warnings"), list)
              and block["warnings"]}
    return Imported(run_id, origin, points, warned, tuple(copies))


def _runs_started(path: Path, runs: Any) -> dict[str, str]:
    """When each run of our JSON export started (its `runs` block: run id -> `started`, as `results runs` shows it);
    none for an export without the block (one before 2026-12-07). A block that is not what the export writes is
    refused, naming it."""
    if runs is None:
        return {}
    if not isinstance(runs, Mapping) or not all(isinstance(r, Mapping) for r in runs.values()):
        raise ResultInputError(f"{path}: `runs` is {runs!r}, not an object of each run's facts by run id",
                               fix=f"correct the file, or export the run again with `llmsweep results export "
                                   f"{_FORMAT} json`")
    started = {}
    for run_id, facts in runs.items():
        when = facts.get("started")
        if when is not None and not isinstance(when, str):
            raise ResultInputError(f"{path}: `runs.{run_id}.started` is {when!r}, not a time (a text)",
                                   fix="correct it, or leave it out: the run imports without its start")
        if when:
            started[str(run_id)] = when
    return started


def _nonempty(path: Path, points: list[ResultPoint]) -> list[ResultPoint]:
    if not points:
        raise ResultInputError(f"{path} holds no result rows: nothing imported",
                               fix="pass a file with at least one result row (`llmsweep results export` writes a "
                                   "run's, an InferenceX agg_*.json a sweep's)")
    return points


def _unique_jobs(points: list[ResultPoint]) -> list[ResultPoint]:
    """Every (run, job) once: the eval rows' result of a job whose throughput row the file holds too is that job's
    eval half (`eval_half`); any other job id repeated within one run gets `-row<n>` (its position in the file)."""
    seen: dict[tuple[str, str], bool] = {}  # (run, job) -> whether its result is eval-only
    out = []
    for n, p in enumerate(points):
        if p.eval_only and seen.get((p.run_id, p.job_id)) is False:
            p = eval_half(p)
        if (p.run_id, p.job_id) in seen:
            job_id = f"{p.job_id}-row{n:04d}"
            p = dataclasses.replace(p, job_id=job_id, result_id=result_id_for(p.run_id, job_id))
        seen[(p.run_id, p.job_id)] = p.eval_only
        out.append(p)
    return out


EVAL_HALF = "-eval"
"""How the eval result of a run-eval job is named where its run also holds the job's throughput result: InferenceX's
formats publish the two halves apart (`inferencex`: the throughput row; `inferencex-evals`: the eval rows, stored as
an eval-only result), each under the job's id, and one run stores one result per job id."""


def eval_half(point: ResultPoint) -> ResultPoint:
    """An eval-only result under its job's eval-half id (`<job>-eval`, `EVAL_HALF`); its job record names the job
    (`EVAL_HALF_OF`), which its eval rows name again when exported."""
    job_id = f"{point.job_id}{EVAL_HALF}"
    return dataclasses.replace(point, job_id=job_id, result_id=result_id_for(point.run_id, job_id),
                               job={**point.job, EVAL_HALF_OF: point.job_id})


def _copies(rows: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """Each row whose content is that of an earlier row (the same keys and values, in any order): its index -> the
    first's."""
    first: dict[str, int] = {}
    copies: dict[int, int] = {}
    for n, row in enumerate(rows):
        content = json.dumps(row, sort_keys=True, default=str)
        if content in first:
            copies[n] = first[content]
        else:
            first[content] = n
    return copies


def _refuse_twice(path: Path, rows: Sequence[Mapping[str, Any]], *, key: Any, what: str) -> None:
    """Refuse a file two of whose rows are one result (`key` equal): row m `what` row n."""
    first: dict[Any, int] = {}
    for n, row in enumerate(rows):
        k = key(row)
        if k in first:
            raise _twice(path, n, what, first[k])
        first[k] = n


def _twice(path: Path, n: int, what: str, first: int) -> ResultInputError:
    return ResultInputError(f"{path}: row {n} {what} row {first}: one result would be stored twice (and compared "
                            "with itself as a repeat)", fix="remove the repeated row and import again")


VERDICTS: tuple[str, ...] = get_args(Verdict)
"""The verdicts a result row may carry (a summary's `validity.verdict`)."""


_OUR_FIX = (f"correct the field in the file, or drop the row, and import it again (or export the run again with "
            f"`llmsweep results export {_FORMAT} json`)")
"""What to do with a row of our JSON export that cannot be imported: its reader has the file, not the run's folders."""


def _bad(where: str, field: str, got: Any, want: str) -> ResultInputError:
    return ResultInputError(f"{where}: `{field}` is {got!r}, not {want}", fix=_OUR_FIX)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _from_our_row(run_id: str, row: Mapping[str, Any], n: int, path: Path) -> ResultPoint:
    """One row of our JSON export. A row with its summary takes its source, verdict, reasons, counts and hot metrics
    from the summary (as a run's folder is stored: `point_from_job`), never from the row's copies of them, and is
    never made measured by the row: a row that says `simulated` or `predicted` of a summary that says measured (an
    older summary's default) stays what the row says. Its summary is read as the store reads it back
    (`import_checks.read_summary`: a figure that is not a number is none where the summary has a null for it, else
    the row is refused). A row without one has every field checked: a known source and verdict, finite numbers.
    Either is refused where it holds a figure no measurement has, or a point that is not whole numbers
    (`import_checks.judge`, which judges InferenceX rows too). A measured result timed on the virtual clock is a
    contradiction, refused. Every refusal names the file, the row and the field."""
    job_id = row.get("job_id") or row.get("result_id")
    if not isinstance(job_id, str) or not job_id:
        raise _bad(f"{path}: result row {n}", "job_id", job_id, "a job id")
    where = f"{path}: result row {n} ({job_id})"
    run_id = str(row.get("run_id") or run_id)  # the run it was exported from
    doc = row.get("summary") or {}
    if not isinstance(doc, Mapping):
        raise _bad(where, "summary", doc, "an object (its summary, or the row it was imported from)")
    summary = read_summary(doc, where, _OUR_FIX) if "schema_version" in doc else None
    said = row.get("source")
    if said is not None and said not in SOURCES:
        raise _bad(where, "source", said, f"one of {', '.join(SOURCES)}")
    if summary is not None:
        ex = extract_hot(summary)
        source = ex.source if ex.source != MEASURED or said is None else str(said)
        verdict, reasons, metrics = ex.verdict, ex.reasons, ex.metrics
        num_requests, num_successful = ex.num_requests, ex.num_successful
        clock = summary.provenance.clock
        counts, successful = summary_counts(summary)
        judge(where, _OUR_FIX, figures=summary_figures(summary), counts=counts, successful=successful)
    else:
        if said is None:
            raise _bad(where, "source", said, f"one of {', '.join(SOURCES)} (a row without its summary names it)")
        source = str(said)
        said_verdict = row.get("verdict")
        if said_verdict not in VERDICTS:
            raise _bad(where, "verdict", said_verdict, f"one of {', '.join(VERDICTS)}")
        verdict = str(said_verdict)
        said_reasons = row.get("reasons") or []
        if not isinstance(said_reasons, list) or not all(isinstance(r, str) for r in said_reasons):
            raise _bad(where, "reasons", said_reasons, "a list of texts")
        reasons = tuple(said_reasons)
        given = row.get("metrics") or {}
        if not isinstance(given, Mapping):
            raise _bad(where, "metrics", given, "an object of metric values")
        metrics = {c: given.get(c) for c in HOT_NAMES}
        for name, value in metrics.items():
            if value is not None and not _finite(value):
                raise _bad(where, f"metrics.{name}", value, "a finite number or null")
        counts = [(k, row.get(k)) for k in ("num_requests", "num_successful")]
        for name, value in counts:
            if value is not None and not _finite(value):
                raise _bad(where, name, value, "a count of requests or null")
        judge(where, _OUR_FIX, successful=(counts[0], counts[1]),
              figures=[Figure(f"metrics.{name}", value, ceiling(HOT_BY_NAME[name].metric))
                       for name, value in metrics.items()])
        num_requests, num_successful = (None if v is None else int(v) for _, v in counts)
        provenance_doc = row.get("provenance")
        clock = provenance_doc.get("clock") if isinstance(provenance_doc, Mapping) else None
    if source == MEASURED and clock == VIRTUAL:
        raise _bad(where, "source", source, "measured: the result was timed on the simulator's virtual clock")
    gpus = row.get("gpus", 1)
    judge(where, _OUR_FIX, whole_numbers=[("gpus", gpus, 1)])
    for name in ("job", "provenance"):
        if not isinstance(row.get(name) or {}, Mapping):
            raise _bad(where, name, row[name], "an object")
    point = ResultPoint(
        result_id=result_id_for(run_id, job_id), run_id=run_id, job_id=job_id,
        identity=_identity_of(row, summary, where), source=source, verdict=str(verdict),
        metrics=metrics, gpus=int(gpus), origin="llmsweep-export", reasons=reasons,
        num_requests=num_requests, num_successful=num_successful,
        job=dict(row.get("job") or {}), summary=summary, imported={} if summary is not None else dict(doc),
        provenance=dict(row.get("provenance") or {}),
    )
    # its point's whole numbers at least their least (`IDENTITY_LEAST`); an eval-only result has no throughput point,
    # and no concurrency where the eval rows it was imported from named none
    said_identity = row.get("identity") or {}
    judge(where, _OUR_FIX, whole_numbers=[(f"identity.{name}", said_identity.get(name),
                                           0 if name == "conc" and point.eval_only else least)
                                          for name, least in IDENTITY_LEAST.items()])
    return point


def _identity_of(row: Mapping[str, Any], summary: Summary | None, where: str) -> PointIdentity:
    """A row of our JSON export's point identity: as the row says it, each field of the type it has (a text, a flag,
    a whole number), else refused naming it; a field the row lacks — an export of a release before that field was
    part of the identity (`corpus`, before 2026-12-02) — read from its job record and summary, as the store reads
    such a release's runs (`Store._point`) and ingesting its folder today would. Left at its default, an agentic
    point lost the corpus it replayed and matched its own run's points nowhere."""
    said = row.get("identity") or {}
    if not isinstance(said, Mapping):
        raise _bad(where, "identity", said, "an object of the point's fields")
    fields = {f.name: f for f in dataclasses.fields(PointIdentity)}
    typed: dict[str, Any] = {}
    for name, value in said.items():
        if name not in fields:
            continue
        default = fields[name].default
        if isinstance(default, bool):
            ok, want = isinstance(value, bool), "a flag (true or false)"
        elif isinstance(default, str):
            ok, want = isinstance(value, str), "a text"
        else:  # a whole number, as a row may spell it (its least judged by `_from_our_row`); isl/osl may be none
            value = whole(value) if value is not None else None
            ok, want = value is not None or default is None, "a whole number"
        if not ok:
            raise _bad(where, f"identity.{name}", said[name], want)
        typed[name] = value
    identity = identity_from_dict(typed)
    lacking = [name for name in fields if name not in said]
    if not lacking:
        return identity
    derived = identity_from_job(dict(row.get("job") or {}), summary)
    return dataclasses.replace(identity, **{name: getattr(derived, name) for name in lacking})


_V3_SCALARS: tuple[tuple[str, str], ...] = (
    ("server_metrics.cache.gpu_cache_hit_rate", "server_gpu_cache_hit_rate"),
    ("server_metrics.kv_cache.gpu_usage_pct", "gpu_kv_cache_usage_pct"),
)
"""(path in a v3 AgentX aggregate, its flat name) of the nested scalars an import reads (`AGENTX_SCALARS`), as
InferenceX-app's ingest flattens them (`flattenAgenticAggRow`). Those without a hot column to hold them are not read:
`request_metrics.throughput.{input,output,total}` and `duration_seconds`, `request_metrics.cache.
theoretical_cache_hit_rate`, `server_metrics.cache.{cpu,external,overall}_cache_hit_rate`, `server_metrics.kv_cache.
cpu_*`, `server_metrics.tokens.*` and `request_metrics.tokens.*`; the row keeps them for a re-export (its
`kv_cache_pool_tokens`, `AGENTX_POOL`, too: a store holds no pool column)."""


def _flat(row: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten a v3 nested agentic aggregate into InferenceX's flat names (stat blocks → `<stat>_<metric>`, the
    `qps` block's too; the scalars of `_V3_SCALARS`); a flat name the row also has is kept as it is."""
    out = dict(row)
    blocks: dict[str, Any] = {"qps": _dig(row, "request_metrics.qps")}
    latency = _dig(row, "request_metrics.latency")
    if isinstance(latency, Mapping):
        blocks.update(latency)
    for name, block in blocks.items():
        if isinstance(block, Mapping):
            for prefix, stat in dict.fromkeys((*_STATS, *_AGENTIC_STATS)):
                if stat in block:
                    out.setdefault(f"{prefix}_{name}", block[stat])
                if stat == "p50" and "median" in block:
                    out.setdefault(f"median_{name}", block["median"])
    for path, name in _V3_SCALARS:
        if (value := _dig(row, path)) is not None:
            out.setdefault(name, value)
    per_gpu = _dig(row, "request_metrics.throughput.per_gpu")
    if isinstance(per_gpu, Mapping):
        out.setdefault("tput_per_gpu", per_gpu.get("total_tput_tps"))
        out.setdefault("output_tput_per_gpu", per_gpu.get("output_tput_tps"))
        out.setdefault("input_tput_per_gpu", per_gpu.get("input_tput_tps"))
    return out


def inferencex_name(column: HotColumn) -> str:
    """A hot column's InferenceX field: `<stat>_<metric>` with p50 spelled `median` (`median_ttft`), else its name."""
    if column.stat is None or column.metric.column is None:
        return column.name
    return f"{'median' if column.stat == 'p50' else column.stat}_{column.metric.column}"


def _agentic_row(flat: Mapping[str, Any]) -> bool:
    """Whether an imported row is an agentic aggregate (its `scenario_type`, as `is_agentic` reads a stored point's
    scenario)."""
    return agentic_scenario(str(flat.get("scenario_type") or ""))


def _per_all_gpus(flat: Mapping[str, Any], metrics: dict[str, Any]) -> None:
    """A fixed-length multinode row divides output by its decode GPUs and input by its prefill GPUs (§6.2, as
    `_multinode_fields` writes them); llmsweep's columns of the same names divide by every GPU of the deployment (the
    summary's `throughput.per_gpu`). An imported one is brought to llmsweep's meaning, so a stored point and an
    imported one compare like with like (`tput_per_gpu` already divides by every GPU). An agentic row (AgentX's
    `per_gpu`) already divides every figure by all of the deployment's GPUs: it is taken as it is."""
    p_gpus, d_gpus = _number(flat, "num_prefill_gpu"), _number(flat, "num_decode_gpu")
    if not p_gpus or not d_gpus or _agentic_row(flat):
        return
    every = p_gpus + d_gpus
    for name, role_gpus in (("output_tput_per_gpu", d_gpus), ("input_tput_per_gpu", p_gpus)):
        if metrics.get(name) is not None:
            metrics[name] = metrics[name] * role_gpus / every


_ROW_FIX = "correct the row, or leave the figure out (null): the import stores every other figure of it"
"""What to do with an InferenceX row holding a figure no measurement has."""


def _figure_fields() -> list[tuple[str, float | None]]:
    """(InferenceX field, the most it can be or None) of every figure an import reads from a throughput row: the
    hot columns' (`inferencex_name`; a ratio at most 1, but a peak: `import_checks.ceiling`), the AgentX scalars' (a
    cache hit rate at most 1) and the J per token a row's efficiency is read from; every one of them at least 0."""
    fields = {inferencex_name(c): ceiling(c.metric) for c in HOT_COLUMNS
              if c.name != "error_ratio"}  # (computed from the request counts, checked apart)
    for column, field in AGENTX_SCALARS.items():
        fields[field] = ceiling(HOT_BY_NAME[column].metric)
    fields["joules_per_total_token"] = None
    return list(fields.items())


def _check_row(flat: Mapping[str, Any], n: int, job_id: str) -> None:
    """Refuse a throughput row holding a figure no measurement has (a negative throughput, latency, rate or energy, a
    ratio above 1, request counts that are not counts) or whose concurrency, sequence lengths, parallelism or GPU
    counts are not whole numbers of at least their least value (`import_checks.TOPOLOGY_LEAST`): the one judge of
    both formats' rows (`import_checks.judge`). Stored, they stood as a valid point (a negative TTFT on every latency
    axis, an error ratio of -1347 %); read as they were, `tp: "eight"` or `tp: 0` made a tp1 point on 1 GPU and a
    `conc` of 2.5 a conc-2 point. A figure that is not a finite number is not read (None), as before."""
    where = f"row {n} ({job_id})"
    judge(where, "correct the row: the point it stands for is read from it",
          whole_numbers=[(field, flat.get(field), least) for field, least in TOPOLOGY_LEAST])
    judge(where, _ROW_FIX, figures=[Figure(field, flat.get(field), most) for field, most in _figure_fields()],
          successful=(("num_requests_total", flat.get("num_requests_total")),
                      ("num_requests_successful", flat.get("num_requests_successful"))))


def from_inferencex_row(run_id: str, row: Mapping[str, Any], n: int) -> ResultPoint:
    """One InferenceX aggregate row as a ResultPoint (source from its `llmsweep` block, else measured)."""
    row = {LEGACY_FIELDS.get(k, k): v for k, v in row.items() if not (k in LEGACY_FIELDS and LEGACY_FIELDS[k] in row)}
    flat = _flat(row)
    block = row.get("llmsweep")
    ours: Mapping[str, Any] = block if isinstance(block, Mapping) else {}
    for key in ("job_id", "run_id"):
        if ours.get(key) is not None and not (isinstance(ours[key], str) and ours[key]):
            raise _bad_block(n, str(flat.get("exp_name") or f"row{n:04d}"), key, ours[key], "an id (a text)")
    job_id = str(ours.get("job_id") or flat.get("exp_name") or f"row{n:04d}")
    if "schema_version" in row:  # what marks one of our summaries where the store keeps a row: it would not read back
        raise ResultInputError(f"row {n} ({job_id}): `schema_version` is {row['schema_version']!r}, a field of "
                               "llmsweep's summaries that no InferenceX row has: stored, the row would be read as a "
                               "summary, which it is not", fix="drop the field from the row and import it again")
    job = {k: v for k, v in flat.items() if not isinstance(v, (Mapping, list)) or k == "kv_offload_backend"}
    job.setdefault("runner", flat.get("hw"))
    if ours.get("hardware"):
        job["hardware"] = ours["hardware"]
    job["model-prefix"] = flat.get("infmax_model_prefix")
    if "scenario_type" in flat:
        job["scenario-type"] = flat["scenario_type"]
    _check_row(flat, n, job_id)
    identity = identity_from_job(job)
    if identity.conc <= 0:  # (it was stored as conc 0, drawn as a `c0` point, matched with nothing)
        raise ResultInputError(f"row {n} names no concurrency (`conc`, or a legacy agentic row's `users`)",
                          fix="give each row the concurrency it was measured at")
    if not identity.hardware:  # (it was stored on hardware "", its per-GPU figures of no GPU, matched with nothing)
        raise ResultInputError(f"row {n} ({job_id}) names no hardware (`hw`: the runner it was measured on)",
                               fix="give each row the runner label or GPU it was measured on (`hw`), as InferenceX's "
                                   "rows do")
    if ours.get("corpus"):  # our own export: the corpus the point replayed, so it matches its original again
        identity = dataclasses.replace(identity, corpus=str(ours["corpus"]))
    metrics = {c.name: _number(flat, inferencex_name(c)) for c in HOT_COLUMNS}
    for column, field in AGENTX_SCALARS.items():  # an AgentX row's scalars, as our exports write them
        if metrics.get(column) is None and (value := _number(flat, field)) is not None:
            peak = HOT_BY_NAME[column].metric.name in PEAKS
            metrics[column] = value / 100 if peak and value > PERCENT_ABOVE else value
    if "power_valid" in flat and flat.get("power_valid") not in (1, "1"):  # the app's rule: a 0 verdict drops them
        metrics.update({c.name: None for c in HOT_COLUMNS if c.metric.name.startswith("power.")
                        and not c.metric.name.startswith("power.cost.")})
    elif (per_token := _number(flat, "joules_per_total_token")) and metrics.get("tokens_per_joule") is None:
        metrics["tokens_per_joule"] = 1 / per_token
    _per_all_gpus(flat, metrics)
    total, ok = _number(flat, "num_requests_total"), _number(flat, "num_requests_successful")
    metrics["error_ratio"] = (total - ok) / total if total and ok is not None else None
    metrics.update(_block_metrics(ours, n, job_id))
    run_id = str(ours.get("run_id") or run_id)  # our own export: the run it came from
    source = str(ours.get("source") or flat.get("source") or MEASURED)
    if source not in SOURCES:
        raise ResultInputError(f"row {n} has unknown source {source!r}", fix=f"use one of {', '.join(SOURCES)}")
    if source == MEASURED and ours.get("clock") == VIRTUAL:  # our block says the simulator's clock timed it
        raise ResultInputError(f"row {n} ({job_id}) says it was measured, but its `llmsweep.clock` is virtual: the "
                               "simulator's virtual clock timed it", fix="give the row the source it was exported "
                               "with (`llmsweep.source`: simulated or predicted), or export the run again")
    outcome = row.get("benchmark_outcome")
    failed = isinstance(outcome, Mapping) and outcome.get("status") == "failed"
    verdict = ours.get("verdict") or ("valid" if (ok is None or ok > 0) and not failed else "invalid")
    gated: tuple[str, ...] = ()
    if not ours and verdict == "valid" and (over := _over_error_gate(identity.scenario, metrics["error_ratio"])):
        # a published row judged by the error gate its scenario's points are judged by here (it had been valid at
        # any error ratio: only zero successes or a failed outcome made it invalid)
        verdict, gated = "invalid", (over,)
    if verdict not in VERDICTS:
        raise ResultInputError(f"row {n} ({job_id}): `llmsweep.verdict` is {verdict!r}, not one of "
                               f"{', '.join(VERDICTS)}", fix="export the run again, or correct the row")
    # a row of a point measured N times is their mean (`repeat_row`): said, and kept for a re-export, never read as
    # the first repeat's own measurement, whose ids it carries
    said_reasons = ours.get("reasons") or []
    if not isinstance(said_reasons, list) or not all(isinstance(r, str) for r in said_reasons):
        raise _bad_block(n, job_id, "reasons", said_reasons, "a list of texts")
    reasons = (*said_reasons, *gated)
    repeats = ours.get("repeats")
    if repeats is not None:
        count, jobs = (repeats.get(k) if isinstance(repeats, Mapping) else None for k in ("n", "job_ids"))
        if not (isinstance(count, int) and not isinstance(count, bool) and count >= 1 and isinstance(jobs, list)
                and len(jobs) == count and all(isinstance(j, str) for j in jobs)):
            raise _bad_block(n, job_id, "repeats", repeats, "how many repeats the row is the mean of (`n`) and "
                             f"their job ids (`job_ids`), as `results export {_FORMAT} inferencex` writes them")
        if count > 1:
            reasons = (*reasons, f"the mean of {count} repeats ({', '.join(jobs)}), as its exported row holds them")
    return ResultPoint(
        result_id=result_id_for(run_id, job_id), run_id=run_id, job_id=job_id, identity=identity, source=source,
        verdict=verdict, metrics=metrics, gpus=gpus_of(job, identity),
        origin="llmsweep-export" if ours else "inferencex", reasons=reasons,
        num_requests=int(total) if total is not None else None, num_successful=int(ok) if ok is not None else None,
        job=job, imported=dict(row), provenance={"recipe_fingerprint": flat.get("recipe_fingerprint"),
                                                "image": flat.get("image"),
                                                **({"clock": ours["clock"]} if ours.get("clock") else {}),
                                                **({"repeats": dict(repeats)} if repeats is not None else {})},
    )


def _block_metrics(ours: Mapping[str, Any], n: int, job_id: str) -> dict[str, float]:
    """The figures our `llmsweep` block carries (`metrics`: the point's hot columns as they were stored, exact), which
    an import of our own InferenceX row takes over the row's InferenceX fields, as an import of our JSON export takes
    its summary's over the row's copies: the row has no field for some of them (a fixed-length row's requests per
    second, cache hit rate and KV peak) and rounds others (power to 3 places, J per token to 6). A figure that is not
    a number is not read; one no measurement has is refused (`import_checks.judge`). A block without `metrics` (an
    export before 2026-12-07, or a row published without our block) leaves the row's own figures."""
    said = ours.get("metrics")
    if said is None:
        return {}
    if not isinstance(said, Mapping):
        raise _bad_block(n, job_id, "metrics", said, "an object of the point's figures")
    figures = {name: value for name in HOT_NAMES if (value := said.get(name)) is not None
               and not (isinstance(value, float) and not math.isfinite(value))}
    for name, value in figures.items():
        if not _finite(value):
            raise _bad_block(n, job_id, f"metrics.{name}", value, "a number or null")
    judge(f"row {n} ({job_id})", _ROW_FIX,
          figures=[Figure(f"llmsweep.metrics.{name}", value, ceiling(HOT_BY_NAME[name].metric))
                   for name, value in figures.items()])
    return {name: float(value) for name, value in figures.items()}


def _over_error_gate(scenario: str, ratio: float | None) -> str | None:
    """Why a published row whose error ratio exceeds its scenario's gate (`Scenario.gate.max_error_ratio`, what `run`
    judges a point by) is invalid; None within it, or where the scenario or the ratio is unknown."""
    from llmsweep.errors import ConfigError
    from llmsweep.metrics.gates import error_ratio_over
    from llmsweep.workload.scenario import get_scenario

    try:
        judged = get_scenario(scenario_id_of(scenario))
    except ConfigError:
        return None
    if ratio is None:
        return None
    return error_ratio_over(ratio, judged.gate.max_error_ratio,
                            f"the {judged.id} gate; the published row holds no verdict")


def _bad_block(n: int, job_id: str, field: str, got: Any, want: str) -> ResultInputError:
    """A field of an InferenceX row's `llmsweep` block (ours) that is not what our export writes."""
    return ResultInputError(f"row {n} ({job_id}): `llmsweep.{field}` is {got!r}, not {want}",
                            fix=f"export the run again with `llmsweep results export {_FORMAT} inferencex`, or correct "
                                "the row")


class Stored(NamedTuple):
    """What `import_into` did with a file."""

    run_ids: list[str]
    """The runs its rows were stored as."""
    stored: int
    """Results stored from the file: one per throughput row, one per eval (whose rows are one per concurrency)."""
    already: tuple[tuple[str, str], ...] = ()
    """(run id, job id) of each result of the file left out because the store already holds it whole: a row of one
    half (its throughput row, or its eval's rows) of a job whose result an earlier import of our JSON export stored
    with both halves."""


def import_into(store: Any, path: Path, parsed: Imported | None = None, *, force: bool = False) -> Stored:
    """Import a file into a Store: each run its rows came from as its own run, under its original id (the file's own
    run id for rows that name none), replacing an earlier import of that run; returns the runs and how many results
    it stored (`Stored`).

    A run the store already holds as a run of ours (importing an export back into the store it came from) is never
    replaced: its rows import as `<file run id>:<original run id>`. Replacing an earlier import with a file that
    lacks some of its results (a part of the export, its published rows only) would drop them: refused, nothing
    written, unless `force` (as `results ingest` refuses a partial run folder).

    InferenceX's formats publish a run in two files, its throughput rows (`inferencex`) and its eval rows
    (`inferencex-evals`): a file that holds only one kind replaces only that kind of an earlier import of the run,
    and keeps the other (`_other_half`), so importing both files of a run stores both, in either order. A job the
    store already holds whole (its throughput and its eval in one result: a row of our JSON export) is the same
    result as either half's rows of it: they are left out and named (`Stored.already`), never stored beside it as a
    second eval, nor replacing it and dropping its eval. A run whose every result of the file is so is left as it
    was."""
    file_run, origin, points, warned, _, started = parsed or read_import(path)
    runs: dict[str, list[ResultPoint]] = {}
    for point in points:
        runs.setdefault(point.run_id, []).append(point)
    placed: list[tuple[str, str, list[ResultPoint], list[ResultPoint], list[str]]] = []
    already: list[tuple[str, str]] = []
    for original, pts in runs.items():
        run_id = original
        if store.run_origin(original) not in (None, "llmsweep-export", "inferencex"):
            run_id = f"{file_run}:{original}"
            pts = [dataclasses.replace(p, run_id=run_id, result_id=result_id_for(run_id, p.job_id)) for p in pts]
        if len({p.eval_only for p in pts}) == 1 and store.run_origin(run_id) is not None:  # one half of the run
            pts, kept, replaced, held_whole = _other_half(pts, store.results(run_id))
            already += [(run_id, job) for job in held_whole]
            if not pts:  # every result of the file is held already: the run stays as it was stored
                continue
        else:  # the whole run (or one the store does not hold)
            kept, replaced = [], store.result_job_ids(run_id)
        placed.append((original, run_id, pts, kept, replaced))
    if not force:
        from llmsweep.results.store import ImportConflictError

        for _original, run_id, pts, kept, replaced in placed:
            keeping = {p.job_id for p in pts}
            if dropped := [j for j in replaced if j not in keeping]:
                named = ", ".join(dropped[:3]) + (f" and {len(dropped) - 3} more" if len(dropped) > 3 else "")
                raise ImportConflictError(
                    f"importing {path} would replace run {run_id} in {store.path} and drop {len(dropped)} of the "
                    f"{count_of(len(replaced) + len(kept), 'result')} it holds: the file has no row of "
                    f"{noun(len(dropped), 'job')} {named} (a part "
                    "of the export, or its published rows only?); nothing was imported",
                    fix=f"import the file that holds the whole run, or pass {_FORCE} to store the run as this file "
                        "holds it, dropping those results")
    n, ids = 0, []
    for original, run_id, pts, kept, _replaced in placed:
        # what the run warned of its jobs, where `Store.job_warnings` reads a run's: its outcomes (those of the
        # results kept from the earlier import as that import stored them)
        held_warnings = store.job_warnings([run_id]) if kept else {}
        outcomes = [{"job_id": p.job_id, "status": p.verdict, "reasons": list(p.reasons), "warnings": said}
                    for p in pts if (said := warned.get((original, p.job_id)))]
        outcomes += [{"job_id": k.job_id, "status": k.verdict, "reasons": list(k.reasons), "warnings": said}
                     for k in kept if (said := held_warnings.get((run_id, k.job_id)))]
        meta = {"imported_from": str(path), "origin": origin,
                **({"original_run_id": original} if original != file_run else {}),
                **({"started": started[original]} if original in started else {}),
                **({"outcomes": outcomes} if outcomes else {})}
        store.ingest_points(run_id, origin, [*kept, *pts], meta)
        n += len(pts)
        ids.append(run_id)
    ids += [run_id for run_id in dict.fromkeys(r for r, _ in already) if run_id not in ids]
    return Stored(ids, n, tuple(already))


def _other_half(points: list[ResultPoint], held: list[ResultPoint]
                ) -> tuple[list[ResultPoint], list[ResultPoint], list[str], list[str]]:
    """(a file's results of a run, all of one kind, the held results of the run its import keeps, the job ids of
    those it replaces, the job ids of the file's results left out as held already). A file whose results are all of
    one kind — throughput results, or eval-only ones (eval rows) — keeps the held results of the other kind: a run's
    `inferencex` and `inferencex-evals` exports are two halves of it (a file holding both kinds is the whole run, and
    keeps nothing). Where a run-eval job has a result of each kind, its eval result is the job's eval half
    (`eval_half`), so both are stored under ids of their own; a held eval half whose job the file holds with its eval
    (a row of our JSON export: one result, throughput and eval) is replaced by it. A job held whole (a throughput
    result with its eval, from our JSON export) already holds either half the file has of it: that half is left out
    and the held result kept (stored beside it, an eval was listed twice; replacing it, a throughput row dropped its
    eval)."""
    whole_held = {h.job_id for h in held if not h.eval_only and h.eval is not None}
    halves = {p.job_id for p in points if p.job_id in whole_held and (p.eval_only or p.eval is None)}
    points = [p for p in points if p.job_id not in halves]
    held_whole = sorted(halves)
    kinds = {p.eval_only for p in points}
    if not points:
        return [], held, [], held_whole
    evaluated = {p.job_id for p in points if p.eval is not None}
    whole = {h.job_id for h in held if h.eval_only and (get_field(h.job, EVAL_HALF_OF) or h.job_id) in evaluated}
    kept = [h for h in held if (h.eval_only not in kinds or h.job_id in halves) and h.job_id not in whole]
    replaced = [h.job_id for h in held  # (an eval half the file holds whole is not dropped)
                if h.eval_only in kinds and h.job_id not in halves]
    throughput = {p.job_id for p in (kept if kinds == {True} else points)}
    points = [eval_half(p) if p.eval_only and p.job_id in throughput else p for p in points]
    kept = [eval_half(k) if k.eval_only and k.job_id in throughput else k for k in kept]
    return points, kept, replaced, held_whole


def points_as_rows(points: Iterable[ResultPoint]) -> list[dict[str, Any]]:
    return [dict(describe(p)) for p in points]
