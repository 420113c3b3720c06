"""Eval selection, exactly as InferenceX marks and expands eval rows (spec §2.5).

Evals run at 8k1k only. Default sweeps mark, per single-node group, every row at the highest and the upper-median
concurrency ≥ 16, and per multinode topology the row holding its highest concurrency ≥ 16 (with `eval-conc`).
Agentic rows are marked only for `--evals-only`/`--all-evals`. `--all-evals` marks every 8k1k row and merges
multinode rows of one topology into a single row running all its concurrencies.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from llmsweep.plan.expand import Cell
from llmsweep.spec.scope import MovedEval
from llmsweep.spec.workload import ScenarioId

MIN_EVAL_CONC = 16
EVAL_ISL, EVAL_OSL = 8192, 1024
EVAL_ROW = (f"an eval row is an 8k1k row (isl {EVAL_ISL}, osl {EVAL_OSL}) at a concurrency of {MIN_EVAL_CONC} or "
            "more")
"""What makes a row run an eval, as a message says it where none does (`run`)."""
_IGNORED_FOR_TOPOLOGY = frozenset({"conc", "run-eval", "eval-only", "eval-conc", "eval-all-concs", "exp-name"})


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def parallelism_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    """A multinode row's identity without concurrency, eval fields and exp-name (which embeds conc for agentic)."""
    return tuple(sorted((k, _freeze(v)) for k, v in entry.items() if k not in _IGNORED_FOR_TOPOLOGY))


def _eligible(entry: dict[str, Any]) -> list[int]:
    conc = entry["conc"]
    values = conc if isinstance(conc, list) else [conc]
    return sorted(c for c in values if c >= MIN_EVAL_CONC)


def _is_8k1k(entry: dict[str, Any]) -> bool:
    return entry.get("isl") == EVAL_ISL and entry.get("osl") == EVAL_OSL


def _best(items: list[tuple[int, int]]) -> tuple[int, int]:
    """First item with the highest value (Python's `max` keeps the first maximum)."""
    best = items[0]
    for item in items[1:]:
        if item[1] > best[1]:
            best = item
    return best


