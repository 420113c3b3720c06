"""Recipes → matrix cells, exactly as InferenceX's generator expands them (spec §2.1–2.4).

Pure functions: a recipe, the fleet and the sweep options in; a list of :class:`Cell` out, each holding the
InferenceX matrix entry (a plain dict in InferenceX's key order) and the arm it came from, which the job builder
uses to resolve `serve` overrides. Eval marking happens afterwards (:mod:`llmsweep.plan.evals`).
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from llmsweep.catalog.fleet import FleetCatalog
from llmsweep.errors import ConfigError
from llmsweep.plan.conc import (
    expand_range,
    filter_agentic_min_max,
    filter_list_min_max,
    filter_multinode_min_max,
    filter_range_min_max,
)
from llmsweep.plan.dram import total_cpu_dram_gb
from llmsweep.plan.names import (
    SEQ_LEN_NAMES,
    agentic_exp_name,
    fixed_exp_name,
    multinode_agentic_exp_name,
)
from llmsweep.spec.recipe import AgenticEntry, AgenticScenario, Recipe, SearchSpaceEntry, entry_p2p
from llmsweep.spec.workload import DEFAULT_AGENTIC_DURATION_SECONDS, ScenarioId
from llmsweep.words import noun

MAX_MULTINODE_AGENTIC_CONCURRENCIES_PER_ALLOCATION = 1
"""One agentic concurrency per multinode allocation (each gets its own server, as single-node agentic does)."""

Mode = Literal["full-sweep", "test-config"]


@dataclass(frozen=True)
class SweepOptions:
    """Filters of `matrix full-sweep` and `matrix test-config` (InferenceX generator flags)."""

    mode: Mode = "full-sweep"
    step_size: int = 2
    min_conc: int | None = None
    max_conc: int | None = None
    max_tp: int | None = None
    max_ep: int | None = None
    single_node: bool = True
    multi_node: bool = True
    runner_node_filter: str | None = None
    scenario_types: tuple[str, ...] | None = None
    seq_lens: tuple[str, ...] | None = None
    model_prefixes: tuple[str, ...] | None = None
    precisions: tuple[str, ...] | None = None
    frameworks: tuple[str, ...] | None = None
    runner_types: tuple[str, ...] | None = None
    config_keys: tuple[str, ...] | None = None
    conc: tuple[int, ...] | None = None

    def check(self) -> None:
        """Reject flag combinations InferenceX rejects, with its messages."""
        if self.mode == "full-sweep":
            if self.step_size <= 1:
                raise ConfigError("--step-size must be greater than 1", fix="use --step-size 2 or more")
            if self.min_conc is not None and self.max_conc is not None and self.min_conc > self.max_conc:
                raise ConfigError("--min-conc must be less than or equal to --max-conc", fix="swap the two values")
        for name in self.seq_lens or ():
            if name not in SEQ_LEN_NAMES:
                raise ConfigError(f"unknown sequence length `{name}`", fix=f"use one of {', '.join(SEQ_LEN_NAMES)}")

    @property
    def step(self) -> int:
        return self.step_size if self.mode == "full-sweep" else 2

    def wants_scenario(self, scenario: str) -> bool:
        return self.scenario_types is None or scenario in self.scenario_types


@dataclass
class Cell:
    """One matrix cell before eval marking: the InferenceX entry, the arm's fields and where it came from."""

    recipe: Recipe
    entry: dict[str, Any]
    arm: dict[str, Any]
    entry_path: tuple[str | int, ...]
    extra: dict[str, Any] = field(default_factory=dict)


def expand_config_keys(patterns: tuple[str, ...], available: list[str]) -> list[str]:
    """`--config-keys` with `*`/`?` globs; deduplicated in order; a pattern or key matching nothing is an error."""
    seen: dict[str, None] = {}
    listing = ", ".join(sorted(available))
    for key in patterns:
        if "*" in key or "?" in key:
            matches = fnmatch.filter(available, key)
            if not matches:
                # the key the pattern was meant to name: the closest to the pattern without its wildcards
                close = difflib.get_close_matches(key.replace("*", "").replace("?", ""), available, n=1,
                                                  cutoff=0.8)
                raise ConfigError(f"Pattern '{key}' matched no config keys.\nAvailable keys: {listing}",
                                  fix=(f"did you mean `{close[0]}`? " if close else "")
                                  + "check the pattern against the listed keys")
            for match in matches:
                seen.setdefault(match, None)
        else:
            if key not in available:
                # a master file lists hundreds of keys: the one a slip of the keyboard meant comes first
                close = difflib.get_close_matches(key, available, n=1, cutoff=0.8)
                raise ConfigError(f"Config key not found: {key}.\nAvailable keys: {listing}",
                                  fix=(f"did you mean `{close[0]}`? " if close else "")
                                  + "use one of the listed keys, or a glob such as `qwen3.5-*`")
            seen.setdefault(key, None)
    return list(seen)


