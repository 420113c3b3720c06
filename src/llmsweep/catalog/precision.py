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
    ``moonshotai/Kimi-K3`` -> None."""
    found = NAME_TOKEN.findall(name.rsplit("/", 1)[-1].lower())
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
