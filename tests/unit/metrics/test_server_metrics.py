"""Server metrics: real Prometheus exposition in, window deltas and gauges out, through engine adapters."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from llmsweep.client.scrape import parse_exposition
from llmsweep.metrics.server import summarise_server


def _scrape(t: float, **values: float) -> dict[str, object]:
    samples = [[name.replace("__", ":"), {"model_name": "m"}, v] for name, v in values.items()]
    return {"t": t, "samples": samples}


def test_exposition_from_prometheus_client_parses_without_buckets() -> None:
    reg = CollectorRegistry()
    c = Counter("vllm:prompt_tokens", "p", ["model_name"], registry=reg)
    c.labels("m").inc(42)
    Gauge("vllm:num_requests_running", "r", registry=reg).set(3)
    samples = parse_exposition(generate_latest(reg).decode())
    names = {s[0]: s[2] for s in samples}
    assert names["vllm:prompt_tokens_total"] == 42 and names["vllm:num_requests_running"] == 3
    assert not any(n.endswith("_created") for n in names)


def test_counters_are_window_deltas_and_gauges_max_and_mean() -> None:
    scrapes = [
        _scrape(0.0, vllm__prompt_tokens_total=100, vllm__num_requests_running=9),  # before the window
        _scrape(1.0, vllm__prompt_tokens_total=150, vllm__num_requests_running=2),
        _scrape(2.0, vllm__prompt_tokens_total=300, vllm__num_requests_running=4),
        _scrape(2.5, vllm__prompt_tokens_total=310, vllm__num_requests_running=0),  # closing bracket (slack)
        _scrape(9.0, vllm__prompt_tokens_total=999, vllm__num_requests_running=7),  # long after: ignored
    ]
    s = summarise_server(scrapes, start=0.5, end=2.2)
    assert s["adapter"] == "vllm"
    assert s["tokens"]["prompt_total"] == 310 - 100
    assert s["queue"]["running"]["max"] == 4 and s["queue"]["running"]["mean"] == 3


def test_a_scrape_answered_after_the_window_started_is_not_its_base() -> None:
    """A scrape is stamped when it goes out and read by the server when it arrives: one sent just before the window
    and answered inside it can hold the window's first increments (a federated endpoint answered ~50 ms late and a
    live PD run lost 812 of its prompt tokens). The base is the last scrape answered by the start."""
    early = _scrape(0.0, vllm__prompt_tokens_total=100)
    early["answered"] = 0.01
    straddling = _scrape(0.45, vllm__prompt_tokens_total=180)  # 80 tokens the window's first request put there
    straddling["answered"] = 0.52
    end = _scrape(2.1, vllm__prompt_tokens_total=400)
    s = summarise_server([early, straddling, end], start=0.5, end=2.2)
    assert s["tokens"]["prompt_total"] == 400 - 100
    legacy = [_scrape(0.0, vllm__prompt_tokens_total=100), _scrape(0.45, vllm__prompt_tokens_total=100), end]
    assert summarise_server(legacy, start=0.5, end=2.2)["tokens"]["prompt_total"] == 300  # no `answered`: at `t`


def test_vllm_realised_acceptance_length_and_prefix_hit_rate() -> None:
    scrapes = [
        _scrape(0.0, vllm__spec_decode_num_accepted_tokens_total=0, vllm__spec_decode_num_drafts_total=0,
                vllm__spec_decode_num_draft_tokens_total=0, vllm__prefix_cache_hits_total=0,
                vllm__prefix_cache_queries_total=0),
        _scrape(5.0, vllm__spec_decode_num_accepted_tokens_total=2895, vllm__spec_decode_num_drafts_total=1205,
                vllm__spec_decode_num_draft_tokens_total=3615, vllm__prefix_cache_hits_total=30,
                vllm__prefix_cache_queries_total=120),
    ]
    s = summarise_server(scrapes, start=0.0, end=5.0)
    assert s["spec_decode"]["acceptance_length"] == pytest.approx(1 + 2895 / 1205)
    assert s["spec_decode"]["acceptance_rate"] == pytest.approx(2895 / 3615)
    assert s["cache"]["gpu_hit_rate"] == pytest.approx(0.25)


def test_sglang_adapter_splits_cache_hits_by_source() -> None:
    def sc(t: float, dev: float, host: float, prompt: float, gen: float, verify: float) -> dict[str, object]:
        return {"t": t, "samples": [
            ["sglang:cached_tokens_total", {"cache_source": "device"}, dev],
            ["sglang:cached_tokens_total", {"cache_source": "host"}, host],
            ["sglang:prompt_tokens_total", {}, prompt],
            ["sglang:generation_tokens_total", {}, gen],
            ["sglang:spec_verify_calls_total", {}, verify],
            ["sglang:token_usage", {}, 0.5 if t else 0.1],
        ]}

    s = summarise_server([sc(0, 0, 0, 0, 0, 0), sc(1, 60, 20, 200, 300, 100)], start=0.0, end=1.0)
    assert s["adapter"] == "sglang"
    assert s["cache"]["gpu_hit_rate"] == pytest.approx(0.3) and s["cache"]["cpu_hit_rate"] == pytest.approx(0.1)
    assert s["cache"]["overall_hit_rate"] == pytest.approx(0.4)
    assert s["spec_decode"]["acceptance_length"] == pytest.approx(3.0)
    assert s["kv_cache"]["gpu_usage_max"] == 0.5


def test_required_prefix_is_reported_and_missing_metrics_warn() -> None:
    s = summarise_server([_scrape(0.0, vllm__num_requests_running=1)], start=0, end=1, require_prefix="sglang:")
    assert s["required_prefix"] == {"prefix": "sglang:", "found": False}
    empty = summarise_server([{"t": 0.0, "error": "refused"}], start=0, end=1)
    assert not empty["present"] and empty["scrape_errors"] == 1 and empty["warnings"]


def test_vllm_latency_is_the_servers_own_histogram_means_over_the_window() -> None:
    """Real scrapes of vLLM 0.26.0 on the H200 during 16 measured requests (conc 1, 1024/256, dummy 1.1B Llama)."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "data" / "server_metrics" / "vllm-0.26.0-h200.jsonl"
    lat = summarise_server(path, start=1796107214.1645849, end=1796107221.4980326)["latency"]
    assert lat["requests"] == 16  # the window's requests, not the warm-ups before it
    assert 0.015 < lat["ttft_mean_s"] < 0.040 and 0.0010 < lat["tpot_mean_s"] < 0.0030
    assert lat["itl_mean_s"] == pytest.approx(lat["tpot_mean_s"], rel=0.05)  # one token per step at conc 1
    assert lat["e2el_mean_s"] == pytest.approx(lat["ttft_mean_s"] + 255 * lat["tpot_mean_s"], rel=0.02)


