"""The streaming pass: a records file gives the accumulator of its records, in bounded memory, split or not."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmsweep.client.records import ErrorClass, RequestRecord
from llmsweep.errors import ResultError
from llmsweep.metrics import accumulate as acc_mod
from llmsweep.metrics import summarise
from llmsweep.metrics.accumulate import _decimal_times, accumulate
from llmsweep.metrics.stats import PERCENTILES, SketchColumn, clean, pkey, stat_block

T0 = 1_764_585_000.0


def run(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """A run as the client writes it: unrounded unix times, one chunk per token, warmups, failures, partial streams."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        sent = T0 + i * 0.37 + float(rng.random())
        kind = float(rng.random())
        err: ErrorClass | None = ("http" if kind < 0.05 else "context_overflow" if kind < 0.07
                                  else "timeout" if kind < 0.09 else "cancelled" if kind < 0.11 else None)
        osl = int(rng.integers(1, 120))
        chunks = 0 if err in ("http", "context_overflow") else osl // 2 if err else osl
        times = (sent + 0.2 + np.cumsum(rng.gamma(4.0, 0.004, chunks))).tolist()
        rec = RequestRecord(
            id=f"w0-{i}", phase="warmup" if kind > 0.97 else "profiling", scheduled_at=sent - 1e-4, sent_at=sent,
            first_byte_at=sent + 0.01, first_token_at=times[0] if times else None,
            end_at=(times[-1] if times else sent) + 0.001, chunk_times=times, chunk_tokens=[1] * chunks,
            status=200 if err is None else 500, error_class=err, error=err, prompt_tokens=1000 if err is None else None,
            completion_tokens=osl if err is None else None, cached_tokens=400, input_tokens_expected=1000,
            theoretical_cached_tokens=500, max_tokens=osl, worker=i % 3,
        )
        if i % 97 == 5:
            rec.completion_tokens = None  # the output length comes from chunk_tokens
        out.append(rec.to_dict())
    return out


def write(path: Path, records: list[dict[str, Any]], torn: bool = True) -> Path:
    """records.jsonl as the client's writer makes it, a few lines in other spellings, a torn last line."""
    with path.open("wb") as fh:
        for i, r in enumerate(records):
            if i % 50 == 7:
                fh.write((json.dumps(r) + "\n").encode())  # spaces: decoded whole
            else:
                fh.write(RequestRecord.from_dict(r).to_line())
        if torn:
            fh.write(RequestRecord.from_dict(records[0]).to_line()[:-200])
    return path


def test_lines_that_are_not_one_whole_record_are_skipped_and_counted_wherever_they_are(tmp_path: Path) -> None:
    records = run(600, seed=4)
    lines = [RequestRecord.from_dict(r).to_line() for r in records]
    two_values, extra_brace, torn = b'{"a":1},' + lines[5], lines[7][:-1] + b"}\n", lines[3][:-300] + b"\n"
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"".join([*lines[:100], two_values, *lines[100:300], torn, b"\n", *lines[300:450], extra_brace,
                               *lines[450:]]))
    got, want = summarise(path, gpus=1), summarise(records, gpus=1)
    assert got.requests.unreadable == 3 and got.validity.verdict == "invalid"  # the blank line is no record at all
    same = got.model_copy(update={"requests": got.requests.model_copy(update={"unreadable": 0}),
                                  "validity": want.validity})
    assert same == want  # every whole record counted as in one pass over the list


def exact_gaps(records: list[dict[str, Any]]) -> np.ndarray:
    """Every inter-chunk gap of the successful profiling records, as the previous pass kept them."""
    gaps = [np.diff(r["chunk_times"]) for r in records if r["phase"] != "warmup" and r["error_class"] is None]
    return clean(np.concatenate(gaps).astype(np.float32))


def test_a_file_streams_to_the_summary_of_its_records(tmp_path: Path) -> None:
    records = run(2000)
    path = write(tmp_path / "records.jsonl", records)
    assert summarise(path, gpus=2) == summarise(records, gpus=2)
    acc = accumulate(path)
    assert acc.total == len(records) and acc.itl.exact
    assert acc.cancelled and acc.warmup and acc.context_overflow and acc.failed > acc.context_overflow
    assert acc.itl.stat_block() == stat_block(exact_gaps(records))


