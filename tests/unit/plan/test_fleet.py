"""The fleet (runners.yaml): packaged default, helpers, and InferenceX's validation messages with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.catalog.fleet import cluster_prefix, default_fleet, gpu_sku, load_fleet
from llmsweep.errors import ConfigError


def test_packaged_fleet_is_inferencex_runners_file(shared_dir: Path) -> None:
    reference = load_fleet(shared_dir / "reference" / "inferencex" / "runners.yaml")
    packaged = default_fleet()
    assert packaged.labels == reference.labels and packaged.hardware == reference.hardware


def test_label_helpers() -> None:
    fleet = default_fleet()
    assert fleet.nodes("mi300x-disagg") == ["mi300x-amds_06", "mi300x-amds_07", "mi300x-amds_08"]
    assert fleet.nodes("gb300-nv") == [], "labels absent from the file are accepted, with no nodes"
    facts = fleet.hardware_of("cluster:b300-nv")
    assert facts is not None and (facts.available_cpu_dram_mib, facts.gpus_per_node) == (2_964_436, 8)
    assert fleet.hardware_of("h200") is None
    assert fleet.gpus_per_node("cluster:gb200-nv") == 4
    assert fleet.gpus_per_node("mi355x-disagg") == 8, "falls back to the GPU family's record"
    assert "cluster:mi300x-amds" in fleet.labels_of_node("mi300x-amds_03")


@pytest.mark.parametrize(("name", "sku"), [
    ("cluster:mi300x-amds", "mi300x"), ("h200-dgxc-slurm_3", "h200"), ("b300-p1", "b300"), ("gb200-nv", "gb200"),
    ("cluster:rtx6000pro-lat", "rtx6000pro"), ("mi355x-disagg", "mi355x"), ("b200-dsv4", "b200"), ("???", None),
])
def test_gpu_sku_from_label_or_node(name: str, sku: str | None) -> None:
    assert gpu_sku(name) == sku


def test_cluster_prefix_picks_the_launcher() -> None:
    assert cluster_prefix("h200-dgxc-slurm_3") == "h200-dgxc-slurm"
    assert cluster_prefix("mi300x-amds_06") == "mi300x-amds"


@pytest.mark.parametrize(("text", "message", "line"), [
    ("hardware: {}\n", "Runner config must define a labels mapping", None),
    ("labels:\n  h200: h200-cw_00\n", "Runner config entry 'h200' must be a list, got str", 2),
    ("labels:\n  h200: []\n", "Runner config entry 'h200' cannot be an empty list", 2),
    ("labels:\n  h200: [1, 2]\n", "Runner config entry 'h200' must contain only strings", 2),
    ("labels:\n  h200: [a_1]\nhardware:\n  h200: {gpus-per-node: 8}\n", "available-cpu-dram-mib", 4),
    ("labels:\n  h200: [a_1]\nhardware:\n  h200: {gpus-per-node: 0, available-cpu-dram-mib: 1}\n", "greater than 0", 4),
])
def test_invalid_runner_files_are_rejected_with_inferencex_messages(tmp_path, text, message, line) -> None:
    path = tmp_path / "runners.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_fleet(path)
    if line is not None:
        assert info.value.findings and info.value.findings[0].line == line
        assert info.value.findings[0].file == str(path)


def test_missing_runner_file() -> None:
    with pytest.raises(ConfigError, match=r"Runner config file 'nope\.yaml' does not exist\."):
        load_fleet("nope.yaml")


def test_a_runner_file_that_is_not_utf8_is_refused_naming_its_line(tmp_path: Path) -> None:
    """A Latin-1 runner file had been a UnicodeDecodeError traceback (exit 1) in every command that reads it."""
    path = tmp_path / "runners.yaml"
    path.write_bytes(b"labels:\n  h200: [caf\xe9_1]\n")
    with pytest.raises(ConfigError, match=rf"{path}:2: runner config is not UTF-8 text") as info:
        load_fleet(path)
    assert "UTF-8" in (info.value.fix or "")


def test_a_runner_config_that_is_a_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"is a directory, not a file") as info:
        load_fleet(tmp_path)
    assert "does not exist" not in str(info.value)


@pytest.mark.parametrize("command", [["validate"], ["run", "--simulate"], ["matrix", "full-sweep", "--config-files"],
                                     ["ci", "matrix"]])
def test_the_cli_refuses_a_non_utf8_runner_file_with_exit_2(command: list[str], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from support.cli import run_main

    recipe = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"
    runners = tmp_path / "runners.yaml"
    runners.write_bytes(b"labels:\n  h200: [\xff]\n")
    code, _, err = run_main(capsys, *command, recipe, "--runner-config", runners)
    assert code == 2, err[-2000:]
    assert "Traceback" not in err and f"{runners}:2: runner config is not UTF-8 text" in err
