"""`power.sampler.probe_power`: what probing a server's power backends finds on this host before the server starts,
per backend. On this CPU host none of the measured backends can sample (NVML without its library or GPUs, no
amd-smi, nvidia-smi or dcgmi on PATH): each probe says so, names what it found, and the fix."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from llmsweep.power.sampler import (
    AUTO_ORDER,
    MEASURED_CHOICES,
    NO_GPU_REASON,
    NoSampler,
    PowerSampler,
    PowerSettings,
    auto_order,
    probe_power,
    start_sampler,
)


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with no vendor tool on it, as on a CPU host (NVML stays as this host has it: no library, no GPU; on a
    host where NVML can sample, these tests skip)."""
    if probe_power(PowerSettings(backend="nvml"), engine="vllm", gpus=1).usable:
        pytest.skip("NVML can sample on this host: these tests describe a host where no backend can")
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.mark.parametrize(("backend", "found"), [
    ("nvml", "nvml: "),  # nvidia-ml-py not installed, or NVML cannot initialise without a driver
    ("amd-smi", "amd-smi: amd-smi is not on PATH"),
    ("nvidia-smi", "nvidia-smi: nvidia-smi is not on PATH"),
    ("dcgm", "dcgm: dcgmi is not on PATH"),
])
@pytest.mark.usefixtures("bare_path")
def test_a_backend_that_cannot_sample_here_says_why_and_the_fix(backend: str, found: str) -> None:
    probe = probe_power(PowerSettings(backend=backend, require=True), engine="vllm", gpus=1)
    assert not probe.usable and probe.backend is None
    assert probe.why is not None and probe.why.startswith(found)
    assert probe.host == platform.node()
    refusal = probe.refusal()
    assert refusal.startswith(f"power is required but cannot be sampled on {platform.node()}: {probe.why}")
    # the fix: the backends left to try, and running without requiring power
    others = [c for c in MEASURED_CHOICES if c != backend]
    assert f"--power-backend {'|'.join(others)}" in refusal and "--no-require-power" in refusal
    # what a job that runs anyway records as its power block's error: why, and how to get power
    assert probe.unrecorded().startswith(probe.why) and "--power-backend" in probe.unrecorded()
    assert "--no-require-power" not in probe.unrecorded()


@pytest.mark.usefixtures("bare_path")
def test_auto_tries_each_backend_of_its_order_and_names_every_one() -> None:
    probe = probe_power(PowerSettings(), engine="vllm", gpus=2)
    assert not probe.usable
    assert [part.split(":")[0] for part in (probe.why or "").split("; ")] == list(AUTO_ORDER)
    assert "--power-backend dcgm" in probe.refusal()  # the one backend auto did not try on an aggregated server
    decode = probe_power(PowerSettings(), engine="vllm", gpus=2, role="decode")
    assert [part.split(":")[0] for part in (decode.why or "").split("; ")] == list(auto_order("decode"))


def test_a_server_without_gpus_has_no_power_to_sample_and_nothing_to_fix() -> None:
    probe = probe_power(PowerSettings(require=True), engine="transformers", gpus=0)
    assert not probe.usable and probe.why == NO_GPU_REASON and probe.fix is None
    assert probe.refusal().endswith("(fix: run without requiring power: --no-require-power, or drop the recipe's "
                                    "`require-power: true`)")


def test_the_simulator_is_sampled_unless_sampling_is_off() -> None:
    probe = probe_power(PowerSettings(backend="nvml"), engine="sim", gpus=8)
    assert probe.usable and probe.backend == "sim" and probe.source == "simulated"
    off = probe_power(PowerSettings(backend="off", require=True), engine="sim", gpus=8)
    assert not off.usable and "--power-backend off" in (off.why or "") and "--power-backend auto" in off.refusal()


def test_a_server_on_no_gpu_says_in_each_job_that_its_power_is_not_recorded() -> None:
    """A CPU server (transformers serve on the CPU) has no GPU power to sample: its jobs' files say so (no backend,
    the reason), as the run's start line announced, so their power blocks say it; required, they fail with it."""
    for require in (None, True):
        sampler = start_sampler(PowerSettings(require=require), engine="transformers", gpus=0, base_url=None)
        assert isinstance(sampler, NoSampler)
        assert sampler.header.backend is None and sampler.header.error == NO_GPU_REASON
        assert sampler.header.require is bool(require)


