"""SGLang multiplies its memory fraction by 0.85 when its attention backend is aiter and the context exceeds 8192
tokens, and on ROCm it picks aiter itself for most models: the simulator applies the factor where SGLang's pick is
aiter, not only where the recipe names it.

Read in `python/sglang/srt/server_args.py` (and, from 0.5.15, `arg_groups/overrides.py`) of the PyPI wheels 0.5.9,
0.5.12, 0.5.12.post1, 0.5.14, 0.5.15, 0.5.16 and 0.5.17: `_handle_gpu_memory_settings` sets the fraction,
`_handle_model_specific_adjustments` then forces some architectures' backend (DeepSeek V4: `dsv4`, from 0.5.12),
`_handle_attention_backend_compatibility` takes the prefill backend where prefill and decode name the same one, else
fills an unset backend from `_get_default_attn_backend` (ROCm: aiter for MHA/GQA; MLA: aiter when
`max(1, num_key_value_heads // tp)` is 16 or 128, else triton), and then `self.mem_fraction_static *= 0.85` when
`attention_backend == "aiter"` and `model_config.context_len > 8192` — pinned or computed.

Hand-computed fractions, M = MI355X's 294,914 MiB (hbm_gb x 1e9 / 2^20), no speculation, 16384-token chunk, decode
graph batch 512: at TP 8 the reserve is 512 + 24576 + 1024 + 1024 = 27136 MiB, round((M - R) / M, 3) = 0.908 (x 0.85 =
0.7718); at TP 4 26624 MiB, 0.910 (x 0.85 = 0.7735). An 8k1k job serves a context of 9472 (8192 + 1024 + 256).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.recipes import Served, one_job

from llmsweep import engines
from llmsweep.catalog.hardware import get_hardware
from llmsweep.engines import launch_memory_fraction, sglang_memory
from llmsweep.engines.sglang_memory import MIB, SglangLaunch, sglang_memory_fraction
from llmsweep.plan import Job

V0512 = "lmsysorg/sglang:v0.5.12-rocm700-mi35x"
DSR1 = ("deepseek-ai/DeepSeek-R1-0528", "dsr1")
LLAMA = ("meta-llama/Llama-3.1-8B-Instruct", "llama3.1-8b")
DSV4 = ("deepseek-ai/DeepSeek-V4-Pro", "dsv4")
MINIMAX = ("MiniMaxAI/MiniMax-M3", "minimaxm3")


def _job(tmp_path: Path, model: tuple[str, str] = DSR1, tp: int = 8, *, image: str = V0512, isl: int = 8192,
         args: str = "") -> Job:
    return one_job(tmp_path, key="frac", framework="sglang", image=image, served=Served(model[0], model[1], "fp8"),
                   runner="mi355x", isl=isl, tp=tp, concs="[64]", args=args or None)


def _rendered(job: Job) -> tuple[float, str]:
    """The launch's --mem-fraction-static and its memory-fraction note."""
    spec = engines.render(job, simulate=True)
    argv: Sequence[str] = spec.argv
    (note,) = [n for n in spec.notes if n.startswith("memory fraction")]
    return float(argv[list(argv).index("--mem-fraction-static") + 1]), note


def test_deepseek_r1_at_tp_8_runs_aiter_at_0_85_of_the_computed_fraction(tmp_path: Path) -> None:
    """128 KV heads / TP 8 = 16 per rank: aiter; context 9472 > 8192: 0.908 x 0.85."""
    job = _job(tmp_path)
    assert job.max_model_len == 9472
    value, note = _rendered(job)
    assert value == pytest.approx(0.908 * 0.85, abs=1e-9)
    assert "x 0.85: attention backend aiter" in note and "128 KV heads / TP 8 = 16 per rank" in note, note
    assert "at a context of 9472 > 8192" in note, note


def test_deepseek_r1_at_tp_4_runs_triton_without_the_factor(tmp_path: Path) -> None:
    """128 / 4 = 32 KV heads per rank: triton; SGLang's own 0.910 stands."""
    value, note = _rendered(_job(tmp_path, tp=4))
    assert value == pytest.approx(0.910, abs=1e-9)
    assert "not applied" in note and "attention backend triton" in note and "= 32 per rank" in note, note


def test_a_gqa_model_runs_aiter(tmp_path: Path) -> None:
    value, note = _rendered(_job(tmp_path, LLAMA))
    assert value == pytest.approx(0.908 * 0.85, abs=1e-9)
    assert "for an MHA/GQA model (LlamaForCausalLM)" in note, note


