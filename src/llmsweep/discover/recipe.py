"""A recipe's arms, the recipes a discovery stage runs, and the proposed recipe (a patch of the original file).

An arm is one search-space entry of one recipe key. A stage runs each arm as a recipe key of its own
(`<key>-discover<n>`: the arm's scenario group with only that entry, at the stage's concurrencies, the recipe's
`policy` left out so the ladder may pass the recipe's cap), so every run maps back to its arm by the recipe key its
job carries. The proposal rewrites each arm's `conc-list` (and `policy: {min-conc-step, max-conc}`) in the
original text, keeping its comments and layout; where a line cannot be rewritten in place (a block-style list,
`conc-start`/`conc-end`) the proposed file is the YAML re-dumped, and says so. Either way the proposed file is loaded
back and checked to say exactly the proposed concurrencies before it is written.
"""

from __future__ import annotations

import copy
import difflib
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llmsweep.discover.model import ArmWarning, job_growth
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.plan.conc import expand_range
from llmsweep.sim_warnings import ENGINE_REFUSES_OPENING
from llmsweep.spec.loader import load_recipes
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.source import FieldPath, render_path
from llmsweep.words import count_of

CONC_FIELDS = ("conc-list", "conc-start", "conc-end")
STAGE_KEY = "{key}-discover{n}"


@dataclass(frozen=True)
class Arm:
    """One search-space entry of one recipe key."""

    recipe_key: str
    path: FieldPath
    label: str
    concs: tuple[int, ...]
    """The recipe's concurrencies for this arm."""

    @property
    def id(self) -> str:
        return f"{self.recipe_key}:{render_path(self.path)}"

    @property
    def start(self) -> int:
        return min(self.concs)


def load_arms(file: Path) -> tuple[dict[str, Recipe], list[Arm]]:
    """The recipes of `file` (bad input is a ConfigError naming file:line) and their arms in file order."""
    if not file.is_file():
        raise ConfigError(f"discover: no recipe file {file}", fix="pass a recipe YAML, e.g. recipes/my-recipe.yaml")
    recipes = load_recipes([file]).raise_on_error().recipes
    arms = []
    for key, recipe in recipes.items():
        for path, entry in recipe.search_space_entries():
            concs = list(entry.conc_list or expand_range(entry.conc_start, entry.conc_end))  # type: ignore[arg-type]
            fields = entry.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True,
                                      exclude={"conc_list", "conc_start", "conc_end"})
            label = " ".join(f"{k}={_flat(v)}" for k, v in fields.items())
            arms.append(Arm(recipe_key=key, path=path, label=f"{path[1]} {label}".strip(), concs=tuple(concs)))
    if not arms:
        raise ConfigError(f"discover: {file} has no search-space entry", fix="add an arm to a scenario's search-space")
    return recipes, arms


