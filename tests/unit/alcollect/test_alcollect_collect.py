"""`llmsweep al collect` on the seed recipe's SGLang MTP job (spelled `method: eagle`, SGLang's name for native MTP):
the curve is named so that it reads back as the model's MTP curve, and SGLang's counters (verify calls, not drafts)
measure its cells, on the simulator standing in for SGLang."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmsweep.alcollect.collect import collect_curve, collection_job, curve_file_name
from llmsweep.alcollect.prompts import BUILTIN, load_prompts
from llmsweep.alcollect.settings import CollectResult, CollectSettings, Sampling
from llmsweep.catalog.golden import CurveHeader, format_curve, get_curve, load_curve, resolve_acceptance
from llmsweep.client.scrape import parse_exposition
from llmsweep.errors import ConfigError
from llmsweep.execute.local import LocalExecutor
from llmsweep.plan import Job, jobs_from_files

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
HICACHE_ARM = ("      - { tp: 8, spec-decoding: mtp, kv-offloading: dram, kv-offload-backend: { name: hicache }, "
               "conc-list: [4, 8, 12, 16] }\n")


@pytest.fixture
def seed_one_job(tmp_path: Path) -> Path:
    """The seed recipe less its HiCache arm, at concurrency 1: one server for the collection to relaunch per cell."""
    text = SEED.read_text()
    assert HICACHE_ARM in text
    path = tmp_path / "seed-one-job.yaml"
    path.write_text(text.replace(HICACHE_ARM, "").replace("conc-list: [1, 4, 8, 12, 16]", "conc-list: [1]"))
    return path


def _job(recipe: Path) -> Job:
    return collection_job(jobs_from_files([recipe]), simulate=True)


def _header(method: str) -> CurveHeader:
    return CurveHeader(source="test", checkpoint="qwen3.5-397b-a17b-fp8", method=method, precision="fp8 (test)",
                       hardware="simulated mi300x", engine="sim", dataset="coding (test, 2 prompts)",
                       sampling={"thinking_on": {"temperature": 1.0}}, output_len=64, chat_template_kwargs={},
                       generator="test")


def test_sglang_eagle_spelling_names_a_file_that_reads_back_as_the_mtp_curve(seed_one_job: Path,
                                                                               tmp_path: Path) -> None:
    job = _job(seed_one_job)
    assert job.serve is not None and job.serve.spec_decoding is not None
    assert job.serve.spec_decoding.method == "eagle"  # the seed recipe's spelling
    path = tmp_path / "golden" / curve_file_name(job)
    path.parent.mkdir()
    path.write_text(format_curve(_header("eagle"), {"thinking_on": {3: 3.2}}))
    curve = load_curve(path)
    assert (curve.model_prefix, curve.method) == ("qwen3.5", "mtp")


def _as_measured(curve: Path, folder: Path) -> Path:
    """A copy of a simulated collection in `folder` without its `simulated: yes` line: the same cells as if measured
    on an engine (only the simulator can collect here)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = curve.read_text().splitlines(keepends=True)
    assert any(line.startswith("# simulated: yes") for line in lines)
    (folder / curve.name).write_text("".join(line for line in lines if not line.startswith("# simulated:")))
    return folder


def _collect(recipe: Path, out_dir: Path, **settings: object) -> CollectResult:
    """A simulated collection of the one-job recipe: 2 builtin prompts of 64 tokens per cell."""
    job = _job(recipe)
    base: dict[str, object] = {"ks": [3], "thinking": ["thinking_on"], "output_len": 64}
    base.update(settings)
    out = out_dir / curve_file_name(job)
    return collect_curve(job, CollectSettings.model_validate(base), load_prompts(BUILTIN, "coding", 2),
                         out_dir / "runs", out, launcher=LocalExecutor({}).launcher, simulate=True)


def _counter(path: Path, name: str) -> float:
    return sum(v for n, _, v in parse_exposition(path.read_text()) if n == name)


@pytest.mark.timeout(120)
def test_sglang_cells_are_measured_from_its_verify_calls(seed_one_job: Path, tmp_path: Path) -> None:
    result = _collect(seed_one_job, tmp_path / "golden")
    (cell,) = result.cells
    assert cell.status == "measured" and cell.acceptance_length is not None, cell.reason
    # SGLang counts generated tokens and verify calls (no drafts counter): AL = (G - 1.5 R) / (V - 0.5 R) over the run
    d = Path(cell.directory or "")
    g, r, v = ((_counter(d / "metrics_after.txt", n) - _counter(d / "metrics_before.txt", n)) for n in (
        "sglang:generation_tokens_total", "sglang:num_requests_total", "sglang:spec_verify_calls_total"))
    assert r == 2 and v > 0
    assert cell.acceptance_length == pytest.approx((g - 1.5 * r) / (v - 0.5 * r))
    assert cell.drafts == v  # the verification steps, InferenceX's "drafts"
    # the cell's load was served by the simulator, as it says on /version: its summary is labelled so, not measured
    assert json.loads((d / "client" / "summary.json").read_text())["source"] == "simulated"
    assert result.curve_file is not None
    curve = load_curve(Path(result.curve_file))
    assert curve.values == {"thinking_on": {3: round(cell.acceptance_length, 2)}}
    assert any("sglang" in note and "spec_verify_calls" in note for note in curve.notes)  # the formula is stated


