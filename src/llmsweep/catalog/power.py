"""Power and cost per accelerator SKU (`power.yaml`): idle and maximum board watts, the assumed price of a GPU-hour
and the all-in utility kW per GPU, each with its source.

Keyed by the SKU ids of `hardware.yaml`, so a runner label or alias resolves through `find_hardware`. A user
replaces an entry (their own prices, their own measured idle watts) with a `power.yaml` under
``$LLMSWEEP_CATALOG_DIR``; see `catalog.sources`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.catalog.hardware import find_hardware
from llmsweep.catalog.sources import Origin, build_models, cached, catalog_dirs
from llmsweep.words import noun


class PowerSpec(BaseModel):
    """Board watts and cost assumptions of one SKU."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="SKU id, as in hardware.yaml.")
    idle_w: float = Field(gt=0, description="Board power per GPU at idle, W.")
    max_w: float = Field(gt=0, description="Board power limit per GPU (TDP / total board power), W.")
    watts_source: str = Field(description="Where max_w (and idle_w, unless an estimate) comes from.")
    usd_per_gpu_hour: float | None = Field(default=None, gt=0, description="Assumed price of one GPU-hour, US$.")
    cost_source: str | None = Field(default=None, description="Where the price assumption comes from.")
    cost_date: str | None = Field(default=None, description="When the price assumption was written down.")
    all_in_kw_per_gpu: float | None = Field(default=None, gt=0, description="All-in utility kW per GPU.")
    all_in_source: str | None = None
    estimates: dict[str, str] = Field(default_factory=dict, description="Field -> note, for estimated figures.")

    @model_validator(mode="after")
    def _check(self) -> PowerSpec:
        if self.idle_w >= self.max_w:
            raise ValueError(f"idle_w {self.idle_w} must be below max_w {self.max_w}")
        if self.usd_per_gpu_hour is not None and not (self.cost_source and self.cost_date):
            raise ValueError("usd_per_gpu_hour needs cost_source and cost_date (a price is an assumption: say whose)")
        unknown = set(self.estimates) - set(type(self).model_fields)
        if unknown:
            raise ValueError(f"estimates names unknown {noun(len(unknown), 'field')} {sorted(unknown)}")
        return self


def _inject_id(key: str, raw: dict[str, Any]) -> dict[str, Any]:
    raw.setdefault("id", key.lower())
    return raw


@cached
def _catalog(dirs: tuple[Path, ...]) -> dict[str, tuple[PowerSpec, Origin]]:
    return build_models("power.yaml", "power", PowerSpec, dirs, inject=_inject_id)


def all_power() -> list[PowerSpec]:
    return [spec for spec, _ in _catalog(catalog_dirs()).values()]


def find_power(sku: str | None) -> PowerSpec | None:
    """The power entry of a SKU id, alias or runner label (``h200``, ``H200-SXM``, ``mi300x``); None if unknown."""
    if not sku:
        return None
    table = _catalog(catalog_dirs())
    hw = find_hardware(sku)
    key = hw.id if hw is not None else sku.strip().lower()
    found = table.get(key)
    return found[0] if found is not None else None
