"""`/metrics` of the simulated engine: SGLang- and vLLM-named Prometheus series read from the core at scrape time.

The names are the ones real engines export and the client's server-metrics adapters read (AgentX §3.7, §3.11): running
and waiting requests, KV usage, prompt/generation token counters, prefix-cache hits by source (device vs host tier),
preemptions, and speculative-decoding counters from which a read-back gate computes the realised acceptance length
(vLLM: 1 + accepted / drafts; SGLang: generation tokens / verify calls).

A decode worker of a disaggregated deployment also exports the KV-transfer series (`metrics.roles`, their one home)
from its :class:`KvTransfers`, through :func:`emit_kv_transfers`: the virtual-time workers (`sim.disagg`) into their
scrape rows, the live decode worker (`sim.server`) through a :class:`KvTransferCollector` on its `/metrics`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily

from llmsweep.metrics.roles import KV_BYTES, KV_IN_FLIGHT, KV_PREALLOC, KV_SECONDS
from llmsweep.sim.core import EngineCore

MetricsStyle = Literal["sglang", "vllm", "both"]


class _Families:
    """Sink that builds prometheus_client metric families (what `/metrics` renders)."""

    def __init__(self) -> None:
        self.families: list[Metric] = []

    def gauge(self, name: str, doc: str, value: float, labels: dict[str, str]) -> None:
        g = GaugeMetricFamily(name, doc, labels=list(labels))
        g.add_metric(list(labels.values()), value)
        self.families.append(g)

    def counter(self, name: str, doc: str, value: float, labels: dict[str, str]) -> None:
        c = CounterMetricFamily(name, doc, labels=list(labels))
        c.add_metric(list(labels.values()), value)
        self.families.append(c)

    def by(self, name: str, doc: str, key: str, values: dict[str, float], labels: dict[str, str]) -> None:
        c = CounterMetricFamily(name, doc, labels=[*labels, key])
        for label, value in values.items():
            c.add_metric([*labels.values(), label], value)
        self.families.append(c)

    def summary(self, name: str, doc: str, count: int, total: float, labels: dict[str, str]) -> None:
        m = SummaryMetricFamily(name, doc, labels=list(labels))
        m.add_metric(list(labels.values()), count_value=count, sum_value=total)
        self.families.append(m)


class _Rows:
    """Sink that writes the samples the families would hold as [name, labels, value] rows (counters' samples are
    named `<name>_total`, as prometheus_client names them), with no metric objects: a scrape in virtual time."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []

    def gauge(self, name: str, doc: str, value: float, labels: dict[str, str]) -> None:
        self.rows.append([name, dict(labels), value])

    def counter(self, name: str, doc: str, value: float, labels: dict[str, str]) -> None:
        self.rows.append([name + "_total", dict(labels), value])

    def by(self, name: str, doc: str, key: str, values: dict[str, float], labels: dict[str, str]) -> None:
        total = name + "_total"
        self.rows.extend([total, {**labels, key: label}, value] for label, value in values.items())

    def summary(self, name: str, doc: str, count: int, total: float, labels: dict[str, str]) -> None:
        self.rows += [[name + "_count", dict(labels), float(count)], [name + "_sum", dict(labels), total]]


