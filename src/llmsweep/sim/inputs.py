"""The one adapter from the catalogs (or explicit numbers) to :class:`~llmsweep.sim.perf.PerfInputs`.

The catalog owns the authoritative hardware and model figures; the simulator only needs a dozen numbers, read here
from the typed catalog entries. When the catalog has no entry for a SKU or model, a few built-in entries cover the
test models (the hardware catalog is the only home of hardware figures); explicit overrides win over both.
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

if TYPE_CHECKING:
    from llmsweep.catalog.precision import WeightFormat

log = logging.getLogger(__name__)

# Architecture figures from the models' config.json (KV bytes per token at bf16 = layers_with_kv x 2 x kv_heads x
# head_dim x 2; attention FLOPs per context token = 2 x 2 x query heads x head_dim x layers_with_kv, given where query
# heads x head_dim is not the hidden size). Qwen3.5-397B-A17B: hybrid attention, 15 of 60 layers keep a KV cache.
BUILTIN_MODELS: dict[str, dict[str, float]] = {
    "llama-1b": {"params_total": 1.1e9, "params_active": 1.1e9, "n_layers": 22, "hidden": 2048,
                 "kv_bytes_per_token_bf16": 22 * 2 * 4 * 64 * 2},
    "llama-3.1-8b": {"params_total": 8.0e9, "params_active": 8.0e9, "n_layers": 32, "hidden": 4096,
                     "kv_bytes_per_token_bf16": 32 * 2 * 8 * 128 * 2, "kv_split_max": 8},
    "llama-3.1-70b": {"params_total": 70.6e9, "params_active": 70.6e9, "n_layers": 80, "hidden": 8192,
                      "kv_bytes_per_token_bf16": 80 * 2 * 8 * 128 * 2, "kv_split_max": 8},
    "qwen3-30b-a3b": {"params_total": 30.5e9, "params_active": 3.3e9, "n_layers": 48, "hidden": 2048,
                      "kv_bytes_per_token_bf16": 48 * 2 * 4 * 128 * 2, "n_experts": 128, "experts_per_token": 8,
                      "expert_param_share": 0.9, "prefill_attention_flops": 4 * 32 * 128 * 48},
    "qwen3.5-397b-a17b": {"params_total": 397e9, "params_active": 17e9, "n_layers": 60, "hidden": 4096,
                          "kv_bytes_per_token_bf16": 15 * 2 * 2 * 256 * 2, "kv_split_max": 2, "n_experts": 512,
                          "experts_per_token": 10, "expert_param_share": 0.95,
                          "prefill_attention_flops": 4 * 32 * 256 * 15},
}
MODEL_ALIASES = {"qwen3.5": "qwen3.5-397b-a17b", "qwen/qwen3.5-397b-a17b": "qwen3.5-397b-a17b",
                 "tinyllama": "llama-1b", "meta-llama/llama-3.1-8b-instruct": "llama-3.1-8b",
                 "meta-llama/llama-3.1-70b-instruct": "llama-3.1-70b", "qwen/qwen3-30b-a3b": "qwen3-30b-a3b"}

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


def _model_figures(name: str) -> dict[str, float] | None:
    spec = find_model(name)
    if spec is not None:
        total = spec.params_total
        active = spec.params_active or total
        experts, top_k = spec.n_experts, spec.experts_per_token
        # total = dense + E*e and active = dense + k*e  =>  routed share = E*e / total
        share = experts * (total - active) / (experts - top_k) / total if experts > top_k else 0.0
        split = 1 if spec.attention.kind == "mla" else (spec.attention.kv_heads or 1 << 20)
        return {"params_total": total, "params_active": active, "n_layers": spec.layers,
                "hidden": spec.hidden_size, "kv_bytes_per_token_bf16": float(spec.kv_bytes_per_token("bf16")),
                "n_experts": experts, "experts_per_token": top_k, "expert_param_share": min(max(share, 0.0), 0.99),
                "kv_split_max": split,
                "prefill_attention_flops": spec.attention_flops_per_context_token("prefill"),
                "decode_attention_flops": spec.attention_flops_per_context_token("decode")}
    key = MODEL_ALIASES.get(name.lower(), name.lower())
    if key in BUILTIN_MODELS:
        return BUILTIN_MODELS[key]
    for builtin in BUILTIN_MODELS:
        if key.startswith(builtin) or key.split("/")[-1].startswith(builtin):
            return BUILTIN_MODELS[builtin]
    return None


def simulated_hardware() -> list[str]:
    """The SKUs the simulator has figures for: the catalog's with a FLOP/s figure."""
    return sorted(h.id for h in all_hardware() if h.bf16_tflops)


