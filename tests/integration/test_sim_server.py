"""The live simulated engine answered over loopback: SSE shape, usage, cache hits, /metrics, determinism, CLI."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmsweep.sim.config import SpecDecodeConfig
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.server import SimServer, start_server

FAST = {"model": "llama-1b", "hardware": "h200", "timing": "constant", "ttft_s": 0.004, "itl_s": 0.001}
LONG_PROMPT = " ".join(f"w{i % 97}" for i in range(400))


@asynccontextmanager
async def serving(**config: Any) -> AsyncIterator[tuple[str, SimServer]]:
    server = SimServer(EngineConfig(**{**FAST, **config}), served_model_name="sim-model")
    runner, port = await start_server(server, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        await runner.cleanup()


async def sse_events(resp: aiohttp.ClientResponse) -> tuple[list[Any], bytes]:
    """Parsed `data:` payloads (the last one the literal [DONE]) and the raw body."""
    raw = await resp.read()
    events: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        payload = block[len("data: "):]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events, raw


def chat_body(content: str, max_tokens: int = 12, **extra: Any) -> dict[str, Any]:
    return {"model": "sim-model", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True, **extra}


def test_streaming_chat_has_openai_sse_shape_usage_and_cache_hits_on_a_repeated_prefix() -> None:
    async def main() -> None:
        async with serving() as (url, _), aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/chat/completions", json=chat_body(LONG_PROMPT)) as resp:
                assert resp.status == 200
                assert resp.headers["Content-Type"].startswith("text/event-stream")
                events, _ = await sse_events(resp)
            assert events[-1] == "[DONE]"
            chunks, usage_chunk = events[:-2], events[-2]
            assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
            assert chunks[-1]["choices"][0]["finish_reason"] == "length"
            text = "".join(c["choices"][0]["delta"]["content"] for c in chunks)
            assert len(text.split()) == 12  # one word per token, as the built-in tokenizer counts
            assert usage_chunk["choices"] == []
            usage = usage_chunk["usage"]
            assert usage["completion_tokens"] == 12
            assert usage["prompt_tokens"] == 400 + 3 + 2  # content + ChatML per message + generation prompt
            assert usage["prompt_tokens_details"]["cached_tokens"] == 0
            async with http.post(f"{url}/v1/chat/completions",
                                 json=chat_body(LONG_PROMPT + " and a different tail")) as resp:
                events, _ = await sse_events(resp)
            cached = events[-2]["usage"]["prompt_tokens_details"]["cached_tokens"]
            assert 256 <= cached <= 400 and cached % 64 == 0  # whole shared blocks hit, the new tail does not

    asyncio.run(main())


def test_completions_accept_token_ids_max_completion_tokens_and_answer_without_streaming() -> None:
    async def main() -> None:
        async with serving(kv_capacity_tokens=4096) as (url, _), aiohttp.ClientSession() as http:
            body = {"model": "sim-model", "prompt": list(range(300)), "max_completion_tokens": 7}
            async with http.post(f"{url}/v1/completions", json=body) as resp:
                assert resp.status == 200
                data = await resp.json()
            assert data["object"] == "text_completion"
            assert data["usage"]["prompt_tokens"] == 300 and data["usage"]["completion_tokens"] == 7
            assert len(data["choices"][0]["text"].split()) == 7
            async with http.post(f"{url}/v1/completions", json={**body, "stream": True}) as resp:
                events, _ = await sse_events(resp)
            assert events[-1] == "[DONE]"
            assert "".join(e["choices"][0]["text"] for e in events[:-1]).count(" ") == 7  # no usage chunk asked
            async with http.get(f"{url}/v1/models") as resp:
                assert (await resp.json())["data"][0]["id"] == "sim-model"
            async with http.get(f"{url}/health") as resp:
                assert resp.status == 200
            async with http.post(f"{url}/v1/completions", json={**body, "model": "other"}) as resp:
                assert resp.status == 404
            async with http.post(f"{url}/v1/completions", json={**body, "prompt": "word " * 400_000}) as resp:  # 2 MB
                assert resp.status == 400
                assert "maximum context length" in (await resp.json())["error"]["message"]

    asyncio.run(main())


def _metrics(text: str) -> dict[str, float]:
    """Samples by name (labels folded in as name{k=v,...}) from Prometheus text, via the official parser."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k not in ("model_name", "engine"))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out


