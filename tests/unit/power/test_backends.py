"""Sampler backends read what the tools print (InferenceX's nvidia-smi fields, amd-smi's columns, the simulator's
NVML-style document); the sampler brackets a job's window and keeps sampling through a sensor hiccup."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from llmsweep.power.backends import (
    BACKENDS,
    AmdSmiBackend,
    Backend,
    BackendContext,
    NvidiaSmiBackend,
    parse_amd_energy,
    parse_amd_smi,
    parse_nvidia_smi,
    parse_sim_power,
    visible_gpus,
)
from llmsweep.power.integrate import WorkDone, power_block
from llmsweep.power.sampler import NoSampler, PowerSampler, PowerSettings, start_sampler
from llmsweep.power.samples import GPU_METRICS_FILE, GpuSample, TelemetryHeader, read_gpu_metrics


def test_backends_are_a_registry_keyed_by_kind() -> None:
    assert {"nvml", "amd-smi", "nvidia-smi", "sim"} <= set(BACKENDS)
    assert BACKENDS["sim"].source == "simulated"
    assert all(BACKENDS[k].source == "measured" for k in ("nvml", "amd-smi", "nvidia-smi"))


def test_nvidia_smi_csv_rows() -> None:
    text = "2026/12/01 11:00:00.123, 0, 312.45, 41, 1980, 2619, 87, 55\n2026/12/01 11:00:00.123, 1, [N/A], 40, 1980, " \
           "2619, 0, 0\n2026/12/01 11:00:00.1"  # a truncated last line is dropped
    rows = parse_nvidia_smi(text, 5.0)
    assert [r.gpu for r in rows] == ["0", "1"]
    assert rows[0].power_w == pytest.approx(312.45) and rows[0].sm_clock_mhz == 1980 and rows[0].util_gpu == 87
    assert rows[1].power_w is None  # [N/A]
    assert rows[0].t == 5.0


def test_nvidia_smi_line_as_the_lent_h200_printed_it() -> None:
    """Read on the lent H200 (driver 580) with InferenceX's fields and `--format=csv,noheader,nounits`."""
    (row,) = parse_nvidia_smi("2026/12/01 11:40:54.384, 0, 125.24, 41, 1980, 3201, 3, 0\n", 9.0)
    assert (row.gpu, row.power_w, row.temperature_c, row.sm_clock_mhz, row.mem_clock_mhz, row.util_gpu,
            row.util_mem) == ("0", 125.24, 41, 1980, 3201, 3, 0)


def test_amd_smi_columns_found_by_header_rules() -> None:
    text = ("gpu,power_limit,socket_power,gfx_voltage,hotspot,mem,gfx_clk,mem_clk,gfx_activity,umc_activity\n"
            "0,750 W,512 W,900,61 C,55 C,2100 MHz,1300 MHz,93 %,41 %\n"
            "1,750 W,498 W,900,60 C,54 C,2100 MHz,1300 MHz,90 %,40 %\n")
    energy = parse_amd_energy("gpu,total_energy_consumption\n0,123456.5 J\n1,223456.25 J\n")
    rows = parse_amd_smi(text, 7.0, energy)
    assert [r.power_w for r in rows] == [512, 498]  # socket_power, not power_limit
    assert rows[0].temperature_c == 61 and rows[0].sm_clock_mhz == 2100 and rows[0].util_gpu == 93
    assert rows[1].energy_j == pytest.approx(223456.25)


AMD_GROUPS_WARNING = ("WARNING: User is missing the following required groups: render, video. Please add user to "
                      "these groups.\n")
"""What amd-smi prints on stdout, before its table, for a user outside the render and video groups (amdsmi_helpers'
`check_required_groups`)."""