@pytest.mark.parametrize("k", [1, 3, 5])
def test_each_sglang_cell_launches_the_chain_of_its_own_k(k: int, seed_one_job: Path) -> None:
    """The seed recipe pins `num-draft-tokens: 4` for its K = 3 chain (top-k 1): every cell was launched with 4
    verified tokens whatever its K (K = 1 with 4, K = 5 with 4), the evidence's server command stating a draft SGLang
    overrides."""
    from llmsweep.alcollect.collect import _cell_job
    from llmsweep.engines import render

    job = collection_job(jobs_from_files([seed_one_job]), simulate=False)
    argv = render(_cell_job(job, k, "thinking_on"), simulate=False).argv
    flags = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--speculative-")}
    assert (flags["--speculative-num-steps"], flags["--speculative-eagle-topk"],
            flags["--speculative-num-draft-tokens"]) == (str(k), "1", str(k + 1))


@pytest.mark.timeout(120)
def test_thinking_off_cells_ask_the_template_not_to_think_by_default(seed_one_job: Path, tmp_path: Path) -> None:
    # Qwen's and GLM's templates think unless told not to: InferenceX's thinking_off curves send enable_thinking false
    result = _collect(seed_one_job, tmp_path / "golden", thinking=["thinking_off"])
    (cell,) = result.cells
    assert cell.status == "measured", cell.reason
    run = json.loads((Path(cell.directory or "") / "client" / "run.json").read_text())
    assert run["provenance"]["workload"]["extra_body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert result.curve_file is not None
    curve = load_curve(Path(result.curve_file))
    assert curve.sampling["thinking_off"].chat_template_kwargs == {"enable_thinking": False}


@pytest.mark.timeout(120)
def test_a_partial_collection_keeps_the_packaged_curve_the_seed_recipe_pins(seed_one_job: Path,
                                                                             tmp_path: Path) -> None:
    # A thinking-off K=1 collection of the seed job, sampled as the packaged curve's thinking-off line says
    # (temperature 0.7, top_p 0.8, top_k 20, presence_penalty 1.5): the seed recipe still pins the packaged
    # thinking-on K=3 (3.39), and the collected curve answers the cell it measured for an FP8 recipe (the precision
    # it was measured in) once measured on an engine.
    golden_off = Sampling(temperature=0.7, top_p=0.8, top_k=20, presence_penalty=1.5)
    out_dir = tmp_path / "golden"
    result = _collect(seed_one_job, out_dir, ks=[1], thinking=["thinking_off"], sampling=golden_off)
    assert result.curve_file is not None and result.cells[0].acceptance_length is not None
    collected = load_curve(Path(result.curve_file))
    assert collected.sampling_common == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5}
    packaged = get_curve("qwen3.5_mtp")
    assert packaged is not None and packaged.packaged and collected.id != packaged.id
    seed = ("qwen3.5", "Qwen/Qwen3.5-397B-A17B-FP8", "fp8", "eagle", "on", 3)
    pinned = resolve_acceptance(*seed, curve_dirs=[out_dir])
    assert pinned is not None and (pinned.curve, pinned.value) == ("qwen3.5_mtp", 3.39)
    # Collected on the simulator, the curve never passes over the measured one, even for the cell it holds ...
    off = resolve_acceptance(*seed[:4], "off", 1, curve_dirs=[out_dir])
    assert off is not None and (off.curve, off.value) == ("qwen3.5_mtp", 1.92)
    # ... and the same cells measured on an engine answer it (the precision it was measured in).
    measured = _as_measured(Path(result.curve_file), tmp_path / "measured")
    off = resolve_acceptance(*seed[:4], "off", 1, curve_dirs=[measured])
    assert off is not None and off.curve == collected.id
    assert off.value == round(result.cells[0].acceptance_length, 2)
    # Sampled at the collector's defaults (temperature 1.0, top_p 0.95, top_k 40) the same cell measures another
    # acceptance: it does not stand in for the golden curve, and the warning says why.
    other = _collect(seed_one_job, tmp_path / "default-sampling", ks=[1], thinking=["thinking_off"])
    assert other.curve_file is not None
    unlike = _as_measured(Path(other.curve_file), tmp_path / "unlike")
    off = resolve_acceptance(*seed[:4], "off", 1, curve_dirs=[unlike])
    assert off is not None and (off.curve, off.value) == ("qwen3.5_mtp", 1.92)
    assert off.unlike == [f"{collected.id} (temperature 1, not 0.7; top_p 0.95, not 0.8; top_k 40, not 20; "
                          "presence_penalty 0, not 1.5)"]
    assert "was sampled otherwise than qwen3.5_mtp" in off.served_precision_note("fp8")