def simulated_models() -> list[str]:
    """The models the simulator has figures for: the catalog's and the built-in ones."""
    return sorted(dict.fromkeys([*(m.id for m in all_models()), *BUILTIN_MODELS]))


def simulates_model(name: str) -> bool:
    """Whether the simulator has figures for the model `name` (a catalog entry, else a built-in one)."""
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
    default the model's dtype, bf16) scales the KV bytes per token by its bytes per element
    (`catalog.precision.kv_bytes_per_element`: fp8 halves it, nvfp4 takes 0.28 of it). Raises ConfigError naming what
    is missing and how to supply it, or a KV dtype of no known size.
    """
    precision = precision.lower()
    overrides = dict(overrides or {})
    known = {f.name for f in fields(PerfInputs)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"unknown simulator performance override(s): {', '.join(unknown)}",
                          fix=f"use only these names: {', '.join(sorted(known))}")
    hw = _hardware_figures(hardware, precision)
    md = _model_figures(model)
    base_needed = {"hbm_bytes", "hbm_bw", "flops"}
    if hw is None and not base_needed <= set(overrides):
        raise ConfigError(f"simulator: no hardware figures for {hardware!r} in the hardware catalog",
                          fix=f"use one of {', '.join(simulated_hardware())}, or "
                              f"{entry_fix(HARDWARE_FILE, HardwareSpec, HARDWARE_KEY)}")
    model_needed = {"params_total", "n_layers", "hidden", "kv_bytes_per_token"}
    if md is None and not model_needed <= set(overrides):
        raise ConfigError(f"simulator: no model figures for {model!r} in the catalog or the built-ins",
                          fix=f"use one of {', '.join(simulated_models())}, or "
                              f"{model_entry_fix()}")
    fmt = _weight_format_of(precision)
    bpp = fmt.bytes_per_param if fmt is not None else 2.0
    spec = find_model(model)
    if spec is not None and fmt is not None:
        # Weights as the launch stores them (the checkpoint's format where smaller); the precision still picks the
        # FLOP/s.
        bpp = spec.served_bytes_per_param(fmt.name, model if "/" in model else None)
    kv_scale = kv_bytes_per_element(kv_dtype or "auto") / kv_bytes_per_element("bf16")  # its figure is bf16's
    values: dict[str, Any] = {"hardware": hardware, "model": model, "bytes_per_param": bpp}
    if hw is not None:
        values.update(hbm_bytes=hw["hbm_gb"] * GB, hbm_bw=hw["hbm_bw_tbs"] * 1e12, flops=hw["tflops"] * 1e12,
                      link_bw=hw.get("link_gbs", 450) * GB)
    if md is not None:
        values.update(params_total=md["params_total"], params_active=md["params_active"],
                      n_layers=int(md["n_layers"]), hidden=int(md["hidden"]),
                      kv_bytes_per_token=md["kv_bytes_per_token_bf16"] * kv_scale,
                      n_experts=int(md.get("n_experts", 0)), experts_per_token=int(md.get("experts_per_token", 0)),
                      expert_param_share=float(md.get("expert_param_share", 0.0)),
                      kv_split_max=int(md.get("kv_split_max", 1 << 20)),
                      prefill_attention_flops=md.get("prefill_attention_flops"),
                      decode_attention_flops=md.get("decode_attention_flops"))
    values.update(overrides)
    if "params_active" not in values:
        values["params_active"] = values["params_total"]
    return PerfInputs(**values)


def with_overrides(inputs: PerfInputs, **changes: Any) -> PerfInputs:
    """A copy of `inputs` with some figures replaced (e.g. half the HBM, for what-if studies)."""
    return replace(inputs, **changes)
