"""Stream integrity: a stream that ended cleanly but incomplete is a `truncated` failure, a stream the engine ended
early on its own is a success (a short output the summary counts), and each engine's way of ending a stream (vLLM's
`[DONE]`, transformers serve's finish_reason with usage and no `[DONE]`) is whole."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmsweep.client.config import RunOptions
from llmsweep.client.transport import RawExchange, to_record
from llmsweep.workload.base import RequestIdentity, RequestSpec


def _ev(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _body(n: int, *, finish: str | None = "length", usage: int | None = None, done: bool = True,
          usage_on_last: bool = False) -> bytes:
    """A chat stream of `n` one-token chunks, the last with `finish`, then optional usage and `[DONE]`."""
    parts = []
    for i in range(n):
        choice: dict[str, Any] = {"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}
        doc: dict[str, Any] = {"choices": [choice]}
        if i == n - 1:
            choice["finish_reason"] = finish
            if usage_on_last and usage is not None:
                doc["usage"] = {"prompt_tokens": 4, "completion_tokens": usage}
        parts.append(_ev(doc))
    if usage is not None and not usage_on_last:
        parts.append(_ev({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": usage}}))
    if done:
        parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def _record(body: bytes, *, max_tokens: int = 8, ignore_eos: bool = True, sends_done: bool | None = None) -> Any:
    raw = RawExchange(scheduled=1.0, sent=1.0, first_byte=1.1, end=2.0, status=200)
    raw.reads = [(1.5, body)]
    spec = RequestSpec(identity=RequestIdentity(trace="t", lane=0), api="chat", messages=({"role": "user",
                       "content": "x"},), max_tokens=max_tokens, ignore_eos=ignore_eos)
    rec, _ = to_record(raw, spec, rid="r", worker=0, phase="profiling", overflow_patterns=(),
                       ignore_eos=ignore_eos, sends_done=sends_done)
    return rec


@pytest.mark.parametrize("sends_done", [None, True])
def test_a_whole_vllm_style_stream_is_a_success(sends_done: bool | None) -> None:
    rec = _record(_body(8, usage=8), sends_done=sends_done)
    assert rec.error_class is None and rec.completion_tokens == 8 and rec.finish_reason == "length"


@pytest.mark.parametrize("sends_done", [None, False])
def test_transformers_serve_ending_with_finish_reason_and_usage_but_no_done_is_a_success(
        sends_done: bool | None) -> None:
    rec = _record(_body(8, usage=8, done=False, usage_on_last=True), ignore_eos=False, sends_done=sends_done)
    assert rec.error_class is None and rec.completion_tokens == 8


def test_a_clean_end_after_half_the_tokens_without_usage_finish_reason_or_done_is_truncated() -> None:
    for ignore_eos in (True, False):
        rec = _record(_body(4, finish=None, done=False), ignore_eos=ignore_eos)
        assert rec.error_class == "truncated", rec.error
        assert "[DONE]" in (rec.error or "")
        assert len(rec.chunk_times) == 4  # what did arrive stays on the record


def test_a_stream_missing_the_done_its_dialect_promises_is_truncated() -> None:
    rec = _record(_body(8, usage=8, done=False), sends_done=True)
    assert rec.error_class == "truncated" and "[DONE]" in (rec.error or "")


def test_fewer_tokens_than_asked_under_ignore_eos_is_truncated_by_usage_else_by_chunks() -> None:
    by_usage = _record(_body(3, finish="stop", usage=5))
    assert by_usage.error_class == "truncated" and "5 of 8" in (by_usage.error or "")
    by_chunks = _record(_body(3, finish="stop"))
    assert by_chunks.error_class == "truncated" and "3 of 8" in (by_chunks.error or "")


def test_a_length_stop_short_of_max_tokens_under_ignore_eos_is_a_short_success() -> None:
    """The engine says it hit a length limit (its context, say): a whole answer, shorter than asked."""
    rec = _record(_body(5, finish="length", usage=5))
    assert rec.error_class is None and rec.completion_tokens == 5


def test_an_eos_stop_without_ignore_eos_is_a_legitimate_short_output() -> None:
    rec = _record(_body(3, finish="stop", usage=3), ignore_eos=False)
    assert rec.error_class is None and rec.finish_reason == "stop" and rec.completion_tokens == 3


def test_an_aborted_request_is_truncated_even_without_ignore_eos() -> None:
    rec = _record(_body(3, finish="abort", usage=3), ignore_eos=False)
    assert rec.error_class == "truncated" and "abort" in (rec.error or "")


def test_a_body_cut_inside_its_last_event_is_truncated_and_garbage_mid_stream_is_protocol() -> None:
    whole = _body(2, finish=None, done=False)
    cut = _record(whole + b'data: {"choices": [{"ind')
    assert cut.error_class == "truncated" and len(cut.chunk_times) == 2
    garbled = _record(whole + b"data: {not json\n\n" + _body(1, usage=3))
    assert garbled.error_class == "protocol"


def test_the_stall_timeout_defaults_well_below_the_request_timeout() -> None:
    options = RunOptions(concurrency=1)
    assert options.stall_s <= options.timeout_s / 5
    assert RunOptions(concurrency=1, timeout_s=10).stall_s == 10  # never longer than the request timeout


def test_a_gateways_504_is_a_timeout_with_its_words_whole_or_as_a_stream_error_event() -> None:
    """llmsweep's PD router answers 504 naming the worker it gave up on, just before the client's own timeout
    (`engine_ids.TIMEOUT_HEADER`): the record is the `timeout` the client's timeout would have made, with the router's
    words; any other status in an error event stays `http`."""
    said = {"error": {"message": "decode worker http://w:1 stalled mid-stream", "type": "GatewayTimeoutError",
                      "code": 504}}
    streamed = _record(_body(2, finish=None, done=False) + _ev(said) + b"data: [DONE]\n\n")
    assert streamed.error_class == "timeout" and "decode worker http://w:1 stalled" in streamed.error
    other = _record(_ev({"error": {**said["error"], "code": 502}}) + b"data: [DONE]\n\n")
    assert other.error_class == "http"
    raw = RawExchange(scheduled=1.0, sent=1.0, first_byte=1.1, end=2.0, status=504, error_class="http",
                      error="HTTP 504")
    raw.reads = [(1.5, json.dumps(said).encode())]
    spec = RequestSpec(identity=RequestIdentity(trace="t", lane=0), api="chat", messages=({"role": "user",
                       "content": "x"},), max_tokens=8)
    whole, _ = to_record(raw, spec, rid="r", worker=0, phase="profiling", overflow_patterns=())
    assert whole.error_class == "timeout" and "decode worker http://w:1" in (whole.error or "")