QUANTISED = {
    # config.json of an FP8 checkpoint: torch_dtype is its unquantised tensors' (Qwen3.5-397B-A17B-FP8's shape)
    "fp8": ({"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}, None),
    # a ModelOpt export: the format is in hf_quant_config.json
    "nvfp4": ({"torch_dtype": "bfloat16"}, {"producer": {"name": "modelopt"},
                                             "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}}),
    # compressed-tensors (llm-compressor): the weight scheme of its config groups
    "fp8-ct": ({"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "compressed-tensors", "format": "float-quantized",
        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}, "targets": ["Linear"]}}}}, None),
    "bf16": ({"torch_dtype": "bfloat16"}, None),
    # AMD Quark (amd/*-MXFP4 checkpoints): the format is the global weight spec, as vLLM's and SGLang's quark
    # loaders read it (it had been read as no quantisation: bf16)
    "mxfp4-quark": ({"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "quark", "global_quant_config": {
            "weight": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0",
                       "is_dynamic": False},
            "input_tensors": {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0",
                              "is_dynamic": True}}}}, None),
    "fp8-quark": ({"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "quark", "global_quant_config": {
            "weight": [{"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}],
            "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}}}}, None),
}


@pytest.mark.parametrize("case", sorted(QUANTISED))
def test_the_served_precision_is_read_from_a_quantised_checkpoints_config(case: str, seed_one_job: Path,
                                                                          tmp_path: Path) -> None:
    config, hf_quant = QUANTISED[case]
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (model / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    recipe = tmp_path / "served-from-dir.yaml"
    recipe.write_text(seed_one_job.read_text().replace("  serve:\n", f"  serve:\n    model-path: {model}\n", 1))
    job = collection_job(jobs_from_files([recipe]), simulate=False)
    # the default name of a collection whose family is packaged carries the precision the weights are served in
    assert curve_file_name(job) == f"qwen3.5_mtp_{case.split('-')[0]}.yaml"


def test_a_precision_of_the_other_fp4_block_format_is_refused(seed_one_job: Path, tmp_path: Path) -> None:
    """Weights that say MXFP4 (AMD's block-32 E8M0 quantisation) collected under `--precision nvfp4` would label the
    cells NVFP4 and stand in for NVIDIA's checkpoint (both had been fp4); a bare `fp4` may be either, and is kept."""
    from llmsweep.alcollect.collect import refuse_unearned_precision

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    (model / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "MXFP4"}}))
    recipe = tmp_path / "served-from-dir.yaml"
    recipe.write_text(seed_one_job.read_text().replace("  serve:\n", f"  serve:\n    model-path: {model}\n", 1))
    job = collection_job(jobs_from_files([recipe]), simulate=False)
    for given in ("nvfp4", "fp8"):
        with pytest.raises(ConfigError, match=f"--precision {given} is not what the job serves: mxfp4"):
            refuse_unearned_precision(job, given, simulate=False)
    for given in ("mxfp4", "MXFP4 (checked by hand)", "fp4"):
        refuse_unearned_precision(job, given, simulate=False)


AMD_CASE = REPO / "tests" / "data" / "recipes" / "policy" / "golden-al.precision-provenance-mxfp4.yaml"


def test_without_weights_to_read_the_served_precision_is_the_format_the_model_id_names(seed_one_job: Path,
                                                                                     tmp_path: Path) -> None:
    """InferenceX's AMD qwen3.5 MTP job (amd/Qwen3.5-397B-A17B-MXFP4, precision `fp4`) collected on the simulator, or
    with no model directory: the header had stated `fp4 (recipe)`, a curve told apart from neither NVFP4 nor MXFP4,
    named qwen3.5_mtp_fp4; it states the MXFP4 the id names, as the curve is matched to a recipe."""
    from llmsweep.alcollect.collect import refuse_unearned_precision

    one = tmp_path / "amd-one-job.yaml"
    one.write_text(AMD_CASE.read_text().replace("conc-list: [1, 4, 8]", "conc-list: [1]"))
    job = _job(one)
    assert curve_file_name(job, simulate=True) == "qwen3.5_mtp_mxfp4.yaml"
    with pytest.raises(ConfigError, match=r"not what the job serves: mxfp4 \(model id amd/Qwen3.5-397B-A17B-MXFP4; "
                       r"recipe precision fp4; simulated engine, no weights\)"):
        refuse_unearned_precision(job, "nvfp4", simulate=True)
    seed = _job(seed_one_job)  # an id that names the recipe's own precision: stated as the recipe's, as before
    with pytest.raises(ConfigError, match=r"not what the job serves: fp8 \(recipe; simulated engine, no weights\)"):
        refuse_unearned_precision(seed, "nvfp4", simulate=True)


def test_a_checkpoints_config_saved_with_a_byte_order_mark_reads(seed_one_job: Path, tmp_path: Path) -> None:
    """A model folder's config.json or hf_quant_config.json saved by a Windows editor starts with a UTF-8 byte-order
    mark: it had been refused as 'cannot be read as JSON'. It reads as the file without the mark."""
    config, hf_quant = QUANTISED["nvfp4"]
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config), encoding="utf-8-sig")
    (model / "hf_quant_config.json").write_text(json.dumps(hf_quant), encoding="utf-8-sig")
    recipe = tmp_path / "served-from-dir.yaml"
    recipe.write_text(seed_one_job.read_text().replace("  serve:\n", f"  serve:\n    model-path: {model}\n", 1))
    job = collection_job(jobs_from_files([recipe]), simulate=False)
    assert curve_file_name(job) == "qwen3.5_mtp_nvfp4.yaml"


