"""TensorRT-LLM and ATOM server metrics are read (acceptance, cache, KV, tokens), so their jobs' read-back gate
judges the realised acceptance instead of failing closed; SGLang's AL leaves each request's prefill token out.

Samples are real Prometheus exposition: the engines' metric names, produced by prometheus_client the way the engines
export them (it appends `_total` to counters), parsed by the scraper's own parser."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from llmsweep.client.scrape import parse_exposition
from llmsweep.execute.readback import ReadbackSettings, summarise_job
from llmsweep.metrics.server import sglang_acceptance_length, summarise_server
from llmsweep.plan import Job, full_sweep
from llmsweep.spec import loads_recipes


def _exposition(build: Callable[[CollectorRegistry], None]) -> list[list[Any]]:
    reg = CollectorRegistry()
    build(reg)
    return parse_exposition(generate_latest(reg).decode())


def trtllm_scrape(t: float, *, drafted: tuple[float, ...], accepted: tuple[float, ...], prompt: float,
                  cached: float, requests: float, util: float) -> dict[str, Any]:
    """TensorRT-LLM's collector: per-position speculative counters (`token_position`), prompt and cached tokens."""
    def build(reg: CollectorRegistry) -> None:
        d = Counter("trtllm_spec_decode_drafted_tokens", "d", ["model_name", "token_position"], registry=reg)
        a = Counter("trtllm_spec_decode_accepted_tokens", "a", ["model_name", "token_position"], registry=reg)
        for pos, (dv, av) in enumerate(zip(drafted, accepted, strict=True)):
            d.labels("m", str(pos)).inc(dv)
            a.labels("m", str(pos)).inc(av)
        Counter("trtllm_prompt_tokens", "p", ["model_name"], registry=reg).labels("m").inc(prompt)
        Counter("trtllm_prompt_cached_tokens", "c", ["model_name"], registry=reg).labels("m").inc(cached)
        Counter("trtllm_request_success", "r", ["model_name", "finished_reason"],
                registry=reg).labels("m", "stop").inc(requests)
        Gauge("trtllm_kv_cache_utilization", "u", ["model_name"], registry=reg).labels("m").set(util)
        Gauge("trtllm_num_active_requests", "n", ["model_name"], registry=reg).labels("m").set(4)
    return {"t": t, "samples": _exposition(build)}


def atom_scrape(t: float, *, steps: dict[str, float], accepted: float, drafted: float, full: float, cached: float,
                avg: float) -> dict[str, Any]:
    """ATOM's collector: `atom:mtp_decode_steps{accepted_tokens}`, accepted/draft counters, the average gauge."""
    def build(reg: CollectorRegistry) -> None:
        s = Counter("atom:mtp_decode_steps", "s", ["accepted_tokens"], registry=reg)
        for k, v in steps.items():
            s.labels(k).inc(v)
        Counter("atom:mtp_accepted_tokens", "a", registry=reg).inc(accepted)
        Counter("atom:mtp_draft_tokens", "d", registry=reg).inc(drafted)
        Counter("atom:prefix_cache_full_tokens", "f", registry=reg).inc(full)
        Counter("atom:prefix_cache_cached_tokens", "c", registry=reg).inc(cached)
        Counter("atom:requests_finished", "r", registry=reg).inc(full / 1000)
        Gauge("atom:mtp_average_tokens_per_forward", "g", registry=reg).set(avg)
        Gauge("atom:kv_cache_usage_ratio", "u", registry=reg).set(0.4)
    return {"t": t, "samples": _exposition(build)}


def test_trtllm_acceptance_is_one_plus_accepted_over_first_position_drafts() -> None:
    # 3 draft positions; 1000 verify steps drafted all three; 700 + 500 + 300 accepted: AL = 1 + 1500/1000 = 2.5.
    before = trtllm_scrape(0.0, drafted=(0, 0, 0), accepted=(0, 0, 0), prompt=0, cached=0, requests=0, util=0.1)
    after = trtllm_scrape(10.0, drafted=(1000, 1000, 1000), accepted=(700, 500, 300), prompt=8000, cached=2000,
                          requests=40, util=0.6)
    s = summarise_server([before, after], start=0.0, end=10.0)
    assert s["adapter"] == "trtllm"
    sd = s["spec_decode"]
    assert sd["acceptance_length"] == pytest.approx(2.5) and sd["verify_steps"] == 1000
    assert sd["acceptance_rate"] == pytest.approx(1500 / 3000)
    assert s["cache"]["gpu_hit_rate"] == pytest.approx(0.25)
    assert s["tokens"]["requests_completed"] == 40 and s["kv_cache"]["gpu_usage_max"] == pytest.approx(0.6)


def test_atom_acceptance_from_decode_steps_and_its_average_gauge_as_fallback() -> None:
    before = atom_scrape(0.0, steps={"0": 0, "1": 0, "2": 0}, accepted=0, drafted=0, full=0, cached=0, avg=0)
    # 200 steps accepted nothing, 300 one, 500 two: 1300 accepted over 1000 steps → AL 2.3.
    after = atom_scrape(10.0, steps={"0": 200, "1": 300, "2": 500}, accepted=1300, drafted=2000, full=50000,
                        cached=20000, avg=2.3)
    s = summarise_server([before, after], start=0.0, end=10.0)
    assert s["adapter"] == "atom"
    assert s["spec_decode"]["acceptance_length"] == pytest.approx(2.3)
    assert s["spec_decode"]["verify_steps"] == 1000
    assert s["cache"]["gpu_hit_rate"] == pytest.approx(0.4) and s["kv_cache"]["gpu_usage_max"] == 0.4
    only_gauge = [{"t": t, "samples": [["atom:mtp_average_tokens_per_forward", {}, 2.7]]} for t in (1.0, 2.0)]
    g = summarise_server(only_gauge, start=0.0, end=3.0)["spec_decode"]
    assert g["acceptance_length"] == pytest.approx(2.7) and "mtp_average_tokens_per_forward" in g["method"]