def test_deepseek_v4_is_forced_to_dsv4_even_over_a_recipe_s_aiter(tmp_path: Path) -> None:
    """From 0.5.12 `apply_deepseek_v4_defaults` (0.5.15 on: its overrides.py provider) sets `attention_backend =
    "dsv4"` unconditionally: no factor."""
    for args in ("", "--attention-backend: aiter"):
        value, note = _rendered(_job(tmp_path, DSV4, args=args))
        assert value == pytest.approx(0.908, abs=1e-9), args
        assert "attention backend dsv4: SGLang 0.5.12 sets dsv4 for DeepseekV4ForCausalLM" in note, note


def test_an_architecture_not_read_keeps_no_factor_and_says_so(tmp_path: Path) -> None:
    """DeepSeek V4 at 0.5.9 (a release that does not know it), a model whose architecture the catalog does not
    record (MiniMax-M3): the pick is not modelled, SGLang's computed fraction stands unscaled."""
    value, note = _rendered(_job(tmp_path, DSV4, image="lmsysorg/sglang:v0.5.9-rocm700-mi35x"))
    assert value == pytest.approx(0.908, abs=1e-9)
    assert "pick for architecture DeepseekV4ForCausalLM is not modelled" in note, note
    value, note = _rendered(_job(tmp_path, MINIMAX))
    assert value == pytest.approx(0.908, abs=1e-9)
    assert "a model whose architecture the model catalog does not record is not modelled" in note, note


@pytest.mark.parametrize("args", ["--attention-backend: triton",
                                  "--prefill-attention-backend: triton, --decode-attention-backend: triton"])
def test_a_recipe_s_other_backend_wins(tmp_path: Path, args: str) -> None:
    value, note = _rendered(_job(tmp_path, args=args))
    assert value == pytest.approx(0.908, abs=1e-9)
    assert "not applied" in note and "attention backend triton" in note, note


def test_prefill_and_decode_backends_that_differ_leave_sglang_s_pick(tmp_path: Path) -> None:
    """Only a prefill backend equal to the decode backend replaces `attention_backend`; else SGLang fills it."""
    value, _note = _rendered(_job(tmp_path, args="--prefill-attention-backend: triton, "
                                                 "--decode-attention-backend: aiter"))
    assert value == pytest.approx(0.908 * 0.85, abs=1e-9)


def test_a_context_of_8192_or_less_takes_no_factor(tmp_path: Path) -> None:
    """isl 1024 + osl 1024 + 256: a context of 2304; aiter, but not above 8192."""
    value, note = _rendered(_job(tmp_path, isl=1024))
    assert value == pytest.approx(0.908, abs=1e-9)
    assert "not applied" in note and "attention backend aiter" in note and "context 2304" in note, note


def test_a_pinned_fraction_is_scaled_as_sglang_scales_it(tmp_path: Path) -> None:
    """`mem_fraction_static *= 0.85` runs after the pin is set: 0.8 x 0.85 = 0.68."""
    job = _job(tmp_path, args="--mem-fraction-static: 0.8")
    value, note = _rendered(job)
    assert value == pytest.approx(0.68, abs=1e-9)
    assert "the recipe's 0.8 x 0.85: attention backend aiter" in note and "pinned fraction too" in note, note
    fraction = launch_memory_fraction(job)
    assert fraction is not None and fraction.origin == "recipe" and fraction.value == pytest.approx(0.68)
    spec = engines.render(_job(tmp_path, tp=4, args="--mem-fraction-static: 0.8"), simulate=True)  # triton
    assert "0.8" in spec.argv and not [n for n in spec.notes if n.startswith("memory fraction")]


def _launch(tp: int, heads: int, *, mla: bool = True, architecture: str = "KimiK25ForConditionalGeneration",
            **kw: Any) -> SglangLaunch:
    spec = get_hardware("mi355x")
    return SglangLaunch(version="0.5.17", gpu="mi355x", gpu_mib=spec.hbm_bytes / MIB, rocm=True, tp=tp,
                        architecture=architecture, mla=mla, total_kv_heads=heads, context_len=262144, **kw)


@pytest.mark.parametrize(("tp", "backend"), [(1, "triton"), (2, "triton"), (4, "aiter"), (8, "triton")])
def test_kimi_k2_5_s_64_kv_heads_pick_aiter_only_at_tp_4(tp: int, backend: str) -> None:
    """64 // tp: 64, 32, 16, 8 per rank; aiter only for 16 (or 128)."""
    assert sglang_memory.sglang_attention_backend(_launch(tp, 64)).backend == backend


def test_off_rocm_the_pick_is_not_modelled() -> None:
    spec = get_hardware("h200")
    launch = SglangLaunch(version="0.5.17", gpu="h200", gpu_mib=spec.hbm_bytes / MIB, rocm=False, tp=8,
                          architecture="LlamaForCausalLM", total_kv_heads=8, context_len=131072)
    assert sglang_memory.sglang_attention_backend(launch).backend is None and sglang_memory_fraction(launch) is None
