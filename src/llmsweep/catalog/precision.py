"""Weight formats by name: what a recipe's `precision` and a checkpoint's name suffix may say, and what each means.

One table, read by everything that interprets a precision: the recipe check (an unknown name is a typo, refused
before any job is planned: `fp9` used to be served by the simulator as bf16 under an fp9 label), the model catalog's
bytes per parameter and checkpoint suffixes, the golden-AL curves' precision families and the simulator's compute
class. A new format is one row here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmsweep.catalog.hardware import Precision
from llmsweep.errors import ConfigError


@dataclass(frozen=True, slots=True)
class WeightFormat:
    name: str
    bytes_per_param: float
    """Including block-scale overhead (NVFP4: one FP8 scale per 16 values; MXFP4/MXFP8: one E8M0 scale per 32)."""
    family: str
    """What a golden acceptance length measured on it is fair for: a curve measured on NVFP4 fits an `nvfp4` (or a
    bare `fp4`) recipe, not an `fp8` one, nor an `mxfp4` one: NVFP4 (block 16, FP8-E4M3 scales) and MXFP4 (OCP
    microscaling, block 32, E8M0 scales) are distinct quantisations of distinct checkpoints (NVIDIA's and AMD's)."""
    compute: Precision
    """The hardware peak its matrix multiplies run at (the simulator's `--precision`): 4-bit weights with 16-bit
    activations (int4, w4a16) compute in bf16; int8 runs at the fp8 rate."""
    refines: str | None = None
    """The family a bare name stands for this one in (`nvfp4` and `mxfp4` refine `fp4`): a precision that says only
    `fp4` may be either, so it is told apart from neither (:func:`families_agree`)."""


FORMATS: dict[str, WeightFormat] = {f.name: f for f in (
    WeightFormat("fp32", 4.0, "fp32", "bf16"),
    WeightFormat("bf16", 2.0, "bf16", "bf16"),
    WeightFormat("fp16", 2.0, "bf16", "bf16"),
    WeightFormat("fp8", 1.0, "fp8", "fp8"),
    WeightFormat("mxfp8", 1.03125, "fp8", "fp8"),
    WeightFormat("int8", 1.0, "int8", "fp8"),
    WeightFormat("fp4", 0.5625, "fp4", "fp4"),
    WeightFormat("nvfp4", 0.5625, "nvfp4", "fp4", refines="fp4"),
    WeightFormat("mxfp4", 0.53125, "mxfp4", "fp4", refines="fp4"),
    WeightFormat("int4", 0.5625, "int4", "bf16"),
    WeightFormat("w4a16", 0.5625, "int4", "bf16"),
)}

_IN_NAMES = sorted((n for n in FORMATS if n != "fp32"), key=len, reverse=True)
NAME_ALTERNATION = "|".join(_IN_NAMES)
"""The formats a model id or curve name may carry as a token (longest first: `nvfp4` before `fp4`)."""
NAME_TOKEN = re.compile(rf"(?:^|[-_])({NAME_ALTERNATION})(?=$|[-_.])")
"""A format named as a token of a lower-case name: ``qwen3.5-397b-a17b-nvfp4``, ``r1-0528_mxfp4-v2``."""


def named_format(name: str) -> str | None:
    """The format a model id, checkpoint or file name names as a token (:data:`NAME_TOKEN`; the last one, any case,
    the organisation left out): ``amd/Qwen3.5-397B-A17B-MXFP4`` -> mxfp4, ``qwen3.5-397b-a17b-nvfp4`` -> nvfp4,
    ``moonshotai/Kimi-K3`` -> None; a folder path's trailing slash is no part of it (``/models/X-MXFP4/``)."""
    found = NAME_TOKEN.findall(name.rstrip("/").rsplit("/", 1)[-1].lower())
    return found[-1] if found else None


def served_format(model: str, precision: str) -> str:
    """The format of the weights a recipe serves, as a golden curve is matched to it: the one its model id names as a
    token (``amd/Qwen3.5-397B-A17B-MXFP4`` at precision ``fp4`` serves mxfp4), else its `precision` (lower-case)."""
    return named_format(model) or precision.strip().lower()


def precision_family(precision: str) -> str:
    """The golden-AL family of a precision (:attr:`WeightFormat.family`; ``fp16`` is bf16's, ``NVFP4`` nvfp4's); a name
    of no format is its own, lower-case."""
    p = precision.strip().lower()
    fmt = FORMATS.get(p)
    return fmt.family if fmt is not None else p


_REFINES = {f.family: f.refines for f in FORMATS.values() if f.refines}


def families_agree(a: str, b: str) -> bool:
    """Whether a golden AL measured in precision `a` is fair for one served in `b`: the same family, or one is the
    bare family the other refines (``fp4`` against ``nvfp4`` or ``mxfp4``: it cannot be told, so it is not told
    apart); ``nvfp4`` against ``mxfp4``, or ``fp8`` against either, disagree."""
    fa, fb = precision_family(a), precision_family(b)
    return fa == fb or _REFINES.get(fa) == fb or _REFINES.get(fb) == fa


def refines(specific: str, bare: str) -> bool:
    """Whether precision `specific` names a format the bare family `bare` stands for without telling it
    (``mxfp4`` or ``nvfp4`` against ``fp4``): they agree (:func:`families_agree`), yet `specific` says more."""
    return _REFINES.get(precision_family(specific)) == precision_family(bare)


QUANT_SPELLINGS: tuple[tuple[str, str], ...] = (
    ("nvfp4", "nvfp4"), ("mxfp4", "mxfp4"), ("mxfp8", "mxfp8"), ("fp8", "fp8"), ("e4m3", "fp8"), ("e5m2", "fp8"),
    ("float8", "fp8"), ("fp4", "fp4"), ("w4a16", "int4"), ("int4", "int4"), ("awq", "int4"), ("int8", "int8"),
    ("w8a8", "int8"),
)
"""How quantisation tools name a format in a checkpoint's config (ModelOpt's `quant_algo`, `quant_method`, `fmt`...):
a word -> the format's name here, the longer names first (`nvfp4` before `fp4`)."""


def format_named_in(text: str) -> str | None:
    """The weight format a quantisation config's value names (``FP8``, ``e4m3``, ``NVFP4``, ``W4A16_AWQ``), else
    None."""
    t = text.lower().replace("-", "_")
    return next((name for word, name in QUANT_SPELLINGS if word in t), None)


def weight_format(name: str) -> WeightFormat | None:
    """The format a recipe's `precision` (any case) names; None when it names none."""
    return FORMATS.get(name.strip().lower())


def known_names() -> str:
    return ", ".join(FORMATS)


MODEL_DTYPE = "bf16"
"""The dtype a model's activations, and a KV cache an engine keeps at `auto`, take: every checkpoint the catalog lists
says `torch_dtype: bfloat16` in its config, the FP8 and FP4 ones included (their weights are quantised, their KV is
not unless `--kv-cache-dtype` says so)."""

KV_CACHE_SPELLINGS: dict[str, str] = {
    "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "fp32": "fp32", "float32": "fp32",
    "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e4m3fn": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8", "int8": "int8",
    "mxfp8": "mxfp8", "nvfp4": "nvfp4", "nvfp4_4over6": "nvfp4", "mxfp4": "mxfp4", "fp4": "fp4",
    "fp4_e2m1": "fp4", "fp4_mx_block16": "fp4",
}
"""An engine's `--kv-cache-dtype` spelling -> the weight format (:data:`FORMATS`) whose bytes per value, block scales
included, one KV element takes. SGLang (server_args.py choices): fp8_e4m3/fp8_e5m2, mxfp8 (E8M0 scale per 32),
nvfp4 (FP8 scale per 16), fp4_e2m1 and fp4_mx_block16 (4-bit values with a one-byte scale per 16: its
`MHATokenToKVPoolFP4`), bf16/bfloat16. vLLM (`CacheDType`): fp8 (= fp8_e4m3), fp8_e5m2, fp8_inc, bfloat16,
float16, int8, nvfp4 and nvfp4_4over6 (the NVFP4 layout). `auto` is the model's dtype (:func:`kv_cache_format`)."""

KV_CACHE_OWN_LAYOUTS: dict[str, float] = {"fp8_ds_mla": 656 / 576}
"""KV dtypes with a layout of their own, in bytes per element: vLLM's `fp8_ds_mla` (DeepSeek-V3.2's sparse MLA)
keeps a token's 576 latent values in 656 bytes (512 FP8 values, four FP32 scales, 64 BF16 rope values)."""


@dataclass(frozen=True, slots=True)
class KvCacheFormat:
    name: str
    """What the simulator's `--kv-dtype` takes and a finding calls it: the weight format whose bytes it takes (`fp8`
    for fp8_e4m3, `fp4` for fp4_e2m1, the model's dtype for `auto`), else the spelling of its own layout."""
    bytes_per_element: float
    """Block scales included (mxfp8 1.03, nvfp4 0.56, mxfp4 0.53)."""


def kv_cache_format(spelling: str, model_dtype: str = MODEL_DTYPE) -> KvCacheFormat:
    """The KV cache an engine's `--kv-cache-dtype` value (any case) keeps: `auto` is `model_dtype`'s. Raises
    ConfigError for a spelling of no known size: it is not read as bf16 (mxfp8, nvfp4 and fp4_e2m1 had been sized as
    bf16 by the simulator and the HBM-fit check, twice to four times their bytes)."""
    key = spelling.strip().lower()
    if key == "auto":
        key = model_dtype.strip().lower()
    own = KV_CACHE_OWN_LAYOUTS.get(key)
    if own is not None:
        return KvCacheFormat(key, own)
    fmt = FORMATS.get(KV_CACHE_SPELLINGS.get(key, ""))
    if fmt is None:
        raise ConfigError(f"unknown KV-cache dtype {spelling!r}: its bytes per element are not known",
                          fix=f"use one of: auto, {', '.join([*KV_CACHE_SPELLINGS, *KV_CACHE_OWN_LAYOUTS])}")
    return KvCacheFormat(fmt.name, fmt.bytes_per_param)


def kv_bytes_per_element(spelling: str, model_dtype: str = MODEL_DTYPE) -> float:
    """Bytes one KV element of `spelling` takes (:func:`kv_cache_format`)."""
    return kv_cache_format(spelling, model_dtype).bytes_per_element