def _flat(value: Any) -> str:
    """A search-space field's value as an arm's label shows it: a named block by its name (an offload backend), another
    block as its fields (a disaggregated pool: `(num-worker=1 tp=8)`), YAML's spelling of a boolean."""
    if isinstance(value, dict):
        name = value.get("name")
        return str(name) if name else "(" + " ".join(f"{k}={_flat(v)}" for k, v in value.items()) + ")"
    if isinstance(value, list):
        return ",".join(map(_flat, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def _raw(file: Path) -> dict[str, Any]:
    doc = yaml.safe_load(file.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ConfigError(f"discover: {file} is not a mapping of recipe keys", fix="see recipes/README.md")
    return doc


def _at(doc: Any, path: FieldPath) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _set_concs(entry: dict[str, Any], concs: list[int]) -> None:
    for field in CONC_FIELDS:
        entry.pop(field, None)
    entry["conc-list"] = list(concs)


DEFAULT_SEED = 42
"""The client's workload seed when a recipe sets none (`spec.workload.WorkloadSpec.seed`)."""


@dataclass(frozen=True)
class StageKey:
    """What a stage recipe key runs: an arm, with one workload seed (a repeat)."""

    arm: Arm
    seed: int
    repeat: int


def stage_document(file: Path, arms: list[Arm], concs: dict[str, list[int]], repeats: int,
                   duration: int | None, *, revisions: Mapping[str, str] | None = None
                   ) -> tuple[dict[str, Any], dict[str, StageKey]]:
    """The stage's recipes — one key per arm and repeat, each repeat with its own workload seed (its own trace order
    and prompts: the recipe's seed, then +1, +2, …) — and which arm and repeat each key is. `revisions`: the commit
    a recipe key's own hub trace source is replayed at (`DiscoverRequest.recipe_revisions`), its stage recipes'
    `traces.revision`."""
    raw = _raw(file)
    doc: dict[str, Any] = {}
    keys: dict[str, StageKey] = {}
    for n, arm in enumerate(arms, 1):
        todo = concs.get(arm.id)
        if not todo:
            continue
        recipe = copy.deepcopy(raw[arm.recipe_key])
        recipe.pop("policy", None)  # the ladder goes past the recipe's cap on purpose
        _, scenario, group_index, _, entry_index = arm.path
        group = copy.deepcopy(recipe["scenarios"][scenario][group_index])
        entry = copy.deepcopy(group["search-space"][entry_index])
        _set_concs(entry, todo)
        group["search-space"] = [entry]
        recipe["scenarios"] = {scenario: [group]}
        workload = dict(recipe.get("workload") or {})
        if duration is not None:
            workload["duration"] = duration
        if revisions and arm.recipe_key in revisions and isinstance(workload.get("traces"), dict):
            workload["traces"] = {**workload["traces"], "revision": revisions[arm.recipe_key]}
        base = int(workload.get("seed", DEFAULT_SEED))
        for k in range(repeats):
            key = STAGE_KEY.format(key=arm.recipe_key, n=n) + (f"-seed{base + k}" if repeats > 1 else "")
            doc[key] = {**copy.deepcopy(recipe), "workload": {**workload, "seed": base + k}}
            keys[key] = StageKey(arm=arm, seed=base + k, repeat=k + 1)
    return doc, keys


def write_stage(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# written by `llmsweep discover`: one recipe key per arm, at this stage's concurrencies\n"
                    + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Proposal:
    text: str
    in_place: bool
    """True when the original text was rewritten line by line (comments kept); False when re-dumped."""
    jobs: int | None = None
    """Jobs the proposed recipe plans (when `propose` was given the planner)."""


_FLOW_LIST = re.compile(r"(conc-list\s*:\s*)\[[^\]\n]*\]")


_FLOW_RANGE_END = re.compile(r",?\s*conc-end\s*:\s*\d+(?=\s*[,}])")
_FLOW_RANGE_START = re.compile(r"conc-start\s*:\s*\d+")


def _ranged(text: str, grid: list[int]) -> str | None:
    """A flow-map arm's line with its `conc-start: A, conc-end: B` as `conc-list: [grid]` (in the start's place,
    comments and the other fields as written); None when the line is not one flow map holding both."""
    if not re.match(r"\s*(-\s*)?\{.*\}\s*(#.*)?$", text) or len(_FLOW_RANGE_START.findall(text)) != 1:
        return None
    dropped, n = _FLOW_RANGE_END.subn("", text, count=1)
    if not n:
        return None
    dropped = re.sub(r"\{\s*,\s*", "{ ", dropped, count=1)  # (the end was the map's first field)
    return _FLOW_RANGE_START.sub(f"conc-list: {grid}", dropped, count=1)


def _policy_line(indent: str, min_step: int | None, max_conc: int | None) -> str:
    parts = [f"min-conc-step: {min_step}"] if min_step is not None else []
    parts += [f"max-conc: {max_conc}"] if max_conc is not None else []
    return f"{indent}policy: {{ {', '.join(parts)} }}"


def _in_place(file: Path, recipes: dict[str, Recipe], grids: dict[str, list[int]], arms: list[Arm],
              policy: dict[str, tuple[int | None, int | None]]) -> str | None:
    """The original text with each arm's flow-style `conc-list` and each recipe's policy rewritten; None when a
    line is not of that shape."""
    lines = file.read_text(encoding="utf-8").splitlines()
    for arm in arms:
        grid = grids.get(arm.id)
        if grid is None:
            continue
        where = recipes[arm.recipe_key].source.lines
        line = where.get((arm.recipe_key, *arm.path, "conc-list"))
        if line is None:  # a range arm (`conc-start`/`conc-end`): its flow map's pair becomes the proposed list
            start, end = (where.get((arm.recipe_key, *arm.path, f)) for f in ("conc-start", "conc-end"))
            if start is None or start != end or (ranged := _ranged(lines[start - 1], grid)) is None:
                return None
            lines[start - 1] = ranged
            continue
        if not _FLOW_LIST.search(lines[line - 1]):
            return None
        lines[line - 1] = _FLOW_LIST.sub(rf"\g<1>{grid}", lines[line - 1], count=1)
    inserts: list[tuple[int, str]] = []
    for key, (min_step, max_conc) in policy.items():
        source = recipes[key].source.lines
        if (key, "policy") in source:
            for field, value in (("min-conc-step", min_step), ("max-conc", max_conc)):
                at = source.get((key, "policy", field))
                if value is None:
                    continue
                if at is None:  # a field the recipe's policy lacks: added to it where it is written
                    if not _add_policy_field(lines, inserts, source, key, field, value):
                        return None
                    continue
                new, n = re.subn(rf"({field}\s*:\s*)\d+", rf"\g<1>{value}", lines[at - 1], count=1)
                if not n:
                    return None
                lines[at - 1] = new
            continue
        first = min((ln for p, ln in source.items() if p[0] == key and len(p) == 2), default=None)
        key_line = source.get((key,))
        if first is None or key_line is None:
            return None
        indent = re.match(r"\s*", lines[first - 1]).group(0)  # type: ignore[union-attr]
        inserts.append((key_line, _policy_line(indent, min_step, max_conc)))
    for at, text in sorted(inserts, reverse=True):
        lines.insert(at, text)
    return "\n".join(lines) + "\n"


def _add_policy_field(lines: list[str], inserts: list[tuple[int, str]], source: Mapping[FieldPath, int], key: str,
                      field: str, value: int) -> bool:
    """Add `field: value` to the recipe's written policy, in its own style: inside a flow mapping's braces on the
    `policy:` line, or (in `inserts`, applied last) as a line of a block mapping above its first field, indented as
    it; False when it is neither."""
    at = source.get((key, "policy"))
    if at is None:
        return False
    text = lines[at - 1]
    flow = re.match(r"(\s*policy\s*:\s*\{)(.*)(\}\s*(#.*)?)$", text)
    if flow is not None:
        inner = flow.group(2).strip()
        lines[at - 1] = f"{flow.group(1)} {inner + ', ' if inner else ''}{field}: {value} {flow.group(3)}"
        return True
    fields = [ln for p, ln in source.items() if p[:2] == (key, "policy") and len(p) == 3]
    if not fields or not text.rstrip().endswith(":"):
        return False
    first = min(fields)
    indent = re.match(r"\s*", lines[first - 1]).group(0)  # type: ignore[union-attr]
    inserts.append((first - 1, f"{indent}{field}: {value}"))
    return True


def _redumped(file: Path, grids: dict[str, list[int]], arms: list[Arm],
              policy: dict[str, tuple[int | None, int | None]]) -> str:
    raw = _raw(file)
    for arm in arms:
        if arm.id in grids:
            _set_concs(_at(raw[arm.recipe_key], arm.path), grids[arm.id])
    for key, (min_step, max_conc) in policy.items():
        block = raw[key].get("policy") or {}
        if min_step is not None:
            block["min-conc-step"] = min_step
        if max_conc is not None:
            block["max-conc"] = max_conc
        raw[key]["policy"] = block
    return ("# written by `llmsweep discover` (re-dumped: the original's comments are not kept)\n"
            + yaml.safe_dump(raw, sort_keys=False))


def propose(file: Path, out: Path, grids: dict[str, list[int]], arms: list[Arm],
            policy: dict[str, tuple[int | None, int | None]], *, note: str | None = None,
            warned: Sequence[str] = (), plans: Callable[[Path], int] | None = None,
            recipe_jobs: int | None = None) -> Proposal:
    """Write the proposed recipe to `out` after loading it back: its arms must say exactly `grids`. Notes head the
    file as comments, so the recipe a user commits says them: `note`, what the grid stands on when that is not a
    measurement (`simulated_note`); `warned`, the engine refusals the arms' runs carried (`refused_note`); and, given
    `plans` (a recipe file's job count, as `run` plans it) and `recipe_jobs` (`file`'s), how many jobs the proposed
    recipe plans against `file` (`jobs_note`). The notes an earlier discovery left at the recipe's head are not kept
    (this discovery's are what the file holds now)."""
    recipes = load_recipes([file]).raise_on_error().recipes
    text = _in_place(file, recipes, grids, arms, policy)
    trial = out.with_name(f".{out.name}.candidate")  # checked before it takes `out`'s name: no wrong recipe is left
    try:
        for candidate, in_place in ((text, True), (_redumped(file, grids, arms, policy), False)):
            if candidate is None:
                continue
            candidate = without_discover_notes(candidate)
            trial.write_text(candidate, encoding="utf-8")
            if not _says(trial, grids, arms, policy):
                continue
            jobs = _jobs(plans, trial)
            notes = [n for n in (note, *warned) if n]
            if jobs is not None and recipe_jobs is not None:
                notes.append(jobs_note(jobs, recipe_jobs, file))
            candidate = "".join(_comment(n) for n in notes) + candidate
            trial.write_text(candidate, encoding="utf-8")
            trial.replace(out)
            return Proposal(candidate, in_place, jobs=jobs)
    finally:
        trial.unlink(missing_ok=True)
    raise ConfigError("discover: the proposed recipe does not load back with the proposed grid (arms that share "
                      "one YAML node, through an anchor or merge key, cannot each take their own grid)",
                      fix="write each arm's concurrencies out (no shared anchor), or apply the grids in "
                          "discovery.json by hand")


def _jobs(plans: Callable[[Path], int] | None, file: Path) -> int | None:
    if plans is None:
        return None
    try:
        return plans(file)
    except LlmsweepError:  # a count it cannot give is left unsaid, never guessed
        return None


def _comment(note: str) -> str:
    """`note` as comment lines heading a recipe (wrapped at whitespace only: `without_discover_notes` finds its end
    by its words)."""
    return "".join(f"# {line}\n" for line in textwrap.wrap(note, 116, break_long_words=False,
                                                            break_on_hyphens=False))


_NOTE_MARK = "llmsweep discover"
"""How every note `propose` heads a recipe with begins (`without_discover_notes` finds them by it)."""
_NOTE_OPENS = "llmsweep discover proposed this grid from "
_NOTE_ENDS = "before it becomes the official grid."
"""How `simulated_note` begins and ends."""
_JOBS_ENDS = "each proposed concurrency is a job of the official sweep."
"""How `jobs_note` ends."""
_REFUSED_ENDS = "change the arm before its grid runs on an engine."
"""How `refused_note` ends."""
_ENDINGS = (_NOTE_ENDS, _JOBS_ENDS, _REFUSED_ENDS)


def simulated_note(sources: list[str]) -> str | None:
    """The head of a proposed recipe whose grid stands on simulated points (`sources`: each run's, read back from its
    summary): it was predicted, and a grid committed from it would be taken for one measured on the hardware."""
    simulated = sum(s == "simulated" for s in sources)
    if not simulated:
        return None
    which = "every point" if simulated == len(sources) else f"{simulated} of the {len(sources)} runs"
    return (f"{_NOTE_OPENS}{which} predicted by the simulator, not measured on the hardware: measure it there "
            f"(`llmsweep discover` without --simulate) {_NOTE_ENDS}")


def jobs_note(jobs: int, recipe_jobs: int, recipe: Path | str) -> str:
    """The head of a proposed recipe: how many jobs it plans against the recipe it was proposed for (`recipe`), in
    the words the discovery's table says it (`model.job_growth`)."""
    return f"{_NOTE_MARK}: this recipe {job_growth(jobs, recipe_jobs, str(recipe))}; {_JOBS_ENDS}"


def refused_note(arm: str, label: str, warning: ArmWarning) -> str:
    """The head of a proposed recipe one of whose arms' runs a real engine would refuse (an engine rule the simulator
    softened, `warning`): the grid proposed for it is one no engine runs as the recipe writes the arm."""
    return (f"{_NOTE_MARK}: the grid of {arm} ({label}) was proposed from {count_of(warning.runs, 'run')} a real "
            f"engine would refuse: {warning.warning.removeprefix(ENGINE_REFUSES_OPENING)}; {_REFUSED_ENDS}")


def without_discover_notes(text: str) -> str:
    """A recipe's text without the notes `propose` headed it with (`simulated_note`, `refused_note`, `jobs_note`),
    else as it is: a proposed.yaml discovered again keeps its predecessor's notes neither under a grid measured on
    the hardware (a label that grid did not earn) nor beside this discovery's own (two notes, counting other runs)."""
    lines = text.splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].startswith(f"# {_NOTE_MARK}"):
        said: list[str] = []
        for i in range(start, len(lines)):
            if not lines[i].startswith("# "):
                return "".join(lines[start:])
            said.append(lines[i][2:].strip())
            if " ".join(said).endswith(_ENDINGS):
                start = i + 1
                break
        else:
            break
    return "".join(lines[start:])


def _says(file: Path, grids: dict[str, list[int]], arms: list[Arm],
          policy: dict[str, tuple[int | None, int | None]]) -> bool:
    loaded = load_recipes([file])
    if not loaded.ok:
        return False
    _, back = load_arms(file)
    by_id = {a.id: a for a in back}
    if any(list(by_id[a.id].concs) != grids[a.id] for a in arms if a.id in grids and a.id in by_id):
        return False
    for key, (min_step, max_conc) in policy.items():
        got = loaded.recipes[key].policy
        if got is None or (min_step is not None and got.min_conc_step != min_step) or (
                max_conc is not None and got.max_conc != max_conc):
            return False
    return True


def unified_diff(before: Path, after_text: str, after_name: str) -> str:
    return "".join(difflib.unified_diff(before.read_text(encoding="utf-8").splitlines(keepends=True),
                                        after_text.splitlines(keepends=True), fromfile=str(before),
                                        tofile=after_name))