@pytest.mark.parametrize("al", [2.5, 3.39])
def test_metrics_parse_and_spec_counters_read_back_the_configured_acceptance_length(al: float) -> None:
    async def main() -> dict[str, float]:
        spec = SpecDecodeConfig(method="mtp", k=3, acceptance_length=al)
        async with serving(spec=spec, dram_gb=1.0) as (url, _), aiohttp.ClientSession() as http:
            async def one(i: int) -> None:
                async with http.post(f"{url}/v1/chat/completions", json=chat_body(f"q{i} " + LONG_PROMPT, 300)) as r:
                    await sse_events(r)
            await asyncio.gather(*(one(i) for i in range(12)))
            async with http.get(f"{url}/metrics") as resp:
                return _metrics(await resp.text())

    m = asyncio.run(main())
    vllm_al = 1 + m["vllm:spec_decode_num_accepted_tokens_total"] / m["vllm:spec_decode_num_drafts_total"]
    assert abs(vllm_al - al) < 0.1 * al, vllm_al
    sglang_al = m["sglang:generation_tokens_total"] / m["sglang:spec_verify_calls_total"]
    assert abs(sglang_al - al) < 0.1 * al, sglang_al  # includes the prefill's first token, as SGLang's does
    assert m["vllm:spec_decode_num_draft_tokens_total"] == 3 * m["vllm:spec_decode_num_drafts_total"]
    assert m["sglang:generation_tokens_total"] == 12 * 300
    assert m["sglang:num_running_reqs"] == 0 and m["vllm:num_requests_waiting"] == 0
    assert m["vllm:prompt_tokens_total"] == m["sglang:prompt_tokens_total"] > 0
    by_source = sum(v for k, v in m.items() if k.startswith("vllm:prompt_tokens_by_source_total"))
    assert by_source == m["vllm:prompt_tokens_total"]
    assert "sglang:cached_tokens_total{cache_source=host}" in m and "vllm:num_preemptions_total" in m
    # a job pinned at 3.39 would fail a read-back gate against a simulator started at 2.5
    assert (abs(vllm_al - 3.39) < 0.1) == (al == 3.39)


