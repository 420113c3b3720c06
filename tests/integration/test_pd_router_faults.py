"""llmsweep's PD router when a worker fails, over loopback against worker processes of their own (`llmsweep sim
serve --role prefill|decode`, and a stand-in worker where the simulator cannot fail that way): every failure reaches
the client as a failure that names the worker, never as a success and never as a silently cut answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Self

import aiohttp
import pytest
from aiohttp import web

from llmsweep.client.sse import parse_stream
from llmsweep.sim.router import PDRouter, start_router

_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@contextlib.contextmanager
def sim_worker(role: str, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`llmsweep sim serve --role ROLE` as a process of its own on a free loopback port: (process, URL)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--role", role, "--port", "0",
                             "--model", "llama-1b", "--timing", "constant", "--ttft-ms", "5", "--itl-ms", "10",
                             *extra], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if found := _LISTENING.search(line):
                break
        else:
            raise AssertionError(f"the {role} worker exited with {proc.wait()} before it listened")
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # drained: a full pipe would stall it
        yield proc, f"http://127.0.0.1:{found.group(1)}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@contextlib.asynccontextmanager
async def router(prefill: list[str], decode: list[str]) -> AsyncIterator[str]:
    """llmsweep's router with the simulator's protocol in front of the workers, on a free loopback port."""
    runner, port = await start_router(PDRouter(prefill, decode))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def request(stream: bool, **extra: Any) -> dict[str, Any]:
    return {"model": "llama-1b", "prompt": "a prompt for two workers", "max_tokens": 2000, "stream": stream,
            "ignore_eos": True, **extra}


def test_a_decode_worker_killed_mid_stream_ends_the_clients_stream_with_an_error_that_names_it() -> None:
    """The decode worker dies while it streams: the client's stream ends with an error event naming that worker
    (what a client records as the request's error), after the tokens it had; it used to be cut with nothing said,
    so the client's record said only that its connection was lost."""
    async def main(prefill: str, decode: str, proc: subprocess.Popen[str]) -> None:
        async with router([prefill], [decode]) as url, aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", json=request(True)) as resp:
                assert resp.status == 200
                reads: list[tuple[float, bytes]] = []
                while (chunk := await resp.content.readany()):
                    reads.append((0.0, chunk))
                    if len(reads) == 3:  # tokens are flowing: the worker dies
                        proc.send_signal(signal.SIGKILL)
            parsed = parse_stream(reads)
            assert parsed.chunk_times, "the tokens relayed before the worker died reach the client"
            assert parsed.stream_error is not None and decode in parsed.stream_error, parsed.stream_error
            assert "failed mid-stream" in parsed.stream_error
            assert reads[-1][1].endswith(b"data: [DONE]\n\n")
            # the next request finds the worker gone before any answer: a 502 naming it
            async with http.post(f"{url}/v1/completions", json=request(False)) as resp:
                assert resp.status == 502 and decode in (await resp.json())["error"]["message"]

    with sim_worker("prefill") as (_p, prefill), sim_worker("decode") as (proc, decode):
        asyncio.run(main(prefill, decode, proc))


def test_a_workers_refusal_reaches_the_client_with_its_status_and_words_naming_the_worker() -> None:
    """A prefill worker's refusal (an unknown model) and a decode worker's (a prompt past its context) keep their
    status and their words (a client matches a context overflow by them), and say which worker refused."""
    async def main(prefill: str, decode: str) -> None:
        long_prompt = " ".join(["w"] * 150)
        async with router([prefill], [decode]) as url, aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", json=request(False, prompt=long_prompt, max_tokens=5)) as r:
                doc = await r.json()
            assert r.status == 400, doc
            assert doc["error"]["message"].startswith(f"decode worker {decode}: ")
            assert "maximum context length is 100 tokens" in doc["error"]["message"]
            assert doc["message"] == doc["error"]["message"]  # SGLang's top-level message as well
            async with http.post(f"{url}/v1/completions", json=request(True, model="nope")) as r:
                doc = await r.json()
            assert r.status == 404 and doc["error"]["message"].startswith(f"prefill worker {prefill}: ")
            assert "`nope` does not exist" in doc["error"]["message"]

    with sim_worker("prefill") as (_p, prefill), sim_worker("decode", "--context-length", "100") as (_d, decode):
        asyncio.run(main(prefill, decode))


class StandIn:
    """A worker that fails as the simulator cannot: a 500 with a plain-text body, a whole answer cut inside it, or a
    stream cut inside an event."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def completions(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        if self.mode == "500":
            return web.Response(status=500, text="500 Internal Server Error\n\nServer got itself in trouble")
        if self.mode == "cut-event":  # streams one event and half of the next, then dies
            out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await out.prepare(request)
            await out.write(b'data: {"id": "c", "choices": [{"index": 0, "text": "a"}]}\n\ndata: {"id": "c", "cho')
            await asyncio.sleep(0.05)
        else:
            out = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "4000"})
            await out.prepare(request)
            await out.write(b'{"id": "cmpl-cut", "choices": [{"text": "half an ans')
        assert request.transport is not None
        request.transport.abort()  # dies inside its answer
        return out

    async def __aenter__(self) -> StandIn:
        app = web.Application()
        app.add_routes([web.post("/v1/completions", self.completions)])
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def test_a_decode_workers_5xx_with_a_plain_text_body_is_the_openai_error_body_naming_the_worker() -> None:
    async def main(prefill: str) -> None:
        async with StandIn("500") as broken, router([prefill], [broken.url]) as url, \
                aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", json=request(True, max_tokens=3)) as r:
                doc = await r.json()
            assert r.status == 500 and doc["error"]["type"] == "InternalServerError"
            assert doc["error"]["message"] == (f"decode worker {broken.url} answered HTTP 500: 500 Internal Server "
                                               "Error\n\nServer got itself in trouble")

    with sim_worker("prefill") as (_p, prefill):
        asyncio.run(main(prefill))


def test_a_whole_answer_the_decode_worker_cuts_inside_it_is_a_502_naming_the_worker() -> None:
    """A whole (not streamed) answer is read whole before the client gets it: it was relayed as it arrived under the
    worker's 200, so the client got a 200 whose body ended early, and nothing said which worker cut it."""
    async def main(prefill: str) -> None:
        async with StandIn("cut") as cut, router([prefill], [cut.url]) as url, aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", json=request(False, max_tokens=3)) as r:
                doc = await r.json()
            assert r.status == 502, doc
            assert doc["error"]["message"].startswith(f"decode worker {cut.url} failed")

    with sim_worker("prefill") as (_p, prefill):
        asyncio.run(main(prefill))


def test_a_stream_the_decode_worker_cuts_inside_an_event_is_cut_for_the_client_too_never_ended_cleanly() -> None:
    """Inside an event nothing can be added that a client would read: the client's connection is cut as the worker's
    was (a failure it records), not ended as if the answer were whole, and the router does not hang on it."""
    async def main(prefill: str) -> None:
        async with StandIn("cut-event") as cut, router([prefill], [cut.url]) as url, aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", json=request(True, max_tokens=3)) as r:
                assert r.status == 200
                with pytest.raises(aiohttp.ClientPayloadError):
                    await asyncio.wait_for(r.read(), 10)
            async with http.get(f"{url}/version") as r:  # the router serves on
                assert r.status == 200

    with sim_worker("prefill") as (_p, prefill):
        asyncio.run(main(prefill))


def test_a_streamed_request_waiting_for_its_prefill_gets_its_headers_at_once_a_later_failure_in_the_stream() -> None:
    """An engine answers a streamed request it accepts at once (status, SSE headers) and sends its tokens once its
    prefill is done; a client then waits with no stall deadline (llmsweep's does). Behind the router the headers
    waited for the whole prefill leg, so a request whose prefill outlasted the client's stall timeout failed through
    the router only. Now they go out after `headers_after_s`; a failure after that (here the decode worker's
    context-overflow refusal) is the stream's error event naming the worker, with the refusal's words."""
    async def main(prefill: str, decode: str) -> None:
        async with aiohttp.ClientSession() as http:
            runner, port = await start_router(PDRouter([prefill], [decode], headers_after_s=0.3))
            url = f"http://127.0.0.1:{port}"
            try:
                began = loop_time()
                async with http.post(f"{url}/v1/completions", json=request(True, max_tokens=4)) as r:
                    headers_at = loop_time() - began
                    assert r.status == 200 and r.content_type == "text/event-stream"
                    first = await r.content.readany()
                    first_at = loop_time() - began
                    rest = first + await r.read()
                assert headers_at < 2.0 and first_at >= 2.9, (headers_at, first_at)  # the prefill step: 3 s
                parsed = parse_stream([(0.0, rest)])
                assert parsed.stream_error is None and parsed.completion_tokens is None and parsed.chunk_times
                long_prompt = " ".join(["w"] * 150)
                async with http.post(f"{url}/v1/completions", json=request(True, prompt=long_prompt, max_tokens=5)) \
                        as r:
                    assert r.status == 200  # sent before the decode worker refused
                    body = await r.read()
                error = parse_stream([(0.0, body)]).stream_error
                assert error is not None and error.startswith(f"decode worker {decode}: ")
                assert "maximum context length is 100 tokens" in error and body.endswith(b"data: [DONE]\n\n")
            finally:
                await runner.cleanup()

    with sim_worker("prefill", "--ttft-ms", "3000") as (_p, prefill), \
            sim_worker("decode", "--context-length", "100") as (_d, decode):
        asyncio.run(main(prefill, decode))


def loop_time() -> float:
    return asyncio.get_running_loop().time()


class RawWorker:
    """A worker on a raw asyncio server (its `serve` handles each connection), started and closed as an async
    context: the HTTP it speaks is written by hand, to misbehave exactly as the test needs."""

    server: asyncio.Server | None = None
    url = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


class IdleClosingWorker(RawWorker):
    """A worker (both roles, the simulator's protocol) that closes a keep-alive connection idle for `idle_close_s`,
    as uvicorn closes one idle for its `timeout_keep_alive` (vLLM's and SGLang's: 5 s), at the worst moment: just as
    the next request on it arrives, which it then never reads (made deterministic: any request that arrives on a
    connection idle that long is closed unanswered, as if the close had crossed it on the wire). `dying_after`: once
    it has answered that many requests, it closes every connection a request arrives on, answering none (a worker
    that is failing). `close_how`: "fin", a clean close (what the router sees when the worker's close reached it
    first), or "reset" (a close with the request unread: the worker's kernel resets the connection). `working_s`: a
    dying worker reads each request whole and closes its connection that long after (it died working on it)."""

    def __init__(self, idle_close_s: float, dying_after: int | None = None, close_how: str = "fin",
                 working_s: float | None = None) -> None:
        self.idle_close_s, self.dying_after, self.close_how = idle_close_s, dying_after, close_how
        self.working_s = working_s
        self.received = 0  # requests read whole
        self.connections = 0
        self.answered = 0
        self.closed_unanswered = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                dying = self.dying_after is not None and self.answered >= self.dying_after
                if dying and self.working_s is not None:
                    length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
                    await reader.readexactly(length)
                    self.received += 1
                    self.closed_unanswered += 1
                    await asyncio.sleep(self.working_s)
                    return
                if dying or (self.answered and loop.time() - idle_since >= self.idle_close_s):
                    self.closed_unanswered += 1
                    if self.close_how == "reset":
                        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                                   struct.pack("ii", 1, 0))
                    return
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
                body = json.loads(await reader.readexactly(length))
                self.received += 1
                answer = json.dumps({"id": "c", "object": "text_completion", "model": body["model"],
                                     "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
                                     "usage": {"prompt_tokens": 5, "completion_tokens": body["max_tokens"],
                                               "total_tokens": 5 + body["max_tokens"]}}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(answer)).encode() + b"\r\n\r\n" + answer)
                await writer.drain()
                self.answered += 1
                idle_since = loop.time()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()



