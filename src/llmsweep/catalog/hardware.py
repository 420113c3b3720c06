"""Accelerator SKUs: the numbers a planner, a simulator and a DRAM-budget rule need, each with its source.

Runner labels and node names (``cluster:mi300x-amds``, ``h200-dgxc-slurm_3``, ``gb200-nv``) all start with the SKU,
so one lookup turns any of them into a :class:`HardwareSpec`; a user adds a SKU by dropping a ``hardware.yaml`` into
``$LLMSWEEP_CATALOG_DIR``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.catalog.sources import Origin, build_models, cached, catalog_dirs, entry_fix
from llmsweep.errors import ConfigError
from llmsweep.words import noun

HARDWARE_FILE = "hardware.yaml"
"""The hardware catalog's file name, packaged and in a user catalog directory."""
HARDWARE_KEY = "the SKU as its key"
"""How a hardware.yaml entry is found (the fix that asks for one says it)."""

Platform = Literal["cuda", "rocm"]
Precision = Literal["bf16", "fp8", "fp4"]

GB = 1_000_000_000


class HardwareSpec(BaseModel):
    """One accelerator SKU. Throughputs are dense peaks per GPU; None means the format is not supported."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Canonical lower-case SKU id, e.g. 'mi300x'.")
    name: str = Field(description="Marketing name.")
    vendor: Literal["nvidia", "amd"]
    arch: str = Field(description="Compiler target: sm90, sm100, sm103, gfx942, gfx950.")
    generation: str = Field(description="Architecture generation: hopper, blackwell, cdna3…")
    platform: Platform
    aliases: list[str] = Field(default_factory=list, description="Other spellings accepted by get_hardware().")
    hbm_gb: float = Field(gt=0, description="HBM capacity per GPU in decimal GB as the driver reports it "
                                            "(vendors' \"GB\" are GiB).")
    hbm_tbps: float = Field(gt=0, description="Peak HBM bandwidth per GPU, TB/s.")
    bf16_tflops: float | None = Field(description="Dense BF16 tensor TFLOP/s per GPU.")
    fp8_tflops: float | None = Field(description="Dense FP8 tensor TFLOP/s per GPU; None if unsupported.")
    fp4_tflops: float | None = Field(description="Dense FP4 (NVFP4/MXFP4) tensor TFLOP/s per GPU; None if unsupported.")
    scaleup: str = Field(description="Scale-up interconnect: nvlink4, nvlink5, xgmi.")
    scaleup_gbps: float = Field(gt=0, description="Scale-up bandwidth per GPU, GB/s, bidirectional aggregate.")
    gpus_per_node: int = Field(gt=0, description="GPUs sharing one host (NVL72 compute tray: 4).")
    scaleup_domain_gpus: int | None = Field(
        default=None, gt=0, description="GPUs one scale-up domain reaches (NVL72: 72); None: the node's GPUs.")
    scaleout: str | None = Field(default=None, description="Scale-out NIC per GPU (InfiniBand / RoCE).")
    scaleout_gbps: float | None = Field(
        default=None, gt=0, description="Scale-out bandwidth per GPU per direction, GB/s; None: not recorded.")
    scaleout_latency_us: float | None = Field(
        default=None, ge=0, description="Set-up latency of one scale-out transfer, microseconds (an estimate).")
    scaleout_source: str | None = Field(default=None, description="Where the scale-out figures come from.")
    image_gpu_family: str | None = Field(
        default=None, description="GPU family token of ROCm image tags built for this SKU (mi30x, mi35x)."
    )
    source: str = Field(description="Vendor page (and derivation) the figures come from.")
    estimates: dict[str, str] = Field(
        default_factory=dict, description="Field -> note, for figures that are estimates rather than sourced."
    )
    notes: str | None = None

    @model_validator(mode="after")
    def _estimates_name_fields(self) -> HardwareSpec:
        unknown = set(self.estimates) - set(type(self).model_fields)
        if unknown:
            raise ValueError(f"estimates names unknown {noun(len(unknown), 'field')} {sorted(unknown)}")
        return self

    @property
    def hbm_bytes(self) -> int:
        return int(self.hbm_gb * GB)

    @property
    def hbm_bw_tbs(self) -> float:
        """Alias of hbm_tbps under the simulator's name."""
        return self.hbm_tbps

    @property
    def link_gbs(self) -> float:
        """Scale-up bandwidth per GPU per direction, GB/s (half the bidirectional figure vendors quote)."""
        return self.scaleup_gbps / 2

    @property
    def domain_spans_nodes(self) -> bool:
        """Whether one scale-up domain reaches GPUs of several hosts (an NVL72 rack: 72 GPUs over trays of 4), as the
        catalog says it: `scaleup_domain_gpus` above `gpus_per_node`. Else the domain is one node's GPUs."""
        return (self.scaleup_domain_gpus or self.gpus_per_node) > self.gpus_per_node

    def scaleup_domain_nodes(self, gpus_per_node: int) -> int:
        """Consecutive nodes of `gpus_per_node` GPUs (the runner's) that one scale-up domain spans: the one rule for
        which GPUs reach each other over NVLink / xGMI. One node, unless the catalog says the domain spans hosts
        (:attr:`domain_spans_nodes`), then as many of the runner's nodes as the domain's GPUs fill (NVL72 trays of 4:
        18). The catalog's host size says nothing of a runner's nodes: eight one-GPU nodes of an 8-GPU SKU are eight
        hosts, joined by the scale-out NIC."""
        if not self.domain_spans_nodes or self.scaleup_domain_gpus is None:
            return 1
        return max(1, self.scaleup_domain_gpus // max(1, gpus_per_node))

    def tflops(self, precision: str) -> float | None:
        """Dense TFLOP/s for a serving precision (``fp4``/``nvfp4``/``mxfp4`` -> fp4, ``fp16`` -> bf16)."""
        p = precision.lower()
        if p in {"fp4", "nvfp4", "mxfp4"}:
            return self.fp4_tflops
        if p in {"fp8", "mxfp8"}:
            return self.fp8_tflops
        if p in {"bf16", "fp16"}:
            return self.bf16_tflops
        raise ConfigError(f"unknown precision {precision!r} for hardware {self.id}", fix="use bf16, fp8 or fp4")

    def is_estimate(self, field: str) -> bool:
        return field in self.estimates


def _inject_id(key: str, raw: dict[str, Any]) -> dict[str, Any]:
    raw.setdefault("id", key.lower())
    return raw


@cached
def _catalog(dirs: tuple[Path, ...]) -> dict[str, tuple[HardwareSpec, Origin]]:
    return build_models(HARDWARE_FILE, "hardware", HardwareSpec, dirs, inject=_inject_id)


@cached
def _aliases(dirs: tuple[Path, ...]) -> dict[str, str]:
    table: dict[str, str] = {}
    for key, (spec, _) in _catalog(dirs).items():
        for name in (spec.id, *spec.aliases):
            table[_norm(name)] = key
    return table


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def all_hardware() -> list[HardwareSpec]:
    """Every SKU, packaged and user-supplied."""
    return [spec for spec, _ in _catalog(catalog_dirs()).values()]


def find_hardware(sku: str) -> HardwareSpec | None:
    """Like :func:`get_hardware` but None instead of an error."""
    dirs = catalog_dirs()
    key = _aliases(dirs).get(_norm(sku))
    return _catalog(dirs)[key][0] if key else None


def get_hardware(sku: str) -> HardwareSpec:
    """A SKU by id or alias, case-insensitive (``H200``, ``h200-sxm``, ``MI300X``)."""
    spec = find_hardware(sku)
    if spec is None:
        known = ", ".join(s.id for s in all_hardware())
        raise ConfigError(
            f"unknown hardware SKU {sku!r}",
            fix=f"use one of {known}, or {entry_fix(HARDWARE_FILE, HardwareSpec, HARDWARE_KEY)}",
        )
    return spec


def hardware_for_runner(label_or_node: str) -> HardwareSpec | None:
    """The SKU behind a runner label or node name: ``cluster:mi300x-amds``, ``h200-dgxc-slurm_3``, ``gb200-nv``.

    Tries the longest dash/underscore-separated prefix first, so an alias with a dash (``h100-sxm``) beats a shorter
    id, and a token never matches inside another (``gb200`` is not ``b200``). None when no SKU matches.
    """
    text = label_or_node.strip().lower()
    if text.startswith("cluster:"):
        text = text[len("cluster:") :]
    tokens = [t for t in re.split(r"[-_:/]", text) if t]
    for n in range(len(tokens), 0, -1):
        spec = find_hardware("-".join(tokens[:n]))
        if spec is not None:
            return spec
    return None
