"""On an AMD host a result says which GPUs it ran on, as on NVIDIA: `observe_runtime` reads the server's GPUs'
marketing names and the driver version from `amd-smi static`, and for a server on this host each GPU's power cap and
GFX clocks (`amd-smi static --limit`, `amd-smi metric --clock`), narrowed to the GPUs the server's
`HIP_/ROCR_/CUDA_VISIBLE_DEVICES` give it, in the runtime's order. amd-smi is faked on PATH, printing JSON in the
shapes its releases print (`llmsweep.execute.amd_gpus` says where they come from): ROCm 6.x's list of GPU objects
with ``{"value", "unit"}`` values, ROCm 7.2's ``{"gpu_data": [...]}`` with per-PPT power limits, and the ROCm
6.0-era plain numbers. What amd-smi does not give (``N/A``, a shape not known here, a document that is not JSON) is
None, never a guess and never an error out of `observe_runtime`."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import types
from pathlib import Path
from typing import Any, cast

import pytest

from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute import lifecycle
from llmsweep.execute.amd_gpus import AmdGpu, GfxClock, number, parse_clocks, parse_static
from llmsweep.execute.handle import ServerHandle
from llmsweep.execute.lifecycle import hardware_provenance, observe_runtime
from llmsweep.metrics.model import Hardware, Provenance
from llmsweep.plan import Job
from llmsweep.visible import amd_smi_entries

REPO = Path(__file__).resolve().parents[3]
SERIALS = ["5bf1a8c2e4d60917", "92c4e07b3a1f5d28", "e8d7c6b5a4938271", "0a1b2c3d4e5f6071"]
ROCR_UUIDS = [f"GPU-{s}" for s in SERIALS]


def _v(value: object, unit: str) -> dict[str, Any]:
    return {"value": value, "unit": unit}


def _static_6x(caps_w: list[float | str], name: str = "AMD Instinct MI300X", driver: str = "6.10.5"
               ) -> list[dict[str, Any]]:
    """`amd-smi static --asic --driver --limit --json` of ROCm 6.x: a list, values with units, N/A where unread."""
    return [{"gpu": i,
             "asic": {"market_name": name, "vendor_id": "0x1002", "vendor_name": "Advanced Micro Devices Inc. "
                      "[AMD/ATI]", "subvendor_id": "0x1002", "device_id": "0x74a1", "subsystem_id": "0x74a1",
                      "rev_id": "0x00", "asic_serial": f"0x{SERIALS[i].upper()}", "oam_id": i,
                      "num_compute_units": 304, "target_graphics_version": "gfx942"},
             "limit": {"max_power": _v(750, "W"), "min_power": _v(0, "W"),
                       "socket_power": cap if isinstance(cap, str) else _v(cap, "W"),
                       "slowdown_edge_temperature": "N/A", "slowdown_hotspot_temperature": _v(100, "C"),
                       "slowdown_vram_temperature": _v(95, "C"), "shutdown_edge_temperature": "N/A",
                       "shutdown_hotspot_temperature": _v(110, "C"), "shutdown_vram_temperature": _v(105, "C")},
             "driver": {"name": "amdgpu", "version": driver}}
            for i, cap in enumerate(caps_w)]


def _static_72(caps_w: list[float]) -> dict[str, Any]:
    """The same of ROCm 7.2 (amd-smi 26.2): wrapped in `gpu_data`, the power limits per PPT sensor."""
    na = {"max_power_limit": "N/A", "min_power_limit": "N/A", "socket_power_limit": "N/A"}
    return {"gpu_data": [{"gpu": i,
                          "asic": {"market_name": "AMD Instinct MI355X", "device_id": "0x75a3",
                                   "target_graphics_version": "gfx950"},
                          "limit": {"ppt0": {"max_power_limit": _v(1400, "W"), "min_power_limit": _v(0, "W"),
                                             "socket_power_limit": _v(cap, "W")},
                                    "ppt1": na, "slowdown_edge_temperature": "N/A", "ptl_state": "N/A",
                                    "ptl_format": "N/A"},
                          "driver": {"name": "amdgpu", "version": "6.16.6"}}
                         for i, cap in enumerate(caps_w)]}


def _engine(clk: float | str, max_clk: float | str) -> dict[str, Any]:
    def unit(x: float | str) -> object:
        return x if isinstance(x, str) else _v(x, "MHz")

    return {"clk": unit(clk), "min_clk": unit(500 if clk != "N/A" else "N/A"), "max_clk": unit(max_clk),
            "clk_locked": "DISABLED", "deep_sleep": "ENABLED"}


def _clocks(now_mhz: list[float | str], max_mhz: float) -> list[dict[str, Any]]:
    """`amd-smi metric --clock --json` (6.1.1 on): eight GFX engines per GPU (all at one clock here), memory and
    media clocks beside them."""
    out = []
    for i, now in enumerate(now_mhz):
        clock = {f"gfx_{e}": _engine(now, max_mhz if now != "N/A" else "N/A") for e in range(8)}
        clock.update({"mem_0": _engine(900, 1300), "vclk_0": _engine(29, 1620), "dclk_0": _engine(22, 1520),
                      "fclk_0": _engine("N/A", "N/A"), "socclk_0": _engine(28, 1143)})
        out.append({"gpu": i, "clock": clock})
    return out


def _list_e(hip_ids: list[int] | None = None) -> list[dict[str, Any]]:
    """`amd-smi list -e --json`: each GPU's ROCr UUID as `hip_uuid` (what `llmsweep.visible` matches), and with
    `hip_ids` each GPU's `hip_id` (HIP's device id of amd-smi's GPU i)."""
    return [{"gpu": i, "bdf": f"0000:{0x0c + 0x20 * i:02x}:00.0", "uuid": "N/A", "hip_uuid": uuid,
             **({"hip_id": hip_ids[i]} if hip_ids is not None else {})}
            for i, uuid in enumerate(ROCR_UUIDS)]


