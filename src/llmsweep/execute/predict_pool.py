"""`llmsweep predict`'s units of work, and the worker processes that predict them in parallel.

A recipe's jobs become, in the recipe's order, either a refusal said up front (the trace source cannot be read, the
simulator cannot launch or model the job) or units of work: one unit per point of an aggregated job, one per
disaggregated job (its concurrencies run one after another on one deployment, its clock carried from one to the
next, so they cannot be split). :func:`predict_unit` predicts one unit and writes its `--out` files; it is the same
code in this process (`--processes 1`) and in a worker (:func:`predict_parallel`).

A worker process (spawned, never forked) ignores Ctrl-C, which the terminal sends to the whole process group: the
parent alone decides to stop, and on any exception, signal or interrupt it cancels the pending units and terminates
its workers. A worker also exits when the parent dies however it died (SIGKILL, the OOM killer), so a killed run
leaves no process behind. A unit that raises in a worker becomes that unit's refusal with the reason; a worker that
dies (the OOM killer, a crash) takes its pool with it: the unit it was predicting is refused saying so, and the
units its pool had not finished are predicted again on a fresh pool.

Predictions are seeded per point, so the outcomes do not depend on which worker ran a unit or in which order the
units finished: the parent puts them back in the recipe's order.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmsweep.engine_ids import SIM
from llmsweep.errors import LlmsweepError
from llmsweep.execute.signals import exit_said
from llmsweep.host import interrupts_held, resource_tracker_started
from llmsweep.metrics.model import VIRTUAL
from llmsweep.plan.job import Job
from llmsweep.plan.point import Point, points_of
from llmsweep.power.sampler import PowerSettings

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess

    from llmsweep.metrics.model import Summary
    from llmsweep.sim.engine import EngineConfig
    from llmsweep.sim.predict import PredictedPoint

WORKER_DIED = "the prediction worker died"
"""How a unit lost with its worker process is refused (the start of the reason)."""


@dataclass(frozen=True)
class Outcome:
    """One row of `predict`'s results: a point's predicted summary, or why the point (concurrency None: the whole
    job) was refused."""

    job: str
    concurrency: int | None
    summary: Summary | None = None
    calibration: str | None = None
    refused: str | None = None
    lost: bool = False
    """Refused because the worker process predicting it died (the run fails)."""
    warnings: tuple[str, ...] = ()
    """What the point's result warns of, in `run`'s words and order (`sim_warnings`; set by :meth:`warned`)."""

    def warned(self, softened: Sequence[str]) -> Outcome:
        """The outcome with its warnings, as `run` records its job's (`execute.pipeline.job_warnings`): `softened`,
        the engine rules its job breaks that the simulator softened to warnings (a real engine would refuse it), then
        what the simulator does not model of it and the catalog estimates it modelled it with, as its provenance
        records them (`sim_warnings.simulator_warnings`)."""
        from llmsweep.sim_warnings import simulator_warnings

        prov = self.summary.provenance if self.summary is not None else None
        modelled = simulator_warnings(prov.unmodelled or [], prov.estimated or []) if prov is not None else []
        return replace(self, warnings=tuple(dict.fromkeys([*softened, *modelled])))

    def doc(self) -> dict[str, Any]:
        """The row of `predict --json`: the point's row as `run --json` gives a job's (`results.extract.point_row`: the
        same keys for the same facts — its verdict as the gates judged it and the first reason, its warnings, `source`
        `predicted` on the `virtual` clock, every metric of the metric table in the unit `run --json` gives it, its
        power's source) beside what only a prediction has: its whole summary and its calibration, or for a refused
        point (concurrency None: the whole job) the refusal, its verdict `refused` (`failed` where the worker
        predicting it died, as `run` says of a job that could not run) and every figure null, as `run --json`'s row of
        a job that did not run."""
        from llmsweep.execute.lifecycle import verdict_reasons
        from llmsweep.results.extract import point_row

        if self.summary is None:
            # `refused`, predict's alone: the reason a point was not predicted, as `reason` says it too (kept for the
            # scripts that read it; `run --json` says a refused job only by its verdict and reason)
            verdict = "failed" if self.lost else "refused"
            return {**point_row(self.job, self.concurrency, verdict, self.refused, self.warnings, None),
                    "refused": self.refused}
        reasons = verdict_reasons(self.summary)
        return {**point_row(self.job, self.concurrency, self.summary.validity.verdict, reasons[0] if reasons else None,
                            self.warnings, self.summary),
                # a prediction's alone: its whole summary (`run --json` names the job's summary file instead) and the
                # calibration the simulator predicted it with
                "summary": self.summary.dump(), "calibration": self.calibration}


@dataclass(frozen=True)
class Settings:
    """What every unit of one `predict` shares: its window, where its files go, how power is modelled."""

    duration: float | None = None
    max_requests: int | None = None
    out_dir: Path | None = None
    power: PowerSettings = field(default_factory=PowerSettings)
    """Each job's modelled power, as `run` in virtual time reads it (`require` decided per job)."""


@dataclass(frozen=True)
class PointUnit:
    """One point of an aggregated job, on the engine its job renders to."""

    point: Point
    config: EngineConfig
    provenance: dict[str, Any]

    @property
    def job(self) -> Job:
        return self.point.job

    @property
    def concurrencies(self) -> list[int]:
        return [self.point.concurrency]


@dataclass(frozen=True)
class DisaggUnit:
    """Every concurrency of one disaggregated job, one after another on one deployment."""

    job: Job

    @property
    def concurrencies(self) -> list[int]:
        return [p.concurrency for p in points_of(self.job)]


Unit = PointUnit | DisaggUnit


def one_concurrency(job: Job) -> int | None:
    """The concurrency a whole job's refusal names in its row: a job of one concurrency names it, as every refusal
    of a point does — `conc: 4` or a list of one (`conc-list: [1]` of a multi-node job) alike —; one of several,
    none (the row is the whole job's)."""
    return job.concs[0] if len(job.concs) == 1 else None


def plan(jobs: Sequence[Job], unreadable: dict[str, LlmsweepError],
         policy: Mapping[str, Mapping[int | None, str]] | None = None) -> list[Outcome | Unit]:
    """The jobs, in order, as refusals said up front and units of work (`unreadable`: the trace sources that cannot
    be read, by label, from `plan.point.check_trace_sources`; `policy`: job id -> the reasons policy errors refuse it
    for, `run`'s (`execute.pipeline.policy_refusal`): under None the whole job, under a concurrency that point of a
    multi-node job alone, whose other concurrencies are predicted)."""
    from llmsweep import engines
    from llmsweep.execute import virtual_disagg
    from llmsweep.execute.lifecycle import hardware_provenance, simulator_build, simulator_provenance
    from llmsweep.execute.virtual import NotModelled, engine_config
    from llmsweep.plan.point import corpus_ref
    from llmsweep.sim.identity import simulator_digest

    out: list[Outcome | Unit] = []
    for job in jobs:
        refused = (policy or {}).get(job.id, {})
        if None in refused:
            out.append(Outcome(job.id, one_concurrency(job), refused=refused[None]))
            continue
        if refused:
            out += [Outcome(job.id, c, refused=why) for c, why in refused.items() if isinstance(c, int)]
            kept = [c for c in job.concs if c not in refused]
            if not kept:
                continue
            job = job.model_copy(update={"conc": kept if isinstance(job.conc, list) else kept[0]})
        error = unreadable.get(ref.source) if (ref := corpus_ref(job)) is not None else None
        try:
            if error is not None:
                raise error
            if (refusal := engines.launch_refusal(job, simulate=True)) is not None:
                # A multinode job predicted as one aggregated server would be a point under a label it did not earn.
                raise NotModelled(refusal)
            if job.eval_only:
                raise NotModelled("an eval-only job measures accuracy, which the simulator does not model",
                                  fix="predict the throughput rows of the recipe")
            if job.run_eval:  # a throughput row that also runs an eval: its throughput is what can be predicted
                job = job.model_copy(update={"run_eval": False})
            if virtual_disagg.is_disaggregated(job):  # its roles, its concurrencies one after another
                out.append(DisaggUnit(job))
                continue
            config = engine_config(engines.render(job, simulate=True))
        except LlmsweepError as exc:
            out.append(Outcome(job.id, one_concurrency(job),
                               refused=_job_refusal(exc, said_up_front=error is not None)))
            continue
        calibration = config.calibration_label()
        engine_config_doc = config.model_dump(mode="json")
        modelled = simulator_provenance(job)
        # the context the engine serves, as a virtual-time `run` records it (`SimConfig.served_context`: what the
        # live server's `/v1/models` reports and its refusal holds to)
        launch = {"engine": SIM.id, "context_served": config.sim_config().served_context()}
        for point in points_of(job):
            out.append(PointUnit(point, config, {"job": job.id, "concurrency": point.concurrency, "engine": SIM.id,
                                                 "calibration": calibration, "engine_config": engine_config_doc,
                                                 "hardware": hardware_provenance(job), "clock": VIRTUAL,
                                                 "launch": launch,
                                                 # this process's simulator build, as `run` records it
                                                 **simulator_build(calibration, simulator_digest()),
                                                 **modelled}))
    return out


def _job_refusal(exc: LlmsweepError, *, said_up_front: bool = False) -> str:
    from llmsweep.execute.virtual import NotModelled

    reason = exc.one_line()
    if not (isinstance(exc, NotModelled) or said_up_front):
        reason = f"the simulator cannot model this job: {reason}"
    return reason



def predict_unit(unit: Unit, settings: Settings) -> list[Outcome]:
    """Predict one unit and write its `--out` files; an LlmsweepError is its refusal, anything else raises."""
    from llmsweep.sim.predict import no_cyclic_gc

    with no_cyclic_gc():  # the summaries too: a collection walks the corpus and the records (sim.predict)
        return _predict_unit(unit, settings)


def _predict_unit(unit: Unit, settings: Settings) -> list[Outcome]:
    from llmsweep.power.virtual import virtual_power
    from llmsweep.sim.predict import predict_point

    if isinstance(unit, DisaggUnit):
        from llmsweep.execute import virtual_disagg
        from llmsweep.execute.lifecycle import hardware_provenance, simulator_build, simulator_provenance
        from llmsweep.sim.identity import simulator_digest

        job = unit.job
        outcomes: list[Outcome] = []
        try:
            for p in virtual_disagg.predict_job(job, duration=settings.duration, max_requests=settings.max_requests,
                                                provenance={"job": job.id, "engine": SIM.id, "clock": VIRTUAL,
                                                            "hardware": hardware_provenance(job),
                                                            # its roles' calibrations are each point's own
                                                            **simulator_build(None, simulator_digest()),
                                                            **simulator_provenance(job)},
                                                power=settings.power):
                assert p.summary is not None
                outcomes.append(Outcome(job.id, p.point.concurrency, p.summary, p.calibration))
                if settings.out_dir is not None:
                    write_predicted(settings.out_dir, p, job_id=job.id)
        except LlmsweepError as exc:
            outcomes.append(Outcome(job.id, one_concurrency(job), refused=_job_refusal(exc)))
        return outcomes
    point = unit.point
    config = unit.config
    # the GPUs' modelled power, as `run` in virtual time reads it (labelled simulated in the summary's power block)
    power = virtual_power(settings.power.for_jobs([point.job]), hardware=config.hardware, tp=config.tp,
                          start_time=0.0, gpus=point.job.gpus)
    try:
        predicted = predict_point(point, config, duration=settings.duration, max_requests=settings.max_requests,
                                  provenance=unit.provenance, power=power)
    except LlmsweepError as exc:
        return [Outcome(point.job.id, point.concurrency, refused=exc.one_line())]
    assert predicted.summary is not None  # predict_point summarises unless asked not to
    if settings.out_dir is not None:
        write_predicted(settings.out_dir, predicted)
    return [Outcome(point.job.id, point.concurrency, predicted.summary, predicted.calibration)]


def write_predicted(out_dir: Path, predicted: PredictedPoint, *, job_id: str | None = None) -> None:
    """`--out`: a point's records, scrapes, modelled power (`gpu_metrics.jsonl`, as a virtual-time `run` writes it),
    run.json (source `predicted`, clock `virtual`, its gates: what `llmsweep summarize` reads) and summary under
    `<out>/<job id>/conc<N>/` (`job_id`: the recipe's job when the point ran as a job of its own, a disaggregated
    job's concurrency)."""
    from llmsweep.client.files import SUMMARY_FILE
    from llmsweep.client.folder import write_run_json
    from llmsweep.power.samples import GPU_METRICS_FILE, write_gpu_metrics

    out = out_dir / (job_id or predicted.point.job.id) / f"conc{predicted.point.concurrency}"
    out.mkdir(parents=True, exist_ok=True)
    predicted.write_streams(out)
    if predicted.telemetry is not None:
        write_gpu_metrics(out / GPU_METRICS_FILE, *predicted.telemetry)
    if predicted.run_info is not None:  # what `llmsweep summarize` computes the summary again with: source, gates, ...
        write_run_json(out, predicted.run_info)
    if predicted.summary is not None:
        predicted.summary.write(out / SUMMARY_FILE)


_started: Any = None
"""In a worker: the queue on which it says which unit it starts (its pid, the unit's index)."""


def _start_worker(started: Any) -> None:
    global _started
    # A terminal's Ctrl-C reaches the whole process group: the parent alone decides to stop. The worker was started
    # with SIGINT blocked (`host.interrupts_held`), so none arrived while it was starting; from here on it is ignored.
    from llmsweep.host import exit_with_parent, stopped_by_parent_only

    stopped_by_parent_only(("SIGINT",))  # a SIGTERM to the group ends a worker, as the parent's `_terminate` does
    exit_with_parent()
    _started = started


def _predict_in_worker(index: int, unit: Unit, settings: Settings) -> list[Outcome]:
    if _started is not None:  # written at once (a SimpleQueue has no feeder thread): a worker killed next has said it
        _started.put((os.getpid(), index))
    try:
        return predict_unit(unit, settings)
    except Exception as exc:  # a bug in one unit: that unit's refusal, never the whole run's end
        return _refuse(unit, f"the prediction failed: {type(exc).__name__}: {exc} (fix: report it; "
                             "`--processes 1` shows its traceback)")


def _refuse(unit: Unit, reason: str, *, lost: bool = False) -> list[Outcome]:
    if isinstance(unit, DisaggUnit):
        return [Outcome(unit.job.id, one_concurrency(unit.job), refused=reason, lost=lost)]
    return [Outcome(unit.job.id, unit.point.concurrency, refused=reason, lost=lost)]


def predict_parallel(units: Sequence[Unit], settings: Settings, processes: int,
                     on_done: Callable[[int, list[Outcome]], None] | None = None,
                     on_start: Callable[[int], None] | None = None) -> list[list[Outcome]]:
    """Predict `units` on `processes` spawned worker processes; each unit's outcomes, in the order of `units`.

    `on_done(index, outcomes)` is called in this process as each unit finishes, in the order they finish; `on_start
    (index)` as a worker starts one (within a second; again if it is predicted anew on a fresh pool). A worker
    that dies takes its pool with it: the unit it was predicting is refused saying so, and every other unit not
    finished yet is predicted on a fresh pool. Whatever ends this call early (an interrupt, an exception in
    `on_done`) cancels the pending units and terminates the workers before it propagates."""
    results: list[list[Outcome] | None] = [None] * len(units)
    # Longest first, so that no long unit starts last and runs on alone: a unit of several points (a disaggregated
    # job, several servers stepped together) before single points, else in the recipe's order.
    todo = sorted(range(len(units)), key=lambda i: -len(units[i].concurrencies))
    while todo:
        todo = _round(units, todo, settings, min(processes, len(todo)), results, on_done, on_start)
    return [r or [] for r in results]


def _round(units: Sequence[Unit], todo: list[int], settings: Settings, processes: int,
           results: list[list[Outcome] | None], on_done: Callable[[int, list[Outcome]], None] | None,
           on_start: Callable[[int], None] | None = None) -> list[int]:
    """Units `todo` on one pool; the ones to predict again on a fresh pool because this one broke under them."""
    ctx = mp.get_context("spawn")
    resource_tracker_started()  # before the queue's lock would start it, unprotected from SIGHUP
    started = ctx.SimpleQueue()
    pool = ProcessPoolExecutor(max_workers=processes, mp_context=ctx, initializer=_start_worker, initargs=(started,))
    workers: dict[int, BaseProcess] = {}
    retry: list[int] = []

    def finish(i: int, outcomes: list[Outcome]) -> None:
        results[i] = outcomes
        if on_done is not None:
            on_done(i, outcomes)

    try:
        pending: dict[Future[list[Outcome]], int] = {}
        with interrupts_held(("SIGINT",)):  # workers start on demand, one per submit up to `processes`
            for i in todo:
                pending[pool.submit(_predict_in_worker, i, units[i], settings)] = i
                # the pool keeps its processes to itself, and Python 3.11 has no way to end them on request
                # (3.14: terminate_workers); held here to terminate them and to say how one died
                workers.update(pool._processes or {})
        running: dict[int, int] = {}  # worker pid -> the unit it started last
        while pending:
            # told of each start: woken every second to read the workers' starts as they come
            done, _ = wait(pending, timeout=None if on_start is None else 1.0, return_when=FIRST_COMPLETED)
            if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                done, _ = wait(pending)  # the pool is broken: every unit left fails with it
            while not started.empty():  # read as it comes, so the pipe never fills and blocks a worker
                pid, index = started.get()
                running[pid] = index
                if on_start is not None:
                    on_start(index)
            broken = []
            for future in sorted(done, key=pending.__getitem__):
                i = pending.pop(future)
                if isinstance(future.exception(), BrokenProcessPool):
                    broken.append(i)
                else:
                    finish(i, future.result())
            if broken:
                dead, said = _deaths(workers)
                # the unit a dead worker was predicting is lost with it; the others were predicted by workers the
                # pool then terminated, or not started: they go to a fresh pool. Unknown: all are lost.
                lost = {running[pid] for pid in dead if pid in running} & set(broken) or set(broken)
                for i in broken:
                    if i in lost:
                        finish(i, _refuse(units[i], f"{WORKER_DIED} ({said}) while predicting it (fix: rerun; if "
                                                    "it dies again, fewer --processes use less memory, and "
                                                    "`--processes 1` shows the failure)", lost=True))
                    else:
                        retry.append(i)
    except BaseException:
        _terminate(pool, workers.values())
        raise
    pool.shutdown(wait=True)
    return retry


def _deaths(workers: dict[int, BaseProcess]) -> tuple[list[int], str]:
    """The workers that died (not the ones their pool then terminated) and how, as every death is said
    (`signals.exit_said`): `pid 123 was killed by SIGKILL (signal 9: …)`, `pid 124 exited with status 3`."""
    deadline = time.monotonic() + 2.0
    for proc in workers.values():  # the pool's thread reaps them as it breaks: wait for it to have done so
        while proc.exitcode is None and time.monotonic() < deadline:
            proc.join(0.05)
    ended = {pid: proc.exitcode for pid, proc in sorted(workers.items()) if proc.exitcode}
    # the pool terminates (SIGTERM) the other workers once one died: name the one that died first
    first = {pid: code for pid, code in ended.items() if code != -signal.SIGTERM} or ended
    said = [f"pid {pid} {exit_said(code)}" for pid, code in first.items() if code is not None]
    return list(first), "; ".join(said) or "a worker process ended abruptly"


def _terminate(pool: ProcessPoolExecutor, workers: Iterable[BaseProcess]) -> None:
    """Cancel what has not started and end the workers now (a unit in flight is abandoned, its files unwritten)."""
    procs = list(workers)
    # The pool's manager thread closes its wake-up pipe as it winds down; the interpreter's exit writes to that pipe
    # unguarded (concurrent.futures' `_python_exit`), so a thread still winding down there races it and the exit prints
    # "OSError: [Errno 9] Bad file descriptor" after "interrupted". Joined below; once it has ended, that write is a
    # no-op. (Taken now: `shutdown` drops the pool's reference.)
    manager: threading.Thread | None = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + 5.0
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)
    if manager is not None:
        manager.join(10.0)
