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


@dataclass(frozen=True, slots=True)
class WeightFormat:
    name: str
    bytes_per_param: float
    """Including block-scale overhead (NVFP4: one FP8 scale per 16 values; MXFP4/MXFP8: one E8M0 scale per 32)."""
    family: str
    """What a golden acceptance length measured on it is fair for: a curve measured on NVFP4 fits an `fp4` recipe,
    not an `fp8` one."""
    compute: Precision
    """The hardware peak its matrix multiplies run at (the simulator's `--precision`): 4-bit weights with 16-bit
    activations (int4, w4a16) compute in bf16; int8 runs at the fp8 rate."""


FORMATS: dict[str, WeightFormat] = {f.name: f for f in (
    WeightFormat("fp32", 4.0, "fp32", "bf16"),
    WeightFormat("bf16", 2.0, "bf16", "bf16"),
    WeightFormat("fp16", 2.0, "bf16", "bf16"),
    WeightFormat("fp8", 1.0, "fp8", "fp8"),
    WeightFormat("mxfp8", 1.03125, "fp8", "fp8"),
    WeightFormat("int8", 1.0, "int8", "fp8"),
    WeightFormat("fp4", 0.5625, "fp4", "fp4"),
    WeightFormat("nvfp4", 0.5625, "fp4", "fp4"),
    WeightFormat("mxfp4", 0.53125, "fp4", "fp4"),
    WeightFormat("int4", 0.5625, "int4", "bf16"),
    WeightFormat("w4a16", 0.5625, "int4", "bf16"),
)}

_IN_NAMES = sorted((n for n in FORMATS if n != "fp32"), key=len, reverse=True)
NAME_ALTERNATION = "|".join(_IN_NAMES)
"""The formats a model id or curve name may carry as a token (longest first: `nvfp4` before `fp4`)."""
NAME_TOKEN = re.compile(rf"(?:^|[-_])({NAME_ALTERNATION})(?=$|[-_.])")
"""A format named as a token of a lower-case name: ``qwen3.5-397b-a17b-nvfp4``, ``r1-0528_mxfp4-v2``."""


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
