"""A KV-cache dtype's bytes per element have one home (`catalog.precision.kv_cache_format`), read by the simulator's
KV pool and by `resources.hbm-fit` (tests/unit/policy/test_hbm_fit_kv_dtype.py: what each reader makes of it).

Both had read any `--kv-cache-dtype` not starting with `fp8` as bf16: on Qwen3.5 FP8 over TP 2 on MI325X, SGLang's
mxfp8, nvfp4 and fp4_e2m1 caches were each costed at the bf16 cache's 2.0 GB for one 131,072-token request (fp8_e4m3
at 1.0 GB), and the simulator served them with a bf16 pool: half to a quarter of the tokens they hold."""

from __future__ import annotations

import pytest

from llmsweep.catalog.engines import flag_values
from llmsweep.catalog.precision import FORMATS, kv_bytes_per_element, kv_cache_format
from llmsweep.errors import ConfigError

EXPECTED = {"bf16": 2.0, "bfloat16": 2.0, "auto": 2.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp8": 1.0,
            "mxfp8": 1.03125, "nvfp4": 0.5625, "fp4_e2m1": 0.5625, "fp4_mx_block16": 0.5625, "mxfp4": 0.53125}
"""Bytes per element, block scales included: mxfp8 one E8M0 scale per 32 values, nvfp4 one FP8 scale per 16, SGLang's
fp4_e2m1 pool one byte of scale per 16 values (`MHATokenToKVPoolFP4`)."""


@pytest.mark.parametrize(("spelling", "size"), EXPECTED.items())
def test_a_kv_dtype_takes_its_formats_bytes_scales_included(spelling: str, size: float) -> None:
    assert kv_bytes_per_element(spelling) == size
    assert kv_bytes_per_element(spelling.upper()) == size


def test_a_block_scaled_kv_cache_reuses_the_weight_formats_overhead() -> None:
    for spelling in ("mxfp8", "nvfp4", "mxfp4"):
        assert kv_bytes_per_element(spelling) == FORMATS[spelling].bytes_per_param


def test_auto_is_the_models_dtype() -> None:
    assert kv_cache_format("auto").name == "bf16"
    assert kv_cache_format("auto", model_dtype="fp16").name == "fp16"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_every_value_an_engines_parser_accepts_has_a_size(engine: str) -> None:
    """The catalog's `--kv-cache-dtype` choices (engine_flags.yaml) are all sized, none as bf16 by default."""
    for value in flag_values(engine)["--kv-cache-dtype"].choices:
        assert kv_bytes_per_element(value) > 0, value


@pytest.mark.parametrize("spelling", ["turboquant_k8v4", "fp9", "int4_per_token_head"])
def test_a_spelling_of_no_known_size_is_refused_not_read_as_bf16(spelling: str) -> None:
    with pytest.raises(ConfigError, match="unknown KV-cache dtype"):
        kv_cache_format(spelling)
