"""SSE parsing: what real servers send must become the right chunk times, token counts and errors."""

from __future__ import annotations

import json

from llmsweep.client.sse import parse_stream


def _ev(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chat(text: str, **extra: object) -> bytes:
    return _ev({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}], **extra})


USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}


def test_events_split_across_reads_are_stamped_by_the_read_that_completes_them() -> None:
    body = _chat("a") + _chat("b") + _ev({"choices": [], "usage": USAGE}) + b"data: [DONE]\n\n"
    cut1, cut2 = 10, len(_chat("a")) + 5  # first event completes in read 2, second in read 3
    reads = [(1.0, body[:cut1]), (2.0, body[cut1:cut2]), (3.0, body[cut2:])]
    out = parse_stream(reads)
    assert out.chunk_times == [2.0, 3.0]
    assert out.done and out.protocol_error is None
    assert (out.prompt_tokens, out.completion_tokens, out.cached_tokens) == (7, 3, 4)


def test_usage_on_final_chunk_without_done_is_accepted() -> None:
    # transformers serve: usage rides on the last content chunk with finish_reason, and no [DONE]
    last = {"choices": [{"index": 0, "delta": {"content": "c"}, "finish_reason": "length"}], "usage": USAGE}
    reads = [(1.0, _chat("a")), (2.0, _chat("b")), (3.0, _ev(last))]
    out = parse_stream(reads)
    assert out.chunk_times == [1.0, 2.0, 3.0]
    assert out.completion_tokens == 3 and not out.done and out.protocol_error is None
    assert out.chunk_tokens == [1, 1, 1]


def test_crlf_comments_and_role_only_chunks_are_not_content() -> None:
    role = b'data: {"choices":[{"delta":{"role":"assistant"}}]}\r\n\r\n'
    reads = [(1.0, b": keep-alive\r\n\r\n" + role), (2.0, _chat("x").replace(b"\n", b"\r\n"))]
    out = parse_stream(reads)
    assert out.chunk_times == [2.0]


def test_completions_text_and_reasoning_content_count_as_content() -> None:
    reads = [
        (1.0, _ev({"choices": [{"text": "hi"}]})),
        (2.0, _ev({"choices": [{"delta": {"reasoning_content": "think"}}]})),
    ]
    assert parse_stream(reads).chunk_times == [1.0, 2.0]


def test_invalid_json_is_a_protocol_error() -> None:
    out = parse_stream([(1.0, _chat("a") + b"data: {not json\n\n")])
    assert out.protocol_error is not None and "invalid JSON" in out.protocol_error
    assert out.chunk_times == [1.0]


def test_error_event_in_stream_is_reported() -> None:
    out = parse_stream([(1.0, _chat("a") + _ev({"error": {"message": "engine died"}}))])
    assert out.stream_error == "engine died"


def test_per_chunk_cumulative_usage_gives_tokens_per_chunk() -> None:
    reads = [
        (1.0, _chat("ab", usage={"completion_tokens": 2})),
        (2.0, _chat("cde", usage={"completion_tokens": 5})),
        (3.0, _chat("f", usage={"completion_tokens": 6})),
    ]
    assert parse_stream(reads).chunk_tokens == [2, 3, 1]


def test_multi_token_chunks_spread_the_final_usage_by_text_length() -> None:
    # speculative decoding: 3 chunks carry 9 tokens; the long chunk gets the most
    usage = _ev({"choices": [], "usage": {"completion_tokens": 9}})
    reads = [(1.0, _chat("aaaaaa")), (2.0, _chat("aa")), (3.0, _chat("a")), (4.0, usage)]
    tokens = parse_stream(reads).chunk_tokens
    assert sum(tokens) == 9
    assert tokens[0] > tokens[1] >= tokens[2] >= 1


def test_last_event_without_blank_line_still_counts() -> None:
    out = parse_stream([(1.0, _chat("a")), (2.0, b'data: {"choices":[{"delta":{"content":"b"}}]}')])
    assert out.chunk_times == [1.0, 2.0]


def test_whole_body_event_split_matches_splitting_read_by_read() -> None:
    """The parser splits the joined body and maps each event to the read that completed it; the stamps must be those
    of splitting as the reads came, for any way the bytes were cut."""
    import random

    from llmsweep.client.sse import _events, _events_incremental

    body = b"".join(_chat(f"w{i}") for i in range(30)) + b": keep-alive\n\n" + _ev({"choices": [], "usage": USAGE})
    body += b"data: [DONE]"  # last event without its blank line
    rng = random.Random(7)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(body)), rng.randint(1, 40)))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        reads = [(float(i), p) for i, p in enumerate(pieces)]
        assert _events(reads) == _events_incremental(reads)


def test_a_bad_event_after_good_ones_keeps_the_good_chunks_and_names_the_bad_one() -> None:
    body = _chat("a") + _chat("b") + b"data: {not json\n\n" + _chat("c")
    out = parse_stream([(1.0, body)])
    assert out.chunk_times == [1.0, 1.0]
    assert out.protocol_error is not None and "not json" in out.protocol_error


def test_reasoning_deltas_and_odd_choices_count_as_in_the_general_path() -> None:
    body = (
        _ev({"choices": [{"index": 0, "delta": {"reasoning_content": "think", "content": None}}]})
        + _ev({"choices": [{"index": 0, "delta": {"content": "x"}}, {"index": 1, "delta": {"content": "y"}}]})
        + _ev({"choices": {"0": {"delta": {"content": "z"}}}})  # not a list: no content
        + _ev({"choices": [{"index": 0, "text": "t"}]})  # completions
    )
    out = parse_stream([(1.0, body)], keep_text=True)
    assert out.output_text == "thinkxyt"
    assert len(out.chunk_times) == 3
