"""Streaming HTTP transport: send one request, stamp times, keep the raw bytes.

The hot loop does nothing but `perf_counter()` and a list append per network read; SSE parsing and token counting
happen after the response ended (`to_record`). Times are taken on the monotonic clock and converted to unix seconds
with one anchor per process, so a wall-clock step during a run cannot bend latencies.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from llmsweep.client.config import Endpoint
from llmsweep.client.records import RequestRecord
from llmsweep.client.sse import parse_stream
from llmsweep.workload.base import RequestSpec

_ANCHOR_UNIX = time.time()
_ANCHOR_PERF = time.perf_counter()


def to_unix(perf: float) -> float:
    """Convert a `time.perf_counter()` stamp to absolute unix seconds."""
    return _ANCHOR_UNIX + (perf - _ANCHOR_PERF)


def now_unix() -> float:
    return to_unix(time.perf_counter())


def build_body(spec: RequestSpec, endpoint: Endpoint) -> bytes:
    """The JSON body of one streamed request; optional fields follow the endpoint's switches."""
    body: dict[str, Any] = {"model": endpoint.model, "stream": True, "max_tokens": spec.max_tokens}
    if spec.api == "chat":
        body["messages"] = list(spec.messages or ())
    else:
        prompt = spec.prompt
        body["prompt"] = list(prompt) if isinstance(prompt, tuple) else (prompt or "")
    if endpoint.send_stream_options:
        body["stream_options"] = {"include_usage": True}
    if endpoint.send_ignore_eos and spec.ignore_eos:
        body["ignore_eos"] = True
    body.update(spec.extra_body)
    return json.dumps(body, separators=(",", ":")).encode()


@dataclass(slots=True)
class RawExchange:
    """What the hot loop saw: perf_counter stamps, status and raw reads."""

    scheduled: float
    sent: float = 0.0
    first_byte: float | None = None
    end: float | None = None
    status: int | None = None
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    error_class: str | None = None
    error: str | None = None


async def exchange(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    raw: RawExchange,
    timeout: aiohttp.ClientTimeout,
) -> RawExchange:
    """Send and stream one request into `raw`. Never raises except CancelledError (after marking `raw`)."""
    perf = time.perf_counter
    raw.sent = perf()  # replaced by the moment the headers were written (trace hook), when they were
    try:
        async with session.post(url, data=body, headers=headers, timeout=timeout, trace_request_ctx=raw) as resp:
            raw.first_byte = perf()
            raw.status = resp.status
            reads = raw.reads
            readany = resp.content.readany
            if resp.status != 200:
                reads.append((perf(), await resp.read()))
                raw.error_class = "http"
                raw.error = f"HTTP {resp.status}"
            else:
                while True:
                    data = await readany()
                    if not data:
                        break
                    reads.append((perf(), data))
    except asyncio.CancelledError:
        raw.error_class, raw.error = "cancelled", "cancelled at the end of the drain grace period"
        raw.end = perf()
        raise
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raw.error_class, raw.error = "timeout", f"timed out: {exc or type(exc).__name__}"
    except aiohttp.ClientResponseError as exc:
        raw.error_class, raw.error = "protocol", f"{type(exc).__name__}: {exc}"
    except (aiohttp.ClientError, OSError) as exc:
        raw.error_class, raw.error = "connection", f"{type(exc).__name__}: {exc}"
    raw.end = perf()
    return raw


async def on_request_sent(session: Any, ctx: Any, params: Any) -> None:
    """aiohttp trace hook (headers sent, then body chunk sent): stamp `sent` when the request really goes to the
    socket. aiohttp buffers the headers and writes them with the body from a separate task, so on a busy loop the
    real write can trail `session.post` by milliseconds; that delay shows as schedule lag, not as TTFT."""
    raw = ctx.trace_request_ctx
    if isinstance(raw, RawExchange):
        raw.sent = time.perf_counter()


def to_record(
    raw: RawExchange,
    spec: RequestSpec,
    *,
    rid: str,
    worker: int,
    phase: str,
    overflow_patterns: tuple[str, ...],
) -> tuple[RequestRecord, str]:
    """Parse the raw exchange into a record (and the output text the lane program may want)."""
    ident = spec.identity
    rec = RequestRecord(
        id=rid,
        trace=ident.trace,
        lane=ident.lane,
        turn=ident.turn,
        phase=phase,
        session=ident.session,
        node=ident.node,
        request_index=ident.request_index,
        api=spec.api,
        scheduled_at=to_unix(raw.scheduled),
        sent_at=to_unix(raw.sent) if raw.sent else None,
        first_byte_at=to_unix(raw.first_byte) if raw.first_byte is not None else None,
        end_at=to_unix(raw.end) if raw.end is not None else None,
        status=raw.status,
        error_class=raw.error_class,  # type: ignore[arg-type]
        error=raw.error,
        input_tokens_expected=spec.input_tokens,
        theoretical_cached_tokens=spec.theoretical_cached_tokens,
        max_tokens=spec.max_tokens,
        worker=worker,
    )
    text = ""
    if raw.error_class == "http":
        body = b"".join(d for _, d in raw.reads).decode("utf-8", "replace")
        rec.error = f"HTTP {raw.status}: {body[:500]}"
        if _is_overflow(body, overflow_patterns):
            rec.error_class = "context_overflow"
        return rec, text
    if raw.reads:
        parsed = parse_stream(raw.reads, keep_text=True)
        rec.chunk_times = [to_unix(t) for t in parsed.chunk_times]
        rec.chunk_tokens = parsed.chunk_tokens
        rec.first_token_at = rec.chunk_times[0] if rec.chunk_times else None
        rec.prompt_tokens = parsed.prompt_tokens
        rec.completion_tokens = parsed.completion_tokens
        rec.cached_tokens = parsed.cached_tokens
        text = parsed.output_text
        if rec.error_class is None:
            if parsed.stream_error is not None:
                overflow = _is_overflow(parsed.stream_error, overflow_patterns)
                rec.error_class = "context_overflow" if overflow else "http"
                rec.error = f"error event in stream: {parsed.stream_error[:500]}"
            elif parsed.protocol_error is not None:
                rec.error_class, rec.error = "protocol", parsed.protocol_error
            elif not rec.chunk_times and not parsed.completion_tokens:
                rec.error_class, rec.error = "protocol", "stream ended without any content chunk"
    elif rec.error_class is None:
        rec.error_class, rec.error = "protocol", "empty response body"
    return rec, text


def _is_overflow(text: str, patterns: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(p.lower() in low for p in patterns)
