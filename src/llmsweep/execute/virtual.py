"""Simulated jobs in virtual time: the predictor as the place a server group runs.

`llmsweep run` sends a group whose server is the simulated engine here unless `--live` asks for the HTTP path. No
server is launched and no clock is waited on: each job's point runs on the simulator core in-process
(:func:`llmsweep.sim.predict.predict_point`: the same lane programs the client interprets over HTTP, the engine the
`sim serve` command line would serve), so a full-length AgentX window (900–3,600 s) takes seconds. The job folder
gets the live path's artifacts — job.json, server_command.txt (saying that nothing was launched), records.jsonl,
server_metrics.jsonl, run.json, summary.json, outcome.json — and the summary is made exactly as the live path makes
it (re-summarised from the files, then the read-back checks), so the store, the dashboard and `summarize` read both
alike. Every summary says `source: simulated` and, in its provenance, `clock: virtual`.

A job the simulator cannot model (its engine options are refused, or the model does not fit the GPUs' memory) is
refused with the reason; the rest of the sweep runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmsweep.engines.launch import comment_text
from llmsweep.errors import LlmsweepError
from llmsweep.execute import artifacts as art
from llmsweep.execute.lifecycle import (
    JobOutcome,
    LifecycleSettings,
    ServerGroup,
    _gates,
    _provenance,
    _run_options,
    _Server,
    eval_group,
    eval_job,
    eval_launch,
    keep_earlier_attempt,
    record_eval_server,
    relaunch_reason,
    report_job_finished,
    resumed,
    settle,
)
from llmsweep.execute.lifecycle import command_text as served_command_text
from llmsweep.execute.progress import current_progress
from llmsweep.execute.readback import summarise_job
from llmsweep.execute.signals import StopRequest, stop_then_raise
from llmsweep.metrics.model import VIRTUAL
from llmsweep.plan import Job
from llmsweep.plan.point import Point

if TYPE_CHECKING:
    from llmsweep.engines.launch import LaunchSpec
    from llmsweep.metrics.model import Summary
    from llmsweep.sim.engine import EngineConfig
    from llmsweep.sim.predict import PredictedPoint, WindowProgress

log = logging.getLogger(__name__)

Event = Callable[[str], None]

KIND = "virtual"
"""What provenance records as the place the group ran (`launch.executor`, `launch.launcher`)."""


class NotModelled(LlmsweepError):
    """The simulator cannot run this job (a refusal, not a failure: nothing was tried)."""


def engine_config(spec: LaunchSpec) -> EngineConfig:
    """The engine the group's `sim serve` command line would serve, built from that very command line; a job the
    simulator cannot model is a :class:`NotModelled` with the reason."""
    from llmsweep.sim.engine import build_core
    from llmsweep.sim.serve_args import engine_config_from_argv

    try:
        config = engine_config_from_argv(spec.argv)
        build_core(config)  # sizes the KV pool: a model that does not fit the GPUs says so here, once per group
    except LlmsweepError as exc:
        raise NotModelled(f"the simulator cannot model this job: {exc.message}", fix=exc.fix) from exc
    except (ValueError, ArithmeticError) as exc:
        raise NotModelled(f"the simulator cannot model this job: {exc}",
                          fix="check the model's catalog entry and the job's parallelism") from exc
    return config


def command_text(spec: LaunchSpec) -> str:
    """`server_command.txt` of a virtual-time job: what would have served it live, and that nothing was launched."""
    lines = [f"# engine: {spec.engine} (virtual time: no server was launched; the simulator core ran in-process)"]
    lines += [comment_text(f"# note: {n}") for n in spec.notes]  # a recipe value never ends a comment line
    lines.append("# the same engine served live (`llmsweep run --live`):")
    lines.append(spec.shell_command())
    return "\n".join(lines) + "\n"


def run_groups(groups: Sequence[ServerGroup], run_dir: Path, settings: LifecycleSettings, *,
               event: Event) -> list[JobOutcome]:
    """Run every job of every group in virtual time (the `Executor.run_groups` contract, with no server; an eval
    runs against the group's simulator served live, `_EvalServer`); the jobs of a disaggregated deployment run on its
    roles (`execute.virtual_disagg`)."""
    live = _EvalServer(run_dir, settings, event)
    try:
        return _run_groups(groups, run_dir, settings, event=event, live=live)
    finally:
        live.stop()


class _EvalServer:
    """The group's simulator served over HTTP in wall-clock time, for its evals only: lm-eval talks to a server, and
    the simulator core in virtual time is none. Launched on a group's first eval; one group's at a time."""

    def __init__(self, run_dir: Path, settings: LifecycleSettings, event: Event) -> None:
        self.run_dir, self.settings, self.event = run_dir, settings, event
        self.server: _Server | None = None

    def get(self, group: ServerGroup) -> _Server:
        if self.server is not None and self.server.group.spec.fingerprint() != group.spec.fingerprint():
            self.stop()
        if self.server is None:
            from llmsweep.execute.local import LocalLauncher

            self.server = _Server(group, LocalLauncher(), self.run_dir, self.settings, self.event)
        return self.server

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def _run_groups(groups: Sequence[ServerGroup], run_dir: Path, settings: LifecycleSettings, *,
                event: Event, live: _EvalServer) -> list[JobOutcome]:
    from llmsweep.execute import virtual_disagg

    outcomes: list[JobOutcome] = []
    disagg = [(job, g) for g in groups for job in g.jobs if virtual_disagg.is_disaggregated(job)]
    if disagg:
        outcomes += virtual_disagg.run_jobs(disagg, run_dir, settings, event=event)
        if settings.fail_fast and not all(o.ok for o in outcomes):
            return outcomes
        groups = [g for g in groups if not all(virtual_disagg.is_disaggregated(j) for j in g.jobs)]
        groups = [replace(g, jobs=[j for j in g.jobs if not virtual_disagg.is_disaggregated(j)]) for g in groups]
    total = sum(len(g.jobs) for g in groups)
    done = 0
    for group in groups:
        config: EngineConfig | None = None
        refusal: NotModelled | None = None
        try:
            config = engine_config(group.spec)
        except NotModelled as exc:
            refusal = exc
        for job in group.jobs:
            done += 1
            finished = resumed(job, run_dir) if settings.resume else None
            if finished is not None:
                outcomes.append(finished)
                current_progress().job_finished(job.id, finished.status)  # done, and no time to time others by
                continue
            if config is None:
                reason = refusal.one_line() if refusal is not None else "the simulator cannot model this job"
                outcomes.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused", reasons=[reason]))
                event(f"job {job.id}: refused — {reason}")
                current_progress().job_finished(job.id, "refused")
                continue
            how = "an eval against the simulator served live" if job.eval_only else "virtual time"
            event(f"job {done}/{total} {job.id}: conc {job.concs[0]} ({job.workload.scenario}), {how}")
            current_progress().job_started(job.id, job.concs[0] if job.concs else None)
            outcome = run_job(job, group, config, run_dir, settings, event, live)
            outcomes.append(outcome)
            if settings.fail_fast and not outcome.ok:
                return outcomes
    return outcomes


def run_job(job: Job, group: ServerGroup, config: EngineConfig | None, run_dir: Path, settings: LifecycleSettings,
            event: Event, live: _EvalServer | None = None, *,
            simulate: Callable[[Path, StopRequest], Summary] | None = None, command: str | None = None) -> JobOutcome:
    """Run one job's point on the simulator core and write its job folder; returns its outcome. `simulate` (given the
    job folder and the stop request it polls) and `command` stand in for the aggregated engine's (a disaggregated
    deployment's roles). An eval (eval-only, or after a run-eval row's point) runs against the group's simulator
    served live (`live`)."""
    jdir = art.job_dir(run_dir, job.id)
    jdir.mkdir(parents=True, exist_ok=True)
    keep_earlier_attempt(job.id, jdir, event)
    started = time.monotonic()
    if not job.eval_only:  # an eval says `evaluating` once its server is up (`lifecycle.eval_job`)
        current_progress().phase("simulating")

    from llmsweep.engines import launched_job

    def measure() -> Summary:
        nonlocal simulate
        art.write_json(jdir / art.JOB_FILE, launched_job(job).to_json())
        (jdir / art.COMMAND_FILE).write_text(command or command_text(group.spec), encoding="utf-8")
        if simulate is None:
            assert config is not None
            simulate = partial(_simulate, job, group, config, settings=settings)
        summary = None
        if not job.eval_only:
            with stop_then_raise() as stop:  # a signal stops the simulation at its next virtual second, then unwinds
                summary = simulate(jdir, stop)
            # written only once no signal came while it was made: a job a signal stopped has no summary
            summary.write(jdir / art.SUMMARY_FILE)
        if (job.eval_only or job.run_eval) and live is not None:
            # A run-eval row whose point pinned acceptance evaluates on the simulator served without the pin.
            relaunch = eval_launch(job, group) if job.run_eval else None
            served = group if relaunch is None else eval_group(group, [job], relaunch)
            if relaunch is not None:
                event(f"job {job.id}: serving the eval live {relaunch_reason(job)}")
            server = live.get(served)
            handle = server.ensure()
            spec = server.spec or served.spec
            if job.eval_only:  # the whole job was served live: its command file says what served it, as run's does
                handle.scrubber.write_text(jdir / art.COMMAND_FILE,
                                           served_command_text(spec, server.launcher, handle.command))
            provenance = _provenance(job, spec, served, server.observed, handle, server.launcher.kind)
            eval_command = None if relaunch is None else record_eval_server(jdir, spec, server.launcher, handle)
            summary = eval_job(job, handle.base_url, jdir, spec=spec, source=group.source, settings=settings,
                               provenance=provenance, event=event, server_command=eval_command)
        if summary is None:
            raise LlmsweepError(f"job {job.id} is eval-only and no server was at hand for its eval",
                                fix="run it with `llmsweep run` (or --live)")
        return summary

    try:
        outcome = settle(job, jdir, started, measure).with_warnings(group.warnings.get(job.id, ()))
    except KeyboardInterrupt:  # (also one that landed after the summary was written: during its eval)
        (jdir / art.SUMMARY_FILE).unlink(missing_ok=True)
        raise
    outcome.seconds = round(time.monotonic() - started, 3)
    art.write_json(jdir / art.OUTCOME_FILE, outcome.model_dump(mode="json"))
    report_job_finished(jdir, outcome)  # stored as it finishes, as the live path does
    current_progress().job_finished(job.id, outcome.status)
    event(f"job {job.id}: {outcome.status} in {outcome.seconds:.1f} s"
          + (f" — {outcome.reasons[0]}" if outcome.reasons else ""))
    return outcome


def polled(stop: StopRequest) -> Callable[[WindowProgress], None]:
    """The predictor's `on_progress` for a job in a sweep: the progress display, and the poll point of the signal
    that stops the simulation (raised there, in the loop's own code)."""
    progress = current_progress()

    def on_progress(window: WindowProgress) -> None:
        stop.check()
        progress.simulated(window)

    return on_progress


def outlived_timeout(records: list[dict[str, Any]], timeout_s: float) -> str | None:
    """What to say of a virtual-time point whose requests ran longer than the client's whole-request timeout
    (`--request-timeout`): virtual time cuts no request there (its engine would have to abort them mid-step), so
    such a request counts as served where a live client would have timed it out. None when none did."""
    late = sum(1 for r in records if r.get("end_at") is not None and r.get("sent_at") is not None
               and r["end_at"] - r["sent_at"] > timeout_s)
    if not late:
        return None
    from llmsweep.sim_warnings import timeout_not_applied

    return timeout_not_applied(late, timeout_s)


def _simulate(job: Job, group: ServerGroup, config: EngineConfig, jdir: Path, stop: StopRequest, *,
              settings: LifecycleSettings) -> Summary:
    """Predict the point, write what the client would have written, and summarise it as the live path does (no
    cyclic collection meanwhile: `sim.predict.no_cyclic_gc`)."""
    from llmsweep.power.virtual import virtual_power
    from llmsweep.sim.predict import no_cyclic_gc, predict_point

    point = Point.of(job)
    started_at = time.time()
    power = virtual_power(settings.power.for_jobs([job]), hardware=config.hardware, tp=config.tp, start_time=started_at,
                          gpus=job.gpus)
    with no_cyclic_gc():
        predicted = predict_point(point, config, start_time=started_at, summarize=False, power=power,
                                  on_progress=polled(stop))
        if said := outlived_timeout(predicted.records, settings.request_timeout_s):
            group.warnings.setdefault(job.id, []).append(said)
        current_progress().phase("summarising")
        if power is not None:  # the modelled watts over virtual time, beside the records, as the live sampler does
            power.write_job(jdir, expected_gpus=point.gpus)
        # the context the engine serves, as the live server's `/v1/models` reports it (`SimConfig.served_context`)
        return write_point(job, group, predicted, jdir, settings, started_at=started_at,
                           observed={"calibration": config.calibration_label(),
                                     "context_served": config.sim_config().served_context()})


def write_point(job: Job, group: ServerGroup, predicted: PredictedPoint, jdir: Path, settings: LifecycleSettings, *,
                started_at: float, observed: dict[str, Any], extra: dict[str, Any] | None = None) -> Summary:
    """Write what the client would have written for a predicted point (records, scrapes, run.json with provenance;
    `extra` joins the provenance) and summarise the folder as the live path does. The summary is returned, not
    written: `run_job` writes it once the simulation is past any signal (a job a signal stopped has none)."""
    import platform

    from llmsweep import __version__
    from llmsweep.client.config import DURATION_REACHED
    from llmsweep.client.folder import run_json, write_run_json
    from llmsweep.sim.identity import simulator_digest
    from llmsweep.sim.predict import SCRAPE_INTERVAL_S

    spec = group.spec
    point = predicted.point
    # what the virtual run did: its scrapes every virtual second, not the live client's interval
    options = _run_options(job, spec, settings).model_copy(update={"scrape_interval_s": SCRAPE_INTERVAL_S})
    gates = _gates(job, options)
    predicted.write_streams(jdir)
    stats = predicted.stats
    provenance = {
        "client_version": __version__,
        "seed": options.seed,
        "endpoint": {"base_url": None, "model": spec.served_model_name or job.workload.served_model_name,
                     "api": point.api},
        "workload": predicted.workload.describe() if predicted.workload is not None else None,
        "options": options.model_dump(mode="json"),
        "host": platform.node(),
        "started_at": started_at,
        "finished_at": time.time(),
        # the simulator that computed it is this process's core: its build, as a live one's /version says its own
        **_provenance(job, spec, _placed(group), {**observed, "simulator_digest": simulator_digest()}, None, KIND),
        "clock": VIRTUAL,
        "virtual": {"window_s": predicted.seconds,
                    "virtual_seconds": round(stats.virtual_seconds, 3) if stats is not None else None,
                    "engine_steps": stats.steps if stats is not None else None,
                    "warmup_drained_at": (round(stats.warmup_drained_at, 3)
                                          if stats is not None and stats.warmup_drained_at is not None else None),
                    "wall_seconds": round(time.time() - started_at, 3)},
        **(extra or {}),
    }
    stop_reason = stats.stop_reason if stats is not None and stats.stop_reason else (
        DURATION_REACHED if options.duration_s is not None else None)
    client: dict[str, Any] = {"workers": [], "stop_reason": stop_reason, "clock": VIRTUAL}
    write_run_json(jdir, run_json(provenance=provenance, gates=gates, client=client, gpus=options.gpus,
                                  source=group.source))
    return summarise_job(jdir, settings=settings.readback, write=False)


def _placed(group: ServerGroup) -> ServerGroup:
    """The group as provenance should record it: placed by the virtual clock, not by the executor asked for."""
    return replace(group, executor=KIND)
