"""An AMD server pinned to GPUs the way ROCm reads it: `ROCR_VISIBLE_DEVICES` first (indices or ``GPU-<16 hex>``
UUIDs, found with `amd-smi list`), then `HIP_VISIBLE_DEVICES` (or `CUDA_VISIBLE_DEVICES`) counting within what ROCR
left. Its own GPUs' power is read; an entry that names no GPU of the host is a reason, never "all GPUs"."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from llmsweep.power.backends import visible_gpus, visible_problem
from llmsweep.power.sampler import NoSampler, PowerSampler, PowerSettings, start_sampler
from llmsweep.power.samples import read_gpu_metrics
from llmsweep.visible import amd_smi_uuid_serial, parse_rocm_smi_unique_ids, read_amd_smi_list

# Four MI300X (device id 0x74a1): the unique id ROCr puts in its UUID, and amd-smi's UUID built from it.
SERIALS = ["5bf1a8c2e4d60917", "92c4e07b3a1f5d28", "e8d7c6b5a4938271", "0a1b2c3d4e5f6071"]
AMD_SMI_UUIDS = ["5bff74a1-0000-1000-80f1-a8c2e4d60917", "92ff74a1-0000-1000-80c4-e07b3a1f5d28",
                 "e8ff74a1-0000-1000-80d7-c6b5a4938271", "0aff74a1-0000-1000-801b-2c3d4e5f6071"]
ROCR_UUIDS = [f"GPU-{s}" for s in SERIALS]


def _uuids(text: str) -> dict[str, int]:
    """`amd-smi list --json`'s GPU UUIDs -> indices, as the listing reads them."""
    table = read_amd_smi_list(text).uuids
    return dict(table.uuids) if table is not None else {}


def _list_json(enumeration: bool, hip_ids: tuple[int | str, ...] = (0, 1, 2, 3)) -> str:
    """`amd-smi list --json` as ROCm 6.4 prints it; `-e` adds the render/card/HSA/HIP enumeration fields (`hip_ids`:
    each GPU's `hip_id`, amd-smi's order by default)."""
    entries = []
    for i, uuid in enumerate(AMD_SMI_UUIDS):
        fields = [f'"gpu": {i}', f'"bdf": "0000:{0x0c + 0x20 * i:02x}:00.0"', f'"uuid": "{uuid}"',
                  f'"kfd_id": {28870 + 1000 * i}', f'"node_id": {2 + i}', '"partition_id": 0']
        if enumeration:
            fields += [f'"render": "renderD{128 + 8 * i}"', f'"card": "card{i}"', f'"hsa_id": {2 + i}',
                       f'"hip_id": {json.dumps(hip_ids[i])}', f'"hip_uuid": "{ROCR_UUIDS[i]}"']
        entries.append("    {\n        " + ",\n        ".join(fields) + "\n    }")
    return "[\n" + ",\n".join(entries) + "\n]"


def _stand_in(list_e: bool, hip_ids: tuple[int | str, ...] = (0, 1, 2, 3)) -> str:
    """amd-smi: `list` as above (an older one refuses `-e`); `metric` one CSV row per `-g` GPU (500 W + index)."""
    no_e = 'echo "amd-smi list: error: unrecognized arguments: -e" >&2; exit 2' if not list_e else ""
    return f"""#!/usr/bin/env bash
if [[ "$1" == "list" ]]; then
  if [[ "$2" == "-e" ]]; then
    {no_e}
    cat <<'JSON'
{_list_json(True, hip_ids)}
JSON
  else
    cat <<'JSON'
{_list_json(False)}
JSON
  fi
  exit 0
fi
ids=()
take=0
for a in "$@"; do
  if [[ "$a" == "-g" ]]; then take=1; continue; fi
  if [[ "$a" == -* ]]; then take=0; continue; fi
  if [[ $take == 1 ]]; then ids+=("$a"); fi
done
[[ ${{#ids[@]}} -eq 0 ]] && ids=(0 1 2 3)
if [[ " $* " == *" -E "* ]]; then
  echo "gpu,total_energy_consumption"
  for i in "${{ids[@]}}"; do echo "$i,$((100000 + i)).5 J"; done
  exit 0
fi
echo "gpu,power_limit,socket_power,hotspot,gfx_clk,mem_clk,gfx_activity,umc_activity"
for i in "${{ids[@]}}"; do echo "$i,750 W,$((500 + i)) W,61 C,2100 MHz,1300 MHz,93 %,41 %"; done
"""


