"""`llmsweep run`: the main job, recipe to dashboard. Parsing and printing only; the work is in execute.pipeline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import yaml

from llmsweep.cli.options import config_keys_option, option, runner_config_option, store_option
from llmsweep.errors import ConfigError
from llmsweep.execute.registry import executor_help, executor_kinds


def _options(pairs: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--executor-option {pair!r} is not KEY=VALUE", fix="e.g. --executor-option partition=gpu")
        out[key.strip().replace("-", "_")] = yaml.safe_load(value)
    return out


@click.command("run")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@config_keys_option()
@click.option("--executor", type=click.Choice(executor_kinds()), default="local", show_default=True,
              help=executor_help() + ".")
@click.option("--executor-option", "executor_options", multiple=True, metavar="KEY=VALUE",
              help="Executor settings, e.g. partition=gpu, time_limit=04:00:00, squash_dir=/shared/sqsh.")
@option("simulate")
@click.option("--live", is_flag=True,
              help="Simulated jobs: serve the simulator over HTTP and drive it in wall-clock time (exercises the "
                   "client) instead of running its core in virtual time (the default: a full window in seconds).")
@option("traces", default=None,
        help="Agentic jobs: replay this trace source instead of the recipe's: 'synthetic' (the built-in AgentX-shaped "
             "corpus; needs no network), a trace file or directory, or a Hugging Face dataset id.")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failed or invalid job.")
@click.option("--resume", is_flag=True, help="Skip jobs whose valid summary exists in --out; rerun half-done ones.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/latest"), show_default=True,
              help="Run directory (one folder per job under jobs/).")
@store_option(dest="store")
@runner_config_option()
@click.option("--no-report", is_flag=True, help="Skip writing the HTML dashboard.")
@click.option("--startup-timeout", type=float, default=None, help="Seconds to wait for a server to become ready.")
@option("request_timeout")
@option("client_workers")
@click.option("--al-tolerance", type=float, default=0.10, show_default=True,
              help="Allowed |realised − pinned| acceptance length in the read-back gate.")
@click.option("--_worker", "worker", type=click.Path(path_type=Path), default=None, hidden=True)
def run(files: tuple[Path, ...], config_keys: tuple[str, ...], executor: str, executor_options: tuple[str, ...],
        simulate: bool, live: bool, traces: str | None, fail_fast: bool, resume: bool, out: Path,
        store: Path | None, runner_config: Path | None,
        no_report: bool, startup_timeout: float | None, request_timeout: float, client_workers: int,
        al_tolerance: float, worker: Path | None) -> int:
    """Run recipes end to end: validate, launch, load, gate, store, report.

    Jobs with identical launch specs share one server. Simulated jobs (the `sim` engine, or --simulate) run on the
    simulator core in virtual time unless --live. The last line printed is the dashboard's path.
    """
    from llmsweep.execute.pipeline import RunRequest, run_sweep, run_worker

    if worker is not None:
        sys.exit(run_worker(worker))
    if not files:
        raise ConfigError("no recipe files given", fix="llmsweep run recipes/my-recipe.yaml --out runs/x")
    settings: dict[str, Any] = {
        "resume": resume, "fail_fast": fail_fast, "startup_timeout_s": startup_timeout,
        "request_timeout_s": request_timeout, "client_workers": client_workers,
        "readback": {"al_tolerance": al_tolerance},
    }
    request = RunRequest(
        files=list(files), config_keys=list(config_keys) or None, runner_config=runner_config, executor=executor,
        executor_options=_options(executor_options), simulate=simulate, live=live, traces=traces, out=out,
        store=store, report=not no_report, settings=settings,
    )
    outcome = run_sweep(request)
    click.echo(outcome.completeness(), err=True)
    if outcome.report_path is not None:
        click.echo(str(outcome.report_path))
    else:
        click.echo(str(outcome.run_dir))
    return 0 if outcome.ok else 1