def select_recipes(recipes: Mapping[str, Recipe], fleet: FleetCatalog, options: SweepOptions) -> list[Recipe]:
    """Recipes a sweep reads: test-config → the expanded keys; full-sweep → every recipe passing the key filters."""
    if options.mode == "test-config":
        keys = expand_config_keys(options.config_keys or (), list(recipes))
        return [recipes[k] for k in keys]
    if options.runner_types:
        invalid = set(options.runner_types) - set(fleet.labels)
        if invalid:
            raise ConfigError(
                f"Invalid runner {noun(len(invalid), 'type')}: {invalid}. Valid runner types are: "
                f"{', '.join(sorted(fleet.labels))}",
                fix="pass labels that the runner file defines",
            )
    out = []
    for key, recipe in recipes.items():
        if options.model_prefixes and not any(key.startswith(p) for p in options.model_prefixes):
            continue
        if options.precisions and recipe.precision not in options.precisions:
            continue
        if options.frameworks and recipe.framework not in options.frameworks:
            continue
        if options.runner_types and recipe.runner not in options.runner_types:
            continue
        out.append(recipe)
    return out


def runners_for(recipe: Recipe, fleet: FleetCatalog, options: SweepOptions) -> list[str]:
    """The runner values of a recipe's jobs: its label, or one per node matching `--runner-node-filter`."""
    flt = options.runner_node_filter
    if not flt:
        return [recipe.runner]
    candidates = fleet.nodes(recipe.runner)
    if options.mode == "test-config" and flt in recipe.runner:
        candidates = [recipe.runner, *candidates]
    seen: dict[str, None] = {}
    for node in candidates:
        if flt in node:
            seen.setdefault(node, None)
    return list(seen)


def expand_cells(recipes: Mapping[str, Recipe], fleet: FleetCatalog, options: SweepOptions) -> list[Cell]:
    """Every matrix cell of the selected recipes, in InferenceX's order (recipe, scenario, entry, conc, runner)."""
    options.check()
    cells: list[Cell] = []
    for recipe in select_recipes(recipes, fleet, options):
        runners = runners_for(recipe, fleet, options)
        if not runners:
            continue
        cells.extend(_fixed_cells(recipe, runners, options))
        cells.extend(_agentic_cells(recipe, fleet, runners, options))
    return cells


# ------------------------------------------------------------------------------------------------ fixed-seq-len


def _head(recipe: Recipe, runner: str) -> dict[str, Any]:
    return {
        "image": recipe.image,
        "model": recipe.model,
        "model-prefix": recipe.model_prefix,
        "precision": recipe.precision,
        "framework": recipe.framework,
        "runner": runner,
    }


def _components(entry: SearchSpaceEntry, recipe: Recipe) -> dict[str, Any]:
    """Router / kv-p2p-transfer: the entry's value first, then the recipe's."""
    out: dict[str, Any] = {}
    router = entry.router if entry.router is not None else recipe.router
    if router is not None:
        out["router"] = router.model_dump(by_alias=True)
    p2p = entry_p2p(entry)
    if p2p is None:
        p2p = recipe.top_p2p
    if p2p is not None:
        out["kv-p2p-transfer"] = p2p
    return out


def _range_or_list(entry: Any, step: int, *, test_config: bool) -> list[int]:
    """Concurrency values before filters.

    test-config treats a present `conc-list` as the list, full-sweep a non-empty one.
    """
    use_list = entry.conc_list is not None if test_config else bool(entry.conc_list)
    if use_list:
        return list(entry.conc_list)
    return expand_range(entry.conc_start, entry.conc_end, step)


def _conc_filter(values: list[int], options: SweepOptions) -> list[int]:
    if options.conc:
        return [c for c in values if c in options.conc]
    return values


class PlanError(ConfigError):
    """A recipe's search-space entry that cannot be expanded into jobs (its topology exceeds the runner's nodes, the
    runner has no DRAM metadata for an offload arm), with where: the message leads with `file:line: field:` so
    `matrix`, `ci matrix` and `changelog check` say it, and `plan.failed` points at the entry."""

    def __init__(self, reason: str, *, fix: str | None, file: str, line: int | None, field: str) -> None:
        super().__init__(f"{file}:{line or 1}: {field}: {reason}", fix=fix)
        self.reason, self.file, self.line, self.field = reason, file, line, field


def _located(recipe: Recipe, path: tuple[str | int, ...], cells: Iterator[Cell]) -> Iterator[Cell]:
    """`cells`, an entry's, with an error in planning them said at the entry (`PlanError`)."""
    try:
        yield from cells
    except PlanError:
        raise
    except ConfigError as exc:
        raise PlanError(exc.message, fix=exc.fix, file=recipe.file, line=recipe.line_of(path),
                        field=recipe.path_of(path)) from None


