"""`llmsweep run`: the main job, recipe to dashboard. Parsing and printing only; the work is in execute.pipeline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import yaml

from llmsweep.errors import ConfigError


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
@click.option("--config-keys", multiple=True, help="Recipe keys (globs allowed) to run; default: every key.")
@click.option("--executor", type=click.Choice(["local", "docker", "slurm"]), default="local", show_default=True,
              help="Where servers run: this machine, Docker on this machine, or Slurm batch jobs.")
@click.option("--executor-option", "executor_options", multiple=True, metavar="KEY=VALUE",
              help="Executor settings, e.g. partition=gpu, time_limit=04:00:00, squash_dir=/shared/sqsh.")
@click.option("--simulate", is_flag=True, help="Run every job on the built-in simulated engine instead of its real one.")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failed or invalid job.")
@click.option("--resume", is_flag=True, help="Skip jobs whose valid summary exists in --out; rerun half-done ones.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/latest"), show_default=True,
              help="Run directory (one folder per job under jobs/).")
@click.option("--store", type=click.Path(path_type=Path), default=None,
              help="Results database (default: $LLMSWEEP_STORE or ~/.llmsweep/results.sqlite).")
@click.option("--runner-config", type=click.Path(path_type=Path), default=None, help="Fleet file (runners.yaml format).")
@click.option("--no-report", is_flag=True, help="Skip writing the HTML dashboard.")
@click.option("--startup-timeout", type=float, default=None, help="Seconds to wait for a server to become ready.")
@click.option("--request-timeout", type=float, default=600.0, show_default=True, help="Whole-request timeout (s).")
@click.option("--client-workers", type=int, default=1, show_default=True, help="Client worker processes.")
@click.option("--al-tolerance", type=float, default=0.10, show_default=True,
              help="Allowed |realised − pinned| acceptance length in the read-back gate.")
@click.option("--_worker", "worker", type=click.Path(path_type=Path), default=None, hidden=True)
def run(files: tuple[Path, ...], config_keys: tuple[str, ...], executor: str, executor_options: tuple[str, ...],
        simulate: bool, fail_fast: bool, resume: bool, out: Path, store: Path | None, runner_config: Path | None,
        no_report: bool, startup_timeout: float | None, request_timeout: float, client_workers: int,
        al_tolerance: float, worker: Path | None) -> int:
    """Run recipes end to end: validate, launch, load, gate, store, report.

    Jobs with identical launch specs share one server. The last line printed is the dashboard's path.
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
        executor_options=_options(executor_options), simulate=simulate, out=out, store=store,
        report=not no_report, settings=settings,
    )
    outcome = run_sweep(request)
    click.echo(outcome.completeness(), err=True)
    if outcome.report_path is not None:
        click.echo(str(outcome.report_path))
    else:
        click.echo(str(outcome.run_dir))
    # A policy error is bad input (2, as `validate`): its jobs were refused before any launch.
    return 0 if outcome.ok else 2 if any(f.is_error for f in outcome.findings) else 1
