"""Engines as data: endpoints and readiness, feature gates by version, and known incompatibilities.

Principle 3 of the design ("fail before the GPU") needs two answers a policy rule can ask without knowing any
engine's internals: *does engine E at version V honour knob K?* (:func:`check_knob`, :func:`check_launch`) and *is
this combination known to break?* (:func:`match_incompatibilities`). Both read packaged YAML that users extend
through ``$LLMSWEEP_CATALOG_DIR/engines.yaml`` and ``incompatibilities.yaml``.

Who an engine is (its framework spellings and metric prefix among them) is not catalog data: it is the engine's
identity (:mod:`llmsweep.engine_ids`), which fills those fields of :class:`EngineInfo`. A catalog file may list an
engine llmsweep has no adapter for (its feature gates still apply), spelling its frameworks itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.catalog.hardware import HardwareSpec
from llmsweep.catalog.sources import Origin, build_models, cached, catalog_dirs
from llmsweep.catalog.version import Version, as_version
from llmsweep.engine_ids import ENGINE_IDS, engine_for
from llmsweep.errors import ConfigError

GateKind = Literal["env", "arg", "speculative-config-key", "kv-transfer-config-key"]
"""`kv-transfer-config-key`: a key of vLLM's `--kv-transfer-config` JSON or of its `kv_connector_extra_config` (the
connector's own settings, like the OffloadingConnector's `cpu_bytes_to_use`)."""
Platform = Literal["cuda", "rocm"]
ENGINE_SECTIONS = frozenset({"engines", "gates"})


GIB = 1 << 30
"""Bytes in a GiB: an engine's memory thresholds are binary (vLLM's `70 * GiB_bytes`)."""


class RunningCapRule(BaseModel):
    """One branch of an engine's default running-request cap: the first rule whose conditions the GPU meets wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: int = Field(ge=1, description="The cap the engine takes on such a GPU when its launch sets none.")
    min_gpu_gib: float | None = Field(
        default=None, gt=0, description="Only on a GPU with at least this much memory, in GiB (2^30 bytes), as the "
                                        "driver reports it (the hardware catalog's `hbm_gb`); None: any GPU.")
    unless_gpu_named: list[str] = Field(
        default_factory=list, description="Not on a GPU whose id, name or alias contains one of these (lower case): "
                                          "vLLM's `\"a100\" not in device_name`.")

    def holds_for(self, gpu: HardwareSpec) -> bool:
        if self.min_gpu_gib is not None and gpu.hbm_bytes < self.min_gpu_gib * GIB:
            return False
        names = " ".join([gpu.id, gpu.name, *gpu.aliases]).lower()
        return not any(token.lower() in names for token in self.unless_gpu_named)

    def describe(self) -> str:
        """The condition in words: `a GPU of >= 70 GiB not named a100`, `any GPU`."""
        parts = [f">= {self.min_gpu_gib:g} GiB"] if self.min_gpu_gib is not None else []
        parts += [f"not named {' or '.join(self.unless_gpu_named)}"] if self.unless_gpu_named else []
        return f"a GPU of {' '.join(parts)}" if parts else "any GPU"


class RunningCapDefault(BaseModel):
    """What an engine's server takes as its running-request cap (vLLM's `--max-num-seqs`, ATOM's `--max-num-seqs`)
    when a launch sets none, by GPU: the engine's own default, with the source it is read from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flag: str = Field(description="The engine's flag that sets the cap (`--max-num-seqs`).")
    rules: list[RunningCapRule] = Field(min_length=1, description="Tried in order; the first that holds wins.")
    source: str = Field(description="Where the default is read from: version, file, function.")


SchedulerPolicy = Literal["unified", "prefill-first"]
"""How an engine forms a step, as the simulator reproduces it (`SimConfig.scheduler`, `sim.config.SCHEDULER_HELP`):
unified (vLLM V1, SGLang) or prefill-first (ATOM)."""

CapacityPolicy = Literal["on-demand", "no-evict"]
"""How an engine admits requests against its KV pool, as the simulator reproduces it (`SimConfig.capacity`,
`sim.config.CAPACITY_HELP`): on demand with preemption (vLLM, SGLang, ATOM) or no-evict (TensorRT-LLM)."""

SCHEDULER_POLICIES: tuple[str, ...] = get_args(SchedulerPolicy)
CAPACITY_POLICIES: tuple[str, ...] = get_args(CapacityPolicy)


class SchedulerShape(BaseModel):
    """How an engine forms its steps and admits requests, where that differs from what the simulator takes by default
    (vLLM V1's and SGLang's unified steps, requests admitted on demand): the simulator's `SimConfig.scheduler` and
    `SimConfig.capacity` policies for it, the step's prompt-token budget when its launch sets none (where the shape
    has one of its own), and the source they are read from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: SchedulerPolicy = Field("unified", description="The simulator's scheduler that forms steps as the "
                                                           "engine does (`llmsweep sim serve --scheduler`).")
    capacity: CapacityPolicy = Field("on-demand", description="The simulator's admission against the KV pool as the "
                                                              "engine's (`llmsweep sim serve --capacity`).")
    budget_flag: str | None = Field(None, description="The engine's flag for a step's prompt-token budget (None: "
                                                      "the simulator's budget and chunk stand).")
    budget_tokens: int | None = Field(None, gt=0, description="That budget when the launch sets none; one prompt may "
                                                              "take all of it (no per-request chunk cap).")
    source: str = Field(description="Where the shape is read from: files, functions.")

    @model_validator(mode="after")
    def _says_something(self) -> SchedulerShape:
        if (self.budget_flag is None) != (self.budget_tokens is None):
            raise ValueError("budget_flag and budget_tokens go together")
        if (self.policy, self.capacity) == ("unified", "on-demand"):
            raise ValueError("the simulator's default shape (unified, on-demand) needs no entry")
        return self


