"""A KV-offload backend llmsweep's adapter cannot launch is refused for a real run and predicted on the simulator.

InferenceX runs MiniMax-M3 MXFP8 on H200 through vLLM with a Mooncake store as its DRAM tier (agentx-spec §1.3,
`MooncakeStoreConnector`); llmsweep's vLLM adapter launches no Mooncake store, so `serve.kv-offload-backend` refused
the arm, and `predict` / `run --simulate` refused it too, though the simulator serves every backend as a DRAM tier of
the job's `total-cpu-dram-gb`. Under the simulator the finding is now a warning and the result names the backend's
own sizing and eviction as not modelled.
"""

from __future__ import annotations

from pathlib import Path

from support.recipes import engine_recipe

from llmsweep.engines.sim import unmodelled
from llmsweep.findings import Severity
from llmsweep.plan import jobs_from_files
from llmsweep.policy import validate_files

VLLM = ("vllm", "vllm/vllm-openai:v0.27.1")


def _recipe(tmp_path: Path, backend: str) -> Path:
    arm = (f"{{ tp: 8, spec-decoding: none, kv-offloading: dram, kv-offload-backend: {{ name: {backend} }}, "
           "conc-list: [12] }")
    path = tmp_path / f"{backend}.yaml"
    path.write_text(engine_recipe(*VLLM, arm=arm, serve="    args:\n      --max-num-seqs: 64\n",
                                  model="MiniMaxAI/MiniMax-M3-MXFP8"), encoding="utf-8")
    return path


def _backend_findings(path: Path, *, simulate: bool) -> list[Severity]:
    return [f.severity for f in validate_files([path], simulate=simulate).findings
            if f.rule == "serve.kv-offload-backend"]


def test_a_vllm_mooncake_store_arm_is_refused_for_vllm_and_warned_about_on_the_simulator(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "mooncake")
    assert _backend_findings(path, simulate=False) == [Severity.ERROR]
    assert _backend_findings(path, simulate=True) == [Severity.WARNING]


def test_its_simulated_result_names_the_backend_s_own_sizing_as_not_modelled(tmp_path: Path) -> None:
    (job,) = jobs_from_files([_recipe(tmp_path, "mooncake")])
    (note,) = [n for n in unmodelled(job) if "KV-offload backend" in n]
    assert "mooncake" in note and "total-cpu-dram-gb" in note
    (lmcache,) = jobs_from_files([_recipe(tmp_path, "lmcache")])  # a backend the vLLM adapter launches
    assert not [n for n in unmodelled(lmcache) if "KV-offload backend" in n]
    assert _backend_findings(_recipe(tmp_path, "lmcache"), simulate=False) == []
