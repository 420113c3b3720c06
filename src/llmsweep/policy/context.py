"""What a rule sees: the recipes, their jobs, the fleet, whether the simulator runs, and how to make a finding."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from llmsweep.catalog.fleet import FleetCatalog, default_fleet
from llmsweep.engines import engine_flags as engine_flags  # the job's flags as its engine reads them
from llmsweep.findings import Finding, Severity
from llmsweep.plan.job import Job
from llmsweep.policy.registry import get_rule
from llmsweep.spec.recipe import AgenticEntry, MultiNodeFixedEntry, Recipe, SearchSpaceEntry
from llmsweep.spec.source import FieldPath
from llmsweep.spec.workload import ScenarioId

SOFTENED_NOTE = " (simulated: the simulator runs it anyway)"
"""What a rule that `softens_in_sim` adds to its message when it is a warning because the simulator serves the job."""


@dataclass
class Context:
    recipes: Mapping[str, Recipe]
    jobs: Sequence[Job]
    simulate: bool = False
    fleet: FleetCatalog = field(default_factory=default_fleet)

    def jobs_of(self, key: str) -> list[Job]:
        return [j for j in self.jobs if j.recipe_key == key]

    def job_pairs(self) -> Iterator[tuple[Job, Recipe]]:
        """(job, its recipe) for every job whose recipe is known."""
        for job in self.jobs:
            recipe = self.recipes.get(job.recipe_key)
            if recipe is not None:
                yield job, recipe

    def runnable_pairs(self) -> Iterator[tuple[Job, Recipe]]:
        """Jobs with a `serve` block (rules that read serve skip the rest: the loader already warned)."""
        for job, recipe in self.job_pairs():
            if job.serve is not None:
                yield job, recipe

    def simulated(self, job: Job | None) -> bool:
        from llmsweep.engines import runs_on_simulator

        return runs_on_simulator(job.engine if job is not None else None, simulate=self.simulate)

    def hit(
        self,
        rule_id: str,
        recipe: Recipe,
        path: FieldPath | str,
        message: str,
        *,
        job: Job | None = None,
        fix: str | None = None,
        evidence: str | None = None,
        severity: Severity | None = None,
    ) -> Finding:
        """A finding of `rule_id` at `path` (relative to the recipe); defaults from the registered rule."""
        r = get_rule(rule_id)
        sev = severity or r.severity
        if r.softens_in_sim and self.simulated(job):
            sev = Severity.WARNING
            message += SOFTENED_NOTE
        rel = path if isinstance(path, tuple) else tuple(p for p in path.split(".") if p)
        return Finding(
            rule=rule_id, severity=sev, file=recipe.file, line=recipe.line_of(rel), path=recipe.path_of(rel),
            jobs=(job.id,) if job is not None else (), message=message, fix=fix or r.fix,
            evidence=evidence if evidence is not None else r.evidence,
        )


def _entry_matches(entry: SearchSpaceEntry, job: Job) -> bool:
    tp: int | None = None
    ep: int | None = None
    dcp, offloading = 1, None
    if not isinstance(entry, MultiNodeFixedEntry):  # the worker-pool form has no single-node topology
        tp, ep, dcp = entry.tp, entry.ep, entry.dcp_size
    if isinstance(entry, AgenticEntry):
        offloading = entry.kv_offloading
    concs = entry.conc_list
    if not _pools_match(entry, job):
        return False
    return (tp == job.tp
            and entry.spec_decoding == job.spec_decoding
            and offloading in (None, job.kv_offloading)
            and (ep or 1) == (job.ep or 1)
            and (dcp or 1) == (job.dcp_size or 1)
            and (not concs or any(c in concs for c in job.concs)))


def _pools_match(entry: SearchSpaceEntry, job: Job) -> bool:
    """A multinode entry's prefill and decode pools are the job's (replicas, parallelism, settings): two rows of one
    group differ only there."""
    pools = (getattr(entry, "prefill", None), getattr(entry, "decode", None))
    if pools == (None, None):
        return job.prefill is None and job.decode is None
    for block, worker in zip(pools, (job.prefill, job.decode), strict=True):
        if block is None or worker is None:
            return False
        if (block.num_worker, block.tp, block.pp, block.ep, block.dp_attn, block.dcp_size, block.pcp_size,
                list(block.additional_settings or [])) != (
                worker.num_worker, worker.tp, worker.pp, worker.ep, worker.dp_attn, worker.dcp_size,
                worker.pcp_size, list(worker.additional_settings or [])):
            return False
    return True


def _group_matches(recipe: Recipe, path: FieldPath, job: Job) -> bool:
    """Whether the scenario group at `path` (its isl/osl, for fixed-seq-len) is the job's."""
    if path[1] != job.scenario:
        return False
    if job.scenario is not ScenarioId.FIXED_SEQ_LEN:
        return True
    group = recipe.fixed_seq_len()[int(path[2])]
    return (group.isl, group.osl) == (job.isl, job.osl)


def entry_path(recipe: Recipe, job: Job) -> FieldPath:
    """Path of the search-space entry a job came from (jobs do not carry it: matched on scenario, isl/osl,
    topology and conc)."""
    for path, entry in recipe.search_space_entries():
        if _group_matches(recipe, path, job) and _entry_matches(entry, job):
            return path
    for path, _entry in recipe.search_space_entries():
        if path[1] == job.scenario:
            return path
    return ("scenarios",)


def serve_arg_path(recipe: Recipe, job: Job, flag: str) -> FieldPath:
    """Where a flag of the job's resolved serve was written: the last matching override that sets it, else base."""
    serve = recipe.serve
    if serve is not None and job.serve is not None:
        for index in reversed(job.serve.applied_overrides):
            if flag in serve.overrides[index].args:
                return ("serve", "overrides", index, "args", flag)
    return ("serve", "args", flag)


def serve_env_path(recipe: Recipe, job: Job, name: str) -> FieldPath:
    serve = recipe.serve
    if serve is not None and job.serve is not None:
        for index in reversed(job.serve.applied_overrides):
            if name in serve.overrides[index].env:
                return ("serve", "overrides", index, "env", name)
    return ("serve", "env", name)
