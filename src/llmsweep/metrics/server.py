"""Server-side metrics: Prometheus scrapes → deltas and gauge statistics over the profiling window, read through
engine adapters (SGLang, vLLM, TensorRT-LLM, ATOM) into one engine-neutral block.

Counters (`*_total`, `*_count`, `*_sum`) become the increase over the window, from the last value read before its
start (a scrape whose answer came after the start may hold the window's first increments, `client.scrape`) to the
last value at or before the window end, summed scrape to scrape as Prometheus's `increase()` sums them: a value
below the one before is a counter reset (a restarted worker), which counts from zero, not as no increase; a series
that a scrape answered before the start did not hold yet (a labelled child born in the window, e.g. SGLang's first
host-cache hit) counts from zero too. Gauges become max and mean over the scrapes inside the window. Scrapes are
streamed line by line, so multi-GiB exports never sit in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmsweep.engine_ids import ENGINE_IDS
from llmsweep.jsonline import loads_line
from llmsweep.words import count_of, noun

COUNTER_SUFFIXES = ("_total", "_count", "_sum")
END_SLACK_S = 1.0
"""A scrape up to this long after the last response still counts as the window's closing bracket."""
RANK_LABELS = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank"})
"""Labels that tell apart the ranks of one engine, which each export the engine's own figures (SGLang's scheduler
labels every series with its `tp_rank`, `pp_rank` and `moe_ep_rank`; `dp_rank` names another engine)."""


@dataclass(slots=True)
class _Series:
    before: float | None = None  # last value read (answered) at or before window start
    last_in: float | None = None  # last value at or before window end (+ slack)
    increase: float = 0.0  # summed from the base scrape to scrape through the window, resets counted from zero
    gmax: float | None = None
    gsum: float = 0.0
    gcount: int = 0

    def observe(self, value: float) -> None:
        """A value inside the window: its increase over the value before it (the base, or the window's previous
        scrape); a drop is a reset, after which the counter counted `value` from zero."""
        prev = self.last_in if self.last_in is not None else self.before
        if prev is not None:
            self.increase += value - prev if value >= prev else value
        self.last_in = value

    def delta(self) -> float | None:
        if self.last_in is None:
            return None
        return self.increase

    def mean(self) -> float | None:
        return self.gsum / self.gcount if self.gcount else None


