"""A server's power sampler over a long sweep: it holds one job's window in memory, not every sample of the server's
life; the server folder's file gets every reading as it goes (a kill keeps what was taken); each job's file is what
the samples bracketing its window make it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from llmsweep.metrics.model import PowerBlock
from llmsweep.metrics.summary import invalid_power_note
from llmsweep.power.backends import Backend, BackendContext
from llmsweep.power.integrate import WorkDone, power_block
from llmsweep.power.sampler import PowerSampler
from llmsweep.power.samples import GPU_METRICS_FILE, GpuSample, TelemetryHeader, read_gpu_metrics

T0 = 1_800_000_000.0
INTERVAL = 0.25
MAX_GAP = 3.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Fake(Backend):
    """Two GPUs read at the clock's time, each reading's power a figure of its count."""

    kind = "fake"

    def __init__(self, clock: Clock) -> None:
        super().__init__(BackendContext())
        self.clock, self.n = clock, 0

    def read(self) -> list[GpuSample]:
        self.n += 1
        return [GpuSample(t=self.clock(), gpu=str(g), power_w=200.0 + self.n % 50 + g) for g in range(2)]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """A virtual wall clock: the backend stamps its readings with it and the sampler compares them with it."""
    clock = Clock()
    monkeypatch.setattr(time, "time", clock)
    return clock


def _sampler(clock: Clock, log_path: Path) -> PowerSampler:
    header = TelemetryHeader(backend="fake", interval_s=INTERVAL, max_gap_s=MAX_GAP, gpu_ids=["0", "1"])
    return PowerSampler(Fake(clock), interval_s=INTERVAL, header=header, log_path=log_path)


def _tick(sampler: PowerSampler, clock: Clock, readings: int) -> None:
    """`readings` readings a sampling period apart, the server file appended to every two (as the writer does)."""
    for n in range(readings):
        clock.now += INTERVAL
        sampler.sample_now()
        if n % 2:
            sampler.flush()


def test_the_sampler_holds_one_window_whatever_the_servers_life(clock: Clock, tmp_path: Path) -> None:
    """A server serving a sweep for hours: the samples (and memory) the sampler holds stop growing with their count.
    Every sample of the launch was kept in a list until the server stopped (~1.2 KB each: 850 MB a day for 8 GPUs
    at 1 Hz); what a job's file can still need is a window's worth."""
    sampler = _sampler(clock, tmp_path / "server.jsonl")
    sampler.sample_now()
    _tick(sampler, clock, 400)  # a job's worth of idle first (the window bound settles)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _tick(sampler, clock, 20_000)  # 83 minutes at 4 Hz, no job running (an eval, a long wait)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    held = sampler.samples
    assert len(held) <= 2 * (2 * MAX_GAP / INTERVAL + 1), len(held)  # the next job's lead: 2 x max_gap before now
    assert grown < 200_000, grown  # 40 000 samples kept would be ~50 MB
    _, on_disk, problems = read_gpu_metrics(tmp_path / "server.jsonl")
    assert not problems and len(on_disk) >= 2 * 20_400  # the file has them all (the last flush may be pending)


def test_job_files_and_the_server_file_are_what_keeping_every_sample_made_them(clock: Clock, tmp_path: Path) -> None:
    """Jobs with idle time between them: each job's file holds every sample from 2 x max_gap before its start to the
    reading taken at its end, and the server file every reading in the order taken — as when all were in memory."""
    server = tmp_path / "server.jsonl"
    sampler = _sampler(clock, server)  # not started: the readings come from the test, not the thread
    sampler.sample_now()
    windows: list[tuple[Path, float]] = []
    for job in range(3):
        _tick(sampler, clock, 200)  # idle: an eval, the next job's set-up
        sampler.open_window()
        clock.now += 0.1  # the job takes its start after opening its window
        began = clock.now
        _tick(sampler, clock, 120)
        job_dir = tmp_path / f"job{job}"
        job_dir.mkdir()
        windows.append((sampler.write_job(job_dir, began, expected_gpus=2), began))
    _tick(sampler, clock, 50)
    sampler.stop()
    header, every, problems = read_gpu_metrics(server)
    assert not problems and header is not None and header.backend == "fake"
    readings = [s.t for s in every]
    assert readings == sorted(readings) and len(every) == 2 * (1 + 3 * (200 + 120 + 1) + 50)  # + each job's end read
    for path, began in windows:
        _, samples, _ = read_gpu_metrics(path)
        end = max(s.t for s in samples)
        assert samples == [s for s in every if began - 2 * MAX_GAP <= s.t <= end]
        assert min(s.t for s in samples) <= began - 2 * MAX_GAP + INTERVAL and end >= began + 120 * INTERVAL


KILLED = """
import sys, time
from pathlib import Path
from llmsweep.power.backends import Backend, BackendContext
from llmsweep.power.sampler import PowerSampler
from llmsweep.power.samples import GpuSample, TelemetryHeader

