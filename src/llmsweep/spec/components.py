"""Small shared pieces of the recipe schema: component metadata, concurrency, topology checks.

They mirror InferenceX's master-config rules (spec §1.5–1.6) so a master file that InferenceX accepts loads here
unchanged, and one it rejects is rejected with the same meaning — plus the line to fix.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from annotated_types import Gt, Le
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    field_validator,
    model_validator,
)

from llmsweep import shell
from llmsweep.spec.rule_error import rule_error

SpecDecodingMode = Literal["mtp", "draft_model", "none"]
KvOffloading = Literal["none", "dram"]


class ScenarioId(StrEnum):
    """Every scenario llmsweep runs, spelled once. The recipe's `scenarios` blocks are the first two (InferenceX's:
    `RECIPE_SCENARIOS`); `mooncake-replay` is what an agentic-coding block runs when `workload.replay` names a Mooncake
    trace. Kept here, below every recipe model that names one (`spec.serve`'s override matching, `spec.workload`).

    What each one sends, its defaults and its gate profile are its `Scenario` object in `llmsweep.workload.scenario`.
    """

    FIXED_SEQ_LEN = "fixed-seq-len"
    AGENTIC_CODING = "agentic-coding"
    MOONCAKE_REPLAY = "mooncake-replay"

    def __repr__(self) -> str:
        # as a recipe writes it: what pydantic's refusal of a `RecipeScenario` lists ('fixed-seq-len' or ...)
        return repr(self.value)


RecipeScenario = Literal[ScenarioId.FIXED_SEQ_LEN, ScenarioId.AGENTIC_CODING]
"""A scenario a recipe's `scenarios` block (and a changelog entry's `scenario-type`, `matrix … --scenario-type`, a serve
override's `when: {scenario: ...}`) may name: InferenceX's two."""
RECIPE_SCENARIOS: tuple[ScenarioId, ...] = get_args(RecipeScenario)
"""`RecipeScenario`'s members, in the order a recipe's blocks are read."""

MAX_CONC = 65_536
"""Highest concurrency a recipe may ask for: well above any real sweep (InferenceX's reach 4096), low enough that
the client's per-lane state stays bounded."""
MAX_PARALLEL = 4096
"""Highest tp/ep/num-worker: a typo guard (no fleet has this many GPUs for one server)."""

PositiveInt = Annotated[int, Strict(), Gt(0), Le(MAX_PARALLEL)]
"""A strict positive count: `true` is not 1 and `8.0` or `"8"` are not 8 (a YAML typo must not become a topology)."""
ConcInt = Annotated[int, Strict()]
"""A strict integer concurrency; its range is checked by :meth:`ConcFields.check_conc` with InferenceX's messages."""
MAX_SEQ_LEN = 16_777_216
"""Highest isl/osl the schema accepts for any model (16M tokens); the model's own context is checked by policy."""
SeqLen = Annotated[int, Strict(), Gt(0), Le(MAX_SEQ_LEN)]
"""A strict positive token count (`osl: 0` asks for nothing and would divide by zero in every per-token metric)."""


class StrictInput(BaseModel):
    """Base of every input model: unknown keys are errors, aliases are the YAML spellings."""

    # strict: YAML's `true` is not the number 1, nor `"8"` or `8.0` the integer 8 (no silent coercion of any field).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


def _reject_image_version(version: str | None) -> str | None:
    if version is not None and version.startswith("image:"):
        raise rule_error(
            "component-version",
            "component version must be a release, package version, or source commit, not an image reference",
            fix="write the component's own version (e.g. `0.3.2` or a commit), not `image:<tag>`",
        )
    return version


class ComponentMetadata(StrictInput):
    """`router` metadata: exactly `{name, version}` of a runtime component (InferenceX §1.6)."""

    name: str = Field(min_length=1, description="Component name, e.g. `sglang-router`.")
    version: str = Field(min_length=1, description="Release, package version or commit (never `image:...`).")

    @field_validator("version")
    @classmethod
    def _no_image_version(cls, version: str) -> str:
        _reject_image_version(version)
        return version


class KvOffloadBackend(StrictInput):
    """`kv-offload-backend`: which engine moves KV to host DRAM; version optional for framework-native backends."""

    name: str = Field(min_length=1, description="Backend name, e.g. `hicache`, `mooncake`, `vllm-simple`, `lmcache`.")
    version: str | None = Field(
        default=None, min_length=1, description="Backend version (expected for LMCache/Mooncake)."
    )

    @field_validator("version")
    @classmethod
    def _no_image_version(cls, version: str | None) -> str | None:
        return _reject_image_version(version)


class ConcFields(StrictInput):
    """Concurrency: `conc-start` + `conc-end` (×2 geometric, end clamped) xor a non-empty `conc-list` (verbatim)."""

    conc_start: ConcInt | None = Field(default=None, alias="conc-start",
                                      description="First concurrency of a ×step range.")
    conc_end: ConcInt | None = Field(default=None, alias="conc-end", description="Last concurrency (always included).")
    conc_list: list[ConcInt] | None = Field(
        default=None, alias="conc-list", description="Explicit concurrencies, in order."
    )

    def check_conc(self) -> None:
        """InferenceX's `_validate_conc_fields`, with its messages."""
        has_range = self.conc_start is not None and self.conc_end is not None
        has_list = self.conc_list is not None and len(self.conc_list) > 0
        if has_range and has_list:
            raise rule_error(
                "conc-both",
                "Cannot specify both 'conc-list' list and 'conc-start'/'conc-end'. "
                "Use either a list or a range, not both.",
                field="conc-list",
                fix="delete either `conc-list` or `conc-start`/`conc-end`",
            )
        if not has_range and not has_list:
            partial = "conc-start" if self.conc_start is not None else "conc-end" if self.conc_end is not None else None
            raise rule_error(
                "conc-missing",
                "Must specify either 'conc-list' list or both 'conc-start' and 'conc-end'.",
                field=partial,
                fix="add `conc-list: [...]`, or both `conc-start` and `conc-end`",
            )
        if has_range:
            assert self.conc_start is not None and self.conc_end is not None
            if self.conc_start <= 0 or self.conc_end <= 0:
                raise rule_error(
                    "conc-positive",
                    "Input 'conc-start' and 'conc-end' must be greater than 0.",
                    field="conc-start" if self.conc_start <= 0 else "conc-end",
                    fix="use concurrencies of 1 or more",
                )
            if self.conc_start > self.conc_end:
                raise rule_error(
                    "conc-range",
                    f"'conc-start' ({self.conc_start}) must be <= 'conc-end' ({self.conc_end}).",
                    field="conc-start",
                    fix=f"swap them: `conc-start: {self.conc_end}, conc-end: {self.conc_start}`",
                )
        if has_list:
            assert self.conc_list is not None
            if not all(x > 0 for x in self.conc_list):
                raise rule_error(
                    "conc-positive",
                    "Input 'conc-list' entries must be greater than 0.",
                    field="conc-list",
                    fix="remove the zero or negative entries from `conc-list`",
                )
        for name, values in (("conc-end", [self.conc_end]), ("conc-start", [self.conc_start]),
                             ("conc-list", self.conc_list or [])):
            over = [v for v in values if v is not None and v > MAX_CONC]
            if over:
                raise rule_error(
                    "range",
                    f"concurrency {over[0]} in `{name}` is above the limit of {MAX_CONC} concurrent requests",
                    field=name,
                    fix=f"use concurrencies of at most {MAX_CONC}",
                )


def check_dcp(tp: int, dcp_size: int) -> None:
    """DCP reuses TP GPUs, so TP must be a multiple of it."""
    if dcp_size and tp % dcp_size != 0:
        raise rule_error(
            "dcp-divisibility",
            f"'tp' ({tp}) must be divisible by 'dcp-size' ({dcp_size})",
            field="dcp-size",
            fix="pick a `dcp-size` that divides `tp` (DCP reuses the TP GPUs)",
        )


class WorkerBlock(StrictInput):
    """A multinode prefill or decode worker pool; uses `num-worker × tp × pp × pcp-size` GPUs."""

    num_worker: PositiveInt = Field(alias="num-worker", description="Replicas of this worker.")
    tp: PositiveInt = Field(description="Tensor parallelism per replica.")
    pp: int = Field(default=1, gt=0, strict=True, description="Pipeline parallelism per replica.")
    dcp_size: int = Field(default=1, gt=0, strict=True, alias="dcp-size", description="Decode context parallelism.")
    pcp_size: int = Field(default=1, gt=0, strict=True, alias="pcp-size", description="Prefill context parallelism.")
    ep: PositiveInt = Field(description="Expert parallelism.")
    dp_attn: bool = Field(alias="dp-attn", strict=True, description="Data-parallel attention.")
    hardware: str | None = Field(default=None, min_length=1, description="GPU SKU metadata; set on both or neither.")
    additional_settings: list[str] | None = Field(
        default_factory=list,
        alias="additional-settings",
        description="`KEY=VALUE` strings exported to the multinode launcher.",
    )

    @field_validator("additional_settings")
    @classmethod
    def _settings_are_assignments(cls, settings: list[str] | None) -> list[str] | None:
        first: dict[str, int] = {}
        for index, setting in enumerate(settings or []):
            name, eq, _ = setting.partition("=")
            if not eq or not shell.NAME.fullmatch(name):
                shown = setting if setting.isprintable() else repr(setting)[1:-1]
                raise rule_error(
                    "env-name",
                    f"additional setting `{shown}` is not `NAME=value` with a valid variable name (launchers export "
                    "it into a shell)",
                    field=f"[{index}]",
                    fix="write it as `NAME=value`, NAME being letters, digits and `_`, not starting with a digit",
                )
            if name in first:  # the worker's environment keeps one of them: which, the reader cannot tell
                raise rule_error(
                    "duplicate-key",
                    f"additional setting `{name}` is set twice (items {first[name]} and {index}); the worker's "
                    "environment would silently keep only the last",
                    field=f"[{index}]",
                    fix=f"delete one of the two `{name}=` items",
                )
            first[name] = index
        return settings

    @model_validator(mode="after")
    def _topology(self) -> WorkerBlock:
        check_dcp(self.tp, self.dcp_size)
        return self

    @property
    def gpus(self) -> int:
        return self.num_worker * self.tp * self.pp * self.pcp_size

    def matrix_dict(self) -> dict[str, Any]:
        """The worker as InferenceX emits it: written keys, then explicit pp/dcp-size/pcp-size defaults."""
        out = self.model_dump(by_alias=True, exclude_unset=True)
        out.update({"pp": self.pp, "dcp-size": self.dcp_size, "pcp-size": self.pcp_size})
        return out


def check_worker_hardware_pair(prefill: WorkerBlock | None, decode: WorkerBlock | None) -> None:
    if prefill is None or decode is None:
        return
    if bool(prefill.hardware) != bool(decode.hardware):
        raise rule_error(
            "worker-hardware",
            "'hardware' must be specified for both 'prefill' and 'decode', or neither",
            field="prefill" if not prefill.hardware else "decode",
            fix="add `hardware:` to the other worker too, or remove it from both",
        )
