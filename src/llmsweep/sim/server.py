"""The live simulated engine: an OpenAI-compatible aiohttp server in front of the engine core.

Endpoints: `/v1/chat/completions` and `/v1/completions` (SSE streaming and non-streaming, usage with
`prompt_tokens_details.cached_tokens`, `stream_options.include_usage`, `max_tokens` / `max_completion_tokens`,
`data: [DONE]`), `/v1/models`, `/health`, `/metrics` (SGLang and/or vLLM names; a decode worker of a disaggregated
deployment adds its KV-transfer series, `sim.roles`), `/power` (modelled GPU power, NVML units; `sim.power`).

Timing: one scheduler task advances the core. It begins a step at the engine's clock, sleeps until the step's end
and then delivers that step's tokens. While the engine stays busy the next step begins exactly where the previous one
ended (virtual time), so event-loop wake-up jitter (~1 ms) delays delivery a little but never accumulates into lost
throughput; after an idle gap, or when the loop fell more than `resync_s` behind, the clock resyncs to wall time.

Determinism: response ids, `created` and the generated text depend only on the seed and the order of requests, so
two runs of the same request sequence give byte-identical SSE bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, NamedTuple

from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from llmsweep.engine_ids import SIM
from llmsweep.http_app import error_response, json_object, node_name, start_app
from llmsweep.sim.core import EngineCore, SimRequest
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.kv import BlockHashes
from llmsweep.sim.metrics import KvTransferCollector, KvTransfers, MetricsStyle, registry_for, render
from llmsweep.sim.power import PowerModel
from llmsweep.sim.prompt import PromptEncoder
from llmsweep.sim.roles import (
    KV_CACHED_HEADER,
    KV_SOURCE_HEADER,
    KV_SOURCE_WORKER_HEADER,
    KV_TOKENS_HEADER,
    RoleConfig,
)
from llmsweep.sim.text import token_text
from llmsweep.sim.transfer import KvCost, Nic, queue_transfer

log = logging.getLogger(__name__)

CREATED = 1_700_000_000
"""Fixed `created` stamp: a wall-clock value would make two identical runs differ byte for byte."""
DEFAULT_MAX_TOKENS = 256
"""What a request that names no max_tokens generates, cut to the room its prompt leaves in the served context
(`SimServer._default_max_tokens`)."""
MAX_BODY_BYTES = 1 << 30
"""Agentic prompts reach megabytes of text; aiohttp's 1 MiB default would refuse them with 413."""

READY_LINES = {
    "sglang": "The server is fired up and ready to roll!",
    "vllm": "Application startup complete.",
}


def capacity_log_line(style: str, core: EngineCore) -> str:
    """The KV-pool line real engines log, which InferenceX's result extraction parses for the pool size (llmsweep
    reads the pool from /metrics, as the engines export it: `metrics.model.KvCache.pool_tokens`)."""
    if style == "vllm":
        return f"GPU KV cache size: {core.capacity_tokens:,} tokens"
    return (f"max_total_num_tokens={core.capacity_tokens}, chunked_prefill_size={core.config.chunked_prefill_size}, "
            f"max_running_requests={core.config.max_running_requests}, "
            f"context_len={core.config.served_context()}")


class Handed(NamedTuple):
    """What a decode worker took over with a request (`_receive_kv`)."""

    tokens: int
    """Prompt tokens whose KV arrived from the prefill worker (its header's count, at most the prompt)."""
    cached: int
    """Of the prompt, the tokens the prefill worker found in its prefix cache: the request's `cached_tokens`."""


class _Stream:
    """Per-request delivery queue: (tokens emitted, finished) tuples from the scheduler."""

    __slots__ = ("no", "queue")

    def __init__(self, no: int) -> None:
        self.queue: asyncio.Queue[tuple[int, bool]] = asyncio.Queue()
        self.no = no


