"""Run a benchmark: start workers (in process, or N processes sharing the lanes), scrape server metrics, watch
progress and the failure ratio, then write `run.json` and `summary.json` beside `records.jsonl`.

`run.json` holds what only the live run knows (provenance, gates, worker CPU, connection waits, the open-file limit,
why it stopped), so `llmsweep summarize DIR` recomputes exactly the summary the run wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import multiprocessing as mp
import multiprocessing.connection
import pickle
import platform
import resource
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llmsweep import __version__
from llmsweep.client.clock import now_unix
from llmsweep.client.config import WORKER_LANES, WORKER_RATE, Endpoint, RunOptions
from llmsweep.client.files import RECORDS_FILE, RUN_FILE, SERVER_METRICS_FILE, SUMMARY_FILE
from llmsweep.client.folder import run_json, summarise_dir, write_run_json
from llmsweep.client.interpreter import Interpreter, LocalControl, WorkerStats
from llmsweep.client.records import OutputWriteError
from llmsweep.client.scrape import MetricsScraper
from llmsweep.errors import ConfigError
from llmsweep.host import (
    exit_with_parent,
    interrupts_held,
    resource_tracker_started,
    stopped_by_parent_only,
    usable_cpus,
)
from llmsweep.metrics import GateConfig, Summary
from llmsweep.metrics.gates import client_workers_died
from llmsweep.metrics.model import MEASURED, Source
from llmsweep.workload.base import RunPhase, Workload

log = logging.getLogger(__name__)

UNFINISHED = "interrupted: the run ended before writing its final run.json (killed?)"
DRAIN_POLL_S = 0.005
"""How often a drained worker looks whether the others' warm-up has drained too (the profiling start's lag)."""


@dataclass(slots=True)
class Progress:
    """A snapshot for progress bars: counters summed over workers."""

    elapsed_s: float
    started: int
    finished: int
    failed: int
    inflight: int
    profiling_output_tokens: int
    """Output tokens of the window's finished requests (cancelled ones not counted)."""
    target_requests: int | None
    duration_s: float | None
    profiling_elapsed_s: float | None
    stop_reason: str | None
    phase: RunPhase = "measuring"
    """`warming` (no profiling request sent yet), `measuring`, or `draining`: a worker stopped starting requests (the
    window ended, or a stop) and waits for those still in flight (`inflight`) for up to `RunOptions.grace_s`."""
    warmup_finished: int = 0
    """Warm-up requests finished (ok or failed; a cancelled one is neither), whenever they finished."""
    profiling_finished: int = 0
    """The window's requests finished (ok or failed, `failed` of them): what the end table counts."""


@dataclass(slots=True)
class BenchResult:
    out_dir: Path
    summary: Summary
    records_path: Path
    workers: list[WorkerStats] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return self.summary.validity.verdict

    @property
    def gate_failed(self) -> bool:
        return self.verdict == "invalid"


_NOT_RECORDED_PER_WORKER = ("done", "deadline", "first_profiling_sent", "first_errors", "write_error")
"""WorkerStats fields `run.json` leaves out of `client.workers` (live-only, or recorded run-wide: `first_errors`)."""


def suggest_workers(options: RunOptions) -> int:
    """One worker unless the load needs more: one per `WORKER_LANES` live lanes or `WORKER_RATE` arrivals/s, leaving
    a core free.

    On 2 cores one: a second event loop measured worse there (more CPU in all, the server starved; see
    bench/client_ceiling.py --client-workers 1,2)."""
    cpus = usable_cpus()
    if cpus <= 2:
        return 1
    need = max(math.ceil((options.concurrency or 0) / WORKER_LANES),
               math.ceil((options.request_rate or 0) / WORKER_RATE), 1)
    return max(1, min(need, cpus - 1))


def resolve_workers(workload: Workload, options: RunOptions) -> RunOptions:
    """`options` with its worker count decided: as given, else `suggest_workers`, kept at one when the workload
    cannot be sent to worker processes (a given count > 1 then fails, in `_run_processes`, with the fix)."""
    if options.workers is not None:
        return options
    workers = suggest_workers(options)
    if workers > 1:
        try:
            pickle.dumps(_portable(workload))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            log.info("one client worker: workload %r cannot be sent to worker processes (%s)", workload.name, exc)
            workers = 1
    return options.model_copy(update={"workers": workers})