@pytest.mark.parametrize("close_how", ["fin", "reset"])
def test_a_pooled_connection_the_worker_closes_as_a_request_arrives_is_retried_once_on_a_fresh_one(
        close_how: str) -> None:
    """A worker closes a keep-alive connection idle past its timeout just as the router's next request arrives on it:
    nothing of an answer came and the worker never read the request, so the router sends it again once on a new
    connection and the client gets its answer. It used to be a 502 (`Server disconnected`), a failed request in the
    client's records for a race between two idle timers; aiohttp retries it for idempotent methods only."""
    async def main() -> None:
        async with IdleClosingWorker(idle_close_s=0.3, close_how=close_how) as worker, \
                router([worker.url], [worker.url]) as url, aiohttp.ClientSession() as http:
            for _ in range(2):
                async with http.post(f"{url}/v1/completions", json=request(False, max_tokens=3)) as r:
                    doc = await r.json()
                assert r.status == 200, doc
                assert doc["choices"][0]["text"] == "x"
                await asyncio.sleep(0.5)  # idle past the worker's keep-alive, within the router's
            assert worker.closed_unanswered == 1 and worker.answered == 4, vars(worker)
            # counted against the worker and its pool (the second request's prefill leg went out on the connection
            # idle past the worker's keep-alive), which a run reads back beside `abandoned`: nothing said how often
            # a worker closed connections the router still held
            async with http.get(f"{url}/version") as r:
                doc = await r.json()
            assert doc["retried"] == {"prefill": {worker.url: 1}}, doc

    asyncio.run(main())


