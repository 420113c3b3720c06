"""The v1 "Weka" trace schema, exactly as AgentX's `proxy_to_weka` writes it (research/agentx-spec §2.3–2.5).

One trace is one recorded agent session: `requests[]` holds, in chronological order of first appearance, top-level
requests (`type` "n"/"s") and subagent entries (`type` "subagent") whose inner `requests[]` are that subagent's
own calls. Inner `t` values are absolute (seconds since the session's first row), like the SemiAnalysis corpora.

These models read *external* data, so unknown fields are ignored rather than rejected (`extra="ignore"`): a newer
corpus that adds a field must still load. A number is a JSON number (`JsonNumber`: `true` or `"5"` is refused with its
trace, as a NaN is). Field names follow the format (`in` is aliased to `in_tokens`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from llmsweep.workload.blocks import BlockId, JsonNumber

_TRACE_DATA = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)
"""NaN and infinities are refused (JSON's `NaN`/`Infinity`, which Python writes): an infinite start or duration
became a replay sleep that never ends (the virtual-time run spun at full CPU forever), a NaN one a silent 0 s."""

Count = Annotated[int, JsonNumber]
Seconds = Annotated[float, JsonNumber]
Millis = Annotated[float, JsonNumber]

MAX_REQUEST_TOKENS = 1 << 24
"""Most input or output tokens one recorded request may hold (16.8 M: beyond any model's context). A larger count is
a damaged row; replayed live, the client would build that much prompt text before any server could refuse it."""


class TraceRequest(BaseModel):
    """One model call: a top-level turn, or an inner request of a subagent."""

    model_config = _TRACE_DATA

    type: Literal["n", "s"] = Field(default="n", description="Recorded transport: n non-streaming, s streaming.")
    t: Seconds = Field(ge=0.0, description="Start, seconds since the session's first row (so never negative).")
    model: str = ""
    in_tokens: Count = Field(alias="in", ge=0, le=MAX_REQUEST_TOKENS,
                             description="Input tokens (the hashed prompt span).")
    out: Count = Field(ge=0, le=MAX_REQUEST_TOKENS, description="Output tokens; becomes max_tokens at replay.")
    hash_ids: list[BlockId] = Field(default_factory=list,
                                    description="Prefix-block ids (one per block_size tokens), 0 to 2^63 - 1.")
    api_time: Seconds = Field(default=0.0, ge=0.0, description="Recorded server duration in seconds.")
    think_time: Seconds | None = Field(default=None, description="Gap from the previous row's end (all streams).")
    ttft: Seconds | None = None
    input_types: list[str] | None = None
    output_types: list[str] | None = None
    stop: Any = None
    output_length: Count | None = None

    @property
    def end(self) -> float:
        return self.t + self.api_time


class SubagentEntry(BaseModel):
    """A subagent's whole stream, emitted where its first request appeared in the session."""

    model_config = _TRACE_DATA

    type: Literal["subagent"] = "subagent"
    t: Seconds = Field(ge=0.0, description="Start of the first inner request (absolute: never negative).")
    agent_id: str
    subagent_type: str = ""
    duration_ms: Millis | None = Field(default=None, ge=0.0, description="First inner start → last inner end.")
    total_tokens: Count | None = None
    tool_use_count: Count | None = None
    status: str = "completed"
    models: list[str] = Field(default_factory=list)
    requests: list[TraceRequest] = Field(default_factory=list)

    @property
    def end(self) -> float:
        """Recorded end: from `duration_ms` when present, else the last inner request's end."""
        if self.duration_ms is not None:
            return self.t + self.duration_ms / 1000.0
        return max((r.end for r in self.requests), default=self.t)


def _entry_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "subagent" if kind == "subagent" else "request"


TraceEntry = Annotated[
    Annotated[TraceRequest, Tag("request")] | Annotated[SubagentEntry, Tag("subagent")],
    Discriminator(_entry_kind),
]


class Trace(BaseModel):
    """One session: the unit a lane replays."""

    model_config = _TRACE_DATA

    id: str
    models: list[str] = Field(default_factory=list)
    block_size: Count = Field(default=64, ge=1)
    hash_id_scope: str = "local"
    tool_tokens: Count = 0
    system_tokens: Count = 0
    requests: list[TraceEntry] = Field(default_factory=list)

    @property
    def main_requests(self) -> list[TraceRequest]:
        return [r for r in self.requests if isinstance(r, TraceRequest)]

    @property
    def subagents(self) -> list[SubagentEntry]:
        return [r for r in self.requests if isinstance(r, SubagentEntry)]

    def all_requests(self) -> list[TraceRequest]:
        """Every model call in file order (main turns and each subagent's inners where the subagent appears)."""
        out: list[TraceRequest] = []
        for entry in self.requests:
            if isinstance(entry, SubagentEntry):
                out.extend(entry.requests)
            else:
                out.append(entry)
        return out

    def to_json_line(self) -> str:
        """The compact one-line form of `traces.jsonl` (aliases, no nulls)."""
        return self.model_dump_json(by_alias=True, exclude_none=True)


@dataclass(frozen=True, eq=False)
class Corpus:
    """Traces read (`loader.load_corpus`) or made (`synth.synthetic_corpus`) once per process and shared, read-only,
    by every workload that replays them (a sweep's points), with `memo`: what is derived from the traces alone (the
    replay's plans and digest), kept exactly as long as the traces are."""

    traces: tuple[Trace, ...]
    memo: dict[Hashable, Any] = field(default_factory=dict)
