"""Power and cost per accelerator SKU (`power.yaml`): idle and maximum board watts, the assumed price of a GPU-hour
and the all-in utility kW per GPU, each with its source.

Keyed by the SKU ids of `hardware.yaml`, so a runner label or alias resolves through `find_hardware` (an entry's key
too: a user's `MI300X:` is the packaged `mi300x`). A user sets their own figures (their prices, their measured idle
watts) with a `power.yaml` under ``$LLMSWEEP_CATALOG_DIR`` (`catalog.sources`); unlike other catalogs, an entry for a
SKU the catalog has is laid over it group by group (`GROUPS`), not in place of it whole: a figure and its source are
one group, so an entry that names a price (`usd_per_gpu_hour`, `cost_source`, `cost_date`) sets just the price, and the
packaged watts keep their `watts_source` and their `estimates` notes. A group the entry names is the entry's whole —
a field of it the entry leaves out is not taken from below, so a source is never claimed for a figure it does not
describe — and a group it does not name is kept as it was, source and notes with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llmsweep.catalog.hardware import find_hardware
from llmsweep.catalog.sources import Origin, cached, catalog_dirs, invalid_entry, line_of, load_section
from llmsweep.errors import CatalogError
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
        if self.all_in_kw_per_gpu is not None and not self.all_in_source:
            raise ValueError("all_in_kw_per_gpu needs all_in_source (whose all-in figure it is)")
        unknown = set(self.estimates) - set(type(self).model_fields)
        if unknown:
            raise ValueError(f"estimates names unknown {noun(len(unknown), 'field')} {sorted(unknown)}")
        return self


FILE = "power.yaml"
SECTION = "power"
WATTS = ("idle_w", "max_w", "watts_source")
GROUPS: tuple[tuple[str, ...], ...] = (WATTS, ("usd_per_gpu_hour", "cost_source", "cost_date"),
                                       ("all_in_kw_per_gpu", "all_in_source"))
"""The figures of an entry with their source: what a user's entry over an existing one sets together (`_over`)."""


def _sku(key: str) -> str:
    """The SKU id a key or a lookup names (an id, alias or runner label through `find_hardware`)."""
    hw = find_hardware(key)
    return hw.id if hw is not None else key.strip().lower()


@cached
def _catalog(dirs: tuple[Path, ...]) -> dict[str, tuple[PowerSpec, Origin]]:
    """Every SKU's entry: the packaged file's, each later file's entry laid over the one below it (`_over`)."""
    out: dict[str, tuple[PowerSpec, Origin]] = {}
    for directory in dirs:  # one file per folder, in catalog order: each laid over what the folders before it gave
        keyed: dict[str, str] = {}  # SKU -> the key of this file that named it
        for key, (raw, origin) in load_section(FILE, SECTION, (directory,)).items():
            sku = _sku(key)
            said = raw.get("id")
            fix = ("keep one entry per SKU, keyed by its id (`llmsweep catalog hardware` lists them), with no `id:` "
                   "other than it")
            if sku in keyed:
                raise CatalogError(f"power entry '{key}' names {sku}, which key '{keyed[sku]}' names too (an alias, a "
                                   "runner label or another spelling of one SKU): one would be laid over the other "
                                   "unsaid", file=origin.path, line=origin.line, field=f"{SECTION}.{key}", fix=fix)
            if said is not None and _sku(str(said)) != sku:
                raise CatalogError(f"power entry '{key}' names {sku}, but its id says {said}", file=origin.path,
                                   line=origin.line, field=f"{SECTION}.{key}.id", fix=fix)
            keyed[sku] = key
            out[sku] = (_over(key, {**raw, "id": sku}, origin, out.get(sku)), origin)
    return out


def _over(key: str, raw: dict[str, Any], origin: Origin, below: tuple[PowerSpec, Origin] | None) -> PowerSpec:
    """The entry `raw` (of `key` at `origin`) laid over the one `below` it (None: a SKU new to the catalog, whose
    entry gives every required field itself), group by group (`GROUPS`)."""
    if below is None:
        try:
            return PowerSpec.model_validate(raw)
        except ValidationError as exc:
            raise invalid_entry(FILE, SECTION, key, origin, exc, PowerSpec, fix=(
                f"{raw['id']!r} has no power entry below this file to lay it over, so it gives idle_w, max_w and "
                "watts_source itself (and usd_per_gpu_hour with cost_source and cost_date for a price); to set a "
                "known SKU's figures, key the entry by its id (`llmsweep catalog hardware` lists them)")) from exc
    base, base_origin = below
    named = [g for g in GROUPS if any(f in raw for f in g)]
    set_here = {f for g in named for f in g}
    # The groups the entry leaves out, as they were; a group it names is its own whole (a field of it the entry leaves
    # out takes its default, or is missing, never the figure below it).
    kept = base.model_dump(exclude={"id", "estimates", *set_here})
    notes = raw.get("estimates") or {}
    if isinstance(notes, dict):  # (a note of a figure kept below is that entry's, and stays; one the entry sets, goes)
        foreign = sorted(str(f) for f in notes if str(f) in PowerSpec.model_fields and str(f) not in set_here)
        if foreign:
            raise CatalogError(
                f"power entry '{key}' notes {', '.join(foreign)} as an estimate, a figure it does not set (the one "
                f"below it, at {base_origin}, is kept with that entry's own notes)", file=origin.path,
                line=line_of(origin.path, [SECTION, key, "estimates", foreign[0]]) or origin.line,
                field=f"{SECTION}.{key}.estimates.{foreign[0]}",
                fix=f"set {', '.join(foreign)} in this entry too (with its group's source), or drop the note")
        notes = {**{f: note for f, note in base.estimates.items() if f not in set_here}, **notes}
    try:
        return PowerSpec.model_validate({**kept, **raw, "estimates": notes})
    except ValidationError as exc:
        if any(err["type"] == "extra_forbidden" for err in exc.errors()):  # a misspelt field: the fields it may have
            raise invalid_entry(FILE, SECTION, key, origin, exc, PowerSpec) from exc
        watts = base.model_dump(include=set(WATTS))  # what to copy of a measured idle_w's group; never a price's source
        copy = (f" (the entry below it, at {base_origin}, has " + ", ".join(f"{f}: {watts[f]!r}" for f in WATTS
                                                                             if f not in raw) + ")"
                if WATTS in named and not set(WATTS) <= set(raw) else "")
        raise invalid_entry(FILE, SECTION, key, origin, exc, PowerSpec, fix=(
            "an entry over a SKU the catalog has sets each group it names whole, and keeps the groups it leaves out: "
            f"idle_w, max_w and watts_source together{copy}; usd_per_gpu_hour with your cost_source and cost_date; "
            "all_in_kw_per_gpu with its all_in_source. Give the named group's other fields, or leave the group out "
            "to keep the one below")) from exc


def all_power() -> list[PowerSpec]:
    return [spec for spec, _ in _catalog(catalog_dirs()).values()]


def find_power(sku: str | None) -> PowerSpec | None:
    """The power entry of a SKU id, alias or runner label (``h200``, ``H200-SXM``, ``mi300x``); None if unknown."""
    if not sku:
        return None
    found = _catalog(catalog_dirs()).get(_sku(sku))
    return found[0] if found is not None else None
