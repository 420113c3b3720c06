"""The DCGM lane: `dcgmi dmon` output read by its column names (recorded text), a stand-in `dcgmi` on PATH sampled
through the real sampler into `gpu_metrics.jsonl`, and `auto` choosing DCGM first for disaggregated roles only."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from llmsweep.power.backends import DCGM_FIELDS, dcgmi_argv, parse_dcgmi_dmon
from llmsweep.power.integrate import WorkDone, integrate
from llmsweep.power.sampler import PowerSampler, PowerSettings, auto_order, probe_power, start_sampler
from llmsweep.power.samples import read_gpu_metrics

RECORDED = """\
#Entity   POWER     TOTEC           SMCLK  MMCLK  TMPTR  GPUTL  MCUTL
ID        W         mJ              MHZ    MHZ    C      %      %
GPU 0     612.338   182736451       1980   3201   61     97     48
GPU 1     598.102   181002334       1980   3201   59     96     47
GPU 2     N/A       N/A             1980   3201   58     0      0
"""


def test_recorded_dmon_output_reads_by_column_name() -> None:
    rows = parse_dcgmi_dmon(RECORDED, 7.0)
    assert [r.gpu for r in rows] == ["0", "1", "2"]
    assert rows[0].power_w == pytest.approx(612.338) and rows[0].energy_j == pytest.approx(182736.451)
    assert (rows[0].sm_clock_mhz, rows[0].mem_clock_mhz, rows[0].temperature_c) == (1980, 3201, 61)
    assert (rows[0].util_gpu, rows[0].util_mem) == (97, 48) and rows[0].t == 7.0
    assert rows[2].power_w is None and rows[2].energy_j is None  # N/A is no value, never 0
    # Another column order (a DCGM that prints the fields its own way) reads the same.
    swapped = "# Entity  TOTEC  POWER\n      ID  mJ  W\n    GPU 3  5000  250.5\n"
    (row,) = parse_dcgmi_dmon(swapped, 1.0)
    assert row.gpu == "3" and row.power_w == 250.5 and row.energy_j == 5.0


def test_argv_asks_for_every_field_once_and_the_visible_gpus() -> None:
    argv = dcgmi_argv((2, 3))
    assert argv[:3] == ["dcgmi", "dmon", "-e"] and argv[3].split(",") == [str(f) for f in DCGM_FIELDS]
    assert argv[-2:] == ["-i", "2,3"] and "-c" in argv
    assert "-i" not in dcgmi_argv(None)


def test_auto_tries_dcgm_first_only_for_disaggregated_roles() -> None:
    assert auto_order("prefill")[0] == auto_order("decode")[0] == "dcgm"
    assert "dcgm" not in auto_order(None) and "dcgm" not in auto_order("server")


STAND_IN = """#!/bin/sh
# A stand-in dcgmi: 'discovery -l' answers as a host engine would; 'dmon' prints one sample of two GPUs, power
# rising and the energy counter (mJ) growing with the clock, so consecutive reads differ like a real GPU's.
if [ "$1" = "discovery" ]; then echo "2 GPUs found."; exit 0; fi
now=$(date +%s%N)
ms=$(( now / 1000000 % 10000000000 ))
echo "#Entity   POWER     TOTEC           SMCLK  MMCLK  TMPTR  GPUTL  MCUTL"
echo "ID        W         mJ              MHZ    MHZ    C      %      %"
echo "GPU 0     400.000   $(( ms * 400 ))   1980   3201   61     97     48"
echo "GPU 1     300.000   $(( ms * 300 ))   1980   3201   59     96     47"
"""


def test_a_decode_role_samples_through_a_dcgmi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "dcgmi"
    script.write_text(STAND_IN)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    sampler = start_sampler(PowerSettings(interval_s=0.2), engine="vllm", gpus=2, base_url=None, role="decode",
                            env={"PATH": os.environ["PATH"]})
    assert isinstance(sampler, PowerSampler) and sampler.header.backend == "dcgm"
    began = time.time()
    time.sleep(1.2)
    end = time.time()
    path = sampler.write_job(tmp_path, began, expected_gpus=2)
    sampler.stop()
    header, samples, problems = read_gpu_metrics(path)
    assert header is not None and header.backend == "dcgm" and header.source == "measured" and not problems
    assert {s.gpu for s in samples} == {"0", "1"} and len(samples) >= 10
    work = WorkDone(start=began + 0.1, end=end - 0.1, duration_s=end - began - 0.2, successful=10, input_tokens=1000,
                    output_tokens=500, total_tps_per_gpu=100.0, output_tps_per_gpu=50.0, gpus=2)
    block = integrate(header, samples, work)
    assert block["power_valid"] is True, block["reasons"]
    assert block["avg_total_gpu_power_w"] == pytest.approx(700.0)  # 400 W + 300 W
    # The stand-in's counter grows at exactly those watts: the cross-check agrees.
    assert block["counter_check"]["within_tolerance"] is True, block["counter_check"]


@pytest.mark.parametrize(("dmon", "said"), [
    ('echo "Error setting watches. Result: The third-party Profiling module returned an unrecoverable error" >&2\n'
     "exit 255\n", "dcgm could not be read: dcgmi exited 255: Error setting watches"),
    ('echo "#Entity   POWER     TOTEC"\necho "ID        W         mJ"\necho "GPU 0     N/A       N/A"\n',
     "dcgm reported no GPU power"),
], ids=["dmon-fails", "power-na"])
def test_a_host_engine_whose_dmon_cannot_report_power_fails_the_probe(
        dmon: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DCGM host engine that lists the GPUs (`dcgmi discovery -l`) but whose `dmon` fails, or gives every power
    N/A, had passed the probe: `auto` took DCGM for a disaggregated role and every read of the run came back empty,
    though NVML or nvidia-smi could sample. One read in the probe finds it out, as for the other tools."""
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, body in (("dcgmi", 'if [ "$1" = "discovery" ]; then echo "1 GPU found."; exit 0; fi\n' + dmon),
                       ("nvidia-smi", "echo '2026/12/05 01:00:00.000, 0, 250.5, 40, 1980, 2619, 50, 10'\n")):
        tool = tmp_path / name
        tool.write_text("#!/bin/sh\n" + body)
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    named = probe_power(PowerSettings(backend="dcgm", require=True), engine="vllm", gpus=1, role="decode")
    assert not named.usable and (named.why or "").startswith(f"dcgm: {said}"), named.why
    chosen = probe_power(PowerSettings(require=True), engine="vllm", gpus=1, role="decode")
    assert chosen.backend == "nvidia-smi", chosen