def _install(bin_dir: Path, name: str, text: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(text)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def amd_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    _install(bin_dir, "amd-smi", _stand_in(list_e=True))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # an AMD host: no NVML
    return bin_dir


def _env(bin_dir: Path, **visible: str) -> dict[str, str]:
    """The server's environment, with only the stand-ins on its PATH (an NVIDIA host running the tests stays out)."""
    return {"PATH": str(bin_dir), **visible}


def test_amd_smi_uuid_carries_the_serial_rocr_matches() -> None:
    # as amd-smi's own test printed it for an RX 6800 (device 0x73bf): serial f8ffeb47a027de4d
    assert amd_smi_uuid_serial("f8ff73bf-0000-1000-80ff-eb47a027de4d") == "f8ffeb47a027de4d"
    expected = {u.lower(): i for i, u in enumerate(ROCR_UUIDS)}
    assert _uuids(_list_json(False)) == expected  # no `-e`: from the serial inside `uuid`
    assert _uuids(_list_json(True)) == expected  # `hip_uuid` agrees
    rocm_smi = '{"card0": {"Unique ID": "0x5bf1a8c2e4d60917"}, "card1": {"Unique ID": "0x92c4e07b3a1f5d28"}}'
    assert parse_rocm_smi_unique_ids(rocm_smi) == {"gpu-5bf1a8c2e4d60917": 0, "gpu-92c4e07b3a1f5d28": 1}


def test_rocr_uuids_select_their_gpus_through_amd_smi(amd_smi: Path) -> None:
    # in the variable's order; a unique prefix in any case, as ROCr takes it
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES=f"{ROCR_UUIDS[2]},{ROCR_UUIDS[0]}")) == (2, 0)
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES="GPU-92C4E07B")) == (1,)
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES=f"3,{ROCR_UUIDS[2]}")) == (3, 2)
    assert visible_gpus(_env(amd_smi, HIP_VISIBLE_DEVICES=ROCR_UUIDS[3])) == (3,)  # HIP takes a UUID too


def test_an_older_amd_smi_without_list_e_still_resolves_uuids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    _install(tmp_path / "bin", "amd-smi", _stand_in(list_e=False))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    env = {"PATH": str(tmp_path / "bin"), "ROCR_VISIBLE_DEVICES": ROCR_UUIDS[1]}
    assert visible_gpus(env) == (1,)


def test_rocm_smi_lists_the_uuids_where_amd_smi_is_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unique = ", ".join(f'"card{i}": {{"Unique ID": "0x{s}"}}' for i, s in enumerate(SERIALS))
    _install(tmp_path / "bin", "rocm-smi", f"#!/usr/bin/env bash\necho '{{{unique}}}'\n")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert visible_gpus({"PATH": str(tmp_path / "bin"), "ROCR_VISIBLE_DEVICES": ROCR_UUIDS[3]}) == (3,)


def test_hip_indices_count_within_the_gpus_rocr_left(amd_smi: Path) -> None:
    """ROCr applies its variable first; HIP (or CUDA's variable, when HIP's is unset) numbers what is left."""
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES="2,3", HIP_VISIBLE_DEVICES="1")) == (3,)
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES=f"{ROCR_UUIDS[3]},{ROCR_UUIDS[1]}",
                             HIP_VISIBLE_DEVICES="1,0")) == (1, 3)
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES="2,3", CUDA_VISIBLE_DEVICES="0")) == (2,)
    # HIP reads its own variable, not CUDA's, when both are set
    assert visible_gpus(_env(amd_smi, HIP_VISIBLE_DEVICES="1", CUDA_VISIBLE_DEVICES="0")) == (1,)
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES="1,2")) == (1, 2)


