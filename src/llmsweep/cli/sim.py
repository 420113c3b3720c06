"""`llmsweep sim serve` (the live simulated engine; its options are the simulator's own, `sim.serve_args`) and
`llmsweep predict` (virtual-time prediction of a recipe)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llmsweep.cli.options import (
    BIND_PORT,
    Opt,
    PathValue,
    config_keys_option,
    held_results,
    json_group_option,
    json_option,
    option,
    out_option,
    recipe_files_argument,
    refuse_replacing,
    runner_config_option,
)
from llmsweep.cli.serving import bind_fix, serve_router, wait_for_stop
from llmsweep.errors import ConfigError, LlmsweepError, ResultError
from llmsweep.sim import serve_flags as sf
from llmsweep.sim.serve_args import engine_config, engine_config_from_argv, serve_options
from llmsweep.words import count_of
from llmsweep.writable import refuse_unwritable

if TYPE_CHECKING:
    from collections.abc import Callable

    from llmsweep.execute.predict_pool import Outcome, Settings, Unit
    from llmsweep.plan.job import Job
    from llmsweep.sim.calibrate import PointComparison, RunCalibration


@click.group("sim")
@json_group_option()
def sim() -> None:
    """The simulated engine: serve it over HTTP, or calibrate it against measured runs."""


@sim.command("serve")
@serve_options
def serve(**opts: object) -> None:
    """Serve the simulated engine over an OpenAI-compatible HTTP API."""
    from llmsweep.sim.roles import RoleConfig
    from llmsweep.sim.transfer import DEFAULT_LINK, parse_links

    config = engine_config(opts)
    style = str(opts["metrics_style"])
    links = parse_links(str(opts["kv_links"])) if opts["kv_links"] is not None else (DEFAULT_LINK,)
    role = RoleConfig(role=opts["role"], kv_transfer=opts["kv_transfer"],  # type: ignore[arg-type]
                      links=links, prefill_tp=opts["prefill_tp"])  # type: ignore[arg-type]
    asyncio.run(_serve(config, host=str(opts["host"]), port=int(str(opts["port"])),
                       served_model_name=opts["served_model_name"], metrics_style=style, role=role))


@sim.command("router")
@option("prefill_urls")
@option("decode_urls")
@option("kv_transfer")
@option("bind_host")
@click.option(sf.PORT, "port", default=8001, show_default=True, type=BIND_PORT,
              help="Port to bind (0 = any free port).")
def router(prefill: tuple[str, ...], decode: tuple[str, ...], kv_transfer: str | None, host: str, port: int) -> None:
    """Serve a simulated PD router in front of simulator prefill and decode workers (`sim serve --role`): `llmsweep
    router --protocol sim`."""
    asyncio.run(serve_router("sim router", "sim", list(prefill), list(decode), kv_transfer=kv_transfer, host=host,
                             port=port))


async def _serve(config: object, *, host: str, port: int, served_model_name: object, metrics_style: str,
                 role: object = None) -> None:
    from llmsweep.sim.server import READY_LINES, SimServer, capacity_log_line, start_server

    server = SimServer(config, served_model_name=served_model_name or None,  # type: ignore[arg-type]
                       metrics_style=metrics_style, role=role)  # type: ignore[arg-type]
    try:
        runner, bound = await start_server(server, host, port)
    except OSError as exc:
        raise LlmsweepError(f"llmsweep sim serve: cannot bind {host}:{port}: {exc.strerror}",
                            fix=bind_fix(port)) from exc
    style = server.config.engine_style
    click.echo(capacity_log_line(style, server.core), err=True)
    click.echo(f"simulator calibration: {server.config.calibration_label()}", err=True)
    click.echo(f"Uvicorn running on http://{host}:{bound} (simulated engine, model {server.model_name})", err=True)
    if server.role.role != "server":
        click.echo(f"simulated {server.role.role} worker on node {server.node}"
                   + (f"; {server.transfer_text()}" if server.role.role == "decode" else ""), err=True)
    click.echo(READY_LINES[style], err=True)
    sys.stderr.flush()
    try:
        await wait_for_stop("sim serve")
    finally:
        await runner.cleanup()


@sim.command("calibrate")
@click.argument("paths", nargs=-1, required=True, type=PathValue(exists=True))
@option("model", required=False, default=None,
        help="records.jsonl mode: model the records were measured on.")
@click.option("--hardware", default=None, help="records.jsonl mode: GPU SKU the records were measured on.")
@click.option("--tp", default=1, show_default=True, type=click.IntRange(min=1), help="Tensor-parallel degree.")
@click.option("--ep", default=1, show_default=True, type=click.IntRange(min=1), help="Expert-parallel degree.")
@click.option("--precision", default="bf16", show_default=True, help="Weight/compute precision.")
@click.option("--kv-dtype", default="bf16", show_default=True, help="KV-cache dtype.")
@click.option("--engine-style", type=click.Choice(["sglang", "vllm"]), default="vllm", show_default=True,
              help="records.jsonl mode: engine whose default efficiencies to start from.")
@click.option("--max-iter", default=8, show_default=True, type=click.IntRange(1, 50),
              help="Run mode: most Levenberg-Marquardt iterations per calibration key.")
@click.option("--factors", cls=Opt, listed=True, metavar="FACTOR",
              help="Run mode: Efficiency factors to fit (fewer points, fewer factors; the rest keep "
                   "the engine's defaults). Default: mem,compute,step_s,per_seq_s,frontend_s, plus "
                   "frontend_per_request_s for points at two or more concurrencies and draft_layer_fraction "
                   "for speculative points.")
@click.option("--hold-out", "hold_out", multiple=True, metavar="PATTERN",
              help="Run mode: also fit without the points whose label matches PATTERN (shell-style, e.g. "
                   "'fixed 1024/128 c4', 'agentic *'; repeatable) and report how well that fit predicts them.")
@click.option("--save", "save", is_flag=True,
              help="Run mode: store the fitted factors in sim_calibration.yaml of the user catalog directory "
                   "($LLMSWEEP_CATALOG_DIR), where every later prediction of that key picks them up.")
@out_option("Run mode: store the fitted factors in this calibration file (or directory) instead (entries of "
            "the same key in it are replaced, as --save replaces them).", dest="save_to",
            type=PathValue(dir_okay=True))
@json_option("the fit")
def calibrate(paths: tuple[str, ...], model: str | None, hardware: str | None, tp: int, ep: int, precision: str,
              kv_dtype: str, engine_style: str, max_iter: int, factors: tuple[str, ...], hold_out: tuple[str, ...],
              save: bool,
              save_to: str | None, as_json: bool) -> None:
    """Fit the simulator's efficiency factors to a measured run.

    PATHS are run directories (`llmsweep run --out`) or job folders: every measured point (job.json +
    summary.json) is replayed on the simulator and the factors move until its output throughput, median TPOT and
    median TTFT match, per (engine, hardware, model class, precision, TP, KV dtype); the table shows each point
    before and after. Points the simulator produced (summary source `simulated` or `predicted`) are left out with
    the reason; a run of nothing else is refused. A single records.jsonl with --model and --hardware fits the
    per-request decode-step model instead.
    """
    import json

    from click.core import ParameterSource

    records_mode = len(paths) == 1 and Path(paths[0]).is_file()
    ctx = click.get_current_context()
    other = ("max_iter", "factors", "hold_out", "save", "save_to") if records_mode else \
        ("model", "hardware", "tp", "ep", "precision", "kv_dtype", "engine_style")
    spelling = {p.name: p.opts[0] for p in ctx.command.params}
    ignored = [spelling[name] for name in other
               if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)]
    if ignored:  # an option the mode does not read would be dropped without a word (a --save that saves nothing)
        raise ConfigError(
            f"sim calibrate: {', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} for "
            + ("run directories; a records.jsonl is fitted per request and nothing is stored or held out"
               if records_mode else "a records.jsonl; a run directory's job.json files say what each point ran"),
            fix="pass a run directory (or its jobs/<id>/ folders) to fit, hold out and save" if records_mode
            else f"drop {', '.join(ignored)}, or pass a single records.jsonl with --model and --hardware")
    if records_mode:
        if not model or not hardware:
            raise ConfigError("sim calibrate: a records.jsonl needs --model and --hardware",
                              fix="add --model NAME --hardware SKU, or pass the run directory instead")
        _calibrate_records(paths[0], model, hardware, tp, ep, precision, kv_dtype, engine_style, as_json)
        return
    from llmsweep.sim.calibrate import (
        FACTOR_BOUNDS,
        calibrate_runs,
        hold_out_runs,
        hold_out_splits,
        measured_groups,
    )

    chosen = factors or None
    unknown = sorted(set(chosen or ()) - set(FACTOR_BOUNDS))
    if unknown:
        raise ConfigError(f"sim calibrate: --factors {','.join(factors)!r} names unknown factors {unknown}",
                          fix=f"choose from {', '.join(sorted(FACTOR_BOUNDS))}")
    def say(line: str) -> None:  # a fit replays every point many times: minutes on a large run
        click.echo(f"[{time.strftime('%H:%M:%S')}] {line}", err=True)

    target = None
    if save or save_to:  # where the fit goes, and that it can go there, is settled before minutes of fitting
        from llmsweep.sim.calibration import read_save_target, user_file

        target = user_file(Path(save_to) if save_to else None)
        read_save_target(target)
    if hold_out:  # a pattern that matches no point (or every one) is refused before minutes of fitting
        hold_out_splits(measured_groups([Path(p) for p in paths], _config_for_job)[0], hold_out)
    results, skipped = calibrate_runs([Path(p) for p in paths], _config_for_job, factors=chosen, max_iter=max_iter,
                                      say=say)
    checks, unchecked = hold_out_runs([Path(p) for p in paths], _config_for_job, hold_out, factors=chosen,
                                      max_iter=max_iter, say=say) if hold_out and results else ([], [])
    if not results:
        raise LlmsweepError("sim calibrate: nothing the simulator can model was found to fit: every point or key "
                            "was left out" + "".join(f"\n  skipped {s}" for s in skipped),
                            fix="follow the fix each skipped line names (too few points: more points or fewer "
                                "--factors; a model the catalog lacks: add its figures; a speculative run: its "
                                "realised acceptance length)")
    saved: list[str] = []
    not_saved: list[str] = []  # a fit no better than the calibration in effect (or the defaults) is never stored
    if target is not None:
        for result in results:
            if (why := result.not_saved()) is not None:
                not_saved.append(why)
            else:
                saved.append(str(_save(result, target, say)))
    if as_json:
        click.echo(json.dumps({"calibrations": [r.to_json() for r in results], "skipped": skipped,
                               "hold_out": [c.to_json() for c in checks], "hold_out_unchecked": unchecked,
                               "saved": saved, "not_saved": not_saved}, indent=2, default=str))
        _refuse_unsaved(not_saved)
        return
    for result in results:
        _print_calibration(result)
    for check in checks:
        _print_calibration(check.fit, title="in-sample (hold-out fit)")
        _print_points(f"{check.key.label} held out ({', '.join(check.patterns)}): measured / defaults / "
                      f"in-sample fit (error {100 * check.error_before:.1f}% -> {100 * check.error_after:.1f}%)",
                      check.points)
        for why in check.left_out:
            click.echo(f"  not predicted {why}")
    for why in unchecked:
        click.echo(f"no hold-out check for {why}")
    for path in saved:
        click.echo(f"saved to {path}")
    _refuse_unsaved(not_saved)


def _refuse_unsaved(not_saved: list[str]) -> None:
    """Exit 1, saying why, when --save or --out stored not every fit: a fit that would make predictions worse."""
    if not_saved:
        raise ResultError(f"sim calibrate: not saved: {'; '.join(not_saved)}",
                          fix="fit every factor (drop --factors), more points or more --max-iter; what is in effect "
                              "predicts these points better and stays")


def _config_for_job(job: dict[str, object]) -> object:
    """The simulator config `llmsweep predict` would run for a measured job (the sim adapter's rendering)."""
    from llmsweep import engines
    from llmsweep.plan.job import Job

    return engine_config_from_argv(engines.render(Job.model_validate(job), simulate=True).argv)


def _save(result: RunCalibration, target: Path, say: Callable[[str], None]) -> Path:
    from llmsweep.sim.calibration import (
        CalibrationEntry,
        CalibrationProvenance,
        entry_id,
        now_utc,
        save_calibration,
        shadowed,
    )

    key = result.key
    prov = result.provenance
    version = " ".join(str(v) for v in (prov.get("engine"), prov.get("engine_version")) if v) or None
    entry = CalibrationEntry(
        engine=key.engine, hardware=key.hardware, model_class=key.model_class,  # type: ignore[arg-type]
        precision=key.precision, tp=key.tp, kv_dtype=key.kv_dtype, ep=key.ep, dp_attention=key.dp_attention,
        efficiency={k: float(f"{v:.4g}") for k, v in result.overrides().items()},
        error_before=round(result.defaults_error, 4), error_after=round(result.error_after, 4),
        provenance=CalibrationProvenance(
            run_id=str(prov.get("run_id") or "unknown"), date=str(prov.get("date") or "unknown"),
            engine_version=version,
            gpu=prov.get("gpu"), model=prov.get("model"), jobs=int(prov.get("jobs") or 0), fitted_at=now_utc()),
    )
    saved_id = entry_id(result.key)
    path = save_calibration(target, saved_id, entry)
    if (why := shadowed(saved_id, entry)) is not None:
        say(f"warning: saved to {path}, but {why}; remove that entry, or save there with --out")
    return path


def _print_calibration(r: RunCalibration, title: str = "") -> None:
    _print_points(f"{r.key.label}{' ' + title if title else ''}: measured / before / after (before: {r.before}; "
                  f"fit error {100 * r.error_before:.1f}% -> {100 * r.error_after:.1f}%)", r.points)
    for name in r.fitted:
        click.echo(f"  {name:<22} {r.before_value(name):.6g} -> {getattr(r.efficiency, name):.6g}")
    if r.in_effect is not None:
        click.echo(f"  (the engine's defaults: fit error {100 * r.defaults_error:.1f}%)")
        if dropped := r.dropped():
            click.echo(f"  (calibration '{r.in_effect}' also sets {', '.join(dropped)}: a saved fit replaces it "
                       "whole, and those go back to the engine's defaults)")
    if r.started_from != "the defaults":
        click.echo(f"  (the search from {r.started_from} ended with the lower error)")
    if (why := r.not_saved()) is not None:
        click.echo(f"  warning: no improvement: {why}; --save and --out do not store it")
    for why in r.left_out:
        click.echo(f"  left out {why}")
    from llmsweep.sim.calibrate import MIXED_FIX

    for line in r.mixed_machines:  # said on stderr before the fit too, and under `mixed_machines` in --json
        click.echo(f"  warning: {line}; {MIXED_FIX}")


def _print_points(title: str, points: list[PointComparison]) -> None:
    """Each point's measured / before / after figures, laid out as every table is (`cli.tables.print_tables`): a
    metric's three figures are one cell, never wrapped or cut; the metrics that do not fit beside the point go into a
    continuation table; a figure that was not fitted is marked `*`, said in the caption."""
    from llmsweep.cli.tables import Column, plain, print_tables
    from llmsweep.sim.calibrate import COMPARED, pool_lines

    # each figure headed and shown as every table shows the metric (`HotColumn.header`, `cell`: latencies in ms)
    columns = [Column("point", kind="key", justify="left"), Column("conc"), *(Column(c.header) for c in COMPARED)]
    rows = []
    marked = False
    for p in points:
        cells = [plain(p.label), str(p.concurrency)]
        for c in COMPARED:
            vals = [c.cell(d.get(c.name)) for d in (p.measured, p.before, p.after)]
            mark = "" if p.weights.get(c.name, 0) > 0 else " *"
            marked = marked or bool(mark)
            cells.append(" / ".join(vals) + mark)
        rows.append(cells)
    # the mark said under the table, in its width, where a figure has it
    print_tables(plain(title), columns, rows, caption="* not fitted (an agentic point's output rate is set by the "
                 "traces' idle gaps)" if marked else None)
    for line in pool_lines(points):
        click.echo(f"  {line}")


def _calibrate_records(records: str, model: str, hardware: str, tp: int, ep: int, precision: str, kv_dtype: str,
                       engine_style: str, as_json: bool) -> None:
    import json

    from llmsweep.sim.calibrate import calibrate as fit
    from llmsweep.sim.engine import EngineConfig

    config = EngineConfig(model=model, hardware=hardware, tp=tp, ep=ep, precision=precision, kv_dtype=kv_dtype,
                          engine_style=engine_style, calibrated=False)  # type: ignore[arg-type]
    result = fit(records, config)
    if as_json:
        click.echo(json.dumps({"efficiency": result.overrides(), "samples": result.samples, "r2": result.r2,
                               "mean_abs_pct_error": result.mean_abs_pct_error}, indent=2))
        return
    click.echo(f"fitted from {result.samples} requests: R^2 {result.r2:.3f}, "
               f"decode-step error {100 * result.mean_abs_pct_error:.1f}%")
    for name, value in result.overrides().items():
        click.echo(f"  {name:<22} {value:.6g}")


@click.command("predict")
@recipe_files_argument()
@config_keys_option()
@option("duration", help="Profiling window of every point in virtual seconds (default: the job's duration, else "
                          "600).")
@click.option("--max-requests", type=click.IntRange(min=1), default=None,
              help="Stop after this many profiling requests per point.")
@out_option("Write records.jsonl, server_metrics.jsonl, gpu_metrics.jsonl (the modelled power) and summary.json "
            "per point under this folder; one that holds results is refused unless --force.", dest="out_dir",
            type=PathValue(file_okay=False))
@option("force", help="Replace the results --out already holds.")
@option("traces", default=None,
        help="Agentic jobs: replay this trace source instead of the recipe's ('synthetic' = the built-in "
             "AgentX-shaped corpus; needs no network).")
@option("processes")
@json_option("the predicted summaries")
@runner_config_option()
@option("runner_labels")
def predict(files: tuple[Path, ...], config_keys: tuple[str, ...], duration: float | None,
            max_requests: int | None, out_dir: str | None, force: bool, traces: str | None, processes: int | None,
            as_json: bool, runner_config: Path | None, runner_labels: tuple[str, ...]) -> None:
    """Predict every job of a recipe in virtual time on the simulated engine.

    Every job gets a result or a refusal with its reason (a policy error about it, as `run --simulate` refuses it,
    the simulator cannot model it, or its trace source cannot be read); one job never stops the others; a refused
    point exits 1 once the others are predicted (it partly ran, as `run` says it), and 2 where every point was
    refused for recipe errors (bad input, nothing predicted). Points are predicted in parallel worker processes
    (--processes); the output is the same whatever their number, in the recipe's order.
    """
    import json

    from llmsweep.execute import predict_pool as pool
    from llmsweep.host import usable_cpus
    from llmsweep.plan.point import check_trace_sources, corpus_ref, pin_trace_sources, points_of, with_traces

    jobs, policy, softened = _predicted_jobs(files, config_keys, runner_config, runner_labels)
    if out_dir is not None:  # the recipes read, before any point is predicted over the points --out holds
        from llmsweep.results.rundir import refuse_inside_other_folder

        refuse_inside_other_folder(Path(out_dir), "the predicted points' folders")
        refuse_replacing(Path(out_dir), held_results(Path(out_dir)), force=force, what="results")
        refuse_unwritable(Path(out_dir), folder=True)
    jobs = with_traces(jobs, traces, lambda line: click.echo(line, err=True))
    jobs, _, _ = pin_trace_sources(jobs)  # every point (and worker process) replays one commit of a hub dataset
    unreadable = check_trace_sources(jobs)
    for source, unread in unreadable.items():
        n = sum(1 for j in jobs if (ref := corpus_ref(j)) is not None and ref.source == source)
        click.echo(f"{unread.message}; {count_of(n, 'job')} refused (fix: {unread.fix})", err=True)
    planned = pool.plan(jobs, unreadable, policy)
    settings = pool.Settings(duration=duration, max_requests=max_requests,
                             out_dir=Path(out_dir) if out_dir is not None else None)
    units = [u for u in planned if not isinstance(u, pool.Outcome)]
    workers = min(processes or usable_cpus(), len(units))
    if workers > 1:
        results = _predict_parallel(planned, units, settings, workers)
    else:
        results = _predict_here(planned, settings, total=sum(len(points_of(job)) for job in jobs))
    # A multi-node job's points a policy error refused are outcomes of their own, said before its unit's: each row in
    # its job's place and its concurrency's (a whole-job row, concurrency None, first).
    place = {job.id: (i, job.concs) for i, job in enumerate(jobs)}
    results.sort(key=lambda r: (place[r.job][0], place[r.job][1].index(r.concurrency)
                                if r.concurrency in place[r.job][1] else -1) if r.job in place else (len(place), 0))
    # each point's warnings, as `run` records its job's: a real engine would refuse the job (a rule the simulator
    # softened; a multi-node job's point, its own), then what its provenance says the simulator did not model
    results = [r.warned(softened.get(r.job, {}).get(r.concurrency) or softened.get(r.job, {}).get(None) or [])
               for r in results]
    refused = [r for r in results if r.refused is not None]
    by_policy = [r for r in refused if r.refused in {why for whys in policy.values() for why in whys.values()}]
    said = {error.one_line(): error for error in unreadable.values()}  # each said once, above, with its job count
    for r in refused:
        if r.refused not in said:
            at = f" conc {r.concurrency}" if r.concurrency is not None else ""
            click.echo(f"refused {r.job}{at}: {r.refused}", err=True)
    lost = [r for r in refused if r.lost]
    if as_json:  # every point, a refused one with its reason, whatever follows (as `run --json` lists its refusals)
        click.echo(json.dumps([r.doc() for r in results], indent=2))
    if results and len(refused) == len(results) and not lost:
        causes = {said[r.refused] for r in refused if r.refused in said}
        only = next(iter(causes)) if len(causes) == 1 and all(r.refused in said for r in refused) else None
        every = "the one point was" if len(results) == 1 else f"all {len(results)} points were"
        # bad input (exit 2) where recipe errors refused every point, as `run` exits; else a run that could not run
        # its jobs (exit 1: an unreadable trace source, a job the simulator cannot model), as `run` counts them
        error = ConfigError if len(by_policy) == len(refused) else ResultError
        raise error(f"llmsweep predict: {every} refused (see above)",
                    fix=only.fix if only is not None and only.fix else
                    "fix the recipe errors above (`llmsweep validate` lists every finding), or select other "
                    "jobs with --config-keys" if by_policy else
                    "select jobs the simulator can run with --config-keys")
    if refused:
        click.echo(f"{count_of(len(results) - len(refused), 'point')} predicted, {len(refused)} refused", err=True)
    if not as_json:
        _print_table([r for r in results if r.summary is not None], {j.id: j.exp_name for j in jobs})
    if lost:
        raise ResultError(f"llmsweep predict: {pool.WORKER_DIED}; {count_of(len(lost), 'unit')} not predicted (see "
                          "above)",
                          fix="rerun; if it dies again, lower --processes (memory), or run --processes 1 to see why")
    if by_policy:  # the others were predicted: it partly ran (exit 1), as `run` says a run beside a policy refusal
        raise ResultError(f"llmsweep predict: {count_of(len(by_policy), 'point')} refused for recipe errors "
                          "(see above), the others predicted",
                          fix="fix the recipe errors above (`llmsweep validate` lists every finding)")
    if refused:  # a point that could not be predicted is a job that could not run, as `run` counts it (exit 1)
        raise ResultError(f"llmsweep predict: {len(refused)} of {count_of(len(results), 'point')} could not be "
                          "predicted (see above)",
                          fix="each refusal above names its fix; --config-keys selects the jobs the simulator can run")


def _predicted_jobs(files: tuple[Path, ...], config_keys: tuple[str, ...], runner_config: Path | None = None,
                    runner_labels: tuple[str, ...] = ()) -> tuple[list[Job], dict[str, dict[int | None, str]],
                                                                  dict[str, dict[int | None, list[str]]]]:
    """The jobs `predict` predicts, why policy refuses some, and the engine rules each breaks that the simulator
    softened to warnings, as `run --simulate` plans and checks them (one home: `policy.validate_files`, the refusal
    `execute.pipeline.policy_refusal`, the warnings `execute.pipeline.job_warnings`): recipes that do not load or plan
    stop it (exit 2); a policy error refuses the jobs it names — a multi-node job's point that alone breaks a rule,
    that point (job id -> {None: reason} for a whole job, {conc: reason} for points); a softened rule runs the job
    with a warning that a real engine would refuse it (job id -> {None or conc: warnings}, as the refusals). The
    findings that refuse jobs, and the files' own (an empty file), are said on stderr first."""
    from llmsweep.execute.pipeline import job_warnings, policy_refusal
    from llmsweep.plan.point import one_point_per_job
    from llmsweep.policy import validate_files
    from llmsweep.policy.planning import as_points, errors_about

    validation = validate_files(list(files), config_keys=list(config_keys) or None, runner_config=runner_config,
                                runner_labels=runner_labels, simulate=True).raise_unrunnable()
    from llmsweep.policy.inputs import check_side_inputs

    check_side_inputs(validation.jobs, None, simulate=True)  # the catalog files the predictions read (no eval runs)
    keys = list(validation.loaded.recipes)
    if not validation.jobs:
        for f in validation.findings:
            click.echo(f.render(), err=True)
        keys_said = f" with --config-keys {' '.join(config_keys)}" if config_keys else ""
        raise ConfigError(f"llmsweep predict: {', '.join(map(str, files))}{keys_said}: the recipes expand to no job",
                          fix="check the files hold recipes (the findings above), --config-keys and the recipes' "
                              "search spaces")
    _, findings = as_points(validation.jobs, validation.findings)  # a multi-node job's findings are its points'
    policy: dict[str, dict[int | None, str]] = {}
    softened: dict[str, dict[int | None, list[str]]] = {}
    for job in validation.jobs:
        if (why := policy_refusal(errors_about(job, findings, keys))) is not None:
            policy[job.id] = {None: why}
            continue
        if said := job_warnings(job, findings, keys):
            softened.setdefault(job.id, {})[None] = said
        for point in one_point_per_job([job]):
            if point.id != job.id and (why := policy_refusal(errors_about(point, findings, keys))) is not None:
                policy.setdefault(job.id, {})[point.concs[0]] = why
            elif point.id != job.id and (said := job_warnings(point, findings, keys)):
                softened.setdefault(job.id, {})[point.concs[0]] = said
    for f in findings:
        if f.is_error:
            click.echo(f.render(), err=True)
    return validation.jobs, policy, softened


HEARTBEAT_S = 30.0
"""Seconds between two lines naming the units still running (one of a long window, or a disaggregated job's
concurrencies in turn, runs for minutes)."""


def _say(line: str) -> None:
    click.echo(f"[{time.strftime('%H:%M:%S')}] {line}", err=True)


def _unit_label(unit: Unit, *, short: bool = False) -> str:
    from llmsweep.cli.tables import job_label

    name = job_label(unit.job.id, unit.job.exp_name) if short else unit.job.id
    return f"{name} conc " + ", ".join(str(c) for c in unit.concurrencies)


class _Heartbeat:
    """While units run, a line every `HEARTBEAT_S` naming each with how long it has run (a thread: the units' own
    lines come only as they start or finish)."""

    def __init__(self, units: list[Unit], total: int) -> None:
        import threading

        self.units, self.total, self.done = units, total, 0
        self.running: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="predict-heartbeat", daemon=True)

    def started(self, index: int) -> None:
        with self._lock:
            self.running[index] = time.monotonic()

    def finished(self, index: int, points: int) -> None:
        with self._lock:
            self.running.pop(index, None)
            self.done += points

    def line(self) -> str | None:
        """`still running (2/8 points done): <unit> for 2m36s; <unit> for 1m10s`, or None when none runs."""
        from llmsweep.execute.progress import duration_text

        now = time.monotonic()
        with self._lock:
            running = sorted(self.running.items(), key=lambda item: item[1])
            done = self.done
        if not running:
            return None
        named = [f"{_unit_label(self.units[i], short=True)} for {duration_text(now - t)}" for i, t in running]
        return f"still running ({done}/{self.total} points done): " + "; ".join(named)

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            line = self.line()
            if line is not None:
                _say(line)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _predict_here(planned: list[Outcome | Unit], settings: Settings, *, total: int) -> list[Outcome]:
    """`--processes 1`: every unit in this process, one after another, a line on stderr before each point."""
    from llmsweep.execute.predict_pool import Outcome, predict_unit
    from llmsweep.execute.signals import checkpoint

    results: list[Outcome] = []
    units = [u for u in planned if not isinstance(u, Outcome)]
    # Per-point progress on stderr: a point of a long window takes seconds of CPU, a whole matrix many minutes.
    done, index, began = 0, 0, time.monotonic()
    with _Heartbeat(units, total) as heartbeat:
        for unit in planned:
            if isinstance(unit, Outcome):
                results.append(unit)
                continue
            # a disaggregated job's concurrencies run one after another on one deployment: one line for all of them
            n = len(unit.concurrencies)
            which = f"point {done + 1}/{total}" if n == 1 else f"points {done + 1}-{done + n}/{total}"
            eta = (time.monotonic() - began) / done * (total - done) if done else None
            _say(f"{which}: {_unit_label(unit)}" + (f" (ETA {eta:.0f} s)" if eta is not None else ""))
            checkpoint()  # a signal a library swallowed stops the matrix here, not after its last point
            heartbeat.started(index)
            results.extend(predict_unit(unit, settings))
            heartbeat.finished(index, n)
            done, index = done + n, index + 1
    return results


