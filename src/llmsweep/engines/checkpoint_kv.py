"""The KV cache an engine keeps at `--kv-cache-dtype auto` (its default) where the checkpoint names a KV-cache
quantisation: vLLM and SGLang keep it in that format, not the model's dtype the simulator and `resources.hbm-fit` size
`auto` at. Each adapter says which formats its `auto` takes and from which release (`Adapter.checkpoint_kv_dtypes`);
`resources.kv-dtype-auto` warns of the launch."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from llmsweep.catalog.precision import MODEL_DTYPE, kv_bytes_per_element
from llmsweep.catalog.version import Version
from llmsweep.plan.job import Job

MODELOPT_HUB_ID = re.compile(r"(?i)^nvidia/.*(?:nvfp4|mxfp8|fp8|fp4)")
"""NVIDIA's ModelOpt exports on the hub (nvidia/Llama-3.1-8B-Instruct-FP8, nvidia/Qwen3.5-397B-A17B-NVFP4, ...): the
checkpoints whose hf_quant_config.json may name a KV-cache quantisation (FP8, where one does); not read one by one
here."""
HUB_GUESS = "fp8"
"""The KV-cache quantisation a ModelOpt hub id is taken to name (kv_cache_quant_algo FP8, what its exports usually
name)."""


@dataclass(frozen=True, slots=True)
class CheckpointKvDtype:
    """A KV-cache quantisation (as :func:`checkpoint_kv_algo` names it) that an engine's `auto` keeps."""

    since: Version
    """The first release read whose `auto` keeps it (releases before it are not flagged)."""
    spelling: str
    """The engine's `--kv-cache-dtype` value for it: what the warning's fix asks the launch to write."""


@dataclass(frozen=True, slots=True)
class AutoKvCache:
    """What a launch at `auto` keeps where the checkpoint names a KV-cache quantisation the engine takes."""

    algo: str
    """The format (`fp8`, `nvfp4`)."""
    spelling: str
    """The engine's `--kv-cache-dtype` spelling of it."""
    how: str
    """Where it was read: the local checkpoint, or the hub id's likely export."""

    @property
    def ratio(self) -> str:
        """How many times the format's bytes the model's dtype takes, in words (`twice`, `3.6 times`)."""
        times = kv_bytes_per_element(MODEL_DTYPE) / kv_bytes_per_element(self.algo)
        return "twice" if abs(times - 2) < 1e-9 else f"{times:.1f} times"


def checkpoint_kv_algo(folder: Path) -> str | None:
    """The KV-cache quantisation a local ModelOpt checkpoint names (hf_quant_config.json's `quantization`, or
    config.json's quantization_config of a `modelopt*` method), lower-cased: a `kv_cache_quant_algo` as written, a
    `kv_cache_scheme` of 8-bit floats `fp8` and of 4-bit floats `nvfp4` (vLLM's reading), another scheme
    `unrecognised` (which no engine's `auto` takes). None where it names none or is no ModelOpt export."""
    for name, key in (("hf_quant_config.json", "quantization"), ("config.json", "quantization_config")):
        try:
            doc = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        quant = doc.get(key) if isinstance(doc, dict) else None
        if not isinstance(quant, dict):
            continue
        if name == "config.json" and not str(quant.get("quant_method", "")).startswith("modelopt"):
            continue
        algo = quant.get("kv_cache_scheme") or quant.get("kv_cache_quant_algo")
        if isinstance(algo, dict):
            if algo.get("type") == "float" and algo.get("num_bits") in (8, 4):
                return "fp8" if algo.get("num_bits") == 8 else "nvfp4"
            return "unrecognised"
        if isinstance(algo, str) and algo:
            return algo.lower()
    return None


def auto_kv_cache(job: Job, kept: Mapping[str, CheckpointKvDtype], version: Version | None) -> AutoKvCache | None:
    """What an engine whose `auto` keeps the formats `kept` (at `version`, None: unknown) keeps `job`'s KV cache in
    though the launch leaves `--kv-cache-dtype` at auto: read from a local checkpoint (`serve.model-path`, or a
    `model` that is a folder), or for a ModelOpt hub id the FP8 its export usually names. None where the engine keeps
    the model's dtype: a checkpoint naming no KV quantisation or one the engine's `auto` does not take, a release
    before the one that takes it, a hub id that is no ModelOpt export."""
    path = job.serve.model_path if job.serve is not None and job.serve.model_path else job.model
    folder = Path(path).expanduser()
    if folder.is_dir():
        algo = checkpoint_kv_algo(folder)
        how = f"in {algo}, as the checkpoint in {folder} names it"
    elif MODELOPT_HUB_ID.search(path):
        algo = HUB_GUESS
        how = ("in FP8 if the checkpoint's hf_quant_config.json names kv_cache_quant_algo FP8 (a ModelOpt export's "
               "usually does)")
    else:
        return None
    dtype = kept.get(algo) if algo is not None else None
    if algo is None or dtype is None or (version is not None and version.below(dtype.since)):
        return None
    return AutoKvCache(algo, dtype.spelling, how)