def _fixed_cells(recipe: Recipe, runners: list[str], options: SweepOptions) -> Iterator[Cell]:
    if not options.wants_scenario(ScenarioId.FIXED_SEQ_LEN):
        return
    seq_filter = {SEQ_LEN_NAMES[s] for s in options.seq_lens} if options.seq_lens else None
    full = options.mode == "full-sweep"
    for si, scen in enumerate(recipe.fixed_seq_len()):
        isl, osl = scen.isl, scen.osl
        if seq_filter and (isl, osl) not in seq_filter:
            continue
        for ei, entry in enumerate(scen.search_space):
            path = ("scenarios", ScenarioId.FIXED_SEQ_LEN.value, si, "search-space", ei)
            if recipe.multinode:
                if full and not options.multi_node:
                    continue
                yield from _located(recipe, path, _multinode_fixed(recipe, entry, isl, osl, path, runners, options))
            else:
                if full and not options.single_node:
                    continue
                yield from _located(recipe, path, _single_fixed(recipe, entry, isl, osl, path, runners, options))


def _single_fixed(recipe: Recipe, entry: Any, isl: int, osl: int, path: tuple[str | int, ...], runners: list[str],
                  options: SweepOptions) -> Iterator[Cell]:
    ep = entry.ep
    if options.mode == "full-sweep":
        if options.max_tp is not None and (options.max_tp <= 0 or entry.tp > options.max_tp):
            return
        if options.max_ep is not None:
            if options.max_ep <= 0:
                return
            if ep is not None and ep > options.max_ep:
                ep = options.max_ep
        if entry.conc_list:
            values = filter_list_min_max(entry.conc_list, options.min_conc, options.max_conc)
        else:
            values = filter_range_min_max(entry.conc_start, entry.conc_end, options.step, options.min_conc,
                                          options.max_conc)
        if values is None:
            return
    else:
        values = _conc_filter(_range_or_list(entry, 2, test_config=True), options)
        if not values:
            return
    for conc in values:
        for runner in runners:
            row = _head(recipe, runner)
            row.update({
                "isl": isl, "osl": osl, "tp": entry.tp, "pp": entry.pp, "dcp-size": entry.dcp_size,
                "pcp-size": entry.pcp_size, "conc": conc, "max-model-len": isl + osl + 256,
                "ep": ep if ep is not None else 1,
                "dp-attn": entry.dp_attn if entry.dp_attn is not None else False,
                "spec-decoding": entry.spec_decoding, "exp-name": fixed_exp_name(recipe.model_prefix, isl, osl),
                "disagg": recipe.disagg, "run-eval": False,
            })
            row.update(_components(entry, recipe))
            yield Cell(recipe, row, _arm(ScenarioId.FIXED_SEQ_LEN.value, row), path)


def _multinode_fixed(recipe: Recipe, entry: Any, isl: int, osl: int, path: tuple[str | int, ...],
                     runners: list[str], options: SweepOptions) -> Iterator[Cell]:
    values: list[int] | None
    if options.mode == "full-sweep":
        values = filter_multinode_min_max(_range_or_list(entry, options.step, test_config=False), options.min_conc,
                                          options.max_conc)
        if values is None:
            return
    else:
        values = _conc_filter(_range_or_list(entry, 2, test_config=True), options)
        if options.conc and not values:
            return
    prefill, decode = entry.prefill.matrix_dict(), entry.decode.matrix_dict()
    for runner in runners:
        row = _head(recipe, runner)
        row.update({
            "isl": isl, "osl": osl, "spec-decoding": entry.spec_decoding, "prefill": prefill, "decode": decode,
            "conc": list(values), "max-model-len": isl + osl + 256,
            "exp-name": fixed_exp_name(recipe.model_prefix, isl, osl), "disagg": recipe.disagg, "run-eval": False,
        })
        row.update(_components(entry, recipe))
        yield Cell(recipe, row, _arm(ScenarioId.FIXED_SEQ_LEN.value, row), path)


# ------------------------------------------------------------------------------------------------ agentic-coding


def _agentic_cells(recipe: Recipe, fleet: FleetCatalog, runners: list[str], options: SweepOptions) -> Iterator[Cell]:
    if not options.wants_scenario(ScenarioId.AGENTIC_CODING):
        return
    if options.mode == "full-sweep":
        if recipe.multinode and not options.multi_node:
            return
        if not recipe.multinode and not options.single_node:
            return
    scenarios = recipe.scenarios
    for si, scen in enumerate(scenarios.agentic_coding or []):
        for ei, entry in enumerate(scen.search_space):
            path = ("scenarios", ScenarioId.AGENTIC_CODING.value, si, "search-space", ei)
            yield from _located(recipe, path,
                                _agentic_entry_cells(recipe, fleet, scen, entry, path, runners, options))