def test_a_worker_that_closes_connections_unanswered_is_still_a_502_naming_it_after_one_retry() -> None:
    """The retry is one, on a new connection, and only for a pooled one: a worker that closes the new connection too
    is failing, and the client gets the 502 naming it, never a success and never a loop of retries."""
    async def main() -> None:
        async with IdleClosingWorker(idle_close_s=60.0, dying_after=1) as worker, \
                router([worker.url], [worker.url]) as url, aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", json=request(False, max_tokens=3)) as r:
                doc = await r.json()
            # the prefill leg is answered; the decode leg (its pooled connection, then a new one) is not
            assert r.status == 502, doc
            # both sends' failures, as the client names them: the 502 said the second's only (the first went to an
            # info log)
            assert doc["error"]["message"] == (
                f"decode worker {worker.url} failed: Server disconnected (its second send, on a new connection; the "
                "first went out on a pooled connection the worker closed unanswered: ServerDisconnectedError: Server "
                "disconnected)")
            assert (worker.answered, worker.closed_unanswered, worker.connections) == (1, 2, 2), vars(worker)
            async with http.get(f"{url}/version") as r:
                assert (await r.json())["retried"] == {"decode": {worker.url: 1}}  # the one retry, counted once
            async with http.post(f"{url}/v1/completions", json=request(False, max_tokens=3)) as r:
                doc = await r.json()
            # a new connection's failure is not retried: the prefill leg fails at once, named
            assert r.status == 502 and doc["error"]["message"].startswith(f"prefill worker {worker.url} failed")
            assert (worker.closed_unanswered, worker.connections) == (3, 3), vars(worker)

    asyncio.run(main())


