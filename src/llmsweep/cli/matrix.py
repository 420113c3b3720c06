"""`llmsweep matrix full-sweep|test-config`: recipes → the InferenceX job matrix (JSON) on stdout.

Same flags as InferenceX's `generate_sweep_configs.py`, so a GitHub Actions workflow can swap one for the other:
list flags take several space-separated values (`--config-keys a b`). stdout carries only the JSON array; findings
go to stderr. Exit 2 when the input cannot be parsed or planned, else 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from llmsweep.catalog.fleet import FleetCatalog, default_fleet, load_fleet
from llmsweep.cli.options import ManyValues, PathValue, config_keys_option, option, runner_config_option
from llmsweep.errors import ConfigError
from llmsweep.findings import Finding, Severity
from llmsweep.plan import EvalOptions, Job, SweepOptions, matrix_of, plan_jobs
from llmsweep.plan.checks import unused_overrides
from llmsweep.plan.names import SEQ_LEN_NAMES
from llmsweep.policy.registry import get_rule
from llmsweep.policy.rules_input import unknown_label_message
from llmsweep.spec import LoadResult, load_recipes
from llmsweep.spec.components import RECIPE_SCENARIOS
from llmsweep.words import count_of

_COUNT = click.IntRange(min=1)
"""A concurrency, a TP or EP degree: 1 or more, refused as parsed (exit 2). `--min-conc -1` or `--conc 0` printed a
matrix (an empty one for `--max-conc 0`) and exited 0, so a typo in a workflow swept nothing and passed."""


def _common(fn: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        option("config_files", cls=ManyValues, type=PathValue(path_type=Path),
                     help="Recipe/master files or directories (default: every *.yaml under ./recipes)."),
        runner_config_option(),
        option("no_evals"),
        option("evals_only", help="Only the eval subset (rows marked run-eval), as eval-only."),
        option("all_evals", help="Every 8k1k fixed row and every agentic row becomes an eval row (implies eval-only "
               "jobs)."),
        click.option("--runner-node-filter", default=None,
                     help="One job per node of the label whose name contains this substring."),
        click.option("--scenario-type", cls=ManyValues, listed=True,
                     type=click.Choice([s.value for s in RECIPE_SCENARIOS]),
                     help="Scenario types to include (default: all)."),
        option("format", type=click.Choice(["matrix", "jobs", "ids"]), default="matrix",
                     show_default=True,
                     help="matrix: InferenceX entries; jobs: full llmsweep Job JSON; ids: one job id per line."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@click.group("matrix")
def matrix() -> None:
    """Expand recipes into jobs (InferenceX-compatible JSON matrix on stdout)."""


@matrix.command("full-sweep")
@_common
@click.option("--model-prefix", cls=ManyValues, listed=True, help="Keep recipes whose key starts with any of these.")
@click.option("--precision", cls=ManyValues, listed=True, help="Keep these precisions.")
@click.option("--framework", cls=ManyValues, listed=True, help="Keep these frameworks.")
@click.option("--runner-type", cls=ManyValues, listed=True,
              help="Keep these runner labels (must exist in the runner file).")
@click.option("--seq-lens", cls=ManyValues, listed=True, type=click.Choice(list(SEQ_LEN_NAMES)),
              help="Keep these ISL/OSL pairs.")
@click.option("--step-size", type=int, default=2, show_default=True, help="Factor of conc-start/conc-end ranges (>1).")
@click.option("--min-conc", type=_COUNT, default=None, help="Drop concurrencies below this (ranges start here).")
@click.option("--max-conc", type=_COUNT, default=None, help="Drop concurrencies above this ([max] if none remain).")
@click.option("--max-tp", type=_COUNT, default=None,
              help="Skip single-node fixed-seq-len entries with a larger TP (agentic arms are not filtered, as in "
                   "InferenceX).")
@click.option("--max-ep", type=_COUNT, default=None,
              help="Clamp single-node fixed-seq-len EP to this (agentic arms are not clamped, as in InferenceX).")
@click.option("--single-node", is_flag=True, help="Only single-node recipes (default: both kinds).")
@click.option("--multi-node", is_flag=True, help="Only multi-node recipes (default: both kinds).")
def full_sweep_cmd(**kw: Any) -> None:
    """Every recipe, with optional filters."""
    single, multi = kw.pop("single_node"), kw.pop("multi_node")
    if not single and not multi:
        single = multi = True
    options = SweepOptions(
        mode="full-sweep",
        step_size=kw.pop("step_size"),
        min_conc=kw.pop("min_conc"),
        max_conc=kw.pop("max_conc"),
        max_tp=kw.pop("max_tp"),
        max_ep=kw.pop("max_ep"),
        single_node=single,
        multi_node=multi,
        runner_node_filter=kw.pop("runner_node_filter"),
        scenario_types=_tuple(kw.pop("scenario_type")),
        seq_lens=_tuple(kw.pop("seq_lens")),
        model_prefixes=_tuple(kw.pop("model_prefix")),
        precisions=_tuple(kw.pop("precision")),
        frameworks=_tuple(kw.pop("framework")),
        runner_types=_tuple(kw.pop("runner_type")),
    )
    _run(options, **kw)


@matrix.command("test-config")
@_common
@config_keys_option(required=True)
@click.option("--conc", cls=ManyValues, listed=True, type=_COUNT, help="Keep only these concurrencies.")
@click.option("--seq-lens", cls=ManyValues, listed=True, type=click.Choice(list(SEQ_LEN_NAMES)),
              help="Keep these ISL/OSL pairs.")
def test_config_cmd(**kw: Any) -> None:
    """Exactly the named recipe keys, fully expanded (step 2)."""
    options = SweepOptions(
        mode="test-config",
        config_keys=_tuple(kw.pop("config_keys")),
        conc=_tuple(kw.pop("conc")),
        seq_lens=_tuple(kw.pop("seq_lens")),
        runner_node_filter=kw.pop("runner_node_filter"),
        scenario_types=_tuple(kw.pop("scenario_type")),
    )
    _run(options, **kw)


def _tuple(values: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    return tuple(values) if values else None


def _run(options: SweepOptions, *, config_files: tuple[Path, ...], runner_config: Path | None, no_evals: bool,
         evals_only: bool, all_evals: bool, fmt: str) -> None:
    evals = EvalOptions(no_evals=no_evals, evals_only=evals_only, all_evals=all_evals)
    evals.check()
    options.check()
    files = list(config_files) or _default_recipe_files()
    fleet = load_fleet(runner_config) if runner_config is not None else default_fleet()
    loaded = load_recipes(files)
    _report(loaded, fleet)
    if not loaded.ok:
        raise ConfigError(f"{count_of(len(loaded.errors), 'recipe error')}; no matrix written",
                          fix="fix the findings above (file:line) and rerun")
    if not loaded.recipes:  # a folder with no recipe, an empty file: bad input, as `validate` and `run` say it
        where = f"--config-files {' '.join(map(str, files))}" if config_files else "./recipes (no --config-files)"
        raise ConfigError(f"no recipe in {where}; no matrix written",
                          fix="pass recipe YAML files (recipe keys mapping to image, model, scenarios, …) or "
                              "directories of them")
    # a full sweep's eval rows are the matrix's the files belong to (every recipe of their repository's recipes/)
    matrix = matrix_of(files, evals) if options.mode == "full-sweep" else None
    jobs = plan_jobs(loaded.recipes, options, fleet, evals, matrix)
    for finding in matrix.left_out if matrix is not None else ():  # what its eval rows were chosen without
        click.echo(finding.render(), err=True)
    for moved in matrix.moved if matrix is not None else ():  # a configuration whose eval another file's rows hold
        click.echo(moved.note(), err=True)
    if _unfiltered(options) and not (evals.evals_only or evals.all_evals):
        for finding in unused_overrides(loaded.recipes, jobs):
            click.echo(finding.render(), err=True)
    click.echo(_render(jobs, fmt))


def _unfiltered(options: SweepOptions) -> bool:
    """True when no flag narrowed the expansion (so an override matching nothing is a real mistake)."""
    default = SweepOptions(mode=options.mode, config_keys=options.config_keys)
    return options == default


def _default_recipe_files() -> list[Path]:
    root = Path("recipes")
    if not root.is_dir():
        raise ConfigError("no --config-files given and no ./recipes directory here",
                          fix="pass --config-files <file or dir>..., or run from the repository root")
    return sorted(root.rglob("*.yaml"))


def _render(jobs: list[Job], fmt: str) -> str:
    if fmt == "ids":
        return "\n".join(job.id for job in jobs)
    if fmt == "jobs":
        return json.dumps([job.to_json() for job in jobs])
    return json.dumps([job.matrix_entry() for job in jobs])


def _report(loaded: LoadResult, fleet: FleetCatalog) -> None:
    """Findings to stderr; the routine "no serve block" warning of master files collapses to one line."""
    not_runnable = [f for f in loaded.findings if f.rule == "spec.not-runnable"]
    for finding in loaded.findings:
        if finding.rule != "spec.not-runnable":
            click.echo(finding.render(), err=True)
    if not_runnable:
        click.echo(f"note: no `serve` block in {count_of(len(not_runnable), 'recipe')}: plannable, not runnable by "
                   "llmsweep",
                   err=True)
    for finding in _unknown_labels(loaded, fleet):
        click.echo(finding.render(), err=True)


def _unknown_labels(loaded: LoadResult, fleet: FleetCatalog) -> list[Finding]:
    out = []
    for recipe in loaded.recipes.values():
        if not fleet.has_label(recipe.runner):
            out.append(Finding(
                rule="fleet.unknown-label", severity=Severity.WARNING, file=recipe.file,
                line=recipe.line_of(("runner",)), path=recipe.path_of(("runner",)),
                message=unknown_label_message(recipe.runner, fleet.file), fix=get_rule("fleet.unknown-label").fix,
            ))
    return out