class Fake(Backend):
    kind = "fake"
    def read(self):
        return [GpuSample(t=time.time(), gpu=str(g), power_w=250.0) for g in range(8)]

header = TelemetryHeader(backend="fake", interval_s=0.05)
PowerSampler(Fake(BackendContext()), interval_s=0.05, header=header, log_path=Path(sys.argv[1])).start()
print("sampling", flush=True)
time.sleep(60)
"""


@pytest.mark.timeout(60)
def test_a_run_killed_mid_job_leaves_the_server_file_with_what_was_sampled(tmp_path: Path) -> None:
    """SIGKILL (an OOM kill, a node lost): the server folder's file was written only when the server stopped, so it
    was missing (or an earlier launch's); now it holds every reading up to the last half second, and reads clean."""
    server = tmp_path / GPU_METRICS_FILE
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(server)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "sampling"
        time.sleep(1.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    header, samples, problems = read_gpu_metrics(server)
    assert header is not None and header.backend == "fake" and not problems
    assert len(samples) >= 8 * 10 and {s.gpu for s in samples} == {str(g) for g in range(8)}


class Failing(Fake):
    """The fake backend, its reads failing while `down` (a driver reset, amd-smi timing out mid-job)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.down = False

    def read(self) -> list[GpuSample]:
        if self.down:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return super().read()


def test_a_backend_failing_mid_job_says_why_the_power_has_a_gap(clock: Clock, tmp_path: Path) -> None:
    """A backend that delivered, then failed for longer than the gap allowed: the job's power is invalid with
    `sampling_gap_exceeded`, and its file, power block and warning say how many reads failed and what the backend
    said — before, only the gap was recorded, and the cause was in a debug log nobody keeps. The next job, whose reads
    all succeed, says no failure."""
    header = TelemetryHeader(backend="fake", interval_s=INTERVAL, max_gap_s=MAX_GAP, gpu_ids=["0", "1"])
    backend = Failing(clock)
    sampler = PowerSampler(backend, interval_s=INTERVAL, header=header)
    sampler.sample_now()
    blocks = []
    for job, outage in enumerate((40, 0)):  # 10 s without a reading, then a clean job
        sampler.open_window()
        began = clock.now = clock.now + 0.1
        _tick(sampler, clock, 20)
        backend.down = bool(outage)
        _tick(sampler, clock, outage)
        backend.down = False
        _tick(sampler, clock, 20)
        job_dir = tmp_path / f"job{job}"
        job_dir.mkdir()
        path = sampler.write_job(job_dir, began, expected_gpus=2)
        work = WorkDone(start=began, end=clock.now, duration_s=clock.now - began, successful=5, input_tokens=100,
                        output_tokens=100, total_tps_per_gpu=1.0, output_tps_per_gpu=1.0, gpus=2)
        blocks.append(power_block(path, work))
    failed, clean = blocks
    assert not failed["power_valid"] and "sampling_gap_exceeded" in failed["reasons"]
    assert failed["read_failures"] == 40 and failed["read_error"] == "fake: NVML_ERROR_GPU_IS_LOST"
    assert "error" not in failed  # samples were taken: not "nothing could be sampled"
    assert clean["power_valid"] and "read_failures" not in clean
    summary_block = PowerBlock.model_validate(failed)
    assert summary_block.read_failures == 40
    assert invalid_power_note(failed).endswith(
        "(40 reads of the power backend failed during the job; last: fake: NVML_ERROR_GPU_IS_LOST)")