class MemoryFractionRule(BaseModel):
    """One branch of an engine's default memory fraction: the first rule whose version bound the engine meets wins."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(gt=0, le=1, description="The share the engine takes when its launch sets none (of what "
                                                 "its `share_of` names: the whole memory, or what the weights "
                                                 "leave).")
    min_version: Version | None = Field(
        default=None, description="Only from this engine version on (inclusive, compared on the release: "
                                  "`0.26.0rc1` is 0.26.0); None: any version, an image that names none included.")

    def holds_for(self, version: Version | None) -> bool:
        if self.min_version is None:
            return True
        return version is not None and not version.below(self.min_version)

    def describe(self) -> str:
        """The condition in words: `version >= 0.26.0`, `any version`."""
        return f"version >= {self.min_version}" if self.min_version is not None else "any version"


ShareOf = Literal["hbm", "free"]
"""What an engine's memory fraction is a share of: `hbm`, each GPU's whole memory, for weights and KV cache together
(vLLM's and ATOM's `--gpu-memory-utilization`, SGLang's `--mem-fraction-static`); `free`, the memory left after the
weights (and, in the engine, its profiled activations), for the KV cache alone (TensorRT-LLM's
`kv_cache_config.free_gpu_memory_fraction`)."""


class MemoryFractionDefault(BaseModel):
    """What share of GPU memory an engine's server takes (vLLM's and ATOM's `--gpu-memory-utilization`: of the whole
    HBM for weights and KV cache; TensorRT-LLM's `--kv_cache_free_gpu_memory_fraction`: of the memory the weights
    leave, for the KV cache) when a launch sets none, by engine version, with the source it is read from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flag: str = Field(description="The engine's flag that sets the fraction (`--gpu-memory-utilization`), in the "
                                  "engine's own spelling.")
    share_of: ShareOf = Field(
        default="hbm", description="What the fraction is a share of: `hbm` (the whole memory, for weights and KV "
                                   "cache) or `free` (what the weights leave, for the KV cache: TensorRT-LLM).")
    rules: list[MemoryFractionRule] = Field(
        default_factory=list, description="Tried in order; the first that holds wins. None at all: the engine "
                                          "computes its fraction per launch (SGLang), and `unestablished` says how.")
    source: str = Field(description="Where the default is read from: version, file, function.")
    unestablished: str | None = Field(
        default=None, description="What is known of the versions no rule covers (why none does); None: every "
                                  "version is covered.")

    @model_validator(mode="after")
    def _rules_or_why_none(self) -> MemoryFractionDefault:
        if not self.rules and not self.unestablished:
            raise ValueError("a memory_fraction_default with no rules must say why in `unestablished`")
        return self


class PageSizeDefault(BaseModel):
    """The KV page (block) an engine's server allocates its cache in and matches cached prefixes at when a launch
    sets none (SGLang's `--page-size`, vLLM's `--block-size`), with the source it is read from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flag: str | None = Field(description="The engine's flag that sets it (`--block-size`); None where its CLI has "
                                         "none (TensorRT-LLM's LLM-API option).")
    tokens: int = Field(ge=1, description="Tokens of one page when the launch sets none.")
    source: str = Field(description="Where the default is read from: version, file, function.")
    varies: str | None = Field(default=None, description="What can make the engine take another page where the "
                                                         "launch sets none (an attention backend's own); None: "
                                                         "nothing known.")


@dataclass(frozen=True)
class EngineDefault:
    """The value an engine takes for a knob a launch leaves unset, on one GPU or at one version, and why."""

    value: int | float
    flag: str
    engine: str
    gpu: str
    condition: str
    source: str
    knob: str = "max running requests"

    def note(self) -> str:
        """One line for a launch's notes (`server_command.txt`): the value, whose default it is and its source."""
        return (f"{self.knob} {self.value:g}: {self.engine}'s default when {self.flag} is unset, on "
                f"{self.condition} — {self.source}")


