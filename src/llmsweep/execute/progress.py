"""What `llmsweep run` says while it works: job k/N, its phase, the client's counters, the window and the sweep's ETA.

The lifecycle reports to the active `SweepProgress` (a context variable, so neither the executor protocol nor the
lifecycle's signatures change): the sweep's size, each job's start, its phase (launching → warming → measuring →
draining), the client's counters as they move, and each job's end. Two displays:

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

Phase = Literal["launching", "warming", "measuring", "draining"]


def _clock() -> str:
    return time.strftime("%H:%M:%S")


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


FIRST_ETA_FRACTION = 0.2
"""Share of the first job's window measured before the sweep's ETA is shown."""


@dataclass
class SweepState:
    """Where the sweep stands; the ETA is the sweep's elapsed time scaled by the share of its jobs done."""

    total: int = 0
    done: int = 0
    started_at: float = field(default_factory=time.monotonic)
    job_id: str | None = None
    concurrency: int | None = None
    index: int = 0
    phase: Phase | None = None
    client: Progress | None = None
    job_started_at: float = 0.0
    owed: dict[str, int] = field(default_factory=dict)
    """Jobs whose point is done and whose eval waits for their group's eval server, with the place each was shown at."""

    def job_fraction(self) -> float:
        p = self.client
        if p is None or p.profiling_elapsed_s is None:
            return 0.0
        if p.duration_s:
            return min(1.0, p.profiling_elapsed_s / p.duration_s)
        if p.target_requests:
            return min(1.0, p.finished / max(1, p.target_requests))
        return 0.0

    def eta_s(self) -> float | None:
        """None until there is something to scale: a job done, or a fifth of the first job's window (before that the
        elapsed time is mostly the launch and the warm-up, and a sliver of a window scaled up reads as hours)."""
        fraction = self.job_fraction() if self.job_id is not None else 0.0
        units = self.done + fraction
        if self.total <= 0 or units <= 0 or (self.done == 0 and fraction < FIRST_ETA_FRACTION):
            return None
        elapsed = time.monotonic() - self.started_at
        return max(0.0, elapsed * (self.total - units) / units)

    def status(self) -> str:
        """One line: `job 3/9 conc 16 · measuring · 120 done, 0 failed, 16 in flight · window 300/900 s · ETA 12m`."""
        if self.job_id is None:
            head = f"{self.done}/{self.total} job(s) done" if self.total else "starting"
            return head + self._eta()
        parts = [f"job {self.index}/{self.total} conc {self.concurrency}", self.phase or "starting"]
        if self.phase == "launching":
            parts.append(f"{_duration(time.monotonic() - self.job_started_at)} so far")
        p = self.client
        if p is not None and self.phase != "launching":
            parts.append(f"{p.finished} done, {p.failed} failed, {p.inflight} in flight")
            if p.duration_s and p.profiling_elapsed_s is not None:
                parts.append(f"window {min(p.profiling_elapsed_s, p.duration_s):.0f}/{p.duration_s:.0f} s")
            elif p.target_requests:
                parts.append(f"{p.target_requests} to measure")
            if p.stop_reason:
                parts.append(f"stopping: {p.stop_reason}")
        return " · ".join(parts) + self._eta()

    def _eta(self) -> str:
        eta = self.eta_s()
        return "" if eta is None else f" · sweep ETA {_duration(eta)}"


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

    # -- what the lifecycle reports ---------------------------------------------------------------------------------
    def line(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def sweep(self, total: int) -> None:
        self.state = SweepState(total=total)

    def job_started(self, job_id: str, concurrency: int | None) -> None:
        """A job begins (or, owed an eval, comes back for it at the place it was shown at)."""
        s = self.state
        index = s.owed.pop(job_id, None)
        s.job_id, s.concurrency, s.phase, s.client = job_id, concurrency, None, None
        s.index = index if index is not None else s.done + len(s.owed) + 1
        s.job_started_at = time.monotonic()
        self.changed()

    def eval_owed(self, job_id: str) -> None:
        """The job's point is done; its eval runs after its group's other points (`job_started` again then)."""
        s = self.state
        if s.job_id == job_id:
            s.owed[job_id] = s.index
            s.job_id, s.phase, s.client = None, None, None
            self.changed()

    def phase(self, phase: Phase) -> None:
        if self.state.job_id is not None and phase != self.state.phase:
            self.state.phase = phase
            self.phase_changed()

    def client(self, p: Progress) -> None:
        self.state.client = p
        phase = phase_of(p)
        if phase != self.state.phase:
            self.state.phase = phase
            self.phase_changed()
        else:
            self.changed()

    def job_finished(self, job_id: str, status: str) -> None:
        s = self.state
        s.done += 1
        s.job_id, s.phase, s.client = None, None, None
        self.changed()

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
        self._last = time.monotonic()
        self._write(self.state.status())

    def changed(self) -> None:
        if self.state.job_id is None or self.state.phase in (None, "launching"):
            return
        if time.monotonic() - self._last >= self.interval_s:
            self._last = time.monotonic()
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
