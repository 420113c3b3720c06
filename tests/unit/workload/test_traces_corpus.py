from __future__ import annotations

import gzip
import itertools
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.traces import traces as traces_cli
from llmsweep.errors import DatasetError
from llmsweep.workload.traces.loader import load_traces
from llmsweep.workload.traces.plan import build_plan
from llmsweep.workload.traces.stats import REFERENCE_BANDS, band_report, corpus_stats, lookup
from llmsweep.workload.traces.synth import SynthProfile, synthesize


@pytest.mark.parametrize("seed", [0, 1])
def test_default_synthetic_corpus_lands_in_published_bands(seed: int) -> None:
    stats = corpus_stats(synthesize(SynthProfile(seed=seed)))
    outside = [(row["key"], row["value"]) for row in band_report(stats) if not row["inside"]]
    assert not outside, outside
    # Shape beyond the headline bands: subagents fan out, some run in the background, pauses exceed the cap.
    assert stats.subagent_groups_per_trace.mean >= 3
    assert stats.spawn_batch_size.max >= 3 and 1.3 <= stats.spawn_batch_size.mean <= 3
    assert stats.background_groups > 0
    assert 0.5 <= stats.think_time_s.p50 <= 5 and stats.think_time_above_cap_share > 0
    assert stats.isl.max <= 1_000_000


def test_reference_bands_are_checked_not_decorative() -> None:
    stats = corpus_stats(synthesize(SynthProfile(traces=4, max_isl=16384)))
    assert not all(row["inside"] for row in band_report(stats))  # a 16k corpus is not the published one...
    assert set(REFERENCE_BANDS) == {row["key"] for row in band_report(stats)}


def test_small_profile_keeps_shape_and_respects_max_isl() -> None:
    corpus = synthesize(SynthProfile(traces=12, seed=4, max_isl=16384))
    stats = corpus_stats(corpus)
    assert stats.isl.max <= 16384
    scaled = band_report(stats, scale=16384 / 1_000_000)
    assert all(row["inside"] for row in scaled), scaled
    assert stats.subagent_groups > 0 and stats.background_groups > 0


def test_synthesis_is_deterministic_and_blocks_grow_by_prefix() -> None:
    a = synthesize(SynthProfile(traces=3, seed=9, max_isl=16384))
    b = synthesize(SynthProfile(traces=3, seed=9, max_isl=16384))
    assert [t.to_json_line() for t in a] == [t.to_json_line() for t in b]
    mains = a[0].main_requests
    for prev, cur in itertools.pairwise(mains):
        assert cur.in_tokens == 64 * len(cur.hash_ids)
        extends = cur.hash_ids[: len(prev.hash_ids)] == prev.hash_ids
        compacted = len(cur.hash_ids) < len(prev.hash_ids)
        assert extends or compacted
    assert a[0].requests == sorted(a[0].requests, key=lambda e: e.t)


def test_synthetic_background_children_outlive_their_root_somewhere() -> None:
    corpus = synthesize(SynthProfile(traces=40, seed=0, max_isl=16384, background_probability=0.5))
    outliving = 0
    for trace in corpus:
        plan = build_plan(trace)
        root_end = max(r.end for r in trace.main_requests)
        outliving += sum(1 for i in plan.background if trace.subagents[i].end > root_end)  # no dropped entries
    assert outliving > 0


def test_stats_of_the_handbuilt_traces(traces_dir: Path) -> None:
    stats = corpus_stats(load_traces(traces_dir / "handbuilt.jsonl"))
    assert (stats.traces, stats.main_turns, stats.subagent_groups, stats.subagent_inner_requests) == (2, 7, 3, 5)
    assert stats.spawn_batch_size.max == 2  # explore_002 and general_purpose_001 share an anchor
    assert (stats.background_groups, stats.outliving_groups) == (1, 1)
    assert stats.think_time_above_cap_share > 0
    assert lookup(stats, "isl.max") == 512