def raise_fd_limit(needed: int) -> dict[str, Any]:
    """Raise RLIMIT_NOFILE's soft limit as far as allowed; report whether it still caps the connections needed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(max(soft, needed), hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # pragma: no cover - platform specific
            log.warning("could not raise the open-file limit to %d: %s", target, exc)
    capped = soft < needed
    if capped:
        log.warning(
            "OPEN-FILE LIMIT CAPS THIS RUN: %d descriptors allowed, about %d needed for the connections in flight; "
            "raise it (ulimit -n) or lower the concurrency",
            soft,
            needed,
        )
    hard_limit = int(hard) if hard != resource.RLIM_INFINITY else -1
    return {"soft": int(soft), "hard": hard_limit, "needed": needed, "capped": capped}


def _needed_fds(options: RunOptions) -> int:
    live = options.concurrency or int((options.request_rate or 0) * min(options.timeout_s, 60.0)) or 256
    return live * 2 + 128  # fan-out may exceed the lanes; plus files, pipes and the event loop


def default_gates(options: RunOptions, *, max_error_ratio: float | None = None) -> GateConfig:
    return GateConfig(
        max_error_ratio=options.max_failure_ratio if max_error_ratio is None else max_error_ratio,
        planned_duration_s=options.duration_s,
        require_metrics_prefix=options.require_metrics_prefix,
    )


async def run_benchmark_async(
    workload: Workload,
    endpoint: Endpoint,
    options: RunOptions,
    out_dir: Path | str,
    *,
    provenance: dict[str, Any] | None = None,
    gates: GateConfig | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    stop_requested: Callable[[], str | None] | None = None,
    source: Source = MEASURED,
) -> BenchResult:
    """Drive `workload` against `endpoint`; returns the summary (also written to `out_dir/summary.json`).

    `stop_requested` is polled during the run: a reason (e.g. "interrupted by SIGTERM") stops it at once, in-flight
    requests are recorded as cancelled, and the reason is the run's `stop_reason` (the gates read it). `source` is
    what served the load (`simulated` when the endpoint is the simulator), recorded in `run.json` for the summary.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    options = resolve_workers(workload, options)
    records_path = out / RECORDS_FILE
    metrics_path = out / SERVER_METRICS_FILE
    for stale in (records_path, metrics_path, out / SUMMARY_FILE, out / RUN_FILE):
        stale.unlink(missing_ok=True)
    fd_limit = raise_fd_limit(_needed_fds(options))
    started_at = now_unix()
    gates = gates or default_gates(options)
    # Until the run writes its final run.json, this one says it did not finish: a bench killed outright (SIGKILL,
    # OOM) leaves records that `summarize` must not call a clean run.
    write_run_json(out, run_json(provenance={"client_version": __version__, "started_at": started_at,
                                             **(provenance or {})},
                                 gates=gates, client={"stop_reason": UNFINISHED}, gpus=options.gpus, source=source))

    scraper: MetricsScraper | None = None
    if (url := endpoint.resolved_metrics_url()) is not None:
        scraper = MetricsScraper(url, metrics_path, interval_s=options.scrape_interval_s)
        scraper.start()
    try:
        if options.workers == 1:
            stats, stop_reason = await _run_local(workload, endpoint, options, records_path, on_progress, scraper,
                                                  stop_requested)
        else:
            stats, stop_reason = await _run_processes(workload, endpoint, options, records_path, on_progress, scraper,
                                                      stop_requested)
    finally:
        if scraper is not None:
            await scraper.stop()
    # A write of the run's own output failed (its records, its scrapes): the run stopped then, and ends in that error
    # (`OutputWriteError`: an OSError, so a full disk reads as one), after run.json says so where it still can be
    # written. No summary: the records are not the run's.
    failed = next((OutputWriteError.from_wire(s.write_error) for s in stats if s.write_error is not None),
                  scraper.write_error if scraper is not None else None)
    if failed is not None:
        stop_reason = failed.reason()

    client = {
        "workers": [
            {k: v for k, v in asdict(s).items() if k not in _NOT_RECORDED_PER_WORKER} for s in stats
        ],
        # the first message of each error class (over the workers): what a count of `http` errors does not say
        "first_errors": first_errors(stats),
        "fd_limit": fd_limit,
        "stop_reason": stop_reason,
        # what `suggest_workers` would have chosen for this load on this host (one event loop per ~256 lanes when
        # cores allow; on 2 cores more worker processes measured no better, bench/client_ceiling.py)
        "suggested_workers": suggest_workers(options),
        "saturation_cpu_ratio": options.saturation_cpu_ratio,
        "saturation_lag_p99_s": options.saturation_lag_p99_s,
    }
    prov = {
        "client_version": __version__,
        "seed": options.seed,
        "endpoint": {"base_url": endpoint.base_url, "model": endpoint.model, "api": endpoint.api},
        "workload": workload.describe(),
        "options": options.model_dump(mode="json"),
        "host": platform.node(),
        "started_at": started_at,
        "finished_at": now_unix(),
        **(provenance or {}),
    }
    if failed is not None:
        with contextlib.suppress(OSError):  # best effort: the disk may be full
            write_run_json(out, run_json(provenance=prov, gates=gates, client=client, gpus=options.gpus,
                                         source=source))
        raise failed
    write_run_json(out, run_json(provenance=prov, gates=gates, client=client, gpus=options.gpus, source=source))
    summary = summarise_dir(out)
    return BenchResult(out_dir=out, summary=summary, records_path=records_path, workers=stats)


