"""vLLM's and SGLang's `--kv-cache-dtype auto` (their default) is the model's dtype only where the checkpoint names no
KV-cache quantisation: a ModelOpt export's kv_cache_quant_algo FP8 makes it an FP8 cache (vLLM from 0.14.0:
vllm/utils/torch_utils.py resolve_kv_cache_dtype_string, read in the 0.12.0-0.14.0 and 0.26.0 wheels, NVFP4 too in
0.26.0; SGLang from 0.5.4: ModelRunner.configure_kv_cache_dtype), while the simulator and `resources.hbm-fit` sized bf16
there without a word: twice the bytes per token, half the tokens of the pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.recipes import engine_recipe

from llmsweep.findings import Finding
from llmsweep.policy import validate_files


def _hits(tmp_path: Path, *, model: str = "nvidia/Llama-3.1-8B-Instruct-FP8", image: str = "vllm/vllm-openai:v0.26.0",
          args: str = "", model_path: str = "", framework: str = "vllm") -> list[Finding]:
    serve = (f"    model-path: {model_path}\n" if model_path else "") + (f"    args:\n{args}" if args else
                                                                            "    args: {}\n")
    text = engine_recipe(framework, image, scenario="fixed", arm="{ tp: 1, conc-list: [4] }", serve=serve,
                         model=model, prefix="llama3.1-8b")
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    return [f for f in validate_files([path]).findings if f.rule == "resources.kv-dtype-auto"]


def test_a_modelopt_checkpoint_at_auto_is_flagged_until_the_flag_says_what_runs(tmp_path: Path) -> None:
    (hit,) = _hits(tmp_path)
    assert not hit.is_error
    assert "no `--kv-cache-dtype` (auto), vLLM 0.26.0 keeps nvidia/Llama-3.1-8B-Instruct-FP8's KV cache in FP8 if" \
        in hit.message and "size it at the model's dtype (bf16: twice an FP8 cache's bytes" in hit.message
    assert hit.path == "k.model"  # the field naming the checkpoint, not the search space's `tp`
    assert hit.fix is not None and "`--kv-cache-dtype fp8` where" in hit.fix
    assert "or `--kv-cache-dtype bfloat16` where it names none" in hit.fix
    (hit,) = _hits(tmp_path, args="      --kv-cache-dtype: auto\n")
    assert "with `--kv-cache-dtype auto`" in hit.message and (hit.path or "").endswith("--kv-cache-dtype")
    assert _hits(tmp_path, args="      --kv-cache-dtype: fp8\n") == []
    assert _hits(tmp_path, args="      --kv-cache-dtype: bfloat16\n") == []  # a checkpoint naming none says so


def test_sglang_keeps_a_modelopt_checkpoints_fp8_kv_at_auto_too(tmp_path: Path) -> None:
    """SGLang's ModelRunner.configure_kv_cache_dtype takes kv_cache_quant_algo FP8 at auto (read from 0.5.4; 0.5.1
    keeps the model's dtype): its launch is flagged as vLLM's is, with SGLang's spelling in the fix."""
    (hit,) = _hits(tmp_path, framework="sglang", image="lmsysorg/sglang:v0.5.17-cu130")
    assert "SGLang 0.5.17 keeps nvidia/Llama-3.1-8B-Instruct-FP8's KV cache in FP8 if" in hit.message
    assert hit.fix is not None and "`--kv-cache-dtype fp8_e4m3` where" in hit.fix
    assert _hits(tmp_path, framework="sglang", image="lmsysorg/sglang:v0.5.1") == []
    assert len(_hits(tmp_path, framework="sglang", image="lmsysorg/sglang:v0.5.4")) == 1
    assert _hits(tmp_path, framework="sglang", image="lmsysorg/sglang:v0.5.17-cu130",
                 args="      --kv-cache-dtype: fp8_e4m3\n") == []


def test_checkpoints_and_releases_that_keep_the_models_dtype_are_not_flagged(tmp_path: Path) -> None:
    assert _hits(tmp_path, model="meta-llama/Llama-3.1-8B-Instruct") == []
    assert _hits(tmp_path, image="vllm/vllm-openai:v0.13.0") == []  # auto is the model's dtype before 0.14.0


def test_a_local_checkpoint_is_read_for_what_it_names(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    quant: dict[str, Any] = {"producer": {"name": "modelopt"},
                             "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
    (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    (hit,) = _hits(tmp_path, model_path=str(folder))
    assert f"KV cache in fp8, as the checkpoint in {folder} names it" in hit.message
    assert hit.path == "k.serve.model-path"
    # NVFP4: vLLM 0.26.0 keeps it, 2 / 0.5625 bytes; SGLang's auto takes FP8 alone
    quant["quantization"]["kv_cache_quant_algo"] = "NVFP4"
    (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    (hit,) = _hits(tmp_path, model_path=str(folder))
    assert "(bf16: 3.6 times an NVFP4 cache's bytes per token)" in hit.message
    assert hit.fix is not None and "`--kv-cache-dtype nvfp4`" in hit.fix
    assert _hits(tmp_path, model_path=str(folder), framework="sglang", image="lmsysorg/sglang:v0.5.17-cu130") == []
    quant["quantization"]["kv_cache_quant_algo"] = {"num_bits": 6, "type": "int"}  # no engine's auto takes it
    (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    assert _hits(tmp_path, model_path=str(folder)) == []
    quant["quantization"]["kv_cache_quant_algo"] = None
    (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    assert _hits(tmp_path, model_path=str(folder)) == []