class EngineInfo(BaseModel):
    """How to reach and watch one engine's server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    display_name: str
    frameworks: list[str] = Field(
        default_factory=list,
        description="Spellings that name this engine (id, InferenceX frameworks, aliases); from its identity.",
    )
    default_port: int = Field(gt=0, lt=65536)
    health_path: str
    metrics_path: str | None
    metric_prefix: str | None = Field(
        default=None, description="Prometheus name prefix, e.g. 'sglang:'; None if unknown. From its identity."
    )
    ready_markers: list[str] = Field(description="Log lines meaning the server is ready (any one).")
    metrics_flag: str | None = Field(default=None, description="Flag the engine needs to expose metrics, if any.")
    rejected_request_fields: list[str] = Field(
        default_factory=list,
        description="OpenAI request fields the server answers with HTTP 422 (e.g. `ignore_eos`); "
                    "clients leave them out.",
    )
    known_versions: list[Version] = Field(default_factory=list)
    max_running_default: RunningCapDefault | None = Field(
        default=None, description="The running-request cap the server takes when its launch sets none, by GPU; "
                                  "None: not recorded, or not a function of the GPU alone (SGLang sizes it from its "
                                  "KV pool: `llmsweep.sim.engine.sglang_running_cap`).")
    memory_fraction_default: MemoryFractionDefault | None = Field(
        default=None, description="The share of each GPU's whole memory the server takes for weights and KV cache "
                                  "when its launch sets none, by version (SGLang's has no rules: it computes its "
                                  "`mem_fraction_static` from the GPU, TP and more, docs/simulator.md; "
                                  "TensorRT-LLM's is a share of the memory the weights leave: `share_of: free`); "
                                  "None: the engine takes no such share that the catalog knows of.")
    scheduler: SchedulerShape | None = Field(
        default=None, description="How the engine forms its steps where it is not the unified shape (a step of "
                                  "decodes and prefill chunks) the simulator takes by default.")
    page_size_default: PageSizeDefault | None = Field(
        default=None, description="The KV page in tokens the server takes when its launch sets none (SGLang 1, "
                                  "vLLM 16); None: not recorded.")
    source: str
    estimates: dict[str, str] = Field(default_factory=dict)


class FeatureGate(BaseModel):
    """A knob that only some engine versions honour."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    engine: str
    kind: GateKind
    name: str = Field(description="Env var, CLI arg (without leading dashes) or speculative-config key.")
    value: str | None = Field(default=None, description="Only this value is gated (None: any value).")
    min_version: Version | None = None
    max_version: Version | None = None
    below: Literal["ignored", "rejected"] = Field(
        default="ignored", description="What the engine does outside the range: silently ignores, or rejects."
    )
    estimate: bool = Field(default=False, description="True when the version bound is not established.")
    evidence: str
    message: str

    def honoured_by(self, version: Version | str | None) -> bool | None:
        """True/False for a known version; None when the version is unknown (nightly/dev images)."""
        v = as_version(version)
        if v is None:
            return None
        too_old = self.min_version is not None and v.below(self.min_version)
        too_new = self.max_version is not None and v.above(self.max_version)
        return not (too_old or too_new)

    def range_text(self) -> str:
        lo = f">= {self.min_version}" if self.min_version else ""
        hi = f"<= {self.max_version}" if self.max_version else ""
        return ", ".join(x for x in (lo, hi) if x) or "all versions"


class GateVerdict(BaseModel):
    """Whether one knob is honoured by one engine version, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str
    version: str | None
    kind: GateKind
    name: str
    gate: FeatureGate | None
    honoured: bool | None = Field(description="True, False, or None (unknown version or no gate recorded).")
    reason: str


class Conditions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    args: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    kv_offloading: list[str] | None = None


class Incompatibility(BaseModel):
    """A combination known to fail, with the fix and where the knowledge comes from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    engine: str
    min_version: Version | None = None
    max_version: Version | None = None
    version_note: str | None = None
    platforms: list[Platform] | None = None
    model_families: list[str] | None = None
    conditions: Conditions = Field(default_factory=Conditions)
    severity: Literal["error", "warning"]
    message: str
    fix: str
    evidence: str


