"""Which multinode jobs `run` launches role by role, and how: only the live simulator, through the local executor
(each role a process of this host) or Slurm (each a step on its node); every other case keeps its refusal. The
simulator renders each role on its node's address with the decode side's modelled link and a PD router over them;
the batch job asks for the topology's nodes; placement fills in node addresses (Slurm) or loopback ports (local); a
worker that needs GPUs gets its share of the host's only when the host has them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.errors import LaunchError
from llmsweep.execute.local import LocalLauncher
from llmsweep.execute.pipeline import launches_roles
from llmsweep.execute.pyxis import NodeLaunch, SrunLauncher, render_srun
from llmsweep.execute.roles import GPU_PARTITION_ENV, AllocatedNode, LocalPlacement, SlurmPlacement, place
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
    (True, True, "local", True),  # each role a process of this host
    (False, False, "local", False),
    (True, True, "docker", False),  # the simulator runs on the host, never from an image
])
def test_only_the_live_simulator_launches_roles_through_local_or_slurm(disagg_job: Job, simulate: bool, live: bool,
                                                                       executor: str, expected: bool) -> None:
    assert engines.launch_refusal(disagg_job) is None  # the simulator's roles are launched as roles
    assert launches_roles(disagg_job, simulate=simulate, live=live, executor=executor) is expected


def test_a_real_engines_disaggregated_job_stays_refused_everywhere(tmp_path: Path) -> None:
    from llmsweep.plan import jobs_from_files

    recipe = tmp_path / "real.yaml"
    recipe.write_text(RECIPE.read_text().replace("engine: { name: sim }", "engine: { name: sglang }"))
    (job,) = jobs_from_files([recipe])
    why = engines.launch_refusal(job)
    assert why is not None and why.startswith(engines.DISAGG_NOT_LAUNCHABLE)
    assert "launches only the simulator's and vLLM's prefill/decode roles" in why
    assert not any(launches_roles(job, simulate=False, live=True, executor=e) for e in ("local", "slurm", "docker"))
    assert launches_roles(job, simulate=True, live=True, executor="local")  # its roles on the simulator


def vllm_disagg(tmp_path: Path, transfer: str = "nixl", framework: str = "vllm-disagg") -> Job:
    from llmsweep.plan import jobs_from_files

    recipe = tmp_path / "vllm.yaml"
    recipe.write_text(RECIPE.read_text().replace("engine: { name: sim }", "engine: { name: vllm }")
                      .replace("framework: sglang-disagg", f"framework: {framework}")
                      .replace("kv-p2p-transfer: mori", f"kv-p2p-transfer: {transfer}")
                      .replace("image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730",
                               "image: vllm/vllm-openai:v0.26.0"))
    (job,) = jobs_from_files([recipe])
    return job


def test_vllms_disaggregated_roles_run_under_the_local_executor_only(tmp_path: Path) -> None:
    """vLLM's adapter launches its roles (NIXL): `run --executor local` starts them, live without --live (a real
    engine is always served); Slurm and docker keep a refusal that names the local executor; validate and render
    (no executor) do not refuse it."""
    from llmsweep.execute.pipeline import job_refusal

    job = vllm_disagg(tmp_path)
    assert engines.launch_refusal(job) is None
    assert engines.launch_refusal(job, executor="local") is None
    assert launches_roles(job, simulate=False, live=False, executor="local")
    for executor in ("slurm", "docker"):
        why = engines.launch_refusal(job, executor=executor)
        assert why is not None and why.startswith(engines.REAL_ROLES_LOCAL_ONLY) and "--executor local" in why
        assert not launches_roles(job, simulate=False, live=False, executor=executor)
        assert job_refusal(job, False, [], executor=executor) == why
    assert job_refusal(job, False, [], executor="local") is None


@pytest.mark.parametrize(("transfer", "framework", "said"), [
    ("mooncake", "vllm-disagg", "launched only with KV over nixl"),
    ("nixl", "dynamo-vllm", "NVIDIA Dynamo deployment"),
])
def test_vllms_roles_that_llmsweep_does_not_read_back_stay_refused(tmp_path: Path, transfer: str, framework: str,
                                                                   said: str) -> None:
    job = vllm_disagg(tmp_path, transfer, framework)
    why = engines.launch_refusal(job, executor="local")
    assert why is not None and said in why
    assert not launches_roles(job, simulate=False, live=False, executor="local")


def test_a_real_engines_disaggregated_eval_row_is_refused_for_its_launch_not_its_eval(tmp_path: Path) -> None:
    """A real engine's disaggregated run-eval row was refused with the eval's reason, whose fix (`--no-evals`) would
    not make it run: its deployment is refused outright, and that is what `run` and `ci matrix` say. The simulator's
    row, in virtual time, keeps the eval's reason (served live, it runs)."""
    from llmsweep.execute.pipeline import job_refusal
    from llmsweep.plan import jobs_from_files

    row = RECIPE.read_text().replace("engine: { name: sim }", "engine: { name: sglang }")
    recipe = tmp_path / "real.yaml"
    recipe.write_text(row)
    (job,) = jobs_from_files([recipe])
    job = job.model_copy(update={"run_eval": True, "eval_conc": job.concs[-1]})
    why = job_refusal(job, False, [], harness_provided=True)
    assert why is not None and why.startswith(engines.DISAGG_NOT_LAUNCHABLE), why
    (sim,) = jobs_from_files([RECIPE])
    sim = sim.model_copy(update={"run_eval": True, "eval_conc": sim.concs[-1]})
    assert "served live" in (job_refusal(sim, False, [], harness_provided=True) or "")
    assert job_refusal(sim, False, [], harness_provided=True, live=True) is None