def test_sglang_acceptance_leaves_out_each_requests_prefill_token_and_cut_last_step() -> None:
    # AL 2, requests of 8 and 9 tokens: 1 prefill token each, then 7 and 8 tokens from 4 verify steps each (the
    # 7-token request's 4th step cut to 1 at max_tokens). Raw tokens / steps read 2.125; the prefill fix alone 1.875.
    al, method = sglang_acceptance_length(17, 2, 8)
    assert al == pytest.approx(2.0) and "num_requests" in method
    # AL 3 over outputs of 8, 9 and 10 tokens: 7, 8, 9 tokens from 3 steps each (last cut to 1, 2, 3).
    assert sglang_acceptance_length(27, 3, 9)[0] == pytest.approx(3.0)

    def sc(t: float, gen: float, req: float, verify: float) -> dict[str, Any]:
        return {"t": t, "samples": [["sglang:generation_tokens_total", {}, gen], ["sglang:num_requests_total", {}, req],
                                    ["sglang:spec_verify_calls_total", {}, verify]]}
    s = summarise_server([sc(0, 0, 0, 0), sc(1, 17000, 2000, 8000)], start=0.0, end=1.0)
    assert s["spec_decode"]["acceptance_length"] == pytest.approx(2.0)


# ------------------------------------------------------------------------------------------ the read-back gate

def _agentic(framework: str, image: str, runner: str) -> Job:
    text = (f"k:\n  image: {image}\n  model: MiniMaxAI/MiniMax-M3\n  model-prefix: minimaxm3\n  runner: {runner}\n"
            f"  precision: fp8\n  framework: {framework}\n  multinode: false\n  scenarios:\n    agentic-coding:\n"
            "    - dram-utilization: 0.8\n      search-space:\n"
            "      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [8] }\n  serve:\n"
            "    spec-decoding: { method: eagle3, num-steps: 3, draft-model: Inferact/MiniMax-M3-EAGLE3-GQA }\n")
    (job,) = full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes)
    assert job.acceptance is not None and job.acceptance.value == pytest.approx(2.78)
    return job


def _folder(tmp_path: Path, job: Job, scrapes: list[dict[str, Any]]) -> Path:
    d = tmp_path / str(job.engine)
    d.mkdir()
    records = []
    for i in range(8):
        chunks = [i + 0.1 + 0.01 * k for k in range(5)]
        records.append({"id": str(i), "phase": "profiling", "scheduled_at": float(i), "sent_at": float(i),
                        "first_token_at": chunks[0], "end_at": chunks[-1] + 0.001, "chunk_times": chunks,
                        "chunk_tokens": [1] * 5, "status": 200, "error_class": None, "error": None,
                        "prompt_tokens": 100, "completion_tokens": 5, "max_tokens": 5, "worker": 0})
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (d / "server_metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scrapes))
    (d / "run.json").write_text(json.dumps({"gpus": 8, "source": "measured"}))
    (d / "job.json").write_text(json.dumps(job.to_json()))
    return d


@pytest.mark.parametrize("engine", ["trtllm", "atom"])
@pytest.mark.parametrize(("realised", "ok"), [(2.78, True), (2.3, False)])
def test_readback_judges_trtllm_and_atom_instead_of_failing_closed(tmp_path: Path, engine: str, realised: float,
                                                                  ok: bool) -> None:
    steps = 1000.0
    accepted = round((realised - 1) * steps)
    if engine == "trtllm":
        job = _agentic("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0", "cluster:h200-cw")
        zero = trtllm_scrape(-1.0, drafted=(0, 0, 0), accepted=(0, 0, 0), prompt=0, cached=0, requests=0, util=0)
        end = trtllm_scrape(7.5, drafted=(steps, steps, steps), accepted=(accepted, 0, 0), prompt=800, cached=0,
                            requests=8, util=0.5)
    else:
        job = _agentic("atom", "rocm/atom:rocm7.2.0-ubuntu24.04-pytorch2.9-atom0.1.3", "cluster:mi355x-amds")
        zero = atom_scrape(-1.0, steps={"1": 0}, accepted=0, drafted=0, full=0, cached=0, avg=0)
        end = atom_scrape(7.5, steps={"1": steps}, accepted=accepted, drafted=3 * steps, full=800, cached=0,
                          avg=realised)
    summary = summarise_job(_folder(tmp_path, job, [zero, end]), settings=ReadbackSettings())
    assert summary.server_metrics.adapter == engine
    assert summary.readback is not None
    (check,) = summary.readback.checks
    assert check.pinned == pytest.approx(2.78) and check.realised == pytest.approx(realised)
    assert check.ok is ok, check.reason
    if not ok:
        assert summary.validity.verdict == "invalid"
        assert any("differs from the pinned 2.78" in r for r in summary.validity.reasons)
