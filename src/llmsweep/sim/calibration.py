"""Stored calibrations: fitted efficiency factors keyed by (engine, hardware, model class, precision), kept as data.

A calibration fitted on one fleet is only evidence for engines, GPUs, models and precisions like the ones measured,
so the simulator applies one only when all four match and otherwise says "uncalibrated" (in `llmsweep predict`'s
table, a predicted summary's provenance and `sim serve`'s start-up log). The packaged file is
`llmsweep/catalog/data/sim_calibration.yaml`; a file of the same name in a user catalog directory
(`$LLMSWEEP_CATALOG_DIR`, `llmsweep sim calibrate --save`) adds entries or replaces one with the same id, exactly as
the other catalogs layer.

The model class is coarse on purpose: the architecture (dense, MoE, hybrid linear attention, with or without experts)
decides which kernels run, and a size bucket of total parameters decides whether per-step overheads or bandwidth
dominate. Two models of one class share launch and scheduling costs far more than two models of one family at
different sizes. A speculative method in the served config is part of the class (`+mtp`): its draft passes are
fitted with the rest, so those factors describe runs with that draft only. The precision (the weights' compute
precision, the simulator's `--precision`) is a key of its own: an FP8 or FP4 GEMM reaches another fraction of its own
peak than a BF16 one, so factors fitted at BF16 are no evidence for an FP8 job of the same class.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from llmsweep.catalog.models import find_model
from llmsweep.errors import ConfigError
from llmsweep.sim.perf import Efficiency, PerfInputs

FILE_NAME = "sim_calibration.yaml"
SECTION = "calibrations"
UNCALIBRATED = "uncalibrated"

log = logging.getLogger(__name__)

# Upper bounds (exclusive) of total parameters, billions, per size bucket.
SIZE_BUCKETS: tuple[tuple[str, float], ...] = (("tiny", 4.0), ("small", 20.0), ("medium", 100.0),
                                               ("large", float("inf")))


class CalibrationKey(NamedTuple):
    """What a calibration is stored and looked up under: the one shape of it, built normalised by
    :func:`calibration_key` (for a simulated engine: `EngineConfig.calibration_key`)."""

    engine: str
    hardware: str
    """The GPU family (:func:`hardware_family`)."""
    model_class: str
    precision: str

    @property
    def label(self) -> str:
        """`vllm/h200/dense-tiny/bf16`, as the fit's messages and tables name the key."""
        return "/".join(self)

    def as_json(self) -> dict[str, str]:
        return dict(self._asdict())


def calibration_key(engine: str, hardware: str, klass: str, precision: str) -> CalibrationKey:
    """The key of (engine style, GPU, model class, precision): the SKU as its family, the precision lower-case."""
    return CalibrationKey(engine, hardware_family(hardware), klass, precision.strip().lower())


class CalibrationProvenance(BaseModel):
    """Where fitted factors came from, so a reader can judge how far to trust them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str = Field(description="Run (or run directory) the factors were fitted on.")
    date: str = Field(description="When the measured run happened (ISO date).")
    engine_version: str | None = Field(None, description="Engine version the server reported, e.g. vLLM 0.26.0.")
    gpu: str | None = Field(None, description="GPU as the driver names it, e.g. 'NVIDIA H200'.")
    model: str | None = Field(None, description="The model measured (a member of the model class).")
    jobs: int = Field(0, ge=0, description="Measured points the fit used.")
    fitted_at: str | None = Field(None, description="When the fit ran (UTC, ISO).")
    notes: str | None = Field(None, description="Caveats of the evidence (windows, dummy weights, known bugs).")


class CalibrationEntry(BaseModel):
    """One stored calibration: the key, the fitted factors, the fit's error and its provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["vllm", "sglang"] = Field(description="Engine style the factors apply to.")
    hardware: str = Field(description="GPU family (catalog SKU id, e.g. h200).")
    model_class: str = Field(description="Model class, e.g. dense-tiny or hybrid-moe-tiny+mtp "
                                         "(llmsweep.sim.calibration.model_class).")
    precision: str = Field(description="Compute precision of the runs the factors were fitted on (bf16, fp8, fp4: "
                                       "the simulator's --precision); applied to jobs of that precision only.")
    efficiency: dict[str, float] = Field(description="Fitted Efficiency fields; the rest keep their defaults.")
    error_before: float | None = Field(None, ge=0, description="Mean |log(pred/meas)| with the defaults.")
    error_after: float | None = Field(None, ge=0, description="Mean |log(pred/meas)| with these factors.")
    provenance: CalibrationProvenance

    @field_validator("efficiency")
    @classmethod
    def _known_fields(cls, value: dict[str, float]) -> dict[str, float]:
        known = set(Efficiency.__dataclass_fields__)
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown efficiency field(s) {unknown}; known: {sorted(known)}")
        return value

    @field_validator("precision")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()

    @property
    def key(self) -> CalibrationKey:
        return calibration_key(self.engine, self.hardware, self.model_class, self.precision)

    def label(self, entry_id: str) -> str:
        """One line for tables and provenance: which calibration, from what evidence."""
        p = self.provenance
        bits = [b for b in (p.engine_version, p.gpu, p.date) if b]
        return f"calibrated: {entry_id} ({', '.join(bits)})" if bits else f"calibrated: {entry_id}"