def run_benchmark(
    workload: Workload,
    endpoint: Endpoint,
    options: RunOptions,
    out_dir: Path | str,
    *,
    provenance: dict[str, Any] | None = None,
    gates: GateConfig | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    stop_requested: Callable[[], str | None] | None = None,
    source: Source = MEASURED,
) -> BenchResult:
    """Blocking form of `run_benchmark_async`."""
    return asyncio.run(
        run_benchmark_async(
            workload, endpoint, options, out_dir, provenance=provenance, gates=gates, on_progress=on_progress,
            stop_requested=stop_requested, source=source,
        )
    )


def first_errors(stats: Sequence[WorkerStats]) -> dict[str, str]:
    """The first error message of each error class the workers saw (a worker's first, in worker order)."""
    out: dict[str, str] = {}
    for s in stats:
        for cls, message in s.first_errors.items():
            out.setdefault(cls, message)
    return out


# ------------------------------------------------------------------------------------------------------ progress
def _progress(stats: list[WorkerStats], options: RunOptions, t0: float, reason: str | None) -> Progress:
    firsts = [s.first_profiling_sent for s in stats if s.first_profiling_sent is not None]
    now = now_unix()
    # a worker that stopped (its window ended, or a stop) sends nothing more and drains what is in flight
    reason = reason or next((s.stop_reason for s in stats if s.stop_reason), None)
    window_over = bool(firsts) and options.duration_s is not None and now - min(firsts) >= options.duration_s
    phase: RunPhase = "draining" if reason is not None or window_over else "measuring" if firsts else "warming"
    return Progress(
        elapsed_s=now - t0,
        started=sum(s.started for s in stats),
        finished=sum(s.finished for s in stats),
        failed=sum(s.profiling_failed for s in stats),
        inflight=sum(s.inflight for s in stats),
        profiling_output_tokens=sum(s.profiling_output_tokens for s in stats),
        target_requests=options.num_requests,
        duration_s=options.duration_s,
        profiling_elapsed_s=now - min(firsts) if firsts else None,
        stop_reason=reason,
        phase=phase,
        warmup_finished=sum(s.warmup_finished for s in stats),
        profiling_finished=sum(s.profiling_finished for s in stats),
    )


async def _run_local(
    workload: Workload,
    endpoint: Endpoint,
    options: RunOptions,
    records_path: Path,
    on_progress: Callable[[Progress], None] | None,
    scraper: MetricsScraper | None,
    stop_requested: Callable[[], str | None] | None = None,
) -> tuple[list[WorkerStats], str | None]:
    # the warm-up drained: the server's counters are read once more before profiling starts (the window's base)
    control = LocalControl(scraper.scrape_now if scraper is not None else None)
    interp = Interpreter(workload, endpoint, options, records_path, control=control)
    task = asyncio.ensure_future(interp.run())
    t0 = now_unix()
    interrupt: str | None = None
    while not task.done():
        await asyncio.wait([task], timeout=0.25)
        if interrupt is None and stop_requested is not None and (interrupt := stop_requested()) is not None:
            interp.stop(interrupt, grace=0.0)  # no drain: in-flight requests are cancelled and recorded now
        if scraper is not None and scraper.write_error is not None and not interp.stopping:
            interp.stop(scraper.write_error.reason(), grace=0.0)  # its scrapes cannot be kept: stop now
        if on_progress is not None:
            on_progress(_progress([interp.stats], options, t0, interp.stats.stop_reason))
    stats = await task
    return [stats], interrupt or stats.stop_reason