class _Values:
    """Sink that keeps only the values, in the order `_Rows` writes its rows (the rows' names and labels do not change
    between scrapes of one core)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def gauge(self, name: str, doc: str, value: float, labels: dict[str, str]) -> None:
        self.values.append(value)

    counter = gauge

    def by(self, name: str, doc: str, key: str, values: dict[str, float], labels: dict[str, str]) -> None:
        self.values.extend(values.values())

    def summary(self, name: str, doc: str, count: int, total: float, labels: dict[str, str]) -> None:
        self.values += [float(count), total]


_Sink = _Families | _Rows | _Values


class CoreCollector:
    """A prometheus_client collector that snapshots an :class:`EngineCore` on every scrape."""

    def __init__(self, core: EngineCore, *, model_name: str, style: MetricsStyle = "both") -> None:
        self.core = core
        self.model_name = model_name
        self.style = style
        self._shape: list[tuple[str, dict[str, str]]] | None = None
        """The rows' names and labels, from the first `samples` call."""

    def _emit(self, sink: _Sink) -> None:
        if self.style in ("sglang", "both"):
            self._sglang(sink)
        if self.style in ("vllm", "both"):
            self._vllm(sink)

    def collect(self) -> Iterator[Metric]:
        sink = _Families()
        self._emit(sink)
        yield from sink.families

    def samples(self) -> list[list[Any]]:
        """What a scrape of `collect()` reads, as [sample name, labels, value] rows, built directly (no families)."""
        shape = self._shape
        if shape is None:
            sink = _Rows()
            self._emit(sink)
            # later scrapes share these label dicts (readers only read them): only the values are built anew
            self._shape = [(name, labels) for name, labels, _ in sink.rows]
            return sink.rows
        values = _Values()
        self._emit(values)
        return [[name, labels, value] for (name, labels), value in zip(shape, values.values, strict=True)]

    # -- SGLang names -----------------------------------------------------------------------------------------------
    def _sglang(self, out: _Sink) -> None:
        core, c = self.core, self.core.counters
        lb = {"model_name": self.model_name}
        out.gauge("sglang:num_running_reqs", "The number of running requests.", len(core.running), lb)
        out.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.",
                          len(core.waiting), lb)
        out.gauge("sglang:num_used_tokens", "The number of used tokens.", core.used_tokens(), lb)
        out.gauge("sglang:token_usage", "The token usage.", core.kv_usage(), lb)
        out.gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.",
                          core.capacity_tokens, lb)
        hits = c.device_hit_tokens + c.host_hit_tokens
        out.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.",
                          hits / c.prefix_query_tokens if c.prefix_query_tokens else 0.0, lb)
        out.counter("sglang:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens, lb)
        out.counter("sglang:generation_tokens", "Number of generation tokens processed.",
                            c.generation_tokens, lb)
        out.by("sglang:cached_tokens", "Number of cached prompt tokens by source (device/host/storage).",
                       "cache_source", {"device": c.device_hit_tokens, "host": c.host_hit_tokens}, lb)
        out.by("sglang:realtime_tokens", "Total number of tokens processed. mode: prefill_compute, "
                       "prefill_cache, decode.", "mode",
                       {"prefill_compute": c.computed_prompt_tokens, "prefill_cache": hits,
                        "decode": c.generation_tokens}, lb)
        out.counter("sglang:num_requests", "Number of requests processed.", c.requests_finished, lb)
        out.counter("sglang:num_retracted_requests", "Total number of retracted requests.",
                            c.preemptions, lb)
        if core.config.host_capacity_tokens:
            out.gauge("sglang:hicache_host_used_tokens", "Tokens held by the HiCache host pool.",
                              core.host_used_tokens(), lb)
            out.gauge("sglang:hicache_host_total_tokens", "Capacity of the HiCache host pool in tokens.",
                              core.config.host_capacity_tokens, lb)
        if core.sampler is not None:
            out.counter("sglang:spec_verify_calls", "Number of speculative verify calls.",
                                c.spec_verify_steps, lb)
            steps = c.spec_verify_steps
            out.gauge("sglang:spec_accept_length", "The average acceptance length of speculative decoding.",
                              1 + c.spec_accepted_tokens / steps if steps else 0.0, lb)
            out.gauge("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.",
                              c.spec_accepted_tokens / c.spec_draft_tokens if c.spec_draft_tokens else 0.0, lb)

    # -- vLLM names -------------------------------------------------------------------------------------------------
    def _vllm(self, out: _Sink) -> None:
        core, c = self.core, self.core.counters
        lb = {"model_name": self.model_name, "engine": "0"}
        out.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                          len(core.running), lb)
        out.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                          len(core.waiting), lb)
        out.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                          core.kv_usage(), lb)
        out.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", 1.0,
                  {"block_size": str(core.block_size), "num_gpu_blocks": str(core.num_blocks),
                   "num_cpu_blocks": str(core.pool.host_blocks)})
        out.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens, lb)
        out.counter("vllm:generation_tokens", "Number of generation tokens processed.",
                            c.generation_tokens, lb)
        # a KV connector's tokens are external whatever it connects to: the CPU tier's loads, a prefill worker's KV
        external = c.host_hit_tokens + c.transferred_tokens
        local_compute = c.prompt_tokens - c.device_hit_tokens - external
        out.by("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", "source",
                       {"local_compute": local_compute, "local_cache_hit": c.device_hit_tokens,
                        "external_kv_transfer": external}, lb)
        out.counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
                            c.device_hit_tokens + c.host_hit_tokens, lb)
        out.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried "
                            "tokens.", c.prefix_query_tokens, lb)
        out.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                            c.device_hit_tokens, lb)
        if core.config.host_capacity_tokens:
            out.counter("vllm:external_prefix_cache_queries", "External prefix cache queries, in tokens.",
                                c.prefix_query_tokens - c.device_hit_tokens, lb)
            out.counter("vllm:external_prefix_cache_hits", "External prefix cache hits, in tokens.",
                                c.host_hit_tokens, lb)
            host_total = core.config.host_capacity_tokens
            out.gauge("vllm:cpu_kv_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.",
                              core.host_used_tokens() / host_total if host_total else 0.0, lb)
        out.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                            c.preemptions, lb)
        out.by("vllm:request_success", "Count of successfully processed requests.", "finished_reason",
                       {"length": c.requests_finished}, lb)
        if core.sampler is not None:
            out.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
                                c.spec_verify_steps, lb)
            out.counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
                                c.spec_draft_tokens, lb)
            out.counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                c.spec_accepted_tokens, lb)


