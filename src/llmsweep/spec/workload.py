"""`workload`: what the client sends, with InferenceX's defaults when a recipe says nothing.

InferenceX spreads these across workflow inputs, bash defaults and AIPerf flags (random-range-ratio 0.8, 10×conc
prompts, duration 3600 s, the trace corpus picked from the model prefix). Here they are one typed block; the plan
resolves the defaults per job so every job states the exact workload it will run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from llmsweep.spec.components import ScenarioId as ScenarioId  # (its home is below every recipe model; named here too)
from llmsweep.spec.components import StrictInput
from llmsweep.spec.rule_error import rule_error
from llmsweep.spec.serve import check_argv_value

DEFAULT_AGENTIC_DURATION_SECONDS = 3600
DEFAULT_WARMUP_PER_LANE = 10
DEFAULT_RANGE_RATIO = 0.8
DEFAULT_PROMPTS_PER_CONC = 10
DEFAULT_WARMUPS_PER_CONC = 2

MILLION_CONTEXT_FAMILIES: tuple[str, ...] = ("dsv4", "glm5.2", "minimaxm3", "kimik3")
"""Model prefixes whose default corpus is the unfiltered 1M-context one (AgentX `resolve_trace_source`)."""

DEFAULT_CORPUS = "semianalysis_cc_traces_weka_062126"
DEFAULT_CORPUS_256K = "semianalysis_cc_traces_weka_062126_256k"

_DATED = ("060226", "060526", "060826")
AGENTX_LOADERS: dict[str, str] = {
    "semianalysis_cc_traces_weka_with_subagents": "semianalysisai/cc-traces-weka-061526",
    "semianalysis_cc_traces_weka_with_subagents_256k": "semianalysisai/cc-traces-weka-061526-256k",
    **{f"semianalysis_cc_traces_weka_with_subagents_{d}": f"semianalysisai/cc-traces-weka-with-subagents-{d}"
       for d in _DATED},
    **{f"semianalysis_cc_traces_weka_with_subagents_{d}_256k":
       f"semianalysisai/cc-traces-weka-with-subagents-{d}-256k" for d in _DATED},
    **{f"semianalysis_cc_traces_weka_{d}": f"semianalysisai/cc-traces-weka-{d}"
       for d in ("061326", "061526", "062126")},
    **{f"semianalysis_cc_traces_weka_{d}_256k": f"semianalysisai/cc-traces-weka-{d}-256k"
       for d in ("061326", "061526", "062126")},
    **{f"semianalysis_cc_traces_weka{legacy}": "semianalysisai/cc-traces-weka-no-subagents-051826"
       for legacy in ("", "_no_subagents")},
}
"""AgentX/AIPerf `--public-dataset` loader ids → Hugging Face datasets (research/agentx-spec §1.5)."""
CORPUS_DATASETS: dict[str, str] = {loader: AGENTX_LOADERS[loader] for loader in (DEFAULT_CORPUS, DEFAULT_CORPUS_256K)}
"""The default corpora's datasets (`default_corpus`): what `AGENTX_LOADERS` resolves their loader ids to."""


CUT_256K_TOKENS = 256_000
"""The 256k corpora keep a request only when its in + out is at most this (research/agentx-spec: the 256k variant)."""


def default_corpus(model_prefix: str) -> str:
    """The AgentX loader id InferenceX picks for a model prefix."""
    return DEFAULT_CORPUS if model_prefix.startswith(MILLION_CONTEXT_FAMILIES) else DEFAULT_CORPUS_256K


MAX_REQUESTS = 16_777_216
"""Most requests a fixed-length count (`num-prompts`, `num-prompts-per-conc`, `num-warmups`) may ask for: a typo
guard far above any sweep (InferenceX sends 10 per unit of concurrency). `num-warmups: 99999999999999999999` was an
`OverflowError` in every job of the run."""

SYNTH_MIN_ISL = 2048
"""Smallest `max-isl` the synthetic corpus generator scales its token counts to (`workload.traces.synth`)."""

MAX_SYNTHETIC_TRACES = 1024
"""Most traces `traces.synthetic.traces` may generate: a typo guard above any real corpus (AgentX's canonical
062126 corpus has 393 traces and InferenceX loads all 393, `--num-dataset-entries 393`; 061326 had 183; the default
here is 64). Every process that replays or predicts the corpus builds it whole: measured 2026-12-05 (`predict`, one
conc-1 point), 0.29 MB and 4.4 ms per trace at `max-isl: 4000`, 1.2 MB and 7.3 ms at 256k, 3.9 MB and 13 ms uncapped
(2,000 uncapped traces: 7.9 GB resident). 1,024 traces take 0.3-4 GB a process; 10,240 (one zero too many) would
take 3-40 GB."""
MAX_DURATION_S = 14_400
"""Longest `duration` (s) a recipe may give one point's profiling window: 4 h, four times InferenceX's 3,600 s (its
fast mode 1,200 s; AgentX's minimum 900 s, default 1,800 s), so 36,000 (one zero too many: 10 h of GPUs per point)
is refused before anything runs."""