def hardware_family(hardware: str) -> str:
    """'h200-sxm' and 'h200_nvl' calibrate as 'h200' (the rule `default_efficiency` uses)."""
    return hardware.lower().split("-")[0].split("_")[0]


def size_bucket(params_total: float) -> str:
    billions = params_total / 1e9
    return next(name for name, upper in SIZE_BUCKETS if billions < upper)


def model_class(model: str, inputs: PerfInputs, spec_method: str | None = None) -> str:
    """`<arch>-<size>[+<spec method>]`, the one place a calibration key's model class is derived.

    arch: `hybrid` (linear-attention layers, from the catalog's model config) or `hybrid-moe` (linear attention and
    routed experts: Qwen3-Next / Qwen3.5), else `moe` or `dense`; size buckets total parameters. A served
    speculative method adds `+<method>` (`hybrid-moe-tiny+mtp`): the draft passes and the verify step change what a
    step costs, so factors fitted with a draft are evidence only for runs with that draft, and factors fitted
    without one say nothing about the draft's cost.
    """
    arch = "moe" if inputs.is_moe else "dense"
    spec = find_model(model)  # a model outside the catalog keeps what its figures say
    if spec is not None and spec.is_hybrid:
        arch = "hybrid-moe" if inputs.is_moe else "hybrid"
    klass = f"{arch}-{size_bucket(inputs.params_total)}"
    return f"{klass}+{spec_method}" if spec_method else klass


def user_file(directory: Path | None = None) -> Path:
    """Where `--save` writes: the given directory, else the first user catalog directory (created if needed)."""
    from llmsweep.catalog.sources import ENV_VAR, user_dirs

    if directory is None:
        dirs = user_dirs(to_write=True)
        if not dirs:
            raise ConfigError(
                "sim calibrate --save: no user catalog directory to save into",
                fix=f"set {ENV_VAR}=/path/to/dir, create ~/.config/llmsweep/catalog, or pass --out PATH",
            )
        directory = dirs[0]
    return directory / FILE_NAME if directory.suffix not in (".yaml", ".yml") else directory


def load_calibrations(dirs: tuple[Path, ...] | None = None) -> dict[str, CalibrationEntry]:
    """Every stored calibration, packaged first and user files after (a user entry replaces one of the same id)."""
    from llmsweep.catalog.sources import catalog_dirs

    return dict(_load(dirs if dirs is not None else catalog_dirs()))


def _load_uncached(dirs: tuple[Path, ...]) -> tuple[tuple[str, CalibrationEntry], ...]:
    from llmsweep.catalog.sources import build_models

    return tuple((k, v) for k, (v, _) in build_models(FILE_NAME, SECTION, CalibrationEntry, dirs).items())


def _cached_loader() -> Any:
    from llmsweep.catalog.sources import cached

    return cached(_load_uncached)


