"""Concurrency slices of a multi-node job, and job ids resolved against a plan (slices included).

A multi-node (disaggregated) job carries its whole concurrency list: one deployment runs every concurrency in turn.
Some commands run only part of that list — the concurrencies a change adds (`llmsweep changes`, `run --changed`),
the points an append-only changelog entry adds, the lowest one under `--trim-conc` — as a *slice*: the same job with
`conc` narrowed (source order kept) and its id recomputed, so results and artifacts name exactly what ran.

A slice is not in the plan, yet it travels by id (`run --job ID` on a CI runner, `run --changed`, `ci matrix
--changed`), so :func:`resolve_job_ids` finds a planned job by its id or as a slice of a planned multi-node job.

Public API:
    curve_key(job) -> str                    (the job without its points: equal keys are one curve)
    slice_concurrencies(job, concs) -> Job    (the job at some of its concurrencies)
    resolve_job_ids(jobs, ids, fix=..., parents=None) -> list[Job]
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job
from llmsweep.plan.names import job_id
from llmsweep.spec.workload import DEFAULT_WARMUPS_PER_CONC
from llmsweep.words import count_of, noun

POINT_FIELDS = frozenset({"conc", "exp_name"})
"""Job fields that name one point of a curve (exp-name embeds the concurrency of an agentic job)."""
_NOT_CURVE = POINT_FIELDS | {"id", "recipe_file", "recipe_fingerprint"}
_LOSSLESS_TAG = re.compile(r"[0-9]+(?:x[0-9]+)*")
_RANGE_TAG = re.compile(r"(?P<low>[0-9]+)-(?P<high>[0-9]+)n(?P<n>[0-9]+)")
_MARK = 918_273_645_546_372_819
"""A concurrency no recipe writes: rendered into an id, it shows where the concurrency tag stands."""
_MAX_CANDIDATES = 100_000
"""Most subsets tried for one `<low>-<high>n<count>` tag (a list of up to ~20 concurrencies stays well under)."""


def curve_key(job: Job, *, exclude: Iterable[str] = ()) -> str:
    """The job without its point fields (conc, exp-name), id, file and fingerprint, as canonical JSON: two jobs with
    the same key are points of one curve (same deployment, same load shape, same everything else).

    A single-concurrency job's workload also holds counts its planner derived from the concurrency — the prompt count
    of `num-prompts-per-conc` × conc, the default warm-ups of 2 × conc — which are left out (the per-conc count
    stays).
    """
    skip = _NOT_CURVE | set(exclude)
    doc = {k: v for k, v in job.model_dump(mode="json").items() if k not in skip}
    workload = doc.get("workload")
    if isinstance(job.conc, int) and isinstance(workload, dict):
        if workload.get("num_prompts_per_conc") is not None:
            workload.pop("num_prompts", None)
        if workload.get("num_warmups") == DEFAULT_WARMUPS_PER_CONC * job.conc:
            workload.pop("num_warmups", None)
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _suffix(job: Job) -> str:
    head, sep, tail = job.id.rpartition("_")
    return tail if sep and head else job.id


def slice_concurrencies(job: Job, concs: Iterable[int]) -> Job:
    """`job` at the concurrencies of `concs` that it has, in the job's own order; its id recomputed.

    The id is the job's with the concurrency tag of the slice (`…_conc64_…`) and the same suffix — so `--trim-conc`'s
    one-point slices and a change's added points read as the job they come from. A slice of more than four values has
    a lossy tag (`8-512n5`), so its suffix also hashes the values, keeping two different slices apart. A multi-node
    row's accuracy eval runs at its `eval-conc`: a slice without that concurrency does not run it (as
    `plan.point.one_point_per_job` splits a job). A single-concurrency job is its own only slice.
    """
    wanted = set(concs)
    kept = list(dict.fromkeys(c for c in job.concs if c in wanted))
    if not kept or wanted - set(kept):
        raise ValueError(f"{sorted(wanted)} is not a non-empty subset of the concurrencies {job.concs} of {job.id}")
    if not isinstance(job.conc, list) or kept == job.concs:
        return job
    update: dict[str, Any] = {"conc": kept}
    if job.run_eval and job.eval_conc is not None and not job.eval_all_concs and job.eval_conc not in kept:
        update.update(run_eval=False, eval_conc=None)
    sliced = job.model_copy(update=update)
    suffix = _suffix(job)
    if len(kept) > 4:  # `names.job_id` writes `<low>-<high>n<count>`, which many subsets share
        suffix = hashlib.sha256(f"{suffix}\0{','.join(map(str, kept))}".encode()).hexdigest()
    new_id = job_id(sliced.matrix_entry(), suffix, eval_only=bool(job.eval_only))
    return sliced.model_copy(update={"id": new_id})


def _conc_tag_of(job: Job, wanted_id: str) -> str | None:
    """The concurrency tag of `wanted_id` if it is `job`'s id with another tag (and any suffix), else None."""
    probe = job_id(job.model_copy(update={"conc": _MARK}).matrix_entry(), _suffix(job),
                   eval_only=bool(job.eval_only))
    before, sep, after = probe.partition(f"_conc{_MARK}_")
    if not sep:  # the id's readable part was cut before its concurrency tag (ids over `names.MAX_ID_HEAD`)
        return None
    prefix, infix = before + "_conc", "_" + after.rpartition("_")[0] + "_"
    if not wanted_id.startswith(prefix):
        return None
    rest = wanted_id[len(prefix):]
    at = rest.rfind(infix)
    return rest[:at] if at > 0 else None


