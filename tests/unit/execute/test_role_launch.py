"""Which multinode jobs `run` launches role by role, and how: only the live simulator under Slurm (every other case
keeps its refusal); the simulator renders each role on its node's address with the decode side's modelled link and
a PD router over them; the batch job asks for the topology's nodes; placement fills in node addresses."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.errors import LaunchError
from llmsweep.execute.pipeline import launches_roles
from llmsweep.execute.pyxis import NodeLaunch, render_srun
from llmsweep.execute.roles import AllocatedNode, place
from llmsweep.execute.slurm import SlurmOptions, render_batch_script
from llmsweep.plan import Job

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "disagg-sim.yaml"


@pytest.fixture
def disagg_job() -> Job:
    from llmsweep.plan import jobs_from_files

    (job,) = jobs_from_files([RECIPE])
    return job


@pytest.mark.parametrize(("simulate", "live", "executor", "expected"), [
    (True, True, "slurm", True),
    (False, True, "slurm", True),  # the recipe's engine is `sim`
    (True, False, "slurm", False),  # virtual time: the roles run on the virtual clock, no step is launched
    (True, True, "local", False),  # one machine cannot place roles on nodes
    (True, True, "docker", False),
])
def test_only_the_live_simulator_under_slurm_launches_roles(disagg_job: Job, simulate: bool, live: bool,
                                                             executor: str, expected: bool) -> None:
    assert engines.launch_refusal(disagg_job, live=True) is not None  # live: only an executor of roles runs it
    assert engines.launch_refusal(disagg_job) is None  # the sim engine in virtual time runs it role by role
    assert launches_roles(disagg_job, simulate=simulate, live=live, executor=executor) is expected


def test_an_aggregated_job_is_never_launched_by_roles() -> None:
    from llmsweep.plan import jobs_from_files

    jobs = jobs_from_files([RECIPE.with_name("fixed-sim.yaml")])
    assert jobs and all(engines.launch_refusal(job) is None for job in jobs)
    assert not any(launches_roles(job, simulate=True, live=True, executor="slurm") for job in jobs)


def test_the_simulator_renders_its_roles_on_their_nodes_with_a_router_over_them(disagg_job: Job) -> None:
    topology = engines.render_topology(disagg_job, simulate=True)
    prefill, decode, router = topology.roles
    assert (prefill.count, decode.count, topology.nodes, topology.kv_transfer) == (2, 1, 3, "mori")
    assert topology.gpus == disagg_job.gpus == 24
    for role in (prefill, decode):
        for w in role.workers:
            argv = w.spec.argv
            assert argv[argv.index("--role") + 1] == role.kind
            assert argv[argv.index("--host") + 1] == w.spec.host == f"{{node{w.nodes[0]}}}"  # binds its node
    decode_argv = decode.workers[0].spec.argv
    assert "--kv-links" in decode_argv and "--kv-links" not in prefill.workers[0].spec.argv
    r = router.workers[0].spec
    assert r.argv[3:5] == ("sim", "router") and r.host == "{node0}" and r.port != prefill.workers[0].spec.port
    urls = [r.argv[i + 1] for i, a in enumerate(r.argv) if a in ("--prefill", "--decode")]
    assert urls == ["http://{node0}:8000", "http://{node1}:8000", "http://{node2}:8000"]


def test_placement_fills_in_node_addresses_and_refuses_a_node_the_allocation_lacks(disagg_job: Job) -> None:
    topology = engines.render_topology(disagg_job, simulate=True)
    router = topology.roles[-1].workers[0].spec
    nodes = [AllocatedNode("a", "10.0.0.1"), AllocatedNode("b", "10.0.0.2"), AllocatedNode("c", "10.0.0.3")]
    placed = place(router, nodes)
    assert placed.base_url == "http://10.0.0.1:8001" and "http://10.0.0.3:8000" in placed.argv
    assert not any("{node" in a for a in placed.argv)
    with pytest.raises(LaunchError, match="names node 2 but the allocation has 2 node"):
        place(router, nodes[:2])


def test_the_batch_job_asks_for_the_topologys_nodes_and_each_step_for_its_node() -> None:
    spec = engines.LaunchSpec(engine="sim", argv=("python", "-m", "x"), port=0)
    out = Path("/runs/r1/g0")
    script = render_batch_script(spec, SlurmOptions(), name="g0", group_file=out / "group.json", out_dir=out,
                                 launcher_file=out / "node_launch.json", nodes=3)
    assert "#SBATCH --nodes=3" in script and "#SBATCH --ntasks-per-node=1" in script
    assert "--ntasks=1" not in script
    argv = render_srun(spec, NodeLaunch(), "step", node="mn2")
    assert argv[:7] == ["srun", "--overlap", "--ntasks=1", "--export=ALL", "--job-name=step", "--nodes=1",
                        "--nodelist=mn2"]


def test_a_dynamo_job_on_the_simulator_gets_simulator_workers_behind_the_simulated_router(tmp_path: Path) -> None:
    from llmsweep.plan import jobs_from_files

    recipe = tmp_path / "dynamo.yaml"
    recipe.write_text(RECIPE.read_text().replace("framework: sglang-disagg", "framework: dynamo-sglang"))
    (job,) = jobs_from_files([recipe])
    topology = engines.render_topology(job, simulate=True)
    assert [r.kind for r in topology.roles] == ["prefill", "decode", "router"]
    assert all(w.spec.argv[3:5] == ("sim", "serve") for r in topology.roles[:2] for w in r.workers)
    assert topology.roles[2].workers[0].spec.argv[3:5] == ("sim", "router")
    assert launches_roles(job, simulate=True, live=True, executor="slurm")


def test_a_role_that_reports_another_gpu_count_than_planned_fails_the_read_back(disagg_job: Job) -> None:
    """A worker whose server says it runs on 4 GPUs where the topology plans 8 must not be stored under the plan's
    24-GPU label: the read-back refuses it. One that says nothing about its GPUs keeps None in its `placed` entry."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from types import SimpleNamespace

    from llmsweep.execute.roles import RoleDeployment

    said: dict[str, object] = {}

    class Version(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(said).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Version)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        topology = engines.render_topology(disagg_job, simulate=True)
        decode = topology.role("decode")
        assert decode is not None and decode.gpus_per_worker == 8
        deployment = RoleDeployment.__new__(RoleDeployment)
        deployment.topology = topology
        deployment.nodes = [AllocatedNode("n0", "127.0.0.1")]
        handle = SimpleNamespace(base_url=f"http://127.0.0.1:{server.server_port}")
        deployment.started = [(decode, SimpleNamespace(index=0, nodes=[0]), handle)]  # type: ignore[list-item]
        said.update({"role": "decode", "node": "n0", "tp": 4})
        with pytest.raises(LaunchError, match=r"says it runs on 4 GPU\(s\); the topology plans 8"):
            deployment.readback()
        said.pop("tp")
        ran = deployment.readback()
        assert ran.roles[0].workers[0].gpus is None and ran.roles[0].gpus_per_worker == 8
    finally:
        server.shutdown()
