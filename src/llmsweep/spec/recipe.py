"""The recipe: one InferenceX master-config entry, plus optional `serve` and `workload`.

A strict superset of the InferenceX master-config entry (spec §1.2–1.6): a master file loads unchanged, every
InferenceX rule holds with its message, and our two optional blocks replace the bash script and the scattered
client defaults. `multinode` picks the schema, as in InferenceX, so a single-node recipe that writes a `prefill`
block is told that the key is unknown there.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from llmsweep.catalog.precision import FORMATS, known_names, weight_format
from llmsweep.power.samples import REQUIRE_POWER_HELP
from llmsweep.spec.components import (
    ComponentMetadata,
    ConcFields,
    KvOffloadBackend,
    KvOffloading,
    PositiveInt,
    ScenarioId,
    SeqLen,
    SpecDecodingMode,
    StrictInput,
    WorkerBlock,
    check_dcp,
    check_worker_hardware_pair,
)
from llmsweep.spec.engines import resolve_engine
from llmsweep.spec.rule_error import rule_error
from llmsweep.spec.serve import Serve, check_argv_value
from llmsweep.spec.source import SourceMap, parse_path, render_path
from llmsweep.spec.workload import WorkloadSpec

CLUSTER_LABEL_PREFIX = "cluster:"

IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@#+-]*")
"""A container image reference (`registry/path:tag`, `@sha256:` digests, pyxis `registry#path:tag`): no spaces,
quotes or shell syntax, and no leading `-` (it is an argument of `docker run` and `srun --container-image`)."""


def check_image(image: str) -> str:
    """Reject an empty, malformed or untagged image: an untagged one is whatever `latest` is on the day it runs."""
    if not image.strip():
        raise rule_error("image", "`image` is empty", fix="write the engine image with its tag, e.g. "
                         "`lmsysorg/sglang:v0.5.16`")
    if not IMAGE_REF.fullmatch(image):
        shown = repr(image) if not image.isprintable() else f"`{image}`"
        raise rule_error("image", f"image {shown} is not a container image reference (letters, digits and "
                         "`._/:@#+-` only, not starting with `-`)",
                         fix="write the image as `registry/path:tag`")
    name = re.split(r"[/#]", image)[-1]
    if ":" not in name and "@" not in image:
        raise rule_error("image", f"image `{image}` has no tag: it would run whatever `latest` is that day",
                         fix=f"pin the image, e.g. `{image}:<version>` or `{image}@sha256:<digest>`")
    return image


class SingleNodeFixedEntry(ConcFields):
    """A single-node fixed-seq-len search-space entry: one TP/PP/DCP/PCP/EP topology × concurrencies."""

    tp: PositiveInt = Field(description="Tensor parallelism.")
    pp: int = Field(default=1, gt=0, strict=True, description="Pipeline parallelism.")
    dcp_size: int = Field(default=1, gt=0, strict=True, alias="dcp-size", description="Decode context parallelism.")
    pcp_size: int = Field(default=1, gt=0, strict=True, alias="pcp-size", description="Prefill context parallelism.")
    ep: PositiveInt | None = Field(default=None, description="Expert parallelism (emitted as 1 when absent).")
    spec_decoding: SpecDecodingMode = Field(
        default="none", alias="spec-decoding", description="mtp, draft_model, none."
    )
    dp_attn: bool | None = Field(default=None, alias="dp-attn", strict=True,
                                 description="Data-parallel attention (default false).")
    router: ComponentMetadata | None = Field(default=None, description="Router component `{name, version}`.")

    @model_validator(mode="after")
    def _rules(self) -> SingleNodeFixedEntry:
        self.check_conc()
        check_dcp(self.tp, self.dcp_size)
        return self


class MultiNodeFixedEntry(ConcFields):
    """A multinode fixed-seq-len entry: prefill and decode worker pools sharing one allocation for all concs."""

    spec_decoding: SpecDecodingMode = Field(
        default="none", alias="spec-decoding", description="mtp, draft_model, none."
    )
    prefill: WorkerBlock = Field(description="Prefill worker pool.")
    decode: WorkerBlock = Field(description="Decode worker pool.")
    router: ComponentMetadata | None = Field(default=None, description="Router component `{name, version}`.")
    kv_p2p_transfer: str | None = Field(
        default=None, min_length=1, alias="kv-p2p-transfer", description="KV transfer engine (nixl, mori, ...)."
    )

    @model_validator(mode="after")
    def _rules(self) -> MultiNodeFixedEntry:
        self.check_conc()
        check_worker_hardware_pair(self.prefill, self.decode)
        return self


class AgenticEntry(ConcFields):
    """An agentic-coding entry: `tp` (single node) or `prefill` + `decode` (multinode), with KV-offload settings."""

    tp: PositiveInt | None = Field(default=None, description="Tensor parallelism (single-node form).")
    pp: int = Field(default=1, gt=0, strict=True, description="Pipeline parallelism (single-node form).")
    dcp_size: int = Field(default=1, gt=0, strict=True, alias="dcp-size", description="Decode context parallelism.")
    pcp_size: int = Field(default=1, gt=0, strict=True, alias="pcp-size", description="Prefill context parallelism.")
    ep: PositiveInt | None = Field(default=None, description="Expert parallelism (emitted as 1 when absent).")
    dp_attn: bool | None = Field(default=None, alias="dp-attn", strict=True,
                                 description="Data-parallel attention.")
    spec_decoding: SpecDecodingMode = Field(
        default="none", alias="spec-decoding", description="mtp, draft_model, none."
    )
    prefill: WorkerBlock | None = Field(default=None, description="Prefill worker pool (multinode form).")
    decode: WorkerBlock | None = Field(default=None, description="Decode worker pool (multinode form).")
    kv_offloading: KvOffloading | None = Field(
        default=None, alias="kv-offloading", description="`none` or `dram`; required in the single-node form."
    )
    kv_offload_backend: KvOffloadBackend | None = Field(
        default=None, alias="kv-offload-backend", description="Required iff kv-offloading is `dram`."
    )
    router: ComponentMetadata | None = Field(default=None, description="Router component `{name, version}`.")
    kv_p2p_transfer: str | None = Field(
        default=None, min_length=1, alias="kv-p2p-transfer", description="KV transfer engine (multinode only)."
    )

    @property
    def is_multinode(self) -> bool:
        return self.prefill is not None and self.decode is not None

    @model_validator(mode="after")
    def _rules(self) -> AgenticEntry:
        self.check_conc()
        self._check_kv_offload()
        self._check_topology()
        return self

    def _check_kv_offload(self) -> None:
        backend = self.kv_offload_backend
        if self.kv_offloading is None and backend is not None:
            raise rule_error(
                "kv-offload-backend",
                "kv-offload-backend requires kv-offloading",
                field="kv-offload-backend",
                fix="add `kv-offloading: dram`, or delete `kv-offload-backend`",
            )
        if self.kv_offloading == "none" and backend is not None:
            raise rule_error(
                "kv-offload-backend",
                "kv-offload-backend can only be set when kv-offloading is not 'none'",
                field="kv-offload-backend",
                fix="delete `kv-offload-backend`, or set `kv-offloading: dram`",
            )
        if self.kv_offloading == "dram" and backend is None:
            raise rule_error(
                "kv-offload-backend",
                "kv-offload-backend is required when kv-offloading is 'dram'",
                field="kv-offloading",
                fix="add `kv-offload-backend: {name: <hicache|mooncake|vllm-simple|lmcache|native>}`",
            )

    def _check_topology(self) -> None:
        has_tp = self.tp is not None
        has_any_worker = self.prefill is not None or self.decode is not None
        if has_tp == has_any_worker or (has_any_worker and not self.is_multinode):
            missing = "decode" if self.prefill is not None and self.decode is None else "prefill"
            raise rule_error(
                "agentic-topology",
                "Agentic search-space entries must specify either tp or both prefill and decode",
                field="tp" if has_tp else missing if has_any_worker else None,
                fix="write `tp:` for a single-node arm, or both `prefill:` and `decode:` for a multinode arm",
            )
        if has_tp:
            if self.kv_offloading is None:
                raise rule_error(
                    "kv-offloading-required",
                    "Single-node agentic search-space entries must specify kv-offloading",
                    fix="add `kv-offloading: none` (GPU-resident) or `kv-offloading: dram` with a backend",
                )
            assert self.tp is not None
            check_dcp(self.tp, self.dcp_size)
            return
        written = [alias for name, alias in (("pp", "pp"), ("dcp_size", "dcp-size"), ("pcp_size", "pcp-size"))
                   if name in self.model_fields_set]
        if written:
            raise rule_error(
                "multinode-fields",
                "Multinode agentic search-space entries cannot specify 'pp', 'dcp-size', 'pcp-size'",
                field=written[0],
                fix=f"move `{written[0]}` into the `prefill`/`decode` worker blocks",
            )
        check_worker_hardware_pair(self.prefill, self.decode)


SearchSpaceEntry = SingleNodeFixedEntry | MultiNodeFixedEntry | AgenticEntry
"""One search-space entry, in any of the three forms a scenario list holds."""


def entry_p2p(entry: SearchSpaceEntry) -> str | None:
    """An entry's `kv-p2p-transfer`; a single-node fixed-seq-len entry has no such field."""
    return None if isinstance(entry, SingleNodeFixedEntry) else entry.kv_p2p_transfer