# ------------------------------------------------------------------------------------------------------ processes
class ProcessControl:
    """Control for a worker process: a shared stop event, a stats queue to the parent, a start barrier, and the warm-up
    drain's shared count of drained workers and its event (set by the parent when all have drained)."""

    def __init__(self, stop: Any, queue: Any, barrier: Any, marks: tuple[_Mark, _Mark], worker: int,
                 workers: int) -> None:
        self._stop, self._queue, self._barrier, self._worker = stop, queue, barrier, worker
        self._warmed, self._drained = marks
        self._workers = workers

    def stop_reason(self) -> str | None:
        return "stopped by the parent (run-wide failure ratio or interrupt)" if self._stop.is_set() else None

    def request_stop(self, reason: str) -> None:
        self._queue.put(("stop", self._worker, reason))
        self._stop.set()

    def publish(self, stats: WorkerStats) -> None:
        self._queue.put(("stats", self._worker, stats))

    async def barrier(self) -> None:
        # the parent breaks it when a worker died before reaching it: the others must not wait for that one
        with contextlib.suppress(threading.BrokenBarrierError):
            await asyncio.to_thread(self._barrier.wait)

    async def warmed(self) -> bool:
        return await self._arrive(self._warmed)

    async def drained(self) -> bool:
        return await self._arrive(self._drained)

    async def _arrive(self, mark: _Mark) -> bool:
        arrived, released = mark
        arrived[self._worker] = 1
        # the parent releases every worker once all have arrived and it has read the server's counters (the window's
        # base scrape, `_release_marks`); polled, not a blocking wait in a thread: a run-wide stop must free it (a
        # worker may never arrive)
        while not released.is_set():
            if self._stop.is_set():
                return False
            await asyncio.sleep(DRAIN_POLL_S)
        return True


_Mark = tuple[Any, Any]
"""A point every worker process reaches before profiling starts (its warm-up ended, or drained): a shared flag per
worker that reached it, and the event the parent sets to release them."""


async def _release_marks(marks: Sequence[_Mark], procs: Sequence[Any], scraper: MetricsScraper | None) -> bool:
    """Release the workers at a mark every one of them has reached or will never reach (it exited: its failure is
    reported as the run ends), after the window's base scrape; True when one was released."""
    for arrived, released in marks:
        if released.is_set() or not any(arrived[:]):
            continue
        if all(arrived[w] or not proc.is_alive() for w, proc in enumerate(procs)):
            if scraper is not None:
                await scraper.scrape_now()
            released.set()
            return True
    return False


def _portable(workload: Workload) -> tuple[str, Any, Any]:
    """How a worker process gets its own copy: rebuilt from `(class, config)` when the workload has a config
    (workloads hold locks and caches that do not pickle), else the pickled instance."""
    config = getattr(workload, "config", None)
    if config is not None:
        return ("config", type(workload), config)
    return ("instance", workload, None)


def _rebuild(portable: tuple[str, Any, Any]) -> Workload:
    kind, a, b = portable
    return a(b) if kind == "config" else a  # type: ignore[no-any-return]


def _worker_main(payload: bytes, stop: Any, queue: Any, barrier: Any, marks: tuple[_Mark, _Mark]) -> None:
    # A terminal's Ctrl-C (or a SIGTERM, a SIGHUP) reaches the whole process group: the parent alone decides to stop,
    # through `stop`.
    stopped_by_parent_only()
    exit_with_parent()
    portable, endpoint_json, options_json, records_path, worker, workers = pickle.loads(payload)
    workload = _rebuild(portable)
    endpoint = Endpoint.model_validate_json(endpoint_json)
    options = RunOptions.model_validate_json(options_json)
    control = ProcessControl(stop, queue, barrier, marks, worker, workers)
    interp = Interpreter(
        workload, endpoint, options, Path(records_path), worker=worker, workers=workers, control=control
    )
    asyncio.run(interp.run())


