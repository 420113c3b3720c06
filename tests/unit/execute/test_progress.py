"""What `run` says while it works: the client's phase from its counters, job k/N with the window and the sweep's
ETA, timestamped plain lines (each phase change at once, status lines throttled), and no display unless installed."""

from __future__ import annotations

import io
import re

from llmsweep.client import Progress
from llmsweep.execute.progress import (
    LiveProgress,
    PlainProgress,
    SweepProgress,
    current_progress,
    phase_of,
    progress_for,
    use_progress,
)


def _p(profiling: float | None, *, duration: float | None = 60.0, target: int | None = None, finished: int = 5,
       stop: str | None = None) -> Progress:
    return Progress(elapsed_s=1.0, started=finished + 2, finished=finished, failed=1, inflight=2, output_tokens=10,
                    target_requests=target, duration_s=duration, profiling_elapsed_s=profiling, stop_reason=stop)


def test_the_phase_follows_the_clients_counters() -> None:
    assert phase_of(_p(None)) == "warming"
    assert phase_of(_p(10.0)) == "measuring"
    assert phase_of(_p(61.0)) == "draining"
    assert phase_of(_p(10.0, stop="failure ratio 0.2 > 0.05")) == "draining"
    assert phase_of(_p(10.0, duration=None, target=40)) == "measuring"


def test_the_status_names_the_job_its_counters_window_and_the_sweeps_eta() -> None:
    progress = SweepProgress()
    progress.sweep(4)
    progress.job_finished("a", "valid")
    progress.job_started("b", 16)
    assert progress.state.status().startswith("job 2/4 conc 16")
    progress.client(_p(30.0))
    status = progress.state.status()
    assert "measuring" in status and "5 done, 1 failed, 2 in flight" in status and "window 30/60 s" in status
    assert "sweep ETA" in status
    eta = progress.state.eta_s()
    assert eta is not None and eta > 0  # 1.5 of 4 jobs done: 2.5 to go
    progress.job_finished("b", "smoke")
    assert progress.state.status().startswith("2/4 job(s) done")


def test_no_eta_from_a_sliver_of_the_first_window() -> None:
    """At "window 0/20 s" the sweep's time so far is its launch and warm-up: scaled by a sliver of a window it read
    as a 36-minute ETA for a sweep of a minute. The ETA waits for a fifth of the first window (or a job done)."""
    progress = SweepProgress()
    progress.sweep(3)
    progress.job_started("a", 1)
    progress.client(_p(0.5, duration=20.0))
    assert progress.state.eta_s() is None and "ETA" not in progress.state.status()
    progress.client(_p(5.0, duration=20.0))
    assert progress.state.eta_s() is not None and "sweep ETA" in progress.state.status()


def test_a_job_owing_its_eval_keeps_its_place_and_counts_once() -> None:
    """A pinned run-eval row's point runs, its eval waits for the group's eval server: the next job is shown as the
    next one, the owed job comes back under its own number, and each job counts once when it finishes."""
    progress = SweepProgress()
    progress.sweep(3)
    progress.job_started("a", 16)
    progress.job_finished("a", "valid")
    progress.job_started("b", 32)
    progress.eval_owed("b")
    assert progress.state.status().startswith("1/3 job(s) done")
    progress.job_started("c", 64)
    assert progress.state.status().startswith("job 3/3 conc 64")
    progress.eval_owed("c")
    progress.job_started("b", 32)
    assert progress.state.status().startswith("job 2/3 conc 32")
    progress.job_finished("b", "valid")
    progress.job_started("c", 64)
    assert progress.state.status().startswith("job 3/3 conc 64")
    progress.job_finished("c", "valid")
    assert progress.state.status().startswith("3/3 job(s) done")


def test_plain_lines_are_timestamped_phase_changes_at_once_status_throttled() -> None:
    out = io.StringIO()
    progress = PlainProgress(out, interval_s=3600)
    progress.sweep(1)
    progress.line("launching sim server")
    progress.job_started("a", 2)
    progress.phase("launching")
    progress.client(_p(None))
    progress.client(_p(1.0))
    progress.client(_p(2.0))  # same phase, within the interval: no line
    lines = out.getvalue().splitlines()
    assert all(re.match(r"^\[\d\d:\d\d:\d\d\] ", line) for line in lines), lines
    assert [line[11:] for line in lines[:2]] == ["launching sim server", "job 1/1 conc 2 · launching · 0s so far"]
    assert "warming" in lines[2] and "measuring" in lines[3] and len(lines) == 4


def test_nothing_is_displayed_unless_a_run_installs_a_display() -> None:
    assert type(current_progress()) is SweepProgress
    plain = PlainProgress(io.StringIO())
    with use_progress(plain):
        assert current_progress() is plain
    assert current_progress() is not plain
    assert isinstance(progress_for(io.StringIO()), PlainProgress)  # not a terminal

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(progress_for(Tty()), LiveProgress)
