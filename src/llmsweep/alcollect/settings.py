"""What a golden-AL collection measures and what it found: the typed settings and results (`llmsweep al collect`'s
options come from these fields), kept apart from the collector so the CLI imports no engine or client to build them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llmsweep.catalog.golden import ThinkingMode

DEFAULT_KWARGS: dict[ThinkingMode, dict[str, Any]] = {"thinking_on": {"enable_thinking": True},
                                                      "thinking_off": {"enable_thinking": False}}
"""chat_template_kwargs per thinking mode unless told otherwise: Qwen's (and GLM's) switch, on and off, as InferenceX's
curves send it. Off is said, not left out: those templates think by default, so sending nothing measures thinking."""


class Sampling(BaseModel):
    """Sampling of every request of one thinking mode; a key that is None is not sent (the server's default: vLLM
    reads the model's generation_config). Where no golden curve speaks for the mode, MiniMax-M3's curve's (temperature
    1.0, top_p 0.95, top_k 40) are sent. Curves state their own per thinking mode (`llmsweep al` shows them; Qwen3.5:
    0.6/0.95/20 thinking on, 0.7/0.8/20 + presence penalty 1.5 off; DSv4 only its temperature 1.0), and a collection
    must match the curve it is to stand in for (`catalog.golden.sampling_differences`): `al collect` defaults each
    mode to it (`alcollect.modes`), sending no key the curve leaves unstated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: Annotated[float, Field(ge=0.0)] | None = Field(default=1.0, description="Sampling temperature.")
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = Field(default=0.95, description="Nucleus sampling mass.")
    top_k: Annotated[int, Field(ge=-1)] | None = Field(default=40, description="Top-k cut (-1: none).")
    presence_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = Field(
        default=None, description="Presence penalty (Qwen3.5's thinking-off curve: 1.5).")

    def params(self) -> dict[str, float | int]:
        """What every request sends and the curve header states: the keys that are set (None: left to the server)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class CollectSettings(BaseModel):
    """What one collection measures and how patient it is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ks: list[int] = Field(min_length=1, description="Draft lengths K (vLLM num_speculative_tokens), one cell each.")
    thinking: list[ThinkingMode] = Field(min_length=1, description="Thinking modes, one cell per K each.")
    chat_template_kwargs: dict[ThinkingMode, dict[str, Any]] = Field(
        default_factory=lambda: dict(DEFAULT_KWARGS),
        description="chat_template_kwargs sent per thinking mode (recorded in the curve header).",
    )
    sampling: dict[ThinkingMode, Sampling] = Field(
        default_factory=dict, description="Sampling per thinking mode (recorded per mode in the curve header); a mode "
        "not named samples with Sampling's defaults, and one Sampling given for all applies to every mode.")
    output_len: int = Field(default=4096, ge=1, description="max_tokens of every request (InferenceX: 4096).")
    startup_timeout_s: float | None = Field(default=None, gt=0, description="Readiness deadline per server.")
    request_timeout_s: float = Field(default=900.0, gt=0, description="Whole-request timeout.")
    stop_grace_s: float = Field(default=15.0, ge=0, description="SIGTERM → SIGKILL grace when stopping a server.")
    checkpoint: str | None = Field(default=None, description="The curve's model key; default: the served model.")
    precision: str | None = Field(default=None, description="Served precision; default: read from the model dir.")
    notes: list[str] = Field(default_factory=list, description="Extra `note:` lines for the curve header.")

    @field_validator("ks")
    @classmethod
    def _positive(cls, ks: list[int]) -> list[int]:
        if any(k < 1 for k in ks):
            raise ValueError("every K must be >= 1")
        return sorted(set(ks))

    @model_validator(mode="before")
    @classmethod
    def _one_sampling_for_all(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("sampling"), Sampling):
            return {**data, "sampling": {m: data["sampling"] for m in data.get("thinking") or ()}}
        return data

    def sampling_of(self, mode: ThinkingMode) -> Sampling:
        """What `mode`'s requests send (Sampling's defaults where the settings name none for it)."""
        return self.sampling[mode] if mode in self.sampling else Sampling()


class CellResult(BaseModel):
    """One (thinking, K) cell: the realised acceptance and what it rests on."""

    model_config = ConfigDict(extra="forbid")

    thinking: ThinkingMode
    k: int
    status: Literal["measured", "failed", "interrupted", "not run"] = Field(
        description="`interrupted`: a signal stopped the collection while the cell ran (its folder holds what it did); "
        "`not run`: a signal stopped it before the cell's server was started.")
    acceptance_length: float | None = None
    accepted_tokens: float | None = Field(default=None, description="Δ accepted draft tokens (None where the engine "
                                          "counts none: SGLang).")
    drafts: float | None = Field(default=None, description="Δ verification steps (vLLM's drafts, SGLang's verify "
                                 "calls).")
    method: str | None = Field(default=None, description="How the engine's metrics reader computed the AL.")
    requests_ok: int = 0
    requests_failed: int = 0
    output_tokens: int = 0
    draft_coverage: float | None = Field(
        default=None, description="Share of the output tokens that came from steps that drafted, (drafts + accepted) "
        "/ output tokens (at most 1): the AL, 1 + accepted / drafts, is that of those steps alone (an n-gram drafter "
        "drafts only where its pattern matches). None where the engine counts no accepted tokens (SGLang: it "
        "verifies every step).")
    engine_version: str | None = None
    simulated: bool = Field(default=False, description="The cell's server was llmsweep's simulator: its launch was "
                            "the simulator's, or its /version said so (a modelled AL, not a measurement).")
    gpu_names: list[str] | None = None
    seconds: float = 0.0
    directory: str | None = Field(description="The cell's evidence folder; None for a cell not run.")
    reason: str | None = None
    launched: bool = Field(default=False, description="A server was launched for the cell (whether it became "
                           "ready or not): what its engine version, or the lack of one, is said of.")

    @property
    def said(self) -> str:
        """The status as a table says it: a cell the simulator served is `simulated` (its AL is modelled, not
        measured; `status` stays `measured`, the cell's figures were read as a measured cell's are)."""
        return "simulated" if self.simulated and self.status == "measured" else self.status


class Replacement(BaseModel):
    """A cell of the curve merged into (`--merge-into`) that this collection measured again and replaced."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    thinking: ThinkingMode
    k: int
    old: float = Field(description="The curve's AL before the merge.")
    new: float = Field(description="This collection's AL, now in the curve.")
    old_collection: str = Field(description="The collection the old value came from, as the curve's source names it.")


class CollectResult(BaseModel):
    """A whole collection: the curve file written (None when no cell was measured) and every cell."""

    model_config = ConfigDict(extra="forbid")

    curve_file: str | None
    curve_id: str
    model_prefix: str
    method: str
    checkpoint: str
    dataset: str
    engine: str
    simulated: bool
    cells: list[CellResult]
    merged_into: str | None = Field(default=None, description="The existing curve the cells were merged into "
                                    "(`--merge-into`); curve_file is then that file, holding the union.")
    replaced: list[Replacement] = Field(default_factory=list, description="Its cells this collection measured again.")

    @property
    def ok(self) -> bool:
        """Every cell measured (a collection of no cell measured nothing: not a success)."""
        return bool(self.cells) and all(c.status == "measured" for c in self.cells)

