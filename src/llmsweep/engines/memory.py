"""The share of each GPU's memory a job's engine launches with for weights and KV cache, and where the figure comes
from: the one answer the simulator (`engines/sim.py`, its KV pool) and the policy (`resources.hbm-fit`) both read.

In order: the recipe's own flag (the engine's `memory_fraction_default.flag` in the engines catalog, in any spelling
its parser reads as that flag: `_`/`-`, a unique prefix); else the engine's own default for the version its image tag
names (else the recipe's `serve.engine.version`), from the engines catalog (`catalog.engines.default_memory_fraction`:
vLLM 0.92 from 0.20.0 and 0.9 from 0.11.0, ATOM 0.9); for SGLang, which computes its own per launch, that
computation (`engines.sglang_memory`: `ServerArgs._handle_gpu_memory_settings` of 0.5.9-0.5.17, on ROCm GPUs); else,
where the catalog records the engine's flag but no default for that version (vLLM before 0.11.0 or an image that
names no version; SGLang at another release, unversioned or on CUDA), the simulator's own 0.88
(`llmsweep.sim.engine.EngineConfig.mem_fraction_static`), labelled as such with why. A recipe of the simulator itself
reads its own `--mem-fraction-static` (or `--gpu-memory-utilization`), else 0.88.

TensorRT-LLM's fraction (`--kv_cache_free_gpu_memory_fraction`, default 0.9) is a share of the memory the weights
leave, for the KV cache alone, not of HBM: the answer says so (`share_of="free"`), and
:meth:`MemoryFraction.budget_bytes` turns either kind into the bytes of one GPU that weights and KV may take, given
the weights — the simulator's launch fraction of HBM and the policy's budget both come from it. An engine whose
catalog entry records no `memory_fraction_default` takes no share llmsweep knows of (transformers, an engine no
adapter serves): :func:`launch_memory_fraction` answers None for it, and each reader says what it does instead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from llmsweep.catalog.engines import ShareOf, default_memory_fraction, get_engine
from llmsweep.engine_ids import SIM
from llmsweep.engines.base import job_version, norm_flag
from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job

FractionOrigin = Literal["recipe", "engine", "unestablished", "simulator"]
"""`recipe`: the recipe's flag; `engine`: the engine's own default for its version (engines catalog); `unestablished`:
the catalog records the engine's flag but no default for its version, so the simulator's own stands in; `simulator`:
a recipe of the simulator itself that pins none."""


@dataclass(frozen=True)
class MemoryFraction:
    """The share of each GPU's memory a job's engine launches with, what it is a share of, and its source."""

    value: float
    origin: FractionOrigin
    source: str
    """Where the value comes from, in words: `vLLM 0.26.0's default`, `the recipe's --gpu-memory-utilization`,
    `SGLang's default is not established; the simulator's 0.88`."""
    note: str | None = None
    """The line a simulated launch's notes carry (`server_command.txt`), with the catalog's source and why (SGLang's
    computed fraction: its terms); None where it carries none (a recipe's pin, a recipe of the simulator, SGLang at a
    version or on a GPU its computation is not reproduced for)."""
    share_of: ShareOf = "hbm"
    """`hbm`: of each GPU's whole memory, for weights and KV cache; `free`: of the memory the weights leave, for the
    KV cache alone (TensorRT-LLM's `kv_cache_free_gpu_memory_fraction`)."""

    def describe(self) -> str:
        """The value, what it is a share of and its source, for a message: `0.92, vLLM 0.26.0's default`, `0.85 from
        the recipe's --gpu-memory-utilization`, `0.9 of the memory the weights leave, TensorRT-LLM's default`."""
        shown = f"{self.value:g}" + (f" {FREE_SHARE}" if self.share_of == "free" else "")
        return f"{shown} from {self.source}" if self.origin == "recipe" else f"{shown}, {self.source}"

    def budget_bytes(self, hbm_bytes: float, weight_bytes: float, reserve_bytes: float = 0.0) -> float:
        """Bytes of one GPU of `hbm_bytes` that its weights (`weight_bytes`, this GPU's share) and KV cache may take
        at this fraction: HBM x the fraction for a share of HBM; for a share of what the weights leave, the weights,
        the `reserve_bytes` set aside beside them and the fraction of the rest — `w + r + f x (HBM - w - r)`, so a
        KV pool sized as `budget - r - w` is `f x (HBM - w - r)`. Not modelled: the activation peak TensorRT-LLM
        measures in its profiling run (a `max_num_tokens` forward pass) and leaves out of the free memory, beyond
        what `reserve_bytes` stands for."""
        if self.share_of == "hbm":
            return hbm_bytes * self.value
        fixed = weight_bytes + reserve_bytes
        return fixed + self.value * max(0.0, hbm_bytes - fixed)


FREE_SHARE = "of the memory the weights leave"
"""How a message names a fraction that is a share of the memory free after the weights (`share_of="free"`)."""


def simulator_fraction() -> float:
    """The simulator's own memory fraction (0.88): `llmsweep.sim.engine.EngineConfig.mem_fraction_static`."""
    from llmsweep.sim.engine import EngineConfig

    default = EngineConfig.model_fields["mem_fraction_static"].default
    assert isinstance(default, float)
    return default


def fraction_value(value: Any) -> float | None:
    """A flag's value as a memory fraction in (0, 1] (`0.85`, `"0.85"`), or None when it is not one (`40`, `"0,4"`,
    `true`, `-1`, `[0.5]`: the engine's parser or its own check refuses it, and so does the policy's
    `serve.memory-fraction`)."""
    if isinstance(value, bool):
        return None
    try:
        fraction = float(value)
    except (TypeError, ValueError):
        return None
    return fraction if 0 < fraction <= 1 else None


def _written(job: Job, flags: frozenset[str], engine: str | None = None) -> list[tuple[str, str, Any]]:
    """(as written in `serve.args`, as written without an `=value`, value) of each of the job's flags that `engine`'s
    parser (default the job's own) reads as one of `flags`, in order. `engine`: the engine a simulated job stands in
    for, whose aliases a recipe of `serve.engine: sim` may use (TensorRT-LLM's `--free_gpu_memory_fraction`)."""
    from llmsweep.engines import ADAPTERS, engine_flags
    from llmsweep.engines.base import split_flag

    reader = ADAPTERS.get(engine) if engine is not None else None
    out: list[tuple[str, str, Any]] = []
    for written, name, value in engine_flags(job):
        flag, value = split_flag(written, value)
        if (reader.canonical(flag) if reader is not None else name) in flags:
            out.append((written, flag, value))
    return out


def _pinned(job: Job, flags: frozenset[str], engine: str | None = None) -> MemoryFraction | None:
    """The recipe's own fraction: the last of its flags `engine`'s parser (default the job's own) reads as one of
    `flags` (the engine would take the last), as written; a value that is no fraction is skipped here and refused by
    the policy (:func:`memory_fraction_flags`)."""
    for _, written, value in reversed(_written(job, flags, engine)):
        fraction = fraction_value(value)
        if fraction is not None:
            return MemoryFraction(fraction, "recipe", f"the recipe's {written}")
    return None


def _fraction_flags(job: Job) -> list[tuple[frozenset[str], str | None]]:
    """The flag spellings (normalised) `job`'s launch reads as its memory fraction, each with the engine whose parser
    resolves them (None: the job's own): the engine's `memory_fraction_default.flag` from the engines catalog, and
    for a job of `serve.engine: sim` the simulator's own spellings (`--mem-fraction-static`, `--gpu-memory-utilization`:
    `engines.sim.TRANSLATED`). The one answer :func:`launch_memory_fraction` and the policy both read."""
    from llmsweep.engines.sim import TRANSLATED, SimAdapter

    own = (frozenset(k for k, v in TRANSLATED.items() if v == "--mem-fraction-static"), None)
    engine = SimAdapter.stands_in_for(job)
    if engine is None:
        return [own] if job.engine == SIM.id else []
    try:
        record = get_engine(engine).memory_fraction_default
    except ConfigError:
        return []
    if record is None:
        return []
    return [(frozenset({norm_flag(record.flag)}), engine), *([own] if job.engine == SIM.id else [])]


def memory_fraction_flags(job: Job) -> list[tuple[str, Any]]:
    """(as written, value) of each of `job`'s `serve.args` that its launch reads as its memory fraction (vLLM's and
    ATOM's `--gpu-memory-utilization`, SGLang's `--mem-fraction-static`, TensorRT-LLM's
    `--kv_cache_free_gpu_memory_fraction`, the simulator's own), in any spelling the engine's parser reads as it."""
    return [(written, value) for flags, engine in _fraction_flags(job)
            for written, _, value in _written(job, flags, engine)]


def launch_memory_fraction(job: Job, gpu: str | None = None) -> MemoryFraction | None:
    """The memory fraction `job`'s engine launches with (the recipe's flag, else the engine's default at its version
    or, for SGLang, the one it computes for the launch, else the simulator's own 0.88, labelled) and its source; None
    when the engines catalog records no fraction for its engine (transformers, an engine no adapter serves). A recipe
    of `serve.engine: sim` that stands in for an engine may also write the simulator's own spelling
    (`--mem-fraction-static`, `--gpu-memory-utilization`), taken as a share of HBM as written, after the engine's own
    flag. `gpu`: the GPU the launch names (default the job's SKU), carried into the engine default's record."""
    from llmsweep.engines.sim import SimAdapter

    engine = SimAdapter.stands_in_for(job)
    spellings = _fraction_flags(job)
    if engine is None:
        if job.engine != SIM.id:
            return None
        own = simulator_fraction()
        return _pinned(job, spellings[0][0]) or MemoryFraction(own, "simulator", f"the simulator's own {own:g}")
    try:
        info = get_engine(engine)
    except ConfigError:
        return None
    record = info.memory_fraction_default
    if record is None:
        return None
    pinned = _pinned(job, spellings[0][0], engine)
    if pinned is not None:
        pinned = replace(pinned, share_of=record.share_of)
        return _sglang_scaled(job, engine, gpu or job.sku or "", pinned) or pinned
    if len(spellings) > 1 and (own_pin := _pinned(job, spellings[1][0])) is not None:
        return own_pin  # `serve.engine: sim`: the simulator's own knob, a share of HBM, as served
    version = job_version(job)
    default = default_memory_fraction(engine, version, gpu or job.sku or "")
    name = info.display_name
    if default is not None:
        whose = f"{name} {version}'s default" if version else f"{name}'s default (the image names no version)"
        return MemoryFraction(float(default.value), "engine", whose, default.note(), record.share_of)
    own = simulator_fraction()
    if not record.rules:  # none for any version: the engine computes its own per launch (SGLang)
        return _computed_fraction(job, engine, version, gpu or job.sku or "", record.flag, name) or MemoryFraction(
            own, "unestablished", f"{name}'s default is not established (it computes one per launch); the "
                                  f"simulator's {own:g}")
    versioned = f"version {version}" if version else "an image that names no version"
    return MemoryFraction(
        own, "unestablished", f"{name}'s default for {versioned} is not established; the simulator's {own:g}",
        f"memory fraction {own:g}: the simulator's own; {name}'s default ({record.flag}) for {versioned} is not "
        f"established — {record.unestablished}")


def _sglang_scaled(job: Job, engine: str, gpu: str, pinned: MemoryFraction) -> MemoryFraction | None:
    """A recipe's pinned SGLang fraction as SGLang launches with it where it multiplies it by 0.85 for the aiter
    attention backend (:func:`llmsweep.engines.sglang_memory.sglang_scaled_pin`); None otherwise (the pin stands)."""
    from llmsweep.engine_ids import SGLANG
    from llmsweep.engines.sglang_memory import sglang_scaled_pin
    from llmsweep.sim.inputs import simulated_gpu

    if engine != SGLANG.id:
        return None
    scaled = sglang_scaled_pin(job, pinned.value, simulated_gpu(gpu) if gpu else None)
    if scaled is None:
        return None
    value, note = scaled
    return MemoryFraction(value, "recipe", f"{pinned.source} x 0.85 (SGLang's aiter attention factor)", note)


def _computed_fraction(job: Job, engine: str, version: str | None, gpu: str, flag: str,
                       name: str) -> MemoryFraction | None:
    """The fraction an engine that computes its own per launch takes for `job` (SGLang's
    `ServerArgs._handle_gpu_memory_settings`: :mod:`llmsweep.engines.sglang_memory`), with its source and launch
    note; where it is not reproduced (a release not read or an image naming none, a CUDA or unknown GPU) the
    simulator's 0.88, labelled with why; None for another engine."""
    from llmsweep.engine_ids import SGLANG
    from llmsweep.engines.sglang_memory import (
        SGLANG_MEMORY_FILE,
        SGLANG_MEMORY_FUNCTION,
        describe_launch,
        explain_fraction,
        not_reproduced,
        sglang_launch,
        sglang_memory_fraction,
    )
    from llmsweep.sim.inputs import simulated_gpu

    if engine != SGLANG.id:
        return None
    spec = simulated_gpu(gpu) if gpu else None
    why = not_reproduced(version, spec)
    if why is not None or version is None or spec is None:
        own = simulator_fraction()
        return MemoryFraction(own, "unestablished", f"{name}'s default {why} is not reproduced (it computes one per "
                                                    f"launch); the simulator's {own:g}")
    launch = sglang_launch(job, version, spec)
    value = sglang_memory_fraction(launch)
    assert value is not None  # reproduced: a release read, on ROCm
    source = f"{name} {version}'s {SGLANG_MEMORY_FUNCTION} for {describe_launch(launch)}"
    note = (f"memory fraction {value:g}: {name} {version}'s own when {flag} is unset, computed as its "
            f"{SGLANG_MEMORY_FILE} {SGLANG_MEMORY_FUNCTION} does for {describe_launch(launch)}: "
            f"{explain_fraction(launch)}")
    return MemoryFraction(value, "engine", source, note)
