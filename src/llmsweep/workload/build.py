"""From a job's resolved workload to the workload configs the client (or the simulator) runs.

With `llmsweep.workload.scenario` (whose scenarios call these), the one place that knows both the recipe-side
`ResolvedWorkload` (spec) and the workload configs, so the client keeps knowing nothing of recipes. InferenceX
defaults were already filled in by the planner (range ratio 0.8, 10 × conc prompts, 2 × conc warm-ups, 10 warm-up
requests per lane); here they become configs.
"""

from __future__ import annotations

from typing import Any

from llmsweep.errors import ConfigError
from llmsweep.spec.workload import CUT_256K_TOKENS, ResolvedWorkload, SyntheticTraces, TraceSource
from llmsweep.workload.agentic import AgenticConfig
from llmsweep.workload.base import Api, Workload
from llmsweep.workload.fixed import FixedLengthConfig
from llmsweep.workload.traces.synth import FULL_SCALE_ISL, SynthProfile

_FROM_JOB = object()


def fixed_config(
    resolved: ResolvedWorkload, *, concurrency: int, api: Api = "completions", tokenizer: Any = _FROM_JOB,
    **overrides: Any,
) -> FixedLengthConfig:
    """The fixed-length config of one concurrency point. `tokenizer=None` picks the built-in tokenizer."""
    if resolved.isl is None or resolved.osl is None:
        raise ConfigError("a fixed-seq-len workload needs isl and osl", fix="set isl/osl in the recipe's seq-len list")
    num_prompts = resolved.num_prompts or (resolved.num_prompts_per_conc or 10) * concurrency
    values: dict[str, Any] = {
        "isl": resolved.isl,
        "osl": resolved.osl,
        "api": api,
        "num_prompts": num_prompts,
        "num_warmups": resolved.num_warmups if resolved.num_warmups is not None else 2 * concurrency,
        "range_ratio": resolved.range_ratio if resolved.range_ratio is not None else 0.8,
        "seed": resolved.seed,
        "tokenizer": resolved.tokenizer if tokenizer is _FROM_JOB else tokenizer,
        "use_chat_template": resolved.use_chat_template,
    }
    return FixedLengthConfig(**{**values, **overrides})


def longest_request(traces: TraceSource) -> tuple[int, str] | None:
    """(tokens, what says so) the longest request a trace source sends may reach, where the source itself says: a
    synthetic corpus its `max-isl` (default: the full-scale 1M-token shape), a 256k corpus (an AgentX loader or
    dataset id ending in 256k) its cut; None for another corpus or a local file (only reading it would tell)."""
    if traces.synthetic is not None:
        said = ("its synthetic max-isl" if traces.synthetic.max_isl else
                "synthetic traces without a max-isl, which take the full-scale shape")
        return _max_isl(traces.synthetic), said
    if traces.hf is not None and traces.hf.lower().endswith("256k"):
        return CUT_256K_TOKENS, f"{traces.hf}'s 256k cut (in + out)"
    return None


def _max_isl(s: SyntheticTraces) -> int:
    return s.max_isl or FULL_SCALE_ISL


def synthetic_profile(traces: TraceSource) -> SynthProfile | None:
    """The generator profile of a synthetic trace source (None for a file or a dataset)."""
    s = traces.synthetic
    if s is None:
        return None
    return SynthProfile(
        traces=s.traces, seed=s.seed, max_isl=_max_isl(s), max_osl=s.max_osl,
        subagents=s.subagents, **({"max_main_turns": max(3, s.max_turns)} if s.max_turns else {}),
    )


def _trace_source(traces: TraceSource) -> tuple[str, SynthProfile | None]:
    profile = synthetic_profile(traces)
    if profile is not None:
        return "synthetic", profile
    return (traces.hf or traces.path or ""), None


def agentic_config(
    resolved: ResolvedWorkload, *, concurrency: int, tokenizer: Any = _FROM_JOB, **overrides: Any
) -> AgenticConfig:
    """The agentic replay config of one concurrency point (AgentX: t* in [0.25, 0.75], 300 s idle cap)."""
    if resolved.traces is None:
        raise ConfigError("an agentic-coding workload needs a trace source", fix="set workload.traces in the recipe")
    source, profile = _trace_source(resolved.traces)
    values: dict[str, Any] = {
        "source": source,
        "concurrency": concurrency,
        "seed": resolved.seed,
        "tokenizer": resolved.tokenizer if tokenizer is _FROM_JOB else tokenizer,
        "warmup_requests_per_lane": resolved.warmup_per_lane if resolved.warmup_per_lane is not None else 10,
    }
    if profile is not None:
        values["synthetic"] = profile
    if resolved.traces.revision is not None:
        values["revision"] = resolved.traces.revision
    return AgenticConfig(**{**values, **overrides})


def build_workload(resolved: ResolvedWorkload, *, concurrency: int, **kwargs: Any) -> Workload:
    """The workload of one job at one concurrency, built by its scenario (keyword arguments go to
    `Scenario.build`: `point`, then the workload config's fields)."""
    from llmsweep.workload.scenario import scenario_of

    return scenario_of(resolved).build(resolved, concurrency=concurrency, **kwargs)
