"""The Job: one matrix cell, typed, end to end.

InferenceX passes a job as a flat dict through GitHub Actions inputs and bash variables, and lost fields on the way.
Here one pydantic model carries the InferenceX matrix entry (exact keys and values, via :meth:`Job.matrix_entry`)
plus what llmsweep needs downstream: a unique id, the recipe it came from and its fingerprint, the resolved `serve`
and `workload`, the engine adapter, the GPU count and the acceptance length to pin.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.spec.components import ComponentMetadata, KvOffloadBackend
from llmsweep.spec.serve import ResolvedServe
from llmsweep.spec.workload import ResolvedWorkload, ScenarioId


class JobModel(BaseModel):
    """Jobs are produced by the planner, so unknown keys are errors and instances are not mutated in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Worker(JobModel):
    """A multinode worker pool as the matrix carries it (pp/dcp-size/pcp-size always explicit)."""

    num_worker: int = Field(alias="num-worker")
    tp: int
    ep: int
    dp_attn: bool = Field(alias="dp-attn")
    pp: int = 1
    dcp_size: int = Field(default=1, alias="dcp-size")
    pcp_size: int = Field(default=1, alias="pcp-size")
    hardware: str | None = None
    additional_settings: list[str] | None = Field(
        default=None, alias="additional-settings", description="None when the recipe did not write the key."
    )

    @property
    def gpus(self) -> int:
        return self.num_worker * self.tp * self.pp * self.pcp_size

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.pcp_size

    def matrix_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"num-worker": self.num_worker, "tp": self.tp, "ep": self.ep, "dp-attn": self.dp_attn}
        if self.hardware is not None:
            out["hardware"] = self.hardware
        if self.additional_settings is not None:
            out["additional-settings"] = list(self.additional_settings)
        out.update({"pp": self.pp, "dcp-size": self.dcp_size, "pcp-size": self.pcp_size})
        return out


class Acceptance(JobModel):
    """The acceptance length a speculative throughput job pins, and where it comes from.

    `value` is what the engine adapter spells (SGLANG_SIMULATE_ACC_LEN, vLLM synthetic_acceptance_length, ...);
    `golden` is the committed golden-curve value for (model, method, thinking, K), kept even when a recipe pins its
    own value so policy can compare them.
    """

    value: float = Field(description="Acceptance length to pin (tokens per verification step, ≥ 1).")
    source: Literal["golden", "pinned"] = Field(description="`golden` curve lookup or an explicit recipe pin.")
    golden: float | None = Field(default=None, description="Golden-curve value for the same key, if one exists.")
    method: str = Field(description="Draft method (eagle, eagle3, mtp, dspark, ...).")
    thinking: Literal["on", "off"] = Field(description="Thinking mode the curve is read at.")
    k: int | None = Field(default=None, description="Draft length K.")
    draft_model: str | None = Field(default=None, description="Draft checkpoint when the curve depends on it.")
    provenance: str | None = Field(
        default=None, description="Curve file / checkpoint / run the golden value comes from."
    )
    simulated: bool = Field(
        default=False, description="The golden value comes from a curve collected on llmsweep's simulator (a modelled "
        "AL, `simulated: yes` in its header), not from a measurement.")
    cited: str | None = Field(
        default=None, description="A pinned value's source as the recipe cites it (`acceptance-length-source`): where "
        "it was measured, for a model no golden curve covers.")