def _agentic_entry_cells(recipe: Recipe, fleet: FleetCatalog, scen: AgenticScenario, entry: AgenticEntry,
                         path: tuple[str | int, ...], runners: list[str], options: SweepOptions) -> Iterator[Cell]:
    multinode = recipe.multinode
    kv = entry.kv_offloading or "none"
    backend = entry.kv_offload_backend
    backend_name = backend.name if backend is not None else None
    if multinode:
        assert entry.prefill is not None
        p = entry.prefill
        dram = total_cpu_dram_gb(fleet, recipe.runner, scen.dram_utilization, kv,
                                 prefill_gpus=(p.tp, p.pp, p.pcp_size))
    else:
        assert entry.tp is not None
        dram = total_cpu_dram_gb(fleet, recipe.runner, scen.dram_utilization, kv,
                                 single_node_gpus=(entry.tp, entry.pp, entry.pcp_size))
    if options.mode == "full-sweep":
        values = filter_agentic_min_max(_range_or_list(entry, options.step, test_config=False), options.min_conc,
                                        options.max_conc)
    else:
        values = _conc_filter(_range_or_list(entry, 2, test_config=False), options)
    if not values:
        return
    extra = {"dram-utilization": scen.dram_utilization}  # each cell gets its own copy: the plan writes into it
    if multinode:
        assert entry.prefill is not None and entry.decode is not None
        prefill, decode = entry.prefill.matrix_dict(), entry.decode.matrix_dict()
        size = MAX_MULTINODE_AGENTIC_CONCURRENCIES_PER_ALLOCATION
        for runner in runners:
            for start in range(0, len(values), size):
                batch = values[start:start + size]
                row = _head(recipe, runner)
                row.update({
                    "spec-decoding": entry.spec_decoding, "prefill": prefill, "decode": decode, "conc": batch,
                    "kv-offloading": kv, "total-cpu-dram-gb": dram, "duration": DEFAULT_AGENTIC_DURATION_SECONDS,
                    "exp-name": multinode_agentic_exp_name(recipe.model_prefix, prefill, decode, batch, kv,
                                                           backend_name),
                    "disagg": recipe.disagg, "scenario-type": ScenarioId.AGENTIC_CODING.value,
                })
                if backend is not None:
                    row["kv-offload-backend"] = backend.model_dump(by_alias=True, exclude_unset=True)
                row.update(_components(entry, recipe))
                yield Cell(recipe, row, _arm(ScenarioId.AGENTIC_CODING.value, row), path, dict(extra))
        return
    assert entry.tp is not None
    for conc in values:
        for runner in runners:
            row = _head(recipe, runner)
            row.update({
                "tp": entry.tp, "pp": entry.pp, "dcp-size": entry.dcp_size, "pcp-size": entry.pcp_size,
                "ep": entry.ep if entry.ep is not None else 1,
                "dp-attn": entry.dp_attn if entry.dp_attn is not None else False,
                "spec-decoding": entry.spec_decoding, "conc": conc, "kv-offloading": kv,
                "total-cpu-dram-gb": dram, "duration": DEFAULT_AGENTIC_DURATION_SECONDS,
                "exp-name": agentic_exp_name(recipe.model_prefix, entry.tp, conc, kv, backend_name,
                                             entry.spec_decoding),
                "scenario-type": ScenarioId.AGENTIC_CODING.value,
            })
            if backend is not None:
                row["kv-offload-backend"] = backend.model_dump(by_alias=True, exclude_unset=True)
            row.update(_components(entry, recipe))
            yield Cell(recipe, row, _arm(ScenarioId.AGENTIC_CODING.value, row), path, dict(extra))


def _arm(scenario: str, row: dict[str, Any]) -> dict[str, Any]:
    """The fields a `serve.overrides[].when` can match on, for one cell."""
    backend = row.get("kv-offload-backend")
    conc = row.get("conc")
    return {
        "scenario": scenario,
        "isl": row.get("isl"),
        "osl": row.get("osl"),
        "tp": row.get("tp"),
        "pp": row.get("pp"),
        "ep": row.get("ep"),
        "dp-attn": row.get("dp-attn"),
        "dcp-size": row.get("dcp-size"),
        "pcp-size": row.get("pcp-size"),
        "spec-decoding": row.get("spec-decoding"),
        "kv-offloading": row.get("kv-offloading"),
        "kv-offload-backend": backend.get("name") if isinstance(backend, dict) else None,
        "conc": conc if isinstance(conc, int) else None,
    }

