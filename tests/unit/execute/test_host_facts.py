"""A result says which host and GPU state it ran on: the server's host CPU (model, logical and usable CPUs) and its
1-minute load average at each job's start, and each of the server's GPUs' enforced power limit and SM clocks, read
by `observe_runtime` beside the GPUs' names (nvidia-smi, faked on PATH as the GPU-name tests fake it). Two H100
machines of one SKU and driver ran one recipe 30 % apart (2026-12-05), and nothing in their results told the hosts
apart. Recorded only where true: not for a server reached at another node's address, not for the simulator (it ran
on no GPU, and the machine simulating it is not the engine's host); a value the driver does not give is absent."""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from pathlib import Path
from typing import cast

import pytest

from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute import lifecycle
from llmsweep.execute.handle import ServerHandle
from llmsweep.execute.lifecycle import ServerGroup, _provenance, hardware_provenance, observe_runtime, on_this_host
from llmsweep.host import cpu_model
from llmsweep.metrics.model import Provenance
from llmsweep.plan import Job

UUIDS = ["GPU-0a1b2c3d-0000-4000-8000-000000000000", "GPU-1a1b2c3d-1111-4111-8111-111111111111"]
# `nvidia-smi --query-gpu=index,uuid,name,driver_version,enforced.power.limit,clocks.max.sm,clocks.sm
# --format=csv,noheader`, as the driver prints it (units after the numbers; a capped GPU 1)
QUERY = (f"0, {UUIDS[0]}, NVIDIA H100 80GB HBM3, 580.159.04, 700.00 W, 1980 MHz, 345 MHz\n"
         f"1, {UUIDS[1]}, NVIDIA H100 80GB HBM3, 580.159.04, 500.00 W, 1980 MHz, [N/A]\n")
XEON = "Intel(R) Xeon(R) Platinum 8480+"
REPO = Path(__file__).resolve().parents[3]


def _fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """nvidia-smi on PATH running `body` (bash) with the query CSV at $Q; a log of its argv at $LOG."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "query.csv").write_text(QUERY)
    script = bin_dir / "nvidia-smi"
    script.write_text(f'#!/usr/bin/env bash\nQ={bin_dir}/query.csv\nLOG={bin_dir}/argv.log\necho "$@" >> $LOG\n'
                      + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-smi answers, not NVML
    return bin_dir


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host with two H100s, a Xeon CPU and a load average of 3.5."""
    monkeypatch.setattr("llmsweep.execute.ready.server_version", lambda url, timeout_s=1.0: {"version": "0.26.0"})
    monkeypatch.setattr(lifecycle, "cpu_model", lambda: XEON)
    monkeypatch.setattr(lifecycle, "load_average_1m", lambda: 3.5)
    return _fake_nvidia_smi(tmp_path, monkeypatch, "cat $Q\n")


def _handle(url: str = "http://127.0.0.1:8000", *, in_bus_order: bool = False) -> ServerHandle:
    return cast(ServerHandle, types.SimpleNamespace(base_url=url, gpus_in_bus_order=in_bus_order))


def _spec(engine: str = "vllm", **update: object) -> LaunchSpec:
    return LaunchSpec(engine=engine, argv=("vllm", "serve", "m"), port=8000, gpus=2).model_copy(update=update)


def _job() -> Job:
    folder = next((REPO / "examples" / "results").glob("*/*/jobs/*"))
    return Job.model_validate(json.loads((folder / "job.json").read_text()))


def test_the_servers_gpus_power_limits_and_sm_clocks_are_read_beside_their_names(host: Path) -> None:
    seen = observe_runtime(_handle(), _spec(env={"CUDA_VISIBLE_DEVICES": "1,0"}))
    assert seen["gpu_names"] == ["NVIDIA H100 80GB HBM3"] * 2 and seen["driver_version"] == "580.159.04"
    # in the server's order, as its names are; an [N/A] is absent, never a guess
    assert [g.model_dump() for g in seen["gpu_state"]] == [
        {"index": 1, "power_limit_w": 500.0, "sm_clock_max_mhz": 1980.0, "sm_clock_mhz": None},
        {"index": 0, "power_limit_w": 700.0, "sm_clock_max_mhz": 1980.0, "sm_clock_mhz": 345.0}]
    asked = (host / "argv.log").read_text().splitlines()
    assert asked == ["--query-gpu=index,uuid,name,driver_version,enforced.power.limit,clocks.max.sm,clocks.sm "
                     "--format=csv,noheader"]  # one query, as before: names and state together

    hardware = hardware_provenance(_job(), seen)
    assert hardware["gpu_state"][0] == {"index": 1, "power_limit_w": 500.0, "sm_clock_max_mhz": 1980.0}
    assert hardware["host"] == {"cpu_model": XEON, "logical_cpus": os.cpu_count(),
                                "usable_cpus": len(os.sched_getaffinity(0)), "load_avg_1m": 3.5}
    typed = Provenance.model_validate({"hardware": hardware}).hardware
    assert not isinstance(typed, str) and typed is not None
    assert typed.power_limits_w == (500.0, 700.0) and typed.host is not None and typed.host.cpu_model == XEON