class SimServer:
    """Owns the core, the scheduler task and the aiohttp application."""

    def __init__(self, config: EngineConfig, *, served_model_name: str | None = None,
                 metrics_style: MetricsStyle = "both", resync_s: float = 0.005,
                 role: RoleConfig | None = None) -> None:
        self.config = config
        self.role = role or RoleConfig()
        self.node = node_name()
        # (a copy skips validation: the decode worker's own DP-attention ranks need not divide the prefill TP)
        prefill = config.model_copy(update={"tp": self.role.prefill_tp or config.tp, "dp_attention": 1})
        self.kv_cost = KvCost.between(prefill, config)
        """Decode role: what one token's KV costs to move here (`sim.transfer`, as virtual time has it). The prefill
        workers serve the same model, KV dtype and engine, at the TP `--prefill-tp` gives."""
        self.kv_bytes_per_token = self.kv_cost.bytes_per_token
        self.nic = Nic()
        """Decode role: this worker's NICs; transfers into it queue on them (as on a virtual-time decode worker)."""
        self._arrived: list[BlockHashes] = []
        """Decode role: block hashes of prompts whose KV arrived, placed in the pool before the next step."""
        self.kv = KvTransfers()
        """Decode role: the KV hand-offs this worker took (its KV-transfer series on `/metrics`)."""
        self.core = build_core(config)
        self.model_name = served_model_name or config.model
        self.encoder = PromptEncoder(self.core.block_size)
        self.registry = registry_for(self.core, model_name=self.model_name, style=metrics_style)
        if self.role.role == "decode":
            self.registry.register(KvTransferCollector(self.kv))
        self._frontend_of = self.core.timer.frontend_latency
        self._in_flight = 0
        """Requests being served (read to response end): the load the front end's latency grows with."""
        self.power = PowerModel(self.core, hardware=config.hardware, tp=config.tp)
        self.resync_s = resync_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._t0 = 0.0
        self._requests = 0
        self.app = web.Application(client_max_size=MAX_BODY_BYTES)
        self.app.add_routes([
            web.post("/v1/chat/completions", self.chat),
            web.post("/v1/completions", self.completions),
            web.get("/v1/models", self.models),
            web.get("/health", self.health),
            web.get("/version", self.version),
            web.get("/metrics", self.metrics),
            web.get("/power", self.power_reading),
        ])
        self.app.on_startup.append(self._on_startup)
        self.app.on_cleanup.append(self._on_cleanup)

    # -- lifecycle --------------------------------------------------------------------------------------------------
    async def _on_startup(self, app: web.Application) -> None:
        self._wake = asyncio.Event()
        self._t0 = asyncio.get_running_loop().time()
        self._task = asyncio.create_task(self._scheduler(), name="sim-scheduler")

    async def _on_cleanup(self, app: web.Application) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _clock(self) -> float:
        return asyncio.get_running_loop().time() - self._t0

    async def _scheduler(self) -> None:
        core = self.core
        busy = False
        while True:
            if not core.has_work():
                busy = False
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._arrived:
                self._place_arrived()
            now = self._clock()
            start = core.now if busy and now - core.now < self.resync_s else max(now, core.now)
            end = core.begin_step(start)
            if end is None:
                busy = False
                self._wake.clear()
                await self._wake.wait()
                continue
            busy = True
            delay = end - self._clock()
            # when catching up after a late wake-up still yield once, so handlers can write the tokens already out
            await asyncio.sleep(delay if delay > 0 else 0)
            for r in core.end_step():
                stream: _Stream = r.owner
                stream.queue.put_nowait((r.last_emitted, r.finished_at is not None))

    def _place_arrived(self) -> None:
        """Put the full prompt blocks whose KV arrived from a prefill worker into the pool as cached blocks, between
        steps (never while a step holds its plan). A pool too full to take them leaves them out: the decode worker
        then recomputes that prompt, as a real one would have to."""
        pool = self.core.pool
        for hashes in self._arrived:
            blocks = pool.allocate(len(hashes))
            if blocks is None:
                log.info("decode worker: no room for %d arrived KV blocks; the prompt is recomputed", len(hashes))
                continue
            pool.register_many(blocks, hashes)
            pool.release(blocks)
        self._arrived.clear()

    async def _receive_kv(self, headers: Any, n_tokens: int, hashes: BlockHashes) -> Handed | None:
        """Decode role: wait for the KV of a prompt the router says a prefill worker computed (modelled transfer).
        Returns the prompt tokens whose KV arrived and those the prefill worker found in its prefix cache
        (`KV_CACHED_HEADER`: the request's `cached_tokens`), or None when no KV is handed over (the request is this
        worker's own)."""
        raw = headers.get(KV_TOKENS_HEADER)
        if self.role.role != "decode" or raw is None:
            return None
        tokens = min(int(raw), n_tokens) if str(raw).isdigit() else 0
        source = headers.get(KV_SOURCE_WORKER_HEADER)
        link = self.role.link_from(int(source) if source is not None and str(source).isdigit() else None)
        now = self._clock()
        # behind the transfers already queued on this worker's NICs; what it counts runs from now to the arrival
        seconds = queue_transfer(now, self.kv_cost.seconds(tokens, link), (self.nic,)) - now if tokens > 0 else 0.0
        self.kv.start()
        try:
            delay = now + seconds - self._clock()
            if delay > 0:
                await asyncio.sleep(delay)
        except BaseException:  # the request was cancelled while its KV was on the way (the NIC stays booked)
            self.kv.abandoned()
            raise
        # the modelled seconds are what this worker counts (the wake-up's jitter is not)
        self.kv.arrived(seconds, self.kv_cost.nbytes(tokens))
        full = tokens // self.core.block_size
        if full:
            self._arrived.append(hashes[:full])
        log.debug("decode worker: KV of %d tokens from %s over %s in %.4f s (queueing included)", tokens,
                  headers.get(KV_SOURCE_HEADER), link.label(), seconds)
        cached = headers.get(KV_CACHED_HEADER)
        return Handed(tokens, min(int(cached), n_tokens) if cached is not None and str(cached).isdigit() else 0)

    # -- request intake ---------------------------------------------------------------------------------------------
    async def _admit(self, body: dict[str, Any], *, chat: bool,
                     headers: Any = None) -> tuple[SimRequest, _Stream] | web.Response:
        model = body.get("model")
        if model not in (None, "", self.model_name):
            return error_response(404, f"The model `{model}` does not exist.", "NotFoundError")
        if (refusal := _unsimulated(body, chat=chat)) is not None:
            return error_response(400, refusal)
        # a null field is an absent one (as vLLM reads `max_completion_tokens or max_tokens`)
        raw = body.get("max_completion_tokens")
        if raw is None:
            raw = body.get("max_tokens")
        asked = _count(raw) if raw is not None else None
        if raw is not None and (asked is None or asked < 1):
            return error_response(400, f"max_tokens must be a positive integer, got {raw!r}")
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return error_response(400, "messages must be a non-empty list")
            if not all(isinstance(m, dict) for m in messages):
                return error_response(400, "each message must be an object with a role and content")
            if (bad := next((m for m in messages if not _content_ok(m.get("content"))), None)) is not None:
                return error_response(400, f"a message's content must be a string, null or a list of parts whose "
                                      f"text is a string, got {json.dumps(bad.get('content'))[:200]}")
            n_tokens, hashes = self.encoder.chat(messages)
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
                prompt = prompt[0]
            if isinstance(prompt, str):
                n_tokens, hashes = self.encoder.text(prompt)
            elif isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
                n_tokens, hashes = self.encoder.ids(prompt)
            else:
                return error_response(400, "prompt must be a string or a list of token ids")
        max_tokens = asked if asked is not None else self._default_max_tokens(n_tokens)
        latency = self._frontend_of(self._in_flight - 1)  # the others this front end serves meanwhile
        if latency > 0:
            await asyncio.sleep(latency)
        if self.role.role == "prefill":
            max_tokens = 1  # a prefill worker computes the prompt (and its first token) and hands the KV over
        handed = await self._receive_kv(headers, n_tokens, hashes) if headers is not None else None
        no = self._requests
        self._requests += 1
        stream = _Stream(no)
        req = self.core.new_request(n_tokens, hashes, max_tokens, owner=stream, now=self._clock())
        if req.error is not None:
            return error_response(400, req.error)
        if handed is not None:
            # KV handed over by a prefill worker: its cached tokens are the prefill side's hits, set before the
            # first admission so the engine neither reports the arrived blocks as cached nor counts this request in
            # its prefix-cache series (as `EngineCore.adopt` does for the virtual-time path, `sim.disagg`).
            req.cached_tokens = handed.cached
            self.core.counters.took_over(n_tokens, transferred=handed.tokens)
        self._wake.set()
        return req, stream

    def _default_max_tokens(self, prompt_len: int) -> int:
        """What a request that names no max_tokens generates: DEFAULT_MAX_TOKENS, cut to the room its prompt leaves in
        the context this server serves (`SimConfig.served_context`, `/v1/models`' `max_model_len`), as vLLM defaults
        to `max_model_len - prompt` and SGLang clamps to its longest request. At least 1, so a prompt that leaves no
        room is refused as too long (`EngineCore.refusal`)."""
        room = self.core.config.served_context() - prompt_len
        return max(1, min(DEFAULT_MAX_TOKENS, room))

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def _serve(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        self._in_flight += 1
        try:
            return await self._serve_one(request, chat=chat)
        finally:
            self._in_flight -= 1

    async def _serve_one(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        body = json_object(await request.read())
        if isinstance(body, web.Response):
            return body
        # checked before admission: a request refused after it was queued would run on with no one to read it
        stream_options = body.get("stream_options")
        if stream_options is not None and not isinstance(stream_options, dict):
            return error_response(400, "stream_options must be an object")
        streaming = _flag(body.get("stream"))
        if streaming is None:
            return error_response(400, f"stream must be a boolean, got {json.dumps(body.get('stream'))[:80]}")
        admitted = await self._admit(body, chat=chat, headers=request.headers)
        if isinstance(admitted, web.Response):
            return admitted
        req, stream = admitted
        try:
            if streaming:
                include_usage = bool((stream_options or {}).get("include_usage"))
                return await self._stream(request, req, stream, chat=chat, include_usage=include_usage)
            return await self._whole(req, stream, chat=chat)
        except ConnectionResetError:
            # the client went away mid-stream: free its slot and KV, as real engines abort the request
            self.core.abort(req)
            self._wake.set()
            return web.Response(status=499)
        except asyncio.CancelledError:
            self.core.abort(req)
            raise

    # -- responses --------------------------------------------------------------------------------------------------
    def _ids(self, stream: _Stream, chat: bool) -> str:
        return f"{'chatcmpl' if chat else 'cmpl'}-sim{self.config.seed}-{stream.no}"

    def _usage(self, req: SimRequest) -> dict[str, Any]:
        return {"prompt_tokens": req.prompt_len, "completion_tokens": req.generated,
                "total_tokens": req.prompt_len + req.generated,
                "prompt_tokens_details": {"cached_tokens": max(req.cached_tokens, 0)}}

    async def _whole(self, req: SimRequest, stream: _Stream, *, chat: bool) -> web.Response:
        while True:
            _, finished = await stream.queue.get()
            if finished:
                break
        text = token_text(self.config.seed, stream.no, 0, req.generated)
        if chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "logprobs": None, "finish_reason": "length"}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
            obj = "text_completion"
        payload = {"id": self._ids(stream, chat), "object": obj, "created": CREATED, "model": self.model_name,
                   "choices": [choice], "usage": self._usage(req)}
        return web.json_response(payload)

    async def _stream(self, request: web.Request, req: SimRequest, stream: _Stream, *, chat: bool,
                      include_usage: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        rid = self._ids(stream, chat)
        obj = "chat.completion.chunk" if chat else "text_completion"
        sent = 0
        dumps = json.dumps
        while True:
            n, finished = await stream.queue.get()
            text = token_text(self.config.seed, stream.no, sent, n)
            if chat:
                delta: dict[str, Any] = {"content": text}
                if sent == 0:
                    delta = {"role": "assistant", "content": text}
                choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": "length" if finished else None}
            else:
                choice = {"index": 0, "text": text, "logprobs": None,
                          "finish_reason": "length" if finished else None}
            sent += n
            chunk = {"id": rid, "object": obj, "created": CREATED, "model": self.model_name, "choices": [choice]}
            if include_usage:
                chunk["usage"] = None
            await resp.write(b"data: " + dumps(chunk).encode() + b"\n\n")
            if finished:
                break
        if include_usage:
            tail = {"id": rid, "object": obj, "created": CREATED, "model": self.model_name, "choices": [],
                    "usage": self._usage(req)}
            await resp.write(b"data: " + dumps(tail).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": self.model_name, "object": "model", "created": CREATED, "owned_by": "llmsweep-sim",
             # the longest request the engine takes (`EngineCore.refusal` refuses past it), not the KV pool
             "max_model_len": self.core.config.served_context()}]})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def version(self, request: web.Request) -> web.Response:
        """Like vLLM's `/version`, plus what a reader of a simulated result must know: is this key calibrated?"""
        from llmsweep import __version__
        from llmsweep.sim.identity import simulator_digest

        # `simulator_digest`: this process's simulator build (its code and catalogs), which a result records beside
        # its calibration (`provenance.simulator.digest`): a dev tree keeps one `version` across simulator edits.
        # `tp`: the GPUs of this engine, so a client can compute per-GPU figures without being told (`bench`).
        # `role`, `node`, `kv_transfer`: what this process serves as and where, read back into a disaggregated run's
        # provenance (the topology that ran, not the one planned); a decode worker adds how it models a transfer
        # (`kv_model`: its links, the prefill TP, the bytes per GPU and the efficiency it was launched with).
        return web.json_response({"version": __version__, "engine": SIM.id, "tp": self.config.tp, "ep": self.config.ep,
                                  "dp_attention": self.config.dp_attention,
                                  "max_running_requests": self.config.max_running_requests,
                                  "calibration": self.config.calibration_label(),
                                  "simulator_digest": simulator_digest(), "role": self.role.role,
                                  "node": self.node, "kv_transfer": self.transfer_backend(), **self.kv_model(),
                                  "kv_transfers": self.kv.transfers,
                                  "kv_transfer_seconds": round(self.kv.seconds, 6)})

    def kv_model(self) -> dict[str, Any]:
        """Decode role: how the transfer is modelled (`sim.transfer`): the link from each prefill worker, the prefill
        workers' TP, the bytes one GPU moves per token and the comm efficiency. Empty for any other role."""
        if self.role.role != "decode":
            return {}
        cost = self.kv_cost
        return {"kv_links": [link.model_dump(mode="json", exclude={"source"}) for link in self.role.links],
                "prefill_tp": cost.prefill_tp, "kv_bytes_per_token_per_gpu": cost.bytes_per_token_per_gpu,
                "kv_comm_efficiency": cost.efficiency}

    def transfer_backend(self) -> str | None:
        """The KV-transfer backend a prefill or decode role stands for, by its name alone, as `/version` says it and a
        result records it (`provenance.topology.kv_transfer`, virtual time's `DisaggConfig.transfer_backend`, a real
        engine's connector); the links it is modelled over are `kv_links`. None for any other role."""
        if self.role.role not in ("prefill", "decode"):
            return None
        return self.role.kv_transfer or "kv"

    def link_label(self) -> str | None:
        """The KV-transfer backend a role stands for; a decode worker's with the links its KV arrives over (its
        start-up log's wording)."""
        name = self.transfer_backend()
        if name is None or self.role.role != "decode":
            return name
        links = list(dict.fromkeys(link.label() for link in self.role.links))
        return f"{name} (modelled link{'s' if len(links) > 1 else ''} {'; '.join(links)})"

    def transfer_text(self) -> str:
        """Decode role: how a transfer into this worker is modelled, for its start-up log."""
        cost = self.kv_cost
        return (f"KV over {self.link_label()}: prefill TP{cost.prefill_tp} to decode TP{cost.decode_tp} moves "
                f"{cost.bytes_per_token_per_gpu:g} KV bytes per token per GPU at comm efficiency {cost.efficiency:g}; "
                "transfers queue on this worker's NICs")

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=render(self.registry), headers={"Content-Type": "text/plain; version=0.0.4"})


    async def power_reading(self, request: web.Request) -> web.Response:
        """The modelled GPU power (`sim.power`), in NVML's units, for the `sim` power sampler backend."""
        return web.json_response(self.power.read())


