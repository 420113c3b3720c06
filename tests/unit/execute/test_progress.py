"""What `run` says while it works: the client's phase from its counters, job k/N with the window and the sweep's
ETA, timestamped plain lines (each phase change at once, status lines throttled), and no display unless installed."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from llmsweep.client import Progress, RunOptions
from llmsweep.client import runner as runner_mod
from llmsweep.client.clock import now_unix
from llmsweep.client.interpreter import WorkerStats
from llmsweep.client.runner import _progress
from llmsweep.execute import progress as progress_mod
from llmsweep.execute.progress import (
    JobReport,
    LiveProgress,
    PlainProgress,
    ReportingProgress,
    SweepProgress,
    current_progress,
    progress_for,
    read_report,
    use_progress,
)


def _p(profiling: float | None, *, duration: float | None = 60.0, target: int | None = None, finished: int = 5,
       stop: str | None = None, warmup: int = 0) -> Progress:
    """The client's progress (`client.runner._progress`, as its workers report it) after `profiling` seconds of
    measuring (None: still warming), `finished` requests done (`warmup` of them warm-ups, one of the others failed)
    and two in flight."""
    now = now_unix()
    stats = WorkerStats(worker=0, started=finished + 2, finished=finished, profiling_failed=1, inflight=2,
                        warmup_finished=warmup, profiling_finished=finished - warmup,
                        profiling_output_tokens=10, first_profiling_sent=None if profiling is None else now - profiling,
                        stop_reason=stop)
    with mock.patch.object(runner_mod, "now_unix", lambda: now):  # read at `now`: a loaded machine adds no time
        return _progress([stats], RunOptions(concurrency=4, duration_s=duration, num_requests=target), now - 1.0,
                         None)


def test_the_phase_follows_the_clients_counters() -> None:
    assert _p(None).phase == "warming"
    assert _p(10.0).phase == "measuring"
    assert _p(61.0).phase == "draining"  # the window is over: what is in flight drains
    assert _p(10.0, stop="failure ratio 0.2 > 0.05").phase == "draining"
    assert _p(10.0, duration=None, target=40).phase == "measuring"


def test_the_status_names_the_job_its_counters_window_and_the_sweeps_eta() -> None:
    progress = SweepProgress()
    progress.sweep(4)
    progress.job_finished("a", "valid")
    progress.job_started("b", 16)
    assert progress.state.status().startswith("job 2/4 conc 16")
    progress.client(_p(30.0))
    status = progress.state.status()
    assert "measuring" in status and "4 ok, 1 failed, 2 in flight" in status and "window 30/60 s" in status
    assert "sweep ETA" in status
    eta = progress.state.eta_s()
    assert eta is not None and eta > 0  # 1.5 of 4 jobs done: 2.5 to go
    progress.job_finished("b", "smoke")
    assert progress.state.status().startswith("2/4 jobs done")


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
    # Its window over, the first job still drains and summarises (most of a job in virtual time): timing the sweep by
    # the job so far read 13 s for a sweep of 46 s. No ETA until the first job ends.
    progress.client(_p(21.0, duration=20.0))
    assert progress.state.eta_s() is None and "ETA" not in progress.state.status()
    progress.job_finished("a", "valid")
    assert progress.state.eta_s() is not None


def test_a_job_owing_its_eval_keeps_its_place_and_counts_once() -> None:
    """A pinned run-eval row's point runs, its eval waits for the group's eval server: the next job is shown as the
    next one, the owed job comes back under its own number, and each job counts once when it finishes."""
    progress = SweepProgress()
    progress.sweep(3)
    progress.job_started("a", 16)
    progress.job_finished("a", "valid")
    progress.job_started("b", 32)
    progress.eval_owed("b")
    assert progress.state.status().startswith("1/3 jobs done")
    progress.job_started("c", 64)
    assert progress.state.status().startswith("job 3/3 conc 64")
    progress.eval_owed("c")
    progress.job_started("b", 32)
    assert progress.state.status().startswith("job 2/3 conc 32")
    progress.job_finished("b", "valid")
    progress.job_started("c", 64)
    assert progress.state.status().startswith("job 3/3 conc 64")
    progress.job_finished("c", "valid")
    assert progress.state.status().startswith("3/3 jobs done")


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


def test_plain_lines_keep_coming_while_nothing_reports() -> None:
    """A server starting or an lm-eval run reports nothing for minutes: the plain display still says, every interval,
    what is in flight and for how long (an eval printed no line for 3 minutes)."""
    out = io.StringIO()
    progress = PlainProgress(out, interval_s=0.2)
    with use_progress(progress):
        progress.sweep(1)
        progress.job_started("a", 16)
        progress.phase("evaluating")
        time.sleep(1.1)  # no call from the run: the ticker's lines alone
    lines = out.getvalue().splitlines()
    ticks = [line for line in lines[1:] if "job 1/1 conc 16 · evaluating ·" in line and "so far" in line]
    assert len(ticks) >= 3, lines
    said = len(out.getvalue())
    time.sleep(0.5)
    assert len(out.getvalue()) == said  # the ticker stops with the display


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


class _Clock:
    """The display's wall clock, moved by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _window(elapsed: float | None, window: float = 1800.0, *, sent: int = 0, to_send: int | None = None) -> Any:
    from llmsweep.sim.predict import WindowProgress

    return WindowProgress(elapsed, window, sent, to_send)