HIP_IDS = (2, 0, 3, 1)
"""`hip_id` of amd-smi's GPUs 0-3 where HIP numbers them otherwise than amd-smi (ROCr's enumeration order against
amd-smi's): HIP's GPU 0 is amd-smi's 1, 1 is 3, 2 is 0, 3 is 2."""


def test_read_amd_smi_list_gives_hips_order_of_the_gpus() -> None:
    assert read_amd_smi_list(_list_json(True, HIP_IDS)).runtime_order == (1, 3, 0, 2)
    assert read_amd_smi_list(_list_json(True)).runtime_order == (0, 1, 2, 3)
    # no `-e` (no hip_id), one N/A, or two GPUs of one id: no order, amd-smi's is taken
    assert read_amd_smi_list(_list_json(False)).runtime_order is None
    assert read_amd_smi_list(_list_json(True, (0, "N/A", 2, 3))).runtime_order is None
    assert read_amd_smi_list(_list_json(True, (0, 0, 2, 3))).runtime_order is None


def test_amd_indices_count_in_hips_order_for_the_sampler_and_the_preflight(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES and (HIP's unset) CUDA_VISIBLE_DEVICES indices count in HIP's order
    (`hip_id`), and the power sampler reads those GPUs by amd-smi's index; it read amd-smi's GPUs of those numbers."""
    from llmsweep.visible import select_listed

    _install(tmp_path / "bin", "amd-smi", _stand_in(list_e=True, hip_ids=HIP_IDS))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    bin_dir = tmp_path / "bin"
    assert visible_gpus(_env(bin_dir, HIP_VISIBLE_DEVICES="0,1")) == (1, 3)
    assert visible_gpus(_env(bin_dir, ROCR_VISIBLE_DEVICES="2")) == (0,)
    assert visible_gpus(_env(bin_dir, CUDA_VISIBLE_DEVICES="3")) == (2,)
    assert visible_gpus(_env(bin_dir, ROCR_VISIBLE_DEVICES="2,3", HIP_VISIBLE_DEVICES="1")) == (2,)
    assert visible_gpus(_env(bin_dir, HIP_VISIBLE_DEVICES=ROCR_UUIDS[0])) == (0,)  # a UUID is its GPU
    past = _env(bin_dir, HIP_VISIBLE_DEVICES="4")
    assert visible_gpus(past) == () and "past the 4 GPUs the runtime numbers" in (visible_problem(past) or "")
    listed = read_amd_smi_list(_list_json(True, HIP_IDS))
    assert select_listed(listed, {"PATH": str(bin_dir), "HIP_VISIBLE_DEVICES": "0,1"}).gpus == (1, 3)


def test_an_index_whose_hip_order_cannot_be_read_is_not_sampled(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The power sampler asks amd-smi for HIP's order of the GPUs an index entry counts in. Where that asking failed,
    it sampled the GPUs of those numbers in amd-smi's order (said at info level only): on a host where the two orders
    differ, other GPUs than the ones the preflight checked, credited to the server. Now it samples none, saying why;
    without an entry every GPU is the server's and is read."""
    head = 'if [[ "$1" == "list" ]]; then'
    broken_list = _stand_in(list_e=True).replace(head, f'{head}\n  echo "AMDSMI_STATUS_BUSY" >&2; exit 1', 1)
    _install(tmp_path / "bin", "amd-smi", broken_list)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    env = _env(tmp_path / "bin", HIP_VISIBLE_DEVICES="0,1")
    assert visible_gpus(env) == ()
    problem = visible_problem(env) or ""
    assert "HIP_VISIBLE_DEVICES=0,1 names GPUs 0, 1 by index, which counts in HIP's order" in problem, problem
    assert "failed with exit status 1: AMDSMI_STATUS_BUSY" in problem and "power is not read" in problem, problem
    sampler = start_sampler(PowerSettings(backend="amd-smi", interval_s=0.2, require=True), engine="vllm", gpus=2,
                            base_url=None, env=env)
    assert isinstance(sampler, NoSampler)
    header, samples, _ = read_gpu_metrics(sampler.write_job(tmp_path, time.time(), expected_gpus=2))
    assert header is not None and "HIP's order" in (header.error or "") and samples == [], header
    assert visible_gpus(_env(tmp_path / "bin")) is None  # no entry: the GPUs need no order


def test_an_entry_that_names_no_gpu_selects_none_with_the_reason(amd_smi: Path) -> None:
    unknown = "GPU-ffffffffffffffff"
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES=f"0,{unknown}")) == ()
    assert unknown in (visible_problem(_env(amd_smi, ROCR_VISIBLE_DEVICES=unknown)) or "")
    # HIP index 2 among the two GPUs ROCR left, or the UUID of a GPU ROCR hid: nothing HIP can use
    past = _env(amd_smi, ROCR_VISIBLE_DEVICES="0,1", HIP_VISIBLE_DEVICES="2")
    assert visible_gpus(past) == ()
    assert "ROCR_VISIBLE_DEVICES=0,1" in (visible_problem(past) or "")
    assert visible_gpus(_env(amd_smi, ROCR_VISIBLE_DEVICES="0,1", HIP_VISIBLE_DEVICES=ROCR_UUIDS[3])) == ()