@pytest.mark.parametrize("close_how", ["fin", "reset"])
def test_a_worker_that_drops_a_pooled_connection_while_working_on_a_leg_is_a_502_never_sent_again(
        close_how: str) -> None:
    """The decode worker read its leg whole on the pooled connection, worked on it 2 s and dropped the connection with
    nothing of an answer: not the keep-alive race (which happens at the send, within `KEEPALIVE_RACE_S` of it), so the
    client gets the 502 naming the worker, the leg sent once and nothing counted as `retried`. It used to be sent
    again on a new connection: the worker ran the leg twice and /version counted a lost request saved."""
    async def main() -> None:
        async with IdleClosingWorker(idle_close_s=60.0, dying_after=1, close_how=close_how, working_s=2.0) as worker, \
                router([worker.url], [worker.url]) as url, aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", json=request(False, max_tokens=3)) as r:
                doc = await r.json()
            assert r.status == 502, doc
            assert doc["error"]["message"].startswith(f"decode worker {worker.url} failed: "), doc
            # the prefill leg answered, the decode leg read once on the prefill's pooled connection, never again
            assert (worker.answered, worker.received, worker.connections) == (1, 2, 1), vars(worker)
            async with http.get(f"{url}/version") as r:
                assert (await r.json())["retried"] == {}

    asyncio.run(main())


