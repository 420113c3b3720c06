"""The one adapter from the catalogs (or explicit numbers) to :class:`~llmsweep.sim.perf.PerfInputs`.

The catalog owns the hardware and model figures (their only home); the simulator only needs a dozen numbers, read
here from the typed catalog entries. A model name the catalog does not know that begins with one of a few catalog
models' names takes that entry's figures (`PREFIX_MODELS`); explicit overrides win over both.
"""

from __future__ import annotations

import logging
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from llmsweep.catalog.hardware import HARDWARE_FILE, HARDWARE_KEY, HardwareSpec, all_hardware, find_hardware
from llmsweep.catalog.models import MODEL_KEY, MODELS_FILE, ModelSpec, all_models, find_model
from llmsweep.catalog.precision import kv_bytes_per_element
from llmsweep.catalog.sources import entry_fix
from llmsweep.errors import ConfigError
from llmsweep.sim.perf import GB, PerfInputs
from llmsweep.words import noun

if TYPE_CHECKING:
    from llmsweep.catalog.precision import WeightFormat

log = logging.getLogger(__name__)

PREFIX_MODELS = ("llama-3.1-70b", "llama-3.1-8b", "llama-1b", "qwen3-30b-a3b", "qwen3.5-397b-a17b")
"""Catalog models a name the catalog does not know is taken for when it begins with one (a quantised or fine-tuned
checkpoint's name: `llama-3.1-8b-instruct-awq`): their figures stand in, from the catalog entry."""


def _weight_format_of(name: str | None) -> WeightFormat | None:
    """The weight format `name` names in the one table of formats (`catalog.precision`), None for one it does not
    know; a quantisation tool's spelling (`e4m3`) is its family's."""
    from llmsweep.catalog.precision import format_named_in, weight_format

    if not name:
        return None
    return weight_format(name) or weight_format(format_named_in(name) or "")


def simulated_gpu(sku: str) -> HardwareSpec | None:
    """The catalog entry the simulator prices `sku` with — its entry, else the entry whose id leads the name
    (`mi300x-amds` is an mi300x); None when no entry matches."""
    spec = find_hardware(sku)
    if spec is None:
        key = sku.lower().replace("_", "-")
        spec = next((h for h in sorted(all_hardware(), key=lambda h: -len(h.id)) if key.startswith(h.id + "-")), None)
    return spec


def _hardware_figures(sku: str, precision: str) -> dict[str, float] | None:
    """The catalog's figures for `sku` (:func:`simulated_gpu`): the hardware catalog is their one home (a built-in
    table beside it kept an H200 at 141 GB after the catalog learned the driver's 150.76). None when no entry matches
    or it has no FLOP/s figure."""
    spec = simulated_gpu(sku)
    if spec is None:
        return None
    try:
        tflops = spec.tflops(precision) or spec.bf16_tflops
    except ConfigError:  # a precision the catalog has no column for (int8): the bf16 column
        tflops = spec.bf16_tflops
    if not tflops:
        log.info("catalog entry for %r has no FLOP/s figure for %s", sku, precision)
        return None
    return {"hbm_gb": spec.hbm_gb, "hbm_bw_tbs": spec.hbm_bw_tbs, "tflops": tflops, "link_gbs": spec.link_gbs}


def _model_figures(name: str, kv_dtype: str | None = None) -> dict[str, Any] | None:
    """The catalog model's figures for `name` (its entry, else the entry of one of `PREFIX_MODELS` it begins with),
    its KV at `kv_dtype` (None: the engine's default); None when none matches."""
    spec = find_model(name)
    if spec is None:
        key = name.lower()
        prefix = next((p for p in PREFIX_MODELS if key.startswith(p) or key.split("/")[-1].startswith(p)), None)
        spec = find_model(prefix) if prefix is not None else None
    if spec is None:
        return None
    total = spec.params_total
    active = spec.params_active or total
    experts, top_k = spec.n_experts, spec.experts_per_token
    # total = dense + E*e and active = dense + k*e  =>  routed share = E*e / total
    share = experts * (total - active) / (experts - top_k) / total if experts > top_k else 0.0
    split = 1 if spec.attention.kind == "mla" else (spec.attention.kv_heads or 1 << 20)
    return {"params_total": total, "params_active": active, "n_layers": spec.layers,
            "hidden": spec.hidden_size, "kv_bytes_per_token": spec.kv_cache_bytes_per_token(kv_dtype),
            "n_experts": experts, "experts_per_token": top_k, "expert_param_share": min(max(share, 0.0), 0.99),
            "kv_split_max": split,
            "prefill_attention_flops": spec.attention_flops_per_context_token("prefill"),
            "decode_attention_flops": spec.attention_flops_per_context_token("decode"),
            "context_terms": spec.context_terms(kv_dtype)}


def simulated_hardware() -> list[str]:
    """The SKUs the simulator has figures for: the catalog's with a FLOP/s figure."""
    return sorted(h.id for h in all_hardware() if h.bf16_tflops)