MINIMAX_GQA = """\
minimaxm3-fp8-h200-vllm-eagle3-gqa:
  image: vllm/vllm-openai:v0.26.0
  model: MiniMaxAI/MiniMax-M3
  model-prefix: minimaxm3
  runner: cluster:h200-cw
  precision: fp8
  framework: vllm
  multinode: false
  scenarios:
    agentic-coding:
    - dram-utilization: 0.8
      search-space:
      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [1] }
  serve:
    spec-decoding: { method: eagle3, num-steps: 3, draft-model: Inferact/MiniMax-M3-EAGLE3-GQA, thinking: "on" }
"""


@pytest.mark.timeout(120)
def test_a_curve_collected_with_a_named_drafter_serves_recipes_of_that_drafter(tmp_path: Path) -> None:
    # MiniMax-M3's EAGLE3 curves are keyed by draft heads (plain EAGLE3 and EAGLE3-GQA); the packaged GQA curve was
    # measured in fp4. An FP8 collection with the GQA drafter is that drafter's curve in the recipe's precision.
    recipe = tmp_path / "minimax.yaml"
    recipe.write_text(MINIMAX_GQA)
    result = _collect(recipe, tmp_path / "golden")
    assert result.curve_file is not None, result.cells[0].reason
    curve = load_curve(Path(result.curve_file))
    assert curve.draft_model == "Inferact/MiniMax-M3-EAGLE3-GQA" and curve.precision_measured == "fp8"
    args = ("minimaxm3", "MiniMaxAI/MiniMax-M3", "fp8", "eagle3", "on")
    # collected on the simulator, it does not pass over the measured GQA curve
    got = resolve_acceptance(*args, 3, draft_model="Inferact/MiniMax-M3-EAGLE3-GQA", curve_dirs=[tmp_path / "golden"])
    assert got is not None and (got.curve, got.passed_over) == ("minimaxm3_eagle3_gqa", None)
    # the same cells measured on an engine do
    measured = _as_measured(Path(result.curve_file), tmp_path / "measured")
    got = resolve_acceptance(*args, 3, draft_model="Inferact/MiniMax-M3-EAGLE3-GQA", curve_dirs=[measured])
    assert got is not None and (got.curve, got.passed_over) == (curve.id, "minimaxm3_eagle3_gqa")
    # a cell the collection did not measure still reads the packaged GQA curve, naming the fp8 one that lacks it
    k5 = resolve_acceptance(*args, 5, draft_model="Inferact/MiniMax-M3-EAGLE3-GQA", curve_dirs=[measured])
    assert k5 is not None and k5.curve == "minimaxm3_eagle3_gqa" and k5.better and curve.id in k5.better[0]
    # the plain-EAGLE3 drafter's recipes do not read it
    plain = resolve_acceptance(*args, 3, draft_model="Inferact/MiniMax-M3-EAGLE3", curve_dirs=[measured])
    assert plain is not None and plain.curve == "minimaxm3_eagle3"


def test_a_curve_is_labelled_with_the_images_engine_version_not_a_contradicting_stated_one() -> None:
    """A server that reports no version: the curve's engine is what the image tag names (SGLang 0.5.12), never the
    recipe's `serve.engine.version` (0.5.16) where the tag contradicts it."""
    from pathlib import Path as _Path

    from llmsweep.alcollect.collect import _engine_text
    from llmsweep.plan import jobs_from_files

    fixture = _Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy" / "engine.version-mismatch.yaml"
    job = jobs_from_files([fixture])[0]
    text = _engine_text(job, [], simulated=False)
    assert "0.5.12" in text and "0.5.16" not in text and "image tag" in text, text


