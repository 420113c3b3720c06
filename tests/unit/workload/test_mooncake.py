from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.errors import DatasetError
from llmsweep.workload.base import Send
from llmsweep.workload.mooncake import MooncakeConfig, MooncakeWorkload
from llmsweep.workload.tokenizer import count_tokens

ROWS = [
    {"timestamp": 1000, "input_length": 1100, "output_length": 10, "hash_ids": [0, 1, 2]},
    {"timestamp": 1500, "input_length": 1024, "output_length": 5, "hash_ids": [0, 1]},
    {"timestamp": 4000, "input_length": 600, "output_length": 7, "hash_ids": [9]},  # longer than its one block
]


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "mooncake.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    return path


def _first_send(program: object) -> Send:
    action = next(program)  # type: ignore[call-overload]
    assert isinstance(action, Send)
    return action


def test_arrivals_follow_timestamps_with_speedup(trace_file: Path) -> None:
    workload = MooncakeWorkload(MooncakeConfig(source=str(trace_file), speedup=2.0, run_id="m"))
    arrivals = list(workload.arrivals())
    assert [a.at for a in arrivals] == [0.0, 0.25, 1.5]
    specs = [_first_send(a.program).spec for a in arrivals]
    assert [s.input_tokens for s in specs] == [1100, 1024, 600]
    assert [s.max_tokens for s in specs] == [10, 5, 7]
    assert [s.theoretical_cached_tokens for s in specs] == [0, 1024, 0]


def test_prompts_are_exact_and_share_block_text(trace_file: Path) -> None:
    workload = MooncakeWorkload(MooncakeConfig(source=str(trace_file), cache_bust=False, run_id="m"))
    specs = [_first_send(a.program).spec for a in workload.arrivals()]
    texts = [s.messages[0]["content"] for s in specs]  # type: ignore[index]
    assert [count_tokens(t) for t in texts] == [1100, 1024, 600]
    assert texts[0].startswith(texts[1])  # same leading ids → same leading text


def test_completions_send_exact_token_ids(trace_file: Path) -> None:
    workload = MooncakeWorkload(MooncakeConfig(source=str(trace_file), api="completions", cache_bust=False,
                                               run_id="m"))
    specs = [_first_send(a.program).spec for a in workload.arrivals()]
    assert [len(s.prompt) for s in specs] == [1100, 1024, 600]  # type: ignore[arg-type]
    assert specs[0].prompt[:1024] == specs[1].prompt  # type: ignore[index]


def test_closed_loop_sessions_send_each_row_once(trace_file: Path) -> None:
    workload = MooncakeWorkload(MooncakeConfig(source=str(trace_file), run_id="m"))
    seen = [_first_send(p).spec.identity.request_index for lane in (0, 1) for p in workload.sessions(lane)]
    assert sorted(seen) == [0, 1, 2]


def test_client_workers_together_send_each_row_once_with_one_theoretical_hit_rate(trace_file: Path) -> None:
    """Closed loop over two client workers sent every row twice (each process replayed all of them), and each
    worker's prefix cache saw only the rows it sent, so the theoretical hits depended on the worker count."""
    sent: list[tuple[int | None, int | None]] = []
    for worker in range(2):
        workload = MooncakeWorkload(MooncakeConfig(source=str(trace_file), run_id="m"))
        workload.bind_worker(worker, 2)
        for lane in range(2):
            for program in workload.sessions(lane):
                spec = _first_send(program).spec
                sent.append((spec.identity.request_index, spec.theoretical_cached_tokens))
    assert sorted(sent) == [(0, 0), (1, 1024), (2, 0)]  # every row once; row 1 hits row 0's blocks either way
    again = MooncakeWorkload(MooncakeConfig(source=str(trace_file), run_id="m"))
    assert [len(list(again.sessions(0))) for _ in range(2)] == [3, 0]
    again.bind_worker(0, 1)  # a replay of the same workload (calibration) starts again
    assert len(list(again.sessions(0))) == 3


def test_a_compressed_trace_is_read_and_one_not_utf8_is_named_by_its_line(tmp_path: Path) -> None:
    """A Mooncake file was read as text: a gzip-compressed one, or a `text_input` with a Latin-1 byte, ended `bench
    replay` in a UnicodeDecodeError traceback. It is read as trace files are (`traces.loader.json_lines`)."""
    import gzip

    lines = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    (tmp_path / "rows.jsonl.gz").write_bytes(gzip.compress(lines))
    assert len(MooncakeWorkload(MooncakeConfig(source=str(tmp_path / "rows.jsonl.gz"), run_id="m")).rows) == 3
    latin = json.dumps({**ROWS[0], "text_input": "cafe"}).encode().replace(b"cafe", b"caf\xe9")  # Latin-1 e-acute
    (tmp_path / "latin.jsonl").write_bytes(lines + latin + b"\n")
    with pytest.raises(DatasetError, match=r"latin\.jsonl:4: not a Mooncake row: .*(unicode|UTF-8)"):
        MooncakeWorkload(MooncakeConfig(source=str(tmp_path / "latin.jsonl"), run_id="m"))


def test_bad_row_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"timestamp": 1, "output_length": 3}) + "\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl:2: .*input_length"):
        MooncakeWorkload(MooncakeConfig(source=str(path)))