STATIC_6X = _static_6x([750, 600, 750, 750])  # GPU 1 capped
CLOCKS_6X = _clocks([132, 2100, 131, "N/A"], 2100)  # GPU 3's GFX engines report nothing
STATIC_72 = _static_72([1400, 1400, 1000, 1400])
CLOCKS_72 = {"gpu_data": _clocks([105, 106, 107, 108], 2400)}


class FakeAmdSmi:
    """amd-smi on PATH printing `static`, `metric` and `list` documents from files; a log of its argv."""

    def __init__(self, bin_dir: Path) -> None:
        self.dir = bin_dir
        bin_dir.mkdir()
        script = bin_dir / "amd-smi"
        script.write_text(f"""#!/usr/bin/env bash
echo "$@" >> {bin_dir}/argv.log
[[ -e {bin_dir}/hang ]] && exec sleep 60  # a hung driver: amd-smi never answers
case "$1" in
  static)
    if [[ " $* " == *" --limit "* && -e {bin_dir}/guest ]]; then
      echo "amd-smi static: error: unrecognized arguments: --limit" >&2; exit 2
    fi
    cat {bin_dir}/static.json ;;
  metric) cat {bin_dir}/clock.json ;;
  list) cat {bin_dir}/list.json ;;
  *) exit 2 ;;
esac
""")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        self.serve(STATIC_6X, CLOCKS_6X)
        (bin_dir / "list.json").write_text(json.dumps(_list_e(), indent=4))

    def serve(self, static: object, clocks: object) -> None:
        for name, doc in (("static.json", static), ("clock.json", clocks)):
            (self.dir / name).write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=4))

    def asked(self) -> list[str]:
        log = self.dir / "argv.log"
        return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def amd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeAmdSmi:
    """An AMD host: amd-smi on PATH, no nvidia-smi, no NVML; vLLM answering /version."""
    fake = FakeAmdSmi(tmp_path / "bin")
    path = os.pathsep.join([str(fake.dir), "/usr/bin", "/bin"])
    if shutil.which("nvidia-smi", path=path):
        pytest.skip("nvidia-smi is installed in /usr/bin here: this host cannot stand in for an AMD one")
    monkeypatch.setenv("PATH", path)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr("llmsweep.execute.ready.server_version", lambda url, timeout_s=1.0: {"version": "0.26.0"})
    monkeypatch.setattr(lifecycle, "load_average_1m", lambda: 1.5)
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return fake


def _handle(url: str = "http://127.0.0.1:8000", *, in_bus_order: bool = False) -> ServerHandle:
    return cast(ServerHandle, types.SimpleNamespace(base_url=url, gpus_in_bus_order=in_bus_order))