def test_a_recipe_rendering_several_servers_is_refused_naming_what_differs_and_how_to_narrow() -> None:
    # the seed recipe: one recipe key, every arm tp 8; the servers differ by a concurrency-sized flag and the HiCache
    # arm's offload, which --config-keys cannot narrow
    with pytest.raises(ConfigError) as raised:
        _job(SEED)
    message, fix = raised.value.message, raised.value.fix or ""
    assert "the recipe renders 9 different servers" in message
    assert "--max-running-requests 2 / 8 / 16 / 24 / 32" in message  # the flags the launches differ by, valued
    assert "--kv-offload (absent) / dram" in message
    assert "conc 1 / 4 / 8 / 12 / 16" in message and "kv-offloading none / dram" in message
    assert "--config-keys" not in fix and "parallelism" not in fix
    assert "one entry" in fix and "conc-list: [1]" in fix


def test_the_differences_named_are_the_launches_flags_and_env() -> None:
    from llmsweep.alcollect.collect import launch_differences
    from llmsweep.engines.launch import LaunchSpec

    a = LaunchSpec(engine="sglang", argv=("python", "-m", "x", "--tp", "8", "--max-running-requests", "2"),
                   env={"A": "1"}, port=8000)
    b = LaunchSpec(engine="sglang", argv=("python", "-m", "x", "--tp", "8", "--max-running-requests", "8",
                                          "--enable-hierarchical-cache"), env={"A": "2"}, port=8000)
    assert launch_differences([a, b]) == ["--max-running-requests 2 / 8", "--enable-hierarchical-cache (absent) / "
                                          "(set)", "env A 1 / 2"]


def test_after_a_simulated_collection_the_hint_does_not_point_at_another_curve(seed_one_job: Path,
                                                                                tmp_path: Path) -> None:
    from click.testing import CliRunner

    from llmsweep.cli.alcollect import collect

    out = tmp_path / "out"
    got = CliRunner().invoke(collect, [str(seed_one_job), "--simulate", "--prompts", "builtin", "--num-prompts", "1",
                                       "--output-len", "8", "-k", "3", "--thinking", "on", "--out", str(out)])
    assert got.exit_code == 0, got.output
    assert "1 prompt " in got.stderr and "1 prompts" not in got.stderr
    # the packaged (measured) qwen3.5_mtp answers K=3: the simulated curve is used only where no measured one does
    assert "read it back: llmsweep al" not in got.stdout, got.stdout
    assert "never passes over a measured curve" in got.stdout
    assert "`llmsweep al` answers thinking on K=3 from qwen3.5_mtp" in got.stdout
    assert str(out / "qwen3.5_mtp_fp8.yaml") in got.stdout


LLAMA = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"


