"""What the client talks to (`Endpoint`) and how it drives load (`RunOptions`): the validated envelope of a run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.errors import ConfigError

DURATION_REACHED = "duration reached"
"""A worker's stop reason once its profiling window has ended: it then drains what is in flight for the grace."""


def api_root(base_url: str) -> str:
    """The server's root: `base_url` without a trailing slash or `/v1` (the readiness routes hang off it)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def api_url(base_url: str, api: str) -> str:
    """The route a request of `api` goes to: the load's, and `client.probe`'s 1-token model check's."""
    return f"{api_root(base_url)}/v1/chat/completions" if api == "chat" else f"{api_root(base_url)}/v1/completions"


class Endpoint(BaseModel):
    """An OpenAI-compatible server. Some servers reject unknown fields with 422, hence the per-field switches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="Server base URL, e.g. http://127.0.0.1:8000 (no /v1 suffix needed).")
    model: str = Field(description="Model name sent in the request body (the served name).")
    api: Literal["chat", "completions"] = Field(default="chat", description="Which OpenAI route to stream from.")
    send_ignore_eos: bool = Field(default=True, description="Send `ignore_eos` (off for servers that reject it).")
    send_stream_options: bool = Field(
        default=True, description="Send `stream_options: {include_usage: true}` (off for servers that reject it)."
    )
    sends_done: bool | None = Field(
        default=None,
        description="Whether the server ends every stream with `data: [DONE]`: True makes a stream without it"
        " `truncated`; False (transformers serve) or None (not known) takes a chunk with a `finish_reason` or"
        " `[DONE]` as the end, and a stream with neither is `truncated`.",
    )
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers on every request.")
    metrics_url: str | None = Field(
        default=None, description="Prometheus endpoint; None = base URL + /metrics; '' disables scraping."
    )

    @property
    def root(self) -> str:
        return api_root(self.base_url)

    def url_for(self, api: str) -> str:
        return api_url(self.base_url, api)

    def resolved_metrics_url(self) -> str | None:
        if self.metrics_url == "":
            return None
        return self.metrics_url or f"{self.root}/metrics"


DEFAULT_STALL_TIMEOUT_S = 60.0
"""A server that sends nothing for this long is stalled: well below the 600-s request timeout, which a long answer
may legitimately need, so a hung server ends a run in a minute, not ten. It counts before the response headers and
between body reads; between the headers and the first body byte (a request queued for its prefill) only the request
timeout applies."""


WORKER_LANES = 256
"""Live lanes one event loop takes before the client suggests another worker process (`RunOptions.workers`)."""
WORKER_RATE = 200.0
"""Arrivals per second one event loop takes before the client suggests another worker process."""
RECORD_PROCESS_LANES = 128
"""Live lanes per worker from which parsing moves to a helper process (`RunOptions.record_process`)."""
RECORD_PROCESS_RATE = 100.0
"""Arrivals per second per worker from which parsing moves to a helper process."""


class RunOptions(BaseModel):
    """How to drive the load. Closed loop when `concurrency` is set, open loop when `request_rate` is set (or the
    workload brings its own timed arrivals)."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int | None = Field(default=None, ge=1, description="Closed loop: live session trees (lanes).")
    request_rate: float | None = Field(default=None, gt=0, description="Open loop: session arrivals per second.")
    arrival: Literal["poisson", "constant"] = Field(default="poisson", description="Open-loop arrival process.")
    num_requests: int | None = Field(
        default=None, ge=1, description="Stop starting profiling requests after this many (fixed: --num-prompts)."
    )
    duration_s: float | None = Field(
        default=None, gt=0, description="Profiling window in seconds, counted from the first profiling request."
    )
    grace_s: float = Field(
        default=30.0, ge=0, description="After the deadline, let in-flight requests finish this long."
    )
    warmup_requests: int = Field(
        default=0, ge=0, description="Requests sent first, closed loop, marked warmup and excluded from metrics."
    )
    timeout_s: float = Field(default=600.0, gt=0, description="Whole-request timeout.")
    stall_timeout_s: float = Field(
        default=DEFAULT_STALL_TIMEOUT_S, gt=0,
        description="No bytes for this long ends the request as a timeout (capped at the request timeout).",
    )
    max_failure_ratio: float = Field(
        default=0.05, ge=0, le=1, description="Live failed/finished ratio that stops the run early and fails the gate."
    )
    failure_floor: int = Field(
        default=10, ge=1,
        description="Finished requests needed before the live failure ratio may stop the run (at least the"
        " concurrency: see `stop_floor`).",
    )
    workers: int | None = Field(
        default=None, ge=1,
        description="Client worker processes sharing the lanes; None = chosen from the planned load and the host's"
        f" cores (one event loop per {WORKER_LANES} lanes or {WORKER_RATE:g} arrivals/s, a core left free; one on 2"
        " cores, where more measured worse).",
    )
    seed: int = Field(default=42, description="Seed for arrival processes (workloads carry their own).")
    gpus: int = Field(default=1, ge=1, description="GPUs serving the endpoint, for per-GPU throughput.")
    scrape_interval_s: float = Field(default=1 / 3, gt=0, description="Prometheus scrape period.")
    require_metrics_prefix: str | None = Field(
        default=None, description="Validity fails unless a scraped server metric name starts with this prefix."
    )
    context_overflow_patterns: tuple[str, ...] = Field(
        default=(
            "maximum context length",
            "context length",
            "context_length_exceeded",
            "too many tokens",
            "prompt is too long",
            "exceeds the model",
            "should not exceed max_num_tokens",
        ),
        description="Case-insensitive substrings of an error body that mean the prompt did not fit.",
    )
    system_idle_gap_cap_s: float | None = Field(
        default=None, gt=0,
        description="When nothing is in flight, no idle gap lasts longer than this (AgentX: 10 s); None = the"
        " workload's own `config.system_idle_gap_cap_s` if it has one.",
    )
    parse_inline: bool = Field(
        default=False,
        description="Parse each stream before the lane continues (programs then see output text and token counts);"
        " off by default so parsing never delays sends and time stamps.",
    )
    stamp_reads: Literal["kernel", "protocol", "task"] = Field(
        default="kernel",
        description="How network reads are time-stamped: 'kernel' with the kernel's receive time of the read (Linux,"
        " plain TCP: immune to a busy event loop and to the scheduler), else as 'protocol'; 'protocol' in the"
        " connection's read callback, before any parsing or task switch; 'task' when the request's task resumes after"
        " each read (the earliest path, kept to measure the difference). run.json counts the reads each clock stamped.",
    )
    split_first_events: bool = Field(
        default=True,
        description="With kernel stamps, until a response's body begins each SSE event is received as a read of its"
        " own and the response head is acknowledged at once, so a first token keeps the receive time of its own"
        " packet even when the server's next chunk reached the socket before the event loop read it.",
    )
    read_first_tokens_first: bool = Field(
        default=True,
        description="Each event-loop iteration reads the sockets still waiting for their first body byte before the"
        " others, so a first token is read before the server's next chunk joins it (and moves its stamp).",
    )
    loop_budget_s: float | None = Field(
        default=0.002, gt=0,
        description="Client work (starting requests, parsing finished ones) takes turns so the event loop reads the"
        " network at least about this often; reads are stamped on time when a closed loop's lanes all finish and send"
        " together. None = no turns.",
    )
    record_process: bool | None = Field(
        default=None,
        description="Parse finished streams and write their records in a helper process, off the event loop that"
        " stamps reads (a third of that loop's work at high concurrency). None = when the planned load is high:"
        f" {RECORD_PROCESS_LANES} or more live lanes, or {RECORD_PROCESS_RATE:g} or more arrivals per second, per"
        " worker."
        " Programs that read their output (parse_inline) are parsed in the loop either way.",
    )
    saturation_cpu_ratio: float = Field(
        default=0.9, gt=0, description="Worker CPU share that flags a saturated client."
    )
    saturation_lag_p99_s: float = Field(default=0.05, gt=0, description="p99 schedule lag that flags saturation.")

    @property
    def stop_floor(self) -> int:
        """Finished profiling requests before the live failure ratio may stop the run: `failure_floor`, and at least
        the concurrency (AgentX's grace: max(concurrency, 10)), so the instant failures that finish first at high
        concurrency (a few oversized prompts overflowing the context) cannot end an hour's run on their own."""
        return max(self.failure_floor, self.concurrency or 0)

    @model_validator(mode="after")
    def _one_mode(self) -> RunOptions:
        if self.concurrency is not None and self.request_rate is not None:
            raise ConfigError(
                "run options set both concurrency and request_rate",
                fix="choose closed loop (--concurrency) or open loop (--request-rate), not both",
            )
        return self

    @property
    def records_off_loop(self) -> bool:
        """Whether finished streams go to a record helper process (`record_process`, resolved for the planned load)."""
        if self.record_process is not None:
            return self.record_process
        workers = self.workers or 1
        lanes = (self.concurrency or 0) / workers
        rate = (self.request_rate or 0.0) / workers
        return lanes >= RECORD_PROCESS_LANES or rate >= RECORD_PROCESS_RATE

    @property
    def stall_s(self) -> float:
        return min(self.stall_timeout_s, self.timeout_s)