def test_beyond_its_exact_size_the_itl_sketch_keeps_counts_and_moments_and_percentiles_within_half_a_bin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = run(2000, seed=1)
    path = write(tmp_path / "records.jsonl", records)
    monkeypatch.setattr(acc_mod, "_ITL_EXACT_MAX", 5_000)
    acc = accumulate(path)
    assert not acc.itl.exact
    got, want = acc.itl.stat_block(), stat_block(exact_gaps(records))
    assert got["count"] == want["count"] and got["min"] == want["min"] and got["max"] == want["max"]
    assert got["mean"] == pytest.approx(want["mean"], rel=1e-9) and got["std"] == pytest.approx(want["std"], rel=1e-9)
    for p in PERCENTILES:
        assert got[pkey(p)] == pytest.approx(want[pkey(p)], rel=2.5e-4)
    # the bounded stand-in for the values has the same percentiles (not the same count)
    rep = stat_block(clean(acc.itl.numpy()))
    assert rep["count"] == 5_000 and rep["min"] == want["min"] and rep["max"] == want["max"]
    assert rep["mean"] == pytest.approx(want["mean"], rel=5e-3)
    for p in PERCENTILES:
        assert rep[pkey(p)] == pytest.approx(want[pkey(p)], rel=5e-3)
    # everything else in the summary is exact
    small, big = summarise(path, gpus=1), summarise(records, gpus=1)
    for block in ("ttft", "tpot", "e2el"):
        assert getattr(small.latency, block) == getattr(big.latency, block)
    assert small.requests == big.requests and small.tokens == big.tokens
    # and the summary's ITL is the sketch's: every gap counted, not the bounded stand-in
    assert small.latency.itl.count == want["count"]