def _spec(env: dict[str, str] | None = None, engine: str = "vllm") -> LaunchSpec:
    return LaunchSpec(engine=engine, argv=("vllm", "serve", "m"), port=8000, gpus=2, env=env or {})


def _job() -> Job:
    folder = next((REPO / "examples" / "results").glob("*/*/jobs/*"))
    return Job.model_validate(json.loads((folder / "job.json").read_text()))


def _state(seen: dict[str, Any]) -> list[dict[str, Any]]:
    return [g.model_dump(mode="json", exclude_none=True) for g in seen.get("gpu_state") or ()]


# ------------------------------------------------------------------------------------- through observe_runtime


def test_an_amd_hosts_visible_gpus_are_named_with_their_driver_power_cap_and_gfx_clocks(amd: FakeAmdSmi) -> None:
    seen = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "1,3"}))
    assert seen["gpu_names"] == ["AMD Instinct MI300X"] * 2 and seen["driver_version"] == "6.10.5"
    # the server's GPUs only, in HIP's order; GPU 3's GFX engines said N/A: its clocks are absent, its cap read
    assert _state(seen) == [
        {"index": 1, "power_limit_w": 600.0, "sm_clock_max_mhz": 2100.0, "sm_clock_mhz": 2100.0,
         "clock_domain": "gfx"},
        {"index": 3, "power_limit_w": 750.0, "clock_domain": "gfx"}]
    # one call per fact family, and the listing that gives HIP's order of the GPUs the indices count in
    assert amd.asked() == ["static --asic --driver --limit --json", "metric --clock --json", "list -e --json"]

    hardware = hardware_provenance(_job(), seen)
    assert hardware["gpu_names"] == ["AMD Instinct MI300X"] * 2 and hardware["driver_version"] == "6.10.5"
    typed = Provenance.model_validate({"hardware": hardware})
    assert typed.gpu_name == "AMD Instinct MI300X"  # what `sim calibrate` keys on
    assert isinstance(typed.hardware, Hardware) and typed.hardware.power_limits_w == (600.0, 750.0)


def test_hip_indices_name_the_gpus_hip_numbers_not_amd_smis(amd: FakeAmdSmi) -> None:
    """HIP numbers the GPUs in ROCr's enumeration order, which amd-smi's own index need not follow; `amd-smi list -e`
    gives each GPU's `hip_id`. HIP_VISIBLE_DEVICES=1,3 is the GPUs whose hip_id is 1 and 3 (amd-smi's 3 and 2 here),
    whose power caps and clocks the job records; it recorded amd-smi's GPUs 1 and 3."""
    (amd.dir / "list.json").write_text(json.dumps(_list_e(hip_ids=[2, 0, 3, 1])))
    seen = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "1,3"}))
    assert [g["index"] for g in _state(seen)] == [3, 2], _state(seen)
    assert _state(seen)[1] == {"index": 2, "power_limit_w": 750.0, "sm_clock_max_mhz": 2100.0,
                               "sm_clock_mhz": 131.0, "clock_domain": "gfx"}
    rocr = observe_runtime(_handle(), _spec({"ROCR_VISIBLE_DEVICES": "0,2", "HIP_VISIBLE_DEVICES": "1"}))
    assert [g["index"] for g in _state(rocr)] == [0]  # ROCR's 0 and 2 are amd-smi's 1 and 0; HIP's 1 of those: 0
    by_uuid = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": ROCR_UUIDS[1]}))
    assert [g["index"] for g in _state(by_uuid)] == [1]  # a UUID names its GPU whatever the order
    # an amd-smi whose listing gives no hip_id (before `-e` had it, or N/A): its own order, as before
    (amd.dir / "list.json").write_text(json.dumps(_list_e()))
    assert [g["index"] for g in _state(observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "1,3"})))] == [1, 3]