def _iter_scrapes(source: Path | Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            return
        with path.open("rb") as fh:
            for line in fh:
                if line.strip():
                    try:
                        yield loads_line(line)
                    except ValueError:
                        if line.endswith(b"\n"):  # a whole line damaged since; a torn last line (SIGKILL) is not
                            yield UNREADABLE
    else:
        yield from source


UNREADABLE: dict[str, Any] = {"unreadable": True}
"""What `_iter_scrapes` yields for a whole line of `server_metrics.jsonl` that is not JSON (`ServerWindow.add`)."""


class ServerWindow:
    """Per-series aggregates of the scrapes that fall around a profiling window."""

    def __init__(self, start: float | None, end: float | None) -> None:
        self.start = start
        self.end = end
        self.series: dict[tuple[str, tuple[tuple[str, str], ...]], _Series] = {}
        self._by_name: dict[str, list[tuple[tuple[tuple[str, str], ...], _Series]]] = {}
        """Each name's series with their labels (what the queries below read, without scanning every series)."""
        self.names: set[str] = set()
        self.scrapes = 0
        self.scrape_errors = 0
        self.unreadable = 0
        """Lines that are not a scrape (damaged after they were written): the window's base or end may be missing."""
        self.based = False
        """Whether a scrape answered by the window's start was read: a series it lacked was born later, at 0."""
        self._shape: list[tuple[str, dict[str, str], _Series]] = []
        """The last scrape's rows by place: (name, labels, series)."""

    def add(self, scrape: dict[str, Any]) -> None:
        if not isinstance(scrape, dict) or scrape is UNREADABLE or (
                "error" not in scrape and not isinstance(scrape.get("t"), (int, float))):
            self.unreadable += 1  # not a scrape: a damaged line, or one without its time
            return
        if "error" in scrape:
            self.scrape_errors += 1
            return
        self.scrapes += 1
        t = float(scrape["t"])
        answered = float(scrape.get("answered", t))  # (virtual-time scrapes and older files: read at `t`)
        start = self.start if self.start is not None else float("-inf")
        end = self.end if self.end is not None else float("inf")
        in_window = start <= t <= end
        base = answered <= start
        if base:
            self.based = True
        observe = not base and t <= end + END_SLACK_S
        # a series first seen now was born after the window's base scrape: it counted from 0 (without a base, its
        # first value is one)
        born = 0.0 if self.based and answered > start else None
        shape = self._shape
        known = len(shape)
        for i, (name, labels, value) in enumerate(scrape.get("samples", ())):
            # a scrape's rows come in the order of the one before (one exporter): the same name and labels at the
            # same place are the same series, found without sorting its labels
            row = shape[i] if i < known else None
            if row is not None and row[0] == name and row[1] == labels:
                s = row[2]
            else:
                s = self._series_of(name, labels, born)
                row = (name, dict(labels), s)  # (a copy: the caller's dict is its own)
                if i < known:
                    shape[i] = row
                else:
                    shape.append(row)
            if base:
                s.before = value
            elif observe:
                s.observe(value)
            if in_window:
                if s.gmax is None or value > s.gmax:  # (`max`: the first of equal values stays)
                    s.gmax = value
                s.gsum += value
                s.gcount += 1

    def _series_of(self, name: str, labels: dict[str, str], born: float | None) -> _Series:
        """The series of `name` with `labels`, made (starting from `born`) if it is new."""
        self.names.add(name)
        key = (name, tuple(sorted(labels.items())))
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = _Series(before=born)
            self._by_name.setdefault(name, []).append((key[1], s))
        return s

    # ------------------------------------------------------------------ queries used by adapters
    def _matching(self, name: str, where: dict[str, str] | None) -> list[_Series]:
        out = []
        for labels, s in self._by_name.get(name, ()):
            if where:
                d = dict(labels)
                if any(d.get(k) != v for k, v in where.items()):
                    continue
            out.append(s)
        return out

    def decoded(self, *names: str) -> float | None:
        """What the deployment served over the window of a series both roles of a disaggregated deployment count
        (`counter`): its decode workers' alone. A prefill worker counts each request too, as its prefill ends (the
        sum had been twice the requests served), and the first token it computes (the sum had added one token a
        request to the output the client received, and so to the acceptance length read from it)."""
        return self.counter(*names, where=self.role_where(names, "decode"))

    def prefilled(self, *names: str, where: dict[str, str] | None = None) -> float | None:
        """What the deployment took in over the window of a prompt-side series both roles of a disaggregated
        deployment count (`counter`): its prefill workers' alone. A decode worker counts each request's prompt again
        as it arrives, and (vLLM) its KV from the transfer as `external_kv_transfer`, a cache hit by the series'
        reading: summed, the deployment's prompt tokens were twice what it served and its prefix-cache hit rate
        counted every transferred prompt as a hit."""
        return self.counter(*names, where={**(where or {}), **(self.role_where(names, "prefill") or {})})

    def prefill_mean(self, name: str) -> float | None:
        """:meth:`gauge_mean` of a prompt-side gauge (a hit rate), its prefill workers' alone where it carries roles
        (:meth:`prefilled`)."""
        return self.gauge_mean(name, where=self.role_where((name,), "prefill"))

    def prefill_labels(self, name: str) -> set[tuple[tuple[str, str], ...]]:
        """:meth:`label_values` of `name`, its prefill workers' alone where it carries roles (:meth:`prefilled`)."""
        labels = self.label_values(name)
        if self.role_where((name,), "prefill"):
            return {ls for ls in labels if dict(ls).get("role") == "prefill"}
        return labels

    def role_where(self, names: Iterable[str], role: str) -> dict[str, str] | None:
        """`{"role": role}` where a series of `names` comes from a disaggregated deployment's `role` workers (their
        series carry the label), else None (one server: every series counts). The one test of :meth:`decoded`,
        :meth:`prefilled` and the gauges read per role."""
        names = tuple(names)
        if any(dict(labels).get("role") == role for name in names for labels, _ in self._by_name.get(name, ())):
            return {"role": role}
        return None

    def counter(self, *names: str, where: dict[str, str] | None = None) -> float | None:
        """Window increase summed over series, from the first name that has any series."""
        for name in names:
            deltas = [d for s in self._matching(name, where) if (d := s.delta()) is not None]
            if deltas:
                return float(sum(deltas))
        return None

    def gauge_max(self, *names: str) -> float | None:
        for name in names:
            vals = [s.gmax for s in self._matching(name, None) if s.gmax is not None]
            if vals:
                return float(max(vals))
        return None

    def gauge_mean(self, *names: str, where: dict[str, str] | None = None) -> float | None:
        for name in names:
            vals = [m for s in self._matching(name, where) if (m := s.mean()) is not None]
            if vals:
                return float(sum(vals) / len(vals))
        return None

    def label_values(self, name: str) -> set[tuple[tuple[str, str], ...]]:
        return {labels for labels, _ in self._by_name.get(name, ())}

    def per_engine_sum(self, name: str,
                       value: Callable[[dict[str, str], _Series], float | None]) -> tuple[float | None, int | None]:
        """A figure each engine of the deployment reports once (its KV pool), summed over the engines, and how many
        engines said it: series whose labels differ only in :data:`RANK_LABELS` are one engine's ranks repeating its
        figure (the largest is taken), any other label (vLLM's `engine`, SGLang's `dp_rank`, a disaggregated worker's
        `role`) tells engines apart. `value(labels, series)` reads one series' figure (None: it has none)."""
        engines: dict[tuple[tuple[str, str], ...], float] = {}
        for labels, s in self._by_name.get(name, ()):
            v = value(dict(labels), s)
            if v is None:
                continue
            engine = tuple(kv for kv in labels if kv[0] not in RANK_LABELS)
            engines[engine] = max(v, engines.get(engine, v))
        return (float(sum(engines.values())), len(engines)) if engines else (None, None)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _frac(value: float | None) -> float | None:
    """Fractions above 1.5 are percentages (some engines export 0–100)."""
    if value is None:
        return None
    return value / 100.0 if value > 1.5 else value


LATENCY_HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft_mean_s": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds",
                    "trtllm_time_to_first_token_seconds"),
    "tpot_mean_s": ("vllm:request_time_per_output_token_seconds", "trtllm_time_per_output_token_seconds"),
    # vLLM ≥ 0.11 splits per-request TPOT from per-token ITL; before, time_per_output_token was per token
    "itl_mean_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
                   "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    "e2el_mean_s": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds",
                    "trtllm_e2e_request_latency_seconds"),
}
"""The engines' latency histograms, first name found wins, by the figure of `server_metrics.latency` they give."""


