"""scripts/gpu smoke_load.py and spec_al.py, checked on the CPU before they cost GPU time.

A tiny OpenAI-style streaming server stands in for vLLM: the smoke load must report what it streamed and fail when a
request stops before max_tokens (EOS not ignored); spec_al.py must compute 1 + Δaccepted/Δdrafts from two scrapes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

GPU = Path(__file__).resolve().parents[3] / "scripts" / "gpu"


def make_app(stop_after: int | None) -> web.Application:
    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = body["max_tokens"] if stop_after is None else min(body["max_tokens"], stop_after)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(n):
            await resp.write(f"data: {json.dumps({'choices': [{'text': f' t{i}'}]})}\n\n".encode())
            await asyncio.sleep(0.001)
        usage = {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": n}}
        await resp.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    return app


def serve(stop_after: int | None) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(stop_after))
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.SockSite(runner, sock).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@pytest.fixture()
def good_server() -> Iterator[str]:
    yield from serve(None)


@pytest.fixture()
def eos_server() -> Iterator[str]:
    yield from serve(3)


def smoke(base: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GPU / "smoke_load.py"), "--base-url", base, "--model", "m",
                           "--concurrency", "1,4", "--requests-per-level", "2", "--max-tokens", "12",
                           "--prompt-words", "5", "--out", str(out)], capture_output=True, text=True, timeout=60)


def test_smoke_load_measures_every_level(good_server: str, tmp_path: Path) -> None:
    run = smoke(good_server, tmp_path / "load.json")
    assert run.returncode == 0, run.stderr
    rows = json.loads((tmp_path / "load.json").read_text())
    assert [(r["concurrency"], r["requests"], r["ok"], r["short"]) for r in rows] == [(1, 2, 2, 0), (4, 8, 8, 0)]
    assert all(r["ttft_ms_mean"] > 0 and r["itl_ms_mean"] > 0 and r["output_tok_s"] > 0 for r in rows)


def test_smoke_load_fails_when_requests_stop_early(eos_server: str, tmp_path: Path) -> None:
    run = smoke(eos_server, tmp_path / "load.json")
    assert run.returncode == 1
    assert all(r["short"] == r["requests"] for r in json.loads((tmp_path / "load.json").read_text()))


def test_spec_al_reads_the_window_between_scrapes(tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client")
    metric = (
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {a}\n'
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        'vllm:spec_decode_num_drafts_total{{engine="0"}} {d}\n'
    )
    (tmp_path / "before.txt").write_text(metric.format(a=100.0, d=50.0))
    (tmp_path / "after.txt").write_text(metric.format(a=100.0 + 2895, d=50.0 + 1205))
    run = subprocess.run([sys.executable, str(GPU / "spec_al.py"), str(tmp_path / "before.txt"),
                          str(tmp_path / "after.txt")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["realised_acceptance_length"] == pytest.approx(1 + 2895 / 1205)
