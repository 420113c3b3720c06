"""The planning pipeline: recipes → cells → eval marking → Jobs (InferenceX `generate_sweep_configs.py`, typed)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from llmsweep.catalog.fleet import FleetCatalog, default_fleet, load_fleet
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.plan.build import job_from_entry
from llmsweep.plan.evals import keep_eval_only, mark_all_eval_entries, mark_eval_entries, moved_evals
from llmsweep.plan.expand import Cell, PlanError, SweepOptions, expand_cells
from llmsweep.plan.fingerprint import recipe_fingerprint, throughput_entry
from llmsweep.plan.job import Job
from llmsweep.spec.loader import load_recipes
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.scope import Matrix, load_matrix


@dataclass(frozen=True)
class EvalOptions:
    """InferenceX's eval flags: `--no-evals` | `--evals-only`, and `--all-evals` (not with `--no-evals`)."""

    no_evals: bool = False
    evals_only: bool = False
    all_evals: bool = False

    def check(self) -> None:
        if self.no_evals and self.evals_only:
            raise ConfigError("--no-evals and --evals-only are mutually exclusive", fix="pass only one of them")
        if self.no_evals and self.all_evals:
            raise ConfigError("--all-evals cannot be combined with --no-evals", fix="drop one of the two flags")


def plan_jobs(
    recipes: Mapping[str, Recipe],
    options: SweepOptions,
    fleet: FleetCatalog | None = None,
    evals: EvalOptions | None = None,
    matrix: Matrix | None = None,
) -> list[Job]:
    """Expand recipes into jobs exactly as InferenceX's generator does; pure apart from the golden-AL lookup and
    what it records on `matrix`.

    `matrix`: every recipe of the matrix `recipes` belong to, in its order (`spec.scope.load_matrix`): a full sweep
    marks its eval rows among the rows of all of them, as the whole matrix marks them, and plans jobs of `recipes`
    alone (a recipe of both is planned as `recipes` has it); a recipe of it that does not plan is recorded as left
    out (`Matrix.leave_out`), and so is each configuration whose eval it moved out of `recipes` (`Matrix.move`;
    `plan.evals.moved_evals`), for the command to say. A test-config plan (`config_keys`) marks among the rows of its
    keys, as InferenceX's `test-config` does."""
    evals = evals or EvalOptions()
    evals.check()
    fleet = fleet or default_fleet()
    cells = expand_cells(recipes, fleet, options)
    for cell in cells:
        cell.extra["fingerprint"] = recipe_fingerprint(throughput_entry(cell.entry))
    if not evals.no_evals:
        weighed = matrix if options.mode == "full-sweep" else None
        if weighed is not None:
            cells = _weighed_with(cells, recipes, weighed, fleet, options)
        include_agentic = evals.evals_only or evals.all_evals
        cells = mark_eval_entries(cells, include_agentic=include_agentic)
        planned = {id(r) for r in recipes.values()}
        if weighed is not None and not evals.all_evals:  # --all-evals runs every row's eval anyway
            for moved in moved_evals(cells, lambda c: id(c.recipe) in planned, include_agentic, weighed.shown):
                weighed.move(moved)
        if evals.all_evals:
            cells = mark_all_eval_entries(cells)
        cells = [c for c in cells if id(c.recipe) in planned]
    if evals.evals_only or evals.all_evals:
        cells = keep_eval_only(cells)
    jobs = [_placed_by(fleet, job_from_entry(c.entry, c.recipe, c.arm, fingerprint=c.extra["fingerprint"]))
            for c in cells]
    return _unique_ids(jobs)


def _weighed_with(cells: list[Cell], recipes: Mapping[str, Recipe], matrix: Matrix,
                  fleet: FleetCatalog, options: SweepOptions) -> list[Cell]:
    """The cells of `recipes` among the other recipes' of the matrix, in the matrix's order (which decides a tie for
    the highest concurrency, as it does for the whole matrix); the recipes of `recipes` the matrix lacks come last. A
    recipe of the matrix that does not expand weighs nothing (planning the recipes handed never fails for it), and is
    recorded as left out with the planner's reason (`Matrix.leave_out`)."""
    own: dict[int, list[Cell]] = {}
    for cell in cells:
        own.setdefault(id(cell.recipe), []).append(cell)
    order = {**{k: recipes.get(k, r) for k, r in matrix.recipes.items()}, **recipes}
    out: list[Cell] = []
    for key, recipe in order.items():
        if key in recipes:
            out += own.get(id(recipe), [])
            continue
        try:
            out += expand_cells({key: recipe}, fleet, options)
        except PlanError as exc:  # at the search-space entry that does not plan
            matrix.leave_out(exc.file, exc.line, key, exc.reason)
        except LlmsweepError as exc:
            matrix.leave_out(recipe.file, recipe.line_of(()), key, exc.message)
    return out


