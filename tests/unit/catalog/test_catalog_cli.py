"""`llmsweep catalog …` and `llmsweep al …` as a user runs them: output, JSON shape, exit codes, stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli

PACKAGED_CURVES = len(list((resources.files("llmsweep.catalog") / "data" / "golden_al").iterdir()))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_al_prints_value_and_provenance() -> None:
    code, out, err = run("al", "qwen3.5", "--spec-method", "mtp", "--spec-k", "3")
    assert code == 0, err
    assert out.splitlines()[0] == "3.39"
    assert "qwen3.5-397b-a17b-nvfp4" in out and "B300" in out and "27317114007" in out


def test_al_json_for_programs_flags_the_seed_precision_mismatch() -> None:
    code, out, err = run("al", "Qwen/Qwen3.5-397B-A17B-FP8", "--spec-method", "eagle", "--spec-k", "3", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["value"] == 3.39 and data["curve"] == "qwen3.5_mtp" and data["thinking"] == "thinking_on"
    assert data["precision_measured"] == "nvfp4" and data["requested_precision"] == "fp8"
    assert data["precision_mismatch"] is True
    assert data["engine_spellings"]["trtllm"].endswith("=2.39")  # TRT counts draft tokens only: AL - 1


def test_al_human_output_warns_on_precision_mismatch_on_stderr() -> None:
    code, out, err = run("al", "qwen3.5", "--spec-method", "mtp", "--spec-k", "3", "--precision", "fp8")
    assert code == 0
    assert "warning" in err and "nvfp4" in err
    assert "warning" not in out


def test_al_warns_that_amds_mxfp4_checkpoint_is_not_the_nvfp4_one_measured() -> None:
    """The AMD master's qwen3.5 MTP model: its id names MXFP4, the curve was measured on NVFP4 (both had read as fp4).
    NVIDIA's NVFP4 checkpoint, and `--precision fp4` with an id that names no format, are not warned."""
    code, out, err = run("al", "amd/Qwen3.5-397B-A17B-MXFP4", "--spec-method", "mtp", "--spec-k", "3", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["value"] == 3.39 and data["precision_measured"] == "nvfp4" and data["served_precision"] == "mxfp4"
    assert data["precision_mismatch"] is True
    code, out, err = run("al", "amd/Qwen3.5-397B-A17B-MXFP4", "--spec-method", "mtp", "--spec-k", "3",
                         "--precision", "fp4")
    assert code == 0 and out.splitlines()[0] == "3.39"
    assert "warning: curve measured on nvfp4 (qwen3.5-397b-a17b-nvfp4) but the recipe serves mxfp4" in err
    for args in (["nvidia/Qwen3.5-397B-A17B-NVFP4"], ["qwen3.5", "--precision", "fp4"]):
        code, _, err = run("al", *args, "--spec-method", "mtp", "--spec-k", "3")
        assert code == 0 and "warning" not in err, args


def test_al_thinking_off_and_draft_variant() -> None:
    code, out, _ = run("al", "minimaxm3", "--spec-method", "eagle3", "--spec-k", "3", "--thinking", "off",
                       "--draft-model", "Inferact/MiniMax-M3-EAGLE3-GQA")
    assert code == 0 and out.splitlines()[0] == "2.97"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["al", "nosuch", "--spec-method", "mtp", "--spec-k", "3"], "qwen3.5_mtp"),  # unknown model: lists the curves
        (["al", "glm5.2", "--spec-method", "mtp", "--spec-k", "3", "--thinking", "off"], "glm5.2_mtp"),
        (["al", "qwen3.5", "--spec-method", "medusa", "--spec-k", "3"], "eagle3"),
        (["al", "qwen3.5", "--spec-method", "mtp", "--spec-k", "0"], "--spec-k"),
        (["catalog", "image", "lmsysorg/sglang:"], "tag"),
    ],
)
def test_invalid_arguments_exit_2_with_the_reason_on_stderr(args: list[str], says: str) -> None:
    code, out, err = run(*args)
    assert code == 2
    assert says in err and out == ""