@dataclass(slots=True)
class KvTransfers:
    """The KV transfers into one decode worker: what its KV-transfer series export. A transfer starts when the worker
    takes the hand-off (virtual time: once it reserved the prompt's blocks), is in flight until the KV arrives, and
    then counts with its seconds (start to arrival) and bytes (the prompt's KV)."""

    in_flight: int = 0
    transfers: int = 0
    seconds: float = 0.0
    nbytes: float = 0.0

    def start(self) -> None:
        self.in_flight += 1

    def arrived(self, seconds: float, nbytes: float) -> None:
        self.in_flight -= 1
        self.transfers += 1
        self.seconds += seconds
        self.nbytes += nbytes

    def abandoned(self) -> None:
        """A transfer that never arrived (its request went away meanwhile): no longer in flight, not counted."""
        self.in_flight -= 1


def emit_kv_transfers(out: _Sink, kv: KvTransfers, labels: dict[str, str], *, prealloc: int | None) -> None:
    """A decode worker's KV-transfer series (`metrics.roles`). `prealloc`: requests waiting for decode-side KV blocks
    before their transfer; None where the worker has no such queue (the live decode worker reserves nothing before a
    transfer), and the series is then not exported rather than exported as a zero it did not measure."""
    if prealloc is not None:
        out.gauge(KV_PREALLOC.name, KV_PREALLOC.help, float(prealloc), labels)
    out.gauge(KV_IN_FLIGHT.name, KV_IN_FLIGHT.help, float(kv.in_flight), labels)
    out.summary(KV_SECONDS.name, KV_SECONDS.help, kv.transfers, kv.seconds, labels)
    out.counter(KV_BYTES.name, KV_BYTES.help, kv.nbytes, labels)


def kv_transfer_rows(kv: KvTransfers, labels: dict[str, str], *, prealloc: int | None) -> list[list[Any]]:
    """:func:`emit_kv_transfers` as [sample name, labels, value] rows (a scrape in virtual time)."""
    rows = _Rows()
    emit_kv_transfers(rows, kv, labels, prealloc=prealloc)
    return rows.rows


class KvTransferCollector:
    """A prometheus_client collector of a live decode worker's KV-transfer series (unlabelled: a role-by-role
    deployment's federated scrape labels every worker's series with its role and index, `execute.roles`)."""

    def __init__(self, kv: KvTransfers) -> None:
        self.kv = kv

    def collect(self) -> Iterator[Metric]:
        sink = _Families()
        emit_kv_transfers(sink, self.kv, {}, prealloc=None)
        yield from sink.families


def registry_for(core: EngineCore, *, model_name: str, style: MetricsStyle = "both") -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CoreCollector(core, model_name=model_name, style=style))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """Prometheus text exposition (version 0.0.4)."""
    return generate_latest(registry)