_load = _cached_loader()


def find_calibration(key: CalibrationKey,
                     dirs: tuple[Path, ...] | None = None) -> tuple[str, CalibrationEntry] | None:
    """The stored calibration for exactly this key (the last file defining one wins); None = uncalibrated."""
    found = None
    for entry_id, entry in load_calibrations(dirs).items():
        if entry.key == key:
            found = (entry_id, entry)
    return found


def entry_id(key: CalibrationKey) -> str:
    """The id `--save` gives a new entry of `key`."""
    return "-".join(key)


def save_calibration(path: Path, entry_id_: str, entry: CalibrationEntry) -> Path:
    """Add or replace one entry in a calibration YAML file (other entries are kept as they are)."""
    data = read_save_target(path)
    section = data[SECTION]
    # another id of the same key in this file would shadow the new entry (or be shadowed by it): the key is what
    # predictions look up, so the new fit replaces it
    for other in [k for k, v in section.items() if k != entry_id_ and _same_key(v, entry)]:
        log.warning("%s: replacing calibration '%s' (same engine, hardware, model class and precision as '%s')",
                    path, other,
                    entry_id_)
        del section[other]
    section[entry_id_] = entry.model_dump(mode="json", exclude_none=True)
    write_calibration_file(path, data)
    return path


def read_save_target(path: Path) -> dict[str, Any]:
    """The calibration file a save would rewrite, read (an empty document when it does not exist yet); a ConfigError
    naming the file when it is not one, so `sim calibrate --out` can refuse it before fitting."""
    data: dict[str, Any] = {}
    if path.is_file():
        from llmsweep.catalog.sources import load_yaml

        loaded = load_yaml(path) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: not a calibration file (expected a '{SECTION}:' mapping)",
                              fix="choose another --out path or fix the file")
        data = loaded
    section = data.get(SECTION) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: its '{SECTION}:' is not a mapping of calibration ids to entries",
                          fix="choose another --out path or fix the file")
    data[SECTION] = section
    return data


def write_calibration_file(path: Path, data: dict[str, Any]) -> None:
    """Write a calibration document (`read_save_target`'s, changed) with its header; forget cached catalogs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ("# Simulator calibrations written by `llmsweep sim calibrate --save` (llmsweep.sim.calibration).\n"
              "# Keyed by (engine, hardware, model_class, precision); an id here replaces a packaged entry of the "
              "same id.\n")
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=120), encoding="utf-8")
    from llmsweep.catalog.sources import clear_caches

    clear_caches()


def _same_key(raw: Any, entry: CalibrationEntry) -> bool:
    return (isinstance(raw, dict) and raw.get("engine") == entry.engine
            and hardware_family(str(raw.get("hardware", ""))) == hardware_family(entry.hardware)
            and raw.get("model_class") == entry.model_class
            and str(raw.get("precision", "")).strip().lower() == entry.precision)


def shadowed(entry_id_: str, entry: CalibrationEntry, dirs: tuple[Path, ...] | None = None) -> str | None:
    """Why predictions of `entry`'s key would not use the entry saved as `entry_id_` (another catalog file defines
    the key later, and the last definition wins), or None when they do."""
    from llmsweep.catalog.sources import build_models, catalog_dirs

    found = None
    for key, (candidate, origin) in build_models(FILE_NAME, SECTION, CalibrationEntry,
                                                 dirs if dirs is not None else catalog_dirs()).items():
        if candidate.key == entry.key:
            found = (key, origin)
    if found is None or found[0] == entry_id_:
        return None
    return (f"predictions of {entry.key.label} still use calibration '{found[0]}' ({found[1]}): a later catalog "
            f"file defines that key, and the last definition wins")


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


__all__ = [
    "UNCALIBRATED",
    "CalibrationEntry",
    "CalibrationKey",
    "CalibrationProvenance",
    "calibration_key",
    "entry_id",
    "find_calibration",
    "hardware_family",
    "load_calibrations",
    "model_class",
    "read_save_target",
    "save_calibration",
    "shadowed",
    "size_bucket",
    "user_file",
]