def _hist(t: float, prefix: str, **hists: tuple[float, float]) -> dict[str, object]:
    samples = []
    for name, (total, count) in hists.items():
        samples += [[f"{prefix}:{name}_sum", {"model_name": "m"}, total],
                    [f"{prefix}:{name}_count", {"model_name": "m"}, count]]
    return {"t": t, "samples": samples}


def test_sglang_and_older_vllm_latency_names() -> None:
    sg = [_hist(0.0, "sglang", time_to_first_token_seconds=(1.0, 10), time_per_output_token_seconds=(0.5, 100)),
          _hist(2.0, "sglang", time_to_first_token_seconds=(1.6, 13), time_per_output_token_seconds=(0.8, 160))]
    lat = summarise_server(sg, start=0.5, end=1.9)["latency"]
    assert lat["ttft_mean_s"] == pytest.approx(0.6 / 3) and lat["itl_mean_s"] == pytest.approx(0.3 / 60)
    assert lat["tpot_mean_s"] is None and lat["requests"] == 3
    old = [_hist(0.0, "vllm", time_per_output_token_seconds=(0.0, 0)),
           _hist(2.0, "vllm", time_per_output_token_seconds=(0.2, 50))]
    lat = summarise_server(old, start=0.5, end=1.9)["latency"]
    assert lat["itl_mean_s"] == pytest.approx(0.004) and lat["ttft_mean_s"] is None


def test_preemptions_over_the_window_are_read_for_vllm_and_sglang() -> None:
    vllm = [_scrape(0.0, vllm__num_preemptions_total=5), _scrape(4.0, vllm__num_preemptions_total=12)]
    assert summarise_server(vllm, start=0.0, end=4.0)["preemptions"] == 7
    sglang = [_scrape(0.0, sglang__num_retracted_requests_total=0, sglang__token_usage=0.5),
              _scrape(4.0, sglang__num_retracted_requests_total=3, sglang__token_usage=1.0)]
    s = summarise_server(sglang, start=0.0, end=4.0)
    assert s["adapter"] == "sglang" and s["preemptions"] == 3 and s["kv_cache"]["gpu_usage_max"] == 1.0
    # An engine that exposes no such counter says nothing, not zero.
    assert summarise_server([_scrape(0.0, vllm__prompt_tokens_total=1)], start=0.0, end=1.0)["preemptions"] is None


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_disaggregated_deployments_output_tokens_are_its_decode_workers(engine: str) -> None:
    """A prefill worker counts the first token it computes for each request: summed over the roles (the router's
    federated /metrics, each worker's series labelled with its role), the output read 924 where the decode worker,
    which counts every token the client receives, said 908, and SGLang's realised acceptance length took the extra
    token a request for accepted drafts."""
    gen, done = (("vllm:generation_tokens_total", "vllm:request_success_total") if engine == "vllm" else
                 ("sglang:generation_tokens_total", "sglang:num_requests_total"))

    def scrape(t: float, k: float) -> dict[str, object]:  # k: the share of the window's work done by t
        rows = [(gen, "prefill", 16 * k), (gen, "decode", 908 * k), (done, "prefill", 16 * k), (done, "decode", 16 * k)]
        if engine == "sglang":
            rows.append(("sglang:spec_verify_calls_total", "decode", 300 * k))
        return {"t": t, "samples": [[n, {"model_name": "m", "role": r, "worker": "0"}, v] for n, r, v in rows]}

    s = summarise_server([scrape(0.0, 0.0), scrape(1.0, 0.5), scrape(2.0, 1.0)], start=0.5, end=2.0)
    assert s["tokens"]["generation_total"] == 908 and s["tokens"]["requests_completed"] == 16
    if engine == "sglang":  # (908 - 1.5 x 16) / (300 - 0.5 x 16): the decode worker's own tokens
        assert s["spec_decode"]["acceptance_length"] == pytest.approx((908 - 24) / (300 - 8))