def latency_from_totals(totals: dict[str, tuple[float, float]], prefix: str = "") -> dict[str, Any]:
    """`server_metrics.latency` from each histogram's (sum, count) over a window: the server's own mean TTFT, TPOT,
    ITL and E2EL. A client that disagrees with it is measuring itself (send, parse, event-loop stalls); two runs
    that agree with it and still differ saw a different server. Means only: the scraper keeps sum and count, not
    buckets."""
    out: dict[str, Any] = {}
    requests = None
    for key, names in LATENCY_HISTOGRAMS.items():
        out[key] = None
        for name in names:
            total, count = totals.get(name, (None, None))
            if name.startswith(prefix) and total is not None and count:
                out[key] = total / count
                if key == "ttft_mean_s":
                    requests = count
                break
    out["requests"] = requests
    return out


def _latency(w: ServerWindow, prefix: str) -> dict[str, Any]:
    totals: dict[str, tuple[float, float]] = {}
    for names in LATENCY_HISTOGRAMS.values():
        for name in names:
            total, count = w.counter(f"{name}_sum"), w.counter(f"{name}_count")
            if total is not None and count is not None:
                totals[name] = (total, count)
    return latency_from_totals(totals, prefix)


def _pool(tokens: float | None, engines: int | None) -> dict[str, Any]:
    """`kv_cache`'s pool figures: the tokens and how many engines' figures they add up."""
    return {"pool_tokens": tokens, "pool_engines": engines}


def _whole(text: str | None) -> int | None:
    """A label's whole number (vLLM's info labels are strings; 'None' before its profiling sized the pool)."""
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _seen(_labels: dict[str, str], s: _Series) -> float | None:
    """A gauge's value over the window: its largest inside it, else the last one read (before it, if only then)."""
    return s.gmax if s.gmax is not None else s.last_in if s.last_in is not None else s.before


