"""A server pinned to GPUs by UUID (`CUDA_VISIBLE_DEVICES=GPU-…`, or a MIG UUID) has its own GPUs' power read, found
by NVML or `nvidia-smi -L`; a UUID no GPU of the host has is a reason power is not measured, never "all GPUs"."""

from __future__ import annotations

import os
import stat
import sys
import time
import types
from pathlib import Path

import pytest

from llmsweep.power.backends import visible_gpus
from llmsweep.power.sampler import NoSampler, PowerSampler, PowerSettings, start_sampler
from llmsweep.power.samples import read_gpu_metrics

UUIDS = ["GPU-0a1b2c3d-0000-4000-8000-000000000000", "GPU-1a1b2c3d-1111-4111-8111-111111111111",
         "GPU-2a1b2c3d-2222-4222-8222-222222222222", "GPU-3a1b2c3d-3333-4333-8333-333333333333"]
MIG_ON_2 = "MIG-9f9e9d9c-aaaa-4aaa-8aaa-aaaaaaaaaaaa"

# `nvidia-smi -L` as a MIG-partitioned host prints it; the query answers for the `--id=` GPUs only (400 W + index).
STAND_IN = f"""#!/usr/bin/env bash
if [[ "$1" == "-L" ]]; then
  echo "GPU 0: NVIDIA H200 (UUID: {UUIDS[0]})"
  echo "GPU 1: NVIDIA H200 (UUID: {UUIDS[1]})"
  echo "GPU 2: NVIDIA H200 (UUID: {UUIDS[2]})"
  echo "  MIG 3g.71gb     Device  0: (UUID: {MIG_ON_2})"
  echo "GPU 3: NVIDIA H200 (UUID: {UUIDS[3]})"
  exit 0
fi
ids="0,1,2,3"
for a in "$@"; do [[ "$a" == --id=* ]] && ids="${{a#--id=}}"; done
IFS=, read -ra sel <<< "$ids"
for i in "${{sel[@]}}"; do
  echo "2026/12/01 10:00:00.000, $i, $((400 + i)).00, 50, 1980, 3201, 90, 40"
done
"""


@pytest.fixture
def nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(STAND_IN)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML here: nvidia-smi answers
    return bin_dir


def _env(visible: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "CUDA_VISIBLE_DEVICES": visible}


def test_gpu_and_mig_uuids_select_their_gpus_through_nvidia_smi(nvidia_smi: Path) -> None:
    assert visible_gpus(_env(f"{UUIDS[3]},{UUIDS[1]}")) == (3, 1)  # in the variable's order
    assert visible_gpus(_env(MIG_ON_2)) == (2,)  # a MIG instance draws the power of its GPU
    assert visible_gpus(_env("GPU-2a1b2c3d")) == (2,)  # a unique prefix, as CUDA accepts
    assert visible_gpus(_env("1,3")) == (1, 3)


def test_an_unknown_uuid_selects_no_gpu_rather_than_all(nvidia_smi: Path) -> None:
    assert visible_gpus(_env("GPU-ffffffff-dead-4bad-8bad-ffffffffffff")) == ()
    assert visible_gpus(_env("GPU-")) == ()  # a prefix of every GPU's UUID names none of them


@pytest.mark.timeout(60)
def test_an_nvidia_smi_that_hung_for_one_lookup_is_asked_again_by_the_next(nvidia_smi: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A UUID entry is looked up with `nvidia-smi -L`. One that stalled was not asked again in the process: every later
    server's GPUs went unread ("was not asked"). Each reading of a selection is one step: a hang is waited for once
    there (the server's power is then not read, with the reason), and the next reading asks again."""
    from llmsweep import visible
    from llmsweep.power.backends import visible_problem

    monkeypatch.setattr(visible, "GPU_TOOL_TIMEOUT_S", 1.0)
    hang = nvidia_smi / "hang"
    script = nvidia_smi / "nvidia-smi"
    stalls = f"#!/usr/bin/env bash\n[[ -e {hang} ]] && exec sleep 60  # a driver that does not answer\n"
    script.write_text(STAND_IN.replace("#!/usr/bin/env bash\n", stalls, 1))
    hang.touch()
    assert visible_gpus(_env(UUIDS[1])) == ()
    assert "nvidia-smi -L` did not answer within 1 s" in (visible_problem(_env(UUIDS[1])) or "")
    hang.unlink()
    assert visible_gpus(_env(UUIDS[1])) == (1,)


def test_the_sampler_reads_only_the_uuid_pinned_gpus(nvidia_smi: Path, tmp_path: Path) -> None:
    sampler = start_sampler(PowerSettings(backend="nvidia-smi", interval_s=0.2), engine="vllm", gpus=2,
                            base_url=None, env=_env(f"{UUIDS[2]},{UUIDS[0]}"))
    assert isinstance(sampler, PowerSampler)
    try:
        began = time.time()
        time.sleep(0.5)
        header, samples, _ = read_gpu_metrics(sampler.write_job(tmp_path, began, expected_gpus=2))
    finally:
        sampler.stop()
    assert header is not None and header.gpu_ids == ["2", "0"]
    assert samples and {s.gpu for s in samples} == {"0", "2"}


def test_an_unknown_uuid_is_the_reason_required_power_fails(nvidia_smi: Path, tmp_path: Path) -> None:
    unknown = "GPU-ffffffff-dead-4bad-8bad-ffffffffffff"
    sampler = start_sampler(PowerSettings(backend="nvidia-smi", require=True), engine="vllm", gpus=1, base_url=None,
                            env=_env(unknown))
    assert isinstance(sampler, NoSampler)
    header, samples, _ = read_gpu_metrics(sampler.write_job(tmp_path, time.time(), expected_gpus=1))
    assert header is not None and unknown in (header.error or "") and samples == []
    # not required: not sampled (the job's file says why), rather than every GPU of the host sampled as the server's
    quiet = start_sampler(PowerSettings(backend="nvidia-smi"), engine="vllm", gpus=1, base_url=None, env=_env(unknown))
    assert isinstance(quiet, NoSampler)
    header, samples, _ = read_gpu_metrics(quiet.write_job(tmp_path, time.time(), expected_gpus=1))
    assert header is not None and not header.require and unknown in (header.error or "") and samples == []


class _Nvml(types.ModuleType):
    """NVML as nvidia-ml-py exposes it, for two GPUs, the second split into one MIG instance."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__("pynvml")

    def nvmlInit(self) -> None:
        return None

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> tuple[str, int]:
        return ("gpu", i)

    def nvmlDeviceGetUUID(self, handle: tuple[str, int]) -> bytes:
        return (MIG_ON_2 if handle[0] == "mig" else UUIDS[handle[1]]).encode()

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: tuple[str, int]) -> int:
        return 1 if handle[1] == 1 else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: tuple[str, int], j: int) -> tuple[str, int]:
        return ("mig", handle[1])


def test_nvml_resolves_gpu_and_mig_uuids(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _Nvml())
    env = {"PATH": str(tmp_path), "CUDA_VISIBLE_DEVICES": f"{UUIDS[1]}"}  # no nvidia-smi: NVML answers
    assert visible_gpus(env) == (1,)
    assert visible_gpus({**env, "CUDA_VISIBLE_DEVICES": MIG_ON_2}) == (1,)
    assert visible_gpus({**env, "CUDA_VISIBLE_DEVICES": UUIDS[3]}) == ()  # not a GPU of this host
