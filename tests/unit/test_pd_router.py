"""llmsweep's PD router speaking vLLM's P/D protocol (`--protocol vllm-nixl`), over loopback HTTP, in front of
stand-in vLLM workers: a prefill worker that hands out a NIXL KV handle (`kv_transfer_params`) with its own
prefix-cache hits, and a decode worker that refuses a request without one and streams SSE with a final usage chunk
counting the arrived KV as cached (as vLLM's decode does). The simulator's protocol is tested with the simulator's
roles (tests/integration/test_sim_roles.py, test_local_roles.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import click
import pytest
from aiohttp import web
from multidict import CIMultiDict

from llmsweep.cli.router import router as router_command
from llmsweep.router import PD_ROUTER_READY_LINE, PROTOCOLS, PDRouter, VllmNixl, protocol_named, start_router
from llmsweep.sim.roles import ROUTER_READY_LINE

PROMPT_TOKENS = 7
DECODE_CACHED = 7  # vLLM's decode worker counts the transferred prompt as cached
PREFILL_CACHED = 3  # what the prefill worker found in its own prefix cache


@dataclass
class Worker:
    """A stand-in vLLM worker: what it was sent, and how it answers."""

    index: int
    kind: str  # "prefill" or "decode"
    mode: str = "ok"
    received: list[tuple[str, dict[str, Any], CIMultiDict[str]]] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)
    healthy: int = 200
    url: str = ""
    runner: web.AppRunner | None = None

    @property
    def engine_id(self) -> str:
        return f"engine-{self.kind}-{self.index}"

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.received.append((request.path, body, request.headers.copy()))
        if self.mode == "refuse":
            return web.json_response({"error": {"message": "too long", "type": "BadRequestError", "code": 400}},
                                     status=400)
        if self.kind == "prefill":
            return self.prefill_answer(body, request.headers["X-Request-Id"])
        return await self.decode_answer(request, body)

    def prefill_answer(self, body: dict[str, Any], request_id: str) -> web.Response:
        answer: dict[str, Any] = {
            "id": "cmpl-p", "object": "text_completion", "model": body["model"],
            "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
            "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 1, "total_tokens": PROMPT_TOKENS + 1,
                      "prompt_tokens_details": {"cached_tokens": PREFILL_CACHED}},
            # vLLM 0.26's NIXL handle (nixl/pull_scheduler.py): block ids as one list per KV-cache group
            "kv_transfer_params": {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [[4, 5]],
                                   "remote_engine_id": self.engine_id, "remote_request_id": request_id,
                                   "remote_host": "10.0.0.1", "remote_port": 5600 + self.index, "tp_size": 1,
                                   "remote_num_tokens": PROMPT_TOKENS, "remote_blocks_expiry_time": None}}
        if self.mode == "no-handle":  # what vLLM answers for a request its connector does not hand over (aborted)
            answer["kv_transfer_params"] = None
        elif self.mode == "no-blocks":  # a handle naming no block, in 0.26's form and in the older flat one
            answer["kv_transfer_params"]["remote_block_ids"] = [[]]
        elif self.mode == "no-blocks-flat":
            answer["kv_transfer_params"]["remote_block_ids"] = []
        elif self.mode == "no-details":
            del answer["usage"]["prompt_tokens_details"]
        return web.json_response(answer)

    async def decode_answer(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        params = body.get("kv_transfer_params")
        handed = isinstance(params, dict) and params.get("do_remote_prefill") and any(params["remote_block_ids"])
        if not handed:
            return web.json_response({"error": {"message": "no KV handle: would recompute the prompt"}}, status=400)
        usage = {"prompt_tokens": PROMPT_TOKENS, "total_tokens": PROMPT_TOKENS + 3, "completion_tokens": 3,
                 "prompt_tokens_details": {"cached_tokens": DECODE_CACHED}}
        if not body.get("stream"):
            whole = json.dumps({"id": "cmpl-d", "object": "text_completion", "model": body["model"],
                                "choices": [{"index": 0, "text": "abc", "finish_reason": "length"}],
                                "usage": usage}).encode()
            self.sent.append(whole)
            return web.Response(body=whole, content_type="application/json")
        out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await out.prepare(request)
        chunks = [json.dumps({"id": "cmpl-d", "choices": [{"index": 0, "text": t}], "usage": None},
                             separators=(",", ":")).encode() for t in ("a", "b", '"cached_tokens": 9')]
        chunks.append(json.dumps({"id": "cmpl-d", "choices": [], "usage": usage}, separators=(",", ":")).encode())
        stream = b"".join(b"data: " + c + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.sent.append(stream)
        for start in range(0, len(stream), 37):  # pieces that cut lines (and the usage chunk) anywhere
            await out.write(stream[start:start + 37])
            await asyncio.sleep(0)
        await out.write_eof()
        return out

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.healthy)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": f"model-of-{self.kind}-{self.index}"}]})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "0.26.0"})

    async def start(self) -> None:
        app = web.Application()
        app.add_routes([web.post("/v1/completions", self.completions),
                        web.post("/v1/chat/completions", self.completions),
                        web.get("/health", self.health), web.get("/v1/models", self.models),
                        web.get("/version", self.version)])
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@dataclass
class Deployment:
    url: str
    router: PDRouter
    prefill: list[Worker]
    decode: list[Worker]


@contextlib.asynccontextmanager
async def deployment(prefill: int = 1, decode: int = 1) -> AsyncIterator[Deployment]:
    workers = [Worker(i, "prefill") for i in range(prefill)] + [Worker(i, "decode") for i in range(decode)]
    for w in workers:
        await w.start()
    pd = PDRouter([w.url for w in workers[:prefill]], [w.url for w in workers[prefill:]],
                  protocol=protocol_named("vllm-nixl"), kv_transfer="nixl")
    runner, port = await start_router(pd, "127.0.0.1", 0)
    try:
        yield Deployment(f"http://127.0.0.1:{port}", pd, workers[:prefill], workers[prefill:])
    finally:
        await runner.cleanup()
        for w in workers:
            await w.stop()


def request(stream: bool, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "prompt": "hello there", "max_tokens": 3, "stream": stream, "ignore_eos": True, **extra}


def test_the_prefill_leg_asks_for_a_remote_decode_of_one_token_and_both_legs_share_the_request_id() -> None:
    async def main() -> None:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            client = request(True, stream_options={"include_usage": True}, min_tokens=2, max_completion_tokens=3)
            async with http.post(f"{pd.url}/v1/completions", json=client, headers={"X-Request-Id": "req-42"}) as r:
                assert r.status == 200
                await r.read()
            async with http.post(f"{pd.url}/v1/chat/completions", json=request(False)) as r:
                assert r.status == 200
            (path, first, p_headers), (path2, first2, p_headers2) = pd.prefill[0].received
            assert path == "/v1/completions" and path2 == "/v1/chat/completions"
            assert first == {"model": "m", "prompt": "hello there", "max_tokens": 1, "max_completion_tokens": 1,
                             "stream": False, "ignore_eos": True,
                             "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False,
                                                    "remote_engine_id": None, "remote_block_ids": None,
                                                    "remote_host": None, "remote_port": None}}
            assert "max_completion_tokens" not in first2 and first2["max_tokens"] == 1 and first2["stream"] is False
            (_, second, d_headers), (_, second2, d_headers2) = pd.decode[0].received
            assert p_headers["X-Request-Id"] == d_headers["X-Request-Id"] == "req-42"
            generated = p_headers2["X-Request-Id"]  # the client sent none: one is made, the same for both legs
            assert generated and generated == d_headers2["X-Request-Id"] and generated != "req-42"
            # The decode leg is the client's body as it came, with the prefill worker's handle.
            handle = {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [[4, 5]],
                      "remote_engine_id": "engine-prefill-0", "remote_request_id": "req-42",
                      "remote_host": "10.0.0.1", "remote_port": 5600, "tp_size": 1,
                      "remote_num_tokens": PROMPT_TOKENS, "remote_blocks_expiry_time": None}
            assert second == {**client, "kv_transfer_params": handle}
            assert second2["kv_transfer_params"]["remote_request_id"] == generated

    asyncio.run(main())


def test_the_decode_stream_is_relayed_byte_for_byte_but_for_the_prefill_workers_cached_tokens() -> None:
    async def main() -> None:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            async with http.post(f"{pd.url}/v1/completions",
                                 json=request(True, stream_options={"include_usage": True})) as r:
                assert r.status == 200 and r.content_type == "text/event-stream"
                got = await r.read()
            sent = pd.decode[0].sent[0]
            usage_sent = b'"prompt_tokens_details":{"cached_tokens":7}'
            assert sent.count(usage_sent) == 1
            # Only the usage chunk's number changed; a text chunk that merely mentions the field is as it was.
            assert got == sent.replace(usage_sent, b'"prompt_tokens_details":{"cached_tokens":3}')
            assert b'"text":"\\"cached_tokens\\": 9"' in got
            # Not streamed: the whole JSON answer, the same one number changed, nothing else.
            async with http.post(f"{pd.url}/v1/completions", json=request(False)) as r:
                assert r.status == 200 and r.content_type == "application/json"
                whole = await r.read()
            assert whole == pd.decode[0].sent[1].replace(b'"cached_tokens": 7', b'"cached_tokens": 3')
            assert json.loads(whole)["usage"]["prompt_tokens_details"] == {"cached_tokens": PREFILL_CACHED}

    asyncio.run(main())


def test_a_prefill_worker_that_reports_no_cache_details_gives_zero_cached_tokens_not_the_decodes_transfer() -> None:
    async def main() -> None:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            pd.prefill[0].mode = "no-details"
            async with http.post(f"{pd.url}/v1/completions", json=request(False)) as r:
                assert r.status == 200
                doc = await r.json()
            assert doc["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}

    asyncio.run(main())


@pytest.mark.parametrize("mode", ["no-handle", "no-blocks", "no-blocks-flat"])
def test_a_prefill_answer_without_a_kv_handle_is_a_502_counted_in_version_and_never_reaches_decode(mode: str) -> None:
    async def main() -> None:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            pd.prefill[0].mode = mode
            async with http.post(f"{pd.url}/v1/completions", json=request(True)) as r:
                assert r.status == 502
                error = (await r.json())["error"]["message"]
            assert pd.prefill[0].url in error and "handed over no KV" in error and "compute the prompt again" in error
            assert pd.decode[0].received == []  # the decode worker never saw it: no silent recompute
            pd.prefill[0].mode = "ok"
            async with http.post(f"{pd.url}/v1/completions", json=request(False)) as r:
                assert r.status == 200
            async with http.get(f"{pd.url}/version") as r:
                version = await r.json()
            assert version["refused_no_handle"] == 1 and version["routed"] == 1 and version["kv_handles"] == 1

    asyncio.run(main())


def test_worker_errors_are_relayed_with_their_status_naming_the_worker() -> None:
    async def main() -> None:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            pd.prefill[0].mode = "refuse"
            async with http.post(f"{pd.url}/v1/completions", json=request(True)) as r:
                error = (await r.json())["error"]
                assert r.status == 400 and error["message"] == f"prefill worker {pd.prefill[0].url}: too long"
                assert error["type"] == "BadRequestError"
            assert pd.decode[0].received == []
            pd.prefill[0].mode, pd.decode[0].mode = "ok", "refuse"
            async with http.post(f"{pd.url}/v1/chat/completions", json=request(True)) as r:
                error = (await r.json())["error"]
                assert r.status == 400 and error["message"] == f"decode worker {pd.decode[0].url}: too long"
            await pd.decode[0].stop()  # the decode worker gone: a 502 that names it
            async with http.post(f"{pd.url}/v1/completions", json=request(False)) as r:
                assert r.status == 502 and pd.decode[0].url in (await r.json())["error"]["message"]

    asyncio.run(main())


def test_a_body_the_json_decoder_refuses_is_a_400_that_reaches_no_worker() -> None:
    """The router reads the client's body with the simulator's reader (`http_app.json_object`): JSON nested past the
    decoder's depth gave a 500 with a traceback, not the 400 a malformed body is."""
    async def main() -> None:
        async with deployment() as pd, aiohttp.ClientSession() as http:
            deep = b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
            async with http.post(f"{pd.url}/v1/completions", data=deep,
                                 headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400 and "not valid JSON" in (await r.json())["error"]["message"]
            assert pd.prefill[0].received == [] and pd.decode[0].received == []

    asyncio.run(main())


def test_round_robin_over_two_prefill_and_two_decode_workers_passes_each_prefills_handle_on() -> None:
    async def main() -> None:
        async with deployment(prefill=2, decode=2) as pd, aiohttp.ClientSession() as http:
            for _ in range(4):
                async with http.post(f"{pd.url}/v1/completions", json=request(True)) as r:
                    assert r.status == 200
                    await r.read()
            assert [len(w.received) for w in (*pd.prefill, *pd.decode)] == [2, 2, 2, 2]
            for d in pd.decode:
                sources = [body["kv_transfer_params"]["remote_engine_id"] for _, body, _ in d.received]
                prefilled = [headers["X-Request-Id"] for p in pd.prefill for _, _, headers in p.received]
                assert all(h["X-Request-Id"] in prefilled for _, _, h in d.received)
                assert len(set(sources)) == 1  # the pools advance together: each decode worker pairs with one P
            async with http.get(f"{pd.url}/version") as r:
                version = await r.json()
            assert version["prefill_engines"] == {"engine-prefill-0": 2, "engine-prefill-1": 2}
            assert version["routed"] == version["kv_handles"] == 4

    asyncio.run(main())


def test_health_needs_every_worker_models_are_the_first_decoders_and_version_says_what_routes() -> None:
    async def main() -> None:
        async with deployment(prefill=2, decode=2) as pd, aiohttp.ClientSession() as http:
            async with http.get(f"{pd.url}/health") as r:
                assert r.status == 200
            pd.decode[1].healthy = 503
            async with http.get(f"{pd.url}/health") as r:
                assert r.status == 503 and pd.decode[1].url in await r.text()
            pd.decode[1].healthy = 200
            await pd.prefill[1].stop()  # down: nothing answers on its port
            async with http.get(f"{pd.url}/health") as r:
                text = await r.text()
                assert r.status == 503 and pd.prefill[1].url in text and pd.prefill[0].url not in text
            async with http.get(f"{pd.url}/v1/models") as r:
                assert r.status == 200 and (await r.json())["data"] == [{"id": "model-of-decode-0"}]
            async with http.get(f"{pd.url}/version") as r:
                version = await r.json()
            assert version == {**version, "version": "0.26.0", "engine": "vllm", "router": "llmsweep",
                               "protocol": "vllm-nixl", "role": "router", "tp": 0, "kv_transfer": "nixl",
                               "prefill": [w.url for w in pd.prefill], "decode": [w.url for w in pd.decode],
                               "routed": 0, "kv_handles": 0, "refused_no_handle": 0, "prefill_engines": {},
                               "policy": "round_robin", "abandoned": {}, "retried": {}}

    asyncio.run(main())


def test_the_cli_offers_every_protocol_and_vllm_nixl_is_the_protocol_registry_s() -> None:
    protocol = next(p for p in router_command.params if p.name == "protocol")
    assert isinstance(protocol.type, click.Choice) and sorted(protocol.type.choices) == sorted(PROTOCOLS)
    assert isinstance(protocol_named("vllm-nixl"), VllmNixl)
    with pytest.raises(ValueError, match="known: vllm-nixl, sim"):
        protocol_named("toy")


async def _cli_router(argv: list[str], ready: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "llmsweep.cli.main", *argv], stderr=subprocess.PIPE, text=True,
                            env=env)
    assert proc.stderr is not None
    line = await asyncio.to_thread(proc.stderr.readline)  # its first line says it listens (the launch's marker)
    found = re.search(re.escape(ready) + r"127\.0\.0\.1:(\d+)", line)
    assert found, line
    return proc, f"http://127.0.0.1:{found.group(1)}"


