"""The live simulator's disaggregated roles over loopback: a prefill worker, a decode worker and the simulated PD
router in front of them. The client's answer comes through the router; the decode worker waited the modelled KV
transfer (bytes over the link) before its first token, and placed the arrived blocks so it did not recompute the
prompt; the router is healthy only while every worker is; each process says what it serves as."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from support.sim_roles import pd_deployment

from llmsweep.client.probe import probe_endpoint
from llmsweep.engine_ids import SIM
from llmsweep.sim import router as router_module
from llmsweep.sim import server as server_module
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.roles import RoleConfig
from llmsweep.sim.router import PDRouter, start_router
from llmsweep.sim.server import SimServer, start_server
from llmsweep.sim.transfer import Link

FAST = {"model": "llama-1b", "hardware": "h200", "timing": "constant", "ttft_s": 0.004, "itl_s": 0.001}
PROMPT = " ".join(f"w{i % 97}" for i in range(3000))
LINK = RoleConfig(role="decode", kv_transfer="nixl",
                  links=(Link(kind="scale-out", name="test NIC", gbps=0.5, latency_s=0.005),))


def deployment() -> Any:
    return pd_deployment(FAST, LINK)


def body(stream: bool) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 16, "stream": stream,
            "stream_options": {"include_usage": True}, "ignore_eos": True}


def test_a_request_through_the_router_waits_for_the_modelled_kv_transfer_and_decodes_on_the_decode_worker() -> None:
    async def main() -> None:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            url, prefill, decode = pd.url, pd.prefill, pd.decode
            began = time.monotonic()
            async with http.post(f"{url}/v1/chat/completions", json=body(stream=True)) as resp:
                assert resp.status == 200
                first: float | None = None
                events = []
                async for line in resp.content:
                    if line.startswith(b"data: ") and first is None:
                        first = time.monotonic() - began
                    if line.startswith(b"data: {"):
                        events.append(json.loads(line[6:]))
            usage = events[-1]["usage"]
            assert usage["completion_tokens"] == 16  # the decode worker generated the answer ...
            prompt = usage["prompt_tokens"]
            expected = decode.kv_cost.seconds(prompt, LINK.links[0])
            assert expected > 0.1  # a transfer long enough to see: 3,000 tokens of KV over 0.5 GB/s
            assert decode.kv.transfers == 1 and abs(decode.kv.seconds - expected) < 1e-6
            assert first is not None and first >= expected  # ... and its first token came after the KV arrived
            # The prefill worker computed the prompt once, with one output token; the decode worker found the
            # arrived blocks in its pool and computed at most the prompt's last partial block.
            assert prefill.core.counters.generation_tokens == 1
            assert prefill.core.counters.computed_prompt_tokens == prompt
            assert decode.core.counters.computed_prompt_tokens < decode.core.block_size
            # Whole (non-streaming) answers come through the router as well.
            async with http.post(f"{url}/v1/chat/completions", json=body(stream=False)) as resp:
                whole = await resp.json()
            assert resp.status == 200 and whole["usage"]["completion_tokens"] == 16
            async with http.get(f"{url}/version") as resp:
                router_doc = await resp.json()
            assert router_doc["role"] == "router" and router_doc["routed"] == 2
            async with http.get(f"{decode_url(router_doc)}/version") as resp:
                doc = await resp.json()
            assert doc["role"] == "decode"
            # the backend by its name, as virtual time and a real engine's connector say it; the link apart
            assert doc["kv_transfer"] == "nixl"
            assert doc["kv_links"] == [{"kind": "scale-out", "name": "test NIC", "gbps": 0.5, "latency_s": 0.005}]
            assert doc["prefill_tp"] == 1 and doc["kv_bytes_per_token_per_gpu"] == decode.kv_bytes_per_token

    asyncio.run(main())


def decode_url(router_doc: dict[str, Any]) -> str:
    return str(router_doc["decode"][0])


def test_the_router_is_unhealthy_while_a_worker_is_down_and_says_which() -> None:
    async def main() -> None:
        server = SimServer(EngineConfig(**FAST), served_model_name="m", role=RoleConfig(role="prefill"))
        runner, port = await start_server(server, "127.0.0.1", 0)
        dead = "http://127.0.0.1:9"  # discard port: nothing answers
        router = PDRouter([f"http://127.0.0.1:{port}"], [dead])
        rrunner, rport = await start_router(router, "127.0.0.1", 0)
        try:
            async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{rport}/health") as resp:
                assert resp.status == 503 and dead in await resp.text()
            async with aiohttp.ClientSession() as http, http.post(f"http://127.0.0.1:{rport}/v1/completions",
                                                                  json={"model": "m", "prompt": "hi"}) as resp:
                assert resp.status == 502 and "decode worker" in (await resp.json())["error"]["message"]
        finally:
            await rrunner.cleanup()
            await runner.cleanup()

    asyncio.run(main())


def test_every_simulator_process_names_itself_on_version_by_the_simulators_engine_id(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench` labels its results simulated when /version's `engine` is the simulator's id (`EndpointProbe.simulated`,
    `engines.runs_on_simulator` against `SIM.id`): the worker and the router write that id, not a spelling of their
    own (the id is renamed below to show where the value comes from), and the probe reads them as the simulator."""
    async def said() -> tuple[list[str], str]:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            engines = []
            for url in (pd.url, pd.prefill_url, pd.decode_url):
                async with http.get(f"{url}/version") as resp:
                    engines.append((await resp.json())["engine"])
            probe = await asyncio.to_thread(probe_endpoint, pd.url)
            return engines, probe.source

    assert asyncio.run(said()) == ([SIM.id] * 3, "simulated")
    renamed = replace(SIM, id="sim-renamed")
    monkeypatch.setattr(server_module, "SIM", renamed)
    monkeypatch.setattr(router_module, "SIM", renamed)
    assert asyncio.run(said())[0] == [renamed.id] * 3


