"""The KV-transfer series of the live simulator's disaggregated roles over loopback (prefill worker, decode worker, PD
router): the decode worker exports on its own `/metrics` what its hand-offs did — one transfer per request through
the router, the prompt's KV bytes, the modelled transfer time it waited (`sim.transfer`, as virtual time models it,
NIC queueing included) — under the names, labels and meaning the virtual-time deployment's decode workers export
(`metrics.roles`, their one home). So a live PD run's summary fills each role's `kv_transfers`, `kv_transfer_bytes`
and `kv_transfer_s_mean` from the scraped series, and they agree with the virtual-time run of the same requests;
what the live link does not model (a decode-side pre-allocation queue) stays null rather than a zero nobody
measured."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.sim_roles import pd_deployment

from llmsweep.client.config import Endpoint, RunOptions
from llmsweep.client.files import SERVER_METRICS_FILE
from llmsweep.client.runner import run_benchmark_async
from llmsweep.client.scrape import parse_exposition
from llmsweep.execute.roles import FederatedMetrics, MetricsTarget, RanRole, RanTopology, RanWorker
from llmsweep.http_app import node_name
from llmsweep.metrics import Summary
from llmsweep.metrics.roles import KV_BYTES, KV_IN_FLIGHT, KV_PREALLOC, KV_SECONDS
from llmsweep.metrics.summary import summarise
from llmsweep.sim.disagg import Cluster, DisaggConfig, DisaggPredictor, RolePlan
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.roles import RoleConfig
from llmsweep.sim.transfer import Link
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload

FAST: dict[str, Any] = {"model": "llama-1b", "hardware": "h200", "timing": "constant", "ttft_s": 0.002, "itl_s": 0.0005}
LINK = RoleConfig(role="decode", kv_transfer="nixl",
                  links=(Link(kind="scale-out", name="test NIC", gbps=0.2, latency_s=0.002),))
"""A slow link: each prompt's KV takes tens of milliseconds to arrive, long enough to be seen in flight."""
SAMPLES = {KV_PREALLOC.name, KV_IN_FLIGHT.name, KV_SECONDS.count, KV_SECONDS.sum, KV_BYTES.total}
"""Every sample name of the KV-transfer series (`metrics.roles`)."""


def kv_samples(page: str) -> dict[str, float]:
    """The KV-transfer samples of one worker's `/metrics` page, by sample name."""
    out: dict[str, float] = {}
    for name, labels, value in parse_exposition(page):
        if name in SAMPLES:
            assert labels == {}, (name, labels)  # a worker's own page: the federated scrape adds role and worker
            out[name] = value
    return out


