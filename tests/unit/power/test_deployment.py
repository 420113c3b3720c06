"""A disaggregated deployment's power: every node's samples merged into the job's file and integrated once over all
GPUs of all roles (InferenceX's worked vector split across two nodes), each role's share, and a node that left no
samples making the job's power invalid with the node named."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from llmsweep.power import deployment
from llmsweep.power.backends import Backend, BackendContext
from llmsweep.power.deployment import NodeFile, NodePowerFiles, SampledWorker
from llmsweep.power.integrate import WorkDone, power_block
from llmsweep.power.sampler import PowerSampler
from llmsweep.power.samples import (
    GPU_METRICS_FILE,
    GpuSample,
    ReadFailure,
    TelemetryHeader,
    read_gpu_metrics,
    write_gpu_metrics,
)

T0 = 1_800_000_000.0
OFFSETS = (-1.0, 1.0, 3.5, 6.0, 8.5, 11.0)
WORK = WorkDone(start=T0, end=T0 + 10, duration_s=10.0, successful=10, input_tokens=1000, output_tokens=4000,
                total_tps_per_gpu=250.0, output_tps_per_gpu=200.0, gpus=2)


def node_file(folder: Path, w0: float, w1: float) -> Path:
    """One node's sampler file: one GPU whose power rises linearly from w0 to w1 over the 10 s window."""
    folder.mkdir(parents=True)
    path = folder / "gpu_metrics.jsonl"
    samples = [GpuSample(t=T0 + dt, gpu="0", power_w=w0 + (w1 - w0) * dt / 10) for dt in OFFSETS]
    write_gpu_metrics(path, TelemetryHeader(backend="nvml", gpu_ids=["0"]), samples)
    return path


def files(tmp_path: Path, *, decode_sampled: bool = True) -> NodePowerFiles:
    prefill = node_file(tmp_path / "n0", 100, 340)
    decode = node_file(tmp_path / "n1", 200, 440) if decode_sampled else tmp_path / "n1" / "gpu_metrics.jsonl"
    return NodePowerFiles([(SampledWorker("n0", "prefill", 1), prefill), (SampledWorker("n1", "decode", 1), decode)],
                          role_gpus={"prefill": 1, "decode": 1}, require=False, max_gap_s=3.0, end_wait_s=0.1)