def test_cli_synth_then_stats_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "corpus.jsonl"
    runner = CliRunner()
    made = runner.invoke(traces_cli, ["synth", "--out", str(out), "--num-traces", "6", "--seed", "2",
                                      "--max-isl", "16384"])
    assert made.exit_code == 0, made.output
    assert len(out.read_text().splitlines()) == 6
    shown = runner.invoke(traces_cli, ["stats", str(out), "--json", "--scale-to", "16384"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["traces"] == 6 and data["isl"]["max"] <= 16384
    assert {row["key"] for row in data["reference"]} == set(REFERENCE_BANDS)
    table = runner.invoke(traces_cli, ["stats", str(tmp_path)])
    assert table.exit_code == 0 and "prefix hit" in table.stdout



def test_cli_stats_reads_the_corpus_one_trace_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`traces stats` held the whole corpus (3.7 GB of peak RSS for a 0.5 GB traces.jsonl of 256 full-scale sessions,
    0.4 GB streamed, measured 2026-12-06): a trace read is released before the next is, and the figures are the
    same as over the corpus held whole."""
    import gc
    import weakref

    from llmsweep.workload.traces import loader
    from llmsweep.workload.traces.synth import write_jsonl

    corpus = synthesize(SynthProfile(traces=5, seed=4, max_isl=8192))
    write_jsonl(corpus, tmp_path / "c.jsonl")
    alive: list[weakref.ref[object]] = []
    peak = 0
    real = loader.iter_traces

    def watched(source: str | Path, files: object = None, *, revision: str | None = None) -> object:
        nonlocal peak
        for trace in real(source, revision=revision):
            gc.collect()
            peak = max(peak, sum(ref() is not None for ref in alive))
            alive.append(weakref.ref(trace))
            yield trace

    monkeypatch.setattr(loader, "iter_traces", watched)
    shown = CliRunner().invoke(traces_cli, ["stats", str(tmp_path / "c.jsonl"), "--json"])
    assert shown.exit_code == 0, shown.output
    assert len(alive) == 5 and peak <= 1  # the one just handed on, at most: held whole, 4 when the 5th was read
    data = json.loads(shown.stdout)
    del data["reference"]
    assert data == corpus_stats(corpus).to_json()
    limited = CliRunner().invoke(traces_cli, ["stats", str(tmp_path / "c.jsonl"), "--json", "--limit", "2"])
    assert json.loads(limited.stdout)["traces"] == 2
    (tmp_path / "empty.jsonl").write_text("\n")
    empty = CliRunner().invoke(traces_cli, ["stats", str(tmp_path / "empty.jsonl")])
    assert isinstance(empty.exception, DatasetError) and "no traces found" in empty.exception.message

def test_loader_reads_directories_and_skips_non_trace_json(tmp_path: Path, traces_dir: Path) -> None:
    (tmp_path / "a.jsonl").write_text((traces_dir / "handbuilt.jsonl").read_text())
    single = json.loads((traces_dir / "handbuilt.jsonl").read_text().splitlines()[1])
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "one.json").write_text(json.dumps({**single, "id": "tree-c"}))
    (tmp_path / "manifest.json").write_text(json.dumps({"sessions": 3}))
    assert [t.id for t in load_traces(tmp_path)] == ["tree-a", "tree-b", "tree-c"]


def test_a_session_read_twice_is_refused_naming_both_places(tmp_path: Path, traces_dir: Path) -> None:
    """AgentX's pipeline writes one file per session, then a traces.jsonl of them all: a folder holding both read
    every session twice (a corpus double its size, each session's lane→trace share doubled), with nothing said."""
    lines = (traces_dir / "handbuilt.jsonl").read_text().splitlines()
    (tmp_path / "traces.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "tree-b.json").write_text(lines[1])
    with pytest.raises(DatasetError, match=r"traces\.jsonl:2: trace id 'tree-b' appears again \(first at "
                                           r".*sessions/tree-b\.json:1\)") as caught:
        load_traces(tmp_path)
    assert "point at one or the other" in (caught.value.fix or "")
    assert [t.id for t in load_traces(tmp_path / "traces.jsonl")] == ["tree-a", "tree-b"]
    # within one file too, and in a JSON list by its item
    (tmp_path / "twice.jsonl").write_text(lines[0] + "\n" + lines[1] + "\n" + lines[0] + "\n")
    with pytest.raises(DatasetError, match=r"twice\.jsonl:3: trace id 'tree-a' appears again \(first at "
                                           r".*twice\.jsonl:1\)"):
        load_traces(tmp_path / "twice.jsonl")
    (tmp_path / "list.json").write_text(f"[{lines[0]}, {lines[0]}]")
    with pytest.raises(DatasetError, match=r"list\.json:1 \(item 1\): trace id 'tree-a' appears again"):
        load_traces(tmp_path / "list.json")


def test_loader_ignores_unknown_fields_but_names_file_and_line_of_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = {"id": "x", "future_field": 1, "requests": [{"t": 0, "in": 64, "out": 1, "hash_ids": [0], "new": 2}]}
    bad = {"id": "y", "requests": [{"t": 0, "in": "many", "out": 1}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DatasetError, match=r"t\.jsonl:2: .*requests\.0.*in"):
        load_traces(path)
    path.write_text(json.dumps(good) + "\n")
    assert load_traces(path)[0].requests[0].in_tokens == 64  # type: ignore[union-attr]


def test_loader_errors_for_missing_or_empty_sources(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"nope\.jsonl does not exist \(no such file or directory\)"):
        load_traces(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="neither a file"):  # a word that names nothing here or on the hub
        load_traces("nope")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="no traces"):
        load_traces(tmp_path / "empty.jsonl")
    (tmp_path / "broken.jsonl").write_text('{"id": "a", "requests": [}\n')
    with pytest.raises(DatasetError, match=r"broken\.jsonl:1: not valid JSON"):
        load_traces(tmp_path / "broken.jsonl")


@pytest.mark.parametrize("value", [float("inf"), float("nan"), float("-inf")])
def test_loader_refuses_non_finite_times_naming_the_line(tmp_path: Path, value: float) -> None:
    """Python's json writes NaN and Infinity, and the JSON parser took them: an infinite start became a replay sleep
    that never ends (a virtual-time run spun at full CPU past its window, forever), a NaN one a silent 0 s gap."""
    turns = [{"t": float(k), "in": 64 * (k + 1), "out": 8, "hash_ids": list(range(k + 1)), "api_time": 0.5}
             for k in range(4)]
    good = {"id": "ok", "requests": turns}
    path = tmp_path / "t.jsonl"
    for field, entry in (("t", {**turns[2], "t": value}), ("api_time", {**turns[2], "api_time": value}),
                         ("duration_ms", {"type": "subagent", "t": 1.0, "agent_id": "a", "duration_ms": value,
                                          "requests": [turns[1]]})):
        bad = {"id": "bad", "requests": [*turns[:2], entry, *turns[3:]]}
        path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(DatasetError, match=rf"t\.jsonl:2: .*requests\.2.*{field}.*finite"):
            load_traces(path)
    (tmp_path / "one.json").write_text(json.dumps({**good, "requests": [{**turns[0], "t": value}]}))
    with pytest.raises(DatasetError, match=r"one\.json:1: .*finite"):
        load_traces(tmp_path / "one.json")


@pytest.mark.parametrize(("field", "value", "said"), [
    ("in", True, "`true` is a boolean, not a number"), ("out", False, "`false` is a boolean, not a number"),
    ("t", True, "`true` is a boolean"), ("hash_ids", [0, True], "valid integer (given `true`)"),
    ("hash_ids", [0, "1"], 'valid integer (given `"1"`)'),
    ("in", "5000", '`"5000"` is a string, not a number: write it without quotes'),
    ("api_time", "0.5", '`"0.5"` is a string, not a number'),
])
def test_loader_refuses_a_boolean_or_a_quoted_figure_where_a_trace_holds_a_number(
        tmp_path: Path, field: str, value: object, said: str) -> None:
    """pydantic's lax mode read `"in": true` as a one-token prompt and `"in": "5000"` as 5000: a damaged or
    hand-edited trace replayed under figures it does not hold. A trace's numbers are JSON numbers (`JsonNumber`, the
    rule Mooncake rows follow), refused at the trace's line naming the field."""
    turns = [{"t": float(k), "in": 64 * (k + 1), "out": 8, "hash_ids": list(range(k + 1)), "api_time": 0.5}
             for k in range(3)]
    path = tmp_path / "t.jsonl"
    bad = {"id": "bad", "requests": [turns[0], {**turns[1], field: value}, turns[2]]}
    path.write_text(json.dumps({"id": "ok", "requests": turns}) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DatasetError) as err:
        load_traces(path)
    assert re.search(rf"t\.jsonl:2: .*requests\.1.*{field}", str(err.value)), err.value
    assert said in str(err.value), err.value


def test_loader_refuses_negative_times_naming_the_line(tmp_path: Path) -> None:
    """`t` counts seconds since the session's first row and a subagent's duration is an elapsed time: a negative one
    is a damaged row (it loaded, and the replay drew an idle gap from it), named at its line like any other."""
    turns = [{"t": float(k), "in": 64 * (k + 1), "out": 8, "hash_ids": list(range(k + 1)), "api_time": 0.5}
             for k in range(4)]
    path = tmp_path / "t.jsonl"
    for field, entry in (("t", {**turns[2], "t": -3.0}),
                         ("t", {"type": "subagent", "t": -1.0, "agent_id": "a", "requests": [turns[1]]}),
                         ("duration_ms", {"type": "subagent", "t": 1.0, "agent_id": "a", "duration_ms": -5.0,
                                          "requests": [turns[1]]})):
        bad = {"id": "bad", "requests": [*turns[:2], entry, *turns[3:]]}
        path.write_text(json.dumps({"id": "ok", "requests": turns}) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(DatasetError, match=rf"t\.jsonl:2: .*requests\.2.*{field}.*greater than or equal to 0"):
            load_traces(path)


def test_a_folder_holding_a_trace_file_and_its_gzip_copy_is_refused(tmp_path: Path) -> None:
    """`gzip -k traces.jsonl` leaves both: the folder read every session twice (a corpus double its size, each
    session's prefix cached by its own twin), with nothing said."""
    import gzip

    line = json.dumps({"id": "s", "requests": [{"t": 0.0, "in": 64, "out": 8, "hash_ids": [1]}]}) + "\n"
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "traces.jsonl").write_text(line)
    (folder / "other.jsonl").write_text(line.replace('"s"', '"o"'))
    assert [t.id for t in load_traces(folder)] == ["o", "s"]
    (folder / "traces.jsonl.gz").write_bytes(gzip.compress(line.encode()))
    with pytest.raises(DatasetError, match=r"holds traces\.jsonl and its gzip copy traces\.jsonl\.gz") as caught:
        load_traces(folder)
    assert "keep one of each pair" in (caught.value.fix or "")
    assert [t.id for t in load_traces(folder / "traces.jsonl.gz")] == ["s"]  # the file itself, named, is read


@pytest.mark.parametrize("block_id", [-1, 1 << 63, 1 << 70])
def test_loader_refuses_block_ids_outside_64_bits_naming_the_line(tmp_path: Path, block_id: int) -> None:
    """Block ids are hashed as unsigned 64-bit words: a negative or larger id loaded, then `traces stats` or the
    first replay of that row stopped with an OverflowError traceback."""
    turns = [{"t": float(k), "in": 64 * (k + 1), "out": 8, "hash_ids": list(range(k + 1))} for k in range(3)]
    largest = {"id": "edge", "requests": [{**turns[0], "hash_ids": [(1 << 63) - 1]}]}
    bad = {"id": "bad", "requests": [*turns[:2], {**turns[2], "hash_ids": [0, 1, block_id]}]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(largest) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DatasetError, match=r"t\.jsonl:2: .*requests\.2.*hash_ids\.2"):
        load_traces(path)
    path.write_text(json.dumps(largest) + "\n")
    result = CliRunner().invoke(traces_cli, ["stats", str(path), "--json"])
    assert result.exit_code == 0, result.output


def test_loader_reads_files_written_with_a_utf8_byte_order_mark(tmp_path: Path) -> None:
    """PowerShell's and Notepad's UTF-8 starts with a BOM: the first line was 'not valid JSON' and the corpus
    refused."""
    trace = {"id": "séance-☃", "requests": [{"t": 0, "in": 64, "out": 1, "hash_ids": [0]}]}
    (tmp_path / "t.jsonl").write_text(json.dumps(trace, ensure_ascii=False) + "\n", encoding="utf-8-sig")
    (tmp_path / "t.json").write_text(json.dumps([trace], ensure_ascii=False), encoding="utf-8-sig")
    assert [t.id for t in load_traces(tmp_path / "t.jsonl")] == ["séance-☃"]
    assert [t.id for t in load_traces(tmp_path / "t.json")] == ["séance-☃"]
    # a file that is not UTF-8 text is said as such (it was a UnicodeDecodeError traceback out of `run`), and a line
    # with a bad byte by its number
    line = json.dumps(trace) + "\n"
    (tmp_path / "u16.jsonl").write_text(line, encoding="utf-16")
    with pytest.raises(DatasetError, match=r"u16\.jsonl: not UTF-8 text \(UTF-16\)"):
        load_traces(tmp_path / "u16.jsonl")
    # gzip-compressed JSON lines are read, named .jsonl.gz or a .gz that kept its .jsonl name; a cut one is said
    other = json.dumps({**trace, "id": "zwei"}) + "\n"
    for name in ("gz.jsonl", "t.jsonl.gz"):
        (tmp_path / name).write_bytes(gzip.compress((line + other).encode()))
        assert [t.id for t in load_traces(tmp_path / name)] == ["séance-☃", "zwei"]
    many = [(json.dumps({**trace, "id": f"s{k}"}) + "\n").encode() for k in range(50)]
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(b"".join(many))[:-12])
    with pytest.raises(DatasetError, match=r"cut\.jsonl\.gz: the gzip stream is damaged after line"):
        load_traces(tmp_path / "cut.jsonl.gz")
    (tmp_path / "bad.jsonl").write_bytes(b"".join(many[:2]) + line.encode().replace(b"s\\u", b"\xff"))
    with pytest.raises(DatasetError, match=r"bad\.jsonl:3: not valid JSON"):
        load_traces(tmp_path / "bad.jsonl")
    (tmp_path / "bad.json").write_bytes(b'[{"id": "\xff"}]')
    with pytest.raises(DatasetError, match=r"bad\.json: not UTF-8 text"):
        load_traces(tmp_path / "bad.json")
    # a .json nested beyond Python's recursion limit: a RecursionError traceback out of `traces stats`
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(DatasetError, match=r"deep\.json: JSON nested too deep"):
        load_traces(tmp_path / "deep.json")


@pytest.mark.parametrize("field", ["in", "out"])
def test_loader_refuses_a_token_count_no_model_could_hold_naming_the_line(tmp_path: Path, field: str) -> None:
    """A row recording 1e9 input tokens loaded, and a live replay would build a billion tokens of prompt text before
    any server could refuse it."""
    turns = [{"t": float(k), "in": 64, "out": 8, "hash_ids": [k], "api_time": 0.5} for k in range(3)]
    bad = {"id": "bad", "requests": [*turns[:1], {**turns[1], field: 10**9}, *turns[2:]]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "ok", "requests": turns}) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DatasetError, match=rf"t\.jsonl:2: .*requests\.1.*{field}"):
        load_traces(path)


def test_a_corpus_written_to_a_gz_path_is_compressed_reproducible_and_reads_back_the_same(tmp_path: Path) -> None:
    """`write_jsonl` to `*.jsonl.gz` (`traces synth --out`, a run's kept corpus): gzip, the same bytes each time (no
    timestamp in the header, so a kept corpus does not change under git), the same traces and digest back."""
    from llmsweep.workload.agentic import replay_corpus_digest
    from llmsweep.workload.traces.synth import SynthProfile, synthesize, write_jsonl

    corpus = synthesize(SynthProfile(traces=6, seed=3, max_isl=8192))
    write_jsonl(corpus, tmp_path / "a.jsonl")
    write_jsonl(corpus, tmp_path / "a.jsonl.gz")
    first = (tmp_path / "a.jsonl.gz").read_bytes()
    write_jsonl(corpus, tmp_path / "a.jsonl.gz")
    assert first[:2] == b"\x1f\x8b" and (tmp_path / "a.jsonl.gz").read_bytes() == first
    assert gzip.decompress(first) == (tmp_path / "a.jsonl").read_bytes()
    assert len(first) < (tmp_path / "a.jsonl").stat().st_size / 3
    assert replay_corpus_digest(str(tmp_path / "a.jsonl.gz")) == replay_corpus_digest(str(tmp_path / "a.jsonl"))


def test_a_local_trace_path_that_does_not_exist_is_said_as_such_not_fetched_from_the_hub(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--traces data/traces.jsonl` that does not exist read as the hub dataset `data/traces.jsonl`: the user saw
    'could not fetch trace dataset … from the Hugging Face hub'. A trace file's name, or a path under a folder that is
    here, is a local path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()

    def no_hub(repo_id: str, revision: str | None = None) -> Path:
        raise AssertionError(f"asked the hub for {repo_id}")

    monkeypatch.setattr("llmsweep.workload.traces.loader.download_dataset", no_hub)
    for missing in ("data/traces.jsonl", "elsewhere/t.json", "data/corpus", "t.jsonl.gz"):
        with pytest.raises(DatasetError, match=rf"trace source {re.escape(missing)} does not exist"):
            load_traces(missing)


def test_json_lines_and_gzip_under_other_names_are_read_not_called_invalid_json(tmp_path: Path) -> None:
    """`datasets`' `to_json` writes JSON lines under `.json`: line 2 was 'not valid JSON (Extra data)', fix 'repair
    or regenerate'; a gzip-compressed `.json.gz` or `.gz` was 'not UTF-8 text' with the fix 'gzip-compressed ones are
    read too'."""
    traces = [{"id": name, "requests": [{"t": 0, "in": 64, "out": 1, "hash_ids": [0]}]} for name in ("a", "b")]
    lines = "".join(json.dumps(t) + "\n" for t in traces)
    (tmp_path / "lines.json").write_text(lines)
    (tmp_path / "lines.txt").write_text(lines)
    (tmp_path / "lines.gz").write_bytes(gzip.compress(lines.encode()))
    (tmp_path / "list.json.gz").write_bytes(gzip.compress(json.dumps(traces).encode()))
    for name in ("lines.json", "lines.txt", "lines.gz", "list.json.gz"):
        assert [t.id for t in load_traces(tmp_path / name)] == ["a", "b"], name
    # a damaged line is still named by its number
    (tmp_path / "bad.json").write_text(json.dumps(traces[0]) + "\n{oops\n")
    with pytest.raises(DatasetError, match=r"bad\.json:2: not valid JSON"):
        load_traces(tmp_path / "bad.json")
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(json.dumps(traces).encode())[:-12])
    with pytest.raises(DatasetError, match=r"cut\.json\.gz: the gzip stream is damaged"):
        load_traces(tmp_path / "cut.json.gz")


def test_top_level_requests_out_of_start_order_are_refused_naming_the_line(tmp_path: Path) -> None:
    """A trace whose turn at t=40 s is listed after the one at t=300 s loaded: the plan took a 279 s pause, then ran
    the earlier turn at once, and t* was bisected over unsorted starts — another timeline under the corpus's name."""
    def turn(t: float, n: int) -> dict[str, object]:
        return {"t": t, "in": 64 * n, "out": 8, "hash_ids": list(range(n)), "api_time": 1.0}

    sub = {"type": "subagent", "t": 21.5, "agent_id": "a", "requests": [turn(21.5, 1), turn(25.0, 2)]}
    ordered = {"id": "ok", "requests": [turn(0, 1), turn(10, 2), turn(20, 3), sub, turn(20, 4), turn(40, 5)]}
    unordered = {"id": "bad", "requests": [turn(0, 1), turn(10, 2), turn(300, 3), sub, turn(40, 4)]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(ordered) + "\n" + json.dumps(unordered) + "\n")
    with pytest.raises(DatasetError, match=r"t\.jsonl:2: trace 'bad': requests\.4\.t = 40 s is before "
                                           r"requests\.2\.t = 300 s") as caught:
        load_traces(path)
    assert "sort each trace's requests[] by t" in (caught.value.fix or "")
    path.write_text(json.dumps(ordered) + "\n")  # equal starts, and a subagent between turns, are in order
    assert [len(t.main_requests) for t in load_traces(path)] == [5]
