"""Turn the raw bytes of one streamed response into content-chunk times, token counts and usage.

Runs after the response ended, never while bytes are arriving: the hot loop only stamps `(time, bytes)` pairs. An
event is stamped with the arrival time of the network read that completed it. Tolerates what real servers do:
usage on the final content chunk or on a separate `choices: []` chunk, no `data: [DONE]`, `\\r\\n` line ends,
comments and keep-alives, and an `error` object in the middle of the stream. What no working server sends stops the
parse with a `protocol_error`: an event that is no JSON object, a usage count that is no count, output text with half
a character (a lone surrogate); a usage count above the request's `max_tokens` is kept apart, not taken.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from llmsweep.engine_ids import MAX_SPEC_K

STEP_OVERSHOOT_TOKENS = MAX_SPEC_K + 1
"""How far past the request's `max_tokens` a server's output may run and still be the output it served: an engine that
checks the limit once per decoding step can end past it by what one speculative step accepts (K drafts and the bonus
token, K at most `engine_ids.MAX_SPEC_K`; SGLang and TensorRT-LLM under MTP/EAGLE have reported a few
tokens over). A usage count beyond it is not the output's size (the server ignored the limit or miscounts), and an
output beyond it is a long output (`metrics.accumulate`)."""

@dataclass(slots=True)
class ParsedStream:
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    done: bool = False
    finish_reason: str | None = None  # of the last chunk that had choices
    cut: bool = False  # the body ended inside an event (no blank line after its last bytes)
    output_text: str = ""
    protocol_error: str | None = None
    stream_error: str | None = None
    stream_error_code: int | None = None  # the error event's `code`, an HTTP status (504: a gateway's timeout)
    data_events: int = 0  # events with a `data:` field, `[DONE]` included: none means the body is no event stream
    choice_events: int | None = None
    """Events with a non-empty `choices` list: counted only for a stream without any content chunk, to say what came."""
    usage_over_max_tokens: int | None = None
    """The usage count of output tokens when it exceeded the request's `max_tokens` (`parse_stream`'s `max_tokens`):
    not taken as `completion_tokens`, which is then None (the chunks count the output)."""


def _events(reads: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """Split reads into complete SSE events (each stamped with the read that completed it)."""
    body = b"".join([d for _, d in reads])
    if b"\r" in body:
        return _events_incremental(reads)
    ends = list(accumulate([len(d) for _, d in reads]))
    parts = body.split(b"\n\n")
    last = len(parts) - 1
    events: list[tuple[float, bytes]] = []
    pos = 0
    for i, ev in enumerate(parts):
        end = pos + len(ev)
        if ev.strip():
            # the read holding the blank line's second byte completed the event; a last event without its blank
            # line (connection closed right after it) still counts, at the last read
            events.append((reads[bisect_left(ends, end + 2)][0] if i < last else reads[-1][0], ev))
        pos = end + 2
    return events


def _events_incremental(reads: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """`_events` for streams with `\\r\\n` line ends: normalise as the reads come."""
    events: list[tuple[float, bytes]] = []
    buf = b""
    for t, data in reads:
        buf += data
        if b"\n\n" not in buf and b"\r\n\r\n" not in buf:
            continue
        buf = buf.replace(b"\r\n", b"\n")
        *complete, buf = buf.split(b"\n\n")
        events.extend((t, ev) for ev in complete if ev.strip())
    if buf.strip():
        # A last event without its blank line (connection closed right after it) still counts.
        events.append((reads[-1][0], buf.replace(b"\r\n", b"\n")))
    return events


def _data_of(event: bytes) -> bytes | None:
    if event.startswith(b"data: ") and b"\n" not in event:
        return event[6:]  # the usual one-line event
    parts = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(parts) if parts else None


def _event_type(event: bytes) -> bytes:
    line = event.split(b"\n", 1)[0]
    return line[6:].strip()


def error_words(err: Any) -> str:
    """The server's words of an `error` value: its `message` when it is an object that has one."""
    if isinstance(err, dict):
        if isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err.get("error"), (dict, str)):
            return error_words(err["error"])
    return err if isinstance(err, str) else json.dumps(err)