async def page(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(f"{url}/metrics") as resp:
        assert resp.status == 200
        return await resp.text()


async def send(http: aiohttp.ClientSession, url: str, words: int, *, stream: bool) -> int:
    """One chat request through the router; returns its prompt tokens."""
    body = {"model": "m", "messages": [{"role": "user", "content": " ".join(f"w{i}x{words}" for i in range(words))}],
            "max_tokens": 4, "stream": stream, "stream_options": {"include_usage": True}, "ignore_eos": True}
    async with http.post(f"{url}/v1/chat/completions", json=body) as resp:
        assert resp.status == 200
        if stream:
            events = [json.loads(line[6:]) async for line in resp.content if line.startswith(b"data: {")]
            usage = events[-1]["usage"]
        else:
            usage = (await resp.json())["usage"]
    assert usage["completion_tokens"] == 4
    return int(usage["prompt_tokens"])


def test_the_decode_worker_exports_one_transfer_per_request_with_its_prompts_kv_bytes_and_link_time() -> None:
    async def main() -> None:
        async with pd_deployment(FAST, LINK) as pd, aiohttp.ClientSession() as http:
            before = kv_samples(await page(http, pd.decode_url))
            assert before == {KV_IN_FLIGHT.name: 0.0, KV_SECONDS.count: 0.0, KV_SECONDS.sum: 0.0, KV_BYTES.total: 0.0}
            # One request alone, caught while its KV is on the way: one transfer in flight, none arrived yet.
            one = asyncio.ensure_future(send(http, pd.url, 1500, stream=True))
            seen_in_flight = False
            while not one.done():
                now = kv_samples(await page(http, pd.decode_url))
                if now[KV_IN_FLIGHT.name] == 1.0:
                    seen_in_flight = True
                    assert now[KV_SECONDS.count] == 0.0 and now[KV_BYTES.total] == 0.0
                await asyncio.sleep(0.005)
            assert seen_in_flight
            # Then several at once, of different lengths, streamed and whole.
            lengths = [await one, *await asyncio.gather(*(send(http, pd.url, 200 + 150 * i, stream=i % 2 == 0)
                                                           for i in range(5)))]
            after = kv_samples(await page(http, pd.decode_url))
            bpt = pd.decode.kv_bytes_per_token
            assert after[KV_SECONDS.count] == len(lengths) == 6  # one transfer per request, each counted once
            assert after[KV_BYTES.total] / bpt == sum(lengths)  # exactly the prompt tokens sent, as KV bytes
            # each transfer's modelled link time, and those that found the NIC busy waited their turn as well
            alone = [pd.decode.kv_cost.seconds(n, LINK.links[0]) for n in lengths]
            rest = alone[1:]  # sent together: each waits at most for all the others
            assert sum(alone) < after[KV_SECONDS.sum] <= alone[0] + len(rest) * sum(rest) + 1e-9
            assert after[KV_IN_FLIGHT.name] == 0.0
            # No decode-side pre-allocation queue is modelled live: the series is absent, not a zero.
            assert KV_PREALLOC.name not in after
            # The prefill worker moves no KV into itself: it exports none of the series (as in virtual time).
            assert kv_samples(await page(http, pd.prefill_url)) == {}

    asyncio.run(main())


# ------------------------------------------------------------------ the summary of a live PD run vs virtual time

WORKLOAD = FixedLengthConfig(isl=600, osl=6, api="chat", num_prompts=6, range_ratio=0.5, seed=3)
SLOW = LINK.model_copy(update={"links": (LINK.links[0].model_copy(update={"gbps": 0.05}),)})
"""Each prompt's KV (300-600 tokens) takes over a tenth of a second: the scrape that opens the window reads the
decode worker before any KV arrived (the scrape is stamped when it starts, and read a little later)."""


def live_run(tmp: Path, fast: dict[str, Any] = FAST) -> Summary:
    """The workload through the router, every worker's `/metrics` scraped through a federation that labels each
    worker's series with its role and index (what a role-by-role deployment's client scrapes, `execute.roles`),
    summarised with the topology in the shape the live path records (`RanTopology`)."""

    async def main() -> Summary:
        async with pd_deployment(fast, SLOW) as pd:
            fed = FederatedMetrics([MetricsTarget("prefill", 0, f"{pd.prefill_url}/metrics"),
                                    MetricsTarget("decode", 0, f"{pd.decode_url}/metrics")], "sglang:")
            node = node_name()

            def role(kind: Any, url: str, gpus: int) -> RanRole:
                return RanRole(role=kind, count=1, gpus_per_worker=gpus,
                               workers=[RanWorker(index=0, node=node, url=url, gpus=gpus or None)])

            topology = RanTopology(disaggregated=True, nodes=[node], kv_transfer=pd.decode.transfer_backend(), gpus=2,
                                   roles=[role("prefill", pd.prefill_url, 1), role("decode", pd.decode_url, 1),
                                          role("router", pd.url, 0)])
            try:
                result = await run_benchmark_async(
                    FixedLengthWorkload(WORKLOAD), Endpoint(base_url=pd.url, model="m", metrics_url=fed.url),
                    RunOptions(concurrency=2, num_requests=6, gpus=2, scrape_interval_s=0.05), tmp,
                    provenance={"topology": topology.describe()})
            finally:
                fed.stop()
            return result.summary

    return asyncio.run(main())


def virtual_run(fast: dict[str, Any] = FAST) -> tuple[Summary, list[dict[str, Any]]]:
    engine = EngineConfig(**fast)
    link = SLOW.links[0]
    config = DisaggConfig(prefill=RolePlan(kind="prefill", engine=engine, gpus_per_worker=1, nodes=((0,),)),
                          decode=RolePlan(kind="decode", engine=engine, gpus_per_worker=1, nodes=((1,),)),
                          scaleup=link, scaleout=link, domain_nodes=1, gpus_per_node=8, transfer_backend="nixl")
    predictor = DisaggPredictor(Cluster(config, model_name="m"), scrape_interval=0.05)
    records = predictor.run(FixedLengthWorkload(WORKLOAD), concurrency=2, duration=3600)
    summary = summarise(records, gpus=2, server_metrics=predictor.scrapes, source="predicted",
                        provenance={"topology": config.describe()})
    return summary, predictor.scrapes


def kv_series_of(scrapes: list[dict[str, Any]]) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(name, tuple(sorted(labels.items()))) for s in scrapes for name, labels, _ in s.get("samples", ())
            if name in SAMPLES}