def test_same_seed_gives_byte_identical_streams() -> None:
    async def run() -> list[bytes]:
        bodies = []
        async with serving(spec=SpecDecodeConfig(k=3, acceptance_length=2.5), seed=7) as (url, _), \
                aiohttp.ClientSession() as http:
            for i in range(3):
                async with http.post(f"{url}/v1/chat/completions", json=chat_body(f"hello {i} " * 50, 40)) as r:
                    bodies.append((await sse_events(r))[1])
        return bodies

    first, second = asyncio.run(run()), asyncio.run(run())
    assert first == second
    assert first[0] != first[1]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_curl_streams_from_the_cli_server_after_its_readiness_line() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--port", "0", "--model", "llama-1b",
         "--served-model-name", "sim-model", "--metrics-style", "vllm", "--timing", "constant", "--itl-ms", "1"],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        port = None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if match := re.search(r"running on http://127\.0\.0\.1:(\d+)", line):
                port = int(match.group(1))
            if "Application startup complete." in line:
                break
        assert port, lines
        assert any("GPU KV cache size:" in line for line in lines)
        body = json.dumps(chat_body("hi there", 5))
        out = subprocess.run(["curl", "-sN", "-H", "Content-Type: application/json", "-d", body,
                              f"http://127.0.0.1:{port}/v1/chat/completions"], capture_output=True, text=True,
                             timeout=30)
        assert out.returncode == 0, out.stderr
        assert out.stdout.rstrip().endswith("data: [DONE]")
        assert '"completion_tokens": 5' in out.stdout
        metrics = subprocess.run(["curl", "-s", f"http://127.0.0.1:{port}/metrics"], capture_output=True, text=True,
                                 timeout=30).stdout
        assert "vllm:generation_tokens_total" in metrics and "sglang:" not in metrics
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_client_that_disconnects_mid_stream_frees_its_slot() -> None:
    async def main() -> None:
        async with serving() as (url, server), aiohttp.ClientSession() as http:
            resp = await http.post(f"{url}/v1/chat/completions", json=chat_body("hello", 1_000_000))
            await resp.content.readuntil(b"\n\n")  # first chunk arrived: the request is running
            assert len(server.core.running) == 1
            resp.close()
            for _ in range(200):
                if not server.core.running and server.core.used_tokens() == 0:
                    break
                await asyncio.sleep(0.01)
            assert not server.core.running and server.core.used_tokens() == 0
            async with http.post(f"{url}/v1/chat/completions", json=chat_body("again", 3)) as r:
                assert (await sse_events(r))[0][-1] == "[DONE]"  # the server still serves

    asyncio.run(main())


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_sim_serve_stops_cleanly_on_each_interrupt_signal(sig: str) -> None:
    """A server asked to stop exits 0 whichever signal asked: SIGHUP (a closed terminal) ended it with 129 while
    SIGINT and SIGTERM gave 0. Its log's last line names the signal: a log that ended after the ready line left a
    server killed from outside indistinguishable from one asked to stop."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "running on http://" in line:
                break
        time.sleep(0.3)  # past the line, into the wait for a stop
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == f"llmsweep sim serve: stopping on {sig}", err[-2000:]


def test_a_port_already_taken_names_what_to_stop() -> None:
    """Under `llmsweep run` a role's port is the launch's (a recipe's --port is refused), so 'pick a free --port' was
    a fix the user could not apply: the fix says what to stop first, and how to find it."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--port", str(port)],
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr[-2000:]
    assert f"cannot bind 127.0.0.1:{port}" in res.stderr and "Traceback" not in res.stderr
    assert f"stop what listens on port {port} on this host" in res.stderr and "sport = :" in res.stderr


async def _gauges(http: aiohttp.ClientSession, url: str) -> tuple[float, float, float]:
    """(running, waiting, KV tokens in use) as `/metrics` says them."""
    async with http.get(f"{url}/metrics") as resp:
        m = _metrics(await resp.text())
    return m["vllm:num_requests_running"], m["vllm:num_requests_waiting"], m["sglang:num_used_tokens"]


async def _until(http: aiohttp.ClientSession, url: str, done: Any) -> tuple[float, float, float]:
    """Poll `/metrics` until `done(running, waiting, used)`; the last reading either way."""
    for _ in range(300):
        got = await _gauges(http, url)
        if done(*got):
            return got
        await asyncio.sleep(0.01)
    return got


def test_a_client_that_goes_away_before_its_answer_is_aborted_and_the_gauges_return_to_zero() -> None:
    """vLLM and SGLang abort a request whose client disconnected whether or not it streams, and whether it runs or
    still waits. The simulator noticed a gone client only when it wrote a streamed chunk: a non-streaming request (or a
    streamed one still in the queue) kept running to its max_tokens, its slot and KV held and the running/waiting
    gauges off what was served."""
    async def main() -> None:
        async with serving(max_running_requests=1) as (url, server), aiohttp.ClientSession() as http:
            whole = {"model": "sim-model", "prompt": "hello there", "max_tokens": 1_000_000}
            running = asyncio.create_task(http.post(f"{url}/v1/completions", json=whole))
            assert (await _until(http, url, lambda r, w, u: r == 1))[0] == 1
            queued = await http.post(f"{url}/v1/chat/completions", json=chat_body("wait", 1_000_000))
            assert queued.status == 200  # its stream is open, no token yet: it waits for the slot
            assert (await _until(http, url, lambda r, w, u: w == 1))[:2] == (1, 1)
            queued.close()  # the streamed one leaves while it waits for a slot
            running.cancel()  # the non-streaming one leaves while it runs
            with pytest.raises(asyncio.CancelledError):
                await running
            assert await _until(http, url, lambda *g: g == (0, 0, 0)) == (0, 0, 0)
            assert not server.core.running and not server.core.waiting
            async with http.post(f"{url}/v1/completions", json={**whole, "max_tokens": 3}) as r:
                assert (await r.json())["usage"]["completion_tokens"] == 3  # the server still serves

    asyncio.run(main())