def test_every_nodes_gpus_integrate_into_one_block_with_each_roles_share(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    block = power_block(files(tmp_path).write_job(job, T0, expected_gpus=2), WORK)
    assert block["power_valid"] and block["observed_gpu_ids"] == ["n0/0", "n1/0"]
    assert block["energy_j"] == pytest.approx(5400)  # the spec's vector: 2200 + 3200 J over both nodes
    assert block["avg_power_w"] == pytest.approx(270) and block["joules_per_output_token"] == pytest.approx(5400 / 4000)
    prefill, decode = block["roles"]["prefill"], block["roles"]["decode"]
    assert prefill["energy_j"] == pytest.approx(2200) and decode["energy_j"] == pytest.approx(3200)
    assert prefill["avg_power_w"] == pytest.approx(220) and decode["avg_power_w"] == pytest.approx(320)
    assert prefill["joules_per_input_token"] == pytest.approx(2.2) and decode["joules_per_output_token"] == 0.8


def test_a_node_that_left_no_samples_makes_power_invalid_and_is_named(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    block = power_block(files(tmp_path, decode_sampled=False).write_job(job, T0, expected_gpus=2), WORK)
    assert not block["power_valid"]
    assert {"node_telemetry_missing", "expected_gpu_count_mismatch", "role_gpu_count_mismatch"} <= set(
        block["reasons"])
    assert block["missing"] == ["n1 (decode): no gpu_metrics.jsonl from the node"]
    assert "energy_j" not in block and block["roles"]["prefill"]["energy_j"] is None


def test_a_line_the_node_is_still_writing_is_not_a_bad_sample(tmp_path: Path) -> None:
    node = files(tmp_path)
    with (tmp_path / "n1" / "gpu_metrics.jsonl").open("a") as fh:
        fh.write('{"type": "sample", "t": 18000')  # half a line: the node's next flush completes it
    job = tmp_path / "job"
    job.mkdir()
    block = power_block(node.write_job(job, T0, expected_gpus=2), WORK)
    assert block["power_valid"] and block["reasons"] == []


def test_each_job_reads_what_the_nodes_appended_since_the_last(tmp_path: Path) -> None:
    node = files(tmp_path)
    first = tmp_path / "job1"
    first.mkdir()
    assert power_block(node.write_job(first, T0, expected_gpus=2), WORK)["power_valid"]
    for folder, watts in (("n0", 150.0), ("n1", 250.0)):  # the nodes keep sampling: a flat second window
        with (tmp_path / folder / "gpu_metrics.jsonl").open("a") as fh:
            fh.writelines(GpuSample(t=T0 + 20 + dt, gpu="0", power_w=watts).model_dump_json() + "\n"
                          for dt in OFFSETS)
    second = tmp_path / "job2"
    second.mkdir()
    later = WorkDone(start=T0 + 20, end=T0 + 30, duration_s=10.0, successful=10, input_tokens=1000,
                     output_tokens=4000, total_tps_per_gpu=250.0, output_tps_per_gpu=200.0, gpus=2)
    block = power_block(node.write_job(second, T0 + 20, expected_gpus=2), later)
    assert block["power_valid"] and block["energy_j"] == pytest.approx(4000)  # (150 + 250) W x 10 s
    assert block["roles"]["decode"]["avg_power_w"] == pytest.approx(250)


def test_a_node_file_is_read_a_block_at_a_time_keeping_what_a_job_needs(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The lifecycle reads a node sampler's file as it grows: whole lines only (one being written waits), across
    blocks, keeping the samples at or after the job's lead — a long eval's samples between two jobs are not taken in."""
    monkeypatch.setattr(deployment, "READ_BLOCK", 64)
    path = tmp_path / GPU_METRICS_FILE
    samples = [GpuSample(t=T0 + i, gpu="0", power_w=100.0 + i) for i in range(40)]
    write_gpu_metrics(path, TelemetryHeader(backend="nvml"), samples)
    with path.open("a") as fh:
        fh.write('{"type":"sample","t":1800000040.0,"gpu":"0","power_w":1')
    node = NodeFile(path)
    assert node.read(keep_from=T0 + 30)
    assert node.header is not None and node.samples == samples[30:]
    with path.open("a") as fh:
        fh.write('40.0}\n')
    assert node.read(keep_from=T0 + 30)
    assert [s.t for s in node.samples] == [T0 + i for i in range(30, 41)] and node.samples[-1].power_w == 140.0


class FlakyNode(Backend):
    """A node's backend: one GPU at 300 W, its reads failing while `down`."""

    kind = "nvml"

    def __init__(self, clock: list[float]) -> None:
        super().__init__(BackendContext())
        self.clock, self.down = clock, False

    def read(self) -> list[GpuSample]:
        if self.down:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return [GpuSample(t=self.clock[0], gpu="0", power_w=300.0)]


def test_a_nodes_failed_reads_within_the_jobs_window_are_counted_and_named(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Each node samples in its own process (`execute.node_power`) and its file says every read of its backend that
    failed: the job's power block counts those within the job's window (`read_failures`) and names the node of the
    last (`read_error`), as one server's sampler does — a multi-node job's block said nothing of them, so its
    `read_failures` (None: none failed) was a label its nodes never earned. A failure before the job is not its;
    the file's failure lines are read over by the job's integration, never a damaged line."""
    clock = [T0 - 20.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    backends = {label: FlakyNode(clock) for label in ("n0", "n1")}
    samplers = {label: PowerSampler(b, interval_s=0.5, header=TelemetryHeader(backend="nvml", interval_s=0.5,
                                                                              gpu_ids=["0"]),
                                    log_path=(tmp_path / label).joinpath(GPU_METRICS_FILE))
                for label, b in backends.items()}
    for label in samplers:
        (tmp_path / label).mkdir()

    def tick(until: float, down: dict[str, tuple[float, float]]) -> None:
        while clock[0] < until:
            clock[0] += 0.5
            for label, sampler in samplers.items():
                t0, t1 = down.get(label, (0.0, 0.0))
                backends[label].down = t0 <= clock[0] < t1
                sampler.sample_now()
        for sampler in samplers.values():
            sampler.flush()

    tick(T0 - 5, {"n1": (T0 - 10, T0 - 8)})  # 4 failures of n1 before the job: not the job's
    tick(T0 + 11, {"n1": (T0 + 3, T0 + 4.5)})  # 3 in the job's window: a 1.5-s hole, within the gap allowed
    nodes = NodePowerFiles([(SampledWorker(label, role, 1), tmp_path / label / GPU_METRICS_FILE)
                            for label, role in (("n0", "prefill"), ("n1", "decode"))],
                           role_gpus={"prefill": 1, "decode": 1}, require=False, max_gap_s=3.0, end_wait_s=0.1)
    clock[0] = T0 + 10.5  # the job ends: samples of both nodes bracket it
    job = tmp_path / "job"
    job.mkdir()
    path = nodes.write_job(job, T0, expected_gpus=2)
    header, _samples, problems = read_gpu_metrics(path)
    assert header is not None and problems == []
    block = power_block(path, WORK)
    assert block["power_valid"], block["reasons"]  # a gap within max_gap_s: valid, and said
    assert block["read_failures"] == 3
    assert block["read_error"] == "n1 (decode): nvml: NVML_ERROR_GPU_IS_LOST"
    # the node's own file holds every failure, and reads clean
    node_header, node_samples, node_problems = read_gpu_metrics(tmp_path / "n1" / GPU_METRICS_FILE)
    assert node_header is not None and node_problems == [] and node_samples
    assert (tmp_path / "n1" / GPU_METRICS_FILE).read_text().count('"type":"read_error"') == 4 + 3
    # a job of clean reads after it says none failed
    tick(T0 + 30, {})
    clock[0] = T0 + 29
    later = tmp_path / "job2"
    later.mkdir()
    work = WorkDone(start=T0 + 18, end=T0 + 28, duration_s=10.0, successful=10, input_tokens=1000,
                    output_tokens=4000, total_tps_per_gpu=250.0, output_tps_per_gpu=200.0, gpus=2)
    clean = power_block(nodes.write_job(later, T0 + 18, expected_gpus=2), work)
    assert clean["power_valid"] and "read_failures" not in clean


def test_a_node_that_failed_every_read_is_named_with_what_its_backend_said(tmp_path: Path) -> None:
    folder = tmp_path / "n1"
    folder.mkdir()
    path = folder / GPU_METRICS_FILE
    path.write_text(TelemetryHeader(backend="nvml", gpu_ids=["0"]).model_dump_json() + "\n" + "".join(
        ReadFailure(t=T0 + dt, error="nvml: NVML_ERROR_GPU_IS_LOST").model_dump_json() + "\n" for dt in OFFSETS))
    node = NodeFile(path)
    assert node.read()
    parts = [deployment.WorkerSamples(SampledWorker("n1", "decode", 1), node.header, node.samples,
                                      failures=node.failures)]
    header, samples = deployment.merge(parts, since=T0, until=T0 + 10, expected_gpus=1, role_gpus={"decode": 1},
                                       require=False, max_gap_s=3.0)
    assert samples == [] and header.read_failures == 4  # those from the window's start to its end
    assert header.missing == ["n1 (decode): no sample could be read: nvml: NVML_ERROR_GPU_IS_LOST"]