def test_an_index_whose_hip_order_cannot_be_read_names_no_gpu_with_the_reason(amd: FakeAmdSmi) -> None:
    """The preflight orders index entries by the `hip_id` of its own listing; the recording asks amd-smi again. Where
    that asking failed, the GPUs were taken in amd-smi's order (a log line at info level): on a host where the two
    orders differ, the job recorded other GPUs than the ones the preflight checked. Now none is named, with the
    reason kept in the provenance."""
    (amd.dir / "list.json").unlink()  # `amd-smi list` fails (exit 1): `static` and `metric` still answer
    seen = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "1,3"}))
    assert seen["gpu_names"] is None and seen.get("gpu_state") is None, seen
    problem = seen["gpu_names_problem"]
    assert "HIP_VISIBLE_DEVICES=1,3 names GPUs 1, 3 by index, which counts in HIP's order of the GPUs" in problem
    assert "amd-smi list -e --json` failed with exit status 1" in problem and "by UUID" in problem, problem
    assert hardware_provenance(_job(), seen)["gpu_names_problem"] == problem
    # no entry: every GPU is the server's, in no order that matters
    assert observe_runtime(_handle(), _spec())["gpu_names"] == ["AMD Instinct MI300X"] * 4


def test_rocm_7_2s_wrapped_document_and_per_ppt_limits_read_the_same(amd: FakeAmdSmi) -> None:
    amd.serve(STATIC_72, CLOCKS_72)
    seen = observe_runtime(_handle(), _spec({"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "0"}))
    assert seen["gpu_names"] == ["AMD Instinct MI355X"] and seen["driver_version"] == "6.16.6"
    assert _state(seen) == [{"index": 2, "power_limit_w": 1000.0, "sm_clock_max_mhz": 2400.0,
                             "sm_clock_mhz": 107.0, "clock_domain": "gfx"}]


def test_a_rocr_uuid_names_its_gpu_through_amd_smi_list(amd: FakeAmdSmi) -> None:
    seen = observe_runtime(_handle(), _spec({"ROCR_VISIBLE_DEVICES": f"{ROCR_UUIDS[3]},{ROCR_UUIDS[1].lower()}"}))
    assert [g["index"] for g in _state(seen)] == [3, 1]
    assert seen["gpu_names"] == ["AMD Instinct MI300X"] * 2 and "gpu_names_problem" not in seen
    assert "list -e --json" in amd.asked()  # the UUIDs as `llmsweep.visible` lists them, not read here again


@pytest.mark.parametrize("visible, why", [
    ({"HIP_VISIBLE_DEVICES": "0,7"}, "HIP_VISIBLE_DEVICES=0,7 names GPU 7, but amd-smi lists 4 GPUs on this host "
                                     "(0-3)"),
    ({"ROCR_VISIBLE_DEVICES": "GPU-ffffffffffffffff"}, "GPU-ffffffffffffffff, which no GPU of this host has "
                                                       "(listed by amd-smi list -e --json)"),
])
def test_an_entry_that_names_no_gpu_of_the_host_leaves_the_gpus_unnamed_with_the_reason(
        amd: FakeAmdSmi, visible: dict[str, str], why: str) -> None:
    seen = observe_runtime(_handle(), _spec(visible))
    assert seen["gpu_names"] is None and "gpu_state" not in seen
    assert seen["driver_version"] == "6.10.5"  # the same for every GPU of the host
    problem = seen["gpu_names_problem"]
    assert "cannot be named" in problem and why in problem
    assert "`amd-smi list -e`" in problem  # the fix names the tool that lists this host's GPUs
    assert hardware_provenance(_job(), seen)["gpu_names_problem"] == problem


def test_a_guests_amd_smi_without_limit_still_names_the_gpus(amd: FakeAmdSmi) -> None:
    (amd.dir / "guest").touch()
    amd.serve([{k: v for k, v in g.items() if k != "limit"} for g in STATIC_6X], CLOCKS_6X)
    seen = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "0"}))
    assert seen["gpu_names"] == ["AMD Instinct MI300X"] and seen["driver_version"] == "6.10.5"
    assert _state(seen) == [{"index": 0, "sm_clock_max_mhz": 2100.0, "sm_clock_mhz": 132.0, "clock_domain": "gfx"}]
    assert amd.asked()[:2] == ["static --asic --driver --limit --json", "static --asic --driver --json"]