def _content_of(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        text = delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        return (reasoning + text) if isinstance(text, str) and isinstance(reasoning, str) else ""
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def _text_of_one(choice: Any) -> str:
    """`_content_of` for the usual chunk: one choice whose delta holds only `content` (the hot path of parsing)."""
    if type(choice) is not dict:
        return ""
    delta = choice.get("delta")
    if type(delta) is dict and "reasoning_content" not in delta and "reasoning" not in delta:
        text = delta.get("content")
        return text if type(text) is str else ""
    return _content_of(choice)


def _decode_all(datas: list[bytes]) -> list[Any] | None:
    """Every event's JSON in one decoder call (most of the cost of parsing a stream is per-call overhead); None when
    any of them is not one valid JSON value, so the caller decodes one by one and reports the first bad one."""
    try:
        objs = json.loads(b"[" + b",".join(datas) + b"]")
    except (ValueError, RecursionError):  # RecursionError: JSON nested past the parser's depth
        return None
    return objs if isinstance(objs, list) and len(objs) == len(datas) else None


def parse_stream(reads: list[tuple[float, bytes]], *, keep_text: bool = False,
                 max_tokens: int | None = None) -> ParsedStream:
    """Parse `reads` (arrival time, bytes) of an SSE response body; `max_tokens`: the request's, above which a usage
    count is not taken as the output's size (`ParsedStream.usage_over_max_tokens`)."""
    out = ParsedStream()
    texts: list[str] = []
    usage_cum: list[int | None]
    times: list[float] = []
    datas: list[bytes] = []
    done_after: int | None = None  # how many data events preceded the first [DONE]
    events = 0
    for t, event in _events(reads):
        data = _data_of(event)
        if data is None:
            continue
        events += 1
        if event.startswith(b"event:") and _event_type(event) == b"error":
            # `event: error` (SSE's own error event, as some gateways and servers send): its data says what failed
            try:
                err = json.loads(data)
            except (ValueError, RecursionError):  # RecursionError: JSON nested past the parser's depth
                err = data.decode("utf-8", "replace")
            times.append(t)
            datas.append(json.dumps({"error": err or "error event"}).encode())
            continue
        if data.strip() == b"[DONE]":
            if done_after is None:
                done_after = len(datas)
            continue
        times.append(t)
        datas.append(data)
    out.data_events = events
    objs = _decode_all(datas)
    chunk_times, usage_cum = out.chunk_times, []
    last_choices: list[Any] | None = None
    seen = len(times)  # events read before a bad one stops the parse
    unreadable = False  # the parse stopped at an event that is no JSON object (maybe cut: see `cut`)
    for i, t in enumerate(times):
        seen = i
        if objs is not None:
            obj = objs[i]
        else:
            try:
                obj = json.loads(datas[i])
            except (ValueError, RecursionError):  # RecursionError: JSON nested past the parser's depth
                out.protocol_error = f"invalid JSON in stream event: {datas[i][:120]!r}"
                unreadable = True
                break
        if type(obj) is not dict:
            out.protocol_error = f"stream event is not a JSON object: {datas[i][:120]!r}"
            unreadable = True
            break
        if obj.get("error"):
            out.stream_error = error_words(obj["error"])
            code = obj["error"].get("code") if type(obj["error"]) is dict else None
            out.stream_error_code = code if type(code) is int else None
            break
        usage = obj.get("usage")
        cum: int | None = None
        if usage is not None:
            try:
                if type(usage) is not dict:
                    raise NotACount(f"usage is {_shown(usage)}, not an object of token counts")
                out.prompt_tokens = _count(usage, "prompt_tokens", out.prompt_tokens)
                cum = _count(usage, "completion_tokens", None)
                if cum is not None:
                    out.completion_tokens = cum
                details = usage.get("prompt_tokens_details")
                if isinstance(details, dict):
                    out.cached_tokens = _count(details, "cached_tokens", out.cached_tokens,
                                               "usage.prompt_tokens_details")
            except NotACount as exc:
                out.protocol_error = str(exc)
                break
        choices = obj.get("choices")
        if not choices or type(choices) is not list:
            continue
        last_choices = choices
        text = _text_of_one(choices[0]) if len(choices) == 1 else "".join(
            _content_of(c) for c in choices if isinstance(c, dict)
        )
        if text:
            chunk_times.append(t)
            texts.append(text)
            usage_cum.append(cum)
    else:
        seen = len(times)
    out.done = done_after is not None and done_after <= seen
    if unreadable and seen == len(times) - 1:  # the last event is the bad one: was it cut?
        tail = reads[-1][1] if len(reads[-1][1]) >= 4 else b"".join([d for _, d in reads[-4:]])
        out.cut = not tail.endswith((b"\n\n", b"\r\n\r\n"))
    if last_choices is not None:  # looked at once, at the end: the finish reason rides on the last chunk with choices
        first = last_choices[0]
        reason = first.get("finish_reason") if type(first) is dict else None
        out.finish_reason = reason if isinstance(reason, str) else None
    if max_tokens and out.completion_tokens is not None and out.completion_tokens > max_tokens + STEP_OVERSHOOT_TOKENS:
        # more output than the request allowed, by the server's own count: a server that ignored the limit or one
        # that miscounts; either way not the output's size (1000 said for 8 chunks at max_tokens 8 made throughput
        # 100x the real one). The chunks count it, and the record says what the server claimed.
        out.usage_over_max_tokens, out.completion_tokens = out.completion_tokens, None
        usage_cum = [None] * len(usage_cum)
    out.chunk_tokens = _chunk_tokens(texts, usage_cum, out.completion_tokens)
    text = "".join(texts)
    if not text.isascii():
        text = _whole_text(text, out)
    if not chunk_times and out.protocol_error is None and out.stream_error is None:
        out.choice_events = _choice_events(objs, datas, seen)
    if keep_text:
        out.output_text = text
    return out


def _whole_text(text: str, out: ParsedStream) -> str:
    """`text` with any surrogate pair a server split over two chunks joined; a lone surrogate (JSON may escape one:
    `"\\ud800"`) is no Unicode text, so the server's output cannot be read: `out.protocol_error` says where."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        at = next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")
        if out.protocol_error is None and out.stream_error is None:
            out.protocol_error = (f"the output text holds a lone surrogate (\\u{ord(text[at]):04x} at character {at}), "
                                  "which is no Unicode text: the server's JSON escaped half of a character")
        return text.encode("utf-8", "replace").decode("utf-8")


def _choice_events(objs: list[Any] | None, datas: list[bytes], seen: int) -> int:
    """How many of the first `seen` events hold a non-empty `choices` list (for a stream without a content chunk)."""
    n = 0
    for i in range(seen):
        try:
            obj = objs[i] if objs is not None else json.loads(datas[i])
        except (ValueError, RecursionError):
            continue
        if type(obj) is dict and type(obj.get("choices")) is list and obj["choices"]:
            n += 1
    return n


_MAX_COUNT = 1 << 53  # past this a count is no token count (and past 2**63 the record's encoder refused it)


class NotACount(ValueError):
    """A usage count that is no count (`_count`): the request's `protocol` failure, with these words."""


def _shown(value: Any) -> str:
    return json.dumps(value)[:60]


def _count(usage: dict[str, Any], key: str, before: int | None, where: str = "usage") -> int | None:
    """`usage[key]`: a non-negative integer below 2**53; what was known `before` when absent or null. Anything else
    (`"8"`, `-5`, `8.5`, `true`, 10**30) raises `NotACount`: a server that reports such a count is broken, and
    neither its count nor the chunks (which may each carry several tokens) say the output's size for sure."""
    value = usage.get(key)
    if type(value) is int and 0 <= value < _MAX_COUNT:
        return value
    if value is None:
        return before
    raise NotACount(f"{where}.{key} is {_shown(value)}, not a token count (an integer in [0, 2^53))")


def _chunk_tokens(texts: list[str], usage_cum: list[int | None], total: int | None) -> list[int]:
    """Tokens per content chunk: from per-chunk cumulative usage when every chunk has it, else one per chunk with
    any surplus of the final usage count spread over chunks by text length (multi-token chunks)."""
    n = len(texts)
    if n == 0:
        return []
    if all(c is not None for c in usage_cum):
        prev = 0
        counts = []
        for c in usage_cum:
            counts.append(max(int(c) - prev, 0))  # type: ignore[arg-type]
            prev = int(c)  # type: ignore[arg-type]
        if all(x >= 1 for x in counts):
            return counts
    counts = [1] * n
    if total is None or total <= n:
        return counts
    surplus = total - n
    lengths = [max(len(s), 1) for s in texts]
    weight = sum(lengths)
    shares = [surplus * ln / weight for ln in lengths]
    extra = [int(s) for s in shares]
    left = surplus - sum(extra)
    for i in sorted(range(n), key=lambda i: shares[i] - extra[i], reverse=True)[:left]:
        extra[i] += 1
    return [c + e for c, e in zip(counts, extra, strict=True)]
