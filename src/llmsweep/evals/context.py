"""The eval's context length, answer budget and concurrencies, from the job (InferenceX `setup_eval_context`).

Requested context: ISL + OSL + 256 for a fixed-seq-len job (8k1k: 9,472), else the job's `max-model-len`; an agentic
job asks for the model's native maximum. The request is capped at the native maximum (the model's config.json when
the model is a local directory, else the model catalog's `native_context`); nothing known → `max-model-len` or 16,384.
The answer budget is context − 4,096 above 4,096 tokens, else half the context, capped at 16,384 (8k1k: 5,376).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmsweep.jsonline import load_json_file
from llmsweep.option_spellings import flag as _flag
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId

CONTEXT_MARGIN = 256
FALLBACK_CONTEXT = 16_384
MAX_ANSWER_TOKENS = 16_384
PROMPT_RESERVE = 4_096
_CONFIG_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions")


@dataclass(frozen=True)
class NativeContext:
    """The model's native maximum context and where llmsweep read it."""

    tokens: int
    source: str
    """Where it was read, for a message: `max_position_embeddings in /models/x/config.json`, or `the model catalog's
    MiniMax-M3`."""
    estimate: str | None = None
    """The catalog's note where it marks the length an estimate (`estimates: {native_context: …}`); None where it was
    read from a checkpoint's config.json or the catalog sources it."""


def native_context_of(job: Job) -> NativeContext | None:
    """The model's native maximum context and its source: a local model directory's config.json first, then the model
    catalog (by the job's model, then its model prefix); None when neither says."""
    path = job.serve.model_path if job.serve is not None else None
    for where in (path, job.model):
        if not where:
            continue
        config = Path(where) / "config.json"
        if config.is_file():
            try:
                doc = load_json_file(config)
            except (OSError, ValueError):
                doc = {}
            text = doc.get("text_config") if isinstance(doc.get("text_config"), dict) else {}
            for source, prefix in ((doc, ""), (text, "text_config.")):
                for key in _CONFIG_KEYS:
                    value = source.get(key) if isinstance(source, dict) else None
                    if isinstance(value, int) and value > 0:
                        return NativeContext(value, f"{prefix}{key} in {config}")
    from llmsweep.catalog.models import find_model

    spec = find_model(job.model) or find_model(job.model_prefix)
    if spec is None:
        return None
    return NativeContext(spec.native_context, f"the model catalog's {spec.name}",
                         spec.estimates.get("native_context"))


def native_context(job: Job) -> int | None:
    """The model's native maximum context (:func:`native_context_of`)."""
    native = native_context_of(job)
    return native.tokens if native is not None else None


def eval_context_length(job: Job) -> int:
    """The context length the eval's server starts with and lm-eval's `max_length`."""
    if job.scenario is ScenarioId.FIXED_SEQ_LEN and job.isl and job.osl:
        requested = job.isl + job.osl + CONTEXT_MARGIN
    else:
        requested = job.max_model_len or 0
    native = native_context(job)
    if requested <= 0:
        requested = native or 0
    elif native:
        requested = min(requested, native)
    if requested <= 0:
        requested = job.max_model_len or FALLBACK_CONTEXT
    return requested


def eval_max_tokens(context: int) -> int:
    """Most tokens generated per answer at this context length."""
    budget = context - PROMPT_RESERVE if context > PROMPT_RESERVE else context // 2
    return min(budget, MAX_ANSWER_TOKENS)


def max_tokens_refusal(job: Job, max_tokens: int | None) -> str | None:
    """Why an answer budget (`run --eval-max-tokens`) cannot run against `job`'s eval (None when it fits, or when none
    is asked): one of the eval's whole context or more leaves no token of it for the prompt, so the engine rejects every
    request once the server has started."""
    if max_tokens is None:
        return None
    context = eval_context_length(job)
    if max_tokens < context:
        return None
    default = eval_max_tokens(context)
    budget = _flag("eval_max_tokens")
    return (f"{budget} {max_tokens:,} does not fit the eval's context of {context:,} tokens: no room is left "
            "for the prompt and the engine would reject every request; give a budget that leaves the prompt room (the "
            f"default, {default:,}, leaves {context - default:,} tokens), or drop {budget}")


def eval_concurrencies(job: Job) -> list[int]:
    """lm-eval's `num_concurrent` per run: the row's conc (single node); a multinode row's `eval-conc`, or every one
    of its concs when it evaluates all of them (`eval-all-concs`: one run per value)."""
    if job.multinode:
        if job.eval_all_concs:
            return sorted(set(job.concs))
        return [job.eval_conc or max(job.concs)]
    return [job.concs[0]]


def serving_job(job: Job) -> Job:
    """The job as its server is launched: an eval-only fixed-seq-len job starts at the eval context length."""
    if job.eval_only and job.scenario is ScenarioId.FIXED_SEQ_LEN:
        return job.model_copy(update={"max_model_len": eval_context_length(job)})
    return job