def test_the_router_reuses_no_connection_idle_for_longer_than_its_keep_alive() -> None:
    """The router keeps an idle connection to a worker for `POOLED_KEEPALIVE_S`, less than an engine's server keeps
    one (uvicorn's `timeout_keep_alive`, vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE: 5 s): a request after a longer pause
    goes out on a new connection, never on one a worker with a longer timeout than the router's would be closing.
    aiohttp's default kept them 15 s, so a request after a 5 s pause could cross the worker's close."""
    from llmsweep.engine_ids import POOLED_KEEPALIVE_S

    async def main() -> None:
        async with IdleClosingWorker(idle_close_s=POOLED_KEEPALIVE_S + 0.2) as worker, \
                router([worker.url], [worker.url]) as url, aiohttp.ClientSession() as http:
            for _ in range(2):
                async with http.post(f"{url}/v1/completions", json=request(False, max_tokens=3)) as r:
                    assert r.status == 200, await r.text()
                await asyncio.sleep(POOLED_KEEPALIVE_S + 0.4)
            # each request's legs: one connection, reused from prefill to decode; none sent on a stale one
            assert (worker.answered, worker.closed_unanswered, worker.connections) == (4, 0, 2), vars(worker)

    asyncio.run(main())


class HangingWorker(RawWorker):
    """A worker that accepts a request, reads it and never answers; `dropped` counts the requests whose connection
    the router then closed (it stopped waiting and dropped the request)."""

    def __init__(self) -> None:
        self.received = 0
        self.dropped = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            self.received += 1
            while await reader.read(1 << 16):  # no answer, ever: until the router closes the connection
                pass
            self.dropped += 1
        writer.close()



@pytest.mark.parametrize(("hung", "stream"), [("decode", False), ("decode", True), ("prefill", False)])
def test_a_worker_that_never_answers_is_dropped_when_the_client_gives_up_and_version_names_it(
        hung: str, stream: bool) -> None:
    """A worker accepts a request and never answers; the client's timeout ends its request. The router stops waiting
    on the worker, drops the worker's request (closes its connection), and counts it against that worker in its
    `/version` (`abandoned`, by pool and URL), which a run reads back with the router's other counts: nothing used to
    say which worker hung, and the client's record says only that it timed out."""
    async def main() -> None:
        async with HangingWorker() as hanging, IdleClosingWorker(idle_close_s=60.0) as ok:
            prefill, decode = (hanging.url, ok.url) if hung == "prefill" else (ok.url, hanging.url)
            async with router([prefill], [decode]) as url, aiohttp.ClientSession() as http:
                with pytest.raises(asyncio.TimeoutError):
                    async with http.post(f"{url}/v1/completions", json=request(stream, max_tokens=3),
                                         timeout=aiohttp.ClientTimeout(total=1.5)) as r:
                        await r.read()  # (a streamed request's headers come after 1 s: its body never does)
                for _ in range(100):
                    if hanging.dropped:
                        break
                    await asyncio.sleep(0.05)
                assert (hanging.received, hanging.dropped) == (1, 1)
                async with http.get(f"{url}/version") as r:
                    doc = await r.json()
                assert doc["abandoned"] == {hung: {hanging.url: 1}}, doc

    asyncio.run(main())


