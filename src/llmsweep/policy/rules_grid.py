"""Concurrency-grid hygiene: no duplicates, ascending, steps wider than the noise floor, and under the cap.

Single-step agentic sampling cannot separate configurations by more than run-to-run noise, and past a SKU's HBM cliff
points only measure thrashing (the seed recipe's revision: "at least 2 apart, hard stop at 16"). A recipe declares its
floor and cap with `policy: {min-conc-step: 2, max-conc: 16}`.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Any

from llmsweep.findings import Finding, Severity
from llmsweep.plan.job import Job
from llmsweep.plan.point import one_point_per_job
from llmsweep.policy.context import Context, entry_path
from llmsweep.policy.registry import rule
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.source import FieldPath
from llmsweep.words import noun

NOISE = "seed PR revision (steps >= 2 apart, hard stop at conc 16); InferenceX spec §8 lesson 12 (noise vs signal)"


def conc_lists(recipe: Recipe) -> Iterator[tuple[tuple[str | int, ...], list[int]]]:
    for path, entry in recipe.search_space_entries():
        if entry.conc_list:
            yield (*path, "conc-list"), list(entry.conc_list)


@rule("grid.duplicate", Severity.WARNING, "A concurrency is listed twice (the job runs twice)",
      "delete the repeated value", NOISE)
def duplicate(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        for path, concs in conc_lists(recipe):
            dups = sorted({c for c in concs if concs.count(c) > 1})
            if dups:
                yield ctx.hit("grid.duplicate", recipe, path, f"conc-list {concs} repeats {dups}")


@rule("grid.duplicate-arm", Severity.WARNING,
      "Two search-space entries (or two scenarios) plan the same job (it runs twice)",
      "delete the repeated concurrency from one of the entries, or the repeated entry or scenario",
      "InferenceX spec §1.5 (lists are emitted verbatim, no dedupe): the generator plans both")
def duplicate_arm(ctx: Context) -> Iterator[Finding]:
    """The same matrix entry planned from two entries — `{tp: 8, conc-list: [2, 4]}` beside `{tp: 8, conc-list:
    [4]}`, or one isl/osl block written twice — is two jobs (their ids differ only in the occurrence hash) measuring
    one point. InferenceX plans both, so llmsweep does too, and warns at the later entry naming the earlier one. A
    repeat inside one list is `grid.duplicate`'s."""
    for recipe in ctx.recipes.values():
        again: dict[FieldPath, dict[FieldPath, list[int]]] = {}
        for path, first, conc in _repeated_points(recipe, ctx):
            again.setdefault(path, {}).setdefault(first, []).append(conc)
        for path, firsts in again.items():
            for first, concs in firsts.items():
                yield ctx.hit("grid.duplicate-arm", recipe, path,
                              f"plans the same {noun(len(set(concs)), 'job')} at conc {sorted(set(concs))} as the "
                              "entry at line "
                              f"{recipe.line_of(first)} (`{recipe.path_of(first)}`): both are planned, so each runs "
                              "twice")


def _repeated_points(recipe: Recipe, ctx: Context) -> Iterator[tuple[FieldPath, FieldPath, int]]:
    """(entry, the earlier entry that planned the same point, its concurrency) for every matrix point a recipe plans
    from two different search-space entries, in the planner's order (full sweep, InferenceX's expansion)."""
    import json

    from llmsweep.errors import LlmsweepError
    from llmsweep.plan.expand import SweepOptions, expand_cells

    try:
        cells = expand_cells({recipe.key: recipe}, ctx.fleet, SweepOptions())
    except LlmsweepError:  # a recipe that does not plan has its own finding (`plan.failed`)
        return
    seen: dict[str, FieldPath] = {}
    for cell in cells:
        concs = cell.entry["conc"] if isinstance(cell.entry["conc"], list) else [cell.entry["conc"]]
        for conc in concs:
            key = json.dumps({**cell.entry, "conc": conc, "scenario": cell.entry_path[1]}, sort_keys=True,
                             default=str)
            first = seen.setdefault(key, cell.entry_path)
            if first != cell.entry_path:
                yield cell.entry_path, first, conc


@rule("grid.unsorted", Severity.WARNING, "A concurrency list is not ascending",
      "sort it ascending so the curve reads left to right", NOISE)
def unsorted(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        for path, concs in conc_lists(recipe):
            if concs != sorted(concs):
                yield ctx.hit("grid.unsorted", recipe, path, f"conc-list {concs} is not ascending")


@rule("grid.min-step", Severity.WARNING, "Concurrency steps finer than the recipe's declared noise floor",
      "space the points at least `policy.min-conc-step` apart", NOISE)
def min_step(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        floor = recipe.policy.min_conc_step if recipe.policy else None
        if floor is None:
            continue
        listed = dict(conc_lists(recipe))
        ranged: dict[tuple[str | int, ...], set[int]] = {}  # a conc-start/conc-end range: the concurrencies planned
        for job in ctx.jobs_of(recipe.key):
            path = entry_path(recipe, job)
            if (*path, "conc-list") not in listed:
                ranged.setdefault((*path, "conc-start"), set()).update(job.concs)
        for path, concs in [*listed.items(), *((p, list(c)) for p, c in ranged.items())]:
            ordered = sorted(set(concs))
            close = [(a, b) for a, b in pairwise(ordered) if b - a < floor]
            if close:
                a, b = close[0]
                yield ctx.hit("grid.min-step", recipe, path,
                              f"conc {a} and {b} are {b - a} apart; policy.min-conc-step is {floor}")


@rule("grid.max-conc", Severity.ERROR, "A concurrency above the recipe's declared cap",
      "drop the points above `policy.max-conc`", NOISE)
def max_conc(ctx: Context) -> Iterator[Finding]:
    # Only the jobs above the cap are refused: the in-cap points of the same entry still run. A recipe that planned
    # no jobs (it failed to plan) still hears about its over-cap entries, naming no job.
    for recipe in ctx.recipes.values():
        cap = recipe.policy.max_conc if recipe.policy else None
        if cap is None:
            continue
        entries = dict(recipe.search_space_entries())
        jobs = ctx.jobs_of(recipe.key)
        by_entry: dict[tuple[str | int, ...], list[Job]] = {}
        for job in jobs:
            if any(c > cap for c in job.concs):
                by_entry.setdefault(entry_path(recipe, job), []).append(job)
        for path, concerned in by_entry.items():
            over = [c for job in concerned for c in job.concs if c > cap]
            for job in concerned:
                hit = ctx.hit("grid.max-conc", recipe, (*path, _conc_field(entries.get(path))),
                              f"conc {over} above policy.max-conc {cap}", job=job)
                if len(job.concs) > 1:  # a multi-node job runs as points: only those above the cap are refused
                    hit = hit.model_copy(update={"jobs": tuple(
                        point.id for point in one_point_per_job([job]) if point.concs[0] > cap)})
                yield hit
        if jobs:
            continue
        for path, entry in entries.items():
            over = [c for c in _declared_concs(entry) if c > cap]
            if over:
                yield ctx.hit("grid.max-conc", recipe, (*path, _conc_field(entry)),
                              f"conc {over} above policy.max-conc {cap}")


def _declared_concs(entry: Any) -> list[int]:
    return list(entry.conc_list or [c for c in (entry.conc_start, entry.conc_end) if c is not None])


def _conc_field(entry: Any) -> str:
    return "conc-list" if entry is None or entry.conc_list else "conc-end"
