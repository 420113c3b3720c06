"""Stored calibrations: fitted efficiency factors keyed by (engine, hardware, model class, precision, TP, KV-cache
dtype, EP, DP attention), kept as data.

A calibration fitted on one fleet is only evidence for engines, GPUs, models, precisions and launches like the ones
measured, so the simulator applies one only where all eight match and otherwise says "uncalibrated" (in `llmsweep
predict`'s table, a predicted summary's provenance and `sim serve`'s start-up log) — naming, in parentheses, a
calibration of the same engine, GPU, model class and precision that was fitted at another TP or KV dtype, so the
reader knows one exists and why it was not used. The packaged file is `llmsweep/catalog/data/sim_calibration.yaml`;
a file of the same name in a user catalog directory (`$LLMSWEEP_CATALOG_DIR`, `llmsweep sim calibrate --save`) adds
entries or replaces one with the same id, exactly as the other catalogs layer.

The model class is coarse on purpose: the architecture (dense, MoE, hybrid linear attention, with or without experts)
decides which kernels run, and a size bucket of total parameters decides whether per-step overheads or bandwidth
dominate. Two models of one class share launch and scheduling costs far more than two models of one family at
different sizes. A speculative method in the served config is part of the class (`+mtp`): its draft passes are
fitted with the rest, so those factors describe runs with that draft only. The precision (the weights' compute
precision, the simulator's `--precision`) is a key of its own: an FP8 or FP4 GEMM reaches another fraction of its own
peak than a BF16 one, so factors fitted at BF16 are no evidence for an FP8 job of the same class. So are the
tensor-parallel degree (each GPU's GEMMs are 1/TP as wide, and the step's all-reduces, which a fit at TP 1 never saw,
fold into the factors fitted at TP 8) and the KV-cache dtype (an FP8 KV cache runs other attention kernels, and the
factors of its decode steps were fitted against half the bytes): factors fitted at TP 8 with an FP8 KV cache are no
evidence for a TP 4 job with a BF16 one. So are the expert-parallel degree (the all-to-alls of EP replace all-reduces)
and data-parallel attention (each rank's attention over its share of the batch). An entry saved before TP and KV dtype
were keyed (2026-12-06) still loads, but matches no job: the label says so and a warning names its file and how to key
it; one saved before EP and DP attention were (2026-12-07) keys both as 1 at TP 1 (neither can exceed it), EP as 1 for a
model class without routed experts (`moe_class`: EP shards nothing else), and otherwise matches no job at TP > 1.
A model class without routed experts is keyed at EP 1 whatever EP its job or entry names (`calibration_key`).
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
from llmsweep.words import noun

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
    tp: int
    """Tensor-parallel degree of the engine (its GPUs)."""
    kv_dtype: str
    """KV-cache format (:func:`kv_dtype_name`: `bf16` for `auto`, `fp8` for fp8_e4m3)."""
    ep: int = 1
    """Expert-parallel degree of the MoE layers (their all-to-alls replace all-reduces the factors absorb)."""
    dp_attention: int = 1
    """Data-parallel attention ranks (each runs attention on its share of the batch: other kernels, other shapes)."""

    def _parallel(self) -> list[str]:
        """`ep8`, `dpa8`: the degrees above 1 (a key without them names none, as keys did before they were kept)."""
        return [f"{name}{n}" for name, n in (("ep", self.ep), ("dpa", self.dp_attention)) if n > 1]

    @property
    def label(self) -> str:
        """`vllm/h200/dense-tiny/bf16/tp1/kv-bf16` (`/ep8/dpa8` where they are above 1), as the fit's messages and
        tables name the key."""
        return "/".join([*self[:4], f"tp{self.tp}", f"kv-{self.kv_dtype}", *self._parallel()])

    @property
    def launch(self) -> str:
        """What of the key a launch sets: `TP 1, bf16 KV` (`, EP 8, DP attention 8` where above 1)."""
        extra = (f", EP {self.ep}" if self.ep > 1 else "") + (
            f", DP attention {self.dp_attention}" if self.dp_attention > 1 else "")
        return f"TP {self.tp}, {self.kv_dtype} KV{extra}"

    def as_json(self) -> dict[str, str | int]:
        return dict(self._asdict())


def kv_dtype_name(spelling: str) -> str:
    """A KV-cache dtype as a calibration key holds it: its format's name (`catalog.precision.kv_cache_format`), so
    `auto`, `bfloat16` and `bf16` are one key, and `fp8_e4m3` is `fp8`'s. Raises ConfigError for a spelling of no
    known format."""
    from llmsweep.catalog.precision import kv_cache_format

    return kv_cache_format(spelling).name


def calibration_key(engine: str, hardware: str, klass: str, precision: str, tp: int,
                    kv_dtype: str, *, ep: int = 1, dp_attention: int = 1) -> CalibrationKey:
    """The key of (engine style, GPU, model class, precision, TP, KV dtype, EP, DP attention): the SKU as its family,
    the precision lower-case, the KV dtype as its format's name, and EP 1 for a model class without routed experts
    (:func:`moe_class`): expert parallelism shards nothing of a dense or hybrid model and the simulator prices it as
    none, so a dense job launched at EP 8 is the EP 1 job, and takes (or saves) the EP 1 entry."""
    return CalibrationKey(engine, hardware_family(hardware), klass, precision.strip().lower(), tp,
                          kv_dtype_name(kv_dtype), ep if moe_class(klass) else 1, dp_attention)


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
    tp: int | None = Field(None, ge=1, description="Tensor-parallel degree of the runs the factors were fitted on; "
                                                   "applied to jobs of that TP only. None: not recorded (an entry "
                                                   "saved before TP was keyed), which matches no job.")
    kv_dtype: str | None = Field(None, description="KV-cache dtype of the runs the factors were fitted on (bf16, "
                                                   "fp8, ...; `auto` is the model's bf16); applied to jobs of that "
                                                   "KV dtype only. None: not recorded, which matches no job.")
    ep: int | None = Field(None, ge=1, description="Expert-parallel degree of the runs the factors were fitted on; "
                                                   "applied to jobs of that EP only. None: not recorded (an entry "
                                                   "saved before EP was keyed, 2026-12-07): 1 where its TP is 1, "
                                                   "else it matches no job.")
    dp_attention: int | None = Field(None, ge=1, description="Data-parallel attention ranks of the runs the factors "
                                                             "were fitted on; as `ep`.")
    efficiency: dict[str, float] = Field(description="Fitted Efficiency fields; the rest keep their defaults.")
    error_before: float | None = Field(None, ge=0, description="The fit error (`sim.calibrate.fit_error`: weighted "
                                       "mean |predicted / measured - 1|) with the engine's defaults.")
    error_after: float | None = Field(None, ge=0, description="The fit error with these factors.")
    provenance: CalibrationProvenance

    @field_validator("efficiency")
    @classmethod
    def _known_fields(cls, value: dict[str, float]) -> dict[str, float]:
        known = set(Efficiency.__dataclass_fields__)
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown efficiency {noun(len(unknown), 'field')} {unknown}; known: {sorted(known)}")
        return value

    @field_validator("precision")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()

    @field_validator("kv_dtype")
    @classmethod
    def _kv_format(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return kv_dtype_name(value)
        except ConfigError as exc:
            raise ValueError(f"{exc.message} ({exc.fix})") from None

    def _degree(self, name: str) -> int | None:
        """The entry's EP or DP-attention degree: as recorded, else 1 where its TP is 1 (neither can exceed it) and EP
        1 for a model class without routed experts (:func:`moe_class`: expert parallelism shards nothing of a dense
        or hybrid model, and the simulator prices it as none), else unknown (an entry saved before they were keyed,
        fitted at TP > 1, may have run it: DP attention applies to any model)."""
        value: int | None = getattr(self, name)
        if value is not None:
            return value
        return 1 if self.tp == 1 or (name == "ep" and not moe_class(self.model_class)) else None

    @property
    def key(self) -> CalibrationKey | None:
        """What the entry is looked up under; None for an entry that does not record its TP, KV dtype, or (at TP >
        1) EP and DP attention (saved before they were keyed): it matches no job (:meth:`unkeyed`)."""
        ep, dp = self._degree("ep"), self._degree("dp_attention")
        if self.tp is None or self.kv_dtype is None or ep is None or dp is None:
            return None
        return calibration_key(self.engine, self.hardware, self.model_class, self.precision, self.tp, self.kv_dtype,
                               ep=ep, dp_attention=dp)

    def unkeyed(self) -> list[str]:
        """The key fields the entry does not record (`tp`, `kv_dtype`, and at TP > 1 `ep`, `dp_attention`): empty for
        an entry that can match."""
        missing = [name for name in ("tp", "kv_dtype") if getattr(self, name) is None]
        return missing + [name for name in ("ep", "dp_attention")
                          if self.tp is not None and self._degree(name) is None]

    def shares_class(self, key: CalibrationKey) -> bool:
        """Whether the entry is of `key`'s engine, GPU family, model class and precision (its TP or KV dtype may
        differ, or be unrecorded)."""
        return (self.engine, hardware_family(self.hardware), self.model_class, self.precision) == key[:4]

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


MOE_ARCHS = ("moe", "hybrid-moe")
"""The architectures of :func:`model_class` with routed experts (the rest: `dense`, `hybrid`)."""


def moe_class(klass: str) -> bool:
    """Whether a model class (:func:`model_class`: `<arch>-<size>[+<spec method>]`) is of a model with routed experts,
    the only layers expert parallelism shards."""
    return klass.split("+", 1)[0].rsplit("-", 1)[0] in MOE_ARCHS


def model_class(model: str, inputs: PerfInputs, spec_method: str | None = None) -> str:
    """`<arch>-<size>[+<spec method>]`, the one place a calibration key's model class is derived.

    arch: `hybrid` (linear-attention layers, from the catalog's model config) or `hybrid-moe` (linear attention and
    routed experts: Qwen3-Next / Qwen3.5), else `moe` or `dense`; size buckets total parameters. A served
    speculative method adds `+<method>` (`hybrid-moe-tiny+mtp`): the draft passes and the verify step change what a
    step costs, so factors fitted with a draft are evidence only for runs with that draft, and factors fitted
    without one say nothing about the draft's cost.
    """
    arch = MOE_ARCHS[0] if inputs.is_moe else "dense"
    spec = find_model(model)  # a model outside the catalog keeps what its figures say
    if spec is not None and spec.is_hybrid:
        arch = MOE_ARCHS[1] if inputs.is_moe else "hybrid"
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
    return {entry_id_: entry for entry_id_, entry, _ in _loaded(dirs)}


def _loaded(dirs: tuple[Path, ...] | None) -> tuple[tuple[str, CalibrationEntry, str], ...]:
    """(id, entry, where it is defined) of every stored calibration, in load order."""
    from llmsweep.catalog.sources import catalog_dirs

    loaded: tuple[tuple[str, CalibrationEntry, str], ...] = _load(dirs if dirs is not None else catalog_dirs())
    return loaded


def _load_uncached(dirs: tuple[Path, ...]) -> tuple[tuple[str, CalibrationEntry, str], ...]:
    from llmsweep.catalog.sources import build_models

    return tuple((k, v, str(origin)) for k, (v, origin) in build_models(FILE_NAME, SECTION, CalibrationEntry,
                                                                        dirs).items())


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


_WARNED_UNKEYED: set[tuple[str, str]] = set()
"""(entry id, where) of the unkeyed entries already warned about in this process: said once, not per point."""

KEYED_SINCE: dict[str, tuple[str, str]] = {
    "tp": ("TP", "2026-12-06"), "kv_dtype": ("KV-cache dtype", "2026-12-06"),
    "ep": ("EP", "2026-12-07"), "dp_attention": ("DP attention", "2026-12-07")}
"""Each key field an older entry may not record (`CalibrationEntry.unkeyed`): how messages name it, and since when
calibrations are keyed by it."""


def unkeyed_warning(entry_id_: str, where: str, entry: CalibrationEntry) -> str:
    """Why an entry that does not record its whole key (`CalibrationEntry.unkeyed`) is applied to no job, and how to
    key it: worded from what it lacks."""
    missing = entry.unkeyed()
    named = [KEYED_SINCE[name][0] for name in missing]
    since = sorted({KEYED_SINCE[name][1] for name in missing})
    degrees = [KEYED_SINCE[name][0] for name in missing if name in ("ep", "dp_attention")]
    at = f" (fitted at TP {entry.tp}, where {' and '.join(degrees)} may exceed 1)" if degrees else ""
    return (f"sim calibration '{entry_id_}' ({where}) records no {' or '.join(missing)}{at}: it was saved before "
            f"calibrations were keyed by {' and '.join(named)} ({', '.join(since)}), and is applied to no job; add "
            f"{' and '.join(f'`{name}:`' for name in missing)} as its runs were launched (`llmsweep sim calibrate "
            "RUN --save` writes them), or remove it")


def not_applied(key: CalibrationKey, dirs: tuple[Path, ...] | None = None) -> str | None:
    """Why no stored calibration applies to `key` although one of its engine, GPU family, model class and precision
    is stored: each such entry with the TP and KV dtype it was fitted at, or that it records them not (an entry saved
    before they were keyed, which is also warned about once, naming its file and how to key it), then the engine's
    own (`'vllm-h200-dense-tiny' was fitted at TP 1, bf16 KV; this engine is TP 8, fp8 KV`). None when none is
    stored, or one applies."""
    if find_calibration(key, dirs) is not None:
        return None
    elsewhere, unkeyed = [], []
    for entry_id_, entry, where in _loaded(dirs):
        if not entry.shares_class(key):
            continue
        if (entry_key := entry.key) is not None:
            elsewhere.append(f"'{entry_id_}' was fitted at {entry_key.launch}")
            continue
        unkeyed.append(f"'{entry_id_}' records no {' or '.join(entry.unkeyed())}")
        if (entry_id_, where) not in _WARNED_UNKEYED:
            _WARNED_UNKEYED.add((entry_id_, where))
            log.warning("%s", unkeyed_warning(entry_id_, where, entry))
    if not elsewhere and not unkeyed:
        return None
    return "; ".join([*elsewhere, *unkeyed, f"this engine is {key.launch}"])


def uncalibrated_label(key: CalibrationKey, dirs: tuple[Path, ...] | None = None) -> str:
    """`uncalibrated`, and in parentheses a calibration of the key's engine, GPU, model class and precision that
    was not applied (:func:`not_applied`), so a prediction never reads as if none existed or as if one had been
    used."""
    why = not_applied(key, dirs)
    return UNCALIBRATED if why is None else f"{UNCALIBRATED} ({why})"


def entry_id(key: CalibrationKey) -> str:
    """The id `--save` gives a new entry of `key`: `vllm-h200-dense-tiny-bf16-tp1-kv-bf16` (`-ep8-dpa8` where above
    1)."""
    return "-".join([*key[:4], f"tp{key.tp}", f"kv-{key.kv_dtype}", *key._parallel()])


def save_calibration(path: Path, entry_id_: str, entry: CalibrationEntry) -> Path:
    """Add or replace one entry in a calibration YAML file (other entries are kept as they are)."""
    data = read_save_target(path)
    section = data[SECTION]
    # another id of the same key in this file would shadow the new entry (or be shadowed by it): the key is what
    # predictions look up, so the new fit replaces it
    for other in [k for k, v in section.items() if k != entry_id_ and _same_key(v, entry)]:
        log.warning("%s: replacing calibration '%s' (same engine, hardware, model class, precision, TP, KV dtype, "
                    "EP and DP attention as '%s')", path, other, entry_id_)
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
              "# Keyed by (engine, hardware, model_class, precision, tp, kv_dtype); an id here replaces a packaged "
              "entry of the same id.\n")
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=120), encoding="utf-8")
    from llmsweep.catalog.sources import clear_caches

    clear_caches()


def _same_key(raw: Any, entry: CalibrationEntry) -> bool:
    """Whether a file's entry `raw` (as written) is of `entry`'s key; one that is no valid entry, or records no key,
    is not."""
    from pydantic import ValidationError

    if not isinstance(raw, dict) or entry.key is None:
        return False
    try:
        return CalibrationEntry.model_validate(raw).key == entry.key
    except ValidationError:
        return False


def shadowed(entry_id_: str, entry: CalibrationEntry, dirs: tuple[Path, ...] | None = None) -> str | None:
    """Why predictions of `entry`'s key would not use the entry saved as `entry_id_` (another catalog file defines
    the key later, and the last definition wins), or None when they do."""
    key = entry.key
    if key is None:
        return None
    found = None
    for candidate_id, candidate, where in _loaded(dirs):
        if candidate.key == key:
            found = (candidate_id, where)
    if found is None or found[0] == entry_id_:
        return None
    return (f"predictions of {key.label} still use calibration '{found[0]}' ({found[1]}): a later catalog "
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
    "kv_dtype_name",
    "load_calibrations",
    "model_class",
    "moe_class",
    "not_applied",
    "read_save_target",
    "save_calibration",
    "shadowed",
    "size_bucket",
    "uncalibrated_label",
    "user_file",
]