def _slice_named(job: Job, wanted_id: str) -> Job | None:
    """The slice of multi-node `job` whose id is `wanted_id`, or None."""
    tag = _conc_tag_of(job, wanted_id)
    if tag is None:
        return None
    concs = list(dict.fromkeys(job.concs))
    candidates: Iterable[Sequence[int]] = ()
    if _LOSSLESS_TAG.fullmatch(tag):
        candidates = [[int(c) for c in tag.split("x")]]
    elif (m := _RANGE_TAG.fullmatch(tag)) is not None:
        low, high, n = int(m["low"]), int(m["high"]), int(m["n"])
        candidates = itertools.islice(
            (s for s in itertools.combinations(concs, n) if min(s) == low and max(s) == high), _MAX_CANDIDATES)
    for subset in candidates:
        if not set(subset) <= set(concs) or len(set(subset)) != len(subset):
            continue
        sliced = slice_concurrencies(job, subset)
        if sliced.id == wanted_id:
            return sliced
    return None


def _names_a_slice(jobs: Sequence[Job], wanted_id: str) -> bool:
    return any(j.multinode and len(j.concs) > 1 and _slice_named(j, wanted_id) is not None for j in jobs)


def resolve_job_ids(jobs: Sequence[Job], ids: Iterable[str], *, fix: str,
                    parents: dict[str, str] | None = None, selectors: bool = False) -> list[Job]:
    """The jobs named by `ids`, in plan order: a planned job by its id, or a slice of a planned multi-node job by the
    id :func:`slice_concurrencies` gives it (listed right after where its job stands). `parents`, when given, gets
    each slice's id -> the id of the planned job it was cut from (what was found about that job holds for it).
    With `selectors` (what a person typed, `run --job`), an id that names neither may be what `render --job`
    takes: a unique id prefix or exp-name (:func:`~llmsweep.plan.select.select_job`).

    An id that names neither is an error (`fix` says how to get a good one), never a job silently not run.
    """
    wanted = list(dict.fromkeys(ids))
    planned = {j.id for j in jobs}
    if selectors:
        from llmsweep.plan.select import select_job

        wanted = list(dict.fromkeys(i if i in planned or _names_a_slice(jobs, i) else select_job(jobs, i).id
                                    for i in wanted))
    rest = [i for i in wanted if i not in planned]
    slices: dict[int, list[Job]] = {}
    for index, job in enumerate(jobs):
        if not rest:
            break
        if not job.multinode or len(job.concs) < 2:
            continue
        for i in list(rest):
            sliced = _slice_named(job, i)
            if sliced is not None:
                slices.setdefault(index, []).append(sliced)
                rest.remove(i)
                if parents is not None:
                    parents[sliced.id] = job.id
    if rest:
        raise ConfigError(f"{count_of(len(rest), 'job id')} {noun(len(rest), 'is', 'are')} not in the plan of the "
                          f"files given (nor a concurrency slice of a planned multi-node job), e.g. {rest[0]}", fix=fix)
    chosen = set(wanted)
    out: list[Job] = []
    for index, job in enumerate(jobs):
        if job.id in chosen:
            out.append(job)
        out += slices.get(index, [])
    return out
