"""A row that names a router in front of an aggregated server (InferenceX's optional `vllm-router` for DP attention:
`dsv4-fp4-mi355x-vllm-agentic-mtp`'s conc-64 row): llmsweep launches the server alone, so a real engine's result would
carry a router in its identity that did not run. `run` refuses it with the reason; the simulator runs it and says the
router is not modelled (its balanced DP ranks stand in for it)."""

from __future__ import annotations

from pathlib import Path

from llmsweep import engines
from llmsweep.engines.sim import unmodelled
from llmsweep.plan import Job, jobs_from_files


def _jobs(shared_dir: Path) -> list[Job]:
    ix = shared_dir / "reference" / "inferencex"
    return jobs_from_files([ix / "amd-master.yaml"], runner_config=ix / "runners.yaml",
                           config_keys=["dsv4-fp4-mi355x-vllm-agentic-mtp"])


def test_a_real_engines_aggregated_row_with_a_router_is_refused_and_the_simulator_says_it_models_none(
        shared_dir: Path) -> None:
    jobs = _jobs(shared_dir)
    routed = [j for j in jobs if j.router is not None]
    plain = [j for j in jobs if j.router is None]
    assert routed and plain
    why = engines.launch_refusal(routed[0])
    assert why is not None and "router vllm-router 0.1.14" in why and "did not run" in why and "--simulate" in why
    assert engines.launch_refusal(routed[0], simulate=True) is None
    assert all(engines.launch_refusal(j) is None for j in plain)
    assert any("router (vllm-router 0.1.14" in u for u in unmodelled(routed[0]))
    assert not any("router" in u for j in plain for u in unmodelled(j))
