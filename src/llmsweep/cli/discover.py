"""`llmsweep discover`: measure an arm's noise and knee, propose the official grid. Parsing and printing only; the
work is in `llmsweep.discover`."""

from __future__ import annotations

from pathlib import Path

import click

from llmsweep.cli.options import (
    FINITE_POSITIVE,
    FiniteRange,
    PathValue,
    json_option,
    option,
    out_option,
    runner_config_option,
    store_option,
)
from llmsweep.cli.options import executor_options as parse_executor_options
from llmsweep.execute.registry import executor_help, executor_kinds
from llmsweep.spec.workload import MAX_DURATION_S
from llmsweep.words import count_of


def whole_seconds(_ctx: click.Context, _param: click.Parameter, value: float | None) -> int | None:
    """`--duration`: a window, as every command's, written into the stage recipes' `duration` (whole seconds)."""
    if value is None:
        return None
    if not value.is_integer():
        raise click.BadParameter(f"{value:g} is not a whole number of seconds: a discovery run's window is its stage "
                                 f"recipes' `duration`, whole seconds as in a recipe (e.g. {max(1, round(value))})")
    return int(value)


@click.command("discover")
@click.argument("recipe", type=PathValue(path_type=Path))
@option("simulate")
@option("repeats", default=3, type=click.IntRange(min=2),
        help="Runs of every ladder point (each draws its own prompts): the run-to-run noise comes from them.")
@click.option("--ladder-top", type=click.IntRange(min=1), default=None,
              help="Highest concurrency of the coarse ladder (default: the larger of 64 and 4x the recipe's "
                   "highest concurrency).")
@click.option("--refine", type=click.IntRange(min=0), default=2, show_default=True,
              help="Bisection rounds around each arm's knee and KV cliff (one run per new point).")
@click.option("--time-limit", type=FINITE_POSITIVE, default=None, metavar="SECONDS",
              help="Wall-clock seconds the discovery should take: the ladder always runs whole; a refinement round "
                   "whose estimate (from the ladder's measured server start and slowest run) does not fit in what is "
                   "left is skipped, and says so. Not a hard limit (Ctrl-C stops a discovery).")
@option("duration", type=FiniteRange(min=0, min_open=True, max=MAX_DURATION_S), callback=whole_seconds,
        help="Profiling window of every discovery run in seconds (default: the recipe's); it goes into the stage "
             "recipes' `duration`, so whole seconds, at most a recipe's limit. The proposed recipe keeps its own.")
@option("traces", default=None,
        help="Agentic jobs: replay this trace source instead of the recipe's ('synthetic', a file or directory, or "
             "a Hugging Face dataset id).")
@option("executor", type=click.Choice(executor_kinds()), help=executor_help() + " (every stage's servers, as "
        "`llmsweep run --executor`; not with --simulate, which runs the stages in virtual time here).")
@option("executor_option", help="Executor settings, e.g. allow_image=true (local), partition=gpu (slurm).")
@runner_config_option()
@option("runner_labels")
@out_option(default=Path("runs/discover"), show_default=True,
            help="Discovery directory: stages/ (one run per stage), discovery.json, proposed.yaml, proposed.diff.")
@store_option(dest="store", help="Results store for the discovery runs (default: store.sqlite in --out).")
@json_option("the discovery (every run, the noise, the knee and the proposed grid of each arm)")
def discover(recipe: Path, simulate: bool, repeats: int, ladder_top: int | None, refine: int,
             time_limit: float | None, duration: int | None,
             traces: str | None, executor: str, executor_options: tuple[str, ...], runner_config: Path | None,
             runner_labels: tuple[str, ...], out: Path, store: Path | None, as_json: bool) -> int:
    """Propose RECIPE's official concurrency grid from measurements.

    For each arm: a coarse ladder (the arm's first concurrency, then powers of two) run --repeats times to measure
    run-to-run noise per metric; bisection around the knee (where throughput per GPU stops rising beyond noise) and
    the KV/HBM cliff (the server's KV usage and preemptions); then the grid from the arm's first concurrency to the
    knee, each step the smallest that moves throughput or interactivity beyond noise. A knee not reached within
    the ladder (throughput still rising at its top) is said so, and the grid then runs to the ladder's top and keeps
    the recipe's concurrencies above it. Writes the proposed recipe and its diff with the evidence. Runs on the
    simulator in virtual time with --simulate, on the recipe's engine otherwise, through --executor as `llmsweep
    run` does (one server per arm and stage: see docs/discover.md).
    Interrupted (Ctrl-C, SIGTERM), it stops, writes discovery.json from the runs measured so far and proposes
    nothing (exit 128 + the signal: 130 for Ctrl-C, 143 for SIGTERM).
    """
    from llmsweep.discover.sweep import DiscoverRequest
    from llmsweep.discover.sweep import discover as run_discovery
    from llmsweep.execute.progress import progress_for, use_progress

    req = DiscoverRequest(recipe=recipe, out=out, simulate=simulate, repeats=repeats, ladder_top=ladder_top,
                          refine=refine, time_limit=time_limit, duration=duration, traces=traces, store=store,
                          runner_config=runner_config, runner_labels=list(runner_labels), executor=executor,
                          executor_options=parse_executor_options(executor_options))
    with use_progress(progress_for()) as progress:
        result = run_discovery(req, event=progress.line)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        _print(result)
    if result.interrupted is not None:  # its discovery.json holds what was measured; 128 + the first signal
        from llmsweep.execute import signals

        return signals.exit_code()
    if result.proposal_error is not None:  # measured and kept, but the recipe could not be rewritten to say it
        return 2
    # a run measured across a Ctrl-Z is invalid, as `run` judges a job, and fails the command as it fails `run`; so
    # does a stage that stopped on an error (what it and the stages before measured is analysed and kept)
    return 0 if all(a.error is None for a in result.arms) and not result.paused and result.failed is None else 1


