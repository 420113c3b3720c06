"""The typed, versioned `Summary`: what `summary.json` holds, and the one object every reader takes.

`metrics.summarise` builds it; `Summary.load` reads a `summary.json` of any schema version this llmsweep knows
(older versions are upgraded on read); `Summary.dump` gives the JSON document (`model_dump(mode="json")`). Its JSON
Schema (`llmsweep schema summary`) is the contract documented in `docs/contracts.md`.

Versioning rule: `SCHEMA_VERSION` goes up when a key is renamed or removed, changes meaning or unit, or a block every
reader needs is added; `Summary.from_doc` upgrades every older version it knows. A new *optional* block (eval, power,
roles, the next feature's) is added as a field defaulting to None and does not bump the version. A field left unset
whose value is None is not written, so a summary without a block keeps the shape it had before the block existed.

Units: latencies and durations in seconds, token counts in tokens, throughput in tokens/s (per GPU where named),
interactivity in tokens/s/user, rates as 0-1 ratios; `units` names the unit of every registered metric.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from llmsweep import atomic
from llmsweep.errors import ResultInputError
from llmsweep.jsonline import load_json_file
from llmsweep.metrics.gates import GateConfig
from llmsweep.words import count_of, noun

SCHEMA_VERSION = 2
"""1: the untyped dict of llmsweep ≤ 0.x (same keys); 2: the typed model (unset empty blocks are left out)."""
KNOWN_VERSIONS = (1, 2)
REQUIRED_BLOCKS = ("requests", "validity", "provenance", "latency", "throughput")
"""Blocks every summary llmsweep writes has (every version): one without them would read as an empty, unjudged job,
or one whose figures are defaults (a `latency` deleted read as no latency at all, and `sim calibrate` fitted the point
on throughput alone)."""
WHOLE_BLOCKS = ("latency", "throughput")
"""Required blocks whose every figure every summary llmsweep writes has (every version; a figure of theirs is never
left out): one emptied, or without a figure, would read its figures as 0.0 — a valid point of no throughput —
so `Summary.from_doc` refuses it as it refuses a missing block. A figure added to them later defaults to None (the
versioning rule), and a None default is not required."""

Source = Literal["measured", "simulated", "predicted"]
RunSource = Literal["measured", "simulated"]
"""What served a run: a real engine (measured) or the simulator (simulated, live or in virtual time)."""
MEASURED: RunSource = "measured"
SIMULATED: RunSource = "simulated"
PREDICTED: Source = "predicted"
"""`llmsweep predict`: the simulator core in virtual time, no run (`sim.predict`)."""
SOURCES: tuple[Source, ...] = get_args(Source)
"""Every source label a result may carry."""
RUN_SOURCES: tuple[RunSource, ...] = get_args(RunSource)
"""The labels of what served a run (a prediction is no run)."""


def run_source(simulated: bool) -> RunSource:
    """The label a run's results carry for what served them (the one mapping: `run`'s groups, `bench`, reuse)."""
    return SIMULATED if simulated else MEASURED


Clock = Literal["virtual", "wall"]
"""The clock a run was timed on (`Provenance.clock`)."""
VIRTUAL: Clock = "virtual"
WALL: Clock = "wall"


CLOCK_WORDS: dict[str, str] = {VIRTUAL: "virtual time", WALL: "wall-clock time"}
"""How a clock is said beside a source (`run`'s table title, the report's header and summary.md)."""


def source_words(source: str, clock: str | None) -> str:
    """`simulated, virtual time`: what a result's figures are (its source and clock); the source alone when its
    clock was not recorded."""
    return f"{source}, {CLOCK_WORDS.get(clock, f'{clock} time')}" if clock else source


def run_clock(*, simulated: bool, live: bool) -> Clock:
    """The clock a run is timed on (the one mapping, beside `run_source`): the simulator's core in virtual time
    unless served `live` (`run --live`); a real engine always in wall-clock time."""
    return VIRTUAL if simulated and not live else WALL


Verdict = Literal["valid", "smoke", "invalid"]
DONE_VERDICTS: tuple[Verdict, ...] = ("valid", "smoke")
"""The verdicts of a finished job: `--resume` skips a job whose folder holds a summary with one of them."""
DONE_WORDS = " or ".join(DONE_VERDICTS)
"""`valid or smoke`: how the help, the refusals and the report say which summaries `--resume` keeps."""
SUCCESS_STATUSES = frozenset({*DONE_VERDICTS, "skipped"})
"""A job's outcome statuses that leave a result: a done verdict, or skipped for one (resumed or reused)."""