class SyntheticTraces(StrictInput):
    """Generate agentic traces locally (deterministic for a seed) instead of reading a corpus."""

    traces: int = Field(default=64, gt=0, json_schema_extra={"maximum": MAX_SYNTHETIC_TRACES},
                        description=f"Number of session traces to generate (at most {MAX_SYNTHETIC_TRACES:,} in a "
                        "recipe).")
    seed: int = Field(default=0, description="Generator seed.")
    max_isl: int | None = Field(default=None, ge=SYNTH_MIN_ISL, alias="max-isl",
                                description=f"Cap on any request's input tokens (at least {SYNTH_MIN_ISL}).")
    max_osl: int | None = Field(default=None, gt=0, alias="max-osl", description="Cap on any request's output tokens.")
    max_turns: int | None = Field(default=None, gt=0, alias="max-turns", description="Cap on turns per session.")
    subagents: bool = Field(default=True, description="Whether sessions spawn subagent streams.")


class TraceSource(StrictInput):
    """Exactly one of a Hugging Face dataset, a local file/dir, or synthetic traces."""

    hf: str | None = Field(default=None, min_length=1, description="Hugging Face dataset id or AgentX loader id.")
    path: str | None = Field(default=None, min_length=1, description="Local trace file or directory.")
    synthetic: SyntheticTraces | None = Field(default=None, description="Generate traces locally.")
    revision: str | None = Field(
        default=None, min_length=1,
        description="Revision of the `hf` dataset (a commit, branch or tag; default its latest). A run resolves it "
        "once, before any server starts, to the commit every point (and a `--resume`) replays, and records that "
        "commit here.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> TraceSource:
        given = [name for name in ("hf", "path", "synthetic") if getattr(self, name) is not None]
        if len(given) != 1:
            raise rule_error(
                "trace-source",
                f"`traces` must name exactly one of hf, path, synthetic (got {', '.join(given) or 'none'})",
                field=given[1] if len(given) > 1 else None,
                fix="keep one of `hf: <dataset>`, `path: <file or dir>`, `synthetic: {...}`",
            )
        if self.revision is not None and self.hf is None:
            raise rule_error("trace-source", f"`traces.revision` is a Hugging Face dataset's, and `traces` names "
                             f"{given[0]}", field="revision", fix="drop `revision`, or name the dataset with `hf:`")
        return self

    @property
    def kind(self) -> Literal["hf", "path", "synthetic"]:
        return "hf" if self.hf is not None else "path" if self.path is not None else "synthetic"


class ReplayTrace(StrictInput):
    """Replay a Mooncake-format trace (JSONL rows of timestamp, input/output length and hash ids) instead of the
    agentic corpus: the recipe's agentic-coding entries become `mooncake-replay` jobs."""

    mooncake: str = Field(min_length=1, description="Mooncake JSONL file (a path, as `traces.path`).")
    timestamps: bool = Field(
        default=False,
        description="Send each row at its timestamp (open loop; the job's concurrency is not used). Default: closed "
        "loop, `conc` rows in flight, every row once.",
    )
    speedup: float = Field(default=1.0, gt=0, description="With `timestamps`: divide every timestamp by this.")
    block_size: int = Field(default=512, ge=1, alias="block-size", description="Tokens per hash id (Mooncake: 512).")
    max_rows: int | None = Field(default=None, ge=1, alias="max-rows", description="Replay only the first rows.")


class WorkloadSpec(StrictInput):
    """The `workload` block of a recipe; every field optional."""

    traces: TraceSource | None = Field(default=None, description="Agentic trace corpus (default: per model family).")
    replay: ReplayTrace | None = Field(
        default=None, description="Replay a Mooncake trace in the agentic-coding entries instead of the corpus."
    )
    duration: int | None = Field(
        default=None, gt=0, json_schema_extra={"maximum": MAX_DURATION_S},
        description=f"Agentic profiling window in seconds (default 3600, at most {MAX_DURATION_S:,}); with `replay`, a "
        "cap (default: every row).",
    )
    warmup_per_lane: int | None = Field(
        default=None, ge=0, alias="warmup-per-lane", description="Agentic warmup requests per lane (default 10)."
    )
    num_prompts: int | None = Field(default=None, gt=0, le=MAX_REQUESTS, alias="num-prompts",
                                    description="Fixed-length prompt count.")
    num_prompts_per_conc: int | None = Field(
        default=None, gt=0, le=MAX_REQUESTS, alias="num-prompts-per-conc",
        description="Fixed-length prompts per unit of conc (default 10).",
    )
    range_ratio: float | None = Field(
        default=None, gt=0, le=1, alias="range-ratio", description="Random ISL/OSL range ratio (default 0.8)."
    )
    num_warmups: int | None = Field(
        default=None, ge=0, le=MAX_REQUESTS, alias="num-warmups",
        description="Fixed-length warmup requests (default 2×conc)."
    )
    tokenizer: str | None = Field(default=None, min_length=1, description="Tokenizer id/path (default: `model`).")
    served_model_name: str | None = Field(
        default=None, min_length=1, alias="served-model-name", description="Model name on the wire (default: `model`)."
    )
    use_chat_template: bool | None = Field(
        default=None,
        alias="use-chat-template",
        description="Wrap prompts in the chat template (fixed-length default: on when spec-decoding is on).",
    )
    seed: int | None = Field(default=None, description="Client random seed (default 42, as AgentX).")

    @field_validator("served_model_name", mode="after")
    @classmethod
    def _served_name_not_a_flag(cls, value: str | None) -> str | None:
        return value if value is None else check_argv_value(value)

    @field_validator("duration", mode="after")
    @classmethod
    def _duration_bounded(cls, value: int | None) -> int | None:
        if value is not None and value > MAX_DURATION_S:
            raise rule_error(
                "range",
                f"`duration: {value}` is {value / 3600:.1f} h per point, above the limit of {MAX_DURATION_S:,} s "
                f"({MAX_DURATION_S // 3600} h): every point of the sweep would hold its GPUs that long (InferenceX "
                f"runs 3,600 s, AgentX's minimum is 900 s)",
                fix=f"use at most {MAX_DURATION_S:,} (a zero too many? InferenceX's window is `duration: 3600`)",
            )
        return value

    @field_validator("traces", mode="after")
    @classmethod
    def _synthetic_traces_bounded(cls, value: TraceSource | None) -> TraceSource | None:
        """On the recipe's block only: a job.json written with more traces still reads."""
        count = value.synthetic.traces if value is not None and value.synthetic is not None else 0
        if count > MAX_SYNTHETIC_TRACES:
            raise rule_error(
                "range",
                f"`traces: {count}` asks for {count:,} synthetic traces, above the limit of "
                f"{MAX_SYNTHETIC_TRACES:,}: every process that replays or predicts the corpus builds it whole, about "
                f"0.3-3.9 MB and 4-13 ms a trace (more with a longer `max-isl`; AgentX's corpus has 393 traces)",
                field="synthetic.traces",
                fix=f"use at most {MAX_SYNTHETIC_TRACES:,} (a zero too many? the default is 64); for a larger corpus, "
                "write it once with `llmsweep traces synth --num-traces N --out traces.jsonl` and name it in "
                "`traces.path`",
            )
        return value

    @model_validator(mode="after")
    def _one_prompt_count(self) -> WorkloadSpec:
        if self.num_prompts is not None and self.num_prompts_per_conc is not None:
            raise rule_error(
                "num-prompts",
                "set either `num-prompts` or `num-prompts-per-conc`, not both",
                field="num-prompts-per-conc",
                fix="delete one of them",
            )
        if self.traces is not None and self.replay is not None:
            raise rule_error(
                "replay",
                "set either `traces` (the agentic corpus) or `replay` (a Mooncake trace), not both",
                field="replay",
                fix="delete one of them",
            )
        return self


class ResolvedWorkload(StrictInput):
    """The workload of one job after defaults: every field the client needs is set for the job's scenario."""

    # Not strict: job.json spells the scenario as its string, and a closed enum coerces nothing else.
    scenario: ScenarioId = Field(strict=False)
    tokenizer: str
    served_model_name: str = Field(alias="served-model-name")
    use_chat_template: bool = Field(alias="use-chat-template")
    seed: int = 42
    # fixed-seq-len
    isl: int | None = None
    osl: int | None = None
    num_prompts: int | None = Field(default=None, alias="num-prompts")
    num_prompts_per_conc: int | None = Field(
        default=None, alias="num-prompts-per-conc",
        description="Prompts per unit of conc when num-prompts is not fixed.",
    )
    range_ratio: float | None = Field(default=None, alias="range-ratio")
    num_warmups: int | None = Field(default=None, alias="num-warmups")
    # agentic-coding
    traces: TraceSource | None = None
    duration: int | None = None
    warmup_per_lane: int | None = Field(default=None, alias="warmup-per-lane")
    # mooncake-replay (duration: an optional cap)
    replay: ReplayTrace | None = None

    def keyed(self) -> dict[str, Any]:
        """The workload as the identities of what a job sends key it — a reuse key's `workload` part
        (`changes.reuse.reuse_doc`), the point a repeat draws its sample for (`workload.scenario.workload_point`):
        every field as JSON but a hub corpus's pinned revision (`traces.revision`: `run` pins it per run; what the
        corpus holds is keyed by the digest of what a run replayed, and keys recorded before revisions were pinned
        stay as they were)."""
        return self.model_dump(mode="json", exclude={"traces": {"revision"}})