class FixedSeqLenScenario(StrictInput):
    """One ISL/OSL pair and its search space (single-node form)."""

    isl: SeqLen = Field(description="Input sequence length in tokens.")
    osl: SeqLen = Field(description="Output sequence length in tokens.")
    search_space: list[SingleNodeFixedEntry] = Field(alias="search-space", description="Topologies × concurrencies.")


class MultiNodeFixedSeqLenScenario(StrictInput):
    """One ISL/OSL pair and its search space (multinode form)."""

    isl: SeqLen = Field(description="Input sequence length in tokens.")
    osl: SeqLen = Field(description="Output sequence length in tokens.")
    search_space: list[MultiNodeFixedEntry] = Field(
        alias="search-space", description="Worker topologies × concurrencies."
    )


class AgenticScenario(StrictInput):
    """An agentic-coding block: search space plus the DRAM share offload arms may use."""

    search_space: list[AgenticEntry] = Field(alias="search-space", description="Topologies × concurrencies.")
    dram_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        alias="dram-utilization",
        description="Share of the runner's host DRAM for KV offload; required when any arm uses `dram`.",
    )

    @model_validator(mode="after")
    def _dram_needs_utilization(self) -> AgenticScenario:
        for index, entry in enumerate(self.search_space):
            if entry.kv_offloading == "dram" and self.dram_utilization is None:
                raise rule_error(
                    "dram-utilization-required",
                    "kv-offloading='dram' requires dram-utilization with runner hardware metadata",
                    field=f"search-space[{index}].kv-offloading",
                    fix="add `dram-utilization: 0.80` (0 < x <= 1) to this agentic-coding block",
                )
        return self