def test_a_client_that_leaves_the_router_mid_answer_aborts_the_request_on_the_decode_worker() -> None:
    """A real PD router drops the upstream request when its client goes away, and the worker aborts it. The simulated
    router kept waiting for a non-streaming answer the client no longer wanted, so the decode worker decoded it to
    its max_tokens with its slot and KV held."""
    async def main() -> None:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            whole = {**body(stream=False), "max_tokens": 1_000_000}
            task = asyncio.create_task(http.post(f"{pd.url}/v1/chat/completions", json=whole))
            for _ in range(500):
                if pd.decode.core.running:
                    break
                await asyncio.sleep(0.01)
            assert len(pd.decode.core.running) == 1  # the KV arrived and the decode worker decodes it
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(300):
                if not pd.decode.core.running and pd.decode.core.used_tokens() == 0:
                    break
                await asyncio.sleep(0.01)
            assert not pd.decode.core.running and not pd.decode.core.waiting
            assert pd.decode.core.used_tokens() == 0 and pd.prefill.core.used_tokens() == 0

    asyncio.run(main())


def test_a_deployment_stops_promptly_while_a_client_streams_through_the_router() -> None:
    """Stopping the router and its workers with an answer still streaming cuts it and aborts the request within
    seconds; aiohttp's default shutdown held the router (and the worker behind it) for 60 s twice."""
    async def main() -> float:
        async with aiohttp.ClientSession() as http:
            async with deployment() as pd:
                streamed = {**body(stream=True), "max_tokens": 1_000_000}
                resp = await http.post(f"{pd.url}/v1/chat/completions", json=streamed)
                assert b"data: {" in await resp.content.readuntil(b"\n\n")  # decoding, through the router
                began = time.monotonic()
            took = time.monotonic() - began
            resp.close()
            # the request was cut and aborted, not finished (released at the next step boundary, or still listed if
            # the engine stopped before one)
            decode = pd.decode.core
            assert all(r.aborted for r in decode.running) and not decode.waiting
            assert decode.counters.generation_tokens > 0 and decode.counters.requests_finished == 0
            return took

    took = asyncio.run(main())
    assert took < 5, f"stopped after {took:.1f} s"
