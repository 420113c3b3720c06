"""Prefix-cache accounting of the live simulator's disaggregated roles over loopback (prefill worker, decode worker,
PD router). The KV a decode worker receives from the prefill worker is a transfer, not a prefix-cache hit: the
client-visible `cached_tokens` of a request through the router is what the prefill worker found in its own prefix
cache (as SGLang's and vLLM's PD deployments report it, and as the virtual-time path `sim.disagg` counts it), and the
decode worker's prefix-cache counters (queries, hits) do not count the arrived blocks."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import aiohttp
from support.sim_roles import pd_deployment

from llmsweep.sim.roles import RoleConfig

FAST = {"model": "llama-1b", "hardware": "h200", "timing": "constant", "ttft_s": 0.002, "itl_s": 0.0005}
LINK = RoleConfig(role="decode", kv_transfer="nixl")


def deployment() -> Any:
    return pd_deployment(FAST, LINK)


def random_prompt(rng: random.Random, words: int) -> str:
    """Fixed-length random text: two such prompts share no prefix (beyond the chat template's first tokens)."""
    return " ".join(f"t{rng.randrange(1 << 30)}" for _ in range(words))


async def usage_of(http: aiohttp.ClientSession, url: str, prompt: str, *, stream: bool) -> dict[str, Any]:
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 4, "stream": stream,
            "stream_options": {"include_usage": True}}
    async with http.post(f"{url}/v1/chat/completions", json=body) as resp:
        assert resp.status == 200
        if not stream:
            return dict((await resp.json())["usage"])
        events = [json.loads(line[6:]) async for line in resp.content if line.startswith(b"data: {")]
    return dict(events[-1]["usage"])


def metric(text: str, name: str) -> float:
    """The sum of every sample of `name` (any labels) in a Prometheus text page."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_transferred_kv_is_not_a_cache_hit_and_a_repeated_prompt_reports_the_prefill_side_hits() -> None:
    async def main() -> None:
        rng = random.Random(7)
        async with deployment() as pd, aiohttp.ClientSession() as http:
            url, prefill, decode, decode_url = pd.url, pd.prefill, pd.decode, pd.decode_url
            bs = prefill.core.block_size
            prompts = [random_prompt(rng, 4 * bs) for _ in range(4)]
            # Fixed-length random prompts share nothing: no cached tokens, streamed or whole, though every prompt's
            # full blocks arrived in the decode worker's pool before it admitted the request.
            for i, prompt in enumerate(prompts):
                usage = await usage_of(http, url, prompt, stream=i % 2 == 0)
                assert usage["prompt_tokens"] > 4 * bs and usage["completion_tokens"] == 4
                assert usage["prompt_tokens_details"]["cached_tokens"] == 0, usage
            assert decode.kv.transfers == len(prompts)
            assert decode.core.counters.computed_prompt_tokens < len(prompts) * bs  # the KV did arrive and was used
            # A repeated prompt: the prefill worker finds its full blocks in its prefix cache, and that is what the
            # client sees (the decode worker's own lookup of the arrived blocks is not reported).
            hits_before = prefill.core.counters.device_hit_tokens
            for stream in (True, False):
                usage = await usage_of(http, url, prompts[0], stream=stream)
                expected = (usage["prompt_tokens"] - 1) // bs * bs
                assert expected > 0 and usage["prompt_tokens_details"]["cached_tokens"] == expected, usage
            assert prefill.core.counters.device_hit_tokens - hits_before == 2 * expected
            # The decode worker's prefix-cache counters do not count transferred blocks (as `sim.disagg`'s adopted
            # requests do not): nothing queried, nothing hit, on the counters and on /metrics.
            assert decode.core.counters.prefix_query_tokens == 0
            assert decode.core.counters.device_hit_tokens == decode.core.counters.host_hit_tokens == 0
            async with http.get(f"{decode_url}/metrics") as resp:
                page = await resp.text()
            for name in ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
                         "sglang:cached_tokens_total", "sglang:cache_hit_rate"):
                assert name.split("_total")[0] in page, name
                assert metric(page, name) == 0.0, (name, metric(page, name))
            # A request sent straight to the decode worker (no hand-off) still uses and reports its prefix cache.
            direct = await usage_of(http, decode_url, prompts[1], stream=False)
            assert direct["prompt_tokens_details"]["cached_tokens"] == (direct["prompt_tokens"] - 1) // bs * bs

    asyncio.run(main())