def _predict_parallel(planned: list[Outcome | Unit], units: list[Unit], settings: Settings,
                      workers: int) -> list[Outcome]:
    """The units on `workers` worker processes, a line on stderr as each finishes, and every `HEARTBEAT_S` one naming
    those still running; the outcomes in `planned`'s order.

    The ETA is the completion rate so far, shown only while units wait for a worker: once every unit left is
    running, when it ends depends on those units alone (the largest go first, but a matrix's last points can be its
    heaviest), so the lines say how many run and the heartbeat how long each has."""
    from llmsweep.execute.predict_pool import Outcome, predict_parallel

    total = sum(len(u.concurrencies) for u in units)
    _say(f"predicting {count_of(total, 'point')} of {count_of(len({u.job.id for u in units}), 'job')} on {workers} "
         "worker processes")
    done, finished_units, began = 0, 0, time.monotonic()
    heartbeat = _Heartbeat(units, total)

    def finished(index: int, outcomes: list[Outcome]) -> None:
        nonlocal done, finished_units
        unit = units[index]
        n = len(unit.concurrencies)
        done += n
        finished_units += 1
        heartbeat.finished(index, n)
        which = f"point {done}/{total}" if n == 1 else f"points {done - n + 1}-{done}/{total}"
        refused = " (refused)" if all(o.refused is not None for o in outcomes) else ""
        left = len(units) - finished_units
        if left == 0:
            after = ""
        elif left > workers:  # some wait for a worker: the rate so far says something
            after = f" (ETA ~{(time.monotonic() - began) / done * (total - done):.0f} s at the rate so far)"
        else:
            after = f" ({count_of(left, 'unit')} still running)"
        _say(f"{which} done: {_unit_label(unit)}{refused}{after}")

    with heartbeat:
        by_unit = iter(predict_parallel(units, settings, workers, on_done=finished, on_start=heartbeat.started))
    return [o for item in planned for o in ([item] if isinstance(item, Outcome) else next(by_unit))]


