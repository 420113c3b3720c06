"""Review of the render-follow merge: a `--kv-transfer-config` the policy now reads for its gated keys must not stop
the feature-gate rules. `"connectors": 5` (no list) raised TypeError inside `kv_transfer_keys`, and
`engine.feature-gate` could not run for any job of the validation ('policy.internal: report this as an llmsweep bug'),
so every other gate verdict was lost too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmsweep.catalog.engines import kv_transfer_keys
from llmsweep.policy import validate_files


def _recipe(transfer: dict[str, Any]) -> str:
    flag = json.dumps(json.dumps(transfer))  # a YAML double-quoted string holding the JSON text
    return ("k:\n  image: vllm/vllm-openai:v0.11.0\n  model: MiniMaxAI/MiniMax-M3\n  model-prefix: minimaxm3\n"
            "  runner: cluster:h200-cw\n  precision: fp8\n  framework: vllm\n  multinode: false\n  scenarios:\n"
            "    agentic-coding:\n    - search-space:\n"
            "      - { tp: 8, spec-decoding: none, kv-offloading: none, conc-list: [8] }\n"
            f"  serve:\n    args: {{ --max-num-seqs: 16, --kv-transfer-config: {flag} }}\n")


def test_connectors_that_are_no_list_leave_the_gate_rules_running(tmp_path: Path) -> None:
    transfer: dict[str, Any] = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
                "kv_connector_extra_config": {"cpu_bytes_to_use": 10, "connectors": 5}}
    file = tmp_path / "r.yaml"
    file.write_text(_recipe(transfer))
    findings = validate_files([file]).findings
    assert not [f.render() for f in findings if f.rule == "policy.internal"]
    # the gate the config trips on v0.11.0 (cpu_bytes_to_use needs vllm#24498) is still said
    assert [f for f in findings if f.rule == "engine.feature-gate" and "cpu_bytes_to_use" in f.message]


def test_kv_transfer_keys_of_odd_connectors_and_deep_json() -> None:
    keys = kv_transfer_keys({"kv_connector": "X", "kv_connector_extra_config": {"connectors": 5, "a": 1}})
    assert keys == {"kv_connector": "X", "a": 1}
    assert kv_transfer_keys({"kv_connector_extra_config": {"connectors": {"kv_connector": "Y"}}}) == {}
    assert kv_transfer_keys("[" * 100_000 + "]" * 100_000) == {}  # nested past the decoder's depth: no document