class _ScenariosBase(StrictInput):
    agentic_coding: list[AgenticScenario] | None = Field(
        default=None, alias=ScenarioId.AGENTIC_CODING.value, description="Agentic trace-replay scenarios."
    )

    @model_validator(mode="after")
    def _at_least_one(self) -> _ScenariosBase:
        if not getattr(self, "fixed_seq_len", None) and not self.agentic_coding:
            raise rule_error(
                "scenario-empty",
                "At least one scenario type must be specified",
                fix="add a non-empty `fixed-seq-len:` or `agentic-coding:` list under `scenarios`",
            )
        return self


class SingleNodeScenarios(_ScenariosBase):
    fixed_seq_len: list[FixedSeqLenScenario] | None = Field(
        default=None, alias=ScenarioId.FIXED_SEQ_LEN.value, description="Random-token throughput scenarios."
    )


class MultiNodeScenarios(_ScenariosBase):
    fixed_seq_len: list[MultiNodeFixedSeqLenScenario] | None = Field(
        default=None, alias=ScenarioId.FIXED_SEQ_LEN.value, description="Random-token throughput scenarios."
    )


class RecipePolicy(StrictInput):
    """Review policy a recipe declares for itself, enforced by `llmsweep validate` (llmsweep extension)."""

    min_conc_step: int | None = Field(
        default=None, gt=0, alias="min-conc-step", description="Smallest gap between two concurrencies of a list."
    )
    max_conc: int | None = Field(
        default=None, gt=0, alias="max-conc", description="Highest concurrency any arm may run."
    )


class SchemaChoice(BaseModel):
    """The field that picks a recipe's schema (:class:`SingleNodeRecipe` or :class:`MultiNodeRecipe`), read first:
    a `multinode` that is not a boolean (`"false"`, `0`, `1`) is one type error, never the other schema's errors."""

    model_config = ConfigDict(extra="ignore", strict=True)

    multinode: bool