@pytest.mark.parametrize("case", ["parent is a file", "curve is a folder", "run dir under a file"])
def test_an_output_that_cannot_be_written_is_refused_before_any_server_starts(case: str, tmp_path: Path) -> None:
    """Found only when writing the curve, every cell was measured (GPU hours) and the collection died on a
    traceback without its curve."""
    job = _job(LLAMA)
    out, run_dir = tmp_path / "golden" / curve_file_name(job), tmp_path / "runs"
    if case == "parent is a file":
        (tmp_path / "golden").write_text("")
        out = tmp_path / "golden" / "sub" / curve_file_name(job)
    elif case == "curve is a folder":
        out.mkdir(parents=True)
    else:
        (tmp_path / "afile").write_text("")
        run_dir = tmp_path / "afile" / "runs"
    settings = CollectSettings.model_validate({"ks": [1], "thinking": ["thinking_off"], "output_len": 8})
    with pytest.raises(ConfigError) as err:
        collect_curve(job, settings, load_prompts(BUILTIN, "coding", 1), run_dir, out,
                      launcher=LocalExecutor({}).launcher, simulate=True)
    assert "no server was started" in err.value.message, err.value.message
    assert "cannot be written" in err.value.message and err.value.fix
    assert not (tmp_path / "runs").exists()  # nothing was measured
    # in the words of every command's output check (writable.refuse_unwritable), naming the option
    flag = {"parent is a file": "--out", "curve is a folder": "--out", "run dir under a file": "--run-dir"}[case]
    assert err.value.message.startswith(f"{flag} ") or case == "curve is a folder", err.value.message
    assert flag in err.value.fix, err.value.fix


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_an_out_no_file_can_be_made_in_is_refused_as_every_commands_before_any_cell(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """al collect had its own output check (os.access): /proc, a read-only mount or /sys passed it for root, so
    `al collect --out /proc/golden` measured every cell and then failed writing the curve (exit 1), where `predict
    --out /proc/p` was refused up front. It now checks as every command does, by making a file there."""
    from support.cli import run_main

    out = Path("/proc/llmsweep-golden")
    code, stdout, err = run_main(capsys, "al", "collect", LLAMA, "--simulate", "--prompts", "builtin",
                                 "--num-prompts", "1", "--output-len", "64", "-k", "1", "--out", out,
                                 "--run-dir", tmp_path / "evidence")
    assert code == 2 and f"--out {out} cannot be written: /proc:" in err and "no server was started" in err, err
    assert "fix: pass --out a folder path this user can write" in err and "Traceback" not in err, err
    assert not (tmp_path / "evidence").exists() and stdout == ""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
def test_an_out_that_cannot_be_written_is_refused_before_the_prompts_are_fetched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The output was checked only once the prompt set had been read: with the default `--prompts auto`, after
    asking the Hugging Face hub for SPEED-Bench (a wait for the network) and then refused."""
    from support.cli import run_main

    missing = tmp_path / "no-such-prompts.jsonl"
    code, _, err = run_main(capsys, "al", "collect", LLAMA, "--simulate", "--prompts", missing, "-k", "1",
                            "--out", "/proc/llmsweep-golden")
    assert code == 2 and "--out /proc/llmsweep-golden cannot be written" in err and str(missing) not in err, err


@pytest.mark.timeout(120)
def test_a_curve_that_cannot_be_written_after_measuring_says_where_the_cells_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from llmsweep.alcollect import collect as collect_module
    from llmsweep.errors import DatasetError

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(collect_module, "_write_curve", full)  # the disk fills while the cells are measured
    job = _job(LLAMA)
    settings = CollectSettings.model_validate({"ks": [1], "thinking": ["thinking_off"], "output_len": 8})
    with pytest.raises(DatasetError) as err:
        collect_curve(job, settings, load_prompts(BUILTIN, "coding", 1), tmp_path / "runs",
                      tmp_path / "golden" / curve_file_name(job), launcher=LocalExecutor({}).launcher, simulate=True)
    assert "No space left on device" in err.value.message and "thinking_off K=1" in err.value.message
    assert str(tmp_path / "runs") in err.value.message and err.value.fix
    assert json.loads((tmp_path / "runs" / "thinking_off-k1" / "cell.json").read_text())["status"] == "measured"


@pytest.mark.parametrize(("given", "refused"), [("fp8", True), ("nvfp4", True), ("BF16 (checked by hand)", False),
                                                ("fp16", False), ("house-blend", False)])
def test_a_precision_the_job_does_not_serve_is_refused_before_any_server_starts(
        given: str, refused: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The llama recipe serves bf16: `--precision fp8` labelled its bf16 cells fp8, and the curve (named
    <prefix>_<method>_fp8 where the family is packaged) stood in for fp8 recipes."""
    from llmsweep.cli.main import main

    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["al", "collect", str(LLAMA), "--simulate", "--prompts", "builtin", "--num-prompts", "1", "--output-len",
              "8", "-k", "1", "--thinking", "off", "--precision", given, "--out", str(out)])
    err = capsys.readouterr().err
    if refused:
        assert done.value.code == 2, err
        assert f"--precision {given} is not what the job serves: bf16" in err and "fix:" in err
        assert "launching" not in err and not out.exists()
    else:  # the same family stated in other words, or a word naming no format (cannot be told): kept as stated
        assert done.value.code in (0, None), err
        assert f"# precision: {given}\n" in (out / "llama-1b_ngram.yaml").read_text()


@pytest.mark.parametrize(("record", "text", "flags"), [
    ("llmsweep-import.json", '{"dtype": "bf16",', ()),
    ("hf_quant_config.json", "[1, 2]", ("--precision", "bf16"))])
