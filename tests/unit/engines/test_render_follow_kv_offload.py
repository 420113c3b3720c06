"""vLLM's OffloadingConnector reads `cpu_bytes_to_use` only from vllm-project/vllm#24498: an older image (0.11.0 is in
the catalog) refuses to start without `num_cpu_blocks`, so validate refuses the arm instead of launching it."""

from __future__ import annotations

from pathlib import Path

from llmsweep.catalog.engines import check_launch, kv_transfer_keys
from llmsweep.policy import validate_files


def vllm_offload(image: str, backend: str = "native") -> str:
    return (f"k:\n  image: {image}\n  model: MiniMaxAI/MiniMax-M3\n  model-prefix: minimaxm3\n"
            "  runner: cluster:h200-cw\n  precision: fp8\n  framework: vllm\n  multinode: false\n  scenarios:\n"
            "    agentic-coding:\n    - dram-utilization: 0.8\n      search-space:\n"
            f"      - {{ tp: 8, spec-decoding: none, kv-offloading: dram, kv-offload-backend: {{ name: {backend} }}, "
            "conc-list: [8] }\n  serve:\n    args: { --max-num-seqs: 16 }\n")


def gate_hits(tmp_path: Path, text: str) -> list[str]:
    file = tmp_path / "r.yaml"
    file.write_text(text)
    return [f.render() for f in validate_files([file]).findings
            if f.rule == "engine.feature-gate" and "cpu_bytes_to_use" in f.message]


def test_an_offloading_connector_arm_on_a_vllm_that_needs_num_cpu_blocks_is_refused(tmp_path: Path) -> None:
    hits = gate_hits(tmp_path, vllm_offload("vllm/vllm-openai:v0.11.0"))
    assert len(hits) == 1 and "error" in hits[0].lower(), hits
    assert "num_cpu_blocks" in hits[0] and "kv-offload-backend" in hits[0], hits


def test_a_vllm_that_reads_cpu_bytes_to_use_and_lmcache_pass(tmp_path: Path) -> None:
    assert gate_hits(tmp_path, vllm_offload("vllm/vllm-openai:v0.26.0")) == []
    assert gate_hits(tmp_path, vllm_offload("vllm/vllm-openai:v0.11.0", backend="lmcache")) == []


def test_kv_transfer_keys_reach_through_a_multi_connector() -> None:
    offload = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
               "kv_connector_extra_config": {"cpu_bytes_to_use": 10}}
    multi = {"kv_connector": "MultiConnector", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"}, offload]}}
    assert kv_transfer_keys(multi)["cpu_bytes_to_use"] == 10
    verdicts = check_launch("vllm", "0.13.0", kv_transfer_config=kv_transfer_keys(multi))
    assert [v.honoured for v in verdicts] == [False]
    assert kv_transfer_keys("not json") == {}