def test_amd_smi_table_after_its_own_warning_is_read() -> None:
    """amd-smi's group warning comes first on stdout, before the CSV header: the header is the line naming the GPU
    column, not the first line (taken as the header, it left no GPU column: no sample, and `auto` went past amd-smi
    as 'reported no GPU power')."""
    energy = parse_amd_energy(AMD_GROUPS_WARNING + "gpu,total_energy_consumption\n0,123456.5 J\n1,223456.25 J\n")
    assert energy == {"0": 123456.5, "1": 223456.25}
    rows = parse_amd_smi(AMD_GROUPS_WARNING + "gpu,socket_power,hotspot,gfx_activity\n0,512 W,61 C,93 %\n"
                         "gpu,socket_power,hotspot,gfx_activity\n1,498 W,60 C,90 %\n", 7.0, energy)
    assert [(r.gpu, r.power_w, r.temperature_c, r.util_gpu, r.energy_j) for r in rows] == [
        ("0", 512, 61, 93, 123456.5), ("1", 498, 60, 90, 223456.25)]
    assert parse_amd_smi(AMD_GROUPS_WARNING, 7.0) == [] and parse_amd_energy(AMD_GROUPS_WARNING) == {}


def test_sim_document_is_read_in_nvml_units() -> None:
    doc = {"gpus": [{"index": 0, "power_usage_mw": 350500, "total_energy_consumption_mj": 1_234_000,
                     "clock_sm_mhz": 1980, "clock_mem_mhz": 2619, "temperature_c": 50.5, "utilization_gpu": 97,
                     "utilization_memory": 60}]}
    (s,) = parse_sim_power(doc, 1.0)
    assert s.power_w == pytest.approx(350.5) and s.energy_j == pytest.approx(1234.0) and s.gpu == "0"


def test_visible_devices_select_gpus(tmp_path: Path) -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == (2, 3)
    assert visible_gpus({"HIP_VISIBLE_DEVICES": "1", "PATH": str(tmp_path)}) == (1,)  # not an NVIDIA host
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-uuid"}) == ()  # no GPU of this host: none, never all
    assert visible_gpus({}) is None


class _Fake(Backend):
    kind = "fake"

    def __init__(self, fail_every: int = 0) -> None:
        super().__init__(BackendContext())
        self.n, self.fail_every = 0, fail_every

    def read(self) -> list[GpuSample]:
        self.n += 1
        if self.fail_every and self.n % self.fail_every == 0:
            raise OSError("sensor hiccup")
        return [GpuSample(t=time.time(), gpu="0", power_w=100.0 + self.n)]


def test_sampler_brackets_the_job_window_and_survives_failed_reads(tmp_path: Path) -> None:
    header = TelemetryHeader(backend="fake", interval_s=0.02)
    sampler = PowerSampler(_Fake(fail_every=3), interval_s=0.02, header=header,
                           log_path=tmp_path / "server.jsonl").start()
    began = time.time()
    time.sleep(0.15)
    ended = time.time()
    path = sampler.write_job(tmp_path, began, expected_gpus=1)
    sampler.stop()
    head, samples, problems = read_gpu_metrics(path)
    assert path.name == GPU_METRICS_FILE and not problems
    assert head is not None and head.expected_gpus == 1 and head.backend == "fake"
    times = [s.t for s in samples]
    assert min(times) <= began and max(times) >= ended  # bracketed on both sides
    assert sampler.errors > 0 and len(samples) >= 5
    assert (tmp_path / "server.jsonl").is_file()


class _Silent(Backend):
    """A backend that answers with no rows (a tool on PATH that cannot report power), after `delivers` good reads."""

    kind = "silent"

    def __init__(self, delivers: int = 0) -> None:
        super().__init__(BackendContext())
        self.reads, self.delivers = 0, delivers

    def read(self) -> list[GpuSample]:
        self.reads += 1
        return [GpuSample(t=time.time(), gpu="0", power_w=100.0)] if self.reads <= self.delivers else []