def test_llmsweep_router_serves_the_vllm_nixl_protocol_from_the_command_line_a_launch_renders() -> None:
    async def main() -> None:
        workers = [Worker(0, "prefill"), Worker(0, "decode")]
        for w in workers:
            await w.start()
        proc, url = await _cli_router(["router", "--protocol", "vllm-nixl", "--prefill", workers[0].url, "--decode",
                                       workers[1].url, "--kv-transfer", "nixl", "--host", "127.0.0.1", "--port", "0"],
                                      PD_ROUTER_READY_LINE)
        try:
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{url}/health") as r:
                    assert r.status == 200
                async with http.post(f"{url}/v1/completions", json=request(True)) as r:
                    assert r.status == 200
                    got = await r.read()
                assert got == workers[1].sent[0].replace(b'"cached_tokens":7', b'"cached_tokens":3')
                async with http.get(f"{url}/version") as r:
                    version = await r.json()
                assert version["protocol"] == "vllm-nixl" and version["kv_transfer"] == "nixl"
                assert version["kv_handles"] == 1
        finally:
            proc.terminate()
            assert await asyncio.to_thread(proc.wait, 10) == 0  # asked to stop, it stops cleanly
            for w in workers:
                await w.stop()

    asyncio.run(main())


def test_llmsweep_router_with_the_sim_protocol_is_the_simulators_router() -> None:
    async def main() -> None:
        proc, url = await _cli_router(["router", "--protocol", "sim", "--prefill", "http://127.0.0.1:9",
                                       "--decode", "http://127.0.0.1:9", "--port", "0"], ROUTER_READY_LINE)
        try:
            async with aiohttp.ClientSession() as http, http.get(f"{url}/version") as r:
                version = await r.json()
            assert version["engine"] == "sim" and version["role"] == "router" and "protocol" not in version
        finally:
            proc.terminate()
            assert await asyncio.to_thread(proc.wait, 10) == 0

    asyncio.run(main())