def test_a_containers_gpus_are_recorded_in_the_order_its_runtime_numbers_them(host: Path) -> None:
    """`docker run --gpus "device=1,0"` mounts both GPUs, and CUDA in the container numbers them in bus order: its
    device 0 is the host's GPU 0. The record said GPU 1 first (the selection's order, right for a process on the
    host, where CUDA_VISIBLE_DEVICES=1,0 makes GPU 1 device 0)."""
    spec = _spec(env={"CUDA_VISIBLE_DEVICES": "1,0"})
    in_container = observe_runtime(_handle(in_bus_order=True), spec)
    assert [g.index for g in in_container["gpu_state"]] == [0, 1]
    by_uuid = observe_runtime(_handle(in_bus_order=True), _spec(env={"CUDA_VISIBLE_DEVICES": f"{UUIDS[1]},{UUIDS[0]}"}))
    assert [g.index for g in by_uuid["gpu_state"]] == [0, 1]
    on_host = observe_runtime(_handle(), spec)
    assert [g.index for g in on_host["gpu_state"]] == [1, 0]


def test_the_load_average_is_read_at_each_jobs_start(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec()
    seen = observe_runtime(_handle(), spec)  # once per launch
    group = ServerGroup(id="g", spec=spec, jobs=[_job()])
    loads = iter([0.25, 7.75])
    monkeypatch.setattr(lifecycle, "load_average_1m", lambda: next(loads))
    first = _provenance(_job(), spec, group, seen)["hardware"]["host"]
    second = _provenance(_job(), spec, group, seen)["hardware"]["host"]
    assert (first["load_avg_1m"], second["load_avg_1m"]) == (0.25, 7.75)
    assert first["cpu_model"] == second["cpu_model"] == XEON


def test_a_driver_that_refuses_the_state_fields_still_names_the_gpus(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("llmsweep.execute.ready.server_version", lambda url, timeout_s=1.0: {"version": "0.26.0"})
    _fake_nvidia_smi(tmp_path, monkeypatch, 'if [[ "$1" == *power* ]]; then echo \'Field "enforced.power.limit" is '
                     'not a valid field to query.\' >&2; exit 2; fi\ncut -d, -f1-4 $Q\n')
    seen = observe_runtime(_handle(), _spec())
    assert seen["gpu_names"] == ["NVIDIA H100 80GB HBM3"] * 2 and seen["driver_version"] == "580.159.04"
    assert seen.get("gpu_state") is None
    assert "gpu_state" not in hardware_provenance(_job(), seen)


@pytest.mark.parametrize("url, here", [("http://127.0.0.1:8000", True), ("http://localhost:8000", True),
                                       ("http://[::1]:8000", True), ("http://10.0.0.7:8000", False),
                                       ("http://node-3:8000", False)])
def test_a_server_is_on_this_host_when_it_answers_on_a_loopback_address(url: str, here: bool) -> None:
    assert on_this_host(_handle(url)) is here


def test_a_server_on_another_node_gets_neither_this_hosts_cpu_nor_gpu_state(host: Path) -> None:
    """A role of a multi-node Slurm job, reached at its node's address: this host's CPU and GPUs are not its."""
    seen = observe_runtime(_handle("http://10.0.0.7:8000"), _spec())
    assert seen["gpu_names"] == ["NVIDIA H100 80GB HBM3"] * 2  # as before
    assert "host" not in seen and "gpu_state" not in seen
    hardware = hardware_provenance(_job(), seen)
    assert "host" not in hardware and "gpu_state" not in hardware


def test_a_simulated_server_gets_neither(host: Path) -> None:
    """The simulator ran on no GPU, and the machine that simulates it is not the engine's host."""
    seen = observe_runtime(_handle(), _spec(engine="sim"))
    assert "host" not in seen and "gpu_state" not in seen
    hardware = hardware_provenance(_job(), seen)
    assert "host" not in hardware and "gpu_state" not in hardware


@pytest.mark.parametrize("text, model", [
    ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)  Platinum 8480+\n"
     "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n", XEON),
    ("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n", "AMD EPYC 9654 96-Core Processor"),
    # Arm (Grace): parts by number, no model name: absent rather than guessed
    ("processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n", None),
])
def test_the_cpu_model_is_the_model_name_of_proc_cpuinfo(tmp_path: Path, text: str, model: str | None) -> None:
    (tmp_path / "cpuinfo").write_text(text)
    assert cpu_model(tmp_path / "cpuinfo") == model
    assert cpu_model(tmp_path / "missing") is None


def test_results_show_says_the_host_and_the_gpus_state_as_read(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines `llmsweep results show` prints: what was read, in words; GPUs that differ are said apart."""
    seen = observe_runtime(_handle(), _spec())
    typed = Provenance.model_validate({"hardware": hardware_provenance(_job(), seen)}).hardware
    assert not isinstance(typed, str) and typed is not None and typed.host is not None
    assert typed.gpu_state_text() == ("1x 700 W limit, SM max 1980 MHz, SM 345 MHz when ready; "
                                      "1x 500 W limit, SM max 1980 MHz")
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0))
    assert typed.host.text() == (f"{XEON}, {cpus} logical CPUs" + (f" ({usable} usable)" if usable != cpus else "")
                                 + ", load 3.50 at the job's start")

    monkeypatch.setattr(lifecycle, "cpu_model", lambda: None)  # an Arm host: no model name to read
    unnamed = hardware_provenance(_job(), observe_runtime(_handle(), _spec()))["host"]
    assert "cpu_model" not in unnamed  # left out, not written as null
    again = Provenance.model_validate({"hardware": {"host": unnamed}}).hardware
    assert not isinstance(again, str) and again is not None and again.host is not None
    assert again.host.text().startswith("CPU model unknown, ")
