"""Per-role figures of a disaggregated deployment: the summary's `deployment` and `roles` blocks.

What ran is read back from the run's provenance (`provenance.topology`, written by whatever placed the roles: the
simulator's disaggregated model today); what each role did over the profiling window is read from the server-metric
scrapes, whose series carry a `role` label per worker (`llmsweep.sim.disagg`). A run without a disaggregated topology
gets neither block.

The KV-transfer series a decode worker exports beside its engine series are defined here once (:data:`KV_PREALLOC`,
:data:`KV_IN_FLIGHT`, :data:`KV_SECONDS`, :data:`KV_BYTES`): the virtual-time workers (`sim.disagg`) and the live
simulator's decode worker (`sim.server`) export them under these names, and :func:`role_metrics` reads them back.
No engine agrees on one spelling, so the names are under `llmsweep:`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llmsweep.metrics.server import ServerWindow, _iter_scrapes

QUEUE = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")
RUNNING = ("sglang:num_running_reqs", "vllm:num_requests_running")
KV_USAGE = ("sglang:token_usage", "vllm:kv_cache_usage_perc")
PROMPT = ("sglang:prompt_tokens_total", "vllm:prompt_tokens_total")
GENERATION = ("sglang:generation_tokens_total", "vllm:generation_tokens_total")


@dataclass(frozen=True)
class SeriesDef:
    """One Prometheus metric family: its name, type and help text. A counter's sample is `<name>_total`, a summary's
    are `<name>_sum` and `<name>_count` (as prometheus_client writes them and the scrape keeps them)."""

    name: str
    kind: Literal["gauge", "counter", "summary"]
    help: str

    @property
    def total(self) -> str:
        assert self.kind == "counter", self
        return self.name + "_total"

    @property
    def sum(self) -> str:
        assert self.kind == "summary", self
        return self.name + "_sum"

    @property
    def count(self) -> str:
        assert self.kind == "summary", self
        return self.name + "_count"


KV_PREALLOC = SeriesDef("llmsweep:disagg_prealloc_queue_reqs", "gauge",
                        "Requests waiting for decode-side KV blocks before their KV transfer starts.")
KV_IN_FLIGHT = SeriesDef("llmsweep:disagg_transfer_queue_reqs", "gauge",
                         "KV transfers into this decode worker that have started and not yet arrived.")
KV_SECONDS = SeriesDef("llmsweep:kv_transfer_seconds", "summary",
                       "KV transfers into this decode worker that arrived (_count) and the seconds they took from "
                       "their start to the KV's arrival (_sum).")
KV_BYTES = SeriesDef("llmsweep:kv_transfer_bytes", "counter",
                     "Bytes of KV that arrived on this decode worker (prompt tokens x the model's KV bytes per token).")
PROMPT_BY_SOURCE = ("vllm:prompt_tokens_by_source_total",)
"""vLLM's prompt tokens by where their KV came from (`source`: local_compute, local_cache_hit, external_kv_transfer)."""
EXTERNAL_KV = "external_kv_transfer"
FAILED_KV = ("vllm:nixl_num_failed_transfers_total",)
"""vLLM's NIXL transfers that failed (`nixl/stats.py`)."""
NIXL_SECONDS, NIXL_BYTES = "vllm:nixl_xfer_time_seconds", "vllm:nixl_bytes_transferred"
"""vLLM's histograms of its NIXL transfers on the worker that pulls the KV (`nixl/stats.py`): each transfer's
duration and bytes. A real engine's decode workers give `kv_transfers`, `kv_transfer_s_mean` and
`kv_transfer_bytes` from them where they export no `llmsweep:` series."""
ROUTER_NO_KV = SeriesDef("llmsweep:pd_router_refused_no_kv_handle", "counter",
                         "Prefill answers the router refused (502) because they handed over no KV for the decode "
                         "worker (read from the router's /version at each scrape, `execute.roles`).")