def test_a_multinode_run_eval_row_that_pins_acceptance_is_refused_even_served_live(tmp_path: Path) -> None:
    """README, "Not done yet": a multinode pinned `run-eval` row is refused (roles are not relaunched): its eval would
    need the deployment relaunched without the pin. Served live role by role it is still refused, with that reason and
    the split that runs it (throughput with --no-evals, the eval with --evals-only); unpinned, the live row runs."""
    from llmsweep.execute.pipeline import job_refusal
    from llmsweep.plan import jobs_from_files

    pinned = RECIPE.read_text().replace(
        "engine: { name: sim }", "engine: { name: sim }\n    spec-decoding: { method: eagle, num-steps: 3, topk: 1, "
        "num-draft-tokens: 4, thinking: \"on\", acceptance-length: 3.39 }").replace(
        "decode: {num-worker: 1", "spec-decoding: mtp\n        decode: {num-worker: 1")
    recipe = tmp_path / "pinned.yaml"
    recipe.write_text(pinned)
    (job,) = jobs_from_files([recipe])
    job = job.model_copy(update={"run_eval": True, "eval_conc": job.concs[-1]})
    for live in (False, True):
        why = job_refusal(job, False, [], harness_provided=True, live=live)
        assert why is not None and "roles are not relaunched yet" in why, why
        assert "--no-evals" in why and "--evals-only" in why
    assert job_refusal(job.model_copy(update={"run_eval": False}), False, [], live=True) is None


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