@pytest.mark.parametrize(("field", "value"), [
    ("hash_ids", [0, -1]), ("hash_ids", [1 << 64]), ("input_length", 1 << 40), ("output_length", 1 << 40),
    ("timestamp", float("inf")), ("timestamp", float("nan")), ("delay", -5.0),
])
def test_damaged_rows_are_refused_with_their_line(tmp_path: Path, field: str, value: object) -> None:
    """A block id outside 64 bits stopped the replay with an OverflowError; a trillion-token input had the client
    build that much text before any server could refuse it; an infinite timestamp was a sleep that never ends and a
    negative delay an arrival before the one it follows."""
    path = tmp_path / "bad.jsonl"
    row = {k: v for k, v in ROWS[1].items() if k != "timestamp"} if field == "delay" else ROWS[1]
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({**row, field: value}) + "\n")
    with pytest.raises(DatasetError, match=rf"bad\.jsonl:2: .*{field}"):
        MooncakeWorkload(MooncakeConfig(source=str(path)))


@pytest.mark.parametrize(("field", "value", "at"), [
    ("input_length", True, "input_length"), ("output_length", True, "output_length"),
    ("input_length", False, "input_length"), ("timestamp", True, "timestamp"), ("delay", True, "delay"),
    ("hash_ids", [0, True], "hash_ids.1"),
])
def test_a_boolean_where_a_row_holds_a_number_is_refused_with_its_line(tmp_path: Path, field: str, value: object,
                                                                        at: str) -> None:
    """`"input_length": true` was read as 1 (a one-token request under the row's figure), where a decimal length or
    a NaN is refused at its line: a boolean is too, in every number of the row."""
    path = tmp_path / "bad.jsonl"
    row = {k: v for k, v in ROWS[1].items() if k != "timestamp"} if field == "delay" else ROWS[1]
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({**row, field: value}) + "\n")
    with pytest.raises(DatasetError) as err:
        MooncakeWorkload(MooncakeConfig(source=str(path)))
    said = "true" if value is True or value == [0, True] else "false"
    # a block id is a strict integer (pydantic refuses it natively, at no cost over a million ids): its value is named
    refusal = ("Input should be a valid integer (given `true`)" if field == "hash_ids"
               else f"`{said}` is a boolean, not a number")
    assert f"bad.jsonl:2: not a Mooncake row: {at}: {refusal}" in str(err.value), err.value


@pytest.mark.parametrize("field", ["input_length", "output_length", "timestamp"])
def test_a_quoted_figure_where_a_row_holds_a_number_is_refused_with_its_line(tmp_path: Path, field: str) -> None:
    """`"input_length": "5"` was read as 5 by pydantic's lax mode: a quoted figure is refused at its line, as a
    boolean is (`JsonNumber`, one rule for both trace formats)."""
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({**ROWS[1], field: str(ROWS[1][field])}) + "\n")
    with pytest.raises(DatasetError) as err:
        MooncakeWorkload(MooncakeConfig(source=str(path)))
    assert f"bad.jsonl:2: not a Mooncake row: {field}: `\"{ROWS[1][field]}\"` is a string, not a number" in str(
        err.value), err.value


@pytest.mark.parametrize(("rows", "line", "earlier"), [
    ([ROWS[1], ROWS[0], ROWS[2]], 2, 1),  # timestamps out of order
    ([{**ROWS[0], "timestamp": None, "delay": 3000}, ROWS[1], ROWS[2]], 2, 1),  # a delay, then a timestamp at 0 s
])
def test_a_row_arriving_before_the_row_above_it_is_refused_with_its_line(
    tmp_path: Path, rows: list[dict[str, object]], line: int, earlier: int,
) -> None:
    """Arrivals were offsets from the first row in file order: a row timestamped before the row above it got a
    negative or earlier offset, which the client sent at once, late, behind the rows above it, and the simulator
    scheduled in the past; a file of rows in another order replayed as some other trace."""
    path = tmp_path / "unsorted.jsonl"
    path.write_text("\n".join(json.dumps({k: v for k, v in r.items() if v is not None}) for r in rows) + "\n")
    with pytest.raises(DatasetError, match=rf"unsorted\.jsonl:{line}: .*before the row of line {earlier}") as err:
        MooncakeWorkload(MooncakeConfig(source=str(path)))
    assert "sort the rows by timestamp" in (err.value.fix or "")


def test_a_rows_text_input_is_the_prompt_on_either_route(tmp_path: Path, bpe_tokenizer_dir: Path) -> None:
    """A row with `text_input` sent that text over chat, but filler blocks over completions: one trace, two
    workloads, by the route alone."""
    from llmsweep.workload.tokenizer import load_hf_tokenizer

    tok = load_hf_tokenizer(bpe_tokenizer_dir)
    path = tmp_path / "text.jsonl"
    path.write_text(json.dumps({**ROWS[0], "input_length": 6, "text_input": "the cat sat on the mat"}) + "\n")
    sent = {api: _first_send(next(iter(MooncakeWorkload(
        MooncakeConfig(source=str(path), api=api, run_id="m"), tokenizer=tok).arrivals())).program).spec
        for api in ("chat", "completions")}
    content = sent["chat"].messages[0]["content"]  # type: ignore[index]
    assert content.endswith("the cat sat on the mat")
    assert sent["completions"].prompt == tuple(tok.encode(content))