@pytest.mark.parametrize("exact_max", [2_000_000, 5_000])
def test_parts_parsed_in_parallel_merge_to_the_sequential_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exact_max: int
) -> None:
    path = write(tmp_path / "records.jsonl", run(800, seed=2))
    monkeypatch.setattr(acc_mod, "_ITL_EXACT_MAX", exact_max)
    whole = acc_mod._accumulate_range(str(path), 0, path.stat().st_size)
    monkeypatch.setattr(acc_mod, "_PART_BYTES", path.stat().st_size // 3)
    monkeypatch.setattr(acc_mod, "usable_cpus", lambda: 3)
    parts = accumulate(path)
    for name in ("total", "successful", "failed", "warmup", "cancelled", "input_sum", "output_sum", "osl_mismatch"):
        assert getattr(parts, name) == getattr(whole, name)
    for name in ("ttft", "e2el", "tpot", "ends", "span_start", "span_end", "lag"):
        assert np.array_equal(getattr(parts, name).numpy(), getattr(whole, name).numpy())
    a, b = parts.itl.stat_block(), whole.itl.stat_block()
    assert a == pytest.approx(b, rel=1e-12) and a["count"] == b["count"]


def test_parallel_parse_workers_die_quietly_under_the_clis_signal_handlers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every CLI command installs handlers that turn SIGTERM into an exception (`execute.signals.install`); forked
    parse workers inherited them, so the pool's terminate at its end raised inside them (a traceback per worker,
    about every other pass here, and once a worker that never exited). The workers take the default dispositions
    back: the passes print nothing and give the sequential pass's counts."""
    import signal

    from llmsweep.execute import signals

    path = write(tmp_path / "records.jsonl", run(400, seed=3))
    whole = acc_mod._accumulate_range(str(path), 0, path.stat().st_size)
    monkeypatch.setattr(acc_mod, "_PART_BYTES", path.stat().st_size // 3)
    monkeypatch.setattr(acc_mod, "usable_cpus", lambda: 3)
    saved = {sig: signal.getsignal(sig) for sig in signals.INTERRUPT_SIGNALS}
    signals.install()
    try:
        for _ in range(8):
            parts = accumulate(path)
            assert (parts.total, parts.successful, parts.output_sum) == (whole.total, whole.successful,
                                                                         whole.output_sum)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    err = capfd.readouterr().err
    assert "Interrupted" not in err and "Traceback" not in err, err


def test_chunk_times_parse_to_the_doubles_float_gives() -> None:
    rng = np.random.default_rng(5)
    written = [repr(v) for v in (T0 + rng.random(20_000) * 3e8).tolist()]
    written += [f"{i}.{f:09d}"[: 11 + k] for i, f, k in zip(rng.integers(10**9, 10**10, 2000).tolist(),
                                                            rng.integers(0, 10**9, 2000).tolist(),
                                                            rng.integers(1, 10, 2000).tolist(), strict=True)]
    got = _decimal_times(",".join(written).encode(), len(written))
    assert np.array_equal(got, np.array([float(w) for w in written]))
    # other spellings take the slow road to the same doubles
    for text in ("0.5,1.25,2", "1e3, 2.5,-3.0", "1764585000.5,17645850001.25", "1764585000.1234567891"):
        assert _decimal_times(text.encode(), text.count(",") + 1).tolist() == json.loads(f"[{text}]")
    with pytest.raises(ResultError):
        _decimal_times(b"1764585000.5,17645x5000.25", 2)


def test_sketch_merge_and_empty() -> None:
    rng = np.random.default_rng(9)
    values = rng.lognormal(-4.0, 1.0, 30_000)
    one, left, right = SketchColumn(exact_max=1000), SketchColumn(exact_max=1000), SketchColumn(exact_max=1000)
    one.extend(values)
    left.extend(values[:400])
    right.extend(values[400:])
    left.merge(right)
    assert left.stat_block() == pytest.approx(one.stat_block(), rel=1e-12)
    empty = SketchColumn()
    empty.extend(np.array([0.0, -1.0, np.nan]))  # not latencies
    assert empty.stat_block() == stat_block(np.zeros(0)) and len(empty) == 0


def test_an_accumulator_comes_back_from_a_worker_process_and_keeps_growing() -> None:
    records = run(40, seed=3)
    acc = accumulate(records[:20])
    back = pickle.loads(pickle.dumps(acc))
    for r in records[20:]:
        back.add(r)
    back.finish()
    whole = accumulate(records)
    assert np.array_equal(back.ttft.numpy(), whole.ttft.numpy()) and back.itl.stat_block() == whole.itl.stat_block()


def test_a_parse_worker_terminated_while_still_starting_dies_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """On a loaded machine a worker could still be starting (before its initializer put the default dispositions
    back) when the others had done every part and the pool terminated it: it ran the CLI's inherited SIGTERM handler
    and printed an `Interrupted` traceback (seen in a full test run). One worker is held in its start here."""
    import multiprocessing.util
    import os
    import signal
    import time

    from llmsweep.execute import signals

    path = write(tmp_path / "records.jsonl", run(400, seed=3))
    whole = acc_mod._accumulate_range(str(path), 0, path.stat().st_size)
    monkeypatch.setattr(acc_mod, "_PART_BYTES", path.stat().st_size // 3)
    monkeypatch.setattr(acc_mod, "usable_cpus", lambda: 3)
    marker = tmp_path / "slow"
    real = multiprocessing.util._close_stdin  # type: ignore[attr-defined]

    def slow_start() -> None:  # the first worker forked stays in its start-up 2 s
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
            time.sleep(2.0)
        except FileExistsError:
            pass
        real()

    monkeypatch.setattr(multiprocessing.util, "_close_stdin", slow_start)
    saved = {sig: signal.getsignal(sig) for sig in signals.INTERRUPT_SIGNALS}
    signals.install()
    try:
        parts = accumulate(path)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert marker.exists() and (parts.total, parts.output_sum) == (whole.total, whole.output_sum)
    err = capfd.readouterr().err
    assert "Interrupted" not in err and "Traceback" not in err, err