def test_the_batch_job_asks_for_the_topologys_nodes_whole_and_each_step_for_its_node() -> None:
    spec = engines.LaunchSpec(engine="sim", argv=("python", "-m", "x"), port=0)
    out = Path("/runs/r1/g0")
    script = render_batch_script(spec, SlurmOptions(), name="g0", group_file=out / "group.json", out_dir=out,
                                 launcher_file=out / "node_launch.json", nodes=3)
    assert "#SBATCH --nodes=3" in script and "#SBATCH --ntasks-per-node=1" in script
    assert "--ntasks=1" not in script
    # the deployment holds its nodes whole: its roles listen on fixed ports there (exclusive=false by default)
    assert "#SBATCH --exclusive" in script
    single = render_batch_script(spec, SlurmOptions(), name="g0", group_file=out / "group.json", out_dir=out,
                                 launcher_file=out / "node_launch.json")
    assert "--exclusive" not in single
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
    from types import SimpleNamespace

    from support.loopback import json_doc, serving

    from llmsweep.execute.roles import RoleDeployment

    said: dict[str, object] = {}

    with serving(json_doc(said)) as url:
        topology = engines.render_topology(disagg_job, simulate=True)
        decode = topology.role("decode")
        assert decode is not None and decode.gpus_per_worker == 8
        deployment = RoleDeployment.__new__(RoleDeployment)
        deployment.topology = topology
        nodes = [AllocatedNode(f"n{i}", "127.0.0.1") for i in range(3)]
        deployment.placement = SlurmPlacement(topology, SrunLauncher(NodeLaunch()), nodes, job_id=None)
        handle = SimpleNamespace(base_url=url)
        deployment.started = [(decode, SimpleNamespace(index=0, nodes=[0]), handle)]  # type: ignore[list-item]
        said.update({"role": "decode", "node": "n0", "tp": 4})
        with pytest.raises(LaunchError, match=r"says it runs on 4 GPUs; the topology plans 8"):
            deployment.readback()
        said.pop("tp")
        ran = deployment.readback()
        assert ran.roles[0].workers[0].gpus is None and ran.roles[0].gpus_per_worker == 8


@pytest.mark.parametrize(("said", "error"), [
    ({"ep": 1}, r"says it runs an expert-parallel size of 1; the job plans 8 per decode worker"),
    ({"dp_attention": 1}, r"says it runs DP-attention ranks: 1; the job plans 8 per decode worker"),
    ({"kv_transfer": "mooncake"}, r"says it moves KV over mooncake; the job moves KV over mori"),
])
def test_a_role_that_reports_another_ep_dp_or_transfer_than_planned_fails_the_read_back(
        disagg_job: Job, said: dict[str, object], error: str) -> None:
    """The read-back checked a worker's GPU count only: a decode worker that came up with EP 1, no DP attention or
    another KV transfer than the row's was stored under the row's EP8/DP-attention/MoRI label. What it reports as
    planned passes, and what it does not report is left out of the record, not checked."""
    from types import SimpleNamespace

    from support.loopback import json_doc, serving

    from llmsweep.execute.roles import RoleDeployment

    job = disagg_job.model_copy(update={"decode": disagg_job.decode.model_copy(update={"ep": 8, "dp_attn": True})
                                        if disagg_job.decode is not None else None})
    doc: dict[str, object] = {}
    with serving(json_doc(doc)) as url:
        topology = engines.render_topology(job, simulate=True)
        decode = topology.role("decode")
        assert decode is not None and (decode.ep, decode.dp_ranks) == (8, 8) and topology.kv_transfer == "mori"
        deployment = RoleDeployment.__new__(RoleDeployment)
        deployment.topology = topology
        nodes = [AllocatedNode(f"n{i}", "127.0.0.1") for i in range(3)]
        deployment.placement = SlurmPlacement(topology, SrunLauncher(NodeLaunch()), nodes, job_id=None)
        deployment.started = [(decode, SimpleNamespace(index=0, nodes=[0]), SimpleNamespace(base_url=url))]  # type: ignore[list-item]
        planned = {"role": "decode", "node": "n0", "tp": 8, "ep": 8, "dp_attention": 8, "kv_transfer": "mori"}
        doc.update({**planned, **said})
        with pytest.raises(LaunchError, match=error):
            deployment.readback()
        doc.update(planned)
        ran = deployment.readback()
        described = ran.describe()["roles"]["decode"]
        assert (described["ep"], described["dp_attention"], ran.kv_transfer) == (8, 8, "mori")
        for key in said:
            doc.pop(key)
        assert key not in deployment.readback().describe()["roles"]["decode"]


