"""Open-loop schedules are seeded and have the asked rate; records survive as one JSON line each."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

from llmsweep.client.arrivals import arrival_times
from llmsweep.client.records import RecordWriter, RequestRecord


def _take(it: object, n: int) -> list[float]:
    return list(itertools.islice(it, n))  # type: ignore[call-overload]


def test_poisson_schedule_is_deterministic_per_seed_and_has_the_rate() -> None:
    a = _take(arrival_times(50.0, "poisson", seed=1), 5000)
    b = _take(arrival_times(50.0, "poisson", seed=1), 5000)
    c = _take(arrival_times(50.0, "poisson", seed=2), 5000)
    assert a == b and a != c
    assert a[0] == 0.0 and all(y >= x for x, y in itertools.pairwise(a))
    rate = (len(a) - 1) / a[-1]
    assert 47 < rate < 53
    gaps = np.diff(a)
    assert 0.8 < gaps.std() / gaps.mean() < 1.2  # exponential: coefficient of variation 1


def test_constant_schedule_is_evenly_spaced() -> None:
    assert _take(arrival_times(4.0, "constant", seed=0), 4) == [0.0, 0.25, 0.5, 0.75]


def test_writer_appends_one_parseable_line_per_record(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as w:
        w.write(RequestRecord(id="a", chunk_times=[1.0, 2.0], chunk_tokens=[1, 2], completion_tokens=3))
    with RecordWriter(path) as w:  # a second writer (another worker) appends, never truncates
        w.write(RequestRecord(id="b", error_class="timeout", error="slow"))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["id"] for x in lines] == ["a", "b"]
    assert RequestRecord.from_dict(lines[0]).chunk_tokens == [1, 2]
    assert lines[1]["error_class"] == "timeout" and lines[1]["sent_at"] is None


def test_a_record_line_is_the_same_compact_json_with_or_without_orjson(monkeypatch) -> None:
    """The GPU scripts run llmsweep from its sources on an image that may lack orjson: `json` must write the very
    line orjson writes (what `metrics.accumulate`'s fast path expects), only slower."""
    import llmsweep.jsonline as jsonline

    rng = np.random.default_rng(3)
    sent = 1_764_000_000.0 + float(rng.random())
    record = RequestRecord(id="sim-7", trace="t/é", sent_at=sent, first_token_at=sent + 0.031,
                           chunk_times=(sent + np.cumsum(rng.random(50) / 100)).tolist(),
                           chunk_tokens=rng.integers(1, 5, 50).tolist(), error='quote " and \\ and \n',
                           prompt_tokens=123_456, cached_tokens=0)
    fast = record.to_line()
    monkeypatch.setattr(jsonline, "orjson", None)
    assert record.to_line() == fast
    assert fast.endswith(b"}\n") and b'"chunk_times":[' in fast and json.loads(fast) == record.to_dict()


def test_a_line_reads_the_same_with_or_without_orjson_nan_included(monkeypatch, tmp_path: Path) -> None:
    """`iter_jsonl` (the dashboard's and `results`' reader) decodes through orjson, which refuses the NaN that
    `json.dumps` writes by default (an older file, a scrape): such a line is read as `json` reads it; a torn line is
    skipped either way."""
    import math

    import llmsweep.jsonline as jsonline
    from llmsweep.results.rundir import iter_jsonl

    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"a": 1.5, "t": [1.0, 2.0]}) + "\n" + json.dumps({"v": float("nan")}) + "\n"
                    + '{"torn": [1, 2\n' + RequestRecord(id="x", chunk_times=[3.0]).to_line().decode())
    fast = list(iter_jsonl(path))
    monkeypatch.setattr(jsonline, "orjson", None)
    slow = list(iter_jsonl(path))
    assert len(fast) == len(slow) == 3
    assert math.isnan(fast[1]["v"]) and math.isnan(slow[1]["v"])
    assert fast[0] == slow[0] == {"a": 1.5, "t": [1.0, 2.0]} and fast[2] == slow[2] and fast[2]["chunk_times"] == [3.0]


def test_a_numpy_scalar_in_a_record_is_written_as_json_writes_it() -> None:
    """`json.dumps` wrote an np.float64 (a float subclass); the orjson encoder must too, not raise mid-run."""
    from llmsweep.jsonline import dumps_line

    line = dumps_line({"t": np.float64(1.5), "n": np.int64(3), "v": [np.float64(2.25)]})
    assert json.loads(line) == {"t": 1.5, "n": 3, "v": [2.25]}
