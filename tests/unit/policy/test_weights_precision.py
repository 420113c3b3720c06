"""`input.weights-precision`: a recipe's `precision` against the local weights a real engine would load (their folder's
records, read as `al collect` reads them: `engines.weights`). A SmolLM2 import (bf16) at `precision: fp8` validated
clean, transformers serve loaded bf16 (`--dtype auto`) and the row was stored as a valid fp8 result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.policy import validate_files

RULE = "input.weights-precision"


def _recipe(tmp_path: Path, *, engine: str, precision: str, folder: Path, args: str = "") -> Path:
    image = {"transformers": "huggingface/transformers-pytorch-gpu:5.17.0",
             "vllm": "vllm/vllm-openai:v0.26.0"}[engine]
    path = tmp_path / "recipe.yaml"
    path.write_text(f"""\
r:
  image: {image}
  model: llmsweep/llama-1b
  model-prefix: llama-1b
  runner: h200
  precision: {precision}
  framework: {engine}
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 128
      search-space:
      - {{ tp: 1, conc-list: [4] }}
  serve:
    model-path: {folder}
    args: {{{args}}}
""", encoding="utf-8")
    return path


def _folder(tmp_path: Path, files: dict[str, dict[str, object]]) -> Path:
    folder = tmp_path / "weights"
    folder.mkdir()
    for name, doc in files.items():
        (folder / name).write_text(json.dumps(doc))
    return folder


def _hits(path: Path, *, simulate: bool = False) -> list[str]:
    return [f.message for f in validate_files([path], simulate=simulate).findings if f.rule == RULE]


def test_an_import_of_bf16_weights_at_fp8_is_refused_naming_the_record(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"llmsweep-import.json": {"dtype": "bf16", "source": "smollm2.gguf",
                                                         "quantizations": ["Q8_0"]}})
    (hit,) = _hits(_recipe(tmp_path, engine="transformers", precision="fp8", folder=folder))
    assert "are bf16 (llmsweep-import.json: smollm2.gguf dequantised from Q8_0)" in hit, hit
    assert "labelled fp8 for a run at bf16" in hit, hit
    assert not validate_files([tmp_path / "recipe.yaml"]).ok


def test_weights_of_the_recipes_precision_pass(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"llmsweep-import.json": {"dtype": "bf16", "source": "smollm2.gguf",
                                                         "quantizations": ["Q8_0"]}})
    assert _hits(_recipe(tmp_path, engine="transformers", precision="bf16", folder=folder)) == []


def test_a_quantised_checkpoint_at_an_unquantised_precision_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"config.json": {"torch_dtype": "bfloat16",
                                                "quantization_config": {"quant_method": "fp8"}}})
    (hit,) = _hits(_recipe(tmp_path, engine="vllm", precision="bf16", folder=folder))
    assert "are fp8 (config.json quantization_config of" in hit, hit


def test_weights_quantised_as_they_load_are_not_judged(tmp_path: Path) -> None:
    """`--quantization fp8` makes vLLM serve bf16 weights in fp8: the folder's dtype is not what runs."""
    folder = _folder(tmp_path, {"config.json": {"torch_dtype": "bfloat16"}})
    assert _hits(_recipe(tmp_path, engine="vllm", precision="fp8", folder=folder)) != []
    assert _hits(_recipe(tmp_path, engine="vllm", precision="fp8", folder=folder,
                         args="--quantization: fp8")) == []


@pytest.mark.parametrize("where", ["simulated", "absent"])
def test_no_weights_loaded_or_none_here_is_not_judged(tmp_path: Path, where: str) -> None:
    """The simulator loads no weights; a folder this host does not hold (weights on the cluster's nodes) says
    nothing."""
    folder = _folder(tmp_path, {"config.json": {"torch_dtype": "bfloat16"}})
    if where == "absent":
        folder = tmp_path / "on-the-nodes"
    assert _hits(_recipe(tmp_path, engine="vllm", precision="fp8", folder=folder),
                 simulate=where == "simulated") == []


def test_a_quantisation_not_read_is_not_taken_for_its_dtype(tmp_path: Path) -> None:
    """A bitsandbytes nf4 checkpoint's config.json says `torch_dtype: bfloat16` beside a quantization_config the
    reader does not know: it was read as bf16, and `precision: int4` refused with a false "the weights are bf16"."""
    from llmsweep.engines.weights import read_weights

    folder = _folder(tmp_path, {"config.json": {"torch_dtype": "bfloat16", "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}}})
    weights = read_weights(folder, why="a test")
    assert weights is not None and weights.word is None and "bitsandbytes, whose format is not read" in weights.where
    assert _hits(_recipe(tmp_path, engine="vllm", precision="int4", folder=folder)) == []
