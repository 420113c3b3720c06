"""`kv-offload.dram-budget` reads host DRAM a vLLM recipe writes by hand in every spelling vLLM takes.

Two spellings passed: (a) under DP attention vLLM's launch is `--data-parallel-size 8`, and each DP engine takes
`cpu_bytes_to_use` (and `--kv-offloading-size`) as its own pool (`engines.vllm.VLLMAdapter._kv_offload`), so 1e12
bytes ask for 8 TB against a budget of 1,676 GB, and nothing was said; (b) the same config given as JSON text, as
vLLM's CLI writes it, gave no finding while the same value as a YAML mapping was refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.recipes import engine_recipe

from llmsweep.findings import Finding
from llmsweep.policy import validate_files

BUDGET = 1676
"""total-cpu-dram-gb of an 8-GPU job on cluster:h200-cw at dram-utilization 0.8."""
DP = ", ep: 8, dp-attn: true"


def budget_hits(tmp_path: Path, args: str, arm: str = "") -> list[Finding]:
    text = engine_recipe("vllm", "vllm/vllm-openai:v0.26.0", serve=f"    args:\n      {args}\n",
                         arm=f"{{ tp: 8{arm}, kv-offloading: dram, kv-offload-backend: {{ name: native }}, "
                             "conc-list: [4] }")
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    result = validate_files([path])
    assert not [f for f in result.findings if f.rule.startswith("schema.")]
    return [f for f in result.findings if f.rule == "kv-offload.dram-budget"]


def offloading(cpu_bytes: object) -> dict[str, object]:
    return {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"cpu_bytes_to_use": cpu_bytes}}


@pytest.mark.parametrize("written", ["1e12", "1000000000000"])
def test_a_per_engine_pool_counts_once_per_dp_engine(tmp_path: Path, written: str) -> None:
    """As the reviewer wrote it (`1e12`, which YAML 1.1 reads as text) and as an integer."""
    args = ("--kv-transfer-config: { kv_connector: OffloadingConnector, kv_role: kv_both, "
            f"kv_connector_extra_config: {{ cpu_bytes_to_use: {written} }} }}")
    (hit,) = budget_hits(tmp_path, args, DP)
    assert hit.is_error and f"cpu_bytes_to_use 1e+12 × 8 DP engines = 8000 GB exceeds the job's total-cpu-dram-gb " \
        f"{BUDGET}" in hit.message, hit.message
    assert budget_hits(tmp_path, args) == []  # one engine: 1000 GB fits


def test_a_dp_launchs_share_of_the_budget_per_engine_passes(tmp_path: Path) -> None:
    """What the adapter renders itself: the budget over the DP engines (200 GB × 8 = 1,600 GB)."""
    args = f"--kv-transfer-config: '{json.dumps(offloading(200_000_000_000))}'"
    assert budget_hits(tmp_path, args, DP) == []


def test_kv_offloading_size_is_one_engines_too(tmp_path: Path) -> None:
    """vLLM's `--kv-offloading-size` (GiB) is one engine's total over its TP ranks: 300 GiB × 8 DP engines."""
    (hit,) = budget_hits(tmp_path, "--kv-offloading-size: 300", DP)
    assert "--kv-offloading-size 300 GiB × 8 DP engines = 2577 GB exceeds" in hit.message, hit.message
    assert budget_hits(tmp_path, "--kv-offloading-size: 300") == []


def test_json_text_is_read_as_the_same_mapping(tmp_path: Path) -> None:
    config = offloading(9_000_000_000_000)
    (as_text,) = budget_hits(tmp_path, f"--kv-transfer-config: '{json.dumps(config)}'")
    (as_map,) = budget_hits(tmp_path, "--kv-transfer-config: { kv_connector: OffloadingConnector, kv_role: kv_both, "
                                      "kv_connector_extra_config: { cpu_bytes_to_use: 9000000000000 } }")
    assert as_text.message == as_map.message
    assert "cpu_bytes_to_use 9e+12 = 9000 GB exceeds" in as_text.message


def test_an_offload_pool_inside_a_multi_connector_is_counted(tmp_path: Path) -> None:
    multi = {"kv_connector": "MultiConnector", "kv_role": "kv_both",
             "kv_connector_extra_config": {"connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                                                          offloading(9_000_000_000_000)]}}
    (hit,) = budget_hits(tmp_path, f"--kv-transfer-config: '{json.dumps(multi)}'")
    assert "9000 GB exceeds" in hit.message
