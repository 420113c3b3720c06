"""What `llmsweep run` says while it works: job k/N, its phase, the client's counters, the window and the sweep's ETA.

The lifecycle reports to the active `SweepProgress` (a context variable, so neither the executor protocol nor the
lifecycle's signatures change): the sweep's size, each job's start, its phase (launching → warming → measuring →
draining; a job in virtual time: simulating, with its window as the predictor reports it), the client's counters as
they move, and each job's end. Two displays:

- `PlainProgress`: timestamped lines on stderr (a log, CI, a pipe): every event line, each phase change, and a status
  line per job in flight at most every `interval_s` while one measures;
- `LiveProgress`: under a TTY, the event lines scroll above a live status block (rich), a row per job in flight.

A job that runs elsewhere (a Slurm batch job's worker on its node) is shown the same way: there the worker installs a
`ReportingProgress`, which writes its jobs' state to a file (`WorkerReport`, every `REPORT_S`), and the driver reads
it back (`read_report`) and hands it to its own display (`SweepProgress.reported`); several such jobs may be in flight
at once, each in its own lane (a batch job runs its jobs one after another), and the sweep's ETA is that of the lane
that ends last. Nothing installed (library callers): the hooks do nothing and text events go where they went.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmsweep import atomic
from llmsweep.words import noun
from llmsweep.workload.base import RunPhase

if TYPE_CHECKING:
    from llmsweep.client import Progress
    from llmsweep.sim.predict import WindowProgress

log = logging.getLogger(__name__)

Phase = Literal[RunPhase, "launching", "simulating", "summarising", "running", "evaluating"]
"""A job's phase in the display: the client's own (`RunPhase`) while it runs a load, and the executor's around it.
`simulating`: a job in virtual time (the simulator core in-process: its warm-up, then its window); `summarising`:
its records written and summarised; `running`: a job that runs elsewhere (a Slurm batch job's worker) before its
worker has said more of it; `evaluating`: an accuracy eval against a server (in a virtual-time run, the simulator
served live: wall-clock time)."""


class EvalCount(BaseModel):
    """How far an accuracy eval is: lm-eval's answers parsed so far, of the requests its run sends (None until lm-eval
    has said; `evals.harness.run_once` reads both from the runtime's report while lm-eval runs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    answered: int = Field(ge=0)
    of: int | None = Field(default=None, ge=0)

    def text(self) -> str:
        """`12/50 answers`, or `12 answers` before lm-eval has said how many it sends."""
        return f"{self.answered}/{self.of} answers" if self.of is not None else f"{self.answered} answers"


def _now() -> float:
    return time.monotonic()


def _clock() -> str:
    return time.strftime("%H:%M:%S")


def duration_text(seconds: float) -> str:
    """`45s`, `2m36s`, `1h05m`."""
    seconds = max(0, round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


FIRST_ETA_FRACTION = 0.2
"""Share of the first job's window done before the sweep's ETA is shown (no job done yet to time the others by)."""
MIN_WINDOW_FRACTION = 0.05
"""Share of a job's window done before its own rate says how long the rest of it takes (a sliver scales badly)."""
SIM_REPORT_S = 0.5
"""Wall seconds between two displays of a virtual-time job's progress (the predictor reports every virtual second)."""
REPORT_S = 1.0
"""Wall seconds between two writes of a worker's report (`ReportingProgress`; a phase change is written at once)."""
QUIET_S = 30.0
"""A job run elsewhere whose worker has not written a new report for this long (or three of the driver's polls, if
longer) is shown as silent, with its last counters."""


@dataclass
class JobState:
    """One job in flight: its place in the sweep, its phase, the client's counters (or its virtual-time window), and
    its clock."""

    job_id: str
    concurrency: int | None
    index: int
    started_at: float
    lane: str = ""
    """Jobs of one lane run one after another (a Slurm batch job's); lanes run side by side. "": this process."""
    phase: Phase | None = None
    client: Progress | None = None
    sim: WindowProgress | None = None
    """A virtual-time job's window, as the predictor last reported it."""
    eval: EvalCount | None = None
    """An eval's answers so far, while it runs (`SweepProgress.evaluated`)."""
    window_started_at: float | None = None
    """When the job's window was first seen under way (wall clock)."""
    window_seen_at: float = 0.0
    """A job run elsewhere: the window's fraction done then. Its worker's report is read a poll interval apart, so
    the job is first seen wherever that finds it (well into its window, or near its end): its rate is that of the
    window done since, never the whole fraction over the time since it was seen (seen at 2/3 of its window, it looked
    all but done). A job run here is seen as its window opens: 0."""
    heard_at: float | None = None
    """A job run elsewhere: when its worker's report last moved (None: a job run here, or one never reported on)."""
    quiet_after_s: float = QUIET_S

    def fraction(self) -> float:
        if self.sim is not None:  # a job in virtual time
            return self.sim.fraction()
        p = self.client
        if p is None or p.profiling_elapsed_s is None:
            return 0.0
        if p.duration_s:
            return min(1.0, p.profiling_elapsed_s / p.duration_s)
        if p.target_requests:
            return min(1.0, p.profiling_finished / p.target_requests)
        return 0.0

    def window_seen(self, *, elsewhere: bool = False) -> None:
        if self.window_started_at is None and (fraction := self.fraction()) > 0:
            self.window_started_at, self.window_seen_at = _now(), fraction if elsewhere else 0.0

    def _window_rest_s(self, now: float, fraction: float) -> float | None:
        """Seconds until the window ends at the rate it went since it was first seen (a job run elsewhere: once a
        sliver of it went by since); else None."""
        went = fraction - self.window_seen_at
        if self.window_started_at is None or went <= 0 or (self.window_seen_at and went < MIN_WINDOW_FRACTION):
            return None
        return (now - self.window_started_at) * (1.0 - fraction) / went

    def projected_s(self, now: float) -> float | None:
        """The job's whole time as its window's rate says it will be, once a fifth of the window is done and while
        the window lasts (a sliver times only the launch; after the window, the drain and the summary cannot be
        timed from it); else None."""
        fraction = self.fraction()
        if not FIRST_ETA_FRACTION <= fraction < 1.0:
            return None
        rest = self._window_rest_s(now, fraction)
        return None if rest is None else now - self.started_at + rest

    def rest_s(self, now: float, mean: float) -> float:
        """Seconds until the job is done: the rest of its window at the rate it goes, or what a job takes (`mean`)
        less what it has spent, whichever is longer (what follows a window, the drain and the summary, is in the
        mean, not in the window's rate)."""
        in_job = now - self.started_at
        fraction = self.fraction()
        rest = max(0.0, mean - in_job)
        window = self._window_rest_s(now, fraction) if fraction >= MIN_WINDOW_FRACTION else None
        return rest if window is None else max(rest, window)

    def status(self, total: int) -> str:
        """`job 3/9 conc 16 · measuring · 120 ok, 0 failed, 16 in flight · window 300/900 s`."""
        parts = [f"job {self.index}/{total} conc {self.concurrency}", self.phase or "starting"]
        if self.phase == "evaluating" and self.eval is not None:
            parts.append(self.eval.text())
        if self.phase in ("launching", "running", "evaluating"):
            parts.append(f"{duration_text(_now() - self.started_at)} so far")
        if self.phase == "simulating" and self.sim is not None:
            parts.append(_sim_window(self.sim))
        p = self.client
        if p is not None and self.phase not in ("launching", "simulating"):
            parts.append(self._counts(p))
            if p.duration_s and p.profiling_elapsed_s is not None:
                parts.append(f"window {min(p.profiling_elapsed_s, p.duration_s):.0f}/{p.duration_s:.0f} s")
            elif p.target_requests:
                parts.append(f"{p.target_requests} to measure")
            if p.stop_reason:
                parts.append(f"stopping: {p.stop_reason}")
        if self.heard_at is not None and (quiet := _now() - self.heard_at) >= self.quiet_after_s:
            parts.append(f"no report from its worker for {duration_text(quiet)}")
        return " · ".join(parts)

    @staticmethod
    def _counts(p: Progress) -> str:
        """The requests as the end-of-run table counts them: the window's (ok and failed), the warm-up's apart (the
        client counts each request in its own phase, a warm-up that finishes inside the window too)."""
        if p.phase == "warming":
            return f"warm-up: {p.warmup_finished} done, {p.inflight} in flight"
        return f"{max(0, p.profiling_finished - p.failed)} ok, {p.failed} failed, {p.inflight} in flight"


@dataclass
class SweepState:
    """Where the sweep stands, and its ETA: for each lane, the rest of its job in flight and the mean time of the jobs
    done for each job queued in it; the lane that ends last ends the sweep."""

    total: int = 0
    done: int = 0
    started_at: float = field(default_factory=_now)
    jobs: dict[str, JobState] = field(default_factory=dict)
    """The jobs in flight, in the order they started."""
    queued: dict[str, int] = field(default_factory=dict)
    """Jobs not started yet in each lane that says how many it holds (`SweepProgress.queued`); the others left are
    this process's."""
    timed: int = 0
    """Jobs done that ran (a job refused or resumed takes no time to time the others by)."""
    spent_s: float = 0.0
    """Wall seconds of the timed jobs."""
    owed: dict[str, int] = field(default_factory=dict)
    """Jobs whose point is done and whose eval waits for their group's eval server, with the place each was shown at."""
    owed_spent: dict[str, float] = field(default_factory=dict)
    """Their points' wall seconds (added to the job's time when its eval is done)."""

    @property
    def current(self) -> JobState | None:
        """The job that started last (this process runs one at a time: the one its lifecycle reports on)."""
        return next(reversed(self.jobs.values()), None) if self.jobs else None

    @property
    def job_id(self) -> str | None:
        current = self.current
        return None if current is None else current.job_id

    def job_fraction(self) -> float:
        current = self.current
        return 0.0 if current is None else current.fraction()

    def eta_s(self) -> float | None:
        """Seconds until the sweep is done; None while nothing can time it: no job done and no job in flight a fifth
        into its window (before that the time so far is mostly the launch and the warm-up), or all their windows
        over (what follows cannot be timed until a job ends)."""
        if self.total <= 0:
            return None
        now = _now()
        jobs = list(self.jobs.values())
        mean = self.spent_s / self.timed if self.timed else None
        if mean is None:  # the first jobs, as they will have run, stand for the others
            projected = [s for s in (j.projected_s(now) for j in jobs) if s is not None]
            mean = sum(projected) / len(projected) if projected else None
        if mean is None:
            return None
        left = max(0, self.total - self.done)  # those in flight among them
        if not left:  # whatever a lane still says it holds
            return 0.0
        queued = {lane: n for lane, n in self.queued.items() if n > 0}
        here = max(0, left - len(jobs) - sum(queued.values()))  # this process's lane: its jobs not started
        lanes: dict[str, float] = {"": mean * here} if here else {}
        for lane, n in queued.items():
            lanes[lane] = lanes.get(lane, 0.0) + mean * n
        for job in jobs:
            lanes[job.lane] = lanes.get(job.lane, 0.0) + job.rest_s(now, mean)
        return max(lanes.values(), default=0.0)

    def status(self, job: JobState | None = None) -> str:
        """One line: `job 3/9 conc 16 · measuring · 120 ok, 0 failed, 16 in flight · window 300/900 s · ETA 12m`, of
        `job` (default: the one that started last), or `2/9 jobs done` when none is in flight."""
        job = job or self.current
        if job is None:
            head = f"{self.done}/{self.total} {noun(self.total, 'job')} done" if self.total else "starting"
            return head + self._eta()
        return job.status(self.total) + self._eta()

    def _eta(self) -> str:
        eta = self.eta_s()
        return "" if eta is None else f" · sweep ETA {duration_text(eta)}"


def _sim_window(w: WindowProgress) -> str:
    """`warm-up`, `window 600/1800 virtual s` or `requests 512/1000 sent`."""
    if w.elapsed_s is None:
        return "warm-up"
    if w.to_send and (not w.timed() or w.sent / w.to_send >= w.elapsed_s / w.window_s):
        return f"requests {w.sent}/{w.to_send} sent"
    return f"window {w.elapsed_s:.0f}/{w.window_s:.0f} virtual s"


class JobReport(BaseModel):
    """A job in flight as its worker reports it: its phase and the client's counters."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    phase: Phase | None = None
    client: Progress | None = None
    eval: EvalCount | None = None


class WorkerReport(BaseModel):
    """What a worker running elsewhere (a Slurm batch job on its node) says of its jobs: rewritten every `REPORT_S`,
    `beat` one higher each time, so the reader tells a live worker from a silent one by `beat` alone (never by
    comparing two machines' clocks)."""

    model_config = ConfigDict(extra="forbid")

    beat: int = Field(ge=0)
    jobs: list[JobReport] = Field(default_factory=list)
    """In flight (one at a time on a worker)."""
    owed: list[str] = Field(default_factory=list)
    """Jobs whose point is done and whose eval waits for their group's eval server."""


def _report_model() -> type[WorkerReport]:
    """`WorkerReport` with the client's `Progress` resolved (imported only where reports are written or read: the
    client is a heavy import)."""
    if not WorkerReport.__pydantic_complete__:
        from llmsweep.client import Progress

        JobReport.model_rebuild(_types_namespace={"Progress": Progress})
        WorkerReport.model_rebuild(_types_namespace={"Progress": Progress, "JobReport": JobReport})
    return WorkerReport


def ready_to_read_reports() -> None:
    """Import now what reading a worker's report needs (the client's `Progress`, aiohttp and asyncio with it): a
    driver calls it before it submits the batch jobs whose reports it reads, so that no interrupt can land in that
    import later. One did (a Ctrl-C in the first look at the queue after submitting): asyncio was left half-imported,
    and the read-back on the interrupt, importing it again, failed with `name 'coroutines' is not defined` and stored
    nothing of what the worker had finished. Here, before anything is submitted, an interrupt has nothing to read
    back."""
    _report_model()


def read_report(path: Path) -> WorkerReport | None:
    """The worker's last report in `path`; None when there is none or it cannot be read (written atomically, so a
    half-written one is not seen; anything else unreadable is ignored: a report never stops the run)."""
    try:
        return _report_model().model_validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.debug("cannot read the worker's report %s: %s", path, exc)
        return None


class SweepProgress:
    """The hooks the lifecycle calls; this base keeps the state and shows nothing but the event lines."""

    def __init__(self) -> None:
        self.state = SweepState()
        self._sim_shown = 0.0

    # -- what the lifecycle reports ---------------------------------------------------------------------------------
    def line(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def sweep(self, total: int) -> None:
        self.state = SweepState(total=total)

    def job_started(self, job_id: str, concurrency: int | None, *, lane: str = "") -> None:
        """A job begins (or, owed an eval, comes back for it at the place it was shown at); `lane`: see `JobState`."""
        s = self.state
        index = s.owed.pop(job_id, None)
        if index is None:
            index = s.done + len(s.owed) + len(s.jobs) + 1 - (job_id in s.jobs)
        s.jobs.pop(job_id, None)
        s.jobs[job_id] = JobState(job_id=job_id, concurrency=concurrency, index=index, started_at=_now(), lane=lane)
        self.changed()

    def queued(self, lane: str, jobs: int) -> None:
        """`jobs` of `lane` have not started yet (the sweep's ETA times each lane apart)."""
        self.state.queued[lane] = jobs

    def eval_owed(self, job_id: str) -> None:
        """The job's point is done; its eval runs after its group's other points (`job_started` again then)."""
        s = self.state
        job = s.jobs.pop(job_id, None)
        if job is not None:
            s.owed[job_id] = job.index
            s.owed_spent[job_id] = s.owed_spent.get(job_id, 0.0) + _now() - job.started_at
            self.changed()

    def _job(self, job_id: str | None) -> JobState | None:
        return self.state.current if job_id is None else self.state.jobs.get(job_id)

    def phase(self, phase: Phase, *, job_id: str | None = None) -> None:
        """The phase of `job_id` (default: the job that started last) changed."""
        job = self._job(job_id)
        if job is not None and phase != job.phase:
            job.phase = phase
            self.phase_changed(job)

    def evaluated(self, count: EvalCount, *, job_id: str | None = None) -> None:
        """The eval of `job_id` (default: the job that started last) moved: lm-eval's answers so far (shown with the
        job's status lines, as a measuring job's counters are)."""
        job = self._job(job_id)
        if job is not None:
            job.eval = count
            self.changed()

    def client(self, p: Progress, *, job_id: str | None = None) -> None:
        job = self._job(job_id)
        if job is None:
            return
        job.client = p
        job.window_seen()
        phase = p.phase
        if phase != job.phase:
            job.phase = phase
            self.phase_changed(job)
        else:
            self.changed()

    def simulated(self, window: WindowProgress) -> None:
        """A virtual-time job's window moved (the predictor reports every virtual second: shown at most every
        `SIM_REPORT_S` of wall time)."""
        job = self.state.current
        if job is None:
            return
        job.sim = window
        job.window_seen()
        if job.phase != "simulating":
            self.phase("simulating")
        elif _now() - self._sim_shown >= SIM_REPORT_S:
            self._sim_shown = _now()
            self.changed()

    def reported(self, report: JobReport, *, fresh: bool, quiet_after_s: float = QUIET_S) -> None:
        """A job in flight elsewhere, as its worker last reported it (`fresh`: a report newer than the last one read;
        a worker silent for `quiet_after_s` is said to be). Its phase and counters become the job's here."""
        job = self.state.jobs.get(report.job_id)
        if job is None:
            return
        job.quiet_after_s = quiet_after_s
        if fresh or job.heard_at is None:
            job.heard_at = _now()
        if report.client is not None:
            job.client = report.client
            job.window_seen(elsewhere=True)
        if report.eval is not None:
            job.eval = report.eval
        if report.phase is not None and report.phase != job.phase:
            job.phase = report.phase
            self.phase_changed(job)
        else:
            self.changed()

    def job_finished(self, job_id: str, status: str, *, seconds: float | None = None) -> None:
        """The job is done; `seconds`: its time as measured where it ran (`JobOutcome.seconds`), which times the
        others — a job run elsewhere is seen here up to a poll interval after it started, or not at all when it
        started and ended between two looks. Without it, a job seen here is timed from when it was."""
        s = self.state
        s.done += 1
        job = s.jobs.pop(job_id, None)
        s.owed.pop(job_id, None)  # an eval owed and closed unseen (a worker's, between two looks) is owed no more
        spent = s.owed_spent.pop(job_id, 0.0)
        if seconds is not None:  # it ran, on its own clock: its point's time and its eval's
            s.timed += 1
            s.spent_s += seconds
        elif job is not None:  # it ran: its time times the others
            s.timed += 1
            s.spent_s += _now() - job.started_at + spent
        self.changed()

    # -- what a display does with it ---------------------------------------------------------------------------------
    def changed(self) -> None:
        return None

    def phase_changed(self, job: JobState) -> None:
        self.changed()

    def __enter__(self) -> SweepProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class PlainProgress(SweepProgress):
    """Timestamped lines: every event line, each phase change, and a status line per job in flight at most every
    `interval_s` — also while nothing reports (a server starting, an lm-eval run: minutes without a word otherwise),
    from a ticker thread while the display is entered."""

    def __init__(self, stream: Any = None, interval_s: float = 30.0) -> None:
        super().__init__()
        self.stream = stream
        self.interval_s = interval_s
        self._last = 0.0
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> PlainProgress:
        self._stop.clear()
        self._ticker = threading.Thread(target=self._tick, name="llmsweep-progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
            self._ticker = None

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, self.interval_s)):
            in_flight = [job for job in list(self.state.jobs.values()) if job.phase is not None]
            if in_flight and _now() - self._last >= self.interval_s:
                self._last = _now()
                for job in in_flight:
                    self._write(self.state.status(job))

    def _write(self, message: str) -> None:
        print(f"[{_clock()}] {message}", file=self.stream or sys.stderr, flush=True)

    def line(self, message: str) -> None:
        self._write(message)

    def phase_changed(self, job: JobState) -> None:
        self._last = _now()
        self._write(self.state.status(job))

    def changed(self) -> None:
        shown = [job for job in self.state.jobs.values() if job.phase not in (None, "launching")]
        if shown and _now() - self._last >= self.interval_s:
            self._last = _now()
            for job in shown:
                self._write(self.state.status(job))


BAR_WIDTH = 20
"""Columns of the live display's bar; the status has the rest of the line."""


def fit_status(status: str, width: int) -> str:
    """A status line broken into lines of at most `width` columns between its ` · ` parts, never inside one (the
    terminal wrapped `sweep ETA 32s` into `sweep ETA` and a line holding `32s`)."""
    lines: list[str] = []
    for part in status.split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part if not lines else "· " + part)
    return "\n".join(lines)


class LiveProgress(SweepProgress):
    """Under a TTY: event lines scroll above a live status block (rich): a row per job in flight, with a bar for its
    window."""

    def __init__(self, console: Any = None) -> None:
        super().__init__()
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self._live: Any = None

    def __rich__(self) -> Any:
        return self._render()

    def _render(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column()
        s = self.state
        shown: list[JobState | None] = [*s.jobs.values()] or [None]
        room = self.console.width - BAR_WIDTH - 1
        for job in shown:
            fraction = job.fraction() if job is not None else 0.0
            grid.add_row(ProgressBar(total=1.0, completed=fraction, width=BAR_WIDTH),
                         Text(fit_status(s.status(job), room), style="bold"))
        return grid

    def __enter__(self) -> LiveProgress:
        from rich.live import Live

        # Live re-renders `self` (its __rich__) on every refresh, so elapsed times and the ETA move between events.
        self._live = Live(self, console=self.console, refresh_per_second=4, transient=True)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def line(self, message: str) -> None:
        from rich.markup import escape

        self.console.print(f"[dim]{_clock()}[/] {escape(message)}", highlight=False, soft_wrap=True)
        self.changed()

    def changed(self) -> None:
        if self._live is not None:
            self._live.refresh()


class ReportingProgress(SweepProgress):
    """The worker's side of a job run elsewhere (a Slurm batch job on its node): its jobs' state written to `path`
    (`WorkerReport`, atomically) every `interval_s` and at once on a phase change, by a thread of its own, so that
    neither the client's loop nor the lifecycle waits on a (shared) filesystem. Event lines go to stderr, as before."""

    def __init__(self, path: Path, interval_s: float = REPORT_S) -> None:
        super().__init__()
        self.path = path
        self.interval_s = interval_s
        self._beat = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def phase_changed(self, job: JobState) -> None:
        self._wake.set()

    def job_started(self, job_id: str, concurrency: int | None, *, lane: str = "") -> None:
        super().job_started(job_id, concurrency, lane=lane)
        self._wake.set()

    def eval_owed(self, job_id: str) -> None:
        super().eval_owed(job_id)
        self._wake.set()

    def job_finished(self, job_id: str, status: str, *, seconds: float | None = None) -> None:
        super().job_finished(job_id, status, seconds=seconds)
        self._wake.set()

    def report(self) -> WorkerReport:
        model, s = _report_model(), self.state
        jobs = [JobReport(job_id=j.job_id, phase=j.phase, client=j.client, eval=j.eval) for j in list(s.jobs.values())]
        self._beat += 1
        return model(beat=self._beat, jobs=jobs, owed=list(s.owed))

    def write(self) -> None:
        """Write the report now; a failure is logged, never raised (the job goes on unreported)."""
        try:
            text = self.report().model_dump_json()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_text(self.path, text + "\n")
        except Exception as exc:  # a report is a courtesy: never the reason a job fails
            log.warning("could not write the progress report %s: %s", self.path, exc)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            self.write()
            self._wake.wait(self.interval_s)

    def __enter__(self) -> ReportingProgress:
        self._thread = threading.Thread(target=self._run, name="llmsweep-progress-report", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.write()


_ACTIVE: ContextVar[SweepProgress | None] = ContextVar("llmsweep_sweep_progress", default=None)
_NONE = SweepProgress()


def current_progress() -> SweepProgress:
    """The display `run` installed, or a silent one."""
    return _ACTIVE.get() or _NONE


@contextlib.contextmanager
def use_progress(progress: SweepProgress) -> Iterator[SweepProgress]:
    """Install `progress` for the lifecycle's hooks (and start/stop its display) for the block."""
    token = _ACTIVE.set(progress)
    try:
        with progress:
            yield progress
    finally:
        _ACTIVE.reset(token)


def progress_for(stream: Any = None) -> SweepProgress:
    """A live display when `stream` (default stderr) is a terminal, timestamped lines otherwise."""
    stream = stream or sys.stderr
    return LiveProgress() if getattr(stream, "isatty", lambda: False)() else PlainProgress(stream)