@pytest.mark.parametrize("section", ["hardware", "models", "engines", "images", "golden", "fleet"])
def test_every_section_prints_a_table_and_valid_json(section: str) -> None:
    code, out, err = run("catalog", section)
    assert code == 0, err
    assert out.strip()
    code, out, err = run("catalog", section, "--json")
    assert code == 0, err
    assert json.loads(out)


def test_catalog_json_contents() -> None:
    hardware = json.loads(run("catalog", "hardware", "--json")[1])
    assert {h["id"] for h in hardware} >= {"h100", "mi355x"}
    assert all(h["source"] for h in hardware)
    engines = json.loads(run("catalog", "engines", "--json")[1])
    assert any(g["name"] == "SGLANG_SIMULATE_ACC_TOKEN_MODE" and g["min_version"] == "0.5.16" for g in engines["gates"])
    models = json.loads(run("catalog", "models", "--json")[1])
    qwen = next(m for m in models if m["prefix"] == "qwen3.5")
    assert qwen["context_class"] == "256k" and qwen["kv_bytes_per_token"]["bf16"] > 0
    summary = json.loads(run("catalog", "--json")[1])
    assert summary["counts"]["golden"] == PACKAGED_CURVES  # every packaged curve file, none lost


def test_catalog_image_parses_one_reference() -> None:
    code, out, _ = run("catalog", "image", "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", "--json")
    data = json.loads(out)
    assert code == 0 and data["engine"] == "sglang" and data["version"] == "0.5.16"
    assert data["python_version"] == "3.11.15" and data["build_date"] == "2026-07-30"
    code, _, err = run("catalog", "image", "vllm/vllm-openai-rocm:nightly-09663abde0f50944a8d5ea30120666024b503faa")
    assert code == 0 and "version unknown" in err


def test_user_catalog_entry_shows_up(user_catalog: Path) -> None:
    (user_catalog / "golden_al").mkdir()
    (user_catalog / "golden_al" / "mymodel_mtp.yaml").write_text(
        "# Measured on mymodel-fp8 (H200, SGLang MTP), per num_speculative_tokens.\n"
        "mymodel-fp8:\n  thinking_on:\n    1: 1.7\n    2: 2.2\n"
    )
    code, out, err = run("al", "mymodel", "--spec-method", "mtp", "--spec-k", "2")
    assert code == 0, err
    assert out.splitlines()[0] == "2.20"
    assert json.loads(run("catalog", "--json")[1])["counts"]["golden"] == PACKAGED_CURVES + 1


def test_console_entry_point_runs_the_command() -> None:
    out = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "al", "dsv4", "--spec-method", "mtp",
                          "--spec-k", "2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "2.27"


def test_broken_user_catalog_is_reported_once_with_file_and_line(user_catalog: Path) -> None:
    import os

    (user_catalog / "hardware.yaml").write_text("hardware:\n  x1:\n    name: [unclosed\n")
    out = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "catalog", "hardware"],
                         capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert out.returncode == 2
    assert "hardware.yaml:" in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_the_overview_lists_each_section_command_and_each_one_works(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.cli.catalog import SECTIONS

    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run("catalog")
    assert code == 0
    shown = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert shown == list(SECTIONS)  # gates and incompatibilities are counted where `catalog engines` shows them
    assert "feature gates" in out and "incompatibilities" in out
    for section in shown:
        assert run("catalog", section)[0] == 0, section


def test_al_json_states_top_k_as_an_integer() -> None:
    code, out, err = run("al", "qwen3.5", "--spec-method", "mtp", "--spec-k", "3", "--json")
    assert code == 0, err
    top_k = json.loads(out)["sampling"]["top_k"]
    assert top_k == 20 and isinstance(top_k, int)


def test_al_table_has_a_header_and_al_help_lists_the_lookup_it_points_to() -> None:
    code, out, err = run("al", "qwen3.5", "--spec-method", "mtp", "--spec-k", "3")
    assert code == 0, err
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert "field" in header and "value" in header
    code, out, _ = run("al", "--help")
    assert code == 0 and "llmsweep al lookup --help" in out
    commands = out.split("Commands:")[1]
    assert "lookup" in commands and "collect" in commands
    code, out, _ = run("al", "lookup", "--help")
    assert code == 0 and "--spec-method" in out