def simulated_models() -> list[str]:
    """The models the simulator has figures for: the catalog's."""
    return sorted(m.id for m in all_models())


def simulates_model(name: str) -> bool:
    """Whether the simulator has figures for the model `name` (a catalog entry, or a name beginning with one of
    `PREFIX_MODELS`)."""
    return _model_figures(name) is not None


def model_entry_fix() -> str:
    """How to give the simulator a model's figures: the models catalog entry (the fix of every refusal for want of
    one)."""
    return entry_fix(MODELS_FILE, ModelSpec, MODEL_KEY)


def perf_inputs(
    model: str,
    hardware: str,
    *,
    precision: str = "bf16",
    kv_dtype: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> PerfInputs:
    """PerfInputs for (model, hardware): the catalogs (built-in figures for the test models), then `overrides`.

    `precision` picks the weight bytes and the FLOP/s column; `kv_dtype` (an engine's `--kv-cache-dtype` spelling;
    default the model's dtype, bf16) sizes the KV bytes per token (`ModelSpec.kv_cache_bytes_per_token`: the bf16
    figure scaled by its bytes per element, `catalog.precision.kv_bytes_per_element`: fp8 halves it, nvfp4 takes 0.28
    of it; a DSA's indexer keys and DeepSeek-V4's compressed cache in the layout its engines keep). Raises
    ConfigError naming what is missing and how to supply it, or a KV dtype of no known size.
    """
    precision = precision.lower()
    overrides = dict(overrides or {})
    known = {f.name for f in fields(PerfInputs)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"unknown simulator performance {noun(len(unknown), 'override')}: {', '.join(unknown)}",
                          fix=f"use only these names: {', '.join(sorted(known))}")
    hw = _hardware_figures(hardware, precision)
    kv_bytes_per_element(kv_dtype or "auto")  # a KV dtype of no known size is refused whatever gives the figures
    md = _model_figures(model, kv_dtype)
    base_needed = {"hbm_bytes", "hbm_bw", "flops"}
    if hw is None and not base_needed <= set(overrides):
        raise ConfigError(f"simulator: no hardware figures for {hardware!r} in the hardware catalog",
                          fix=f"use one of {', '.join(simulated_hardware())}, or "
                              f"{entry_fix(HARDWARE_FILE, HardwareSpec, HARDWARE_KEY)}")
    model_needed = {"params_total", "n_layers", "hidden", "kv_bytes_per_token"}
    if md is None and not model_needed <= set(overrides):
        raise ConfigError(f"simulator: no model figures for {model!r} in the catalog",
                          fix=f"use one of {', '.join(simulated_models())}, or "
                              f"{model_entry_fix()}")
    fmt = _weight_format_of(precision)
    bpp = fmt.bytes_per_param if fmt is not None else 2.0
    spec = find_model(model)
    if spec is not None and fmt is not None:
        # Weights as the launch stores them (the checkpoint's format where smaller); the precision still picks the
        # FLOP/s.
        bpp = spec.served_bytes_per_param(fmt.name, model if "/" in model else None)
    values: dict[str, Any] = {"hardware": hardware, "model": model, "bytes_per_param": bpp}
    if hw is not None:
        values.update(hbm_bytes=hw["hbm_gb"] * GB, hbm_bw=hw["hbm_bw_tbs"] * 1e12, flops=hw["tflops"] * 1e12,
                      link_bw=hw.get("link_gbs", 450) * GB)
    if md is not None:
        values.update(params_total=md["params_total"], params_active=md["params_active"],
                      n_layers=int(md["n_layers"]), hidden=int(md["hidden"]),
                      kv_bytes_per_token=md["kv_bytes_per_token"],
                      n_experts=int(md.get("n_experts", 0)), experts_per_token=int(md.get("experts_per_token", 0)),
                      expert_param_share=float(md.get("expert_param_share", 0.0)),
                      kv_split_max=int(md.get("kv_split_max", 1 << 20)),
                      prefill_attention_flops=md.get("prefill_attention_flops"),
                      decode_attention_flops=md.get("decode_attention_flops"),
                      context_terms=md["context_terms"])
    priced_by_terms = sorted(set(overrides) & {"kv_bytes_per_token", "prefill_attention_flops",
                                               "decode_attention_flops"})
    if values.get("context_terms") and priced_by_terms and "context_terms" not in overrides:
        raise ConfigError(f"{model}'s attention is priced part by part (`context_terms`: its sparse or compressed "
                          f"attention), so an override of {', '.join(priced_by_terms)} would not reach its step time",
                          fix="override `context_terms` (each part's cap, bytes and FLOPs) instead, or with them")
    values.update(overrides)
    if "params_active" not in values:
        values["params_active"] = values["params_total"]
    return PerfInputs(**values)


def with_overrides(inputs: PerfInputs, **changes: Any) -> PerfInputs:
    """A copy of `inputs` with some figures replaced (e.g. half the HBM, for what-if studies)."""
    return replace(inputs, **changes)
