"""The GPUs a job records as its hardware are the GPUs its server was given, read as the power sampler reads them
(`llmsweep.visible`, the one reader of `*_VISIBLE_DEVICES`): a UUID prefix or a MIG UUID names its GPU, and an
entry that names no GPU of the host is a reason recorded with the job's hardware, never a shorter list of names."""

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
from llmsweep.errors import ConfigError
from llmsweep.execute.handle import ServerHandle
from llmsweep.execute.lifecycle import ServerGroup, _provenance, observe_runtime, visible_rows
from llmsweep.plan import Job
from llmsweep.power.backends import visible_gpus

UUIDS = ["GPU-0a1b2c3d-0000-4000-8000-000000000000", "GPU-1a1b2c3d-1111-4111-8111-111111111111",
         "GPU-2a1b2c3d-2222-4222-8222-222222222222", "GPU-3a1b2c3d-3333-4333-8333-333333333333"]
MIG_ON_2 = "MIG-9f9e9d9c-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
NAMES = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H200"]
# `nvidia-smi --query-gpu=index,uuid,name,driver_version --format=csv,noheader`, as the driver prints it
QUERY = "".join(f"{i}, {u}, {n}, 570.124.06\n" for i, (u, n) in enumerate(zip(UUIDS, NAMES, strict=True)))
LISTING = "".join(f"GPU {i}: {n} (UUID: {u})\n" + (f"  MIG 3g.71gb     Device  0: (UUID: {MIG_ON_2})\n" if i == 2
                                                    else "") for i, (u, n) in enumerate(zip(UUIDS, NAMES, strict=True)))
TYPO = "GPU-2a1b2c3e-2222-4222-8222-222222222222"


@pytest.fixture
def nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """nvidia-smi on a host with one MIG instance on GPU 2: `-L` lists it, `--query-gpu` the GPUs only."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "listing.txt").write_text(LISTING)
    (bin_dir / "query.csv").write_text(QUERY)
    script = bin_dir / "nvidia-smi"
    script.write_text(f'#!/usr/bin/env bash\nif [[ "$1" == "-L" ]]; then cat {bin_dir}/listing.txt; '
                      f"else cat {bin_dir}/query.csv; fi\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-smi answers, not NVML
    return bin_dir


def _names(visible: str) -> list[str]:
    return [r[2] for r in visible_rows(QUERY, {"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": visible})]


def test_a_uuid_prefix_or_mig_uuid_names_its_gpu(nvidia_smi: Path) -> None:
    assert [r[0] for r in visible_rows(QUERY, {"CUDA_VISIBLE_DEVICES": "GPU-3a1b,GPU-0A1B2C3D"})] == ["3", "0"]
    assert _names(MIG_ON_2) == ["NVIDIA H200"]  # not in the query's CSV: `nvidia-smi -L` lists it
    assert _names(f"1,{UUIDS[2]}") == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]


@pytest.mark.parametrize("visible", [TYPO, f"0,{TYPO}", "GPU-", "0,7"])
def test_an_entry_that_names_no_gpu_is_an_error_not_a_shorter_list(nvidia_smi: Path, visible: str) -> None:
    with pytest.raises(ConfigError, match="cannot be named") as err:
        _names(visible)
    assert (TYPO if TYPO in visible else visible.split(",")[-1]) in str(err.value)


@pytest.mark.parametrize("visible", ["3,1", "GPU-2a1b", MIG_ON_2, f"{UUIDS[1]},0", TYPO, "HIP_ONLY"])
def test_the_recorded_gpus_are_the_ones_the_power_sampler_reads(nvidia_smi: Path, visible: str) -> None:
    env = {"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": visible}
    if visible == "HIP_ONLY":  # CUDA reads only its own variable: every GPU, for both
        env = {"PATH": os.environ["PATH"], "HIP_VISIBLE_DEVICES": "1", "ROCR_VISIBLE_DEVICES": "0"}
    sampled = visible_gpus(env)
    try:
        recorded: tuple[int, ...] | None = tuple(int(r[0]) for r in visible_rows(QUERY, env))
    except ConfigError:
        recorded = ()
    assert recorded == (sampled if sampled is not None else (0, 1, 2, 3))


def test_the_job_records_why_its_gpus_are_not_named(nvidia_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("llmsweep.execute.ready.server_version", lambda url, timeout_s=1.0: {"version": "0.26.0"})
    spec = LaunchSpec(engine="vllm", argv=("vllm", "serve", "m"), port=8000, gpus=2,
                      env={"CUDA_VISIBLE_DEVICES": f"{UUIDS[3]},{TYPO}"})
    handle = cast(ServerHandle, types.SimpleNamespace(base_url="http://127.0.0.1:8000", gpus_in_bus_order=False))
    seen = observe_runtime(handle, spec)
    assert seen["gpu_names"] is None and seen["driver_version"] == "570.124.06"
    assert TYPO in seen["gpu_names_problem"]

    folder = next((Path(__file__).resolve().parents[3] / "examples" / "results").glob("*/*/jobs/*"))
    job = Job.model_validate(json.loads((folder / "job.json").read_text()))
    hardware = _provenance(job, spec, ServerGroup(id="g", spec=spec, jobs=[job]), seen)["hardware"]
    assert hardware["gpu_names"] is None and TYPO in hardware["gpu_names_problem"]

    good = observe_runtime(handle, spec.model_copy(update={"env": {"CUDA_VISIBLE_DEVICES": UUIDS[3]}}))
    assert good["gpu_names"] == ["NVIDIA H200"] and "gpu_names_problem" not in good
    assert "gpu_names_problem" not in _provenance(job, spec, ServerGroup(id="g", spec=spec, jobs=[job]),
                                                  good)["hardware"]


@pytest.mark.parametrize("visible", ["0,7", TYPO, f"1,{TYPO}", "-1", "2,-1"])
def test_the_preflight_refuses_a_selection_for_the_reason_the_job_would_record(nvidia_smi: Path, visible: str) -> None:
    """The launch preflight and the hardware a job records read one selection of the GPUs the host's tool lists
    (`llmsweep.visible.select_listed`): what the preflight refuses a server for is the reason a job records its GPUs
    unnamed for, word for word (an index the host lacks was two sentences, one per reader)."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.preflight import check_gpus

    spec = LaunchSpec(engine="vllm", argv=("vllm", "serve", "m"), port=8000, gpus=1,
                      env={"CUDA_VISIBLE_DEVICES": visible})
    with pytest.raises(LaunchError) as refused:
        check_gpus(spec)
    try:
        visible_rows(QUERY, {"PATH": os.environ["PATH"], **spec.env})
    except ConfigError as exc:
        # (less what listed the UUIDs: `nvidia-smi --query-gpu` names the GPUs, `-L` their MIG instances too)
        recorded = exc.message.removeprefix("the server's GPUs cannot be named: ").split(" (listed by")[0]
    assert recorded in refused.value.message and visible in recorded