class _Block(BaseModel):
    """A block of the summary: strict keys, p99.9 spelled as in the file, unset Nones left out of the JSON."""

    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    @model_serializer(mode="wrap")
    def _drop_unset_none(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name, field in type(self).model_fields.items():
                key = field.alias or name
                if name not in self.model_fields_set and data.get(key, 0) is None:
                    del data[key]
        return data


class _Open(_Block):
    """A block whose shape varies by engine or feature: the keys readers use are typed, the rest kept as they came."""

    model_config = ConfigDict(extra="allow")


# ------------------------------------------------------------------------------------------------ statistics


class Stats(_Block):
    """count, mean, p50…p99.9, std, min, max of one per-request (or pooled) sample (`metrics.stats.stat_block`)."""

    count: int = 0
    mean: float = 0.0
    p50: float = 0.0
    p75: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    p99_9: float = Field(default=0.0, alias="p99.9")
    std: float = 0.0
    min: float = 0.0
    max: float = 0.0

    def stat(self, name: str) -> float | None:
        """A statistic by its stored key (`p50`, `p99.9`, `mean`, …); None without a sample (every request failed:
        no figure, where the block's fields read 0.0)."""
        return float(getattr(self, _STAT_ATTR.get(name, name))) if self.count else None


class InvertedStats(_Block):
    """Slow-tail inversion of a per-token time: pXX = 1/pXX(time), mean = 1/mean(time), std = pstdev(1/time)."""

    count: int = 0
    mean: float = 0.0
    p50: float = 0.0
    p75: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    p99_9: float = Field(default=0.0, alias="p99.9")
    std: float = 0.0

    def stat(self, name: str) -> float | None:
        """As :meth:`Stats.stat`: None without a sample."""
        return float(getattr(self, _STAT_ATTR.get(name, name))) if self.count else None


_STAT_ATTR = {"p99.9": "p99_9", "median": "p50"}


class Qps(_Block):
    """Completions per 1-s window from the first completion; statistics absent with fewer than two completions."""

    window_seconds: int = 1
    samples: int = 0
    mean: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p99_9: float | None = Field(default=None, alias="p99.9")
    std: float | None = None
    min: float | None = None
    max: float | None = None


# ------------------------------------------------------------------------------------------------ client-side blocks


class Requests(_Block):
    """Request accounting: only successful profiling requests feed the statistics; the rest are counted here."""

    total: int = 0
    successful: int = 0
    failed: int = 0
    cancelled: int = 0
    warmup: int = 0
    warmup_failed: int = Field(default=0, description="Warm-up requests that failed; one cancelled (a signal, the "
                               "run's stop) did not fail and is not counted.")
    warmup_cancelled: int = Field(default=0, description="Warm-up requests a stop cancelled: neither answered nor "
                                  "failed, so the warm-up gate judges the others.")
    context_overflow: int = 0
    error_categories: dict[str, int] = Field(default_factory=dict)
    error_ratio: float | None = Field(
        default=0.0,
        description="failed / (successful + failed); null when no profiling request finished (every one cancelled, or"
        " none sent): the ratio is undefined, not 0.",
    )
    output_length_mismatch: int = Field(default=0, description="Successful requests whose OSL differs from max_tokens.")
    short_outputs: int = Field(
        default=0,
        description="Successful requests that stopped before max_tokens on their own (finish_reason stop without"
        " ignore_eos, or length below it): whole answers, but shorter than the workload asked; a gate bounds them."
        " Whether ignore_eos was sent is `provenance.workload.ignore_eos` (false where the engine rejects the field:"
        " transformers serve; such a run needs a model whose EOS never wins to keep every answer full length).",
    )
    long_outputs: int | None = Field(
        default=None,
        description="Successful requests that brought more output than their max_tokens, by their chunks or by a"
        " usage count the client did not take for it (the record's `usage_over_max_tokens`): a server that ignores"
        " the limit or miscounts its tokens; the short-output gate's ratio bounds them too. Absent when there are"
        " none.",
    )
    unreadable: int = Field(
        default=0,
        description="Whole lines of records.jsonl that are not a JSON record (damaged after the client wrote them; a"
        " killed run's torn last line is not counted): requests the figures miss, so the point is invalid.",
    )
    implausible: int | None = Field(
        default=None,
        description="Profiling records whose times cannot be a request's (NaN or infinite, or out of order: the first"
        " token, last chunk or end before the send, the end before the first token): left out of every figure, so"
        " the point is invalid. Absent when there are none.",
    )

    @model_validator(mode="after")
    def _no_ratio_without_a_finished_request(self) -> Requests:
        """An error ratio over no finished request is undefined: None, also where a summary written before
        2026-12-05 says 0.0 for it (which read as "no errors" in every table)."""
        if self.successful + self.failed == 0:
            self.error_ratio = None
        return self


class Latency(_Block):
    """Latency statistics in seconds (TPOT: per-request mean gap after the first token; ITL: pooled chunk gaps)."""

    ttft: Stats = Field(default_factory=Stats)
    tpot: Stats = Field(default_factory=Stats)
    itl: Stats = Field(default_factory=Stats)
    e2el: Stats = Field(default_factory=Stats)


class Tokens(_Block):
    """Input and output tokens per successful profiling request, and their sums."""

    input: Stats = Field(default_factory=Stats)
    output: Stats = Field(default_factory=Stats)
    input_total: int = 0
    output_total: int = 0


class PerGpu(_Block):
    input_tps: float = 0.0
    output_tps: float = 0.0
    total_tps: float = 0.0


class Throughput(_Block):
    """Tokens (and requests) per second over (last end − first send) of the successful profiling requests."""

    duration_s: float = 0.0
    request_rps: float = 0.0
    input_tps: float = 0.0
    output_tps: float = 0.0
    total_tps: float = 0.0
    gpus: int = 1
    per_gpu: PerGpu = Field(default_factory=PerGpu)


class Cache(_Block):
    """Prefix-cache hit rates: what the workload makes reusable (theoretical) and what the server reported."""

    theoretical_hit_rate: float | None = None
    observed_hit_rate: float | None = None
    theoretical_cached_tokens: int = 0
    observed_cached_tokens: int = 0


class ScheduleLag(_Block):
    count: int = 0
    p50: float = 0.0
    p99: float = 0.0
    max: float = 0.0


class FdLimit(_Open):
    soft: int | None = None
    hard: int | None = None
    needed: int | None = None
    capped: bool | None = None


class ClientHealth(_Block):
    """Whether the client kept up: schedule lag from the records, worker CPU and connection waits from the run."""

    workers: list[dict[str, Any]] = Field(default_factory=list)
    cpu_s_total: float = 0.0
    cpu_us_per_output_token: float | None = None
    schedule_lag_s: ScheduleLag = Field(default_factory=ScheduleLag)
    connection_queue_wait_s: float = 0.0
    connect_s: float = 0.0
    connections_opened: int = 0
    requests_retried: int = 0
    """Requests sent again on a new connection because the server closed the pooled keep-alive connection of their
    first send before any byte of an answer (`RequestRecord.retried`): each is in the figures once, its TTFT from
    the first send."""
    max_inflight: int = 0
    fd_limit: FdLimit = Field(default_factory=FdLimit)
    stop_reason: str | None = None
    saturated: bool = False
    saturation_reasons: list[str] = Field(default_factory=list)


# ------------------------------------------------------------------------------------------------ server metrics


class Window(_Block):
    start: float | None = None
    end: float | None = None


class RequiredPrefix(_Block):
    prefix: str
    found: bool


class KvCache(_Open):
    gpu_usage_max: float | None = None
    gpu_usage_mean: float | None = None
    cpu_usage_max: float | None = None
    pool_tokens: float | None = Field(
        default=None, description="Tokens the deployment's GPU KV pool held, as its engines reported it (vLLM's "
        "`cache_config_info`, SGLang's `max_total_num_tokens`, summed over engines: DP ranks, disaggregated "
        "workers); the simulator reports its own the same way. Absent where the engine exports neither, and for "
        "an older vLLM's hybrid model (its blocks count the linear-attention pages too).")
    pool_engines: int | None = Field(
        default=None, description="How many engines' figures `pool_tokens` adds up (ranks of one engine count once).")


class ServerCache(_Open):
    gpu_hit_rate: float | None = None
    cpu_hit_rate: float | None = None
    overall_hit_rate: float | None = None


class ServerLatency(_Open):
    ttft_mean_s: float | None = None
    tpot_mean_s: float | None = None
    itl_mean_s: float | None = None
    e2el_mean_s: float | None = None
    requests: float | None = None


class ServerTokens(_Open):
    prompt_total: float | None = None
    generation_total: float | None = None
    requests_completed: float | None = None


class SpecDecode(_Open):
    """The realised speculative decoding, from the engine's counters over the window."""

    acceptance_length: float | None = None
    acceptance_rate: float | None = None
    accepted_tokens: float | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    verify_steps: float | None = None
    method: str | None = None


class ServerMetrics(_Open):
    """The engine's /metrics over the profiling window, read through an engine adapter (`metrics.server`)."""

    present: bool = False
    adapter: str | None = None
    scrapes: int = 0
    scrape_errors: int = 0
    metric_count: int = 0
    window: Window = Field(default_factory=Window)
    warnings: list[str] = Field(default_factory=list)
    required_prefix: RequiredPrefix | None = None
    queue: dict[str, Any] | None = None
    kv_cache: KvCache | None = None
    cache: ServerCache | None = None
    latency: ServerLatency | None = None
    tokens: ServerTokens | None = None
    spec_decode: SpecDecode | None = None
    preemptions: float | None = Field(default=None, description="Requests the engine preempted (vLLM) or retracted "
                                      "(SGLang) over the window: its KV cache ran out.")


# ------------------------------------------------------------------------------------------------ verdict


class CoverageDetail(_Block):
    """`gates.window_coverage`'s figures; times are offsets from the window start, in seconds."""

    coverage: float = 1.0
    window_s: float = 0.0
    uncovered_s: float = 0.0
    idle_allowance_s: float | None = None
    longest_idle_s: float = 0.0
    longest_idle_from_s: float = 0.0
    longest_idle_to_s: float = 0.0
    uncovered_from_s: float = 0.0
    uncovered_to_s: float = 0.0
    last_in_flight_s: float = 0.0


class Validity(_Block):
    """The gates' verdict: invalid when any gate fails, else smoke below the submission window, else valid."""

    verdict: Verdict = "invalid"
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    gates: GateConfig = Field(default_factory=GateConfig)
    coverage: CoverageDetail | None = None


class ReadbackCheck(_Block):
    """One trust-but-verify check: the value the engine realised against the one the job pinned."""

    check: str
    pinned: float
    realised: float | None = None
    tolerance: float
    verify_steps: float | None = None
    draft_length: float | None = Field(default=None, description="K bounding the tokens a verify step accepts.")
    standard_error: float | None = Field(
        default=None, description="Upper bound on the realised value's sampling error over the verify steps.")
    allowance: float | None = Field(
        default=None, description="The |realised − pinned| the check allowed: max(tolerance, z × standard_error).")
    source: str
    ok: bool | None = Field(description="True passed, False failed (invalid), None inconclusive (at most smoke).")
    reason: str | None = None


class Readback(_Block):
    checks: list[ReadbackCheck] = Field(default_factory=list)
    ok: bool = True


class Launch(_Open):
    """What served the job (`llmsweep run`): the engine as rendered and as it reported itself."""

    engine: str | None = None
    engine_version: str | None = Field(
        default=None, description="The engine version that served: the launch's declared one (its image tag's, else "
        "`serve.engine.version`), unless the server reported, or its interpreter had installed, another "
        "(`execute.version_drift`): then that one, the declared one kept in `engine_version_declared`.")
    engine_version_declared: str | None = Field(
        default=None, description="The version the launch declared, where another one ran (absent when they agree).")
    engine_version_reported: str | None = None
    engine_version_installed: str | None = Field(
        default=None, description="The engine's version the interpreter that ran it had installed, read on the host "
        "when the server ran there without an image (`execute.host_engine`), or in the server's docker container "
        "(`execute.docker.container_engine_version`): what the engine that ran was, for an engine whose server "
        "reports none (transformers serve).")
    context_served: int | None = Field(
        default=None, description="The context length (tokens) the server reported serving (`/v1/models`' "
        "`max_model_len`, `client.probe.model_context`): what vLLM fitted an `auto` context to, or another length "
        "than the launch set (then warned: `sim_warnings.context_served`); job.json's `max-model-len` is the "
        "launch's. The simulator's is the longest request it takes (`sim.config.SimConfig.served_context`: its context "
        "flag's within its KV pool less a step's lookahead), served live or in virtual time, or predicted "
        "(`llmsweep predict`). Absent when the server said none.")
    image: str | None = None
    image_id: str | None = Field(default=None, description="The daemon's id of the local image `image` named when the "
                                 "server started (docker executor).")
    image_digest: str | None = Field(default=None, description="Its registry digest (sha256:...), when it came from "
                                     "a registry: the build that ran, whatever the tag names later.")


class HostFacts(_Block):
    """The machine the server ran on, read there by llmsweep (`execute.lifecycle.observe_runtime`): on a host-bound
    engine (a small model on vLLM: its scheduler and API server are Python) two runs of one recipe on one GPU SKU
    differ by the host's CPU and its load. Recorded only where llmsweep ran beside the server (it answered on a
    loopback address: a local or Docker launch, the server step of a Slurm job on the worker's node); absent for a
    simulated point (the predicting machine is not the engine's host) and for older results. A fact that cannot be
    read is absent, never guessed."""

    cpu_model: str | None = Field(default=None, description="The CPU's model name (`model name` of /proc/cpuinfo; "
                                  "absent where it has none, such as on Arm).")
    logical_cpus: int | None = Field(default=None, description="The machine's logical CPUs (`os.cpu_count`).")
    usable_cpus: int | None = Field(default=None, description="The CPUs llmsweep's process may run on (its "
                                    "affinity: a Slurm or taskset share), which a local server inherits.")
    load_avg_1m: float | None = Field(default=None, description="The 1-minute load average when the job started "
                                      "(`os.getloadavg`): neighbours' load, and what the job's own server and client "
                                      "left from the job before it.")

    def text(self) -> str:
        """`Intel(R) Xeon(R) Platinum 8480+, 16 logical CPUs (8 usable), load 2.10 at the job's start`: what was
        read, `CPU model unknown` where the model was not."""
        cpus = f"{self.logical_cpus} logical CPUs" if self.logical_cpus is not None else ""
        if cpus and self.usable_cpus is not None and self.usable_cpus != self.logical_cpus:
            cpus += f" ({self.usable_cpus} usable)"
        load = f"load {self.load_avg_1m:.2f} at the job's start" if self.load_avg_1m is not None else ""
        return ", ".join(x for x in (self.cpu_model or "CPU model unknown", cpus, load) if x)


class GpuState(_Block):
    """One of the server's GPUs as the driver said it when the server was ready, beside its name and driver:
    `nvidia-smi --query-gpu` on NVIDIA, `amd-smi static --limit` and `amd-smi metric --clock` on AMD
    (`execute.amd_gpus`).

    The clock fields keep their first (NVIDIA) names so stored results load unchanged, as the power samples'
    `sm_clock_mhz` holds AMD's GFX clock too: on AMD they hold the GFX clock, and `clock_domain` says which."""

    index: int = Field(description="The GPU's index as the vendor's tool numbers it (nvidia-smi, amd-smi).")
    power_limit_w: float | None = Field(default=None, description="The enforced power limit, W: nvidia-smi's "
                                        "`enforced.power.limit`; amd-smi's socket power cap (`static --limit`).")
    sm_clock_max_mhz: float | None = Field(default=None, description="The maximum SM (NVIDIA, `clocks.max.sm`) or "
                                           "GFX (AMD, `metric --clock` `gfx_0.max_clk`) clock, MHz.")
    sm_clock_mhz: float | None = Field(default=None, description="The SM (NVIDIA, `clocks.sm`) or GFX (AMD, "
                                       "`gfx_0.clk`) clock when the server was ready, before any load, MHz; the "
                                       "clocks under load are the power samples'.")
    clock_domain: Literal["sm", "gfx"] | None = Field(
        default=None, description="Which clock `sm_clock_*` hold: `gfx`, AMD's graphics engine clock (amd-smi); "
        "`sm` or absent, NVIDIA's SM clock (nvidia-smi leaves it out, as every result from before AMD GPUs were "
        "read does).")

    @property
    def clock_label(self) -> str:
        """`GFX` or `SM`, as the clock is named where a result is shown."""
        return "GFX" if self.clock_domain == "gfx" else "SM"


class Hardware(_Open):
    """Provenance's `hardware` of `llmsweep run`: the job's SKU, runner and GPU count, and what the host's driver
    and the host itself said (`execute.lifecycle.hardware_provenance`)."""

    sku: str | None = None
    runner: str | None = None
    gpus: int | None = Field(default=None, description="The job's GPUs; 0 where the server ran on none (a real "
                             "engine's CPU rehearsal: its per-GPU figures are the endpoint's, `gpus_known`, and it "
                             "has no cost block).")
    gpu_names: list[str] | None = Field(default=None, description="The server's GPUs as the driver names them.")
    driver_version: str | None = None
    gpu_names_problem: str | None = Field(default=None, description="Why `gpu_names` is null: the server's "
                                          "*_VISIBLE_DEVICES name a GPU this host does not have.")
    gpu_state: list[GpuState] | None = Field(default=None, description="Each of the server's GPUs' power limit and "
                                             "SM (NVIDIA) or GFX (AMD) clocks, in `gpu_names`' order.")
    host: HostFacts | None = None

    def gpu_state_text(self) -> str | None:
        """`700 W limit, SM max 1980 MHz` (`750 W limit, GFX max 2100 MHz` on AMD) per distinct state of the
        server's GPUs (`1x 700 W limit, ...; 1x 500 W ...` where they differ), None where none was read."""
        said: dict[str, int] = {}
        for g in self.gpu_state or ():
            parts = [f"{g.power_limit_w:g} W limit" if g.power_limit_w is not None else "",
                     f"{g.clock_label} max {g.sm_clock_max_mhz:g} MHz" if g.sm_clock_max_mhz is not None else "",
                     f"{g.clock_label} {g.sm_clock_mhz:g} MHz when ready" if g.sm_clock_mhz is not None else ""]
            text = ", ".join(x for x in parts if x)
            said[text] = said.get(text, 0) + 1
        if not said:
            return None
        return "; ".join(f"{n}x {text}" if len(said) > 1 else text for text, n in said.items())

    @property
    def power_limits_w(self) -> tuple[float, ...] | None:
        """The server's GPUs' enforced power limits, None where none was read."""
        limits = tuple(g.power_limit_w for g in self.gpu_state or () if g.power_limit_w is not None)
        return limits or None


class AcceptanceProvenance(_Open):
    """The acceptance length the simulator ran a speculative job at. The one shape of it: the estimate writes it
    (`engines.sim.AcceptanceEstimate.record`)."""

    value: float | None = None
    source: str | None = Field(default=None, description="pinned, golden, or estimate: the simulator's stand-in for "
                                                         "acceptance the job would measure on a real engine.")
    basis: str | None = None

    @property
    def estimated(self) -> bool:
        return self.source == "estimate"


class SimulatorProvenance(_Open):
    """What the simulator that served a result says about itself: in virtual time this process's simulator core, live
    the server's `/version`."""

    calibration: str | None = Field(default=None, description="Whether its (engine, hardware, model class) is "
                                                              "calibrated, as `EngineConfig.calibration_label` says.")
    digest: str | None = Field(
        default=None, description="The simulator's exact build (`sim.identity.simulator_digest`: its code and every "
        "catalog file it reads): two results of one launch and seed are the same numbers only under one digest. "
        "Absent in a result recorded before it was kept (its `llmsweep_version` stands in).")


class KvBlockProvenance(_Open):
    """The KV block a simulated job was served with where the engine it stands in for pages its KV cache otherwise
    by default (`engines.sim.engine_kv_block`): the simulator's cached prefixes and KV allocations are in whole blocks
    of `tokens`, the engine's in pages of `engine_tokens`. The one shape of it: the launch's block writes it
    (`engines.sim.EngineKvBlock.record`)."""

    tokens: int | None = Field(default=None, description="Tokens of the simulator's KV and prefix-cache block.")
    engine: str | None = Field(default=None, description="The engine the job stands in for.")
    engine_tokens: int | None = Field(default=None, description="Tokens of that engine's own page at its default.")
    source: str | None = Field(default=None, description="Where the engine's default is read from.")


def measurement_stamp(started_at: object, finished_at: object) -> str | None:
    """What tells one measurement of a job from another: the moments its client started and finished
    (`Provenance.started_at`..`finished_at`, unix seconds), `<start>..<end>`; None where either is not recorded (a
    summary imported from elsewhere). A run's job measured again (`--force`, `--resume` after an edit) keeps its job
    and result ids but not these, and re-summarising or re-judging the folder keeps them (they are the run's record,
    not figures of the summary). What `run --reuse` records of the result it stood a job on, and the store of an
    attempt it keeps for such runs (`results.rundir.KeptAttempt`)."""
    def number(value: object) -> float | None:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    start, end = number(started_at), number(finished_at)
    return None if start is None or end is None else f"{start!r}..{end!r}"


class Provenance(_Open):
    """Who measured what: the client version plus what the run recorded (job, launch, hardware, options, …)."""

    client_version: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    options: dict[str, Any] | None = None
    workload: dict[str, Any] | None = None
    launch: Launch | None = None
    clock: Clock | None = Field(
        default=None, description="The clock the run was timed on: `virtual` (the simulator core, in-process, "
                                  "`llmsweep run`) or `wall` (`run --live`, a real engine, `bench`); absent in a "
                                  "summary written before it was recorded.")
    hardware: Hardware | str | None = Field(
        default=None, description="`llmsweep run`: the SKU, runner and GPUs, what the driver and the server's host "
                                  "said (`Hardware`); else a name.")
    gpus_known: bool | None = Field(
        default=None, description="False when nobody stated or read the endpoint's GPU count: per-GPU figures are "
                                  "then the whole endpoint's (`bench` against a server that does not report it).")
    gpus_from: str | None = Field(default=None, description="Where the GPU count came from (option, server, job).")
    acceptance: AcceptanceProvenance | None = Field(
        default=None, description="Simulated speculative jobs: the acceptance length served and where it came from.")
    unmodelled: list[str] | None = Field(
        default=None, description="Simulated jobs: what the job sets that the simulator does not model (DP attention, "
        "pipeline parallelism, a page size, ...), so the point predicts the job without them: a switch as if off, a "
        "setting at the simulator's own value (`engines.sim.unmodelled`).")
    estimated: list[str] | None = Field(
        default=None, description="Simulated jobs: the catalog figures the simulator modelled the job with that the "
        "catalog marks as estimates (`<entry> <field>`, e.g. `glm-5.2 attention`; `llmsweep catalog --json models` or "
        "`hardware` gives each one's note) (`engines.sim.estimated_figures`).")
    simulator: SimulatorProvenance | None = Field(
        default=None, description="Simulated jobs: the simulator's calibration and build, as it said them.")
    kv_block: KvBlockProvenance | None = Field(
        default=None, description="Simulated jobs: the simulator's KV block against the stood-in engine's own page "
        "where they differ and the recipe pins none (SGLang 1 token, vLLM 16, TensorRT-LLM 32; the simulator 64), "
        "which the prediction does not model (`engines.sim.engine_kv_block`).")

    @property
    def measured_at(self) -> str | None:
        """Which measurement this is (:func:`measurement_stamp` of its start and end): None when not recorded."""
        return measurement_stamp(self.started_at, self.finished_at)

    @property
    def corpus_digest(self) -> str | None:
        """Fingerprint of the traces an agentic run replayed, or of the file a Mooncake replay read
        (`workload.corpus_digest`); None when not recorded."""
        digest = self.workload.get("corpus_digest") if self.workload else None
        return digest if isinstance(digest, str) else None

    @property
    def workload_seed(self) -> int | None:
        """The seed the run's workload sampled with (`workload.seed`: its prompts, trace order, t*, block text, as
        `workload.scenario.Scenario.seed` gave it); None when not recorded."""
        seed = self.workload.get("seed") if self.workload else None
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None

    @property
    def gpu_name(self) -> str | None:
        """The first GPU as the driver named it, when the run recorded it."""
        names = self.hardware.gpu_names if isinstance(self.hardware, Hardware) else None
        return names[0] if names else None


# ------------------------------------------------------------------------------------------------ reserved blocks


class EvalMetric(_Block):
    """One metric lm-eval reported for the task, as it names it (`exact_match,strict-match`), with its stderr."""

    name: str
    value: float | None = None
    stderr: float | None = None


class EvalCheck(_Block):
    """One metric held against its threshold (the score gate: every `exact_match,*` metric must reach it)."""

    metric: str
    score: float | None = None
    threshold: float
    threshold_from: str = Field(description="Where the threshold comes from: `<model-prefix>.<task>.<metric>` of "
                                "eval_thresholds.yaml, or its `default` fallbacks.")
    ok: bool


class EvalRun(_Block):
    """One lm-eval invocation at one concurrency (several when the eval is batched over concurrencies)."""

    conc: int = Field(description="Concurrent requests lm-eval sent (`num_concurrent`).")
    status: Literal["completed", "failed"]
    error: str | None = Field(default=None, description="Why the run did not complete (exit status, log tail).")
    metrics: list[EvalMetric] = Field(default_factory=list)
    n_samples: int | None = Field(default=None, description="Samples scored (lm-eval's `n-samples.effective`).")
    n_samples_original: int | None = Field(default=None, description="Samples in the task's test split.")
    command: list[str] = Field(default_factory=list, description="The exact lm-eval argv that ran.")
    results_file: str | None = Field(default=None, description="lm-eval's results JSON, relative to the job folder.")
    seconds: float | None = None
    reasoning_answers: int | None = Field(
        default=None, description="Answers scored from the reply's reasoning field because its `content` was empty "
        "(a reasoning parser's split, InferenceX's fallback; `evals.lm_eval_runtime`); None when lm-eval did not say.")


class EvalBlock(_Block):
    """An accuracy evaluation run with lm-eval against the job's server (`llmsweep.evals`).

    `verdict` is the eval's own: valid when every run completed and every `exact_match,*` metric of every run reached
    its threshold; the reasons name metric, score and threshold. `smoke` where they did but the samples cannot tell
    it: a part of the task's samples (`--eval-limit`), or a local file's few, whose score lies within a standard error
    of its threshold (`evals.gate.judge`). The throughput verdict of a `run-eval` job is the summary's `validity`; an
    eval-only job's `validity` is this verdict."""

    mode: Literal["eval-only", "run-eval"]
    task: str = Field(description="lm-eval task name (gsm8k, gpqa_diamond_cot_n_shot).")
    harness: str = "lm-eval"
    harness_version: str | None = Field(default=None, description="lm-eval's version, read from its results file.")
    dataset: str = Field(description="Where the samples came from: a Hugging Face dataset id or a local file.")
    limit: int | None = Field(default=None, description="Samples per run when limited (`--limit`); None: all.")
    num_fewshot: int | None = None
    model_prefix: str | None = None
    context_length: int = Field(description="Context length the eval ran at (lm-eval `max_length`), tokens.")
    max_tokens: int = Field(description="Most tokens generated per answer (`--gen_kwargs max_tokens`).")
    runs: list[EvalRun] = Field(default_factory=list)
    score: float | None = Field(default=None, description="The headline score: strict match, else accuracy.")
    score_name: str | None = None
    score_stderr: float | None = None
    checks: list[EvalCheck] = Field(default_factory=list)
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    acceptance_length: float | None = Field(
        default=None, description="Realised acceptance length over the eval, read from the server's /metrics (real "
        "verification: an eval never pins it); None when the server runs no speculative decoding or exposes none.")
    relaunched: bool = Field(
        default=False, description="The eval ran on a server of its own, relaunched with real verification after the "
        "run-eval row's throughput server (which pinned acceptance) was stopped; False: on the throughput server.")
    server_command: str | None = Field(
        default=None, description="The relaunched eval server's launch, as its `eval/server_command.txt` holds it.")


class PowerCost(_Block):
    """Cost per million tokens and provisioned tokens/s per MW from the catalog's ASSUMED prices (`power.yaml`)."""

    assumption: bool = Field(default=True, description="Always true: prices are assumptions, not measurements.")
    sku: str
    usd_per_gpu_hour: float | None = None
    source: str | None = Field(default=None, description="Where the assumed price comes from.")
    date: str | None = Field(default=None, description="When the assumed price was written down.")
    usd_per_mtok_output: float | None = Field(default=None, description="US$ per million output tokens.")
    usd_per_mtok_total: float | None = Field(default=None, description="US$ per million input + output tokens.")
    all_in_kw_per_gpu: float | None = Field(default=None, description="All-in utility kW per GPU (InferenceX app).")
    all_in_source: str | None = None
    tokens_per_s_per_mw_all_in: float | None = Field(
        default=None, description="Total tokens/s per all-in utility MW: throughput per GPU x 1000 / kW per GPU.")

    def price_words(self) -> str:
        """The assumed price the cost figures were figured at, with whose it is and when it was written down:
        `$2.20/GPU-h for mi300x (llmsweep assumption, …, 2026-12-01)`; `no price for h100` where the SKU had none."""
        if self.usd_per_gpu_hour is None:
            return f"no price for {self.sku}"
        said = ", ".join(w for w in (self.source or "source unrecorded", self.date) if w)
        price = self.usd_per_gpu_hour
        return f"${price:,.2f}/GPU-h for {self.sku} ({said})" if round(price, 2) == price \
            else f"${price:,g}/GPU-h for {self.sku} ({said})"


class CounterCheck(_Block):
    """The driver's energy counter over the same window, beside the integral (advisory: within 5 %)."""

    energy_j: float
    deviation: float | None = None
    negative_delta: bool = False
    within_tolerance: bool = False


class RolePower(_Block):
    """One role's share of a disaggregated deployment's GPU energy over the window (wave-2 spec §3.3); every figure
    None unless the deployment's power is valid."""

    expected_gpus: int | None = Field(default=None, description="GPUs of the role's pool.")
    observed_gpus: int = 0
    gpu_ids: list[str] = Field(default_factory=list, description="The role's sampled GPUs (`node/index`).")
    energy_j: float | None = Field(default=None, description="The role's GPUs' energy over the whole window, J.")
    avg_total_power_w: float | None = None
    avg_power_w: float | None = Field(default=None, description="The role's average power per GPU, W.")
    peak_power_w: float | None = None
    joules_per_input_token: float | None = Field(default=None, description="Prefill: role energy / input tokens.")
    joules_per_output_token: float | None = Field(default=None, description="Decode: role energy / output tokens.")


class PowerBlock(_Block):
    """GPU power and energy over the profile window (`llmsweep.power.integrate`; InferenceX's aggregate_power).

    Every figure measured from samples is None unless `power_valid`; `reasons` then says why (InferenceX's codes).
    `source` is `simulated` when the simulator's power model was sampled, `measured` when GPUs were, and None when no
    sample was recorded (no backend could sample, or none answered): a block with nothing in it claims no source."""

    source: Literal["measured", "simulated"] | None = "measured"
    backend: str | None = Field(default=None, description="Sampler backend: nvml, amd-smi, nvidia-smi, sim.")
    power_valid: bool = False
    reasons: list[str] = Field(default_factory=list)
    required: bool = Field(default=False, description="The run required valid power (invalid power fails the job).")
    error: str | None = Field(default=None, description="Why nothing could be sampled, when nothing was.")
    read_failures: int | None = Field(default=None, description="Reads of the sampler's backend that failed during "
                                      "the job (the cause of the gaps `reasons` may name); None when none failed.")
    read_error: str | None = Field(default=None, description="What the last failed read during the job said.")
    integration_method: str | None = None
    window: Window = Field(default_factory=Window)
    interval_s: float | None = None
    max_gap_s: float | None = None
    expected_gpus: int | None = Field(default=None, description="TP x PP x PCP of the job.")
    observed_gpus: int = 0
    observed_gpu_ids: list[str] = Field(default_factory=list)
    per_gpu_sample_counts: dict[str, int] = Field(default_factory=dict)
    per_gpu_max_sample_gap_s: dict[str, float] = Field(default_factory=dict)
    per_gpu_energy_j: dict[str, float] = Field(default_factory=dict)
    energy_j: float | None = Field(default=None, description="Energy of all the job's GPUs over the window, J.")
    avg_total_gpu_power_w: float | None = None
    avg_power_w: float | None = Field(default=None, description="Average power per GPU over the window, W.")
    peak_power_w: float | None = Field(default=None, description="Highest per-GPU power in the window, W.")
    joules_per_successful_query: float | None = None
    joules_per_input_token: float | None = None
    joules_per_output_token: float | None = None
    joules_per_total_token: float | None = None
    tokens_per_joule: float | None = Field(default=None, description="Input + output tokens per joule.")
    output_tokens_per_joule: float | None = None
    tokens_per_s_per_mw: float | None = Field(
        default=None, description="Input + output tokens/s per MW of the GPUs' power (measured, or modelled where "
        "`source` is simulated).")
    output_tokens_per_s_per_mw: float | None = None
    counter_check: CounterCheck | None = None
    cost: PowerCost | None = None
    missing: list[str] | None = Field(default=None, description="Samplers of a multi-node deployment that left no "
                                      "samples (reason `node_telemetry_missing`).")
    roles: dict[str, RolePower] | None = Field(default=None, description="A disaggregated deployment: each role's "
                                               "share (also under the summary's `roles.<role>.power`).")

    @property
    def unrecorded(self) -> str | None:
        """Why no power was recorded and how to get it, for a job that did not require power where no backend could
        sample, or whose power the simulator does not model (`not_modelled`); one that required it was refused
        before launch, or is invalid with the reason; else None."""
        return self.error if self.backend is None and self.error and not self.required else None


class RoleMetrics(_Block):
    """What one role's workers did over the profiling window, from their labelled server-metric series."""

    queue_mean: float | None = Field(default=None, description="Requests waiting to be scheduled, summed over the "
                                     "role's workers (mean over the window's scrapes).")
    queue_max: float | None = Field(default=None, description="Most requests one worker had waiting.")
    running_mean: float | None = Field(default=None, description="Requests running, summed over the workers.")
    running_max: float | None = None
    kv_usage_mean: float | None = Field(default=None, description="KV-pool usage (0-1), mean over the workers.")
    kv_usage_max: float | None = None
    prealloc_queue_mean: float | None = Field(
        default=None, description="Decode: requests waiting for KV blocks before their transfer, summed over workers "
        "(null for the live simulator's decode worker, which reserves no blocks before a transfer).")
    prealloc_queue_max: float | None = None
    prompt_tokens: float | None = Field(default=None, description="Prompt tokens the role took in over the window.")
    generation_tokens: float | None = None
    kv_transfers: float | None = Field(default=None, description="Decode: KV transfers completed in the window "
                                       "(vLLM: its NIXL transfers, `vllm:nixl_xfer_time_seconds_count`).")
    kv_transfer_s_mean: float | None = Field(
        default=None, description="Decode: mean seconds from a transfer's start to the KV's arrival (virtual time: "
        "from KV-block reservation, queueing on the NICs included; the live simulator: its modelled link time; vLLM: "
        "its NIXL transfers' duration).")
    kv_transfer_bytes: float | None = Field(default=None, description="Decode: bytes of KV that arrived in the "
                                            "window (prompt tokens x the model's KV bytes per token).")
    prompt_tokens_transferred: float | None = Field(
        default=None, description="vLLM: prompt tokens whose KV arrived from another worker in the window "
        "(`vllm:prompt_tokens_by_source{source=\"external_kv_transfer\"}`).")
    prompt_tokens_computed: float | None = Field(
        default=None, description="vLLM: prompt tokens the role computed itself in the window "
        "(`source=local_compute`).")
    kv_failed_transfers: float | None = Field(default=None, description="vLLM: NIXL transfers that failed in the "
                                              "window (`vllm:nixl_num_failed_transfers`).")
    refused_no_kv: float | None = Field(default=None, description="Router: prefill answers it refused in the window "
                                        "for handing over no KV (llmsweep's PD router, vllm-nixl protocol).")
    abandoned: dict[str, float] | None = Field(
        default=None, description="Router: requests in the window whose client went away while the router waited "
        "on a worker that had sent nothing of its answer (a hung worker, or one too slow for the client's timeout), "
        "by that worker (`prefill worker URL` or `decode worker URL`); absent when there were none.")
    retried: dict[str, float] | None = Field(
        default=None, description="Router: legs in the window it sent again, once, on a new connection because the "
        "pooled keep-alive connection they went out on was closed or reset before any of the worker's answer came "
        "(the worker's idle timeout crossing the request), by that worker (`prefill worker URL` or `decode worker "
        "URL`); absent when there were none.")


class RoleBlock(_Open):
    """One role of a disaggregated deployment (prefill, decode, router): what ran, read back from provenance, and what
    it did (`metrics`)."""

    kind: str | None = Field(default=None, description="prefill, decode or router.")
    workers: int | None = Field(default=None, description="Workers in the pool.")
    gpus_per_worker: int | None = None
    gpus: int | None = Field(default=None, description="GPUs of the whole pool.")
    nodes: list[int] | None = Field(default=None, description="Node indices of the allocation the pool ran on.")
    tp: int | None = None
    ep: int | None = None
    dp_attention: int | None = Field(default=None, description="DP-attention ranks of each worker (1: none), as the "
                                     "workers report them; a real engine's workers report none.")
    max_running_requests: int | None = None
    metrics: RoleMetrics | None = None
    power: RolePower | None = Field(default=None, description="The role's GPU energy and watts (`power.roles`).")


class LinkBlock(_Block):
    """A KV-transfer link between prefill and decode workers."""

    kind: str
    name: str
    gbps: float = Field(description="Bandwidth per GPU per direction, GB/s.")
    latency_s: float
    source: str = ""


class DeploymentBlock(_Block):
    """The deployment that served a disaggregated job, as it ran (`provenance.topology`)."""

    disaggregated: bool = True
    nodes: int | None = None
    gpus: int | None = Field(default=None, description="GPUs of every role: what per-GPU throughput divides by.")
    gpus_per_node: int | None = None
    kv_transfer: str | None = Field(default=None, description="KV-transfer backend between prefill and decode.")
    router_policy: str | None = None
    links: list[LinkBlock] = Field(default_factory=list)
    engine: str | None = Field(default=None, description="The engine the workers ran (a live deployment's).")
    router: dict[str, Any] | None = Field(default=None, description="The router that ran, as its /version says it "
                                          "(`router`: llmsweep; `protocol`: vllm-nixl; `version`: llmsweep's).")


# ------------------------------------------------------------------------------------------------ the summary


class Summary(_Block):
    """One job's summary: `summary.json`."""

    schema_version: int = SCHEMA_VERSION
    source: Source = MEASURED
    requests: Requests = Field(default_factory=Requests)
    latency: Latency = Field(default_factory=Latency)
    interactivity: InvertedStats = Field(default_factory=InvertedStats, description="1/TPOT, tok/s/user.")
    e2e_norm_interactivity: InvertedStats = Field(default_factory=InvertedStats, description="OSL/E2EL, tok/s/user.")
    tokens: Tokens = Field(default_factory=Tokens)
    throughput: Throughput = Field(default_factory=Throughput)
    qps: Qps = Field(default_factory=Qps)
    cache: Cache = Field(default_factory=Cache)
    server_metrics: ServerMetrics = Field(default_factory=ServerMetrics)
    client_health: ClientHealth = Field(default_factory=ClientHealth)
    coverage: float | None = Field(default=None, description="Share of the profile window covered (0-1).")
    validity: Validity = Field(default_factory=Validity)
    readback: Readback | None = Field(default=None, description="Read-back checks of a job that pinned settings.")
    units: dict[str, str] = Field(default_factory=dict)
    provenance: Provenance = Field(default_factory=Provenance)
    eval: EvalBlock | None = None
    power: PowerBlock | None = None
    deployment: DeploymentBlock | None = Field(
        default=None, description="A disaggregated job: the deployment that ran (None: one aggregated server).")
    roles: dict[str, RoleBlock] | None = None

    def dump(self) -> dict[str, Any]:
        """The JSON document of `summary.json`."""
        return self.model_dump(mode="json")

    def write(self, path: Path | str) -> None:
        """Write the summary to `path` whole or not at all (`llmsweep.atomic`): a reader, or a kill mid-write, finds
        the old file or the new one, never an empty or partial summary. Every summary.json
        is written here (the client's, the job's after its read-back checks, a predicted point's)."""
        # ends with a newline, as the job's own writer (`artifacts.write_json`) ends it: one file, the same bytes
        atomic.write_text(Path(path), json.dumps(self.dump(), indent=2, allow_nan=False) + "\n")

    @classmethod
    def from_doc(cls, doc: Any, *, where: str = "summary",
                 fix: str = "re-run `llmsweep summarize` on its job folder") -> Summary:
        """A summary document of any known schema version, upgraded to this one. One that is not is bad input
        (`ResultInputError`, exit 2) with `fix`."""
        if not isinstance(doc, dict):
            raise ResultInputError(f"{where} is not a JSON object", fix=fix)
        version = doc.get("schema_version", 1)
        if version not in KNOWN_VERSIONS:
            raise ResultInputError(
                f"{where} has summary schema_version {version!r}; this llmsweep reads {KNOWN_VERSIONS}",
                fix=f"use a newer llmsweep, or {fix}")
        missing = [key for key in REQUIRED_BLOCKS if key not in doc]
        if missing:  # every writer of every version writes them: without them the summary would read as defaults
            raise ResultInputError(f"{where} is not a whole summary: it has no {' or '.join(map(repr, missing))} "
                                   "(every summary llmsweep writes has them)", fix=fix)
        try:
            summary = cls.model_validate({**doc, "schema_version": SCHEMA_VERSION})
        except ValidationError as exc:
            raise ResultInputError(f"{where} is not a summary llmsweep can read: {exc}", fix=fix) from exc
        lacking = [key for block in WHOLE_BLOCKS for key in _lacking(cls.model_fields[block].annotation, doc[block],
                                                                      block)]
        if lacking:  # present but emptied: its figures would read as 0.0, a valid point of no throughput
            raise ResultInputError(f"{where} is not a whole summary: {_said(lacking)} (every summary llmsweep writes "
                                   f"has every figure of its {' and '.join(map(repr, WHOLE_BLOCKS))} blocks)", fix=fix)
        return summary

    @classmethod
    def load(cls, path: Path | str) -> Summary:
        """Read a `summary.json` (any known schema version)."""
        p = Path(path)
        fix = f"`llmsweep summarize {p.parent}` rebuilds it from its records.jsonl"
        try:
            doc = load_json_file(p)
        except (OSError, ValueError) as exc:
            raise ResultInputError(f"cannot read {p}: {exc}", fix=fix) from exc
        return cls.from_doc(doc, where=str(p), fix=fix)


def _lacking(model: Any, block: Any, where: str) -> list[tuple[str, bool]]:
    """What a summary's `block` (as read from the file, at dotted path `where`) lacks of `model`'s figures: every
    field whose default is not None, and a sub-block's within it; each as (dotted path, whether it is an emptied
    block rather than a missing key). What is not an object is left to the model's validation, which names it."""
    if not isinstance(block, dict):
        return []
    if not block:
        return [(where, True)]
    lacking: list[tuple[str, bool]] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        if field.default is None:
            continue
        if key not in block:
            lacking.append((f"{where}.{key}", False))
        elif isinstance(field.annotation, type) and issubclass(field.annotation, _Block):
            lacking += _lacking(field.annotation, block[key], f"{where}.{key}")
    return lacking


def _said(lacking: list[tuple[str, bool]]) -> str:
    """``latency` is empty; it has no `throughput.total_tps` or `throughput.per_gpu``: what damaged whole blocks
    lack, at most six missing figures named."""
    empty = [f"`{path}`" for path, emptied in lacking if emptied]
    figures = [f"`{path}`" for path, emptied in lacking if not emptied]
    said = [f"{' and '.join(empty)} {noun(len(empty), 'is', 'are')} empty"] if empty else []
    if figures:
        more = f" (and {count_of(len(figures) - 6, 'more figure')})" if len(figures) > 6 else ""
        said.append(f"it has no {' or '.join(figures[:6])}{more}")
    return "; ".join(said)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of `summary.json` (what `llmsweep schema summary` prints)."""
    return Summary.model_json_schema(by_alias=True)