def test_what_amd_smi_says_is_n_a_is_absent_not_guessed(amd: FakeAmdSmi) -> None:
    static = _static_6x(["N/A", 750], name="N/A")  # GPU 0's cap unread; neither GPU's name
    amd.serve(static, _clocks(["N/A", 132], 2100))
    seen = observe_runtime(_handle(), _spec())
    # no list with a hole (it would name fewer GPUs than the server ran on); the driver said its version
    assert seen["gpu_names"] is None and seen["driver_version"] == "6.10.5"
    assert _state(seen) == [{"index": 1, "power_limit_w": 750.0, "sm_clock_max_mhz": 2100.0, "sm_clock_mhz": 132.0,
                             "clock_domain": "gfx"}]  # GPU 0 said nothing: no state rather than an empty one
    hardware = hardware_provenance(_job(), seen)
    assert hardware["gpu_names"] is None and hardware["gpu_state"] == _state(seen)

    static[1]["asic"]["market_name"] = "AMD Instinct MI300X"  # one GPU named of two: still none
    static[0]["driver"]["version"] = "N/A"
    amd.serve(static, _clocks(["N/A", "N/A"], 2100))
    again = observe_runtime(_handle(), _spec())
    assert again["gpu_names"] is None and again["driver_version"] is None
    assert _state(again) == [{"index": 1, "power_limit_w": 750.0, "clock_domain": "gfx"}]


@pytest.mark.parametrize("clocks", ["][", {"gpu_data": "N/A"}, [{"gpu": 0, "clock": "N/A"}],
                                    [{"gpu": "zero", "clock": {}}, {"gpu": 1, "clock": {
                                        "gfx_0": ["132 MHz"], "gfx_1": {"clk": {"value": "fast"}, "max_clk": True}}}]])
def test_a_clock_document_of_an_unknown_shape_leaves_the_clocks_unread(amd: FakeAmdSmi, clocks: object) -> None:
    amd.serve(STATIC_6X, clocks)
    seen = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "0,1"}))
    assert seen["gpu_names"] == ["AMD Instinct MI300X"] * 2
    assert _state(seen) == [{"index": 0, "power_limit_w": 750.0, "clock_domain": "gfx"},
                            {"index": 1, "power_limit_w": 600.0, "clock_domain": "gfx"}]


GPU_1_CLOCKS = [{"index": 1, "sm_clock_max_mhz": 2100.0, "sm_clock_mhz": 2100.0, "clock_domain": "gfx"}]


@pytest.mark.parametrize("static, state", [
    ("amd-smi: warning\n{not json", []),
    ({"gpu_data": "N/A"}, []),
    # GPU "zero" is no index; GPU 1 is listed, its name, driver and cap in no shape known: its clocks alone
    ([{"gpu": "zero", "asic": ["AMD Instinct MI300X"]}, {"gpu": 1, "asic": "N/A", "driver": 6, "limit": [750]}],
     GPU_1_CLOCKS),
])
def test_a_static_document_of_an_unknown_shape_reads_as_nothing_without_an_error(
        amd: FakeAmdSmi, static: object, state: list[dict[str, Any]]) -> None:
    amd.serve(static, CLOCKS_6X)
    seen = observe_runtime(_handle(), _spec())
    assert amd.asked()[0] == "static --asic --driver --limit --json"  # asked, and what it said was not read
    assert seen["gpu_names"] is None and seen["driver_version"] is None and _state(seen) == state
    assert seen["engine_version"] == "0.26.0" and seen["host"] is not None  # the rest of the read-back stands


def test_a_warning_printed_before_the_document_is_skipped(amd: FakeAmdSmi) -> None:
    amd.serve("WARNING: User is missing the following required groups: render, video\n" + json.dumps(STATIC_6X),
              CLOCKS_6X)
    assert observe_runtime(_handle(), _spec())["gpu_names"] == ["AMD Instinct MI300X"] * 4


def test_a_server_on_another_node_or_the_simulator_gets_no_gpu_state_and_no_clock_call(amd: FakeAmdSmi) -> None:
    remote = observe_runtime(_handle("http://10.0.0.7:8000"), _spec({"HIP_VISIBLE_DEVICES": "2"}))
    assert remote["gpu_names"] == ["AMD Instinct MI300X"] and "gpu_state" not in remote
    sim = observe_runtime(_handle(), _spec(engine="sim"))
    assert sim["gpu_names"] == ["AMD Instinct MI300X"] * 4 and "gpu_state" not in sim
    assert not [a for a in amd.asked() if a.startswith("metric")]