def _vllm_pool(w: ServerWindow) -> tuple[float | None, int | None]:
    """The tokens vLLM's KV pool holds and how many engines said it, from `vllm:cache_config_info`'s labels: each
    engine's `kv_cache_size_tokens` where the release says it (what vLLM logs as its "GPU KV cache size"), summed
    over engines. An older release says only `num_gpu_blocks`, which its front end sums over the DP engines before
    every engine's series repeats it (`num_gpu_blocks` x `block_size` is then the deployment's, taken once), and which
    counts a hybrid model's linear-attention pages too (35,187 x 560 = 19.7M where the committed Qwen3-Next run
    logged 15.2M): none is read then, and the simulator sizes the pool."""
    name = "vllm:cache_config_info"

    def per_engine(labels: dict[str, str], _s: _Series) -> float | None:
        return float(t) if (t := _whole(labels.get("kv_cache_size_tokens"))) else None

    said = w.per_engine_sum(name, per_engine)
    if said[0] is not None:
        return said
    pools = []
    for labels in w.label_values(name):
        d = dict(labels)
        if _whole(d.get("mamba_block_size")) is not None:  # a hybrid model's blocks are not its tokens' pool
            return None, None
        blocks, size = _whole(d.get("num_gpu_blocks")), _whole(d.get("block_size"))
        if blocks and size:
            pools.append(float(blocks * size))
    return (max(pools), len(pools)) if pools else (None, None)