# ------------------------------------------------------------------------------------------------------- loading


def _inject_id(key: str, raw: dict[str, Any]) -> dict[str, Any]:
    raw.setdefault("id", key)
    return raw


def _inject_identity(key: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Fill a registered engine's frameworks and metric prefix from its identity; a catalog file may restate them
    (an older copy of the packaged entry), never contradict them: the identity is what resolves."""
    raw = _inject_id(key, raw)
    ident = ENGINE_IDS.get(str(raw["id"]))
    if ident is None:
        return raw
    frameworks = [str(f).lower() for f in raw.get("frameworks") or []]
    prefix = raw.get("metric_prefix", ident.metric_prefix)
    stray = [f for f in frameworks if f not in ident.names]
    if stray or prefix != ident.metric_prefix:
        what = f"frameworks {stray}" if stray else f"metric_prefix {prefix!r}"
        raise ConfigError(
            f"engines.{key}: {what} contradicts engine {ident.id!r}'s identity "
            f"(spellings {', '.join(ident.names)}; metric prefix {ident.metric_prefix!r})",
            fix="drop `frameworks`/`metric_prefix` from the catalog entry: they are the engine's identity "
                "(llmsweep/engine_ids.py)",
        )
    raw["frameworks"] = list(ident.names)
    raw["metric_prefix"] = ident.metric_prefix
    return raw


@cached
def _engines(dirs: tuple[Path, ...]) -> dict[str, tuple[EngineInfo, Origin]]:
    return build_models("engines.yaml", "engines", EngineInfo, dirs, inject=_inject_identity,
                        sections=ENGINE_SECTIONS)


@cached
def _gates(dirs: tuple[Path, ...]) -> dict[str, tuple[FeatureGate, Origin]]:
    return build_models("engines.yaml", "gates", FeatureGate, dirs, inject=_inject_id, sections=ENGINE_SECTIONS)


@cached
def _incompatibilities(dirs: tuple[Path, ...]) -> dict[str, tuple[Incompatibility, Origin]]:
    return build_models("incompatibilities.yaml", "incompatibilities", Incompatibility, dirs, inject=_inject_id)


def all_engines() -> list[EngineInfo]:
    return [e for e, _ in _engines(catalog_dirs()).values()]


def canonical_engine(engine_or_framework: str) -> str:
    """``sglang-disagg`` / ``dynamo-sglang`` -> ``sglang``; ``trt`` -> ``trtllm``; a ConfigError names the known ones.

    Registered engines resolve through their identities; an engine only a catalog file names, through its entry."""
    name = engine_or_framework.strip().lower()
    eid = engine_for(name)
    if eid is not None:
        return eid
    for info in all_engines():
        if name == info.id or name in (f.lower() for f in info.frameworks):
            return info.id
    known = sorted({f for e in all_engines() for f in (e.id, *e.frameworks)})
    raise ConfigError(f"unknown engine or framework {engine_or_framework!r}", fix=f"use one of {', '.join(known)}")


def get_engine(engine_or_framework: str) -> EngineInfo:
    """Endpoint facts of an engine (default port, health/metrics paths, metric prefix, readiness markers)."""
    eid = canonical_engine(engine_or_framework)
    found: dict[str, tuple[EngineInfo, Origin]] = _engines(catalog_dirs())
    if eid not in found:
        raise ConfigError(f"engine {eid!r} has no entry in engines.yaml (port, health and metrics paths, readiness)",
                          fix=f"add `engines: {{{eid}: {{...}}}}` to catalog/data/engines.yaml or a user catalog")
    return found[eid][0]


def default_max_running(engine: str, gpu: HardwareSpec) -> EngineDefault | None:
    """The running-request cap `engine`'s server takes on `gpu` when its launch sets none (its catalog entry's
    `max_running_default`); None when the catalog records none for it, or knows no such engine."""
    try:
        info = get_engine(engine)
    except ConfigError:
        return None
    default = info.max_running_default
    if default is None:
        return None
    rule = next((r for r in default.rules if r.holds_for(gpu)), None)
    if rule is None:
        return None
    return EngineDefault(value=rule.value, flag=default.flag, engine=info.display_name, gpu=gpu.id,
                         condition=f"{rule.describe()} ({gpu.id}: {gpu.hbm_bytes / GIB:.0f} GiB)",
                         source=default.source)


def default_memory_fraction(engine: str, version: Version | str | None, gpu: str) -> EngineDefault | None:
    """The memory fraction `engine`'s server at `version` (None: an image that names none) takes when its launch
    sets none (its catalog entry's `memory_fraction_default`); None when the catalog records none for the engine or
    no rule covers that version (`llmsweep.engines.launch_memory_fraction` answers for a job either way, with what
    stands in and why)."""
    try:
        info = get_engine(engine)
    except ConfigError:
        return None
    record = info.memory_fraction_default
    if record is None:
        return None
    v = as_version(version)
    rule = next((r for r in record.rules if r.holds_for(v)), None)
    if rule is None:
        return None
    shown = f"{info.display_name} {v}" if v is not None else f"a {info.display_name} image that names no version"
    return EngineDefault(value=rule.value, flag=record.flag, engine=info.display_name, gpu=gpu,
                         condition=f"{shown} ({rule.describe()})", source=record.source,
                         knob="memory fraction")


def default_page_size(engine: str) -> tuple[str, PageSizeDefault] | None:
    """(display name, its page default) of `engine` (any spelling): the KV page its server takes when a launch sets
    none (its catalog entry's `page_size_default`); None when the catalog records none for it, or knows no such
    engine."""
    try:
        info = get_engine(engine)
    except ConfigError:
        return None
    return (info.display_name, info.page_size_default) if info.page_size_default is not None else None


def feature_gates(engine: str | None = None) -> list[FeatureGate]:
    """Every gate of one engine (any spelling), or of all engines when ``engine`` is None."""
    gates = [g for g, _ in _gates(catalog_dirs()).values()]
    if engine is None:
        return gates
    eid = canonical_engine(engine)
    return [g for g in gates if g.engine == eid]


def all_incompatibilities() -> list[Incompatibility]:
    return [i for i, _ in _incompatibilities(catalog_dirs()).values()]


# ------------------------------------------------------------------------------------------------------- queries


def _norm_arg(name: str) -> str:
    return name.strip().lstrip("-").replace("_", "-").lower()


def find_gate(engine: str, knob: str, kind: GateKind | None = None, value: Any = None) -> FeatureGate | None:
    """The gate for a knob (env name, ``--arg`` or ``arg``, speculative-config key), value-specific gates first."""
    eid = canonical_engine(engine)
    candidates = []
    for g in feature_gates(eid):
        if kind is not None and g.kind != kind:
            continue
        same = _norm_arg(g.name) == _norm_arg(knob) if g.kind == "arg" else g.name == knob.strip()
        if not same:
            continue
        if g.value is not None and (value is None or str(value).lower() != g.value.lower()):
            continue
        candidates.append(g)
    candidates.sort(key=lambda g: g.value is None)
    return candidates[0] if candidates else None


def check_knob(
    engine: str, version: Version | str | None, knob: str, kind: GateKind | None = None, value: Any = None
) -> GateVerdict:
    """Does ``engine`` at ``version`` honour ``knob`` (optionally with ``value``)? With the gate and a reason."""
    eid = canonical_engine(engine)
    v = as_version(version)
    gate = find_gate(eid, knob, kind, value)
    vtext = str(v) if v else (str(version) if version else None)
    if gate is None:
        return GateVerdict(
            engine=eid, version=vtext, kind=kind or "env", name=knob, gate=None, honoured=None,
            reason=f"no version gate is recorded for {knob!r} on {eid}",
        )
    honoured = gate.honoured_by(v)
    if honoured is None:
        reason = f"{eid} version unknown ({version!r}); {gate.name} needs {gate.range_text()}"
    elif honoured:
        reason = f"{eid} {v} is within {gate.range_text()} for {gate.name}"
    else:
        effect = "silently ignores" if gate.below == "ignored" else "rejects"
        reason = f"{eid} {v} {effect} {gate.name}: it needs {gate.range_text()}"
    if gate.estimate:
        reason += " (version bound is an estimate)"
    return GateVerdict(engine=eid, version=vtext, kind=gate.kind, name=gate.name, gate=gate, honoured=honoured,
                       reason=reason)


def honours(engine: str, version: Version | str | None, knob: str, kind: GateKind | None = None,
            value: Any = None) -> bool | None:
    """Short form of :func:`check_knob`: True, False, or None when unknown."""
    return check_knob(engine, version, knob, kind, value).honoured


def check_launch(
    engine: str,
    version: Version | str | None,
    *,
    env: Mapping[str, Any] | None = None,
    args: Mapping[str, Any] | None = None,
    speculative_config: Mapping[str, Any] | None = None,
    kv_transfer_config: Mapping[str, Any] | None = None,
) -> list[GateVerdict]:
    """Verdicts for every gated knob a launch uses (ungated knobs are left out). A policy rule reports the
    verdicts with ``honoured`` False (error, or warning when ``gate.estimate``) and None (version unknown).
    ``kv_transfer_config`` is the keys of a `--kv-transfer-config` and of its connectors' extra config
    (:func:`kv_transfer_keys`)."""
    out: list[GateVerdict] = []
    for kind, knobs in (("env", env), ("arg", args), ("speculative-config-key", speculative_config),
                        ("kv-transfer-config-key", kv_transfer_config)):
        for name, value in (knobs or {}).items():
            verdict = check_knob(engine, version, str(name), kind, value)  # type: ignore[arg-type]
            if verdict.gate is not None:
                out.append(verdict)
    return out


def kv_transfer_config(config: Any) -> Mapping[str, Any] | None:
    """A `--kv-transfer-config` as the mapping vLLM reads: a recipe's YAML mapping as it is, or the JSON text vLLM's
    CLI takes (`'{"kv_connector":"OffloadingConnector",...}'`) parsed. Not JSON, or not an object: None. The one
    reader of both spellings: a rule reading only the mapping passed the same config written as JSON text."""
    import json

    if isinstance(config, str):
        try:
            config = json.loads(config)
        except (ValueError, RecursionError):  # RecursionError: JSON nested past the decoder's depth
            return None
    return config if isinstance(config, Mapping) else None


def kv_transfer_keys(config: Any) -> dict[str, Any]:
    """Every key of a `--kv-transfer-config` (a dict, or its JSON text: :func:`kv_transfer_config`) with its value:
    the top-level keys and those of `kv_connector_extra_config`, through a MultiConnector's `connectors` too. Not
    JSON, or not an object: {}."""
    config = kv_transfer_config(config)
    if config is None:
        return {}
    keys: dict[str, Any] = {}
    for key, value in config.items():
        if key != "kv_connector_extra_config":
            keys.setdefault(str(key), value)
    extra = config.get("kv_connector_extra_config")
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            if key != "connectors":
                keys.setdefault(str(key), value)
        connectors = extra.get("connectors")
        # a MultiConnector's list; anything else is no list of connectors (an int crashed the policy rules)
        for inner in connectors if isinstance(connectors, list) else ():
            for key, value in kv_transfer_keys(inner).items():
                keys.setdefault(key, value)
    return keys


def _value_matches(want: Any, present: bool, have: Any) -> bool:
    if want is None:
        return not present
    if want == "*":
        return present
    if not present:
        return False
    wanted = want if isinstance(want, list) else [want]
    return str(have).strip().lower() in {str(w).strip().lower() for w in wanted}


def _kv_mode(kv_offloading: Any) -> str | None:
    if kv_offloading is None or kv_offloading is False:
        return None
    if kv_offloading is True:
        return "dram"
    return str(kv_offloading).strip().lower()


def _family_names(model: str | None) -> set[str]:
    """The names an incompatibility's model_families may use for a model: as given, its family and its prefix
    (so a caller may pass ``qwen3.5``, ``Qwen/Qwen3.5-397B-A17B-FP8`` or the catalog id)."""
    if not model:
        return set()
    names = {model.strip().lower()}
    from llmsweep.catalog.models import find_model

    spec = find_model(model)
    if spec is not None:
        names |= {spec.family.lower(), spec.prefix.lower(), spec.id}
    return names


def _platform_of(platform: str | None) -> str:
    """``cuda``/``rocm`` as given, or the platform of a hardware SKU or runner label (``mi300x`` -> rocm)."""
    text = (platform or "").strip().lower()
    if text in {"cuda", "rocm", ""}:
        return text
    from llmsweep.catalog.hardware import hardware_for_runner

    spec = hardware_for_runner(text)
    return spec.platform if spec else text


def _effective_arg(engine: str, version: Version | None, name: str, want: Any,
                   args: Mapping[str, Any]) -> tuple[bool, Any]:
    """(present, value) of one condition flag as the engine launches with it: the launch's own value, else, for a
    condition on a value (not on the flag being written or absent), the engine's parser default at `version` from the
    flag catalog (:func:`flag_default`). A flag whose default is not recorded for that version (an image naming no
    version, a release not read) stays absent: the default is not guessed."""
    key = _norm_arg(name)
    if key in args:
        return True, args[key]
    if want is None or want == "*":
        return False, None
    default = flag_default(engine, key, version)
    return (True, default.value) if default is not None else (False, None)


def match_incompatibilities(
    engine: str,
    version: Version | str | None,
    platform: str | None,
    model_family: str | None,
    args: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
    kv_offloading: str | bool | None = None,
) -> list[Incompatibility]:
    """Known incompatibilities a launch hits. ``args`` keys may carry dashes or underscores and leading ``--``; a
    condition on the value of a flag the launch leaves unset is matched against the engine's default for ``version``
    (:func:`flag_default`), not guessed where none is recorded;
    ``kv_offloading`` is the recipe value (``none``/``dram``); ``platform`` may be cuda/rocm or a SKU/runner label;
    ``model_family`` may be a prefix, family, catalog id or HF id. An unknown version (nightly image) matches, since
    the problem may be present: a policy rule can soften that to a warning."""
    eid = canonical_engine(engine)
    v = as_version(version)
    norm_args = {_norm_arg(k): val for k, val in (args or {}).items()}
    env = dict(env or {})
    kv = _kv_mode(kv_offloading)
    families = _family_names(model_family)
    plat = _platform_of(platform)
    hits: list[Incompatibility] = []
    for inc in all_incompatibilities():
        if inc.engine != eid:
            continue
        if v is not None and inc.min_version is not None and v.below(inc.min_version):
            continue
        if v is not None and inc.max_version is not None and v.above(inc.max_version):
            continue
        if inc.platforms is not None and plat not in inc.platforms:
            continue
        if inc.model_families is not None and not families & {f.lower() for f in inc.model_families}:
            continue
        c = inc.conditions
        if c.kv_offloading is not None and kv not in {k.lower() for k in c.kv_offloading}:
            continue
        if not all(_value_matches(w, *_effective_arg(eid, v, k, w, norm_args)) for k, w in c.args.items()):
            continue
        if not all(_value_matches(w, k in env, env.get(k)) for k, w in c.env.items()):
            continue
        hits.append(inc)
    return hits


#: The name docs/contracts.md uses for a feature gate.
EngineGate = FeatureGate


ENGINE_FLAGS_FILE = Path(__file__).parent / "data" / "engine_flags.yaml"


class FlagValues(BaseModel):
    """The values an engine's parser accepts for one flag (its argparse `choices`), as catalog data."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    choices: tuple[str, ...] = Field(description="Every value a release that was read accepts (their union).")
    complete_through: Version | None = Field(
        default=None, alias="complete-through",
        description="The newest release the list was read from; a later one may accept more (a miss is then a "
                    "warning). None: read from the engine's newest source, so no release accepts another value.")
    equivalents: dict[str, str] = Field(
        default_factory=dict,
        description="Another engine's spelling -> this engine's value for the same thing (vLLM's `fp8` is SGLang's "
                    "`fp8_e4m3`): what a refusal suggests first.")
    source: str = Field(description="Where the choices were read (file, versions).")

    def suggestions(self, value: str) -> list[str]:
        """What a value outside the choices most likely meant: its equivalent, else choices it prefixes, else the
        closest spellings."""
        import difflib

        if value in self.equivalents:
            return [self.equivalents[value]]
        prefixed = [c for c in self.choices if c.startswith(value)]
        return prefixed[:2] or difflib.get_close_matches(value, self.choices, n=2, cutoff=0.5)


def _norm_flag_name(flag: str) -> str:
    return "--" + str(flag).lstrip("-").replace("_", "-")


class FlagArity(BaseModel):
    """Which of an engine's listed flags are switches (no value: argparse `store_true`, `BooleanOptionalAction`; a
    recipe's `true` renders the bare flag) and which take a value (a bare flag is refused by the parser), as read in
    the engine's source. A listed flag in neither list is not classified."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    switches: frozenset[str] = Field(default_factory=frozenset)
    takes_value: frozenset[str] = Field(default_factory=frozenset, alias="takes-value")
    source: str

    @model_validator(mode="before")
    @classmethod
    def _normalised(cls, raw: Any) -> Any:
        if isinstance(raw, dict):
            raw = {k: ({_norm_flag_name(f) for f in v} if k in ("switches", "takes-value", "takes_value") else v)
                   for k, v in raw.items()}
        return raw

    @model_validator(mode="after")
    def _disjoint(self) -> FlagArity:
        if both := self.switches & self.takes_value:
            raise ValueError(f"listed both as switches and as taking a value: {', '.join(sorted(both))}")
        return self


@cached
def _flag_arity() -> dict[str, FlagArity]:
    import yaml

    doc = yaml.safe_load(ENGINE_FLAGS_FILE.read_text(encoding="utf-8")) or {}
    out: dict[str, FlagArity] = {}
    for engine, entry in doc.items():
        raw = entry.get("arity") if isinstance(entry, dict) else None
        if raw is None:
            continue
        arity = FlagArity.model_validate(raw)
        unlisted = (arity.switches | arity.takes_value) - _engine_flags().get(str(engine), frozenset())
        if unlisted:
            raise ConfigError(f"{ENGINE_FLAGS_FILE}: `{engine}.arity` classifies flags its `flags` does not list: "
                              f"{', '.join(sorted(unlisted))}", fix="list them in `flags` too, or drop them")
        out[str(engine)] = arity
    return out


def flag_arity(engine: str) -> FlagArity | None:
    """Which of `engine`'s listed flags are switches and which take a value (normalised `--a-b`); None when the
    catalog classifies none of its flags (TensorRT-LLM)."""
    return _flag_arity().get(engine)


class FlagDefaultRule(BaseModel):
    """The value an engine's parser gives one flag over a range of releases (inclusive, compared as
    :class:`~llmsweep.catalog.version.Version` bounds are), as read in those releases."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    value: str
    min_version: Version = Field(alias="min-version", description="The oldest release read with this default.")
    max_version: Version = Field(alias="max-version", description="The newest release read with this default.")

    def holds_for(self, version: Version) -> bool:
        return not version.below(self.min_version) and not version.above(self.max_version)


class FlagDefault(BaseModel):
    """What an engine's parser takes for a flag a launch leaves unset, by release, with the source it was read in.
    Only the parser's default: a normalisation the engine applies afterwards (SGLang's `ServerArgs._handle_hicache`
    rewriting one HiCache setting to suit another) is its adapter's (`Adapter.as_launched`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    by_version: tuple[FlagDefaultRule, ...] = Field(alias="by-version", min_length=1)
    source: str


@dataclass(frozen=True)
class FlagDefaultAt:
    """One flag's default at one release: the value, the flag and where it was read."""

    flag: str
    value: str
    version: Version
    source: str


@cached
def _flag_defaults() -> dict[str, dict[str, FlagDefault]]:
    import yaml

    doc = yaml.safe_load(ENGINE_FLAGS_FILE.read_text(encoding="utf-8")) or {}
    out: dict[str, dict[str, FlagDefault]] = {}
    for engine, entry in doc.items():
        defaults = entry.get("defaults") if isinstance(entry, dict) else None
        out[str(engine)] = {_norm_flag_name(flag): FlagDefault.model_validate(raw)
                            for flag, raw in (defaults or {}).items()}
    return out


def flag_default(engine: str, flag: str, version: Version | str | None) -> FlagDefaultAt | None:
    """The value `engine`'s parser (any spelling of the engine) takes for `flag` (any spelling: `--a-b`, `a_b`) when a
    launch leaves it unset, at `version`; None where the catalog records none for that release (a release not read, an
    image that names no version): a caller does not guess it."""
    v = as_version(version)
    if v is None:
        return None
    try:
        eid = canonical_engine(engine)
    except ConfigError:
        return None
    name = _norm_flag_name(flag)
    record = _flag_defaults().get(eid, {}).get(name)
    rule = next((r for r in record.by_version if r.holds_for(v)), None) if record is not None else None
    return FlagDefaultAt(name, rule.value, v, record.source) if rule is not None and record is not None else None


@cached
def _flag_values() -> dict[str, dict[str, FlagValues]]:
    import yaml

    doc = yaml.safe_load(ENGINE_FLAGS_FILE.read_text(encoding="utf-8")) or {}
    out: dict[str, dict[str, FlagValues]] = {}
    for engine, entry in doc.items():
        values = entry.get("values") if isinstance(entry, dict) else None
        out[str(engine)] = {_norm_flag_name(flag): FlagValues.model_validate(raw)
                            for flag, raw in (values or {}).items()}
    return out


def flag_values(engine: str) -> dict[str, FlagValues]:
    """Flag (normalised `--a-b`) → the values the engine's parser accepts for it, where the catalog lists them."""
    return _flag_values().get(engine, {})


@cached
def _engine_flags() -> dict[str, frozenset[str]]:
    import yaml

    doc = yaml.safe_load(ENGINE_FLAGS_FILE.read_text(encoding="utf-8")) or {}
    out: dict[str, frozenset[str]] = {}
    for engine, entry in doc.items():
        flags = entry.get("flags") if isinstance(entry, dict) else None
        if not isinstance(flags, list):
            raise ConfigError(f"{ENGINE_FLAGS_FILE}: `{engine}` lists no `flags`", fix="restore the packaged file")
        out[str(engine)] = frozenset("--" + str(f).lstrip("-").replace("_", "-") for f in flags)
    return out


def known_flags(engine: str) -> frozenset[str]:
    """The long flags the engine's server parser defines (normalised `--a-b`), empty when the catalog lists none."""
    return _engine_flags().get(engine, frozenset())