@pytest.mark.parametrize(("path", "extra"), [
    ("/v1/completions", {"prompt": "hello", "stream": True, "stream_options": "include_usage"}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream_options": ["x"]}),
    ("/v1/chat/completions", {"messages": ["hi"]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}, 7]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 42}]}),
])
def test_a_malformed_request_is_a_400_that_queues_nothing(path: str, extra: dict[str, Any]) -> None:
    """vLLM and SGLang answer a request whose fields have the wrong type with a 400 naming the field. A non-object
    `stream_options` or message gave a 500 with a traceback in the server log, and a bad `stream_options` was refused
    only after the request was queued, so it ran on to its max_tokens with no one to read it."""
    async def main() -> None:
        async with serving() as (url, server), aiohttp.ClientSession() as http:
            async with http.post(url + path, json={"model": "sim-model", "max_tokens": 1_000_000, **extra}) as r:
                assert r.status == 400
                doc = await r.json()
            assert doc["object"] == "error" and doc["error"]["code"] == 400
            assert ("stream_options" in doc["message"]) == ("stream_options" in extra), doc["message"]
            await asyncio.sleep(0.05)
            assert await _gauges(http, url) == (0, 0, 0) and not server.core.running

    asyncio.run(main())


MALFORMED_BODIES = {
    "nested past the decoder's depth": b'{"prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "an integer past the digit limit": b'{"prompt": "hi", "max_tokens": ' + b"9" * 5000 + b"}",
    "cut short": b'{"prompt": "hi", "max_tokens": 3',
    "not UTF-8": b'{"prompt": "\xff"}',
}


@pytest.mark.parametrize("what", list(MALFORMED_BODIES))
def test_a_body_the_json_decoder_refuses_is_a_400_and_the_server_serves_on(what: str) -> None:
    """A body nested deeper than Python's decoder recurses, or with an integer longer than Python converts, made the
    decoder raise RecursionError / a plain ValueError: the server answered 500 with a traceback in its log, where a
    malformed body is the client's 400 (as a cut-short body already was)."""
    async def main() -> None:
        async with serving() as (url, server), aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", data=MALFORMED_BODIES[what],
                                 headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400, await r.text()
                doc = await r.json()
            assert doc["object"] == "error" and "request body is not valid JSON" in doc["message"]
            assert not server.core.running and not server.core.waiting
            async with http.post(f"{url}/v1/completions", json={"model": "sim-model", "prompt": "hi",
                                                                "max_tokens": 2}) as r:
                assert r.status == 200 and (await r.json())["usage"]["completion_tokens"] == 2

    asyncio.run(main())


def test_sim_serve_stops_promptly_and_cleanly_while_a_client_streams() -> None:
    """A stop (SIGTERM) with an answer still streaming: the stream is cut, the request aborted, and the server exits 0
    with its port free well inside a launcher's stop grace (10 s). aiohttp's default shutdown waited 60 s twice for the
    handler, so the launcher's SIGKILL ended the server instead."""
    import signal
    import socket
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--port", "0", "--model", "llama-1b",
         "--timing", "constant", "--itl-ms", "5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        port = 0
        for line in proc.stderr:
            if match := re.search(r"running on http://127\.0\.0\.1:(\d+)", line):
                port = int(match.group(1))
                break
        assert port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            payload = json.dumps({"prompt": "hello", "max_tokens": 1_000_000, "stream": True}).encode()
            client.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
            assert b"data: {" in client.recv(65536) + client.recv(65536)  # the answer streams
            began = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            took = time.monotonic() - began
        assert proc.returncode == 0 and "Traceback" not in err, err[-2000:]
        assert took < 5, f"stopped after {took:.1f} s"
        with socket.socket() as again:
            again.bind(("127.0.0.1", port))  # the port is free
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_null_max_completion_tokens_leaves_max_tokens_in_force() -> None:
    """Clients that serialise every field send `"max_completion_tokens": null` beside `max_tokens`; vLLM reads
    `max_completion_tokens or max_tokens`. The simulator took the null as absent and generated its default 256 tokens,
    so the answer's length, the usage and every throughput figure were off what the client asked for."""
    async def main() -> None:
        async with serving() as (url, _), aiohttp.ClientSession() as http:
            for extra in ({"max_completion_tokens": None, "max_tokens": 5},
                          {"max_completion_tokens": 5, "max_tokens": None}):
                body = {**chat_body("hi there", 0), **extra}
                async with http.post(f"{url}/v1/chat/completions", json=body) as r:
                    events, _ = await sse_events(r)
                assert events[-2]["usage"]["completion_tokens"] == 5, extra
                text = "".join(e["choices"][0]["delta"]["content"] for e in events[:-2])
                assert len(text.split()) == 5

    asyncio.run(main())


@pytest.mark.parametrize(("path", "extra", "named"), [
    ("/v1/completions", {"n": 2}, "n = 2"),
    ("/v1/chat/completions", {"n": 4}, "n = 4"),
    ("/v1/completions", {"logprobs": 1, "echo": True, "max_tokens": 1}, "logprobs"),  # lm-eval's log-likelihood
    ("/v1/completions", {"logprobs": 0}, "logprobs"),
    ("/v1/completions", {"echo": True}, "echo"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 5}, "logprobs"),
])
def test_what_the_simulator_cannot_give_is_refused_with_a_400_that_says_so(
        path: str, extra: dict[str, Any], named: str) -> None:
    """vLLM answers n > 1 with n choices, logprobs with token log-probabilities and echo with the prompt. The simulator
    ignored all three and answered one choice of made-up words: a benchmark of n = 4 ran a quarter of the decode load
    it asked for, and lm-eval's log-likelihood tasks crashed on the missing logprobs. It refuses them now, naming what
    it cannot simulate, and serves the same request without them (or with their neutral values)."""
    async def main() -> None:
        async with serving() as (url, server), aiohttp.ClientSession() as http:
            prompt = {"messages": [{"role": "user", "content": "hi"}]} if "chat" in path else {"prompt": "hi"}
            base = {"model": "sim-model", "max_tokens": 3, **prompt}
            async with http.post(url + path, json={**base, **extra}) as r:
                assert r.status == 400
                doc = await r.json()
            assert named in doc["error"]["message"] and "not simulated" in doc["message"]
            assert not server.core.running and not server.core.waiting
            neutral = {"n": 1, "logprobs": False if "chat" in path else None, "echo": False, "top_logprobs": 0}
            async with http.post(url + path, json={**base, **neutral}) as r:
                assert r.status == 200 and len((await r.json())["choices"]) == 1

    asyncio.run(main())