def _vllm(w: ServerWindow) -> dict[str, Any]:
    hits = w.prefilled("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
    queries = w.prefilled("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
    gpu_rate = _ratio(hits, queries)
    ext_rate = _ratio(w.prefilled("vllm:external_prefix_cache_hits_total"),
                      w.prefilled("vllm:external_prefix_cache_queries_total"))
    overall = gpu_rate
    by_source = w.prefill_labels("vllm:prompt_tokens_by_source_total")
    if by_source:
        sources: dict[str, float] = {}
        for labels in by_source:
            src = dict(labels).get("source", "")
            tokens = w.counter("vllm:prompt_tokens_by_source_total", where=dict(labels)) or 0.0
            sources[src] = sources.get(src, 0.0) + tokens
        total = sum(sources.values())
        if total > 0:
            gpu_rate = sources.get("local_cache_hit", 0.0) / total
            ext_rate = sources.get("external_kv_transfer", 0.0) / total
            overall = (sources.get("local_cache_hit", 0.0) + sources.get("external_kv_transfer", 0.0)) / total
    accepted = w.counter("vllm:spec_decode_num_accepted_tokens_total")
    drafts = w.counter("vllm:spec_decode_num_drafts_total")
    draft_tokens = w.counter("vllm:spec_decode_num_draft_tokens_total")
    al = 1.0 + accepted / drafts if accepted is not None and drafts else None
    return {
        "queue": _queue(w, "vllm:num_requests_running", "vllm:num_requests_waiting"),
        "preemptions": w.counter("vllm:num_preemptions_total"),
        "kv_cache": {
            "gpu_usage_max": _frac(w.gauge_max("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
            "gpu_usage_mean": _frac(w.gauge_mean("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
            "cpu_usage_max": _frac(w.gauge_max("vllm:cpu_kv_cache_usage_perc", "vllm:cpu_cache_usage_perc")),
            **_pool(*_vllm_pool(w)),
        },
        "cache": {"gpu_hit_rate": gpu_rate, "cpu_hit_rate": ext_rate, "overall_hit_rate": overall},
        "latency": _latency(w, "vllm:"),
        "tokens": {
            "prompt_total": w.prefilled("vllm:prompt_tokens_total"),
            "generation_total": w.decoded("vllm:generation_tokens_total"),
            "requests_completed": w.decoded("vllm:request_success_total"),
        },
        "spec_decode": {
            "acceptance_length": al,
            "acceptance_rate": _ratio(accepted, draft_tokens),
            "accepted_tokens": accepted,
            "drafts": drafts,
            "draft_tokens": draft_tokens,
            "verify_steps": drafts,
            "method": "1 + d(accepted_tokens) / d(drafts)",
        },
    }


def _sglang(w: ServerWindow) -> dict[str, Any]:
    prompt = w.prefilled("sglang:prompt_tokens_total")
    device = w.prefilled("sglang:cached_tokens_total", where={"cache_source": "device"})
    host = w.prefilled("sglang:cached_tokens_total", where={"cache_source": "host"})
    cached_all = w.prefilled("sglang:cached_tokens_total")
    overall = _ratio(cached_all, prompt)
    if overall is None:
        overall = _frac(w.prefill_mean("sglang:cache_hit_rate"))
    gen = w.decoded("sglang:generation_tokens_total")
    verify = w.counter("sglang:spec_verify_calls_total")
    requests = w.decoded("sglang:num_requests_total")
    al, said = sglang_acceptance_length(gen, requests, verify)
    method: str | None = said
    if al is None:
        al = w.gauge_mean("sglang:spec_accept_length")
        # a method is named only for a figure it gave: without spec samples the block says nothing was read
        method = "mean of sglang:spec_accept_length" if al is not None else None
    return {
        "queue": _queue(w, "sglang:num_running_reqs", "sglang:num_queue_reqs"),
        "preemptions": w.counter("sglang:num_retracted_requests_total"),
        "kv_cache": {
            "gpu_usage_max": _frac(w.gauge_max("sglang:token_usage")),
            "gpu_usage_mean": _frac(w.gauge_mean("sglang:token_usage")),
            # the HiCache host pool's peak fill, where the server exports it (the simulator does)
            "cpu_usage_max": _ratio(w.gauge_max("sglang:hicache_host_used_tokens"),
                                    w.gauge_max("sglang:hicache_host_total_tokens")),
            **_pool(*w.per_engine_sum("sglang:max_total_num_tokens", _seen)),
        },
        "cache": {
            "gpu_hit_rate": _ratio(device, prompt) if device is not None else overall,
            "cpu_hit_rate": _ratio(host, prompt),
            "overall_hit_rate": overall,
        },
        "latency": _latency(w, "sglang:"),
        "tokens": {
            "prompt_total": prompt,
            "generation_total": gen,
            "requests_completed": w.decoded("sglang:num_requests_total"),
        },
        "spec_decode": {
            "acceptance_length": al,
            "acceptance_rate": None,
            "accepted_tokens": None,
            "drafts": None,
            "draft_tokens": None,
            "verify_steps": verify,
            "method": method,
        },
    }


SGLANG_AL_METHOD = "(d(generation_tokens) - 1.5 d(num_requests)) / (d(spec_verify_calls) - 0.5 d(num_requests))"


def sglang_acceptance_length(generated: float | None, requests: float | None,
                             verify_calls: float | None) -> tuple[float | None, str]:
    """SGLang's realised AL over a window, and how it was computed.

    SGLang counts tokens and verify calls, not accepted drafts, so two per-request effects are taken out of
    `generated / verify_calls`. Each request's first token comes from its prefill, not from a verify step (G − R
    tokens came from the V steps). And its last step is cut where the output stops (max_tokens, or EOS, drop what was
    accepted past it): by Wald's identity the V steps carry G − R tokens plus the cut-off overshoot, whose mean over
    output lengths is (E[X²] − AL) / (2 AL) for X tokens per step; with the near-constant X of a pinned acceptance
    (E[X²] ≈ AL²) that is (AL − 1) / 2 per request, and solving AL = (G − R + R (AL − 1) / 2) / V gives
    AL = (G − 1.5 R) / (V − 0.5 R). Worked example, AL 2: requests of 8 and 9 tokens take 1 prefill token and 7 and
    8 tokens from 4 steps each (the 7-token one's 4th step cut to 1): G = 17, R = 2, V = 8; the raw ratio reads
    2.125, the prefill correction alone 1.875, the formula (17 − 3) / (8 − 1) = 2.0. Without a request count the raw
    ratio is returned, and the method says so."""
    if generated is None or not verify_calls:
        return None, SGLANG_AL_METHOD
    if requests is None:
        return generated / verify_calls, "d(generation_tokens) / d(spec_verify_calls) (uncorrected: no request count)"
    steps = verify_calls - 0.5 * requests
    if steps <= 0:
        return None, SGLANG_AL_METHOD
    return max(generated - 1.5 * requests, 0.0) / steps, SGLANG_AL_METHOD


def _trtllm(w: ServerWindow) -> dict[str, Any]:
    """TensorRT-LLM's `/prometheus/metrics` (`trtllm_` names, `tensorrt_llm/metrics/collector.py`). Per-request
    counters need `return_perf_metrics: true` and the KV gauges `enable_iter_perf_stats: true` in the LLM-API options
    (the adapter writes both). Speculative counters are per draft position (`token_position`): every draft round
    drafts position 0, so its drafted count is the number of verify steps, and AL = 1 + Σaccepted / drafted[pos 0].
    The names are read from the collector's source; not yet checked against a live trtllm-serve scrape."""
    prompt = w.prefilled("trtllm_prompt_tokens_total")
    cached = w.prefilled("trtllm_prompt_cached_tokens_total")
    hit = _ratio(cached, prompt)
    if hit is None:
        hit = _frac(w.prefill_mean("trtllm_kv_cache_hit_rate"))
    accepted = w.counter("trtllm_spec_decode_accepted_tokens_total")
    drafted = w.counter("trtllm_spec_decode_drafted_tokens_total")
    steps = w.counter("trtllm_spec_decode_drafted_tokens_total", where={"token_position": "0"})
    al = 1.0 + accepted / steps if accepted is not None and steps else None
    return {
        "queue": _queue(w, "trtllm_num_active_requests", "trtllm_server_queue_length"),
        "kv_cache": {
            "gpu_usage_max": _frac(w.gauge_max("trtllm_kv_cache_utilization")),
            "gpu_usage_mean": _frac(w.gauge_mean("trtllm_kv_cache_utilization")),
            "cpu_usage_max": None,
        },
        "cache": {"gpu_hit_rate": hit, "cpu_hit_rate": None, "overall_hit_rate": hit},
        "latency": _latency(w, "trtllm_"),
        "tokens": {
            "prompt_total": prompt,
            "generation_total": None,
            "requests_completed": w.decoded("trtllm_request_success_total"),
        },
        "spec_decode": {
            "acceptance_length": al,
            "acceptance_rate": _ratio(accepted, drafted),
            "accepted_tokens": accepted,
            "drafts": steps,
            "draft_tokens": drafted,
            "verify_steps": steps,
            "method": "1 + d(spec_decode_accepted_tokens) / d(spec_decode_drafted_tokens{token_position=0})",
        },
    }


def _atom(w: ServerWindow) -> dict[str, Any]:
    """ATOM's `/metrics` (`atom:` names, ATOM's metrics reference; `prometheus_client` appends `_total` to counters,
    so both spellings are read). AL = 1 + Δaccepted / Δverify steps, the steps being `atom:mtp_decode_steps` summed
    over its `accepted_tokens` label — the formula ATOM itself uses for `atom:mtp_average_tokens_per_forward`, whose
    in-window mean is the fallback (the gauge is cumulative since start, so it lags a window that follows warm-up)."""
    full = w.prefilled("atom:prefix_cache_full_tokens_total", "atom:prefix_cache_full_tokens")
    cached = w.prefilled("atom:prefix_cache_cached_tokens_total", "atom:prefix_cache_cached_tokens")
    loaded = w.prefilled("atom:lmcache_loaded_tokens_total", "atom:lmcache_loaded_tokens")
    gpu = _ratio(cached, full)
    if gpu is None:
        gpu = _frac(w.prefill_mean("atom:prefix_cache_hit_ratio"))
    accepted = w.counter("atom:mtp_accepted_tokens_total", "atom:mtp_accepted_tokens")
    drafted = w.counter("atom:mtp_draft_tokens_total", "atom:mtp_draft_tokens")
    steps = w.counter("atom:mtp_decode_steps_total", "atom:mtp_decode_steps")
    al = 1.0 + accepted / steps if accepted is not None and steps else None
    method = "1 + d(mtp_accepted_tokens) / d(mtp_decode_steps)"
    if al is None:
        al = w.gauge_mean("atom:mtp_average_tokens_per_forward")
        method = "mean of atom:mtp_average_tokens_per_forward"
    return {
        "queue": _queue(w, "atom:requests_running", "atom:requests_waiting"),
        "kv_cache": {
            "gpu_usage_max": _frac(w.gauge_max("atom:kv_cache_usage_ratio")),
            "gpu_usage_mean": _frac(w.gauge_mean("atom:kv_cache_usage_ratio")),
            "cpu_usage_max": None,
        },
        # ATOM's admitted cache already includes LMCache loads: the overall rate is the GPU one (agentx-spec §3.7).
        "cache": {"gpu_hit_rate": gpu, "cpu_hit_rate": _ratio(loaded, full), "overall_hit_rate": gpu},
        "latency": _latency(w, "atom:"),
        "tokens": {
            "prompt_total": w.prefilled("atom:prompt_tokens_total", "atom:prompt_tokens"),
            "generation_total": w.decoded("atom:generation_tokens_total", "atom:generation_tokens"),
            "requests_completed": w.decoded("atom:requests_finished_total", "atom:requests_finished"),
        },
        "spec_decode": {
            "acceptance_length": al,
            "acceptance_rate": _ratio(accepted, drafted),
            "accepted_tokens": accepted,
            "drafts": steps,
            "draft_tokens": drafted,
            "verify_steps": steps,
            "method": method,
        },
    }


def _queue(w: ServerWindow, running: str, waiting: str) -> dict[str, Any]:
    return {
        "running": {"max": w.gauge_max(running), "mean": w.gauge_mean(running)},
        "waiting": {"max": w.gauge_max(waiting), "mean": w.gauge_mean(waiting)},
    }


ServerMetricsReader = Callable[[ServerWindow], dict[str, Any]]

READERS: dict[str, ServerMetricsReader] = {"sglang": _sglang, "vllm": _vllm, "trtllm": _trtllm, "atom": _atom}
"""Engine id → the reader of its Prometheus names; the prefix the names carry is the engine identity's."""

ADAPTERS: tuple[tuple[str, str, ServerMetricsReader], ...] = tuple(
    (e.id, e.metric_prefix, READERS[e.id]) for e in ENGINE_IDS.values() if e.id in READERS and e.metric_prefix
)
"""(engine, metric prefix, reader), in registry order: the first whose prefix the scraped names carry reads them."""


def reader_for(names: Iterable[str]) -> tuple[str, ServerMetricsReader] | None:
    """(engine, reader) of scrapes carrying `names`: the first adapter whose prefix one of them carries; None when
    none does."""
    names = list(names)
    for engine, prefix, reader in ADAPTERS:
        if any(n.startswith(prefix) for n in names):
            return engine, reader
    return None


def hit_rate(block: dict[str, Any]) -> float | None:
    """A reader's prefix-cache hit rate over its window: every tier's hits (`overall_hit_rate`), else the GPU's."""
    cache = block.get("cache") or {}
    rate = cache.get("overall_hit_rate")
    return rate if rate is not None else cache.get("gpu_hit_rate")


def summarise_server(
    source: Path | Iterable[dict[str, Any]] | None,
    *,
    start: float | None,
    end: float | None,
    require_prefix: str | None = None,
) -> dict[str, Any]:
    """The `server_metrics` block of a summary. `spec_decode.acceptance_length` is the realised AL."""
    w = ServerWindow(start, end)
    if source is not None:
        for scrape in _iter_scrapes(source):
            w.add(scrape)
    out: dict[str, Any] = {
        "present": bool(w.names),
        "adapter": None,
        "scrapes": w.scrapes,
        "scrape_errors": w.scrape_errors,
        "metric_count": len(w.names),
        "window": {"start": start, "end": end},
        "warnings": [],
    }
    if w.names:
        found = reader_for(w.names)
        if found is not None:
            out["adapter"] = found[0]
            out.update(found[1](w))
        else:
            known = ", ".join(prefix for _, prefix, _ in ADAPTERS)
            out["warnings"].append(f"server metrics present but no adapter ({known}) matched their names")
    elif source is not None:
        out["warnings"].append("no server metrics were scraped")
    if w.unreadable:
        out["warnings"].append(
            f"{count_of(w.unreadable, 'line')} of the /metrics scrapes "
            f"{noun(w.unreadable, 'is not a readable scrape', 'are not readable scrapes')} (damaged after "
            f"{noun(w.unreadable, 'it was', 'they were')} written): if one was the scrape at the window's start or "
            "end, the counters' window is wider or narrower than the profile window")
    if require_prefix is not None:
        out["required_prefix"] = {"prefix": require_prefix, "found": any(n.startswith(require_prefix) for n in w.names)}
    return out
