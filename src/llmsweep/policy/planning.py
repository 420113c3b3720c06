"""Load → plan → check, in one call that never raises for bad recipe content: what `validate`, `render` and the
`run` pipeline share. A recipe that cannot be planned becomes a `plan.failed` finding; the others still are."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmsweep.catalog.fleet import FleetCatalog, default_fleet, load_fleet
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.findings import Finding, Severity, has_errors
from llmsweep.plan import Job, full_sweep, matrix_of, test_config
from llmsweep.plan.checks import unused_overrides
from llmsweep.plan.expand import PlanError, expand_config_keys
from llmsweep.plan.matrix import EvalOptions
from llmsweep.policy.rules_resources import dram_arm_paths
from llmsweep.spec import LoadResult, load_recipes
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.scope import Matrix


@dataclass
class Validation:
    """Everything `validate` learnt: the loaded recipes, the planned jobs and every finding (schema, plan, policy)."""

    loaded: LoadResult
    jobs: list[Job] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    matrix: Matrix | None = None
    """The matrix the files' eval rows were chosen among (`plan.matrix_of`; None: the files alone): what of it was
    left out is among `findings` (`spec.scope.UNWEIGHED_RULE`), the evals it moved out of the files in `moved`."""

    @property
    def ok(self) -> bool:
        return not has_errors(self.findings)

    def findings_for(self, job: Job) -> list[Finding]:
        """Findings about one job (:func:`findings_about`)."""
        return findings_about(job, self.findings, self.loaded.recipes)

    @property
    def unplannable(self) -> list[Finding]:
        """The recipes that cannot be expanded into jobs (`plan.failed`): they stop a command that runs jobs."""
        return [f for f in self.findings if f.rule == "plan.failed"]

    def refusals(self, job: Job) -> list[Finding]:
        """Every error that keeps `run` from running `job`: a recipe of the invocation that does not load or cannot
        be expanded into jobs (`raise_unrunnable` stops the whole run for it), and the job's own errors
        (`errors_about`)."""
        stopping = [*self.loaded.errors, *self.unplannable]
        own = [f for f in errors_about(job, self.findings, self.loaded.recipes) if all(f is not s for s in stopping)]
        return [*stopping, *own]

    def raise_unrunnable(self) -> Validation:
        """For a command that goes on to run jobs (`run`, `al collect`): recipes that do not load or cannot be
        expanded into jobs stop it (ConfigError, exit 2), as `matrix` would; policy errors are left to refuse the jobs
        they name. Returns self."""
        self.loaded.raise_on_error()
        unplannable = self.unplannable
        if unplannable:
            raise ConfigError(
                "recipes that cannot be expanded into jobs:\n" + "\n".join(f.render() for f in unplannable),
                fix="fix the named fields; `llmsweep validate` lists every finding", findings=unplannable,
            )
        return self


def findings_about(job: Job, findings: Iterable[Finding], recipe_keys: Iterable[str]) -> list[Finding]:
    """The findings that concern `job`: those naming it, and those about its recipe that name no job (recipe keys are
    global, so a finding's field path says whose it is). `run` refuses a job for the errors among them."""
    keys = list(recipe_keys)
    out = []
    for f in findings:
        if f.jobs:
            if job.id in f.jobs:
                out.append(f)
        elif f.path and recipe_of(f.path, keys) == job.recipe_key:
            out.append(f)
    return out


def follow_derived(findings: Sequence[Finding], derived: Mapping[str, Sequence[str]]) -> list[Finding]:
    """The findings, each naming also the jobs derived from a job it names (`derived`: job id -> ids of its points or
    slices): a policy error about a multi-node job refuses every part of it that runs under an id of its own."""
    if not derived:
        return list(findings)
    return [f.model_copy(update={"jobs": (*f.jobs, *(d for j in f.jobs for d in derived.get(j, ())))})
            if any(j in derived for j in f.jobs) else f for f in findings]


def as_points(jobs: Sequence[Job], findings: Sequence[Finding]) -> tuple[list[Job], list[Finding]]:
    """The jobs as `run` runs them — a multi-node job's concurrencies as points `<id>-conc<N>`
    (`plan.point.one_point_per_job`) — and the findings, each naming also the points of a job it names."""
    from llmsweep.plan.point import one_point_per_job

    planned: list[Job] = []
    derived: dict[str, list[str]] = {}
    for job in jobs:
        split = one_point_per_job([job])
        planned += split
        if split != [job]:
            derived[job.id] = [p.id for p in split]
    return planned, follow_derived(findings, derived)


def follow_slices(findings: Sequence[Finding], slices: Iterable[tuple[Job, str]]) -> list[Finding]:
    """The findings, each naming also the concurrency slices it concerns (`slices`: a slice cut from a planned
    multi-node job, and that job's id; `plan.slices`): one naming the whole job concerns every slice of it, and one
    naming a point of the job (`<id>-conc<N>`: a rule that refuses some concurrencies only, as `grid.max-conc` does)
    concerns the slice's own point at that concurrency — the slice itself when it has only that one."""
    from llmsweep.plan.point import CONC_MARK

    cut = list(slices)
    if not cut:
        return list(findings)
    out = []
    for f in findings:
        named = set(f.jobs)
        extra = [sliced.id for sliced, parent in cut if parent in named]
        extra += [sliced.id if len(sliced.concs) == 1 else f"{sliced.id}{CONC_MARK}{c}"
                  for sliced, parent in cut if parent not in named
                  for c in sliced.concs if f"{parent}{CONC_MARK}{c}" in named]
        out.append(f.model_copy(update={"jobs": (*f.jobs, *extra)}) if extra else f)
    return out


def errors_about(job: Job, findings: Iterable[Finding], recipe_keys: Iterable[str]) -> list[Finding]:
    """The error findings that concern `job` (:func:`findings_about`): what refuses it, in `run` and `al collect`."""
    return [f for f in findings_about(job, findings, recipe_keys) if f.is_error]


def recipe_of(path: str, keys: Iterable[str]) -> str | None:
    """The recipe key a field path starts with: the longest key that prefixes it (keys contain dots, so a path under
    `qwen3.5-x` must not land on a recipe called `qwen3`)."""
    owners = [k for k in keys if path == k or path.startswith(k + ".")]
    return max(owners, key=len) if owners else None


def _plan(recipes: Mapping[str, Recipe], keys: Sequence[str] | None, fleet: FleetCatalog,
          evals: EvalOptions | None = None, matrix: Matrix | None = None) -> list[Job]:
    return test_config(recipes, list(keys), fleet, evals) if keys else full_sweep(recipes, fleet, evals,
                                                                                  matrix=matrix)


def plan_recipes(
    recipes: Mapping[str, Recipe], fleet: FleetCatalog, config_keys: Sequence[str] | None = None,
    evals: EvalOptions | None = None, matrix: Matrix | None = None,
) -> tuple[list[Job], list[Finding]]:
    """Plan every recipe that can be planned; one `plan.failed` finding per recipe that cannot.

    `config_keys` (globs allowed) selects recipes as `matrix test-config` does; a key matching nothing raises
    ConfigError (bad input, not a finding). Recipes whose dram arms lack runner metadata are left to the
    `kv-offload.hardware-metadata` rule. `matrix`: the recipes of the matrix they belong to, among whose rows a full
    sweep marks its eval rows (`plan.matrix_of`).
    """
    keys = expand_config_keys(tuple(config_keys), list(recipes)) if config_keys else list(recipes)
    plannable = {k: recipes[k] for k in keys
                 if not (dram_arm_paths(recipes[k]) and fleet.hardware_of(recipes[k].runner) is None)}
    try:
        return _plan(plannable, list(plannable) if config_keys else None, fleet, evals, matrix), []
    except LlmsweepError:
        pass
    jobs: list[Job] = []
    findings: list[Finding] = []
    for key, recipe in plannable.items():
        try:
            jobs += _plan({key: recipe}, [key] if config_keys else None, fleet, evals, matrix)
        except PlanError as exc:  # at the search-space entry that does not plan
            findings.append(Finding(
                rule="plan.failed", severity=Severity.ERROR, file=exc.file, line=exc.line, path=exc.field,
                message=f"cannot expand `{key}` into jobs: {exc.reason}",
                fix=exc.fix or "fix the field named in the message"))
        except LlmsweepError as exc:
            findings.append(Finding(
                rule="plan.failed", severity=Severity.ERROR, file=recipe.file, line=recipe.line_of(()),
                path=key, message=f"cannot expand `{key}` into jobs: {exc.message}",
                fix=exc.fix or "fix the field named in the message"))
    return jobs, findings


def validate_files(
    paths: Sequence[Path | str],
    *,
    config_keys: Sequence[str] | None = None,
    runner_config: Path | str | None = None,
    simulate: bool = False,
    evals: EvalOptions | None = None,
    runner_labels: Sequence[str] = (),
) -> Validation:
    """Load recipe files, plan them and run every rule. Raises only for bad invocation (unknown config key,
    unreadable runner file); recipe problems are findings. `runner_labels`: labels the runner file omits that the
    runners carry (`--runner-label`), known to the rules as the file's own are."""
    from llmsweep.policy import check

    loaded = load_recipes([Path(p) for p in paths])
    fleet = (load_fleet(runner_config) if runner_config is not None else default_fleet()).vouching(runner_labels)
    matrix = None if config_keys else matrix_of([Path(p) for p in paths], evals)
    try:
        jobs, plan_findings = plan_recipes(loaded.recipes, fleet, config_keys, evals, matrix)
    except ConfigError:  # a `--config-keys` key or pattern that matches no recipe that loaded
        if loaded.ok:
            raise
        # The recipe it names may be one that did not load: its findings say why, not "Config key not found".
        return Validation(loaded, [], list(loaded.findings))
    # A selection (some config keys, only the eval rows) plans a part of each recipe on purpose: an override or a
    # recipe it leaves without a job is no mistake of the recipe's.
    selected = bool(config_keys) or (evals is not None and (evals.evals_only or evals.all_evals))
    if not selected:
        plan_findings += unused_overrides(loaded.recipes, jobs)
    keys = expand_config_keys(tuple(config_keys), list(loaded.recipes)) if config_keys else list(loaded.recipes)
    recipes = {k: loaded.recipes[k] for k in keys}
    policy = check(recipes, jobs, simulate=simulate, fleet=fleet)
    empty = [] if selected else _no_jobs(paths, loaded.recipes, jobs, [*loaded.findings, *plan_findings, *policy])
    left_out = matrix.left_out if matrix is not None else []  # what of the matrix eval rows were chosen without
    return Validation(loaded, jobs, [*loaded.findings, *plan_findings, *left_out, *empty, *policy], matrix)


def _no_jobs(paths: Sequence[Path | str], recipes: dict[str, Recipe], jobs: list[Job],
             found: list[Finding]) -> list[Finding]:
    """`plan.no-jobs`: an input file that holds no recipe, and a recipe that plans no job, when nothing else already
    says why (a file that did not load has its error; a recipe that failed to plan, its `plan.failed`)."""
    # A broken file has its error. An empty file has its own warning, which is enough beside files that plan jobs;
    # when nothing plans, it is the error `run` stops on (validate passed what run refused).
    said = {f.file for f in found if f.is_error or jobs}
    out: list[Finding] = []
    files = [Path(r.file).resolve() for r in recipes.values()]
    for path in map(Path, paths):
        where = path.resolve()
        if str(path) in said or any(f == where or where in f.parents for f in files):
            continue
        what = "a directory with no recipe file" if path.is_dir() else "no recipe key"
        out.append(Finding(rule="plan.no-jobs", severity=Severity.ERROR, file=str(path),
                           message=f"{path} holds no recipe ({what})",
                           fix="pass recipe YAML files (recipe keys mapping to image, model, scenarios, …) or "
                               "directories of them"))
    planned = {j.recipe_key for j in jobs}
    for key, recipe in recipes.items():
        if key not in planned and not any(f.path == key or (f.path or "").startswith(key + ".") for f in found
                                          if f.is_error):
            out.append(Finding(rule="plan.no-jobs", severity=Severity.ERROR, file=recipe.file,
                               line=recipe.line_of(()), path=key,
                               message=f"`{key}` plans no job: its search spaces are empty",
                               fix="give it at least one search-space entry with a conc-list or conc-start/end"))
    return out