@pytest.mark.parametrize("visible", ["3,1", "GPU-2a1b", MIG_ON_2, f"{UUIDS[1]},0", None])
def test_the_preflight_checks_the_gpus_the_job_records(nvidia_smi: Path, visible: str | None) -> None:
    from llmsweep.execute.preflight import HostGpuQueries

    env = {"PATH": os.environ["PATH"], **({"CUDA_VISIBLE_DEVICES": visible} if visible else {})}
    host = HostGpuQueries().server(env, {})
    assert host is not None
    assert host.selected == tuple(int(r[0]) for r in visible_rows(QUERY, env))


def test_a_selection_past_the_hosts_gpus_says_one_gpu_and_several_gpus() -> None:
    """The refusal counts the host's GPUs and names the missing ones as a person says them (`llmsweep.words`):
    `names GPU 3, but nvidia-smi lists 1 GPU on this host (0)`, `names GPUs 2, 3, but … lists 2 GPUs …`."""
    from llmsweep.visible import Listed, select_listed

    one = select_listed(Listed("nvidia-smi", (0,), None), {"CUDA_VISIBLE_DEVICES": "0,3"})
    assert one.gpus == () and (one.problem or "").startswith(
        "CUDA_VISIBLE_DEVICES=0,3 names GPU 3, but nvidia-smi lists 1 GPU on this host (0); ")
    two = select_listed(Listed("nvidia-smi", (0, 1), None), {"CUDA_VISIBLE_DEVICES": "2,3"})
    assert two.gpus == () and (two.problem or "").startswith(
        "CUDA_VISIBLE_DEVICES=2,3 names GPUs 2, 3, but nvidia-smi lists 2 GPUs on this host (0-1); ")