def test_a_job_end_read_is_retried_only_while_the_backend_delivers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read that brackets a job's window is retried (twice, after a pause) when it fails on a backend that has
    delivered; a backend that never delivered in this launch has bracketed no start either, so each job pays one
    try rather than the pauses (every job of a rehearsal whose nvidia-smi cannot report power paid 0.6 s)."""
    pauses: list[float] = []
    monkeypatch.setattr(time, "sleep", pauses.append)
    header = TelemetryHeader(backend="silent", interval_s=1.0)
    never = _Silent()
    head, samples, _ = read_gpu_metrics(PowerSampler(never, interval_s=1.0, header=header).write_job(
        tmp_path, time.time(), expected_gpus=1))
    assert (never.reads, pauses, samples) == (1, [], [])
    once = _Silent(delivers=1)
    sampler = PowerSampler(once, interval_s=1.0, header=header)
    sampler.sample_now()
    began = time.time()
    head, samples, _ = read_gpu_metrics(sampler.write_job(tmp_path, began, expected_gpus=1))
    assert once.reads == 1 + 3 and pauses == [0.2, 0.2]  # no pause after the last try
    assert len(samples) == 1 and head is not None and head.backend == "silent"


def test_no_backend_and_power_required_still_writes_why(tmp_path: Path) -> None:
    settings = PowerSettings(backend="nvidia-smi", require=True)
    sampler = start_sampler(settings, engine="vllm", gpus=1, base_url=None, env={"PATH": str(tmp_path)})
    assert isinstance(sampler, NoSampler)
    head, samples, _ = read_gpu_metrics(sampler.write_job(tmp_path, time.time(), expected_gpus=1))
    assert head is not None and head.require and head.backend is None and "nvidia-smi" in (head.error or "")
    assert samples == []
    # Not required and nothing can sample: no samples, but the job's file (and so its power block) says why and how
    # to get power, rather than a job that silently has no power block.
    quiet = start_sampler(PowerSettings(backend="nvidia-smi"), engine="vllm", gpus=1, base_url=None,
                          env={"PATH": str(tmp_path)})
    assert isinstance(quiet, NoSampler)
    head, samples, _ = read_gpu_metrics(quiet.write_job(tmp_path, time.time(), expected_gpus=1))
    assert head is not None and not head.require and head.backend is None and samples == []
    assert head.source is None  # nothing sampled: the file claims no source (it had said `measured`)
    assert "nvidia-smi is not on PATH" in (head.error or "") and "--power-backend" in (head.error or "")
    # Off and not required: nothing sampled and nothing claimed (no file, no block).
    assert start_sampler(PowerSettings(backend="off"), engine="sim", gpus=1, base_url="x") is None
    # Off while required: the job cannot have the power it requires, and its file says why (it then fails).
    off = start_sampler(PowerSettings(backend="off", require=True), engine="sim", gpus=1, base_url="x")
    assert isinstance(off, NoSampler)
    head, _, _ = read_gpu_metrics(off.write_job(tmp_path, time.time(), expected_gpus=1))
    assert head is not None and head.require and "--power-backend off" in (head.error or "")


def test_amd_smi_power_is_stamped_when_it_was_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """amd-smi is read in two calls (the energy counter, then power); a slow first call must not date the power
    reading early: its stamp lies within the call that read it, so the window's energy is not shifted in time."""
    tool = tmp_path / "amd-smi"
    tool.write_text("#!/bin/sh\n"
                    'case "$*" in *-E*) sleep 0.6; printf "gpu,total_energy_consumption\\n0,1000.5\\n";;\n'
                    '  *) printf "gpu,socket_power,gfx_0_clk,mem_0_clk,hotspot\\n0,500,2100,1300,60\\n";; esac\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    before = time.time()
    (sample,) = AmdSmiBackend(BackendContext(gpu_indices=(0,))).read()
    after = time.time()
    assert sample.power_w == 500 and sample.energy_j == 1000.5
    assert before + 0.6 <= sample.t <= after, (sample.t - before, after - before)


def test_a_backend_whose_every_read_fails_says_why_in_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool that passed the probe and then fails every read (the GPU lost, the driver gone) leaves the job no
    sample: its power block says what the tool said (in the verdict's note too), not only `telemetry_file_empty`."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text("#!/bin/sh\necho 'Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.'\n"
                    "exit 15\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    header = TelemetryHeader(backend="nvidia-smi", interval_s=1.0, require=True)
    sampler = PowerSampler(NvidiaSmiBackend(BackendContext(gpu_indices=(0,))), interval_s=1.0, header=header).start()
    began = time.time()
    path = sampler.write_job(tmp_path, began, expected_gpus=1)
    sampler.stop()
    work = WorkDone(start=began, end=began + 1, duration_s=1.0, successful=1, input_tokens=10, output_tokens=10,
                    total_tps_per_gpu=20.0, output_tps_per_gpu=10.0, gpus=1)
    block = power_block(path, work)
    assert block["power_valid"] is False and block["backend"] == "nvidia-smi" and block["required"] is True
    assert "telemetry_file_empty" in block["reasons"]
    assert "nvidia-smi exited 15" in block["error"] and "GPU is lost" in block["error"], block.get("error")


def test_the_sim_backend_reads_the_simulator_directly_whatever_proxy_the_environment_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's `/power` is a server this run launched, on this host or a node of its allocation: with
    `http_proxy` set (a CI box, a cluster login node) and no `no_proxy` for it, `urlopen` sent every reading to the
    proxy, which cannot reach the server's loopback: no sample was read and a run's simulated power was invalid."""
    import asyncio

    from llmsweep.sim.engine import EngineConfig
    from llmsweep.sim.server import SimServer, start_server

    async def main() -> list[GpuSample]:
        server = SimServer(EngineConfig(model="llama-1b", hardware="h200", tp=2, timing="constant"))
        runner, port = await start_server(server, "127.0.0.1", 0)
        try:
            for var in ("no_proxy", "NO_PROXY"):
                monkeypatch.delenv(var, raising=False)
            monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there: a proxy that fails
            backend = BACKENDS["sim"](BackendContext(base_url=f"http://127.0.0.1:{port}", timeout_s=5.0))
            return await asyncio.to_thread(backend.read)
        finally:
            await runner.cleanup()

    samples = asyncio.run(main())
    assert [s.gpu for s in samples] == ["0", "1"] and all(s.power_w is not None and s.power_w > 0 for s in samples)


def test_an_amd_energy_counter_that_hangs_is_not_asked_again_by_the_server_s_sampler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """`amd-smi metric -E` that did not answer cost its whole timeout on every tick before the power call (a 1 s
    sampler read every 6 s): it is waited for once, warned of, and the power is still read each tick."""
    import logging

    asked = tmp_path / "asked.log"
    tool = tmp_path / "amd-smi"
    tool.write_text("#!/bin/sh\n"
                    f'echo "$*" >> {asked}\n'
                    'case "$*" in *-E*) exec sleep 30;;\n'
                    '  *) printf "gpu,socket_power,gfx_0_clk,mem_0_clk,hotspot\\n0,500,2100,1300,60\\n";; esac\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ.get('PATH', '')}")
    backend = AmdSmiBackend(BackendContext(gpu_indices=(0,), timeout_s=0.5))
    with caplog.at_level(logging.WARNING, logger="llmsweep.power.backends"):
        (first,) = backend.read()
        began = time.monotonic()
        (second,) = backend.read()
    assert time.monotonic() - began < 0.4  # no second wait on the counter
    assert first.power_w == second.power_w == 500 and first.energy_j is None
    assert [line.split()[1] for line in asked.read_text().splitlines()] == ["-E", "-p", "-p"]
    assert sum("-E" in line for line in asked.read_text().splitlines()) == 1
    said = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert len(said) == 1 and "not asked again for this server" in said[0]