def test_a_stream_flag_written_as_a_string_is_read_as_vllm_reads_it() -> None:
    """vLLM's request models read booleans leniently: `"stream": "false"` is a whole answer. The simulator took any
    non-empty string as true and streamed it, so a client that serialises flags as strings got SSE it could not parse;
    a value that is no boolean at all is a 400."""
    async def main() -> None:
        async with serving() as (url, _), aiohttp.ClientSession() as http:
            body = {"model": "sim-model", "prompt": "hello there", "max_tokens": 3}
            async with http.post(f"{url}/v1/completions", json={**body, "stream": "false"}) as r:
                assert r.status == 200 and r.content_type == "application/json"
                assert (await r.json())["usage"]["completion_tokens"] == 3
            async with http.post(f"{url}/v1/completions", json={**body, "stream": "true"}) as r:
                assert r.status == 200 and r.content_type == "text/event-stream"
                await r.read()
            async with http.post(f"{url}/v1/completions", json={**body, "stream": "sometimes"}) as r:
                assert r.status == 400 and "stream must be a boolean" in (await r.json())["message"]

    asyncio.run(main())


@pytest.mark.parametrize(("extra", "tokens"), [
    ({"max_tokens": "5"}, 5), ({"max_tokens": 5.0}, 5), ({"max_completion_tokens": "4", "n": "1"}, 4),
    ({"max_tokens": 5.5}, None), ({"max_tokens": "five"}, None), ({"max_tokens": "0"}, None),
])
def test_integer_fields_are_read_as_vllm_and_sglang_read_them(extra: dict[str, Any], tokens: int | None) -> None:
    """Both engines' request models read integers leniently (pydantic's lax int): `"max_tokens": "5"` and `5.0` are
    5, `"n": "1"` is one choice. The simulator refused all three with a 400, so a client that serialises numbers as
    strings or floats failed on the simulator and ran on the engine; what is no integer is still a 400."""
    async def main() -> None:
        async with serving() as (url, server), aiohttp.ClientSession() as http:
            body = {"model": "sim-model", "messages": [{"role": "user", "content": "hi"}], **extra}
            async with http.post(f"{url}/v1/chat/completions", json=body) as r:
                doc = await r.json()
                if tokens is None:
                    assert r.status == 400 and "max_tokens must be a positive integer" in doc["message"]
                    assert not server.core.running and not server.core.waiting
                else:
                    assert r.status == 200, doc
                    assert doc["usage"]["completion_tokens"] == tokens and len(doc["choices"]) == 1

    asyncio.run(main())