def test_a_virtual_time_job_says_it_simulates_and_how_far_its_window_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """The quickstart's display sat on `starting` for each whole job: a job in virtual time says `simulating`, its
    warm-up, then its window in virtual seconds (or its requests, for a fixed-length point), and its bar moves."""
    clock = _Clock()
    monkeypatch.setattr(progress_mod, "_now", clock)
    progress = SweepProgress()
    progress.sweep(9)
    progress.job_started("a", 4)
    progress.phase("simulating")
    assert progress.state.status() == "job 1/9 conc 4 · simulating"
    progress.simulated(_window(None))
    assert "simulating · warm-up" in progress.state.status()
    clock.t += 1
    progress.simulated(_window(600.0))
    assert "simulating · window 600/1800 virtual s" in progress.state.status()
    assert abs(progress.state.job_fraction() - 1 / 3) < 1e-9
    progress.simulated(_window(0.0, 1e7, sent=512, to_send=1000))
    assert "requests 512/1000 sent" in progress.state.status()
    progress.phase("summarising")
    assert "summarising" in progress.state.status()


def test_the_eta_counts_down_inside_a_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """It counted up (`34s … 36s … 1m09s`) while a job ran: the sweep's elapsed time scaled by the jobs done. Now the
    finished jobs' mean time times the jobs left, less what the current job has spent (or the rest of its window at its
    rate), never below 0."""
    clock = _Clock()
    monkeypatch.setattr(progress_mod, "_now", clock)
    progress = SweepProgress()
    progress.sweep(9)
    progress.job_started("a", 1)
    progress.phase("simulating")
    clock.t += 10
    progress.job_finished("a", "valid")  # 10 s a job
    progress.job_started("b", 4)
    progress.phase("simulating")
    etas = []
    for _ in range(4):  # no window reported: the mean, less the time spent
        etas.append(progress.state.eta_s())
        clock.t += 3
    assert etas == [80.0, 77.0, 74.0, 71.0]
    clock.t += 20  # far past the mean: the current job's share floors at 0, never negative, never growing
    assert progress.state.eta_s() == 70.0
    progress.simulated(_window(None))
    clock.t += 1
    progress.simulated(_window(90.0))  # a window under way: the rest of it at its rate (or the mean, if longer)
    clock.t += 4
    progress.simulated(_window(900.0))
    assert progress.state.eta_s() == 4.0 + 70.0
    clock.t += 4
    progress.simulated(_window(1800.0))
    assert progress.state.eta_s() == 70.0


def test_the_first_jobs_window_times_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(progress_mod, "_now", clock)
    progress = SweepProgress()
    progress.sweep(3)
    progress.job_started("a", 1)
    clock.t += 2  # warm-up
    progress.simulated(_window(None))
    progress.simulated(_window(1.0))
    clock.t += 1
    progress.simulated(_window(180.0))  # a tenth: too little to time the sweep by
    assert progress.state.eta_s() is None
    clock.t += 1
    progress.simulated(_window(450.0))  # a quarter in 2 s: 6 s more; the job takes 10 s, and two more jobs follow
    assert progress.state.eta_s() == 6.0 + 2 * 10.0


def test_refused_or_resumed_jobs_count_done_but_time_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(progress_mod, "_now", clock)
    progress = SweepProgress()
    progress.sweep(4)
    progress.job_finished("r", "refused")  # never started
    progress.job_started("a", 1)
    clock.t += 6
    progress.job_finished("a", "valid")
    assert progress.state.eta_s() == 2 * 6.0