async def _run_processes(
    workload: Workload,
    endpoint: Endpoint,
    options: RunOptions,
    records_path: Path,
    on_progress: Callable[[Progress], None] | None,
    scraper: MetricsScraper | None,
    stop_requested: Callable[[], str | None] | None = None,
) -> tuple[list[WorkerStats], str | None]:
    n = options.workers or 1
    ctx = mp.get_context("spawn")
    resource_tracker_started()  # before the first event would start it, unprotected from SIGHUP
    stop, queue, barrier = ctx.Event(), ctx.Queue(), ctx.Barrier(n)
    marks = ((ctx.Array("b", n), ctx.Event()), (ctx.Array("b", n), ctx.Event()))  # warmed, drained
    procs = []
    for w in range(n):
        try:
            payload = pickle.dumps(
                (_portable(workload), endpoint.model_dump_json(), options.model_dump_json(), str(records_path), w, n)
            )
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise ConfigError(
                f"workload {workload.name!r} cannot be sent to worker processes: {exc}",
                fix="build the workload from a picklable config, or run with --client-workers 1",
            ) from exc
        proc = ctx.Process(target=_worker_main, args=(payload, stop, queue, barrier, marks),
                           name=f"llmsweep-worker-{w}")
        with interrupts_held():  # a signal to the group while it boots must not end it: it ignores them after
            proc.start()
        procs.append(proc)
    latest: dict[int, WorkerStats] = {w: WorkerStats(worker=w) for w in range(n)}
    reason: str | None = None
    t0 = now_unix()
    try:
        while True:
            while True:
                try:
                    msg = queue.get_nowait()
                except Exception:  # queue.Empty
                    break
                if msg[0] == "stats":
                    latest[msg[1]] = msg[2]
                elif msg[0] == "stop" and reason is None:
                    reason = msg[2]
            stats = list(latest.values())
            finished = sum(s.profiling_finished for s in stats)
            failed = sum(s.profiling_failed for s in stats)
            ratio, limit = failed / max(finished, 1), options.max_failure_ratio
            if stop_requested is not None and (interrupt := stop_requested()) is not None and interrupt != reason:
                reason = interrupt  # an interrupt wins over any earlier reason: the run did not end on its own
                stop.set()
            elif not stop.is_set() and finished >= options.stop_floor and ratio > limit:
                reason = (f"failure ratio {failed / finished:.3f} ({failed}/{finished}) exceeded "
                          f"max_failure_ratio {limit}")
                stop.set()
            elif not stop.is_set() and scraper is not None and scraper.write_error is not None:
                reason = scraper.write_error.reason()  # its scrapes cannot be kept: stop now
                stop.set()
            if on_progress is not None:
                on_progress(_progress(stats, options, t0, reason))
            if all(not p.is_alive() for p in procs) and queue.empty():
                break
            if any(p.exitcode is not None for p in procs) and any(p.is_alive() for p in procs):
                barrier.abort()  # a worker died before profiling: the others must not wait for it at the barrier
            if await _release_marks(marks, procs, scraper):
                continue
            waiting = any(any(arrived[:]) and not released.is_set() for arrived, released in marks)
            await asyncio.sleep(DRAIN_POLL_S if waiting else 0.2)
    except BaseException:  # cancelled or interrupted: the workers (which ignore the signals) must stop now too
        stop.set()
        deadline = now_unix() + 30.0
        while any(p.is_alive() for p in procs) and now_unix() < deadline:
            while not queue.empty():  # a worker exits only once what it queued is read
                with contextlib.suppress(Exception):
                    queue.get_nowait()
            time.sleep(0.05)
        for p in procs:
            if p.is_alive():
                p.kill()  # SIGTERM is ignored there (`stopped_by_parent_only`)
        raise
    died = []
    for p in procs:
        p.join()
        if p.exitcode not in (0, None):
            log.error("client worker %s exited with %s", p.name, p.exitcode)
            died.append(f"{p.name} exited with {p.exitcode}")
    stats = list(latest.values())
    if reason is None and died:  # its lanes stopped with it: the load was not the one planned
        reason = client_workers_died(died)
    if reason is None:
        reason = next((s.stop_reason for s in stats if s.stop_reason), None)
    return stats, reason