ROUTER_ABANDONED = SeriesDef("llmsweep:pd_router_abandoned_requests", "counter",
                             "Requests whose client went away while the router waited on a worker that had sent "
                             "nothing of its answer, or nothing more of it for `router.STALLED_AFTER_S` (a hung or "
                             "stalled worker, or one too slow for the client's timeout), "
                             "dropped at that worker; labelled by `pool` (prefill, decode) and worker `url` (read "
                             "from the router's /version at each scrape, `execute.roles`).")
ROUTER_RETRIED = SeriesDef("llmsweep:pd_router_retried_requests", "counter",
                           "Legs the router sent again, once, on a new connection because the pooled keep-alive "
                           "connection they went out on was closed or reset before any of the worker's answer came "
                           "(its idle timeout crossing the request); labelled by `pool` (prefill, decode) and worker "
                           "`url` (read from the router's /version at each scrape, `execute.roles`).")
DEPLOYMENT_KEYS = ("disaggregated", "nodes", "gpus", "gpus_per_node", "kv_transfer", "router_policy", "links",
                   "engine", "router")


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
    prealloc_mean, prealloc_max = _gauges(w, (KV_PREALLOC.name,), role)
    seconds = w.counter(KV_SECONDS.sum, f"{NIXL_SECONDS}_sum", where=where)
    count = w.counter(KV_SECONDS.count, f"{NIXL_SECONDS}_count", where=where)
    return {
        "queue_mean": queue_mean, "queue_max": queue_max, "running_mean": running_mean, "running_max": running_max,
        "kv_usage_mean": kv_mean, "kv_usage_max": kv_max,
        "prealloc_queue_mean": prealloc_mean, "prealloc_queue_max": prealloc_max,
        "prompt_tokens": w.counter(*PROMPT, where=where), "generation_tokens": w.counter(*GENERATION, where=where),
        "kv_transfers": count, "kv_transfer_s_mean": seconds / count if seconds is not None and count else None,
        "kv_transfer_bytes": w.counter(KV_BYTES.total, f"{NIXL_BYTES}_sum", where=where),
        "prompt_tokens_transferred": w.counter(*PROMPT_BY_SOURCE, where={**where, "source": EXTERNAL_KV}),
        "prompt_tokens_computed": w.counter(*PROMPT_BY_SOURCE, where={**where, "source": "local_compute"}),
        "kv_failed_transfers": w.counter(*FAILED_KV, where=where),
        "refused_no_kv": w.counter(ROUTER_NO_KV.total, where=where),
        "abandoned": _by_worker(w, role, ROUTER_ABANDONED),
        "retried": _by_worker(w, role, ROUTER_RETRIED),
    }


def _by_worker(w: ServerWindow, role: str, series: SeriesDef) -> dict[str, float] | None:
    """A count of the router's by worker in the window (`abandoned`: the requests a client gave up on while the
    router waited on that worker; `retried`: the legs sent to it again on a new connection), keyed by the worker as
    its errors name it (`prefill worker URL` or `decode worker URL`), the workers with none left out; None when the
    router reports none."""
    out: dict[str, float] = {}
    for labels in sorted(w.label_values(series.total)):
        said = dict(labels)
        if said.get("role") != role:
            continue
        count = w.counter(series.total, where=said)
        if count:
            out[f"{said.get('pool')} worker {said.get('url')}"] = count
    return out or None


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
        if window.scrapes and (role.get("kind") != "router" or _has_role(window, name)):
            block["metrics"] = role_metrics(window, name)
        roles[name] = block
    return {"deployment": {k: topo[k] for k in DEPLOYMENT_KEYS if k in topo}, "roles": roles}


def _has_role(w: ServerWindow, role: str) -> bool:
    """Whether any series of the window is labelled as `role`'s (a router's counters, where it reports some)."""
    return any(dict(labels).get("role") == role for (_name, labels) in w.series)