def test_a_damaged_weights_record_is_refused_before_any_server_starts(
        record: str, text: str, flags: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The curve's `precision:` is read from the model directory's records; one that did not parse as a JSON object
    was a traceback: with --precision before any server, without it only when the header was written, after
    measuring every cell (an engine does not read llmsweep-import.json, so it serves the weights all the same)."""
    from llmsweep.cli.main import main

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    (model / record).write_text(text)
    recipe = tmp_path / "local.yaml"
    recipe.write_text(LLAMA.read_text().replace("runner: h200", "runner: cluster:h200-lent")
                      .replace("  serve:\n", f"  serve:\n    model-path: {model}\n", 1))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["al", "collect", str(recipe), "--runner-config", str(REPO / "examples" / "gpu" / "fleet.yaml"),
              "--executor", "local", "--prompts", "builtin", "--num-prompts", "1", "-k", "1", "--thinking", "off",
              *flags, "--out", str(out)])
    err = capsys.readouterr().err
    assert done.value.code == 2, err
    assert f"{model / record} " in err and "no server was started" in err and f"fix: repair {record}" in err
    assert "launching" not in err and not out.exists()


def test_a_server_is_stopped_only_when_the_collection_that_started_it_is_gone(tmp_path: Path) -> None:
    """A second collection of the same curve while the first still runs must not stop the first one's server; one
    whose collection was killed (its collector gone) is stopped."""
    import os
    import subprocess
    import sys

    from llmsweep.alcollect.collect import COLLECTOR_FILE, _stop_left_servers
    from llmsweep.execute.process import read_proc

    out = tmp_path / "golden" / "llama-1b_ngram.yaml"
    runs = tmp_path / "golden" / "llama-1b_ngram.runs"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    servers = {}
    # the dead collection's cell also kept the pid file of a launch it could not stop (a lost port race) as
    # server.1.pid: that server is stopped too
    for cell, collector, name in (("thinking_off-k1", os.getpid(), "server.pid"),
                                  ("thinking_off-k2", int(dead.stdout), "server.pid"),
                                  ("thinking_off-k2", int(dead.stdout), "server.1.pid")):
        server = subprocess.Popen(["sleep", "60"], start_new_session=True)
        servers[f"{cell}/{name}"] = server
        (runs / cell).mkdir(parents=True, exist_ok=True)
        info, mine = read_proc(server.pid), read_proc(collector)
        (runs / cell / name).write_text(json.dumps({
            "pid": server.pid, "host": __import__("platform").node(), "argv0": "sleep",
            "start_ticks": info.start_ticks if info else None, "cleanup": []}))
        (runs / cell / COLLECTOR_FILE).write_text(json.dumps({
            "pid": collector, "start_ticks": mine.start_ticks if mine else 1}))
    said: list[str] = []
    try:
        _stop_left_servers(out, tmp_path / "other-runs", said.append)
        for name in ("server.pid", "server.1.pid"):  # its collection is gone: both stopped
            assert servers[f"thinking_off-k2/{name}"].wait(timeout=10) is not None, name
            assert not (runs / "thinking_off-k2" / name).exists()
        assert servers["thinking_off-k1/server.pid"].poll() is None  # this (live) process's: left to it
        assert (runs / "thinking_off-k1" / "server.pid").exists()
        assert sorted(said) == sorted(f"stopping server pid {servers[f'thinking_off-k2/{name}'].pid} left running by "
                                      "an earlier, interrupted run" for name in ("server.pid", "server.1.pid"))
    finally:
        for server in servers.values():
            server.kill()
            server.wait()


@pytest.mark.timeout(120)
def test_a_signal_while_the_server_is_being_launched_still_stops_it(tmp_path: Path) -> None:
    """SIGINT between the server's spawn and the collector holding its handle (Ctrl-C as a cell launches) unwound
    with no handle to stop and no pid file written: the server went on running, found by nothing."""
    import os
    import signal

    from llmsweep.execute import signals
    from llmsweep.execute.process import read_proc

    class SignalledAsItLaunches:
        """The local launcher, the collector getting SIGINT once the server process exists."""

        def __init__(self) -> None:
            self.real = LocalExecutor({}).launcher
            self.pids: list[int] = []

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

        def launch(self, spec: object, **kwargs: object) -> object:
            handle = self.real.launch(spec, **kwargs)  # type: ignore[arg-type]
            self.pids.append(int(handle.pid or 0))
            os.kill(os.getpid(), signal.SIGINT)
            return handle

    launcher = SignalledAsItLaunches()
    job = _job(LLAMA)
    settings = CollectSettings.model_validate({"ks": [1], "thinking": ["thinking_off"], "output_len": 8})
    try:
        result = collect_curve(job, settings, load_prompts(BUILTIN, "coding", 1), tmp_path / "runs",
                               tmp_path / "golden" / curve_file_name(job), launcher=launcher,  # type: ignore[arg-type]
                               simulate=True)
        assert [c.reason for c in result.cells] == ["interrupted by SIGINT"] and result.curve_file is None
        assert [c.status for c in result.cells] == ["interrupted"]  # not `failed`: nothing went wrong with it
        (pid,) = launcher.pids
        info = read_proc(pid)
        assert info is None or info.state == "Z", "the server launched as the signal came is still running"
        assert not (tmp_path / "runs" / "thinking_off-k1" / "server.pid").exists()
    finally:
        for pid in launcher.pids:
            if read_proc(pid) is not None:
                os.killpg(pid, signal.SIGKILL)
        signals.reset()


@pytest.mark.timeout(120)
def test_a_cell_whose_server_loses_its_port_before_binding_it_is_relaunched_at_once(tmp_path: Path) -> None:
    """The port picked free for a cell's server taken by another process before the server binds it (the simulator's
    own "address already in use"): the cell launches again at once on a port picked afresh and is measured, instead
    of failing for a race on a busy host."""
    import socket

    from llmsweep.execute.preflight import with_port

    class FirstLaunchLosesItsPort:
        """The local launcher, its first launch sent to a port this test holds."""

        def __init__(self, held: int) -> None:
            self.real, self.held, self.ports = LocalExecutor({}).launcher, held, list[int]()

        def __getattr__(self, name: str) -> object:
            return getattr(self.real, name)

        def launch(self, spec: Any, **kwargs: Any) -> object:
            if not self.ports:
                spec = with_port(spec, self.held, replacing=spec.port)
            self.ports.append(spec.port)
            return self.real.launch(spec, **kwargs)

    job = _job(LLAMA)
    settings = CollectSettings.model_validate({"ks": [1], "thinking": ["thinking_off"], "output_len": 8})
    events = list[str]()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        launcher = FirstLaunchLosesItsPort(taken.getsockname()[1])
        result = collect_curve(job, settings, load_prompts(BUILTIN, "coding", 1), tmp_path / "runs",
                               tmp_path / "golden" / curve_file_name(job), launcher=launcher,  # type: ignore[arg-type]
                               simulate=True, event=events.append)
    (cell,) = result.cells
    assert cell.status == "measured", cell.reason
    assert len(launcher.ports) == 2 and launcher.ports[1] != launcher.held
    cell_dir = Path(cell.directory or "")
    assert "address already in use" in (cell_dir / "server.log").read_text()
    assert "address already in use" not in (cell_dir / "server.2.log").read_text()
    assert any("relaunching on a port picked afresh" in e for e in events), events
    assert not (cell_dir / "server.pid").exists()


def test_two_merges_started_in_one_second_get_evidence_folders_of_their_own(tmp_path: Path) -> None:
    """A `--merge-into` collection's evidence folder is named by its start second (`CURVE.runs-<UTC time>`): two
    started in the same second shared one, each cell's files overwriting the other's. The second gets `-2`."""
    from llmsweep.cli.alcollect import _new_folder

    stamp = tmp_path / "curve.runs-20261204T223301Z"
    first, second, third = _new_folder(stamp), _new_folder(stamp), _new_folder(stamp)
    assert first == stamp and second.name == f"{stamp.name}-2" and third.name == f"{stamp.name}-3"
    assert all(p.is_dir() for p in (first, second, third))
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert _new_folder(blocked / "x.runs-1") == blocked / "x.runs-1"  # nothing made: the collection refuses it


def test_a_collection_of_no_measured_cell_is_not_ok() -> None:
    """The exit status reads `ok`: a collection that measured nothing (no cell at all, or none measured) is a failed
    run, never a success."""
    def result(*statuses: str) -> CollectResult:
        cells = [{"thinking": "thinking_off", "k": k, "status": s, "directory": f"d{k}"}
                 for k, s in enumerate(statuses, 1)]
        return CollectResult.model_validate({
            "curve_file": None, "curve_id": "x_ngram", "model_prefix": "x", "method": "ngram", "checkpoint": "x",
            "dataset": "coding", "engine": "vllm", "simulated": True, "cells": cells})

    assert not result().ok and not result("failed").ok and not result("measured", "failed").ok
    assert result("measured", "measured").ok


def test_a_curve_write_that_fails_or_does_not_read_back_leaves_the_curve_that_was_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--merge-into` writes the merged curve over the one it completes: a write cut short (a full disk) truncated it,
    its earlier cells lost, and a merged curve that did not read back (a note holding a newline and a key) moved the
    original away to `.invalid`. The curve is written beside it, read back, then moved over it."""
    from llmsweep.alcollect import collect as collect_module
    from llmsweep.errors import DatasetError

    out = tmp_path / "qwen3.5_mtp.yaml"
    original = format_curve(_header("mtp"), {"thinking_on": {1: 1.8, 2: 2.4}})
    out.write_text(original)
    broken = _header("mtp").model_copy(update={"notes": ["second call\nqwen3.5: 5"]})  # a line read as a key
    with pytest.raises(DatasetError, match="does not read back"):
        collect_module._write_curve(out, broken, {"thinking_on": {1: 1.8, 2: 2.4, 3: 2.9}}, "qwen3.5", "mtp")
    assert out.read_text() == original and out.with_suffix(".invalid").is_file()
    real_write = Path.write_text

    def full_disk(self: Path, text: str, *args: object, **kw: object) -> int:
        if self.name == out.name and self.parent != out.parent:
            real_write(self, text[:100])
            raise OSError(27, "File too large")
        return real_write(self, text, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError, match="too large"):
        collect_module._write_curve(out, _header("mtp"), {"thinking_on": {1: 1.8, 2: 2.4, 3: 2.9}}, "qwen3.5", "mtp")
    monkeypatch.undo()
    assert out.read_text() == original and not list(tmp_path.glob(".*staging*"))