def test_a_disaggregated_deployments_prompt_figures_are_its_prefill_workers() -> None:
    """vLLM's decode worker counts each prompt again as it arrives, its KV as `external_kv_transfer`: summed over the
    roles, the deployment took in twice its prompt tokens and read every transferred prompt as a cache hit (10 % of
    the prefill side's prompt was cached; the sum said 55 %)."""

    def scrape(t: float, k: float) -> dict[str, object]:
        rows = [("vllm:prompt_tokens_total", {"role": "prefill"}, 1000 * k),
                ("vllm:prompt_tokens_total", {"role": "decode"}, 1000 * k),
                ("vllm:prompt_tokens_by_source_total", {"role": "prefill", "source": "local_compute"}, 900 * k),
                ("vllm:prompt_tokens_by_source_total", {"role": "prefill", "source": "local_cache_hit"}, 100 * k),
                ("vllm:prompt_tokens_by_source_total", {"role": "decode", "source": "external_kv_transfer"}, 1000 * k),
                ("vllm:prefix_cache_queries_total", {"role": "prefill"}, 1000 * k),
                ("vllm:prefix_cache_hits_total", {"role": "prefill"}, 100 * k),
                ("vllm:prefix_cache_queries_total", {"role": "decode"}, 1000 * k),
                ("vllm:prefix_cache_hits_total", {"role": "decode"}, 0.0)]
        return {"t": t, "samples": [[n, {"model_name": "m", "worker": "0", **labels}, v] for n, labels, v in rows]}

    s = summarise_server([scrape(0.0, 0.0), scrape(2.0, 1.0)], start=0.0, end=2.0)
    assert s["tokens"]["prompt_total"] == 1000
    assert s["cache"]["overall_hit_rate"] == pytest.approx(0.1) and s["cache"]["gpu_hit_rate"] == pytest.approx(0.1)
    assert s["cache"]["cpu_hit_rate"] == pytest.approx(0.0)
    # one server (no roles): every series counts
    plain = [{"t": t, "samples": [["vllm:prompt_tokens_total", {"model_name": "m"}, v]]}
             for t, v in ((0.0, 0), (2.0, 500))]
    assert summarise_server(plain, start=0.0, end=2.0)["tokens"]["prompt_total"] == 500


@pytest.mark.parametrize("engine", ["trtllm", "atom", "sglang"])
def test_every_reader_takes_a_disaggregated_deployments_prompt_side_from_its_prefill_workers(engine: str) -> None:
    """TensorRT-LLM and ATOM render disaggregated launches too: their prompt tokens and cache hits were summed over
    both roles (the decode workers' count of the same prompts added), and a hit-rate gauge averaged over both."""
    prompt, cached, gauge = {
        "trtllm": ("trtllm_prompt_tokens_total", "trtllm_prompt_cached_tokens_total", "trtllm_kv_cache_hit_rate"),
        "atom": ("atom:prefix_cache_full_tokens_total", "atom:prefix_cache_cached_tokens_total",
                 "atom:prefix_cache_hit_ratio"),
        "sglang": ("sglang:prompt_tokens_total", None, "sglang:cache_hit_rate")}[engine]

    def scrape(t: float, k: float, with_counters: bool) -> dict[str, object]:
        rows: list[tuple[str, str, float]] = [(gauge, "prefill", 0.25), (gauge, "decode", 0.95)]
        if with_counters:
            rows += [(prompt, "prefill", 1000 * k), (prompt, "decode", 1000 * k)]
            if cached is not None:
                rows += [(cached, "prefill", 250 * k), (cached, "decode", 950 * k)]
        return {"t": t, "samples": [[n, {"model_name": "m", "role": r, "worker": "0"}, v] for n, r, v in rows]}

    counted = summarise_server([scrape(0.0, 0.0, True), scrape(2.0, 1.0, True)], start=0.0, end=2.0)
    if engine != "sglang":
        assert counted["cache"]["gpu_hit_rate"] == pytest.approx(0.25)
    if engine in ("trtllm", "sglang"):
        assert counted["tokens"]["prompt_total"] == 1000
    # the gauge alone (no counters): the prefill workers' mean, not both roles'
    gauged = summarise_server([scrape(0.5, 0.0, False), scrape(1.5, 0.0, False)], start=0.0, end=2.0)
    assert gauged["cache"]["overall_hit_rate"] == pytest.approx(0.25)