def test_a_request_beyond_the_served_context_is_a_400_and_v1_models_says_the_context() -> None:
    """As vLLM and SGLang answer it: the context length (not the KV pool) bounds prompt + max_tokens, and a client
    reads the refusal as a context overflow."""
    from llmsweep.client.config import RunOptions

    async def main() -> None:
        async with serving(context_length=600) as (url, _), aiohttp.ClientSession() as http:
            async with http.get(f"{url}/v1/models") as resp:
                assert (await resp.json())["data"][0]["max_model_len"] == 600
            body = {"model": "sim-model", "prompt": list(range(500)), "max_tokens": 100}
            async with http.post(f"{url}/v1/completions", json=body) as resp:
                assert resp.status == 200
            async with http.post(f"{url}/v1/completions", json={**body, "max_tokens": 101}) as resp:
                assert resp.status == 400
                message = (await resp.json())["error"]["message"]
            assert "maximum context length is 600 tokens" in message
            patterns = RunOptions.model_fields["context_overflow_patterns"].default
            assert any(p in message.lower() for p in patterns)

    asyncio.run(main())


@pytest.mark.parametrize(("config", "served"), [
    ({"kv_capacity_tokens": 1000, "block_size": 16}, 992 - 1),  # whole blocks, less a decode step's token
    ({"kv_capacity_tokens": 1000, "block_size": 16,  # and the drafts of a verify step
      "spec": SpecDecodeConfig(k=3, acceptance_length=2.5)}, 992 - 4),
    ({"kv_capacity_tokens": 1000, "block_size": 16, "context_length": 600}, 600),  # the context flag, within the pool
    ({"kv_capacity_tokens": 1000, "block_size": 16, "context_length": 4000}, 992 - 1),  # past it: the pool's
])
def test_v1_models_says_the_longest_request_the_server_takes(config: dict[str, Any], served: int) -> None:
    """`/v1/models`' `max_model_len` is the longest prompt + output the simulator takes, exactly: without a context
    flag it reported the KV pool (992 tokens here), and a request of 992 was refused, the pool keeping a step's
    lookahead (one token, and a verify step's drafts). A request of exactly the reported context is served (its
    default max_tokens fills the context too); one token more is a 400 naming the same length."""
    async def main() -> None:
        async with serving(**config) as (url, _), aiohttp.ClientSession() as http:
            async with http.get(f"{url}/v1/models") as resp:
                reported = (await resp.json())["data"][0]["max_model_len"]
            assert reported == served
            body = {"model": "sim-model", "prompt": list(range(reported - 10)), "max_tokens": 10}
            async with http.post(f"{url}/v1/completions", json=body) as resp:
                assert resp.status == 200, await resp.text()
                assert (await resp.json())["usage"]["completion_tokens"] == 10
            async with http.post(f"{url}/v1/completions", json={"model": "sim-model", "prompt": list(range(100))}) \
                    as resp:  # no max_tokens: it generates into the room the prompt leaves, at most 256
                assert (await resp.json())["usage"]["completion_tokens"] == min(256, reported - 100)
            async with http.post(f"{url}/v1/completions", json={**body, "max_tokens": 11}) as resp:
                assert resp.status == 400
                message = (await resp.json())["error"]["message"]
            assert f"maximum context length is {reported} tokens" in message, message

    asyncio.run(main())
    assert EngineConfig(**{**FAST, **config}).sim_config().served_context() == served  # the one function says it