def test_a_live_pd_runs_summary_fills_the_kv_transfer_fields_from_the_scraped_series_as_virtual_time_does(
        tmp_path: Path) -> None:
    live = live_run(tmp_path)
    virtual, virtual_scrapes = virtual_run()
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert len(records) == 6 and all(r["error_class"] is None for r in records)
    prompt_tokens = sum(r["prompt_tokens"] for r in records)
    bpt = EngineConfig(**FAST).perf_inputs().kv_bytes_per_token

    assert live.roles is not None and virtual.roles is not None
    decode = live.roles["decode"].metrics
    assert decode is not None
    # what the decode worker did, from its scraped series: one transfer per request, the prompts' KV bytes, and the
    # modelled link time it waited for each
    assert decode.kv_transfers == 6
    assert decode.kv_transfer_bytes == prompt_tokens * bpt
    # not modelled on the live link, so not filled (the virtual-time deployment models and fills it)
    assert decode.prealloc_queue_mean is None and decode.prealloc_queue_max is None
    assert virtual.roles["decode"].metrics is not None
    assert virtual.roles["decode"].metrics.prealloc_queue_mean is not None

    # the same requests in virtual time: the same transfers and bytes, on the same role, and the same seconds per
    # transfer (one formula, `sim.transfer`: per-GPU shard, comm efficiency, queueing on the NICs; at concurrency 2
    # a transfer often waits for the other's, ~0.57 s on average here) but for the moments by which the two requests'
    # hand-offs reach the live decode worker apart (a prefill step of 2 ms, the event loop's wake-ups): a transfer
    # that waits for another waits that much less
    want = virtual.roles["decode"].metrics
    assert (decode.kv_transfers, decode.kv_transfer_bytes) == (want.kv_transfers, want.kv_transfer_bytes)
    assert decode.kv_transfer_s_mean is not None and want.kv_transfer_s_mean is not None
    assert decode.kv_transfer_s_mean == pytest.approx(want.kv_transfer_s_mean, abs=0.05)
    # the prefill worker moves no KV into itself, in either
    got_p, want_p = live.roles["prefill"].metrics, virtual.roles["prefill"].metrics
    assert got_p is not None and want_p is not None
    assert got_p.kv_transfers is got_p.kv_transfer_bytes is want_p.kv_transfers is want_p.kv_transfer_bytes is None

    # the same series names and labels as virtual time's (role and worker), but the pre-allocation queue
    live_scrapes = [json.loads(line) for line in (tmp_path / SERVER_METRICS_FILE).read_text().splitlines()]
    live_series, virtual_series = kv_series_of(live_scrapes), kv_series_of(virtual_scrapes)
    assert live_series == {s for s in virtual_series if s[0] != KV_PREALLOC.name}
    assert {labels for _, labels in live_series} == {(("role", "decode"), ("worker", "0"))}