FOUR_PER_NODE = """labels:
  mi355x-disagg: [mi355x-disagg_0, mi355x-disagg_1, mi355x-disagg_2]
hardware:
  mi355x-disagg:
    available-cpu-dram-mib: 1_000_000
    gpus-per-node: 4
"""


def test_a_slurm_deployments_record_places_each_worker_on_every_node_it_spans_as_virtual_time_does(
        tmp_path: Path) -> None:
    """A fleet of 4 GPUs per node: a TP4 prefill worker on node 0, a TP8 decode worker on nodes 1 and 2. Virtual
    time records `roles.decode.nodes [1, 2]` and `gpus_per_node 4`; the live deployment's record (read back from
    its steps) said `[1]` (each worker's first node) and no GPUs per node."""
    from types import SimpleNamespace

    from support.loopback import json_doc, serving

    from llmsweep.execute.roles import RoleDeployment
    from llmsweep.execute.virtual_disagg import disagg_config
    from llmsweep.plan import jobs_from_files

    fleet, recipe = tmp_path / "fleet.yaml", tmp_path / "r.yaml"
    fleet.write_text(FOUR_PER_NODE)
    recipe.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]").replace(
        "prefill: {num-worker: 2, tp: 8, ep: 8, dp-attn: true}",
        "prefill: {num-worker: 1, tp: 4, ep: 1, dp-attn: false}"))
    (job,) = jobs_from_files([recipe], runner_config=fleet)
    topology = engines.render_topology(job, simulate=True)
    with serving(json_doc({"kv_transfer": "mori"})) as url:  # what a simulator's decode worker says (/version)
        deployment = RoleDeployment.__new__(RoleDeployment)
        deployment.topology = topology
        deployment.placement = SlurmPlacement(topology, SrunLauncher(NodeLaunch()),
                                              [AllocatedNode(f"n{i}", "127.0.0.1") for i in range(3)], job_id=None)
        deployment.started = [(role, w, SimpleNamespace(base_url=url))  # type: ignore[misc]
                              for role in topology.roles for w in role.workers]
        live = deployment.readback().describe()
    virtual = disagg_config(job).describe()
    shared = ("nodes", "gpus", "gpus_per_node", "kv_transfer")
    assert {k: live[k] for k in shared} == {k: virtual[k] for k in shared} == {
        "nodes": 3, "gpus": 12, "gpus_per_node": 4, "kv_transfer": "mori"}
    assert {r: live["roles"][r]["nodes"] for r in live["roles"]} == {
        r: virtual["roles"][r]["nodes"] for r in virtual["roles"]} == {"prefill": [0], "decode": [1, 2], "router": [0]}
    (decode,) = live["roles"]["decode"]["placed"]
    assert (decode["node"], decode["nodes"]) == ("n1", ["n1", "n2"])


def test_on_one_host_every_role_gets_a_loopback_port_of_its_own_and_the_router_points_at_them(
        disagg_job: Job, tmp_path: Path) -> None:
    topology = engines.render_topology(disagg_job, simulate=True)
    placement = LocalPlacement(topology, LocalLauncher(), tmp_path)
    specs = {(role.kind, w.index): placement.place(role, w) for role in topology.roles for w in role.workers}
    ports = [spec.port for spec in specs.values()]
    assert len(set(ports)) == 4 and 8000 not in ports and 8001 not in ports  # not the ports planned per node
    for spec in specs.values():
        assert spec.host == "127.0.0.1" and not any("{node" in a for a in spec.argv)
        assert spec.argv[spec.argv.index("--port") + 1] == str(spec.port)
        assert GPU_PARTITION_ENV not in spec.env  # the simulator needs no GPU
    router = specs[("router", 0)].argv
    urls = [router[i + 1] for i, a in enumerate(router) if a in ("--prefill", "--decode")]
    assert urls == [specs[k].base_url for k in (("prefill", 0), ("prefill", 1), ("decode", 0))]
    assert [n.address for n in placement.nodes] == ["127.0.0.1"]