def test_run_and_results_show_say_the_gfx_clock_of_an_amd_gpu(amd: FakeAmdSmi) -> None:
    """The line `run` prints as "server's machine: ..." and `results show` as "gpu state": GFX, not SM, on AMD;
    an NVIDIA result stored before `clock_domain` existed still loads and says SM."""
    seen = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "0,1"}))
    typed = Provenance.model_validate({"hardware": hardware_provenance(_job(), seen)}).hardware
    assert isinstance(typed, Hardware)
    assert typed.gpu_state_text() == ("1x 750 W limit, GFX max 2100 MHz, GFX 132 MHz when ready; "
                                      "1x 600 W limit, GFX max 2100 MHz, GFX 2100 MHz when ready")
    stored = Hardware.model_validate({"gpu_state": [{"index": 0, "power_limit_w": 700.0, "sm_clock_max_mhz": 1980.0}]})
    assert stored.gpu_state_text() == "700 W limit, SM max 1980 MHz"


# ------------------------------------------------------------------------------------------------- the parsers


def test_an_amd_smi_value_is_a_number_only_where_it_is_one() -> None:
    assert [number(v) for v in (750, 750.5, "750 W", " 2100 MHz ", _v(600, "W"), _v("132", "MHz"))] == [
        750.0, 750.5, 750.0, 2100.0, 600.0, 132.0]
    assert [number(v) for v in ("N/A", None, True, "AMDSMI_STATUS_NOT_SUPPORTED", "-2 Error 3", [750],
                                {"unit": "W"}, _v("N/A", "W"))] == [None] * 8


def test_the_static_shapes_of_rocm_6_0_6_x_and_7_2_read_alike() -> None:
    old = [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X"}, "driver": {"driver_version": "6.3.6"},
            "limit": {"power": 750, "temperature_edge": 100}}]  # the ROCm 6.0-era amd-smi: plain numbers
    assert parse_static(json.dumps(old)) == {0: AmdGpu(0, "AMD Instinct MI300X", "6.3.6", 750.0)}
    assert parse_static(json.dumps(STATIC_6X))[1] == AmdGpu(1, "AMD Instinct MI300X", "6.10.5", 600.0)
    assert list(parse_static(json.dumps(STATIC_72)).values()) == [
        AmdGpu(i, "AMD Instinct MI355X", "6.16.6", w) for i, w in enumerate([1400.0, 1400.0, 1000.0, 1400.0])]
    # a cap of 0 or a 7.2 GPU whose PPT0 is N/A: unread
    zero = _static_72([1400])
    zero["gpu_data"][0]["limit"]["ppt0"]["socket_power_limit"] = "N/A"
    assert parse_static(json.dumps(zero))[0].power_limit_w is None
    assert parse_static(json.dumps(_static_6x([0])))[0].power_limit_w is None
    assert parse_static("") == {} and parse_static("null") == {}


def test_the_gfx_clock_is_the_first_engine_that_reports_one() -> None:
    assert parse_clocks(json.dumps(CLOCKS_6X)) == {0: GfxClock(2100.0, 132.0), 1: GfxClock(2100.0, 2100.0),
                                                   2: GfxClock(2100.0, 131.0), 3: GfxClock(None, None)}
    # gfx_0 idle at N/A (and engines listed out of order, in capitals): gfx_1's
    clock = {"GFX_2": _engine(140, 2100), "gfx_1": _engine(138, 2100), "gfx_0": _engine("N/A", "N/A"),
             "uclk_aid": {"AID_0": "N/A"}}
    assert parse_clocks(json.dumps({"gpu_data": [{"gpu": "5", "clock": clock}]})) == {5: GfxClock(2100.0, 138.0)}
    # the ROCm 6.0-era one: one `gfx` block, `cur_clk`, plain MHz
    old = [{"gpu": 0, "clock": {"gfx": {"cur_clk": 1230, "min_clk": 500, "max_clk": 2100, "sleep_clk": 0},
                                "mem": {"cur_clk": 1300, "max_clk": 1300}}}]
    assert parse_clocks(json.dumps(old)) == {0: GfxClock(2100.0, 1230.0)}