class StallingWorker(RawWorker):
    """A worker (both roles, the simulator's protocol) that answers the prefill leg whole, then streams the decode
    leg's first events and sends nothing more, ever: a worker stalled mid-stream, its connection open. `dropped`:
    decode legs whose connection the router closed (it stopped waiting and dropped the request)."""

    def __init__(self) -> None:
        self.dropped = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
                body = json.loads(await reader.readexactly(length))
                if not body.get("stream"):  # the prefill leg: a whole answer
                    answer = json.dumps({"id": "c", "object": "text_completion", "model": body["model"],
                                         "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
                                         "usage": {"prompt_tokens": 5, "completion_tokens": 1,
                                                   "total_tokens": 6}}).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(answer)).encode() + b"\r\n\r\n" + answer)
                    await writer.drain()
                    continue
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                             b"\r\n")
                for _ in range(3):
                    event = b'data: {"id": "c", "choices": [{"index": 0, "text": "a"}]}\n\n'
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                while await reader.read(1 << 16):  # then nothing more, until the router closes the connection
                    pass
                self.dropped += 1
                return
        writer.close()


def test_a_decode_worker_that_stalls_mid_stream_is_counted_against_it_when_the_client_gives_up() -> None:
    """The decode worker streams three events and then sends nothing more; the client's timeout ends its request.
    The router drops the worker's request and counts it in `/version`'s `abandoned` against that worker, as it counts
    one that never began its answer: a stall mid-stream went uncounted (the worker had begun its answer), so nothing
    said which worker stopped."""
    async def main() -> None:
        async with StallingWorker() as stalling:
            runner, port = await start_router(PDRouter([stalling.url], [stalling.url], stalled_after_s=0.5))
            url = f"http://127.0.0.1:{port}"
            try:
                async with aiohttp.ClientSession() as http:
                    with pytest.raises(asyncio.TimeoutError):
                        async with http.post(f"{url}/v1/completions", json=request(True, max_tokens=3),
                                             timeout=aiohttp.ClientTimeout(total=1.5)) as r:
                            assert r.status == 200
                            assert await r.content.readany()  # the events it sent reach the client
                            await r.read()
                    for _ in range(100):
                        if stalling.dropped:
                            break
                        await asyncio.sleep(0.05)
                    assert stalling.dropped == 1
                    async with http.get(f"{url}/version") as r:
                        doc = await r.json()
                    assert doc["abandoned"] == {"decode": {stalling.url: 1}}, doc
            finally:
                await runner.cleanup()

    asyncio.run(main())


def test_a_client_that_leaves_while_the_tokens_flow_is_counted_against_no_worker() -> None:
    """A client that goes away mid-stream while the decode worker's tokens still flow (a run's end cancelling what is
    in flight) is not the worker's doing: `abandoned` stays empty, so it names only workers that hung or stalled."""
    async def main(prefill: str, decode: str) -> None:
        runner, port = await start_router(PDRouter([prefill], [decode], stalled_after_s=0.5))
        url = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as http:
                async with http.post(f"{url}/v1/completions", json=request(True)) as r:
                    for _ in range(5):
                        assert await r.content.readany()
                    r.close()  # gone mid-stream, tokens flowing (10 ms apart)
                await asyncio.sleep(1.0)
                async with http.get(f"{url}/version") as r:
                    doc = await r.json()
                assert doc["routed"] == 1 and doc["abandoned"] == {}, doc
        finally:
            await runner.cleanup()

    with sim_worker("prefill") as (_p, prefill), sim_worker("decode") as (_d, decode):
        asyncio.run(main(prefill, decode))