def _placed_by(fleet: FleetCatalog, job: Job) -> Job:
    """A multinode job with its runner's GPUs per node as `fleet` (the invocation's) records them
    (`Job.gpus_per_node`): carried with the job, so that every place that puts its workers on nodes (the rendered
    topology, the simulator's deployment, a Slurm node's worker) reads the same answer."""
    if not job.multinode:
        return job
    known = fleet.gpus_per_node(job.runner_label) or fleet.gpus_per_node(job.runner)
    return job if known is None else job.model_copy(update={"gpus_per_node": known})


def full_sweep(
    recipes: Mapping[str, Recipe],
    fleet: FleetCatalog | None = None,
    evals: EvalOptions | None = None,
    *,
    matrix: Matrix | None = None,
    **filters: object,
) -> list[Job]:
    """`matrix full-sweep`: every recipe, narrowed by the :class:`SweepOptions` filters given as keywords; eval rows
    marked among `matrix`'s (:func:`plan_jobs`)."""
    options = SweepOptions(mode="full-sweep", **filters)  # type: ignore[arg-type]
    return plan_jobs(recipes, options, fleet, evals, matrix)


def test_config(
    recipes: Mapping[str, Recipe],
    config_keys: list[str] | tuple[str, ...],
    fleet: FleetCatalog | None = None,
    evals: EvalOptions | None = None,
    **filters: object,
) -> list[Job]:
    """`matrix test-config --config-keys K...`: the named keys (globs allowed), fully expanded (step 2)."""
    options = SweepOptions(mode="test-config", config_keys=tuple(config_keys), **filters)  # type: ignore[arg-type]
    return plan_jobs(recipes, options, fleet, evals)


test_config.__test__ = False  # type: ignore[attr-defined]  # not a pytest test despite the name


def jobs_from_files(
    paths: list[Path] | tuple[Path, ...],
    *,
    config_keys: list[str] | tuple[str, ...] | None = None,
    runner_config: Path | None = None,
    evals: EvalOptions | None = None,
) -> list[Job]:
    """Load recipe files and plan them (test-config for `config_keys`, else full-sweep, its eval rows marked over the
    matrix the files belong to: :func:`matrix_of`); for `run`, `render`, `predict`, `ci`.

    Raises :class:`ConfigError` carrying every finding when a recipe does not validate.
    """
    loaded = load_recipes(list(paths)).raise_on_error()
    fleet = load_fleet(runner_config) if runner_config is not None else default_fleet()
    if config_keys:
        return test_config(loaded.recipes, config_keys, fleet, evals)
    return full_sweep(loaded.recipes, fleet, evals, matrix=matrix_of(paths, evals))


def matrix_of(paths: Sequence[Path], evals: EvalOptions | None = None, *,
              root: Path | None = None) -> Matrix | None:
    """The recipes of the matrix the recipe files `paths` belong to (`spec.scope.load_matrix`; `root`: the tree they
    are read in), which a full sweep of them marks its eval rows among; None when nothing beside them is weighed, or
    `evals` marks no eval row (`--no-evals`)."""
    if evals is not None and evals.no_evals:
        return None
    return load_matrix(paths, root=root)


def _unique_ids(jobs: list[Job]) -> list[Job]:
    """Ids that are unique and do not depend on which files are given, nor in which order.

    The id ends in a 12-hex hash of (recipe fingerprint, recipe key, occurrence): two recipes (or arms) with equal
    matrix entries differ by their key, and InferenceX's repeated list concurrencies (emitted verbatim) by their
    position among the recipe's equal jobs, which the recipe alone decides. The matrix entry itself is unchanged;
    `recipe_fingerprint` keeps the full curve identity.
    """
    seen: dict[tuple[str, str], int] = {}
    out: list[Job] = []
    for job in jobs:
        count = seen.get((job.recipe_key, job.id), 0) + 1
        seen[(job.recipe_key, job.id)] = count
        out.append(job.model_copy(update={"id": _stable_id(job, count)}))
    return out


def _stable_id(job: Job, occurrence: int) -> str:
    head, sep, tail = job.id.rpartition("_")
    if not sep or tail != job.recipe_fingerprint[:12]:
        head = job.id
    salt = job.recipe_fingerprint + "\0" + job.recipe_key + ("" if occurrence == 1 else f"\0{occurrence}")
    return f"{head}_{hashlib.sha256(salt.encode()).hexdigest()[:12]}"
