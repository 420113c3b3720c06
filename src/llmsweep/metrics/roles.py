"""Per-role figures of a disaggregated deployment: the summary's `deployment` and `roles` blocks.

What ran is read back from the run's provenance (`provenance.topology`, written by whatever placed the roles: the
simulator's disaggregated model today); what each role did over the profiling window is read from the server-metric
scrapes, whose series carry a `role` label per worker (`llmsweep.sim.disagg`). A run without a disaggregated topology
gets neither block.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from llmsweep.metrics.server import ServerWindow, _iter_scrapes

QUEUE = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")
RUNNING = ("sglang:num_running_reqs", "vllm:num_requests_running")
KV_USAGE = ("sglang:token_usage", "vllm:kv_cache_usage_perc")
PROMPT = ("sglang:prompt_tokens_total", "vllm:prompt_tokens_total")
GENERATION = ("sglang:generation_tokens_total", "vllm:generation_tokens_total")
PREALLOC = "llmsweep:disagg_prealloc_queue_reqs"
TRANSFER_S = "llmsweep:kv_transfer_seconds"
TRANSFER_BYTES = "llmsweep:kv_transfer_bytes_total"
DEPLOYMENT_KEYS = ("disaggregated", "nodes", "gpus", "gpus_per_node", "kv_transfer", "router_policy", "links")


def topology_of(provenance: dict[str, Any] | None) -> dict[str, Any] | None:
    """The deployment a run recorded as having run (None: an aggregated server, or nothing recorded)."""
    topo = (provenance or {}).get("topology")
    return topo if isinstance(topo, dict) and topo.get("disaggregated") else None


def _gauges(w: ServerWindow, names: tuple[str, ...], role: str) -> tuple[float | None, float | None]:
    """(sum over the role's workers of each one's mean, highest value any of them reached) of the first name that has
    series for the role."""
    for name in names:
        series = [s for (n, labels), s in w.series.items() if n == name and dict(labels).get("role") == role]
        means = [m for s in series if (m := s.mean()) is not None]
        if means:
            highs = [s.gmax for s in series if s.gmax is not None]
            return float(sum(means)), (float(max(highs)) if highs else None)
    return None, None


def _usage(w: ServerWindow, role: str) -> tuple[float | None, float | None]:
    """KV usage (0-1): the mean over the role's workers of each one's mean, and the highest."""
    for name in KV_USAGE:
        series = [s for (n, labels), s in w.series.items() if n == name and dict(labels).get("role") == role]
        means = [m for s in series if (m := s.mean()) is not None]
        if means:
            highs = [s.gmax for s in series if s.gmax is not None]
            return float(sum(means) / len(means)), (float(max(highs)) if highs else None)
    return None, None


def role_metrics(w: ServerWindow, role: str) -> dict[str, Any]:
    where = {"role": role}
    queue_mean, queue_max = _gauges(w, QUEUE, role)
    running_mean, running_max = _gauges(w, RUNNING, role)
    kv_mean, kv_max = _usage(w, role)
    prealloc_mean, prealloc_max = _gauges(w, (PREALLOC,), role)
    seconds = w.counter(TRANSFER_S + "_sum", where=where)
    count = w.counter(TRANSFER_S + "_count", where=where)
    return {
        "queue_mean": queue_mean, "queue_max": queue_max, "running_mean": running_mean, "running_max": running_max,
        "kv_usage_mean": kv_mean, "kv_usage_max": kv_max,
        "prealloc_queue_mean": prealloc_mean, "prealloc_queue_max": prealloc_max,
        "prompt_tokens": w.counter(*PROMPT, where=where), "generation_tokens": w.counter(*GENERATION, where=where),
        "kv_transfers": count, "kv_transfer_s_mean": seconds / count if seconds is not None and count else None,
        "kv_transfer_bytes": w.counter(TRANSFER_BYTES, where=where),
    }


def deployment_blocks(provenance: dict[str, Any] | None, server_metrics: Path | Iterable[dict[str, Any]] | None,
                      start: float | None, end: float | None) -> dict[str, Any]:
    """`{"deployment": ..., "roles": ...}` for a disaggregated run (empty for any other)."""
    topo = topology_of(provenance)
    if topo is None:
        return {}
    window = ServerWindow(start, end)
    if server_metrics is not None:
        for scrape in _iter_scrapes(server_metrics):
            window.add(scrape)
    roles: dict[str, Any] = {}
    for name, role in (topo.get("roles") or {}).items():
        block = dict(role)
        if role.get("kind") != "router" and window.scrapes:
            block["metrics"] = role_metrics(window, name)
        roles[name] = block
    return {"deployment": {k: topo[k] for k in DEPLOYMENT_KEYS if k in topo}, "roles": roles}