class Recipe(StrictInput):
    """One recipe key. Use :func:`llmsweep.spec.load_recipes`; `key` and `source` are set by the loader."""

    image: str = Field(description="Container image of the engine (pyxis `registry#path` allowed).")
    model: str = Field(min_length=1, description="Hugging Face id (or launcher alias) of the served model.")
    model_prefix: str = Field(
        min_length=1, alias="model-prefix", description="Short model code; first token of exp-name."
    )
    precision: str = Field(min_length=1, description="Weight precision, e.g. fp8, fp4.")
    framework: str = Field(
        min_length=1, description="Engine framework (sglang, vllm, trt, atom, dynamo-*, *-disagg, sim, ...)."
    )
    runner: str = Field(min_length=1, description="Scheduling label from the fleet (`cluster:<name>` for agentic).")
    multinode: bool = Field(description="Selects the single- or multi-node schema.")
    disagg: bool = Field(default=False, description="Disaggregated prefill/decode (multinode only).")
    router: ComponentMetadata | None = Field(default=None, description="Router component `{name, version}`.")
    serve: Serve | None = Field(default=None, description="How to launch the engine (llmsweep extension).")
    workload: WorkloadSpec | None = Field(default=None, description="What the client sends (llmsweep extension).")
    policy: RecipePolicy | None = Field(
        default=None,
        description="Grid policy validate enforces: `{min-conc-step: 2, max-conc: 16}` (llmsweep extension).",
    )
    require_power: bool | None = Field(
        default=None, alias="require-power", description=REQUIRE_POWER_HELP + " (llmsweep extension)"
    )
    scenarios: SingleNodeScenarios | MultiNodeScenarios = Field(
        description="`fixed-seq-len` and/or `agentic-coding` scenarios (narrowed by the single/multi-node subclass)."
    )

    _key: str = PrivateAttr(default="")
    _source: SourceMap | None = PrivateAttr(default=None)

    @field_validator("image")
    @classmethod
    def _tagged_image(cls, image: str) -> str:
        return check_image(image)

    @field_validator("model")
    @classmethod
    def _model_not_a_flag(cls, model: str) -> str:
        return check_argv_value(model, fix="write the Hugging Face id (`org/name`) or the launcher's alias; serve a "
                                           "local checkpoint with `serve.model-path`")

    @field_validator("precision")
    @classmethod
    def _known_precision(cls, precision: str) -> str:
        if weight_format(precision) is None:
            close = difflib.get_close_matches(precision.strip().lower(), list(FORMATS), n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise rule_error(
                "precision", f"precision `{precision}` is not a weight format llmsweep knows{hint} "
                f"(known: {known_names()})",
                fix=f"write `precision: {close[0] if close else 'fp8'}` (the served checkpoint's weights), or add the "
                "format to llmsweep/catalog/precision.py",
            )
        return precision

    @property
    def key(self) -> str:
        """The recipe key (top-level YAML key)."""
        return self._key

    @property
    def source(self) -> SourceMap:
        """Where each field was written; paths start with the recipe key."""
        return self._source or SourceMap("<input>")

    def bind(self, key: str, source: SourceMap | None) -> Recipe:
        """Attach the key and source map (done by the loader)."""
        self._key = key
        self._source = source
        return self

    @property
    def file(self) -> str:
        """The file the recipe was read from."""
        return self.source.file

    def line_of(self, path: tuple[str | int, ...] | str = ()) -> int | None:
        """1-based line of a field, by path relative to the recipe (`("serve", "env")` or `"serve.env"`).

        A path that is not written (a defaulted field) resolves to its nearest written ancestor.
        """
        rel = parse_path(path) if isinstance(path, str) else path
        return self.source.line_of((self.key, *rel))

    def path_of(self, path: tuple[str | int, ...] | str = ()) -> str:
        """Rendered full field path, e.g. `my-key.scenarios.agentic-coding[0].search-space[1].tp`."""
        rel = parse_path(path) if isinstance(path, str) else path
        return render_path((self.key, *rel))

    @property
    def runnable(self) -> bool:
        """Plannable recipes are runnable only with a `serve` block and a framework an adapter knows."""
        return self.serve is not None and resolve_engine(self) is not None

    @property
    def top_p2p(self) -> str | None:
        """The recipe-level `kv-p2p-transfer`; only the multinode schema has the field."""
        return self.kv_p2p_transfer if isinstance(self, MultiNodeRecipe) else None

    def fixed_seq_len(self) -> Sequence[FixedSeqLenScenario | MultiNodeFixedSeqLenScenario]:
        """The fixed-seq-len scenarios in the recipe's (single- or multinode) form; empty when there are none."""
        return self.scenarios.fixed_seq_len or []

    def search_space_entries(self) -> Iterator[tuple[tuple[str | int, ...], SearchSpaceEntry]]:
        """(path under the recipe key, entry) for every search-space entry, in file order."""
        for si, scen in enumerate(self.fixed_seq_len()):
            entries: Sequence[SearchSpaceEntry] = scen.search_space
            for ei, entry in enumerate(entries):
                yield ("scenarios", ScenarioId.FIXED_SEQ_LEN.value, si, "search-space", ei), entry
        for si, agentic in enumerate(self.scenarios.agentic_coding or []):
            for ei, entry in enumerate(agentic.search_space):
                yield ("scenarios", ScenarioId.AGENTIC_CODING.value, si, "search-space", ei), entry

    def _check_common(self) -> None:
        if self.scenarios.agentic_coding and not self.runner.startswith(CLUSTER_LABEL_PREFIX):
            raise rule_error(
                "agentic-runner",
                "Agentic master configs must use a 'cluster:<name>' runner "
                "so every point runs on one exact hardware fleet.",
                field="runner",
                fix=f"use the exact fleet label, e.g. `runner: cluster:{self.runner.split('-')[0]}-...`",
            )
        located = list(self.search_space_entries())
        entries = [entry for _, entry in located]
        top_p2p = self.top_p2p
        for name, top, inner in (
            ("router", self.router, [path for path, e in located if e.router is not None]),
            ("kv-p2p-transfer", top_p2p, [path for path, e in located if entry_p2p(e) is not None]),
        ):
            if top is not None and inner:
                raise rule_error(
                    "component-scope",
                    f"{name} must be declared either at the top level or in search-space entries, not both",
                    field=render_path((*inner[0], name)),
                    fix=f"keep `{name}` at the top level only, or only in the search-space entries",
                )
        stray = [path for path, e in located if entry_p2p(e) is not None]
        if not self.multinode and stray:
            raise rule_error(
                "p2p-multinode",
                "kv-p2p-transfer is only valid when multinode=true",
                field=render_path((*stray[0], "kv-p2p-transfer")),
                fix="delete `kv-p2p-transfer` (single-node servers move no KV between workers)",
            )
        if self.disagg and top_p2p is None and (
            not entries or any(entry_p2p(e) is None for e in entries)
        ):
            raise rule_error(
                "disagg-p2p",
                "disagg=true requires kv-p2p-transfer at the top level or in every search-space entry",
                field="disagg",
                fix="add `kv-p2p-transfer: <nixl|mori|mooncake|ucx>` at the top level",
            )


class SingleNodeRecipe(Recipe):
    """A recipe with `multinode: false`."""

    multinode: Literal[False] = Field(description="Single-node schema.")
    scenarios: SingleNodeScenarios = Field(description="`fixed-seq-len` and/or `agentic-coding` scenarios.")

    @model_validator(mode="after")
    def _rules(self) -> SingleNodeRecipe:
        if self.disagg:
            raise rule_error(
                "disagg-multinode",
                "disagg=true requires multinode=true",
                field="disagg",
                fix="set `multinode: true` with prefill/decode workers, or `disagg: false`",
            )
        for path, entry in self.search_space_entries():
            if isinstance(entry, AgenticEntry) and entry.tp is None:
                raise rule_error(
                    "agentic-topology",
                    "single-node agentic entries use `tp`; prefill/decode workers need `multinode: true`",
                    field=render_path((*path, "prefill")),
                    fix="replace the worker blocks with `tp:`, or set `multinode: true`",
                )
        self._check_common()
        return self


class MultiNodeRecipe(Recipe):
    """A recipe with `multinode: true`."""

    multinode: Literal[True] = Field(description="Multi-node schema.")
    kv_p2p_transfer: str | None = Field(
        default=None, min_length=1, alias="kv-p2p-transfer", description="KV transfer engine between workers."
    )
    scenarios: MultiNodeScenarios = Field(description="`fixed-seq-len` and/or `agentic-coding` scenarios.")

    @model_validator(mode="after")
    def _rules(self) -> MultiNodeRecipe:
        for path, entry in self.search_space_entries():
            if isinstance(entry, AgenticEntry) and entry.tp is not None:
                raise rule_error(
                    "agentic-topology",
                    "multinode agentic entries need `prefill` and `decode` worker blocks, not `tp`",
                    field=render_path((*path, "tp")),
                    fix="replace `tp:` with `prefill:` and `decode:` worker blocks, or set `multinode: false`",
                )
        self._check_common()
        return self