def _fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int) -> dict[str, str]:
    """This host's environment with an `nvidia-smi` on PATH that lists `gpus` GPUs (and no GPU selection)."""
    import os

    bin_dir = tmp_path / f"bin{gpus}"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    listing = "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)\\n" for i in range(gpus))
    tool.write_text(f"#!/bin/sh\nprintf '{listing}'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '')}")
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ)


def test_a_worker_that_needs_gpus_gets_its_share_of_the_host_only_when_the_host_has_them_all(
        disagg_job: Job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPUs each worker plans, as CUDA_VISIBLE_DEVICES in its launch's env: consecutive GPUs of those this process
    may use; a host with fewer than all the workers need together refuses with the reason (never a silent overlap)."""
    topology = engines.render_topology(disagg_job, simulate=True)
    workers = [(role, w) for role in topology.roles for w in role.workers]
    # as a real engine's workers would: 8 GPUs each (the simulator's own launch asks for none)
    real = topology.model_copy(update={"roles": tuple(
        role.model_copy(update={"workers": tuple(w.model_copy(update={"spec": w.spec.model_copy(update={
            "gpus": role.gpus_per_worker})}) for w in role.workers)}) for role in topology.roles)})
    assert [w.spec.gpus for _r, w in workers] == [0, 0, 0, 0]
    env = _fake_nvidia_smi(tmp_path, monkeypatch, 24)
    placement = LocalPlacement(real, LocalLauncher(), tmp_path, environ=env)
    shares = [placement.place(role, w).env.get(GPU_PARTITION_ENV) for role in real.roles for w in role.workers]
    assert shares == ["0,1,2,3,4,5,6,7", "8,9,10,11,12,13,14,15", "16,17,18,19,20,21,22,23", None]
    # within the GPUs this process was given (physical indices, as the child's own selection replaces it)
    env32 = _fake_nvidia_smi(tmp_path, monkeypatch, 32)
    env32["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(8, 32))
    placement = LocalPlacement(real, LocalLauncher(), tmp_path, environ=env32)
    assert placement.place(real.roles[1], real.roles[1].workers[0]).env[GPU_PARTITION_ENV] == ",".join(
        str(i) for i in range(24, 32))
    with pytest.raises(LaunchError, match=r"need 24 GPUs together \(prefill worker 0 8, prefill worker 1 8, "
                                          r"decode worker 0 8\) but nvidia-smi shows 16 on this host") as refused:
        LocalPlacement(real, LocalLauncher(), tmp_path, environ=_fake_nvidia_smi(tmp_path, monkeypatch, 16))
    # its fix names only what runs it: Slurm refuses a real engine's roles (`engines.REAL_ROLES_LOCAL_ONLY`)
    assert refused.value.fix == "run it on a host with that many GPUs, or on the simulator (--simulate)"
    # a selection naming a GPU the host lacks is refused, never shared out: CUDA would hide it and every GPU after it
    env24 = _fake_nvidia_smi(tmp_path, monkeypatch, 24)
    env24["CUDA_VISIBLE_DEVICES"] = ",".join([*map(str, range(16)), "40", *map(str, range(16, 24))])
    with pytest.raises(LaunchError, match=r"names GPU 40, but nvidia-smi lists 24 GPUs"):
        LocalPlacement(real, LocalLauncher(), tmp_path, environ=env24)
    # one GPU short of one is said in the singular (`llmsweep.words`), never `1 GPU(s)`
    with pytest.raises(LaunchError, match=r"nvidia-smi lists 1 GPU on this host \(0\)"):
        LocalPlacement(real, LocalLauncher(), tmp_path, environ={**_fake_nvidia_smi(tmp_path, monkeypatch, 1),
                                                                 "CUDA_VISIBLE_DEVICES": "0,1"})


def test_a_real_engines_worker_counts_its_share_in_nvidia_smis_order(disagg_job: Job, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's share is nvidia-smi's indices (`gpu_partition`): a real engine's worker runs with
    CUDA_DEVICE_ORDER=PCI_BUS_ID, as an aggregated server does (`preflight.in_bus_order`), or on a host of mixed GPUs
    CUDA's default order (fastest first) would run it on GPUs another worker was given, or that were checked free for
    it; the router, on no GPU, and the simulator's workers get none."""
    topology = engines.render_topology(disagg_job, simulate=True)
    real = topology.model_copy(update={"roles": tuple(
        role.model_copy(update={"workers": tuple(w.model_copy(update={"spec": w.spec.model_copy(update={
            "gpus": role.gpus_per_worker, "engine": "vllm" if role.gpus_per_worker else w.spec.engine})})
            for w in role.workers)}) for role in topology.roles)})
    env = _fake_nvidia_smi(tmp_path, monkeypatch, 24)
    placed = [LocalPlacement(real, LocalLauncher(), tmp_path, environ=env).place(role, w)
              for role in real.roles for w in role.workers]
    assert [spec.env.get(GPU_PARTITION_ENV) for spec in placed] == ["0,1,2,3,4,5,6,7", "8,9,10,11,12,13,14,15",
                                                                      "16,17,18,19,20,21,22,23", None]
    assert [spec.env.get("CUDA_DEVICE_ORDER") for spec in placed] == ["PCI_BUS_ID"] * 3 + [None]
    simulated = LocalPlacement(topology, LocalLauncher(), tmp_path, environ=env)
    assert all("CUDA_DEVICE_ORDER" not in simulated.place(role, w).env for role in topology.roles for w in role.workers)


def test_the_launcher_decides_where_roles_go_and_one_that_cannot_place_them_says_so(disagg_job: Job,
                                                                                    tmp_path: Path) -> None:
    from llmsweep.execute.docker import DockerLauncher
    from llmsweep.execute.roles import role_placement

    topology = engines.render_topology(disagg_job, simulate=True)
    assert isinstance(role_placement(LocalLauncher(), topology, tmp_path, executor="local"), LocalPlacement)
    with pytest.raises(LaunchError, match="the docker launcher cannot place them") as refused:
        role_placement(DockerLauncher(), topology, tmp_path, executor="docker")
    assert "--executor local" in str(refused.value.fix)
    # a Slurm batch job's worker launching without srun would crowd every role onto its first node
    with pytest.raises(LaunchError, match="start as srun steps on the nodes of its Slurm allocation") as refused:
        role_placement(LocalLauncher(), topology, tmp_path, executor="slurm")
    assert "node.use_srun" in str(refused.value.fix)


def test_the_recorded_router_policy_is_the_one_the_router_says_and_none_where_it_says_none() -> None:
    """The deployment's `router_policy` is read from the router that ran (its /version `policy`), never a constant:
    a router that says another policy is recorded with it, one that says none records none."""
    from llmsweep.execute.roles import RanTopology, _router_policy
    from llmsweep.router import ROUTER_POLICY

    def recorded(doc: dict[str, object] | None) -> object:
        ran = RanTopology(disaggregated=True, nodes=["h"], kv_transfer="nixl", router_policy=_router_policy(doc),
                          gpus=2, roles=[])
        return ran.describe()["router_policy"]

    assert ROUTER_POLICY == "round_robin"
    assert recorded({"role": "router", "policy": ROUTER_POLICY}) == "round_robin"
    assert recorded({"role": "router", "policy": "least_load"}) == "least_load"
    assert recorded({"role": "router"}) is None  # said nothing: nothing recorded
    assert recorded(None) is None


def _logged_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int) -> tuple[dict[str, str], Path]:
    """This host's environment with an `nvidia-smi` on PATH that lists `gpus` GPUs, no process computing on them, and
    writes each call's arguments to the log it returns (NVML absent: the tool is the one lister)."""
    import os
    import sys

    bin_dir = tmp_path / "logged"
    bin_dir.mkdir()
    log = bin_dir / "calls.log"
    listing = "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)\\n" for i in range(gpus))
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho \"$*\" >> {log}\ncase \"$1\" in\n  -L) printf '{listing}';;\nesac\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '')}")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return dict(os.environ), log