def _policy_words(result: object) -> str:
    """The proposed policy as proposed.yaml writes it: one key's as it is, several keys' each under its name (one
    figure over them all had told each key a cap or step that was another's)."""
    from llmsweep.discover.model import Discovery

    assert isinstance(result, Discovery)
    said = {key: words for key, p in result.policy.items() if (words := p.describe())}
    if not said:
        return "none proposed"
    recipe_keys = dict.fromkeys(a.recipe_key for a in result.arms)
    if len(recipe_keys) == 1:
        return next(iter(said.values()))
    return "; ".join(f"{key}: {said.get(key, 'none proposed')}" for key in recipe_keys)


def _print(result: object) -> None:
    from rich.markup import escape

    from llmsweep.cli.tables import Column, plain, print_tables, table_console
    from llmsweep.discover.model import Discovery, job_growth
    from llmsweep.metrics.model import source_words

    assert isinstance(result, Discovery)
    console = table_console()
    # what the figures are, as `llmsweep run`'s title says it: a discovery on the simulator is no measurement of an
    # engine (a recipe that serves the simulator runs there without --simulate too)
    kinds = dict.fromkeys((r.source, r.clock) for r in result.runs)
    if kinds:
        console.print("[bold]llmsweep discover[/] — " + "; ".join(source_words(s, c) for s, c in kinds))
    for arm in result.arms:
        console.print(f"[bold]{arm.arm}[/]  {arm.label}")
        noise = ", ".join(f"{n.label} {n.cv:.1%}" for n in arm.noise if n.cv is not None)
        console.print(f"  noise (cv between repeats): {noise or 'unknown'}")
        # what the arm's runs warned of their results (a real engine would refuse its jobs, ...): its grid rests on
        # them, so the proposal says them, each once, as `run`'s table notes a job's
        for w in arm.warnings:
            mark = "[red]⚠[/]" if w.engine_refuses else "⚠"
            console.print(f"  {mark} " + escape(f"{w.warning} ({w.runs} of its {count_of(arm.runs, 'run')})"),
                          highlight=False)
        if arm.error:
            console.print(f"  [red]no proposal:[/] {arm.error}")
            continue
        if arm.knee is not None:
            console.print(f"  knee: {arm.knee.describe()} — {arm.knee.reason}")
            if arm.knee.cliff:
                console.print(f"  cliff: {arm.knee.cliff}")
        # interrupted or failed, the grid is what the runs so far would give, and not proposed (nor written)
        said = "from the runs so far (not proposed)" if result.interrupted or result.failed else "proposed"
        console.print(f"  recipe: {arm.original}  ->  {said}: {arm.concs} "
                      f"({count_of(len(arm.concs), 'concurrency', 'concurrencies')} for the recipe's "
                      f"{len(arm.original)})")
        grid = "proposed grid" if said == "proposed" else "grid from the runs so far (not proposed)"
        columns = [Column("conc"), Column("why", kind="text", justify="left", min_width=24)]
        print_tables(plain(f"{arm.label}: {grid}"), columns, [[str(p.conc), plain(p.why)] for p in arm.proposed],
                     console=console)
    launches = sum(s.server_launches for s in result.stages)
    smoke = sum(r.verdict == "smoke" for r in result.runs)
    smoke_said = f" ({smoke} of them smoke runs, not official measurements: each summary says why)" if smoke else ""
    # what ran says what the runs were; with none, what was asked (a discovery of nothing measured nothing)
    verb = ("simulated" if all(s == "simulated" for s, _ in kinds) else "measured") if kinds else \
        ("ran" if not result.simulate else "simulated")
    console.print(f"{verb} {count_of(result.points_measured, 'point')} in {count_of(result.runs_measured, 'run')}"
                  + smoke_said + (f" on {count_of(launches, 'server launch', 'server launches')}" if launches else "")
                  + "; policy: " + _policy_words(result))
    if result.proposed_jobs is not None and result.recipe_jobs is not None:  # what the proposal costs, never silent
        console.print("proposed recipe " + job_growth(result.proposed_jobs, result.recipe_jobs), highlight=False)
    for stage in result.stages:
        if stage.skipped:
            console.print(f"stage {stage.name} skipped: {stage.skipped}")
        for job_id, why in stage.paused.items():
            console.print("[red]invalid[/] " + escape(f"stage {stage.name} job {job_id}: {why}"), highlight=False)
    if result.interrupted:
        from llmsweep.discover.sweep import RESUME

        console.print(f"[red]interrupted[/] during stage {result.interrupted}: no recipe or policy proposed; {RESUME} "
                      "(this one's discovery.json keeps what was measured)")
    if result.failed:
        console.print("[red]failed[/] " + escape(f"{result.failed}: no recipe or policy proposed (discovery.json "
                                                 "keeps what was measured)"), highlight=False)
    if result.proposal_error:
        console.print("[red]no proposed recipe[/] " + escape(f"{result.proposal_error} (discovery.json keeps the "
                                                             "measured points and each arm's grid)"), highlight=False)
    if result.patch:  # as written: wrapped by rich at the terminal's width, a long `+` line lost its marker
        click.echo(result.patch.rstrip("\n"))
    if result.proposed_recipe:
        click.echo(result.proposed_recipe)
