"""One server per arm and stage on a real engine: the launch flags an adapter sizes from the concurrency, pinned.

`llmsweep run` shares a server between jobs whose launch is identical (`engines.launch_fingerprint`). A stage runs an
arm at several concurrencies and seeds; the seed changes no launch, but an agentic job's server is sized from its
concurrency (vLLM's `--max-num-seqs`, SGLang's `--max-running-requests` and `--cuda-graph-max-bs`, …: 2 × conc), so
every ladder point would start a server of its own — minutes each on a real engine. A stage instead pins, per arm,
the flags whose rendered value depends on the concurrency to the value the adapter renders for the stage's highest
one: a server sized for the top admits every lower point's requests unchanged. Which flags those are is read from the
adapter's own rendering (no engine's flag names are restated here); each run's server command and the discovery's
stage record say what was launched, and the proposed recipe keeps the recipe's own flags (an official run sizes per
concurrency). On the simulator in virtual time a server costs nothing, so nothing is pinned there.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from llmsweep.discover.recipe import StageKey
from llmsweep.engine_ids import SIM
from llmsweep.plan import Job


def _flags(job: Job) -> dict[str, Any]:
    from llmsweep import engines

    adapter = engines.adapter_for(job, simulate=False)
    args, _ = adapter.merged_args(job, 0)
    return {adapter.canonical(k): v for k, v in args.items()}


def conc_sized_flags(jobs: list[Job]) -> dict[str, Any]:
    """The launch flags that differ between `jobs` (one arm at several concurrencies), at the value rendered for the
    highest concurrency; a flag rendered at a lower concurrency but not at the highest is left alone."""
    if len(jobs) < 2:
        return {}
    top = max(jobs, key=lambda j: max(j.concs))
    at_top = _flags(top)
    pins: dict[str, Any] = {}
    for job in jobs:
        if job is top:
            continue
        mine = _flags(job)
        for flag in set(mine) | set(at_top):
            if mine.get(flag) != at_top.get(flag) and flag in at_top:
                pins[flag] = at_top[flag]
    return pins


def size_for_top(stage_file: Path, doc: dict[str, Any], keys: dict[str, StageKey], *, simulate: bool,
                 runner_config: Path | None) -> dict[str, dict[str, Any]]:
    """Pin each served arm's concurrency-sized launch flags in `doc` (the stage's recipes, already written to
    `stage_file`) to its highest concurrency's; returns the pins by arm id (empty: nothing depended on the
    concurrency, or every job runs on the simulator in virtual time)."""
    from llmsweep.plan import jobs_from_files

    if simulate:
        return {}
    by_key: dict[str, list[Job]] = defaultdict(list)
    for job in jobs_from_files([stage_file], runner_config=runner_config):
        if job.engine not in (None, SIM.id) and job.recipe_key in keys and not job.multinode:
            by_key[job.recipe_key].append(job)
    pins: dict[str, dict[str, Any]] = {}
    for key, jobs in by_key.items():
        flags = conc_sized_flags(jobs)
        if not flags:
            continue
        serve = doc[key].setdefault("serve", {})
        serve["args"] = {**(serve.get("args") or {}), **flags}
        pins[keys[key].arm.id] = flags
    return pins