@pytest.mark.parametrize("hung", ["prefill", "decode-stall"])
def test_the_clients_record_of_a_worker_that_hangs_names_the_worker_and_is_a_timeout(hung: str,
                                                                                       tmp_path: Path) -> None:
    """llmsweep's client says its limits in each request (`engine_ids.TIMEOUT_HEADER`, `STALL_HEADER`); the router
    gives up on the worker it waits on a little before them and answers 504 naming it (here in the stream it opened:
    an error event). The client's record is the `timeout` it always was, now with the words that name the worker: it
    used to time out by itself, and its record (and the run's failures) could not say which worker hung. The request
    is counted against the worker in `/version`'s `abandoned`."""
    from support.workloads import SimpleWorkload

    from llmsweep.client import Endpoint, RunOptions, run_benchmark_async

    async def main() -> None:
        async with HangingWorker() as hanging, IdleClosingWorker(idle_close_s=60.0) as ok, \
                StallingWorker() as stalling:
            prefill, decode = (hanging.url, ok.url) if hung == "prefill" else (stalling.url, stalling.url)
            named = f"prefill worker {hanging.url}" if hung == "prefill" else f"decode worker {stalling.url}"
            async with router([prefill], [decode]) as url:
                began = loop_time()
                res = await run_benchmark_async(
                    SimpleWorkload(max_tokens=8), Endpoint(base_url=url, model="m", metrics_url=""),
                    RunOptions(concurrency=1, num_requests=1, timeout_s=4, stall_timeout_s=2,
                               max_failure_ratio=1.0), tmp_path)
                took = loop_time() - began
                (record,) = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
                assert record["error_class"] == "timeout", record
                assert named in record["error"], record["error"]
                assert ("stalled mid-stream" if hung == "decode-stall" else "sent nothing of its answer") \
                    in record["error"], record["error"]
                assert res.summary.requests.error_categories == {"timeout": 1}
                assert took < 4, took  # the router's answer came before the client's own timeout
                async with aiohttp.ClientSession() as http, http.get(f"{url}/version") as r:
                    doc = await r.json()
                pool, worker = ("prefill", hanging.url) if hung == "prefill" else ("decode", stalling.url)
                assert doc["abandoned"] == {pool: {worker: 1}}, doc

    asyncio.run(main())


def test_a_whole_answer_a_worker_never_begins_is_a_504_naming_it_before_the_clients_timeout() -> None:
    """A request for a whole (not streamed) answer that says the client's timeout: the router gives up on the hung
    decode worker a little before it (`router.GIVE_UP_LEAD_S`, at most a tenth) and answers 504 naming the worker; a
    request that says no limit, or a malformed one, waits as it always did (the client's own timeout ends it)."""
    from llmsweep.engine_ids import TIMEOUT_HEADER

    async def main() -> None:
        async with HangingWorker() as hanging, IdleClosingWorker(idle_close_s=60.0) as ok, \
                router([ok.url], [hanging.url]) as url, aiohttp.ClientSession() as http:
            began = loop_time()
            async with http.post(f"{url}/v1/completions", json=request(False, max_tokens=3),
                                 headers={TIMEOUT_HEADER: "2"}) as r:
                doc = await r.json()
            took = loop_time() - began
            assert r.status == 504 and doc["error"]["type"] == "GatewayTimeoutError", doc
            said = doc["error"]["message"]
            assert said.startswith(f"decode worker {hanging.url} sent nothing of its answer in "), said
            assert 1.7 < took < 2.0, took
            with pytest.raises(asyncio.TimeoutError):
                async with http.post(f"{url}/v1/completions", json=request(False, max_tokens=3),
                                     headers={TIMEOUT_HEADER: "soon"}, timeout=aiohttp.ClientTimeout(total=2.5)) as r:
                    await r.read()

    asyncio.run(main())