def test_a_placement_lists_the_hosts_gpus_once_and_asks_once_what_computes_on_them(
        disagg_job: Job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Placing a deployment's workers on one host shares out the GPUs and preflights each worker's share: one listing
    of the host's GPUs and one question of which processes compute on them serve every worker (each asked per worker
    was N + 1 listings and N queries for N workers), also when the selection names GPUs by UUID."""
    topology = engines.render_topology(disagg_job, simulate=True)
    real = topology.model_copy(update={"roles": tuple(
        role.model_copy(update={"workers": tuple(w.model_copy(update={"spec": w.spec.model_copy(update={
            "gpus": role.gpus_per_worker, "engine": "vllm"})}) for w in role.workers)}) for role in topology.roles)})
    env, log = _logged_nvidia_smi(tmp_path, monkeypatch, 24)
    placement = LocalPlacement(real, LocalLauncher(), tmp_path, environ=env)
    assert len([share for share in placement.gpus.values() if share]) == 3
    calls = log.read_text().splitlines()
    assert calls == ["-L", "--query-compute-apps=gpu_uuid,pid,used_memory,process_name --format=csv,noheader,nounits"]
    log.unlink()
    env["CUDA_VISIBLE_DEVICES"] = ",".join(f"GPU-{i:08d}" for i in range(23, -1, -1))
    placement = LocalPlacement(real, LocalLauncher(), tmp_path, environ=env)
    assert placement.place(real.roles[0], real.roles[0].workers[0]).env[GPU_PARTITION_ENV] == "23,22,21,20,19,18,17,16"
    assert log.read_text().splitlines() == calls


def test_roles_that_run_different_simulator_builds_fail_the_read_back_and_one_build_is_the_deployments(
        disagg_job: Job) -> None:
    """A result records one simulator build (`provenance.simulator.digest`); a live deployment recorded its router's
    `/version`, so a worker started from another tree (a node's older install) ran under the router's build unseen.
    Each role's build is read back from its own `/version`: two builds refuse the deployment naming each role's, and
    one build is the deployment's, kept in each worker's `placed` entry."""
    from types import SimpleNamespace

    from support.loopback import json_doc, serving

    from llmsweep.execute.roles import RoleDeployment

    decode_doc: dict[str, object] = {"role": "decode", "node": "n0", "tp": 8, "simulator_digest": "aaaa000000000000"}
    router_doc: dict[str, object] = {"role": "router", "node": "n0", "simulator_digest": "bbbb000000000000"}
    with serving(json_doc(decode_doc)) as decode_url, serving(json_doc(router_doc)) as router_url:
        topology = engines.render_topology(disagg_job, simulate=True)
        decode, router = topology.role("decode"), topology.role("router")
        assert decode is not None and router is not None
        deployment = RoleDeployment.__new__(RoleDeployment)
        deployment.topology = topology
        nodes = [AllocatedNode(f"n{i}", "127.0.0.1") for i in range(3)]
        deployment.placement = SlurmPlacement(topology, SrunLauncher(NodeLaunch()), nodes, job_id=None)
        deployment.started = [(role, SimpleNamespace(index=0, nodes=[0]), SimpleNamespace(base_url=url))  # type: ignore[misc]
                              for role, url in ((decode, decode_url), (router, router_url))]
        with pytest.raises(LaunchError, match=r"run different simulator builds: aaaa000000000000 by decode 0 "
                                              rf"\({decode_url}\); bbbb000000000000 by router 0 \({router_url}\)"):
            deployment.readback()
        router_doc["simulator_digest"] = "aaaa000000000000"
        ran = deployment.readback()
        assert ran.simulator_digest == "aaaa000000000000"
        assert ran.describe()["roles"]["decode"]["placed"][0]["simulator_digest"] == "aaaa000000000000"
        decode_doc.pop("simulator_digest")  # a worker that says no build: the deployment's is none, never a guess
        assert deployment.readback().simulator_digest is None
