"""Hardware catalog: every SKU InferenceX runs on, found from any label or node name, extendable by users."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmsweep.catalog.hardware import all_hardware, get_hardware, hardware_for_runner
from llmsweep.errors import ConfigError

REQUIRED = {"h100", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x"}


def test_every_required_sku_has_sourced_figures() -> None:
    specs = {h.id: h for h in all_hardware()}
    assert set(specs) >= REQUIRED
    for sku in REQUIRED:
        h = specs[sku]
        assert h.source.startswith("https://"), sku
        assert h.hbm_gb > 0 and h.hbm_tbps > 0 and h.scaleup_gbps > 0 and h.gpus_per_node > 0
        assert h.bf16_tflops and h.fp8_tflops and h.fp8_tflops > h.bf16_tflops


def test_platform_arch_and_fp4_support_follow_the_generation() -> None:
    assert get_hardware("mi300x").platform == "rocm" and get_hardware("mi300x").arch == "gfx942"
    assert get_hardware("mi325x").arch == "gfx942" and get_hardware("mi355x").arch == "gfx950"
    assert get_hardware("h200").platform == "cuda" and get_hardware("h200").arch == "sm90"
    # Hopper and CDNA3 have no FP4 tensor cores; Blackwell and CDNA4 do
    for sku in ("h100", "h200", "mi300x", "mi325x"):
        assert get_hardware(sku).fp4_tflops is None
        assert get_hardware(sku).tflops("fp4") is None
    for sku in ("b200", "b300", "gb200", "gb300", "mi355x"):
        assert get_hardware(sku).tflops("nvfp4") > get_hardware(sku).tflops("fp8")  # type: ignore[operator]
    assert get_hardware("gb200").gpus_per_node == 4


@pytest.mark.parametrize(("sku", "runner_gpus_per_node", "nodes"), [
    ("h200", 8, 1), ("h200", 1, 1), ("h200", 2, 1), ("mi355x", 1, 1),  # a host's domain: the runner's node alone
    ("gb200", 4, 18), ("gb300", 4, 18), ("gb200", 1, 72),  # an NVL72 rack spans hosts: its GPUs over the node's
])
def test_a_scale_up_domain_spans_several_nodes_only_where_the_catalog_says_it_spans_hosts(
        sku: str, runner_gpus_per_node: int, nodes: int) -> None:
    # eight one-GPU nodes of an 8-GPU SKU are eight hosts (joined by the NIC), not one NVLink domain
    assert get_hardware(sku).scaleup_domain_nodes(runner_gpus_per_node) == nodes
    assert get_hardware(sku).domain_spans_nodes == sku.startswith("gb")


@pytest.mark.parametrize("name", ["H200", "h200-sxm", "h200_sxm", " MI300X ", "mi300x"])
def test_lookup_is_case_insensitive_and_accepts_aliases(name: str) -> None:
    assert get_hardware(name).id in {"h200", "mi300x"}


def test_unknown_sku_error_lists_known_ones() -> None:
    with pytest.raises(ConfigError, match="mi300x") as exc:
        get_hardware("tpu-v7")
    assert exc.value.fix and "LLMSWEEP_CATALOG_DIR" in exc.value.fix


@pytest.mark.parametrize(
    ("label", "sku"),
    [
        ("cluster:mi300x-amds", "mi300x"),
        ("h200-dgxc-slurm_3", "h200"),
        ("b300", "b300"),
        ("gb200-nv", "gb200"),
        ("cluster:gb300-nv", "gb300"),
        ("b200-dsv4", "b200"),
        ("mi355x-disagg", "mi355x"),
        ("mi325x-amds_07", "mi325x"),
    ],
)
def test_runner_labels_and_node_names_map_to_skus(label: str, sku: str) -> None:
    spec = hardware_for_runner(label)
    assert spec is not None and spec.id == sku


def test_runner_without_a_catalogued_sku_is_none() -> None:
    assert hardware_for_runner("rtx6000pro-lat") is None
    assert hardware_for_runner("cluster:tpu7x") is None


def test_every_gpu_runner_in_inferencex_runners_file_resolves(shared_dir: Path) -> None:
    runners = yaml.safe_load((shared_dir / "reference" / "inferencex" / "runners.yaml").read_text())
    nodes = {n for label_nodes in runners["labels"].values() for n in label_nodes}
    names = set(runners["labels"]) | nodes | set(runners["hardware"])
    for name in sorted(names):
        if "rtx6000" in name:
            continue  # not a catalogued SKU
        assert hardware_for_runner(name) is not None, name


def test_user_catalog_adds_and_overrides_skus(user_catalog: Path) -> None:
    (user_catalog / "hardware.yaml").write_text(
        """\
hardware:
  rtx6000pro:
    name: NVIDIA RTX PRO 6000 Blackwell Server Edition
    vendor: nvidia
    arch: sm120
    generation: blackwell
    platform: cuda
    aliases: [rtx-pro-6000]
    hbm_gb: 96
    hbm_tbps: 1.6
    bf16_tflops: 500
    fp8_tflops: 1000
    fp4_tflops: 2000
    scaleup: pcie5
    scaleup_gbps: 128
    gpus_per_node: 8
    source: https://example.invalid/rtx-pro-6000
    estimates: {bf16_tflops: rounded}
  h200:
    name: NVIDIA H200 NVL
    vendor: nvidia
    arch: sm90
    generation: hopper
    platform: cuda
    hbm_gb: 141
    hbm_tbps: 4.8
    bf16_tflops: 835
    fp8_tflops: 1670
    fp4_tflops: null
    scaleup: nvlink4
    scaleup_gbps: 900
    gpus_per_node: 4
    source: https://example.invalid/h200-nvl
"""
    )
    spec = hardware_for_runner("rtx6000pro-lat")
    assert spec is not None and spec.arch == "sm120" and spec.is_estimate("bf16_tflops")
    assert get_hardware("h200").gpus_per_node == 4  # the user's entry replaced the packaged one
    assert get_hardware("mi300x").hbm_gb == 206.16  # the rest is still there


def test_invalid_user_entry_names_file_line_and_field(user_catalog: Path) -> None:
    (user_catalog / "hardware.yaml").write_text("hardware:\n  x1:\n    name: X\n    vendor: intel\n")
    with pytest.raises(ConfigError) as exc:
        all_hardware()
    text = str(exc.value)
    assert "hardware.yaml:2" in text and "vendor" in text and "hbm_gb" in text