def test_the_done_count_is_the_windows_requests_not_the_warm_ups() -> None:
    """It showed `measuring · 49 done` at window 0/40 s and reached 129 where the end table said 80 ok: the client's
    counter includes the warm-up. The warm-up is counted apart; in the window, ok and failed as the table counts them,
    a warm-up that finishes inside the window included (it was counted as ok, with `≈` after every warm-up: a run
    whose 49 warm-ups all failed showed `≈5 ok, 10 failed` where the table said 0/10)."""
    progress = SweepProgress()
    progress.sweep(1)
    progress.job_started("a", 16)
    progress.client(_p(None, finished=46, warmup=46))
    assert "warm-up: 46 done, 2 in flight" in progress.state.status()
    progress.client(_p(0.1, duration=40.0, finished=49, warmup=49))
    status = progress.state.status()
    assert "0 ok, 1 failed" in status and "49" not in status
    progress.client(_p(40.0, duration=40.0, finished=133, warmup=52))  # three warm-ups finished in the window
    assert "· 80 ok, 1 failed" in progress.state.status()  # 133 − 52 warm-ups − 1 failed, exactly

    progress.job_started("b", 16)  # no warm-up
    progress.client(_p(1.0, duration=40.0, finished=81))
    assert "80 ok, 1 failed, 2 in flight" in progress.state.status()
    progress.job_started("c", 16)  # a request count: the bar is the window's requests
    progress.client(_p(None, duration=None, target=100, finished=10, warmup=10))
    progress.client(_p(1.0, duration=None, target=100, finished=63, warmup=13))
    assert progress.state.job_fraction() == 0.5


def test_the_eta_times_every_job_in_flight_lane_by_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch jobs side by side (a Slurm lane each, its jobs one after another): the ETA timed one job in flight as if
    the sweep ran one job at a time. Now each lane ends after the rest of its job in flight and its queued jobs at the
    mean time of a job; the lane that ends last ends the sweep. Every job in flight is shown."""
    clock = _Clock()
    monkeypatch.setattr(progress_mod, "_now", clock)
    out = io.StringIO()
    progress = PlainProgress(out, interval_s=0.0)
    progress.sweep(5)  # lane A holds 3 jobs, lane B 2
    progress.job_started("a1", 8, lane="A")
    progress.queued("A", 2)
    progress.job_started("b1", 16, lane="B")
    progress.queued("B", 1)
    clock.t += 6
    progress.job_finished("b1", "valid")  # 6 s
    progress.job_started("b2", 32, lane="B")
    progress.queued("B", 0)
    clock.t += 4
    progress.job_finished("a1", "valid")  # 10 s: a job takes 8 s
    progress.job_started("a2", 64, lane="A")
    progress.queued("A", 1)
    # lane A: a2 just started (8 s) and one more (8 s); lane B: b2, 4 s in (4 s more). Not 3 jobs left × 8 s.
    assert progress.state.eta_s() == 16.0
    for job in ("a2", "b2"):
        progress.phase("running", job_id=job)
    out.truncate(0)
    progress.changed()
    lines = [line[11:] for line in out.getvalue().strip("\0").splitlines()]
    assert lines == ["job 3/5 conc 32 · running · 4s so far · sweep ETA 16s",
                     "job 4/5 conc 64 · running · 0s so far · sweep ETA 16s"]


def test_a_job_run_elsewhere_shows_its_workers_counters_and_a_silent_worker_is_said_to_be(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The worker (on a Slurm node) reports its job as the local display would show it; the driver shows that: the
    phase and the client's counters, the warm-up counted apart as here. A worker that stops reporting leaves its
    last counters shown, said to be silent; an unreadable report is no report (never an error)."""
    clock = _Clock()
    monkeypatch.setattr(progress_mod, "_now", clock)
    path = tmp_path / "progress.json"
    worker = ReportingProgress(path)
    worker.job_started("j", 4)
    worker.phase("launching")
    worker.client(_p(None, finished=9, warmup=9))
    worker.client(_p(30.0, finished=15, warmup=9))
    worker.write()

    out = io.StringIO()
    driver = PlainProgress(out, interval_s=3600)
    driver.sweep(2)
    report = read_report(path)
    assert report is not None and [j.job_id for j in report.jobs] == ["j"]
    driver.job_started("j", 4, lane="42")
    driver.reported(report.jobs[0], fresh=True, quiet_after_s=30.0)
    status = "job 1/2 conc 4 · measuring · 5 ok, 1 failed, 2 in flight · window 30/60 s"
    assert out.getvalue().splitlines()[-1][11:].startswith(status)  # a phase change: a line at once
    clock.t += 31
    driver.reported(report.jobs[0], fresh=False, quiet_after_s=30.0)  # the same beat: nothing new
    assert driver.state.status().startswith(status + " · no report from its worker for 31s")
    worker.write()  # a new beat: heard again
    again = read_report(path)
    assert again is not None and again.beat == report.beat + 1
    driver.reported(again.jobs[0], fresh=True)
    assert "no report" not in driver.state.status()
    path.write_text('{"beat": 3, "jobs": [{"job_id": "j", "client": {"finished": "many"}}]}')
    assert read_report(path) is None
    path.write_text("{not json")
    assert read_report(path) is None
    assert read_report(tmp_path / "none.json") is None


