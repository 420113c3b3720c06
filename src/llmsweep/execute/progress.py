"""What `llmsweep run` says while it works: job k/N, its phase, the client's counters, the window and the sweep's ETA.

The lifecycle reports to the active `SweepProgress` (a context variable, so neither the executor protocol nor the
lifecycle's signatures change): the sweep's size, each job's start, its phase (launching → warming → measuring →
draining; a job in virtual time: simulating, with its window as the predictor reports it), the client's counters as
they move, and each job's end. Two displays:

- `PlainProgress`: timestamped lines on stderr (a log, CI, a pipe): every event line, each phase change, and a status
  line at most every `interval_s` while a job measures;
- `LiveProgress`: under a TTY, the event lines scroll above a live status block (rich).

Nothing installed (the Slurm node side, library callers): the hooks do nothing and text events go where they went.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from llmsweep.client import Progress
    from llmsweep.sim.predict import WindowProgress

Phase = Literal["launching", "warming", "measuring", "draining", "simulating", "summarising", "running", "evaluating"]
"""`simulating`: a job in virtual time (the simulator core in-process: its warm-up, then its window); `summarising`:
its records written and summarised; `running`: a job that runs elsewhere (a Slurm batch job's worker), of which only
its start and end are seen here; `evaluating`: an accuracy eval against a server (in a virtual-time run, the
simulator served live: wall-clock time)."""


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


@dataclass
class SweepState:
    """Where the sweep stands, and its ETA: the mean time of the jobs done for each job left, less what the current
    job has spent (or, once its window is under way, the rest of its window at the rate it goes)."""

    total: int = 0
    done: int = 0
    started_at: float = field(default_factory=_now)
    job_id: str | None = None
    concurrency: int | None = None
    index: int = 0
    phase: Phase | None = None
    client: Progress | None = None
    sim: WindowProgress | None = None
    """A virtual-time job's window, as the predictor last reported it."""
    job_started_at: float = 0.0
    window_started_at: float | None = None
    """When the current job's window was first seen under way (wall clock)."""
    warmup_finished: int = 0
    """The client's finished requests while it warmed up (the warm-up's, counted out of `measured`)."""
    timed: int = 0
    """Jobs done that ran here (a job refused or resumed takes no time to time the others by)."""
    spent_s: float = 0.0
    """Wall seconds of the timed jobs."""
    owed: dict[str, int] = field(default_factory=dict)
    """Jobs whose point is done and whose eval waits for their group's eval server, with the place each was shown at."""
    owed_spent: dict[str, float] = field(default_factory=dict)
    """Their points' wall seconds (added to the job's time when its eval is done)."""

    def job_fraction(self) -> float:
        if self.sim is not None:  # a job in virtual time
            return self.sim.fraction()
        p = self.client
        if p is None or p.profiling_elapsed_s is None:
            return 0.0
        if p.duration_s:
            return min(1.0, p.profiling_elapsed_s / p.duration_s)
        if p.target_requests:
            return min(1.0, max(0, p.finished - self.warmup_finished) / p.target_requests)
        return 0.0

    def eta_s(self) -> float | None:
        """Seconds until the sweep is done; None while nothing can time it: no job done and less than a fifth of the
        first job's window (before that the time so far is mostly the launch and the warm-up), or its window over."""
        if self.total <= 0:
            return None
        now = _now()
        mean = self.spent_s / self.timed if self.timed else None
        left = max(0, self.total - self.done)  # the current job among them
        if self.job_id is None:
            return None if mean is None else mean * left
        in_job = now - self.job_started_at
        fraction = self.job_fraction()
        if fraction >= MIN_WINDOW_FRACTION and self.window_started_at is not None:
            rest = (now - self.window_started_at) * (1.0 - fraction) / fraction
            if mean is None:
                # a sliver of the first window times only the launch; once the window is over, what follows (the drain,
                # the summary: most of a job in virtual time) cannot be timed until the first job ends
                if fraction < FIRST_ETA_FRACTION or fraction >= 1.0:
                    return None
                mean = in_job + rest  # the first job, as it will have run, stands for the others
            else:  # what follows its window (the drain, the summary) is in the mean, not in the window's rate
                rest = max(rest, mean - in_job)
        elif mean is not None:
            rest = max(0.0, mean - in_job)
        else:
            return None
        return max(0.0, rest + mean * max(0, left - 1))

    def status(self) -> str:
        """One line: `job 3/9 conc 16 · measuring · 120 ok, 0 failed, 16 in flight · window 300/900 s · ETA 12m`."""
        if self.job_id is None:
            head = f"{self.done}/{self.total} job(s) done" if self.total else "starting"
            return head + self._eta()
        parts = [f"job {self.index}/{self.total} conc {self.concurrency}", self.phase or "starting"]
        if self.phase in ("launching", "running", "evaluating"):
            parts.append(f"{duration_text(_now() - self.job_started_at)} so far")
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
        return " · ".join(parts) + self._eta()

    def _counts(self, p: Progress) -> str:
        """The requests as the end-of-run table counts them: the window's (ok and failed), the warm-up's apart. The
        client counts every finished request together, so those of the window are the ones finished since the warm-up
        (a warm-up request still in flight when the window opens counts in: hence `≈`, when one was)."""
        if p.profiling_elapsed_s is None:
            return f"warm-up: {p.finished} done, {p.inflight} in flight"
        measured = max(0, p.finished - self.warmup_finished)
        ok = max(0, measured - p.failed)
        about = "≈" if self.warmup_finished else ""
        return f"{about}{ok} ok, {p.failed} failed, {p.inflight} in flight"

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


def phase_of(p: Progress) -> Phase:
    """The client's phase from its counters: warm-up until the first profiling request, draining once the window is
    over or a stop was called."""
    if p.profiling_elapsed_s is None:
        return "warming"
    if p.stop_reason or (p.duration_s is not None and p.profiling_elapsed_s >= p.duration_s):
        return "draining"
    return "measuring"


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

    def job_started(self, job_id: str, concurrency: int | None) -> None:
        """A job begins (or, owed an eval, comes back for it at the place it was shown at)."""
        s = self.state
        index = s.owed.pop(job_id, None)
        s.job_id, s.concurrency = job_id, concurrency
        self._clear()
        s.index = index if index is not None else s.done + len(s.owed) + 1
        s.job_started_at = _now()
        self.changed()

    def eval_owed(self, job_id: str) -> None:
        """The job's point is done; its eval runs after its group's other points (`job_started` again then)."""
        s = self.state
        if s.job_id == job_id:
            s.owed[job_id] = s.index
            s.owed_spent[job_id] = s.owed_spent.get(job_id, 0.0) + _now() - s.job_started_at
            s.job_id = None
            self._clear()
            self.changed()

    def phase(self, phase: Phase) -> None:
        if self.state.job_id is not None and phase != self.state.phase:
            self.state.phase = phase
            self.phase_changed()

    def client(self, p: Progress) -> None:
        s = self.state
        s.client = p
        if p.profiling_elapsed_s is None:
            s.warmup_finished = p.finished
        self._window_seen()
        phase = phase_of(p)
        if phase != s.phase:
            s.phase = phase
            self.phase_changed()
        else:
            self.changed()

    def simulated(self, window: WindowProgress) -> None:
        """A virtual-time job's window moved (the predictor reports every virtual second: shown at most every
        `SIM_REPORT_S` of wall time)."""
        s = self.state
        s.sim = window
        self._window_seen()
        if s.phase != "simulating":
            self.phase("simulating")
        elif _now() - self._sim_shown >= SIM_REPORT_S:
            self._sim_shown = _now()
            self.changed()

    def job_finished(self, job_id: str, status: str) -> None:
        s = self.state
        s.done += 1
        if s.job_id == job_id:  # it ran here: its time times the others
            s.timed += 1
            s.spent_s += _now() - s.job_started_at + s.owed_spent.pop(job_id, 0.0)
        s.job_id = None
        self._clear()
        self.changed()

    def _clear(self) -> None:
        s = self.state
        s.phase, s.client, s.sim, s.window_started_at, s.warmup_finished = None, None, None, None, 0

    def _window_seen(self) -> None:
        s = self.state
        if s.window_started_at is None and s.job_fraction() > 0:
            s.window_started_at = _now()

    # -- what a display does with it ---------------------------------------------------------------------------------
    def changed(self) -> None:
        return None

    def phase_changed(self) -> None:
        self.changed()

    def __enter__(self) -> SweepProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class PlainProgress(SweepProgress):
    """Timestamped lines: every event line, each phase change, and a status line at most every `interval_s`."""

    def __init__(self, stream: Any = None, interval_s: float = 30.0) -> None:
        super().__init__()
        self.stream = stream
        self.interval_s = interval_s
        self._last = 0.0

    def _write(self, message: str) -> None:
        print(f"[{_clock()}] {message}", file=self.stream or sys.stderr, flush=True)

    def line(self, message: str) -> None:
        self._write(message)

    def phase_changed(self) -> None:
        self._last = _now()
        self._write(self.state.status())

    def changed(self) -> None:
        if self.state.job_id is None or self.state.phase in (None, "launching"):
            return
        if _now() - self._last >= self.interval_s:
            self._last = _now()
            self._write(self.state.status())


class LiveProgress(SweepProgress):
    """Under a TTY: event lines scroll above a live status line with a bar for the job's window (rich)."""

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
        fraction = s.job_fraction() if s.job_id is not None else 0.0
        grid.add_row(ProgressBar(total=1.0, completed=fraction, width=20), Text(s.status(), style="bold"))
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