def _choose(rows: Sequence[dict[str, Any]], include_agentic: bool) -> tuple[dict[int, tuple[Any, ...]], dict[int, int]]:
    """InferenceX's eval rows among `rows`: each chosen row's index -> its configuration (the group it was chosen in),
    and a chosen multinode row's index -> its `eval-conc`."""
    chosen: dict[int, tuple[Any, ...]] = {}
    eval_conc: dict[int, int] = {}

    single: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, e in enumerate(rows):
        if "tp" not in e or not _is_8k1k(e) or not _eligible(e):
            continue
        key = (e["model"], e["runner"], e["framework"], e["precision"], e["isl"], e["osl"], e["spec-decoding"],
               e["dp-attn"])
        single[key].append(i)
    for key, members in single.items():
        concs = sorted({rows[i]["conc"] for i in members})
        targets = {concs[-1], concs[len(concs) // 2]}
        chosen.update({i: ("single", key) for i in members if rows[i]["conc"] in targets})

    multi: dict[tuple[Any, ...], list[tuple[int, int]]] = defaultdict(list)
    for i, e in enumerate(rows):
        if "tp" in e or "prefill" not in e or not _is_8k1k(e):
            continue
        eligible = _eligible(e)
        if eligible:
            multi[parallelism_key(e)].append((i, eligible[-1]))
    for key, items in multi.items():
        index, conc = _best(items)
        chosen[index] = ("multi", key)
        eval_conc[index] = conc

    if include_agentic:
        ag_single: dict[tuple[Any, ...], list[tuple[int, int]]] = defaultdict(list)
        ag_multi: dict[tuple[Any, ...], list[tuple[int, int]]] = defaultdict(list)
        for i, e in enumerate(rows):
            if e.get("scenario-type") != ScenarioId.AGENTIC_CODING:
                continue
            if "prefill" in e:
                eligible = _eligible(e)
                if eligible:
                    ag_multi[parallelism_key(e)].append((i, eligible[-1]))
                continue
            conc = e["conc"]
            ag_single[(e["model"], e["runner"], e["framework"], e["precision"])].append(
                (i, max(conc) if isinstance(conc, list) else conc))
        for key, items in ag_single.items():
            chosen[_best(items)[0]] = ("agentic", key)
        for key, items in ag_multi.items():
            index, conc = _best(items)
            chosen[index] = ("agentic-multi", key)
            eval_conc[index] = conc
    return chosen, eval_conc


def mark_eval_entries(cells: list[Cell], include_agentic: bool = False) -> list[Cell]:
    """Set `run-eval` on every row (and `eval-conc` on chosen multinode rows); returns the same cells."""
    rows = [c.entry for c in cells]
    chosen, eval_conc = _choose(rows, include_agentic)
    for i, e in enumerate(rows):
        e["run-eval"] = i in chosen
        if i in eval_conc:
            e["eval-conc"] = eval_conc[i]
    return cells


def moved_evals(cells: Sequence[Cell], planned: Callable[[Cell], bool], include_agentic: bool,
                shown: Callable[[str], str]) -> list[MovedEval]:
    """The configurations whose eval the matrix moved out of the planned recipes: `cells` are the matrix's rows
    (`planned`: a row of the recipes a command was handed); a configuration the planned rows alone would have run
    an eval of on a row of theirs, and whose eval rows among all of `cells` include another recipe's instead — a plan
    of the handed files then runs no eval of it there. `shown`: a recipe file as the note names it."""
    rows = [c.entry for c in cells]
    whole, whole_conc = _choose(rows, include_agentic)
    mine = [i for i, c in enumerate(cells) if planned(c)]
    alone, _ = _choose([rows[i] for i in mine], include_agentic)
    lost: dict[tuple[Any, ...], int] = {}  # configuration -> a row of the planned recipes that lost its eval
    for j, group in alone.items():
        if mine[j] not in whole:
            lost.setdefault(group, mine[j])
    out: list[MovedEval] = []
    for group, own in lost.items():
        at = tuple((shown(cells[i].recipe.file), whole_conc.get(i, _top(rows[i])))
                   for i, g in whole.items() if g == group and not planned(cells[i]))
        if at:
            out.append(MovedEval(configuration=_configuration(cells[own]), at=at))
    return out


def _top(entry: dict[str, Any]) -> int:
    conc = entry["conc"]
    return max(conc) if isinstance(conc, list) else int(conc)


def _configuration(cell: Cell) -> str:
    """A configuration as a note names it: its recipe key, then what groups its eval rows (model, precision,
    framework, runner, the sequence lengths and spec decoding / DP attention where set, or the agentic scenario; a
    multinode row's pools)."""
    e = cell.entry
    agentic = e.get("scenario-type") == ScenarioId.AGENTIC_CODING
    what = "agentic" if agentic else f"isl {e.get('isl')} osl {e.get('osl')}"
    if not agentic and e.get("spec-decoding") not in (None, "none"):  # an agentic group is its model and hardware
        what += f", spec-decoding {e['spec-decoding']}"
    if not agentic and e.get("dp-attn") is True:
        what += ", dp-attn"
    if "prefill" in e:
        what += ", " + " ".join(f"{role} {e[role].get('num-worker')}×tp{e[role].get('tp')}"
                                for role in ("prefill", "decode") if isinstance(e.get(role), dict))
    return f"{cell.recipe.key} ({e['model']} {e['precision']} {e['framework']} on {e['runner']}, {what})"


def mark_all_eval_entries(cells: list[Cell]) -> list[Cell]:
    """`--all-evals`: every 8k1k fixed row and every agentic row becomes an eval row; multinode rows of one topology
    merge (fixed: all concs, `eval-all-concs`; agentic: `eval-conc` = the highest)."""
    out: list[Cell] = []
    fixed_merge: dict[tuple[Any, ...], int] = {}
    agentic_merge: dict[tuple[Any, ...], int] = {}
    for cell in cells:
        e = cell.entry
        if e.get("scenario-type") == ScenarioId.AGENTIC_CODING:
            if "prefill" not in e:
                e["run-eval"] = True
                out.append(cell)
                continue
            concs = e["conc"] if isinstance(e["conc"], list) else [e["conc"]]
            key = parallelism_key(e)
            if key in agentic_merge:
                existing = out[agentic_merge[key]].entry
                merged = sorted(set(existing["conc"] + concs))
                existing["conc"] = merged
                existing["eval-conc"] = max(merged)
                continue
            agentic_merge[key] = len(out)
            out.append(_replace(cell, {**e, "conc": sorted(set(concs)), "run-eval": True, "eval-conc": max(concs)}))
            continue
        if not _is_8k1k(e):
            out.append(cell)
            continue
        if "prefill" in e:
            concs = e["conc"] if isinstance(e["conc"], list) else [e["conc"]]
            key = parallelism_key(e)
            if key in fixed_merge:
                existing = out[fixed_merge[key]].entry
                existing["conc"] = sorted(set(existing["conc"] + concs))
                continue
            merged_entry = {**e, "conc": sorted(set(concs)), "run-eval": True, "eval-all-concs": True}
            merged_entry.pop("eval-conc", None)
            fixed_merge[key] = len(out)
            out.append(_replace(cell, merged_entry))
            continue
        e["run-eval"] = True
        out.append(cell)
    return out


def _replace(cell: Cell, entry: dict[str, Any]) -> Cell:
    return Cell(cell.recipe, entry, cell.arm, cell.entry_path, dict(cell.extra))


def keep_eval_only(cells: list[Cell]) -> list[Cell]:
    """`--evals-only`/`--all-evals`: keep rows with `run-eval: true` and mark them `eval-only: true`."""
    kept = [c for c in cells if c.entry.get("run-eval", False)]
    for cell in kept:
        cell.entry["eval-only"] = True
    return kept