class Job(JobModel):
    """One matrix cell. Serialises to InferenceX's matrix entry with :meth:`matrix_entry`."""

    # --- llmsweep identity -------------------------------------------------------------------------------------
    id: str = Field(description="Unique, filesystem-safe job id (RESULT_FILENAME-style fields + fingerprint hash).")
    recipe_key: str = Field(alias="recipe-key", description="Recipe key the job was expanded from.")
    recipe_file: str | None = Field(default=None, alias="recipe-file", description="File of that recipe.")
    recipe_fingerprint: str = Field(
        alias="recipe-fingerprint",
        pattern=r"^[0-9a-f]{64}$",
        description="InferenceX curve identity: sha256 of the throughput entry minus conc and exp-name.",
    )
    scenario: ScenarioId = Field(
        description="The recipe scenario block the job came from (fixed-seq-len or agentic-coding); what it sends is "
        "`workload.scenario`."
    )
    multinode: bool

    # --- InferenceX matrix entry fields (None = key absent from the entry) ---------------------------------------
    image: str
    model: str
    model_prefix: str = Field(alias="model-prefix")
    precision: str
    framework: str
    runner: str
    isl: int | None = None
    osl: int | None = None
    tp: int | None = None
    pp: int | None = None
    dcp_size: int | None = Field(default=None, alias="dcp-size")
    pcp_size: int | None = Field(default=None, alias="pcp-size")
    ep: int | None = None
    dp_attn: bool | None = Field(default=None, alias="dp-attn")
    prefill: Worker | None = None
    decode: Worker | None = None
    spec_decoding: str = Field(alias="spec-decoding")
    conc: int | list[int]
    max_model_len: int | None = Field(default=None, alias="max-model-len")
    kv_offloading: Literal["none", "dram"] | None = Field(default=None, alias="kv-offloading")
    kv_offload_backend: KvOffloadBackend | None = Field(default=None, alias="kv-offload-backend")
    total_cpu_dram_gb: int | None = Field(default=None, alias="total-cpu-dram-gb")
    duration: int | None = None
    exp_name: str = Field(alias="exp-name")
    disagg: bool | None = None
    router: ComponentMetadata | None = None
    kv_p2p_transfer: str | None = Field(default=None, alias="kv-p2p-transfer")
    run_eval: bool | None = Field(default=None, alias="run-eval")
    eval_only: bool | None = Field(default=None, alias="eval-only")
    eval_conc: int | None = Field(default=None, alias="eval-conc")
    eval_all_concs: bool | None = Field(default=None, alias="eval-all-concs")

    # --- llmsweep extensions ------------------------------------------------------------------------------------
    runner_label: str = Field(
        alias="runner-label",
        description="The recipe's runner label (`runner` may be a node under --runner-node-filter).",
    )
    sku: str | None = Field(default=None, description="GPU SKU the runner label implies (h200, mi300x, b300, ...).")
    gpus_per_node: int | None = Field(
        default=None, ge=1, alias="gpus-per-node",
        description="A multinode job's runner's GPUs per node as the fleet it was planned with records them (the "
        "runner file, `--runner-config`, else the packaged one); None where it records none (the GPU SKU's host size "
        "then: `engines.runner_gpus_per_node`). Where its workers are placed, on the node that launches them too.",
    )
    engine: str | None = Field(default=None, description="Engine adapter; None = not runnable (no serve / unmapped).")
    gpus: int = Field(description="GPUs the job occupies: tp·pp·pcp (single node) or the worker sum (multinode).")
    serve: ResolvedServe | None = Field(default=None, description="`serve` after this arm's overrides.")
    workload: ResolvedWorkload = Field(description="What the client sends, defaults resolved.")
    acceptance: Acceptance | None = Field(
        default=None, description="Pinned acceptance length (speculative throughput jobs only)."
    )
    require_power: bool | None = Field(
        default=None, alias="require-power", description="The recipe's `require-power` (None: not written)."
    )
    server_copy: int | None = Field(
        default=None, ge=2, alias="server-copy",
        description="Where `run` plans jobs that send this job's point to its server more than once (a job planned "
        "twice: `grid.duplicate`, `grid.duplicate-arm`, two recipes alike; arms its launch does not tell apart), this "
        "job's place among them from the second on (`execute.pipeline.server_copies`): its repeats draw a sample of "
        "their own (`workload.scenario.sample_name`) and its reuse key says which copy it is. None: the first or only "
        "one (never set by planning).")

    @property
    def runnable(self) -> bool:
        return self.engine is not None and self.serve is not None

    @property
    def is_eval(self) -> bool:
        return bool(self.eval_only)

    @property
    def concs(self) -> list[int]:
        return list(self.conc) if isinstance(self.conc, list) else [self.conc]

    def matrix_entry(self, *, with_fingerprint: bool = False) -> dict[str, Any]:
        """Exactly the InferenceX generator's matrix entry: same keys and values, unset keys omitted, its key order.

        `with_fingerprint` adds `recipe-fingerprint`, as InferenceX's changelog processing does for benchmark rows.
        """
        entry = self._agentic_entry() if self.scenario is ScenarioId.AGENTIC_CODING else self._fixed_entry()
        if with_fingerprint:
            entry["recipe-fingerprint"] = self.recipe_fingerprint
        return entry

    def _head(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "model": self.model,
            "model-prefix": self.model_prefix,
            "precision": self.precision,
            "framework": self.framework,
            "runner": self.runner,
        }

    def _single_topology(self) -> dict[str, Any]:
        return {"tp": self.tp, "pp": self.pp, "dcp-size": self.dcp_size, "pcp-size": self.pcp_size}

    def _workers(self) -> dict[str, Any]:
        assert self.prefill is not None and self.decode is not None
        return {"prefill": self.prefill.matrix_dict(), "decode": self.decode.matrix_dict()}

    def _fixed_entry(self) -> dict[str, Any]:
        out = self._head()
        out.update({"isl": self.isl, "osl": self.osl})
        if self.multinode:
            out["spec-decoding"] = self.spec_decoding
            out.update(self._workers())
            out.update({"conc": list(self.concs), "max-model-len": self.max_model_len})
        else:
            out.update(self._single_topology())
            out.update({"conc": self.conc, "max-model-len": self.max_model_len, "ep": self.ep, "dp-attn": self.dp_attn,
                        "spec-decoding": self.spec_decoding})
        out.update({"exp-name": self.exp_name, "disagg": self.disagg})
        if self.run_eval is not None:  # InferenceX writes a fixed row's run-eval right after disagg
            out["run-eval"] = self.run_eval
        self._tail(out)
        return out

    def _agentic_entry(self) -> dict[str, Any]:
        out = self._head()
        if self.multinode:
            out["spec-decoding"] = self.spec_decoding
            out.update(self._workers())
            out["conc"] = list(self.concs)
        else:
            out.update(self._single_topology())
            out.update({"ep": self.ep, "dp-attn": self.dp_attn, "spec-decoding": self.spec_decoding, "conc": self.conc})
        out.update({"kv-offloading": self.kv_offloading, "total-cpu-dram-gb": self.total_cpu_dram_gb,
                    "duration": self.duration, "exp-name": self.exp_name})
        if self.multinode:
            out["disagg"] = self.disagg
        out["scenario-type"] = ScenarioId.AGENTIC_CODING.value
        if self.kv_offload_backend is not None:
            out["kv-offload-backend"] = self.kv_offload_backend.model_dump(by_alias=True, exclude_none=True)
        self._tail(out)
        return out

    def _tail(self, out: dict[str, Any]) -> None:
        if self.router is not None:
            out["router"] = self.router.model_dump(by_alias=True)
        if self.kv_p2p_transfer is not None:
            out["kv-p2p-transfer"] = self.kv_p2p_transfer
        for key, value in (("run-eval", self.run_eval), ("eval-conc", self.eval_conc),
                           ("eval-all-concs", self.eval_all_concs), ("eval-only", self.eval_only)):
            if value is not None and key not in out:
                out[key] = value

    def to_json(self) -> dict[str, Any]:
        """Full JSON form (matrix fields and extensions), the shape executors receive."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
