"""Trust, then verify: compare what the engine reports it did with what the job asked for.

Values come only from the server's `/metrics` scrapes (already folded into the summary's `server_metrics` block by
the metrics room), never from the job itself. A disagreement marks the result invalid with a reason a reader can act
on; a check whose value the engine does not expose fails (unchecked is not passed), and one with too little evidence
in the window (a smoke run) is recorded as inconclusive: the result is at most smoke and says why, never a pass that
would look like proof. The KV pool a launch pins is a setting of the launch, not the figure the point is labelled by
(an acceptance length, a disaggregated deployment): an engine that reports no pool leaves it inconclusive, still no
pass (:func:`kv_pool_check`). The acceptance length's allowance widens with the sampling error its verify steps imply
(:func:`acceptance_check` derives the bound).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmsweep.engine_ids import SGLANG, SIM, VLLM
from llmsweep.errors import ResultError, ResultInputError
from llmsweep.execute.artifacts import JOB_FILE, RECORDS_FILE, RUN_FILE, SUMMARY_FILE, write_json
from llmsweep.jsonline import load_json_file
from llmsweep.metrics.gates import GateConfig
from llmsweep.metrics.model import MEASURED, Readback, ReadbackCheck, SpecDecode, Summary
from llmsweep.metrics.summary import rejudge
from llmsweep.plan import Job
from llmsweep.words import count_of

DEFAULT_AL_TOLERANCE = 0.10
DEFAULT_AL_Z = 3.0
DEFAULT_AL_MAX_ALLOWANCE = 0.25
DEFAULT_MIN_VERIFY_STEPS = 100
DEFAULT_KV_MIN_TRANSFERRED = 0.5


class ReadbackSettings(BaseModel):
    """How the read-back gate judges a realised acceptance length (the rule is :func:`acceptance_check`'s)."""

    model_config = ConfigDict(extra="forbid")

    al_tolerance: float = Field(
        default=DEFAULT_AL_TOLERANCE, ge=0,
        description="Least allowed |realised − pinned| acceptance length, tokens/step: what is not sampling error "
        "(each request's first token and cut last step) stays within it. The gate allows more when the verify "
        "steps' sampling error needs it: max(this, z × standard error).",
    )
    al_z: float = Field(
        default=DEFAULT_AL_Z, gt=0,
        description="Standard errors of the realised acceptance length the read-back gate allows: 3 fails a "
        "correctly pinned engine in at most ~0.3% of points (normal approximation, worst-case spread).",
    )
    al_max_allowance: float = Field(
        default=DEFAULT_AL_MAX_ALLOWANCE, gt=0,
        description="Widest |realised − pinned| allowance, tokens/step, at which a pass still counts (or "
        "`al_tolerance`, where that is wider): a point whose sampling error needs more is too short to judge "
        "(inconclusive, never valid) unless it is off by more than even that wide allowance (failed).",
    )
    min_verify_steps: int = Field(
        default=DEFAULT_MIN_VERIFY_STEPS,
        ge=0,
        description="Fewest verify steps in the window for a verdict: a per-step mean over fewer (a smoke run of "
        "short agentic turns) is dominated by first tokens and max_tokens cuts, not by the acceptance the engine ran.",
    )
    kv_min_transferred: float = Field(
        default=DEFAULT_KV_MIN_TRANSFERRED, ge=0, le=1,
        description="A real engine's disaggregated job: least share of the decode workers' prompt tokens whose KV "
        "must have arrived by transfer in the window (vLLM's `prompt_tokens_by_source`); below it the decode side "
        "recomputed the prompt and the point is no disaggregated result. Near 1 - 1/isl is expected (the last "
        "partial block is computed where it decodes).",
    )


def acceptance_allowance(expected: float, k: float, steps: float, settings: ReadbackSettings) -> tuple[float, float]:
    """(SE, allowance) of a realised acceptance length over `steps` verify steps of draft length `k` around the
    `expected` one: SE = √((AL − 1)(K + 1 − AL) / n), the worst case on [1, K + 1] (`acceptance_check` says why), and
    the allowance max(al_tolerance, al_z × SE)."""
    mean_accepted = min(max(expected - 1.0, 0.0), k)
    se = math.sqrt(mean_accepted * (k - mean_accepted) / steps) if steps > 0 else math.inf
    return se, max(settings.al_tolerance, settings.al_z * se)


def acceptance_check(job: Job, summary: Summary, settings: ReadbackSettings) -> ReadbackCheck | None:
    """Realised vs pinned acceptance length, or None when the job's launch pins none (non-spec or eval-only jobs).

    The one home of the rule. The realised AL is a mean over the window's n verify steps of the tokens X each step
    produced; X lies in [1, K + 1] for draft length K. For a correctly pinned engine E[X] = AL (the pinned value),
    and any variable on [1, K + 1] with that mean has Var(X) ≤ (AL − 1)(K + 1 − AL) (the Bhatia–Davis inequality;
    equality when every step accepts all drafts or none). Synthetic acceptance draws each step afresh, so the
    realised AL's standard error is at most SE = √((AL − 1)(K + 1 − AL) / n) whatever distribution the engine
    draws from, and the check allows |realised − pinned| ≤ max(al_tolerance, al_z × SE). K is the larger of the
    job's draft length and the engine's draft tokens per draft (a larger K only widens the bound). With z = 3 a
    correct engine fails at most ~0.3% of points by chance (normal approximation), fewer in practice since the
    bound is the worst case. (The fixed 0.10 alone failed correct MTP K=3 points at AL 3.39 by chance: a third of
    them at 100 verify steps, one in eight at 243, with each draft position accepted independently.)

    Verdicts: failed (`ok` False, the result invalid) when the value is missing or off by more than the allowance;
    passed when within it and the allowance is no wider than `al_max_allowance`; inconclusive (`ok` None: the result
    at most smoke, the reason said) when there are fewer than `min_verify_steps` steps, when the step count or K is
    unknown, or when a pass would rest on an allowance wider than `al_max_allowance`. Every reason states the
    numbers (allowance, SE, K, steps), so the dashboard and the CLI explain the verdict.
    """
    from llmsweep.engines.base import synthetic_acceptance

    pinned_value = synthetic_acceptance(job)  # what the throughput launch spelled (never an eval's server)
    if job.acceptance is None or pinned_value is None:
        return None
    pinned = pinned_value
    spec = summary.server_metrics.spec_decode or SpecDecode()
    realised, steps = spec.acceptance_length, spec.verify_steps
    check = ReadbackCheck(check="acceptance_length", pinned=pinned, realised=realised, tolerance=settings.al_tolerance,
                          verify_steps=steps, source="server /metrics: " + (spec.method or "n/a"), ok=True)
    if realised is None:
        check.ok = False
        check.reason = (
            f"realised acceptance length could not be read back from the server's /metrics (pinned {pinned:.2f}); "
            "the engine may have ignored the synthetic-acceptance setting or exposes no speculative counters"
        )
        return check
    if steps is None:
        check.ok = None
        check.reason = (
            f"realised acceptance length {realised:.3f} (pinned {pinned:.2f}) comes without a verify-step count, so "
            "its sampling error cannot be bounded: no read-back verdict"
        )
        return check
    if steps < settings.min_verify_steps:
        check.ok = None
        check.reason = (
            f"realised acceptance length {realised:.3f} (pinned {pinned:.2f}) rests on {steps:.0f} verify "
            f"steps, fewer than {settings.min_verify_steps}: too few to judge; run longer for a read-back verdict"
        )
        return check
    k = _draft_length(job, spec)
    if k is None:
        check.ok = None
        check.reason = (
            f"realised acceptance length {realised:.3f} (pinned {pinned:.2f}): neither the job nor the engine's "
            "counters give the draft length K, so the sampling error cannot be bounded: no read-back verdict"
        )
        return check
    mean_accepted = min(max(pinned - 1.0, 0.0), k)
    se, allowance = acceptance_allowance(pinned, k, steps, settings)
    check.draft_length, check.standard_error, check.allowance = k, se, allowance
    off = abs(realised - pinned)
    rule = (f"allowed {allowance:.3f} = max(tolerance {settings.al_tolerance:.2f}, {settings.al_z:g} × standard "
            f"error {se:.3f}); SE ≤ √((AL−1)(K+1−AL)/n) for K={k:g} over n={steps:.0f} verify steps")
    if off > allowance:
        check.ok = False
        check.reason = (
            f"realised acceptance length {realised:.3f} differs from the pinned {pinned:.2f} by {off:.3f} (read from "
            f"/metrics), more than the {rule}: the engine is not running the acceptance the job asked for"
        )
    elif allowance > (widest := max(settings.al_max_allowance, settings.al_tolerance)):
        # a tolerance asked wider than the default bound is the widest pass the user accepts: were the bound below
        # it, every allowance would exceed the bound and no count of verify steps could give a verdict
        needed = math.ceil((settings.al_z / widest) ** 2 * mean_accepted * (k - mean_accepted))
        check.ok = None
        check.reason = (
            f"realised acceptance length {realised:.3f} (pinned {pinned:.2f}) is within the {rule}, but that is "
            f"wider than the {widest:.2f} a read-back pass may allow: too short to judge; about "
            f"{needed} verify steps give a verdict"
        )
    else:
        check.reason = f"realised acceptance length {realised:.3f} matches the pinned {pinned:.2f}: {rule}"
    return check


def _draft_length(job: Job, spec: SpecDecode) -> float | None:
    """The most draft tokens a verify step can accept: the larger of the job's K and the engine's draft tokens per
    draft (a bound on X − 1 must not be too small; one that is too large only widens the allowance)."""
    known = []
    if job.acceptance is not None and job.acceptance.k is not None:
        known.append(float(job.acceptance.k))
    if spec.draft_tokens is not None and spec.drafts:
        known.append(spec.draft_tokens / spec.drafts)
    return max(known) if known else None


def kv_transfer_check(summary: Summary, settings: ReadbackSettings) -> ReadbackCheck | None:
    """Whether a real engine's disaggregated job moved its KV from prefill to decode, or None for any other job (one
    server, or the simulator's deployment, whose modelled transfer is its own).

    The one home of the rule. From the decode workers' `/metrics` over the window (`roles.decode.metrics`): the
    share of their prompt tokens whose KV arrived by transfer (vLLM's `prompt_tokens_by_source{source=
    "external_kv_transfer"}`) must be at least `kv_min_transferred`, no NIXL transfer may have failed, and the
    router (llmsweep's, in front of the workers) may have refused no prefill answer for handing over no KV. A
    decode side that recomputed the prompt served an aggregated point under a disaggregated label: failed. A count
    the decode workers do not export fails too (unchecked is not passed); a window without prompt tokens is
    inconclusive."""
    deployment = summary.deployment
    if deployment is None or deployment.engine in (None, SIM.id):
        return None
    roles = summary.roles or {}
    decode = roles["decode"].metrics if "decode" in roles else None
    router = roles["router"].metrics if "router" in roles else None
    minimum = settings.kv_min_transferred
    check = ReadbackCheck(check="kv_transfer", pinned=minimum, tolerance=0.0, ok=True,
                          source=f"decode workers' /metrics: prompt tokens by source ({deployment.kv_transfer})")
    moved = decode.prompt_tokens_transferred if decode is not None else None
    prompt = decode.prompt_tokens if decode is not None else None
    failed = decode.kv_failed_transfers if decode is not None else None
    refused = router.refused_no_kv if router is not None else None
    problems = []
    if refused:
        problems.append(f"the router refused {count_of(round(refused), 'prefill answer')} that handed over no KV")
    if failed:
        problems.append(f"{count_of(round(failed), 'KV transfer')} failed on the decode workers "
                        "(vllm:nixl_num_failed_transfers)")
    if moved is None:
        problems.insert(0, "the decode workers' /metrics give no prompt tokens by source (external_kv_transfer) in "
                        "the window: no proof the KV arrived by transfer rather than being recomputed")
    elif prompt:
        share = moved / prompt
        check.realised = share
        computed = decode.prompt_tokens_computed if decode is not None else None
        if share < minimum:
            problems.insert(0, f"decode recomputed the prompt: {moved:.0f} of its {prompt:.0f} prompt tokens "
                            f"({share:.1%}) arrived by KV transfer, fewer than {minimum:.0%}"
                            + (f" ({computed:.0f} computed locally)" if computed is not None else ""))
    elif not problems:
        check.ok = None
        check.reason = "the decode workers took in no prompt tokens in the window: the KV transfer cannot be judged"
        return check
    if problems:
        check.ok = False
        check.reason = "; ".join(problems)
        return check
    assert moved is not None and prompt and check.realised is not None
    check.reason = (f"{moved:.0f} of the decode workers' {prompt:.0f} prompt tokens ({check.realised:.1%}) arrived by "
                    f"KV transfer (at least {minimum:.0%}); failed transfers: "
                    f"{'not exported' if failed is None else f'{failed:.0f}'}; prefill answers refused for no KV: "
                    f"{'not reported' if refused is None else f'{refused:.0f}'}")
    return check


POOL_PINS: dict[str, str] = {VLLM.id: "--num-gpu-blocks-override", SGLANG.id: "--max-total-tokens"}
"""The flag of each real engine whose launch pins the KV pool the read-back confirms (:func:`kv_pool_check`): vLLM's
replaces its profiled block count on each engine (`v1/core/kv_cache_utils.py` `may_override_num_blocks`); SGLang's
caps each DP rank's profiled pool (`min(profiled, N)`)."""


def kv_pool_check(job: Job, summary: Summary) -> ReadbackCheck | None:
    """Whether a real engine ran the KV pool its launch pins (:data:`POOL_PINS`), or None when the launch pins none,
    for a simulated point (the simulator's pool is what it sizes) and for an eval-only job.

    The one home of the rule. The pin is read from the launch as the engine's parser reads its flags
    (`Adapter.recipe_value`: aliases, `_`/`-`, a unique prefix, the last of two), the pool from the engines' `/metrics`
    (`server_metrics.kv_cache.pool_tokens` over `pool_engines`, `metrics.server`). vLLM: each engine's pool must be
    the override's blocks of the launch's block (`engines.sim.engine_page`: `--block-size`, else vLLM's default);
    a pool a whole number of times that, or a whole fraction of it, is inconclusive (vLLM divides its figure among
    the KV cache groups of a sliding-window model, multiplies it by decode context parallelism, and picks another
    block for some MLA backends where the launch sets none), and so is any other for a hybrid model (its blocks are
    sized for the linear-attention state: Qwen3-Next's 560 tokens) or one the model catalog lacks; any other fails.
    SGLang: the pool must be at most the cap on each DP rank that reported. A pool the engines do not report is
    inconclusive."""
    from llmsweep.catalog.models import find_model
    from llmsweep.engines import ADAPTERS
    from llmsweep.engines.base import in_launch, token_count

    flag = POOL_PINS.get(job.engine or "")
    if flag is None or summary.source != MEASURED or job.eval_only:
        return None
    written = ADAPTERS[job.engine or ""].recipe_value(job, flag)
    pinned = token_count(written[1]) if written is not None and in_launch(written[1]) else None
    if pinned is None or pinned < 1:  # none, or one the parser refuses at start-up (the policy refuses it first)
        return None
    pin = f"{flag} {pinned}"
    kv = summary.server_metrics.kv_cache
    pool, engines = (kv.pool_tokens, kv.pool_engines or 1) if kv is not None else (None, 1)
    if job.engine == VLLM.id:
        from llmsweep.engines.sim import engine_page

        page = engine_page(job, VLLM.id)
        block = page.tokens if page is not None else None
        source = "server /metrics: vllm:cache_config_info (kv_cache_size_tokens, else num_gpu_blocks x block_size)"
    else:
        block = 1
        source = "server /metrics: sglang:max_total_num_tokens"
    check = ReadbackCheck(check="kv_pool", pinned=float(pinned * (block or 1)), tolerance=0.0, ok=None, source=source)
    if pool is None:
        check.reason = (f"the engine's /metrics report no KV pool, so the pool {pin} pins is unconfirmed "
                        f"(read from {source.removeprefix('server /metrics: ')})")
        return check
    each = Fraction(round(pool), engines)
    check.realised = float(each)
    said = (f"{pool:,.0f} tokens of KV pool" + (f" over {count_of(engines, 'engine')}, {float(each):,.0f} each"
                                                 if engines > 1 else ""))
    if job.engine == SGLANG.id:
        check.ok = each <= pinned
        check.reason = (f"the engines reported {said}: " + (
            f"within the {pinned:,} tokens {pin} caps each DP rank at" if check.ok else
            f"more than the {pinned:,} tokens {pin} caps each DP rank at: the engine did not run the pinned pool"))
        return check
    if block is None:
        check.reason = (f"the engines reported {said}, but the launch's block size is no whole number of tokens: "
                        f"the pool {pin} pins cannot be counted")
        return check
    expected = pinned * block
    ratio = each / expected
    whole = ratio > 0 and 1 in (ratio.denominator, ratio.numerator)
    model = find_model(job.model)
    uncounted = model is None or model.is_hybrid  # its pool in blocks vLLM sizes for the linear-attention state
    check.ok = True if ratio == 1 else None if whole or uncounted else False
    if check.ok:
        check.reason = f"the engines reported {said}: {pin} blocks of {block} tokens, as pinned"
    elif check.ok is None:
        times = (f"{ratio.numerator} times" if ratio.denominator == 1 else f"1/{ratio.denominator} of" if whole
                 else f"{float(ratio):.3g} times")
        why = (f"{job.model}'s linear-attention layers make vLLM size its blocks for their state" if uncounted and
               model is not None else f"{job.model} is not in the model catalog" if uncounted else
               "vLLM's figure is per KV cache group of a sliding-window model, times decode context parallelism, "
               "or in another block an MLA backend picks where --block-size is unset")
        check.reason = (f"the engines reported {said}, {times} the {expected:,} tokens of {pin} blocks of {block}: "
                        f"{why}, so the pool cannot be judged from the tokens it reports; the engine's start-up log "
                        "says its \"GPU KV cache size\"")
    else:
        check.reason = (f"the engines reported {said}, not the {expected:,} tokens of {pin} blocks of {block} on "
                        "each engine: the engine did not run the pinned pool (vLLM's override replaces its profiled "
                        "block count)")
    return check


def apply_readback(job: Job, summary: Summary, settings: ReadbackSettings) -> Summary:
    """Set the summary's `readback` block; a failed check makes the verdict invalid, an inconclusive one leaves it at
    most smoke, each with its reason among the verdict's reasons (what the dashboard and `run`'s table show)."""
    checks = [c for c in (acceptance_check(job, summary, settings), kv_transfer_check(summary, settings),
                          kv_pool_check(job, summary)) if c is not None]
    summary.readback = Readback(checks=checks, ok=all(c.ok is not False for c in checks))
    failed = [c.reason or c.check for c in checks if c.ok is False]
    inconclusive = [f"read-back inconclusive: {c.reason or c.check}" for c in checks if c.ok is None]
    if failed:
        summary.validity.verdict = "invalid"
        summary.validity.reasons.extend(failed)
    if inconclusive:
        # a setting the run could not confirm is no label to publish under: at most smoke, with the reason
        if summary.validity.verdict == "valid":
            summary.validity.verdict = "smoke"
        summary.validity.reasons.extend(inconclusive)
    return summary


def summarise_job(job_dir: Path | str, *, settings: ReadbackSettings | None = None, write: bool = True) -> Summary:
    """The one home of a job's verdict: re-summarise its folder and apply every gate from what it recorded.

    The client's gates come from `run.json` (gates, client figures, provenance, as `summarise_dir` reads them); the
    read-back checks from `job.json` (the job's pinned settings), with the tolerances the run recorded in `run.json`
    (`readback`). `llmsweep run` calls this with its settings (and records them); `llmsweep summarize` calls it on the
    folder afterwards and reaches the same verdict. A folder without `job.json` (a `llmsweep bench` run) pins nothing.
    A folder whose raw files are a slice of what its run recorded (evidence packed for a repository) cannot give its
    run's window back: its stored summary's figures over that window are judged again instead (`rejudge`), with a
    warning that says so (`_slice_note`); with no stored summary it is refused.
    """
    from llmsweep.client import summarise_dir

    job_dir = Path(job_dir)
    run_path = job_dir / RUN_FILE
    run_info = _read_object(run_path)
    if settings is not None:
        run_info["readback"] = settings.model_dump(mode="json")
        write_json(run_path, run_info)
    else:
        from llmsweep.client.folder import recorded_settings

        recorded = run_info.get("readback") is not None  # (none, or null: the defaults)
        settings = (recorded_settings(run_path, run_info, "readback", ReadbackSettings, "read-back setting")
                    if recorded else None) or ReadbackSettings()
    job_path = job_dir / JOB_FILE
    job: Job | None = None
    if job_path.is_file():
        try:
            job = Job.model_validate(_read_object(job_path))
        except ValidationError as exc:
            raise ResultInputError(f"{job_path} is not a job this llmsweep reads "
                                   f"({count_of(exc.error_count(), 'problem')}: "
                                   f"{exc.errors()[0]['msg']})",
                                   fix="summarize it with the llmsweep release that ran it, or re-run the job") from exc
    if job is not None and job.eval_only:
        from llmsweep.evals.results import eval_only_summary

        summary = eval_only_summary(run_info)  # no throughput point: the eval is the result
    else:
        stored = _stored_summary(job_dir / SUMMARY_FILE)  # read before anything is written over it
        summary = summarise_dir(job_dir, write=False)
        if (sliced := _slice_note(job_dir, run_info, summary, stored)) is not None:
            if stored is None:
                raise ResultError(f"cannot re-summarise {job_dir}: {sliced}, and it holds no {SUMMARY_FILE} of the "
                                  "run's to re-judge", fix="re-summarise the job folder the run wrote (all of "
                                  f"{RECORDS_FILE} and its /metrics scrapes)")
            summary = rejudge(stored, _gates(run_path, run_info), note=f"re-judged from the figures {SUMMARY_FILE} "
                              f"measured over the run's window, not re-summarised: {sliced}")
    if job is not None:
        from llmsweep.evals.results import attach

        summary = attach(apply_readback(job, summary, settings), job, job_dir)
    # run.json's notes of what happened to the job beside its load (`INVALIDATING`): invalid, whatever its gates say
    said = [reason(note) for key, reason in INVALIDATING.items() if (note := run_info.get(key))]
    if said:
        summary = summary.model_copy(deep=True)
        summary.validity.verdict = "invalid"
        summary.validity.reasons[:0] = said
    if write:
        summary.write(job_dir / SUMMARY_FILE)
    return summary


SUSPENDED = "suspended"
"""`run.json`'s note that Slurm suspended the job's batch job while it ran (the Slurm driver writes it,
`slurm.judge_suspended`): the client's clocks ran on through the pause, so the summary is invalid whatever its gates
say; the note is the reason, with its fix."""

PAUSED = "paused"
"""`run.json`'s note that the process measuring the job was stopped (Ctrl-Z, SIGSTOP) and continued while its load
ran (`judge_paused` writes it, from `signals.watching_pauses`, for `run`'s jobs, `bench`, `al collect`'s cells and
`peer crosscheck`'s runs): the client's clocks and the server ran on through the pause, so the summary is invalid
whatever its gates say; the note is the reason, with its fix."""

def judge_paused(job_dir: Path, pauses: list[float] | tuple[float, ...], *, again: str,
                 settings: ReadbackSettings | None = None) -> Summary | None:
    """A measurement during which the measuring process was stopped and continued (`pauses`: how long each stop
    lasted, from `signals.watching_pauses`), judged invalid: `run.json` gets the `PAUSED` note (so `llmsweep
    summarize` says the same) and the folder is re-summarised. `again`: how to measure it again (`run --resume`, a
    bench with --force). None when nothing paused or the folder holds no summary."""
    if not pauses or not (job_dir / SUMMARY_FILE).is_file():
        return None
    try:
        info = json.loads((job_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    info = info if isinstance(info, dict) else {}
    lengths = " + ".join(f"{s:g} s" for s in pauses)
    info[PAUSED] = (f"llmsweep was stopped for {lengths} (Ctrl-Z, SIGTSTP or SIGSTOP, then SIGCONT) while this job "
                    f"measured: its timings include the pause; {again}")
    write_json(job_dir / RUN_FILE, info)
    return summarise_job(job_dir, settings=settings)


SERVER_DIED = "server_died"
"""`run.json`'s note that the job's server was found dead when the job's load (or eval) ended (the lifecycle writes
it): the job's summary is invalid whatever its gates say."""

INVALIDATING: dict[str, Callable[[Any], str]] = {
    SUSPENDED: str,
    PAUSED: str,
    SERVER_DIED: lambda died: f"the server {died}: its records may miss what it never answered",
}
"""run.json's notes that make a job's summary invalid, each with the reason it gives (in this order, before the
gates' reasons)."""


def _stored_summary(path: Path) -> Summary | None:
    """The summary the folder holds (what its run, or the last `summarize`, wrote), or None when there is none or it
    is not one this release reads (then nothing is compared with it)."""
    if not path.is_file():
        return None
    try:
        return Summary.load(path)
    except (ResultError, ValidationError):
        return None


def _slice_note(job_dir: Path, run_info: dict[str, Any], summary: Summary, stored: Summary | None) -> str | None:
    """Why a folder's raw files are a slice of what its run recorded, or None when they are whole.

    A summary is a function of the whole of `records.jsonl` (its profile window runs from the first profiling send to
    the last end) and of the `/metrics` scrapes that bracket that window. Evidence packed for a repository keeps the
    first records and the first and last scrape (`docs/gpu.md` §5): re-summarised as if whole, its window ended at the
    slice's last request, the scrapes that opened and closed the run's window were gone, and the acceptance read-back
    and the gates judged a window the run never measured ("could not be read back", a valid point made invalid).
    The counts compared are the client's (`run.json`: requests each worker started) and the scrapes the stored
    summary read from the same file when it was written.
    """
    from llmsweep.client.files import SERVER_METRICS_FILE

    workers = (run_info.get("client") or {}).get("workers") or []
    started = sum(int(w.get("started", 0)) for w in workers if isinstance(w, dict))
    problems = []
    # a line that is no record (damaged in place) is still a line the client wrote: counted, it keeps the folder whole
    # and the summary judges it (`requests.unreadable` makes the point invalid), where taken for a slice it was lost
    held = summary.requests.total + summary.requests.unreadable
    if started and held < started:
        problems.append(f"{RECORDS_FILE} holds {held} of the {started} requests the client started ({RUN_FILE})")
    if stored is not None:
        had = stored.server_metrics.scrapes + stored.server_metrics.scrape_errors
        has = summary.server_metrics.scrapes + summary.server_metrics.scrape_errors
        if has < had:
            problems.append(f"{SERVER_METRICS_FILE} holds {has} of the {had} /metrics scrapes its {SUMMARY_FILE} "
                            "was computed from")
    if not problems:
        return None
    return f"{job_dir.name} is a slice of what its run recorded: " + "; ".join(problems)


def _gates(run_path: Path, run_info: dict[str, Any]) -> GateConfig:
    """The gates the run recorded in `run.json` (the defaults where it recorded none, as `summarise_dir` reads it)."""
    from llmsweep.client.folder import recorded_gates

    return recorded_gates(run_path, run_info) or GateConfig()


def _read_object(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        doc = load_json_file(path)  # a job folder's run.json or job.json, perhaps saved again by an editor
    except (OSError, ValueError) as exc:
        raise ResultInputError(f"cannot read {path}: {exc}", fix="restore the file or re-run the job") from exc
    if not isinstance(doc, dict):
        raise ResultInputError(f"{path} is not a JSON object", fix="restore the file or re-run the job")
    return doc