def _print_table(results: list[Outcome], exp_names: dict[str, str] | None = None) -> None:
    """The predicted points, laid out for the terminal as `run`'s table is (`cli.tables.print_tables`)."""
    from llmsweep.cli.tables import Column, job_labels, plain, print_tables
    from llmsweep.cli.verdicts import Notes, verdict_cell
    from llmsweep.execute.lifecycle import verdict_reasons
    from llmsweep.metrics.registry import HOT_BY_NAME

    hot = HOT_BY_NAME
    metrics = [hot[name] for name in ("tput_per_gpu", "output_tput_per_gpu", "p50_ttft", "p50_tpot")]
    columns = [Column("job", kind="key", justify="left"), Column("conc"), Column("verdict", justify="left"),
               Column("reason", kind="text", justify="left", min_width=24, drop_empty=True),
               *(Column(m.header) for m in metrics),
               Column("hit rate"), Column("AL"), Column("calibration", kind="text", justify="right", min_width=12)]
    rows = []
    notes = Notes()  # the warnings of a point's result, as run's table marks them
    for r in results:
        s = r.summary
        assert s is not None
        # the point's verdict as the gates judged it (`smoke` under a short --duration), and why when not valid
        verdict = s.validity.verdict
        why = verdict_reasons(s)[:1] if verdict != "valid" else []
        spec = s.server_metrics.spec_decode
        cells = [m.cell(m.read(s)) for m in metrics]  # as every table reads and prints the metric
        al = spec.acceptance_length if spec is not None else None
        cells += ["-" if s.cache.observed_hit_rate is None else f"{s.cache.observed_hit_rate:.3f}",
                  "-" if al is None else f"{al:.2f}"]
        if (accepted := s.provenance.acceptance) is not None and accepted.estimated and spec is not None:
            cells[-1] += " est."  # the simulator's stand-in for acceptance the job measures on an engine
        label = str(r.calibration or "-")
        # the column names the calibration; its evidence (engine version, GPU, date) goes once under the table
        # the point's warnings (a real engine would refuse its job, what the simulator does not model of it, the
        # catalog estimates it was modelled with), marked as run's table marks its job's (`Outcome.warned`)
        marks = notes.number(r.warnings)
        rows.append([plain(r.job), str(r.concurrency), verdict_cell(verdict, notes=marks), plain("; ".join(why)),
                     *cells, plain(label.split(" (")[0].replace("calibrated: ", ""))])
    # under the table only what the column cannot show: a calibration's evidence ("uncalibrated" says it all there)
    labels = sorted({r.calibration for r in results if r.calibration and " (" in r.calibration})
    if any(r.summary is not None and (a := r.summary.provenance.acceptance) is not None and a.estimated
           for r in results):
        labels.append("AL est.: the simulator's estimate for (model, method, K); the job measures real acceptance")
    caption = "\n".join([*notes.lines(), *(["; ".join(labels)] if labels else [])])
    print_tables("predicted (simulated engine)", columns, rows, caption=plain(caption) or None,
                 short_keys=[plain(label) for label in job_labels([r.job for r in results], exp_names)])