def _unsimulated(body: dict[str, Any], *, chat: bool) -> str | None:
    """Why the simulator refuses a request for what it cannot give (None: it can serve it). A real engine answers these
    (several choices, token log-probabilities, the prompt echoed), so serving one choice of made-up words without them
    would look like an answer while being a different request: `n` > 1 carries n times the decode load, and a client
    that reads `logprobs` (lm-eval's log-likelihood tasks) would fail on their absence or score garbage."""
    n = body.get("n")
    if n is not None and _count(n) != 1:
        return f"n = {n!r} is not simulated: the simulated engine generates one choice per request"
    logprobs = body.get("logprobs")  # chat: a flag; completions: how many per token (0: the sampled one's)
    if (logprobs is not None and logprobs is not False) or body.get("top_logprobs") \
            or body.get("prompt_logprobs") is not None:
        return "logprobs are not simulated: the simulated engine makes its text up and has no token probabilities"
    if not chat and body.get("echo"):
        return "echo is not simulated: the simulated engine does not return the prompt"
    return None


_BOOL = TypeAdapter(bool)
_INT = TypeAdapter(int)


def _count(value: Any) -> int | None:
    """An integer field as vLLM's and SGLang's request models read it (pydantic's lax int): `5`, `5.0`, `"5"` and
    `true` are integers; None for anything else (`5.5`, `"five"`, infinity). `"max_tokens": "5"` and `5.0`, which both
    engines serve, were 400s here."""
    try:
        return _INT.validate_python(value)
    except ValidationError:
        return None


def _flag(value: Any) -> bool | None:
    """A boolean field as vLLM's request models read it (pydantic's lax bool, called here as they call it): null is
    false, `"false"`, `"no"`, `0` are false and their opposites true; None for anything else (a 400). `"stream":
    "false"` used to stream."""
    if value is None:
        return False
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        return None


def _content_ok(content: Any) -> bool:
    """A chat message's content as the OpenAI API takes it: a string, null, or a list of part objects whose `text`
    (when present) is a string (`{"type": "text", "text": 5}` gave a 500 where vLLM answers 400)."""
    if content is None or isinstance(content, str):
        return True
    return isinstance(content, list) and all(isinstance(part, dict) and isinstance(part.get("text", ""), str)
                                             for part in content)


async def start_server(server: SimServer, host: str = "127.0.0.1", port: int = 0) -> tuple[web.AppRunner, int]:
    """Start `server` on (host, port); returns the runner (call `cleanup()` to stop) and the bound port."""
    return await start_app(server.app, host, port)