def test_a_request_without_max_tokens_generates_into_the_room_its_prompt_leaves_in_the_context() -> None:
    """vLLM gives a request that names no max_tokens `max_model_len - prompt` tokens and SGLang clamps it to its
    longest request: neither refuses it for a default the client never asked for. The simulator added its default
    256 and answered a 500-token prompt in a 600-token context with a 400 "you requested 756 tokens (... 256 in the
    completion)", which a client counts as a context overflow; it now generates the 100 tokens left. A prompt that
    leaves no room is still refused as too long."""
    async def main() -> None:
        async with serving(context_length=600) as (url, _), aiohttp.ClientSession() as http:
            for prompt, expected in ((500, 100), (200, 256)):
                body = {"model": "sim-model", "prompt": list(range(prompt))}
                async with http.post(f"{url}/v1/completions", json=body) as resp:
                    assert resp.status == 200, await resp.text()
                    assert (await resp.json())["usage"]["completion_tokens"] == expected
            async with http.post(f"{url}/v1/chat/completions", json={
                    "model": "sim-model", "messages": [{"role": "user", "content": " ".join(["w"] * 590)}],
                    "stream": True, "stream_options": {"include_usage": True}}) as resp:
                events, _ = await sse_events(resp)
            usage = events[-2]["usage"]
            assert usage["prompt_tokens"] + usage["completion_tokens"] == 600
            async with http.post(f"{url}/v1/completions", json={"model": "sim-model", "prompt": list(range(600))}) \
                    as resp:
                assert resp.status == 400
                assert "maximum context length is 600 tokens" in (await resp.json())["error"]["message"]

    asyncio.run(main())


def test_the_front_end_latency_grows_with_the_requests_the_server_serves() -> None:
    """`Efficiency.frontend_per_request_s` on the live server, as in virtual time: a request alone waits
    `frontend_s` before the engine, one beside two others twice the per-request latency more."""
    body = {"model": "sim-model", "prompt": "a b c d", "max_tokens": 2}

    async def timed(http: aiohttp.ClientSession, url: str) -> float:
        t0 = asyncio.get_running_loop().time()
        async with http.post(f"{url}/v1/completions", json=body) as resp:
            assert resp.status == 200
            await resp.read()
        return asyncio.get_running_loop().time() - t0

    async def main() -> None:
        async with serving(timing="roofline", kv_capacity_tokens=4096,
                           efficiency={"frontend_s": 0.001, "frontend_per_request_s": 0.2}) as (url, _), \
                aiohttp.ClientSession() as http:
            alone = await timed(http, url)
            together = await asyncio.gather(*(timed(http, url) for _ in range(3)))
            again = await timed(http, url)  # the answered ones have left the count
        assert alone < 0.15 and again < 0.15
        assert max(together) >= 0.4  # the last one in saw the two before it in flight

    asyncio.run(main())