def test_amd_smi_documents_list_their_gpu_objects_whatever_the_release() -> None:
    gpus = [{"gpu": 0}, {"gpu": 1}]
    assert amd_smi_entries(gpus) == gpus  # ROCm 6.x
    assert amd_smi_entries({"gpu_data": gpus}) == gpus  # 7.x
    assert amd_smi_entries({"gpus": gpus, "tool": "amd-smi"}) == gpus  # another wrapping key
    assert amd_smi_entries({"gpu": 0, "asic": {}}) == [{"gpu": 0, "asic": {}}]  # one GPU's object alone
    assert amd_smi_entries({"gpu_data": "N/A"}) == [{"gpu_data": "N/A"}]
    assert amd_smi_entries([1, "N/A", None]) == [] and amd_smi_entries("N/A") == []


def test_a_clock_block_naming_one_engine_twice_reads_the_first_and_never_raises() -> None:
    """`gfx` and `gfx_0` (or two spellings of one key) both name engine 0: sorting them by number alone, not by
    their blocks (two dicts do not compare), keeps the document's first."""
    text = ('[{"gpu": 0, "clock": {"gfx": {"cur_clk": 132, "max_clk": 2100}, '
            '"gfx_0": {"clk": 140, "max_clk": 2100}}}, {"gpu": "\u00b2", "clock": {}}]')
    assert parse_clocks(text) == {0: GfxClock(max_mhz=2100.0, mhz=132.0)}


def test_an_amd_smi_that_hung_is_not_waited_for_again_in_one_step(amd: FakeAmdSmi, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """A hung amd-smi cost a timeout for each asking: `list -e --json` then `list --json`, `static` with `--limit`
    then without, 30 s each. After one timeout it is not asked again in that step (one preflight, one server's
    recording), and the warning says so once; the next step asks it again, and reads an amd-smi that answers now."""
    import logging

    from llmsweep import visible
    from llmsweep.execute.amd_gpus import query_clocks, query_static

    monkeypatch.setattr(visible, "GPU_TOOL_TIMEOUT_S", 1.0)
    (amd.dir / "hang").touch()
    with caplog.at_level(logging.WARNING, logger="llmsweep.visible"), visible.gpu_tool_step("the first step"):
        with pytest.raises(OSError, match=r"`\S*amd-smi list -e --json` did not answer within 1 s") as hung:
            visible.list_amd_smi(str(amd.dir / "amd-smi"))
        assert amd.asked() == ["list -e --json"], amd.asked()
        assert query_static() is None and query_clocks() == {}  # asked by its bare name: the same amd-smi
        with pytest.raises(OSError, match=r"was not asked: .* did not answer within 1 s earlier in the first step"):
            visible.list_amd_smi("amd-smi")
    assert amd.asked() == ["list -e --json"], amd.asked()
    said = [r.getMessage() for r in caplog.records if "is not asked again" in r.getMessage()]
    assert len(said) == 1 and "amd-smi is not asked again in the first step (the next step" in said[0], said
    assert "list --json" not in str(hung.value)

    (amd.dir / "hang").unlink()  # the stall passed (a server that was initialising is up)
    with visible.gpu_tool_step("the next step"):
        assert (gpus := query_static()) is not None and sorted(gpus) == [0, 1, 2, 3]
        assert visible.list_amd_smi("amd-smi").indices == (0, 1, 2, 3)
    assert amd.asked()[1:] == ["static --asic --driver --limit --json", "list -e --json"], amd.asked()


def test_a_hang_while_one_server_is_recorded_is_asked_again_for_the_next(amd: FakeAmdSmi,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep records each server group's GPUs in one process. An amd-smi that stalled while one was recorded was
    not asked again in the process: every later server went unnamed. One recording waits for it once (`static` with
    `--limit`, neither without it, nor its clocks nor its listing), and the next server's recording asks again."""
    from llmsweep import visible

    monkeypatch.setattr(visible, "GPU_TOOL_TIMEOUT_S", 1.0)
    (amd.dir / "hang").touch()
    seen = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "1,3"}))
    assert seen["gpu_names"] is None and seen.get("gpu_state") is None
    assert amd.asked() == ["static --asic --driver --limit --json"], amd.asked()
    (amd.dir / "hang").unlink()
    later = observe_runtime(_handle(), _spec({"HIP_VISIBLE_DEVICES": "1,3"}))
    assert later["gpu_names"] == ["AMD Instinct MI300X"] * 2 and [g["index"] for g in _state(later)] == [1, 3]