def test_a_worker_reports_from_a_thread_of_its_own_until_it_is_done(tmp_path: Path) -> None:
    """It beats while nothing moves (a server launching for minutes is not a silent worker), and its last word, once
    the job is done, names no job in flight."""
    path = tmp_path / "progress.json"

    def heard(beats_after: int) -> int:
        deadline = time.monotonic() + 10
        while (report := read_report(path)) is None or report.beat <= beats_after or not report.jobs:
            assert time.monotonic() < deadline, f"no report after beat {beats_after}: {report}"
            time.sleep(0.02)
        assert report.jobs[0].job_id == "j" and report.jobs[0].phase == "launching"
        return report.beat

    with use_progress(ReportingProgress(path, interval_s=0.05)) as worker:
        worker.job_started("j", 1)
        worker.phase("launching")
        heard(heard(0) + 1)
        worker.job_finished("j", "valid")
    last = read_report(path)
    assert last is not None and last.jobs == []


def _said(profiling: float) -> JobReport:
    """What a worker reports of its job "a" measuring, `profiling` s into its 60-s window."""
    worker = ReportingProgress(Path("unused.json"))
    worker.job_started("a", 4)
    worker.client(_p(profiling))
    return worker.report().jobs[0]


def test_a_job_run_elsewhere_is_timed_by_its_own_clock_and_from_the_window_seen_since(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A job on a Slurm node is seen here a poll interval apart. First seen half-way through its window, it was taken
    to have done half its window in no time (`sweep ETA 0s`, two jobs left); now only the window done since it was
    seen times it. Finished, it is timed by the seconds its worker measured, not by when it was seen here (a job seen a
    poll late counted a poll's time, one that started and ended between two looks counted none)."""
    clock = _Clock()
    monkeypatch.setattr(progress_mod, "_now", clock)
    progress = SweepProgress()
    progress.sweep(3)
    progress.job_started("a", 4, lane="42")
    progress.queued("42", 2)
    progress.reported(_said(30.0), fresh=True)  # window 30/60 s
    assert progress.state.eta_s() is None  # none of it seen going by yet
    clock.t += 6
    progress.reported(_said(36.0), fresh=True)  # 6 s more in 6 s
    assert progress.state.eta_s() == pytest.approx(24.0 + 2 * 30.0, abs=0.1)  # 24 s more, then two as long
    clock.t += 1
    progress.job_finished("a", "valid", seconds=50.0)  # on the node: its server's launch, warm-up, window, drain
    progress.queued("42", 2)
    assert progress.state.eta_s() == 2 * 50.0
    progress.job_finished("b", "valid", seconds=40.0)  # started and ended between two looks: never seen here
    progress.queued("42", 1)
    assert progress.state.eta_s() == 45.0
    progress.job_finished("c", "valid", seconds=40.0)
    assert progress.state.eta_s() == 0.0  # all done, whatever the lane last said it held


def test_an_eval_owed_and_closed_unseen_is_owed_no_more() -> None:
    """A worker's owed eval can end between two of the driver's looks, its outcome closed without it being shown
    again: it is owed no more, so the next job is numbered after it (it stayed owed and every later job's number was
    one too high: `job 4/3`)."""
    progress = SweepProgress()
    progress.sweep(3)
    progress.job_started("a", 1)
    progress.eval_owed("a")
    progress.job_started("b", 2)
    progress.job_finished("b", "valid", seconds=10.0)
    progress.job_finished("a", "valid", seconds=20.0)  # its eval, never shown as started again
    progress.job_started("c", 4)
    assert progress.state.owed == {} and progress.state.jobs["c"].index == 3


def test_the_live_status_breaks_between_its_parts_to_fit_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded at 110 columns, the measuring line wrapped `32s` of `sweep ETA 32s` onto a line of its own on every
    refresh. It breaks between its ` · ` parts instead, each line within the width."""
    from rich.console import Console

    clock = _Clock()
    monkeypatch.setattr(progress_mod, "_now", clock)
    out = io.StringIO()
    live = LiveProgress(Console(file=out, width=110, force_terminal=True, color_system=None))
    live.sweep(3)
    live.job_started("a", 4)
    live.job_finished("a", "valid")
    live.job_started("b", 4)
    live.client(_p(8.0, duration=1800.0, finished=1249, warmup=14))
    clock.t += 32
    live.console.print(live._render())
    lines = [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]
    assert len(lines) == 2 and all(len(line) <= 110 for line in lines), lines
    text = " ".join(lines)
    assert "1234 ok, 1 failed, 2 in flight" in text and re.search(r"sweep ETA \d", text), lines
    assert all(not line.strip().startswith(("ETA", "32s")) for line in lines)  # never inside a part


def _a_job() -> Any:
    from llmsweep.plan import full_sweep
    from llmsweep.plan.matrix import EvalOptions
    from llmsweep.spec import loads_recipes

    text = ("k:\n  image: vllm/vllm-openai:v0.26.0\n  model: meta-llama/Llama-3.1-8B-Instruct\n  model-prefix: "
            "llama3.1-8b\n  runner: h200\n  precision: bf16\n  framework: vllm\n  multinode: false\n  scenarios:\n"
            "    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 1, conc-list: [16, 64] }\n  serve:\n    engine: { name: vllm, version: 0.26.0 }\n")
    jobs = full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes, evals=EvalOptions(all_evals=True))
    return jobs[0]


def test_an_eval_says_evaluating_and_its_answers_once_its_server_has_launched(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The server an eval runs against said `launching` as it started, and nothing set the phase back: the whole
    lm-eval run read `launching · 1m00s so far`. The eval says `evaluating` from its first request on, with lm-eval's
    answers so far (of the requests it sends) as the runtime reports them."""
    from llmsweep.engines.launch import LaunchSpec
    from llmsweep.evals import results as eval_results
    from llmsweep.execute import lifecycle

    seen: list[str] = []

    def fake_run_eval(*args: Any, on_progress: Any = None, **kwargs: Any) -> Any:
        seen.append(progress.state.status())
        assert on_progress is not None
        on_progress(3, 6)
        seen.append(progress.state.status())
        return mock.Mock(score=None, score_name=None, task="gsm8k", verdict="invalid")

    monkeypatch.setattr(eval_results, "run_eval", fake_run_eval)
    monkeypatch.setattr(lifecycle, "summarise_job", lambda *a, **k: None)
    out = io.StringIO()
    progress = PlainProgress(out, interval_s=3600)
    with use_progress(progress):
        progress.sweep(1)
        progress.job_started("a", 16)
        progress.phase("launching")  # what a server's launch says (`_Server.ensure`)
        job = _a_job()
        lifecycle.eval_job(job, "http://127.0.0.1:1", tmp_path, spec=LaunchSpec(engine="sim", argv=("sim",), port=1),
                           source="simulated", settings=lifecycle.LifecycleSettings(), provenance={})
    assert seen[0].startswith("job 1/1 conc 16 · evaluating · 0s so far"), seen
    assert seen[1].startswith("job 1/1 conc 16 · evaluating · 3/6 answers · "), seen
    assert out.getvalue().splitlines()[-1][11:].startswith("job 1/1 conc 16 · evaluating · 0s so far")  # at once


def test_a_workers_report_carries_its_evals_answers(tmp_path: Path) -> None:
    """A job run elsewhere (a Slurm worker's) shows its eval's answers as a job run here does."""
    path = tmp_path / "progress.json"
    worker = ReportingProgress(path)
    worker.job_started("j", 4)
    worker.phase("evaluating")
    worker.evaluated(progress_mod.EvalCount(answered=12, of=50))
    worker.write()
    report = read_report(path)
    assert report is not None
    driver = SweepProgress()
    driver.sweep(1)
    driver.job_started("j", 4, lane="42")
    driver.reported(report.jobs[0], fresh=True)
    assert driver.state.status().startswith("job 1/1 conc 4 · evaluating · 12/50 answers · ")
