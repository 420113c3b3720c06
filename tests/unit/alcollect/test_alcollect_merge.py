"""Completing a curve with a second collection (`llmsweep al collect --merge-into`): the union of the cells, a source
that names every collection, the notes of both less the untrue ones, and a refusal naming each field that differs.

The two H200 collections of SmolLM2's n-gram curve (K = 1-3, then K = 4 in a second device call) are the worked case:
their merge is the packaged curve."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.alcollect.merge import BEFORE_MEASURING, Collected, collections, differences, merge
from llmsweep.catalog.golden import CurveHeader, format_curve, load_curve, mode_sampling, read_curve_header
from llmsweep.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "examples" / "results"
PACKAGED = REPO / "src" / "llmsweep" / "catalog" / "data" / "golden_al" / "smollm2_ngram.yaml"
K4_NOTES = ("K=4 (2.38) sits below K=3 (2.66): 12 prompts at temperature 1.0, one server per cell; the cell-to-cell "
            "spread was not measured, so read the curve's shape past K=3 as within that noise",
            "evidence of both collections (/tmp/al-runs on the device): examples/results/h200-al-collect-smollm2/ and "
            "examples/results/h200-al-collect-smollm2-k4/ (al-evidence.tgz)")


def _read(path: Path, notes: tuple[str, ...] = ()) -> Collected:
    header, curve = read_curve_header(path)
    header = header.model_copy(update={"notes": [*header.notes, *notes]})
    return Collected(model_prefix=curve.model_prefix, header=header, values=curve.values)


def _header(**changes: object) -> CurveHeader:
    base: dict[str, object] = dict(
        source="llmsweep al collect on h200-a at 2026-12-01T14:00:00Z (evidence: /runs/a)",
        checkpoint="qwen3.5-397b-a17b-fp8", method="mtp", precision="fp8 (config.json of /models/q)",
        hardware="1 x NVIDIA H200 (nvidia-smi)", engine="vllm 0.26.0 (reported by /version)",
        dataset="coding (nvidia/SPEED-Bench qualitative/test, 80 prompts)",
        sampling={"thinking_on": {"temperature": 0.6, "top_p": 0.95, "top_k": 20}}, output_len=4096,
        chat_template_kwargs={"thinking_on": {"enable_thinking": True}}, generator="llmsweep al collect (test)")
    base.update(changes)
    return CurveHeader.model_validate(base)


def _curve(values: dict[int, float], prefix: str = "qwen3.5", **changes: object) -> Collected:
    return Collected(model_prefix=prefix, header=_header(**changes), values={"thinking_on": values})


def test_the_two_h200_collections_merge_into_the_packaged_curve() -> None:
    first = _read(H200 / "h200-al-collect-smollm2" / "golden_al" / "smollm2_ngram.yaml")
    second = _read(H200 / "h200-al-collect-smollm2-k4" / "golden_al" / "smollm2_ngram.yaml", K4_NOTES)
    assert differences(first, second) == []
    merged = merge(first, second)
    assert merged.values == {"thinking_off": {1: 1.77, 2: 2.28, 3: 2.66, 4: 2.38}} and merged.replaced == []
    assert merged.header.source == (
        "llmsweep al collect, 2 collections: thinking_off K=1 2 3 on vm at 2026-12-01T14:09:27Z (evidence: "
        "/tmp/al-runs); thinking_off K=4 on vm at 2026-12-01T16:33:27Z (evidence: /tmp/al-runs)")
    assert not any(n.startswith("not measured:") for n in merged.header.notes)  # K=4 "interrupted" is measured now
    assert len([n for n in merged.header.notes if n.startswith("concurrency 1")]) == 1  # the same note once
    assert format_curve(merged.header, merged.values) == PACKAGED.read_text()
    curve = load_curve(PACKAGED)  # and `llmsweep al` reads it as before
    assert curve.precision_measured == "bf16" and curve.hardware == "1 x NVIDIA H200 (nvidia-smi)"


def test_a_cell_measured_again_replaces_the_old_one_and_a_note_says_both_values() -> None:
    old = _curve({1: 1.9, 2: 2.6, 3: 3.0}, notes=["thinking_on K=3: 2 of 80 requests failed",
                                                 "not measured: thinking_on K=4 (interrupted)", "eager"])
    new = _curve({3: 3.1, 4: 3.4}, source="llmsweep al collect on h200-b at 2026-12-02T09:00:00Z (evidence: /runs/b)",
                 notes=["eager", "not measured: thinking_on K=1 (server exited)"])
    merged = merge(old, new)
    assert merged.values == {"thinking_on": {1: 1.9, 2: 2.6, 3: 3.1, 4: 3.4}}
    (r,) = merged.replaced
    assert (r.thinking, r.k, r.old, r.new) == ("thinking_on", 3, 3.0, 3.1)
    assert r.old_collection == "on h200-a at 2026-12-01T14:00:00Z (evidence: /runs/a)"
    assert merged.header.notes == [
        "eager",  # the failed requests were the old K=3's; K=4 and K=1 are in the curve: those notes went
        "thinking_on K=3: 3.10 from the collection on h200-b at 2026-12-02T09:00:00Z (evidence: /runs/b) replaces "
        "3.00 from the one on h200-a at 2026-12-01T14:00:00Z (evidence: /runs/a)"]
    assert merged.header.source == (
        "llmsweep al collect, 2 collections: thinking_on K=1 2 on h200-a at 2026-12-01T14:00:00Z (evidence: /runs/a); "
        "thinking_on K=3 4 on h200-b at 2026-12-02T09:00:00Z (evidence: /runs/b)")


def test_a_third_collection_reads_the_merged_source_back_and_drops_a_collection_it_replaces_whole() -> None:
    first = merge(_curve({1: 1.9, 2: 2.6}), _curve({3: 3.1}, source="llmsweep al collect on b at T2 (evidence: /b)"))
    again = Collected(model_prefix="qwen3.5", header=first.header, values=first.values)
    assert [(c.text, sorted(c.cells)) for c in collections(again)] == [
        ("on h200-a at 2026-12-01T14:00:00Z (evidence: /runs/a)", [("thinking_on", 1), ("thinking_on", 2)]),
        ("on b at T2 (evidence: /b)", [("thinking_on", 3)])]
    third = merge(again, _curve({3: 3.2, 4: 3.5}, source="llmsweep al collect on c at T3 (evidence: /c)"))
    assert third.header.source == ("llmsweep al collect, 2 collections: thinking_on K=1 2 on h200-a at "
                                   "2026-12-01T14:00:00Z (evidence: /runs/a); thinking_on K=3 4 on c at T3 "
                                   "(evidence: /c)")
    assert [r.old_collection for r in third.replaced] == ["on b at T2 (evidence: /b)"]


def test_a_new_thinking_mode_joins_with_its_own_kwargs() -> None:
    off = _curve({2: 2.2}, chat_template_kwargs={"thinking_off": {}},
                 sampling={"thinking_off": {"temperature": 0.6, "top_p": 0.95, "top_k": 20}})
    off = Collected(model_prefix="qwen3.5", header=off.header, values={"thinking_off": {2: 2.2}})
    on = _curve({2: 2.7})
    assert differences(off, on) == []  # no mode in common: nothing to compare kwargs with
    merged = merge(off, on)
    assert merged.header.chat_template_kwargs == {"thinking_off": {}, "thinking_on": {"enable_thinking": True}}
    assert "# thinking_on chat_template_kwargs: {\"enable_thinking\": true}" in format_curve(merged.header,
                                                                                            merged.values)


def test_a_dataset_line_is_compared_with_the_digest_of_its_prompts_and_an_older_line_without_it() -> None:
    """Same origin and count, other prompts (a file edited in place): the digests differ, so the lines do. A line
    written before the digest was recorded is compared on its origin and count alone."""
    from llmsweep.alcollect.merge import same_dataset
    from llmsweep.alcollect.prompts import sent_digest

    a, b = sent_digest(["sort a list", "parse a date"]), sent_digest(["sort a list", "parse a time"])
    assert a != b and sent_digest(["ab", "c"]) != sent_digest(["a", "bc"])  # where a prompt ends counts
    line = "coding (/p/mine.jsonl, 2 prompts, sha256 {})"
    assert same_dataset(line.format(a), line.format(a))
    assert not same_dataset(line.format(a), line.format(b))
    assert same_dataset("coding (/p/mine.jsonl, 2 prompts)", line.format(b))
    assert not same_dataset("coding (/p/mine.jsonl, 3 prompts)", line.format(b))
    old, new = _curve({1: 1.9}, dataset=line.format(a)), _curve({2: 2.6}, dataset=line.format(b))
    (found,) = differences(old, new)
    assert found.startswith("dataset: ") and a in found and b in found


@pytest.mark.parametrize(("change", "named"), [
    ({"checkpoint": "qwen3.5-397b-a17b-nvfp4"}, "checkpoint"),
    ({"precision": "nvfp4 (config.json of /models/q4)"}, "precision"),
    ({"hardware": "8 x NVIDIA B200 (nvidia-smi)"}, "hardware"),
    ({"engine": "vllm 0.27.0 (reported by /version)"}, "engine"),
    ({"dataset": "coding (llmsweep builtin coding set (not SPEED-Bench), 24 prompts)"}, "dataset"),
    ({"sampling": {"thinking_on": {"temperature": 1.0, "top_p": 0.95, "top_k": 20}}}, "thinking_on sampling"),
    ({"output_len": 512}, "output_len"),
    ({"simulated": True}, "simulated"),
    ({"chat_template_kwargs": {"thinking_on": {"thinking_mode": "enabled"}}}, "thinking_on chat_template_kwargs"),
    ({"method": "eagle3"}, "method"),
    ({"prefix": "qwen3"}, "model prefix"),
])
def test_each_difference_is_named_with_both_values(change: dict[str, object], named: str) -> None:
    prefix = str(change.pop("prefix", "qwen3.5"))
    old, new = _curve({1: 1.9}), _curve({2: 2.6}, prefix=prefix, **change)
    (found,) = differences(old, new)
    assert found.startswith(f"{named}: ") and "in the curve" in found and "in this collection" in found


@pytest.mark.parametrize("precision", ["fp8 (config.json of /data/hf/Qwen3.5-397B-A17B-FP8)", "fp8 (recipe)",
                                       "FP8 (hf_quant_config.json of /m: quant_algo FP8)"])
def test_the_same_precision_read_elsewhere_or_spelled_otherwise_is_one_precision(precision: str) -> None:
    """A curve collected from a local model directory and cells from the hub id (or another path, or a record that
    spells it in capitals) state one precision: compared as `llmsweep al` matches a curve to a recipe (its family)."""
    old = _curve({1: 1.9})  # fp8 (config.json of /models/q)
    assert differences(old, _curve({2: 2.6}, precision=precision)) == []
    assert differences(old, _curve({2: 2.6}, precision="bf16 (recipe)")) == [
        "precision: 'fp8 (config.json of /models/q)' in the curve, 'bf16 (recipe)' in this collection"]


def test_a_collection_on_the_mxfp4_checkpoint_does_not_complete_an_nvfp4_curve() -> None:
    """NVFP4 (NVIDIA's block-16 FP8-scale quantisation) and MXFP4 (AMD's block-32 E8M0 one) are two checkpoints: their
    cells are not one curve (both had read as fp4). A bare `fp4` line is not merged with either: the union could
    hold both (`--precision` states the one served)."""
    nvfp4 = "nvfp4 (hf_quant_config.json of /models/q4: quant_algo NVFP4)"
    old = _curve({1: 1.9}, precision=nvfp4)
    assert differences(old, _curve({2: 2.6}, precision="NVFP4 (recipe)")) == []
    for other in ("mxfp4 (hf_quant_config.json of /models/amd: quant_algo MXFP4)", "fp4 (recipe)"):
        assert differences(old, _curve({2: 2.6}, precision=other)) == [
            f"precision: {nvfp4!r} in the curve, {other!r} in this collection"]


@pytest.mark.parametrize(("hardware", "same"), [
    ("h200 (runner label; not read from the host)", True),
    ("cluster:h200-lent (runner label; not read from the host)", True),
    ("8 x NVIDIA H200 (nvidia-smi)", True),
    ("simulated h200", False),  # the simulator standing in for an H200 is not one
    ("1 x NVIDIA B200 (nvidia-smi)", False),
    ("1 x NVIDIA H100 80GB HBM3 (nvidia-smi)", False),
])
def test_the_same_gpu_read_by_nvidia_smi_or_named_by_the_runner_is_one_hardware(hardware: str, same: bool) -> None:
    old = _curve({1: 1.9})  # 1 x NVIDIA H200 (nvidia-smi)
    found = differences(old, _curve({2: 2.6}, hardware=hardware))
    assert found == ([] if same else [f"hardware: '1 x NVIDIA H200 (nvidia-smi)' in the curve, {hardware!r} in this "
                                      "collection"])


def test_the_servers_hardware_and_engine_wait_for_the_measurement() -> None:
    old, new = _curve({1: 1.9}), _curve({2: 2.6}, hardware="simulated h200", engine="llmsweep simulator")
    assert differences(old, new, BEFORE_MEASURING) == []
    assert [d.split(":")[0] for d in differences(old, new)] == ["hardware", "engine"]


QWEN_ON = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
QWEN_OFF = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5}


def _both_modes(on: dict[int, float], off: dict[int, float], **changes: object) -> Collected:
    header = _header(sampling={"thinking_on": QWEN_ON, "thinking_off": QWEN_OFF},
                     chat_template_kwargs={"thinking_on": {"enable_thinking": True},
                                           "thinking_off": {"enable_thinking": False}}, **changes)
    return Collected(model_prefix="qwen3.5", header=header, values={"thinking_on": on, "thinking_off": off})


def test_a_curve_of_both_modes_states_and_reads_back_each_modes_sampling(tmp_path: Path) -> None:
    # Qwen3.5's golden curve samples thinking on and off differently; a collection of both states each mode's
    path = tmp_path / "qwen3.5_mtp_fp8.yaml"
    curve = _both_modes({1: 1.9}, {1: 1.8})
    path.write_text(format_curve(curve.header, curve.values))
    text = path.read_text()
    assert "# dataset: coding (nvidia/SPEED-Bench qualitative/test, 80 prompts) | top_k: 20 | output_len: 4096" in text
    assert '# thinking_on temperature: 0.6 | top_p: 0.95 | chat_template_kwargs: {"enable_thinking": true}' in text
    assert ('# thinking_off temperature: 0.7 | top_p: 0.8 | presence_penalty: 1.5 | chat_template_kwargs: '
            '{"enable_thinking": false}') in text
    read, loaded = read_curve_header(path)
    assert read == curve.header
    assert mode_sampling(loaded, "thinking_on") == {**QWEN_ON, "presence_penalty": 0.0}
    assert mode_sampling(loaded, "thinking_off") == QWEN_OFF


def test_a_mode_is_merged_only_with_the_sampling_the_curve_states_for_it() -> None:
    old = _both_modes({1: 1.9}, {1: 1.8})
    same = _both_modes({2: 2.6}, {2: 2.4})
    assert differences(old, same) == []
    merged = merge(old, same)
    assert merged.header.sampling == {"thinking_on": QWEN_ON, "thinking_off": QWEN_OFF}
    # thinking off sampled as thinking on: the curve's thinking-off cells were not, so the cells are refused
    other = Collected(model_prefix="qwen3.5", header=_header(sampling={"thinking_off": QWEN_ON}),
                      values={"thinking_off": {2: 2.5}})
    assert differences(old, other) == ["thinking_off sampling: temperature 0.7, top_p 0.8, presence_penalty 1.5 in "
                                       "the curve, temperature 0.6, top_p 0.95, presence_penalty 0 in this collection"]
    # a mode the curve does not hold joins with its own sampling, and the curve keeps both
    only_off = Collected(model_prefix="qwen3.5", header=_header(sampling={"thinking_off": QWEN_OFF}),
                         values={"thinking_off": {1: 1.8}})
    on = _curve({1: 1.9})
    assert differences(only_off, on) == []
    assert merge(only_off, on).header.sampling == {"thinking_off": QWEN_OFF, "thinking_on": QWEN_ON}


def test_the_header_format_curve_writes_reads_back_whole(tmp_path: Path) -> None:
    header = _header(notes=["eager"], simulated=True)
    path = tmp_path / "qwen3.5_mtp_fp8.yaml"
    path.write_text(format_curve(header, {"thinking_on": {1: 1.9}}))
    read, curve = read_curve_header(path)
    assert read == header and curve.values == {"thinking_on": {1: 1.9}}


def test_an_inferencex_curve_is_not_one_to_merge_into() -> None:
    packaged = REPO / "src" / "llmsweep" / "catalog" / "data" / "golden_al" / "qwen3.5_mtp.yaml"
    with pytest.raises(ConfigError, match=r"qwen3.5_mtp.yaml: its header does not state precision") as exc:
        read_curve_header(packaged)
    assert exc.value.fix and "llmsweep al collect" in exc.value.fix


@pytest.mark.parametrize("damage", [b"\xff\xfe not text", "# note: caf\u00e9\n".encode("latin-1")])
def test_a_curve_that_is_not_utf8_is_refused_naming_it(damage: bytes, tmp_path: Path) -> None:
    """A binary file or a curve saved as Latin-1 (`--merge-into`, `al --curves`) was a UnicodeDecodeError traceback."""
    path = tmp_path / "smollm2_ngram_bf16.yaml"
    path.write_bytes(damage + PACKAGED.read_bytes())
    for read in (load_curve, read_curve_header):
        with pytest.raises(ConfigError, match=r"smollm2_ngram_bf16.yaml:1: catalog file is not UTF-8 text") as exc:
            read(path)
        assert exc.value.fix == "save the file as UTF-8"


@pytest.mark.parametrize(("engine", "same"), [
    ("vllm 0.26.0 (image tag; the server reported no version)", True),  # cells whose server answered no /version
    ("vllm 0.26.0 (recipe; the server reported no version)", True),
    ("vllm 0.27.0 (reported by /version)", False),
    ("sglang 0.26.0 (reported by /version)", False),
    ("vllm unknown version (recipe; the server reported no version)", False),  # unknown never passes for 0.26.0
    ("llmsweep simulator 0.1.0 standing in for vllm (no drafting: AL modelled)", False),
])
def test_the_same_engine_version_read_from_the_server_or_the_image_tag_is_one_engine(engine: str, same: bool) -> None:
    """The `engine:` line also says where its version was read; two collections on one vLLM release, one whose
    server reported its version and one read from the image tag, measured on the same engine."""
    old = _curve({1: 1.9})  # vllm 0.26.0 (reported by /version)
    found = differences(old, _curve({2: 2.6}, engine=engine))
    assert found == ([] if same else [f"engine: 'vllm 0.26.0 (reported by /version)' in the curve, {engine!r} in "
                                      "this collection"])
