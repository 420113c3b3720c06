"""llmsweep's PD router when a worker fails, over loopback against worker processes of their own (`llmsweep sim
serve --role prefill|decode`, and a stand-in worker where the simulator cannot fail that way): a worker's refusal or
5xx reaches the client with its status, naming the worker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
from aiohttp import web

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
    """A worker that fails as the simulator cannot: a 500 with a plain-text body."""

    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def completions(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        return web.Response(status=500, text="500 Internal Server Error\n\nServer got itself in trouble")

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
        async with StandIn() as broken, router([prefill], [broken.url]) as url, \
                aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/completions", json=request(True, max_tokens=3)) as r:
                doc = await r.json()
            assert r.status == 500 and doc["error"]["type"] == "InternalServerError"
            assert doc["error"]["message"] == (f"decode worker {broken.url} answered HTTP 500: 500 Internal Server "
                                               "Error\n\nServer got itself in trouble")

    with sim_worker("prefill") as (_p, prefill):
        asyncio.run(main(prefill))