def _tool(directory: Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


@pytest.mark.usefixtures("bare_path")
def test_a_vendor_tool_on_path_that_cannot_report_power_fails_its_probe(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool that is on PATH but cannot read the GPUs (no driver loaded, no GPU) is found out by the probe, before
    any server starts, with what it printed: not after the job measured with no power. `auto` then goes on to the
    next backend of its order, here a working nvidia-smi, instead of sampling nothing from a broken amd-smi."""
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    _tool(tmp_path, "amd-smi", "echo 'Unable to detect any GPU devices, check amdgpu version' >&2\nexit 1\n")
    _tool(tmp_path, "nvidia-smi", "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
          "driver.\"\nexit 9\n")
    for backend, said in (("amd-smi", "Unable to detect any GPU devices"), ("nvidia-smi", "NVIDIA-SMI has failed")):
        probe = probe_power(PowerSettings(backend=backend, require=True), engine="vllm", gpus=1)
        assert not probe.usable and said in (probe.why or ""), probe
        assert isinstance(start_sampler(PowerSettings(backend=backend, require=True), engine="vllm", gpus=1,
                                        base_url=None), NoSampler)
    # nvidia-smi answers, but with no power reading ([N/A]): power can never be valid from it
    _tool(tmp_path, "nvidia-smi", "echo '2026/12/05 01:00:00.000, 0, [N/A], 40, 1980, 2619, 50, 10'\n")
    probe = probe_power(PowerSettings(backend="nvidia-smi", require=True), engine="vllm", gpus=1)
    assert not probe.usable and "nvidia-smi reported no GPU power" in (probe.why or "")
    _tool(tmp_path, "nvidia-smi", "echo '2026/12/05 01:00:00.000, 0, 250.5, 40, 1980, 2619, 50, 10'\n")
    probe = probe_power(PowerSettings(require=True), engine="vllm", gpus=1)
    assert probe.usable and probe.backend == "nvidia-smi"
    sampler = start_sampler(PowerSettings(require=True), engine="vllm", gpus=1, base_url=None)
    assert isinstance(sampler, PowerSampler) and sampler.header.backend == "nvidia-smi"
    sampler.stop()


@pytest.mark.parametrize("backend", ["auto", "nvidia-smi"])
@pytest.mark.usefixtures("bare_path")
def test_a_server_on_no_gpu_is_never_credited_the_hosts_gpus_by_a_named_backend(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU server on a host whose nvidia-smi reports a GPU's power: `--power-backend nvidia-smi` (a backend named,
    not `auto`) had sampled that GPU, which the server never used, and its jobs' power came out valid and `measured`
    when the host had as many GPUs as the job planned. Named or `auto`, there is no GPU power to sample."""
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    _tool(tmp_path, "nvidia-smi", "echo '2026/12/05 01:00:00.000, 0, 250.5, 40, 1980, 2619, 50, 10'\n")
    settings = PowerSettings(backend=backend, require=True)
    assert probe_power(settings.model_copy(update={"backend": "nvidia-smi"}), engine="vllm", gpus=1).usable
    probe = probe_power(settings, engine="transformers", gpus=0)
    assert not probe.usable and probe.why == NO_GPU_REASON
    sampler = start_sampler(settings, engine="transformers", gpus=0, base_url=None)
    if isinstance(sampler, PowerSampler):
        sampler.stop()
    assert isinstance(sampler, NoSampler) and sampler.header.backend is None
    assert sampler.header.error == NO_GPU_REASON


@pytest.mark.usefixtures("bare_path")
def test_a_tool_printing_a_byte_that_is_not_utf8_is_read_not_a_crash(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """One byte that is not UTF-8 in a tool's output (a unit sign in another encoding) had raised UnicodeDecodeError
    out of the probe: `llmsweep run` ended in a traceback before any server started. The reading is taken, the odd
    byte left out of the field it was in."""
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    _tool(tmp_path, "nvidia-smi", "printf '2026/12/05 01:00:00.000, 0, 250.5, 40\\260, 1980, 2619, 50, 10\\n'\n")
    probe = probe_power(PowerSettings(backend="nvidia-smi", require=True), engine="vllm", gpus=1)
    assert probe.usable and probe.backend == "nvidia-smi"
    sampler = start_sampler(PowerSettings(backend="nvidia-smi", require=True), engine="vllm", gpus=1, base_url=None)
    assert isinstance(sampler, PowerSampler)
    sampler.stop()
    (sample,) = sampler.samples[:1]
    assert sample.power_w == 250.5 and sample.temperature_c == 40
