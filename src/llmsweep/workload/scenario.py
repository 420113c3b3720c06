"""Scenarios: each one object owning what it sends, its defaults and its gate profile.

A scenario (:class:`~llmsweep.spec.workload.ScenarioId`) decides, for one job:

- its defaults: how a recipe's `workload` block resolves for an entry (`resolve` → `ResolvedWorkload`);
- the route it speaks (`api`) and its stopping rule at one concurrency (`load`: prompt count, warm-ups, window);
- its workload builder (`build` → the `Workload` the client or the simulator runs);
- its gate profile (`gate`: the error-ratio threshold, the submission minimum and the short-output bound;
  `gate.config` adds a run's planned window).

`fixed-seq-len` and `agentic-coding` are InferenceX's recipe scenarios; `mooncake-replay` is what an agentic-coding
entry runs when `workload.replay` names a Mooncake trace. A new scenario is one `Scenario` subclass here, registered
with `@register_scenario`, and one member of `ScenarioId`.

Module imports stay light (planning imports this): workloads and gate configs are imported when first built.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from llmsweep.errors import ConfigError
from llmsweep.spec.workload import (
    CORPUS_DATASETS,
    DEFAULT_AGENTIC_DURATION_SECONDS,
    DEFAULT_PROMPTS_PER_CONC,
    DEFAULT_RANGE_RATIO,
    DEFAULT_WARMUP_PER_LANE,
    DEFAULT_WARMUPS_PER_CONC,
    ResolvedWorkload,
    ScenarioId,
    TraceSource,
    WorkloadSpec,
    default_corpus,
)
from llmsweep.workload.base import Api

if TYPE_CHECKING:
    from llmsweep.metrics.gates import GateConfig
    from llmsweep.workload.base import Workload

MIN_SUBMISSION_S = 900.0
"""An agentic profiling window shorter than this is a smoke run (AgentX's minimum). Only agentic points have a
window to be long enough: a fixed-length or replay point is defined by the prompts it sends, so its profile has no
minimum (InferenceX: a fixed-length point is valid when its planned prompts completed within the gates)."""


@dataclass(frozen=True)
class GateProfile:
    """The validity thresholds a scenario implies; `config` makes the metrics' `GateConfig` of one run.

    `kind` picks the gates' threshold set (`GateConfig.for_kind`: agentic runs tolerate a 0.10 error ratio, the
    others 0.05); the client's live failure stop uses the same ratio.
    """

    kind: Literal["fixed", "agentic", "replay"]
    min_submission_s: float = 0.0
    max_short_output_ratio: float | None = None
    """Successful requests that stopped before max_tokens on their own (the server could not be told to ignore
    end-of-sequence), as a share of the successful ones, above which the run does not measure the lengths it planned;
    None = not gated."""

    def config(self, *, planned_duration_s: float | None = None, require_metrics_prefix: str | None = None,
               max_error_ratio: float | None = None, planned_requests: int | None = None) -> GateConfig:
        """The gates of one run; `max_error_ratio` overrides the profile's (`bench … --max-failure-ratio`);
        `planned_requests`: the prompts a run bounded by count alone plans (fewer finished: smoke)."""
        from llmsweep.metrics.gates import GateConfig

        ratio = {} if max_error_ratio is None else {"max_error_ratio": max_error_ratio}
        return GateConfig.for_kind(self.kind, min_submission_s=self.min_submission_s,
                                   max_short_output_ratio=self.max_short_output_ratio,
                                   planned_duration_s=planned_duration_s, require_metrics_prefix=require_metrics_prefix,
                                   planned_requests=planned_requests, **ratio)

    @property
    def max_error_ratio(self) -> float:
        return self.config().max_error_ratio


@dataclass(frozen=True)
class Load:
    """How one point of a scenario drives the server: closed loop at `concurrency` (None: the workload's own
    arrivals), stopping after `num_requests` profiling requests or a `duration_s` window (neither: when the workload
    runs out), after `warmup_requests` warm-up requests shared by the lanes, or `warmup_per_lane` sent one after
    another by each lane (agentic: a primer and its warm-up turns)."""

    concurrency: int | None
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int = 0
    warmup_per_lane: int = 0
    most_requests: int | None = None
    """The most profiling requests the workload itself holds, where the plan knows it and nothing else stops the
    point (a closed-loop replay of a trace's first `max-rows` rows): it bounds the point's length (`bound_s`), and
    is no stopping rule — the client is not given it, nor the gates a count to finish (a trace shorter than it is
    replayed whole, not cut short)."""

    def bound_s(self, *, request_timeout_s: float, grace_s: float) -> float | None:
        """The longest the client can drive this load while each request ends within `request_timeout_s` and a
        window's last requests within `grace_s` of its end; None where the workload alone decides when it ends (a
        replay of a whole trace: its length is the trace's).

        Requests shared by `concurrency` lanes, each lane taking the next as its last one ends, finish n requests
        of at most T each within (n / lanes + 1) · T (greedy list scheduling's bound); a lane's own warm-up turns
        one after another within their count · T; a window within its length and the grace."""
        lanes = self.concurrency
        warmup = self.warmup_per_lane * request_timeout_s
        if self.warmup_requests:
            if lanes is None:
                return None
            warmup += (self.warmup_requests / lanes + 1) * request_timeout_s
        if self.duration_s is not None:
            return warmup + self.duration_s + grace_s
        requests = self.num_requests if self.num_requests is not None else self.most_requests
        if requests is not None and lanes is not None:
            return warmup + (requests / lanes + 1) * request_timeout_s
        return None


class Scenario(ABC):
    """One scenario: its id, defaults, route, stopping rule, workload builder and gate profile."""

    id: ClassVar[ScenarioId]
    gate: ClassVar[GateProfile]

    @abstractmethod
    def resolve(self, spec: WorkloadSpec, *, common: Mapping[str, Any], entry: Mapping[str, Any],
                model_prefix: str, spec_decoding: bool) -> ResolvedWorkload:
        """`spec` (a recipe's `workload` block) with this scenario's defaults filled in for a matrix entry.

        `common` holds what every scenario shares (tokenizer, served model name, seed), already resolved.
        """

    def api(self, resolved: ResolvedWorkload) -> Api:
        """The OpenAI route the client streams from."""
        return "chat" if resolved.use_chat_template else "completions"

    @abstractmethod
    def load(self, resolved: ResolvedWorkload, *, concurrency: int, job_duration: int | None = None) -> Load:
        """The stopping rule of one point (`job_duration`: the matrix entry's duration, if any)."""

    salts_points: ClassVar[bool] = False
    """Whether every point's prompts must differ from the other points' of one server (`point_seed`): a scenario
    whose prompts would otherwise repeat across the points that share a server. A replay salts each run's prompts
    with a run-wide marker instead, so only its repeats need their own seed (`sample_name`)."""

    def seed(self, resolved: ResolvedWorkload, point: str | None, concurrency: int,
             copy: int | None = None) -> int:
        """The seed a point's workload samples with (its prompts, trace order, t*, block text): the one home of how a
        job's id (`point`) reaches its workload. A first run keeps the seed it always had: the resolved seed, salted
        with its job id where the scenario salts points. A repeat (`<id>-repeat<k>`) draws the sample `sample_name`
        names — its own, and the one repeat k of every other arm of the point draws, but for a later copy of the
        point on its server (`copy`: `Job.server_copy`). None (a workload built outside a job): the resolved seed."""
        if point is None:
            return resolved.seed
        if repeat_index(point) > 1 or self.salts_points:
            return point_seed(resolved.seed, sample_name(resolved, concurrency, point, copy))
        return resolved.seed

    @abstractmethod
    def build(self, resolved: ResolvedWorkload, *, concurrency: int, point: str | None = None,
              copy: int | None = None, **overrides: Any) -> Workload:
        """The workload of one concurrency point; `overrides` go to the workload's config (`tokenizer=None`: the
        built-in tokenizer, as the simulator counts).

        `point` names the point (a job id), `copy` its job's place among the copies of the point on its server
        (`Job.server_copy`); the workload's seed is `seed(resolved, point, concurrency, copy)` unless `overrides` sets
        one.
        """


S = TypeVar("S", bound=type[Scenario])
_SCENARIOS: dict[ScenarioId, Scenario] = {}


def register_scenario(cls: S) -> S:
    """Class decorator: the one instance of `cls` becomes the scenario of `cls.id`."""
    if cls.id in _SCENARIOS:
        raise ValueError(f"scenario {cls.id.value!r} is registered twice")
    _SCENARIOS[cls.id] = cls()
    return cls


def get_scenario(scenario: ScenarioId | str) -> Scenario:
    """The scenario of an id; an unknown one is a ConfigError listing the known ones."""
    try:
        return _SCENARIOS[ScenarioId(scenario)]
    except ValueError:
        raise ConfigError(f"unknown scenario {scenario!r}", fix=f"use one of {', '.join(scenario_ids())}") from None


def scenario_ids() -> tuple[str, ...]:
    return tuple(s.value for s in _SCENARIOS)


REPEAT_MARK = "-repeat"
"""How a repeat's job id ends: `<job-id>-repeat<k>` for repeat k ≥ 2 (`run --repeats`); the first run keeps its id."""


def repeat_index(point: str) -> int:
    """The repeat a point's name (a job id) carries: `<id>-repeat<k>` → k; any other id → 1 (the first run)."""
    return repeat_of(point)[1]


def repeat_of(point: str) -> tuple[str, int]:
    """A point's name split into the job id it repeats and the repeat: `<id>-repeat<k>` → (id, k); any other → (it,
    1)."""
    head, sep, tail = point.rpartition(REPEAT_MARK)
    return (head, int(tail)) if sep and head and tail.isdigit() else (point, 1)


def point_seed(seed: int, point: str) -> int:
    """A seed mixed with a point's name (`sample_name`: a first run's job id, a repeat's `workload_point`):
    deterministic per name, different between the points of one server.

    Every job of a server group runs against the same server. With the workload's seed alone, fixed-length prompt *i*
    is the same at every concurrency point, so each later point finds an earlier point's prompts in the engine's
    prefix cache: measured on the H200 with vLLM 0.26.0, 6-37 % of the prompt tokens of conc 4..128 came from the
    cache where the workload plans none. (Agentic and Mooncake replays already salt each run's prompts.)
    """
    digest = hashlib.sha256(f"{seed}:{point}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def workload_point(resolved: ResolvedWorkload, concurrency: int) -> str:
    """What a point sends, by itself: a digest of its resolved workload (`ResolvedWorkload.keyed`, the reuse key's
    `workload` part) and its concurrency: the plan's side of what `compare` reads back as a result's measured workload
    (`results.identity.Measurement`). Two arms of a sweep — jobs that differ only on the server side: an image, engine
    args, parallelism, a KV offload tier — send the same point, whatever their job ids; two points of one server
    differ in it (a concurrency, lengths, a workload)."""
    doc = {"workload": resolved.keyed(), "concurrency": concurrency}
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def sample_name(resolved: ResolvedWorkload, concurrency: int, point: str, copy: int | None = None) -> str:
    """The name the job `point` (a job id) draws its workload sample under (`Scenario.seed` mixes it into the seed).

    A first run's is its job id, as it always was: stored results and their reuse keys were measured with it. Repeat
    k's (`<id>-repeat<k>`, k ≥ 2) is `<workload_point>-repeat<k>`: what the point sends and k, not the job id — so
    repeat k of two arms replays the same sample, and `compare` between the arms sees their difference without a
    difference of samples (the quickstart's conc 4 repeat 2 had given 1,584 and 1,057 total tok/s/GPU between two
    arms the simulator serves alike, where their first runs agree); the repeats of one point still draw their own, and
    so do the points of one server.

    Two jobs that send one point to one server — a job planned twice (`grid.duplicate`, `grid.duplicate-arm`, two
    recipes alike), or arms a launch does not tell apart (an image alone, on the simulator or the host's engine) —
    are copies of it there (`copy`: `Job.server_copy`, 2 from the second on, `execute.pipeline.server_copies`). Their
    first runs already differ (each its job id); repeat k of a later copy draws `<workload_point>-repeat<k>-copy<c>`:
    had it drawn the first copy's, the second measurement was no sample of its own, and on a server that keeps its
    prefix cache between jobs it found the first copy's fixed-length prompts there (measured on the live simulator:
    87 % of its prompt tokens, where the workload plans none)."""
    k = repeat_index(point)
    return point if k == 1 else repeat_sample(resolved, concurrency, k, copy)


COPY_MARK = "-copy"
"""How the sample of a later copy's repeat ends (`sample_name`): `…-repeat<k>-copy<c>`."""


def repeat_sample(resolved: ResolvedWorkload, concurrency: int, repeat: int, copy: int | None = None) -> str:
    """The sample name of repeat `repeat` (k ≥ 2) of the point that sends `resolved` at `concurrency`, whichever
    arm's job it is, for copy `copy` of the point on its server (`sample_name`; None or 1: the first)."""
    name = f"{workload_point(resolved, concurrency)}{REPEAT_MARK}{repeat}"
    return f"{name}{COPY_MARK}{copy}" if copy is not None and copy > 1 else name


@register_scenario
class FixedSeqLen(Scenario):
    """Random prompts of fixed input/output lengths, `num-prompts` (10 × conc) after 2 × conc warm-ups."""

    id = ScenarioId.FIXED_SEQ_LEN
    gate = GateProfile("fixed", max_short_output_ratio=0.05)
    salts_points = True

    def resolve(self, spec: WorkloadSpec, *, common: Mapping[str, Any], entry: Mapping[str, Any],
                model_prefix: str, spec_decoding: bool) -> ResolvedWorkload:
        conc = entry["conc"]
        single = conc if isinstance(conc, int) else None
        per_conc = spec.num_prompts_per_conc or DEFAULT_PROMPTS_PER_CONC
        num_prompts = spec.num_prompts if spec.num_prompts is not None else (per_conc * single if single else None)
        num_warmups = spec.num_warmups if spec.num_warmups is not None else (
            DEFAULT_WARMUPS_PER_CONC * single if single else None)
        return ResolvedWorkload.model_validate({
            **common,
            "scenario": self.id,
            # Chat-templated prompts when speculative decoding is on: real acceptance needs real-looking text.
            "use-chat-template": spec.use_chat_template if spec.use_chat_template is not None else spec_decoding,
            "isl": entry["isl"],
            "osl": entry["osl"],
            "num-prompts": num_prompts,
            "num-prompts-per-conc": None if spec.num_prompts is not None else per_conc,
            "range-ratio": spec.range_ratio if spec.range_ratio is not None else DEFAULT_RANGE_RATIO,
            "num-warmups": num_warmups,
        })

    def load(self, resolved: ResolvedWorkload, *, concurrency: int, job_duration: int | None = None) -> Load:
        num = resolved.num_prompts or (resolved.num_prompts_per_conc or DEFAULT_PROMPTS_PER_CONC) * concurrency
        # The workload marks its first `num_warmups` prompts as warm-up (InferenceX: 2 × conc); the client must spend
        # them in its warm-up phase, or they would eat the profiling budget and the job would measure fewer prompts.
        warmups = resolved.num_warmups if resolved.num_warmups is not None else DEFAULT_WARMUPS_PER_CONC * concurrency
        return Load(concurrency=concurrency, num_requests=num, warmup_requests=warmups)

    def build(self, resolved: ResolvedWorkload, *, concurrency: int, point: str | None = None,
              copy: int | None = None, **overrides: Any) -> Workload:
        from llmsweep.workload.build import fixed_config
        from llmsweep.workload.fixed import FixedLengthWorkload

        overrides.setdefault("api", self.api(resolved))
        overrides.setdefault("seed", self.seed(resolved, point, concurrency, copy))
        return FixedLengthWorkload(fixed_config(resolved, concurrency=concurrency, **overrides))


@register_scenario
class AgenticCoding(Scenario):
    """AgentX replay of a Weka-format agentic corpus with subagents, for a profiling window (default 3600 s)."""

    id = ScenarioId.AGENTIC_CODING
    gate = GateProfile("agentic", min_submission_s=MIN_SUBMISSION_S, max_short_output_ratio=0.10)

    def resolve(self, spec: WorkloadSpec, *, common: Mapping[str, Any], entry: Mapping[str, Any],
                model_prefix: str, spec_decoding: bool) -> ResolvedWorkload:
        traces = spec.traces or TraceSource(hf=CORPUS_DATASETS[default_corpus(model_prefix)])
        return ResolvedWorkload.model_validate({
            **common,
            "scenario": self.id,
            "use-chat-template": spec.use_chat_template if spec.use_chat_template is not None else True,
            "traces": traces,
            "duration": spec.duration if spec.duration is not None else entry["duration"],
            "warmup-per-lane": spec.warmup_per_lane if spec.warmup_per_lane is not None else DEFAULT_WARMUP_PER_LANE,
        })

    def api(self, resolved: ResolvedWorkload) -> Api:
        return "chat"

    def load(self, resolved: ResolvedWorkload, *, concurrency: int, job_duration: int | None = None) -> Load:
        duration = resolved.duration or job_duration or DEFAULT_AGENTIC_DURATION_SECONDS
        # each lane's first play sends a primer and then its warm-up turns, one after another (`workload.agentic`)
        per_lane = resolved.warmup_per_lane if resolved.warmup_per_lane is not None else DEFAULT_WARMUP_PER_LANE
        return Load(concurrency=concurrency, duration_s=float(duration), warmup_per_lane=1 + per_lane)

    def build(self, resolved: ResolvedWorkload, *, concurrency: int, point: str | None = None,
              copy: int | None = None, **overrides: Any) -> Workload:
        # Agentic replays salt every run's prompts themselves (a run-wide marker); the seed (lane→trace order, t*,
        # block text) moves only for a repeat. The corpus is not sampled with it: a synthetic corpus has its own seed.
        from llmsweep.workload.agentic import AgenticWorkload
        from llmsweep.workload.build import agentic_config

        overrides.setdefault("seed", self.seed(resolved, point, concurrency, copy))
        return AgenticWorkload(agentic_config(resolved, concurrency=concurrency, **overrides))


@register_scenario
class MooncakeReplay(Scenario):
    """A Mooncake trace, every row once: `conc` rows in flight (closed loop), or on the rows' timestamps."""

    id = ScenarioId.MOONCAKE_REPLAY
    gate = GateProfile("replay", max_short_output_ratio=0.10)

    def resolve(self, spec: WorkloadSpec, *, common: Mapping[str, Any], entry: Mapping[str, Any],
                model_prefix: str, spec_decoding: bool) -> ResolvedWorkload:
        if spec.replay is None:
            raise ConfigError("a mooncake-replay job needs `workload.replay`",
                              fix="add `replay: {mooncake: <file.jsonl>}` to the recipe's workload block")
        return ResolvedWorkload.model_validate({
            **common,
            "scenario": self.id,
            "use-chat-template": spec.use_chat_template if spec.use_chat_template is not None else True,
            "replay": spec.replay,
            "duration": spec.duration,
        })

    def load(self, resolved: ResolvedWorkload, *, concurrency: int, job_duration: int | None = None) -> Load:
        """Closed loop at `concurrency` (the rows once, shared by the lanes), or, with `replay.timestamps`, each row
        at its own time; for `duration` when given, else until the rows run out — `max-rows` of them at most, which
        bounds a closed-loop replay's length (`Load.most_requests`; on the timestamps the length is the trace's)."""
        replay = resolved.replay
        timestamps = replay is not None and replay.timestamps
        return Load(concurrency=None if timestamps else concurrency,
                    duration_s=float(resolved.duration) if resolved.duration else None,
                    most_requests=replay.max_rows if replay is not None and not timestamps else None)

    def build(self, resolved: ResolvedWorkload, *, concurrency: int, point: str | None = None,
              copy: int | None = None, **overrides: Any) -> Workload:
        # Mooncake replays prefix every prompt with a run-wide marker (`cache_bust`); the seed (block text) moves only
        # for a repeat.
        from llmsweep.workload.mooncake import MooncakeConfig, MooncakeWorkload

        replay = resolved.replay
        if replay is None:
            raise ConfigError("a mooncake-replay workload needs a trace", fix="set workload.replay in the recipe")
        values: dict[str, Any] = {
            "source": replay.mooncake, "api": self.api(resolved), "block_size": replay.block_size,
            "speedup": replay.speedup, "max_rows": replay.max_rows,
            "seed": self.seed(resolved, point, concurrency, copy), "tokenizer": resolved.tokenizer,
        }
        return MooncakeWorkload(MooncakeConfig(**{**values, **overrides}))


def scenario_of(resolved: ResolvedWorkload) -> Scenario:
    """The scenario a resolved workload belongs to."""
    return get_scenario(resolved.scenario)