def test_an_nvidia_host_ignores_the_amd_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA reads only CUDA_VISIBLE_DEVICES: a HIP_/ROCR_ variable left in the environment selects nothing there."""
    _install(tmp_path / "bin", "nvidia-smi", "#!/usr/bin/env bash\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0a1b)'\n")
    path = str(tmp_path / "bin")
    assert visible_gpus({"PATH": path, "HIP_VISIBLE_DEVICES": "1"}) is None
    assert visible_gpus({"PATH": path, "ROCR_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "2"}) == (2,)


@pytest.mark.timeout(60)
def test_the_amd_sampler_reads_only_the_rocr_pinned_gpus(amd_smi: Path, tmp_path: Path) -> None:
    sampler = start_sampler(PowerSettings(backend="amd-smi", interval_s=0.2), engine="vllm", gpus=2, base_url=None,
                            env=_env(amd_smi, ROCR_VISIBLE_DEVICES=f"{ROCR_UUIDS[2]},{ROCR_UUIDS[0]}"))
    assert isinstance(sampler, PowerSampler)
    try:
        began = time.time()
        time.sleep(0.5)
        header, samples, _ = read_gpu_metrics(sampler.write_job(tmp_path, began, expected_gpus=2))
    finally:
        sampler.stop()
    assert header is not None and header.gpu_ids == ["2", "0"]
    assert samples and {s.gpu for s in samples} == {"0", "2"}
    assert {s.power_w for s in samples} == {500.0, 502.0}


GROUP_WARNING = ("WARNING: User is missing the following required groups: render, video. Please add user to these "
                 "groups.")


def test_a_warning_amd_smi_prints_before_its_json_does_not_hide_the_gpus(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """amd-smi (ROCm 6.4's among them) prints its group warning on stdout, before the JSON, for a user outside the
    render/video groups (a container, a node whose udev rules grant the GPUs instead): the UUIDs are still read, as
    `execute.amd_gpus` reads that output, not "names no GPU of this host" with a JSON decode error."""
    expected = {u.lower(): i for i, u in enumerate(ROCR_UUIDS)}
    assert _uuids(f"{GROUP_WARNING}\n{_list_json(True)}") == expected
    rocm_smi = 'WARNING: No JSON data to report\n{"card1": {"Unique ID": "0x92c4e07b3a1f5d28"}}'
    assert parse_rocm_smi_unique_ids(rocm_smi) == {"gpu-92c4e07b3a1f5d28": 1}
    _install(tmp_path / "bin", "amd-smi", f"#!/usr/bin/env bash\necho '{GROUP_WARNING}'\ncat <<'JSON'\n"
                                          f"{_list_json(True)}\nJSON\n")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    env = {"PATH": str(tmp_path / "bin"), "ROCR_VISIBLE_DEVICES": ROCR_UUIDS[2]}
    assert visible_gpus(env) == (2,) and visible_problem(env) is None
    with pytest.raises(ValueError):  # no document at all is still a failure to list (the next tool is asked)
        _uuids(GROUP_WARNING)