# ------------------------------------------------------------------ transfers queue on the decode worker's NICs

def test_two_transfers_into_one_decode_worker_at_once_queue_on_its_nics_so_the_second_takes_twice_as_long() -> None:
    """As on a virtual-time decode worker (`sim.transfer.queue_transfer`): a transfer asked for while another is on
    the NIC starts when that one has arrived, and counts its wait."""
    from llmsweep.sim.roles import KV_TOKENS_HEADER
    from llmsweep.sim.server import SimServer, start_server

    link = Link(kind="scale-out", name="test NIC", gbps=0.1, latency_s=0.002)
    decode = SimServer(EngineConfig(**FAST), served_model_name="m", role=RoleConfig(role="decode", links=(link,)))
    body = {"model": "m", "messages": [{"role": "user", "content": " ".join(f"q{i}" for i in range(800))}],
            "max_tokens": 2, "ignore_eos": True}

    async def one(http: aiohttp.ClientSession, url: str) -> int:
        async with http.post(f"{url}/v1/chat/completions", json=body, headers={KV_TOKENS_HEADER: "100000"}) as resp:
            assert resp.status == 200
            return int((await resp.json())["usage"]["prompt_tokens"])

    async def main() -> None:
        runner, port = await start_server(decode, "127.0.0.1", 0)
        try:
            async with aiohttp.ClientSession() as http:
                url = f"http://127.0.0.1:{port}"
                first, second = await asyncio.gather(one(http, url), one(http, url))
        finally:
            await runner.cleanup()
        alone = decode.kv_cost.seconds(first, link)
        assert first == second and alone > 0.2
        # one transfer took its link time, the other waited for it first: 2x its own (less the moment between the two
        # requests' arrivals, a few milliseconds); overlapping transfers would have taken 1x each
        assert decode.kv.transfers == 2
        assert 2.75 * alone < decode.kv.seconds <= 3 * alone + 1e-9

    asyncio.run(main())


@pytest.mark.parametrize("style", ["sglang", "vllm"])
def test_a_decode_worker_says_its_prompts_came_by_transfer_and_the_deployment_counts_them_once(
        tmp_path: Path, style: str) -> None:
    """The decode worker takes every prompt in by KV transfer and computes none of it; in vLLM's style it says so as
    vLLM's decode worker does (`prompt_tokens_by_source{source="external_kv_transfer"}`: live it said 0 beside 6
    transfers, in virtual time nothing). The deployment's prompt tokens and prefix-cache hit rate are its prefill
    worker's: the decode worker's count of the same prompts is not added, nor are transferred prompts cache hits."""
    fast = {**FAST, "engine_style": style}
    live = live_run(tmp_path, fast)
    virtual, _ = virtual_run(fast)
    records = (tmp_path / "records.jsonl").read_text().splitlines()
    prompt_tokens = sum(json.loads(line)["prompt_tokens"] for line in records)
    for said in (live, virtual):
        assert said.roles is not None
        got = said.roles["decode"].metrics
        assert got is not None and got.prompt_tokens == prompt_tokens
        if style == "vllm":
            assert (got.prompt_tokens_transferred, got.prompt_tokens_computed) == (prompt_tokens, 0)
        tokens, cache = said.server_metrics.tokens, said.server_metrics.cache
        prefill = said.roles["prefill"].metrics
        assert prefill is not None and prefill.prompt_tokens
        assert tokens is not None and tokens.prompt_total == prefill.prompt_tokens  # not the decode worker's added
        assert cache is not None and (cache.overall_hit_rate or 0.0) < 0.5, cache
