"""A multinode job renders role by role: every prefill and decode worker with its own parallelism, KV-transfer and
disaggregation flags, on nodes of its own, and the router or frontend that knows them; GPUs per role sum to the
job's. An aggregated job is one `server` role whose launch is exactly `render`'s. What llmsweep cannot launch
disaggregated is refused with the reason."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from llmsweep import engines
from llmsweep.engines.launch import Topology
from llmsweep.errors import ContractError
from llmsweep.plan import Job, jobs_from_files
from llmsweep.policy.registry import all_rules

Plan = Callable[[str], list[Job]]


def flag(argv: tuple[str, ...], name: str) -> str | None:
    if name not in argv:
        return None
    i = argv.index(name)
    return argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""


def mn_recipe(framework: str, image: str, *, prefill: str, decode: str, transfer: str | None = None,
              runner: str = "mi355x-disagg", spec: str = "none", serve: str = "  serve: {}\n") -> str:
    p2p = f"  kv-p2p-transfer: {transfer}\n" if transfer else ""
    return (f"k:\n  image: {image}\n  model: deepseek-ai/DeepSeek-R1-0528\n  model-prefix: dsr1\n"
            f"  runner: {runner}\n  precision: fp8\n  framework: {framework}\n  multinode: true\n  disagg: true\n"
            f"{p2p}  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            f"      - spec-decoding: {spec}\n        conc-list: [8, 16]\n        prefill: {prefill}\n"
            f"        decode: {decode}\n{serve}")


SGLANG_IMAGE = "lmsysorg/sglang:v0.5.16-rocm720-mi35x"
P1_TP8 = "{num-worker: 1, tp: 8, ep: 8, dp-attn: true, additional-settings: [PREFILL_NODES=1]}"
D2_TP8 = "{num-worker: 2, tp: 8, ep: 1, dp-attn: false}"


def check_placement(topology: Topology, job: Job) -> None:
    """GPUs sum to the job's; each worker takes ceil(GPUs / GPUs per node) nodes of its own, within the allocation."""
    assert topology.gpus == job.gpus
    assert topology.gpus_per_node is not None
    seen: list[int] = []
    for role in topology.roles:
        assert len(role.workers) == role.count
        if role.kind == "router":
            assert role.gpus_per_worker == 0 and role.workers[0].nodes == (0,)
            continue
        assert role.nodes_per_worker == math.ceil(role.gpus_per_worker / topology.gpus_per_node)
        for w in role.workers:
            assert len(w.nodes) == role.nodes_per_worker and w.spec.gpus == role.gpus_per_worker
            seen += w.nodes
            assert w.spec.host == f"{{node{w.nodes[0]}}}"
    assert sorted(seen) == list(range(topology.nodes)), "workers own disjoint nodes numbered from 0"


def test_an_aggregated_job_is_one_server_role_with_renders_launch(plan: Plan) -> None:
    text = ("k:\n  image: lmsysorg/sglang:v0.5.16-cu130\n  model: org/m\n  model-prefix: m\n  runner: h200\n"
            "  precision: fp8\n  framework: sglang\n  multinode: false\n  scenarios:\n    fixed-seq-len:\n"
            "    - isl: 1024\n      osl: 1024\n      search-space:\n      - { tp: 4, conc-list: [4] }\n  serve: {}\n")
    (job,) = plan(text)
    topology = engines.render_topology(job)
    assert not topology.disaggregated and [r.kind for r in topology.roles] == ["server"]
    assert topology.roles[0].workers[0].spec == engines.render(job) and topology.gpus == job.gpus == 4


def test_sglang_disagg_renders_prefill_decode_and_the_pd_router(plan: Plan) -> None:
    (job,) = plan(mn_recipe("sglang-disagg", SGLANG_IMAGE, prefill=P1_TP8, decode=D2_TP8, transfer="mori"))
    topology = engines.render_topology(job)
    check_placement(topology, job)
    assert topology.disaggregated and topology.kv_transfer == "mori" and topology.nodes == 3
    prefill, decode, router = topology.roles
    assert (prefill.kind, prefill.count, decode.kind, decode.count) == ("prefill", 1, "decode", 2)
    p = prefill.workers[0].spec
    assert flag(p.argv, "--disaggregation-mode") == "prefill" and flag(p.argv, "--disaggregation-transfer-backend") \
        == "mori"
    # Each worker's own parallelism: prefill has EP8 + DP-attention, decode EP1 without.
    assert flag(p.argv, "--ep-size") == "8" and flag(p.argv, "--enable-dp-attention") == ""
    assert p.env["PREFILL_NODES"] == "1"
    bootstrap = flag(p.argv, "--disaggregation-bootstrap-port")
    assert bootstrap is not None
    for w in decode.workers:
        assert flag(w.spec.argv, "--disaggregation-mode") == "decode" and flag(w.spec.argv, "--ep-size") == "1"
        assert "--enable-dp-attention" not in w.spec.argv and "--disaggregation-bootstrap-port" not in w.spec.argv
    r = router.workers[0].spec
    assert r.argv[:4] == ("python3", "-m", "sglang_router.launch_router", "--pd-disaggregation")
    assert r.argv[r.argv.index("--prefill") + 1:r.argv.index("--prefill") + 3] == (
        f"http://{{node0}}:{p.port}", bootstrap)
    decodes = [r.argv[i + 1] for i, a in enumerate(r.argv) if a == "--decode"]
    assert decodes == [f"http://{w.spec.host}:{w.spec.port}" for w in decode.workers] == [
        f"http://{{node1}}:{p.port}", f"http://{{node2}}:{p.port}"]
    assert r.port != p.port, "the router shares node 0 with the first prefill worker"


def test_the_pd_router_hands_on_the_bootstrap_port_the_prefill_worker_listens_on(plan: Plan) -> None:
    """A recipe's `--disaggregation-bootstrap-port 9100` is what the prefill worker listens on; the router passed
    SGLang's default 8998 whatever it was, so the decode workers would ask a port nothing listens on for the KV."""
    serve = "  serve:\n    args: { --disaggregation-bootstrap-port: 9100 }\n"
    (job,) = plan(mn_recipe("sglang-disagg", SGLANG_IMAGE, prefill=P1_TP8, decode=D2_TP8, transfer="mori",
                            serve=serve))
    prefill, _, router = engines.render_topology(job).roles
    assert flag(prefill.workers[0].spec.argv, "--disaggregation-bootstrap-port") == "9100"
    r = router.workers[0].spec.argv
    assert r[r.index("--prefill") + 2] == "9100", r


def test_a_worker_wider_than_a_node_spans_nodes_with_a_rendezvous(plan: Plan) -> None:
    wide = "{num-worker: 1, tp: 16, ep: 16, dp-attn: true}"
    (job,) = plan(mn_recipe("sglang-disagg", SGLANG_IMAGE, prefill=P1_TP8, decode=wide, transfer="mooncake"))
    topology = engines.render_topology(job, gpus_per_node=8)
    check_placement(topology, job)
    d = topology.roles[1].workers[0]
    assert d.nodes == (1, 2) and flag(d.spec.argv, "--nnodes") == "2"
    assert flag(d.spec.argv, "--node-rank") == "{node_rank}" and flag(d.spec.argv, "--dist-init-addr", ) \
        .startswith("{node1}:")  # type: ignore[union-attr]


def test_vllm_disagg_workers_carry_the_nixl_connector_and_the_router_lists_them(plan: Plan) -> None:
    """NixlConnector with an explicit role per worker (0.26.0 deprecates kv_both), a side-channel port of its own per
    worker (distinct, above 5600, on its node's address, each listed for a placement to move), and llmsweep's PD
    router naming every worker by URL, so moving a worker's port moves the router's with it."""
    (job,) = plan(mn_recipe("vllm-disagg", "vllm/vllm-openai:v0.26.0", prefill=P1_TP8, decode=D2_TP8,
                            transfer="nixl"))
    topology = engines.render_topology(job)
    check_placement(topology, job)
    assert topology.kv_transfer == "nixl"
    ports = []
    for role in topology.roles[:2]:
        for w in role.workers:
            config = json.loads(flag(w.spec.argv, "--kv-transfer-config") or "{}")
            assert config == {"kv_connector": "NixlConnector",
                              "kv_role": {"prefill": "kv_producer", "decode": "kv_consumer"}[role.kind]}
            assert w.spec.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == f"{{node{w.nodes[0]}}}"
            ports.append(int(w.spec.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]))
            span = w.spec.side_ports["VLLM_NIXL_SIDE_CHANNEL_PORT"]
            assert span == 8  # prefill: DP attention over 8 ranks binds 8 ports; decode: 8 reserved, 1 bound
    # the prefill worker's 8 DP ranks bind 5600..5607; each decode worker has 8 of its own after them
    assert ports == [5600, 5608, 5616]
    router = topology.roles[2].workers[0].spec
    assert router.argv[1:6] == ("-m", "llmsweep.cli.main", "router", "--protocol", "vllm-nixl")
    urls = [router.argv[i + 1] for i, a in enumerate(router.argv) if a in ("--prefill", "--decode")]
    assert urls == [f"http://{w.spec.host}:{w.spec.port}" for role in topology.roles[:2] for w in role.workers]
    assert urls[1:] == ["http://{node1}:8100", "http://{node2}:8100"]
    assert router.health_path == "/health" and router.port not in {w.spec.port for r in topology.roles[:2]
                                                                   for w in r.workers}


def test_a_vllm_worker_with_more_dp_ranks_reserves_a_side_channel_port_for_each(plan: Plan) -> None:
    (job,) = plan(mn_recipe("vllm-disagg", "vllm/vllm-openai:v0.26.0", transfer="nixl", decode=D2_TP8,
                            prefill="{num-worker: 2, tp: 16, ep: 16, dp-attn: true}"))
    topology = engines.render_topology(job)
    ports = [int(w.spec.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]) for role in topology.roles[:2] for w in role.workers]
    assert ports == [5600, 5616, 5632, 5640]  # two prefill workers of 16 DP ranks each, then 8 per decode worker
    assert topology.roles[0].workers[0].spec.side_ports == {"VLLM_NIXL_SIDE_CHANNEL_PORT": 16}


def test_vllm_keeps_kv_both_below_the_release_that_documents_nixl_producer_and_consumer(plan: Plan) -> None:
    """Explicit NIXL roles from vLLM 0.11.0 (`vllm.EXPLICIT_KV_ROLES`); an older release keeps kv_both, as do other
    connectors' workers whatever the release."""
    for image, transfer, expected in (("vllm/vllm-openai:v0.10.2", "nixl", {"kv_both"}),
                                      ("vllm/vllm-openai:v0.11.0", "nixl", {"kv_producer", "kv_consumer"}),
                                      ("vllm/vllm-openai:v0.26.0", "mooncake", {"kv_both"})):
        (job,) = plan(mn_recipe("vllm-disagg", image, prefill=P1_TP8, decode=D2_TP8, transfer=transfer))
        topology = engines.render_topology(job)
        roles = {json.loads(flag(w.spec.argv, "--kv-transfer-config") or "{}")["kv_role"]
                 for role in topology.roles[:2] for w in role.workers}
        assert roles == expected, image
        # render still shows the launch; run refuses the old release's roles before any server: no worker would say
        # its role, and the read-back takes each role from the worker's own word
        refusal = engines.launch_refusal(job, executor="local")
        if image.endswith("v0.10.2"):
            assert refusal is not None and "vLLM 0.10.2 names no prefill or decode role" in refusal
        elif transfer == "nixl":
            assert refusal is None


def test_trtllm_disagg_renders_options_per_server_and_the_disaggregated_config(plan: Plan) -> None:
    (job,) = plan(mn_recipe("dynamo-trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0", prefill=P1_TP8,
                            decode=D2_TP8, transfer="ucx", runner="gb300-nv"))
    adapter = engines.get_adapter("trtllm")
    topology = adapter.render_topology(job.model_copy(update={"framework": "trt"}), gpus_per_node=4)
    check_placement(topology, job)
    assert topology.nodes == 2 + 2 * 2, "TP8 workers on 4-GPU nodes take 2 nodes each"
    for role in topology.roles[:2]:
        for w in role.workers:
            (options,) = w.spec.files
            content = yaml.safe_load(options.content)
            assert content["cache_transceiver_config"] == {"backend": "UCX"}
            assert content.get("disable_overlap_scheduler", False) is (role.kind == "prefill")
            assert flag(w.spec.argv, "--extra_llm_api_options") == options.placeholder_path
    server = topology.roles[2].workers[0].spec
    assert server.argv[:3] == ("trtllm-serve", "disaggregated", "-c")
    config = yaml.safe_load(server.files[0].content)
    assert config["context_servers"]["num_instances"] == 1 and config["generation_servers"]["urls"] == [
        f"{{node2}}:{w.spec.port}" for w in topology.roles[1].workers[:1]] + [
        f"{{node4}}:{topology.roles[1].workers[1].spec.port}"]


def test_dynamo_frameworks_launch_dynamo_workers_behind_the_dynamo_frontend(plan: Plan) -> None:
    (job,) = plan(mn_recipe("dynamo-sglang", "nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.7.0", prefill=P1_TP8,
                            decode=D2_TP8, transfer="nixl", runner="gb300-nv"))
    topology = engines.render_topology(job, gpus_per_node=4)
    check_placement(topology, job)
    for role in topology.roles[:2]:
        for w in role.workers:
            assert w.spec.argv[:3] == ("python3", "-m", "dynamo.sglang")
            assert flag(w.spec.argv, "--disaggregation-mode") == role.kind
    assert topology.roles[2].workers[0].spec.argv[:3] == ("python3", "-m", "dynamo.frontend")


@pytest.mark.parametrize(("framework", "image", "transfer", "runner"), [
    ("sglang-disagg", SGLANG_IMAGE, "mori", "mi355x-disagg"),
    ("vllm-disagg", "vllm/vllm-openai:v0.26.0", "nixl", "mi355x-disagg"),
    ("dynamo-sglang", "nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.7.0", "nixl", "gb300-nv"),
    ("dynamo-trt", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.7.0", "ucx", "gb300-nv"),
    ("dynamo-vllm", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0", "nixl", "gb300-nv"),
])
def test_no_two_servers_listen_on_one_port_of_a_node(plan: Plan, framework: str, image: str, transfer: str,
                                                     runner: str) -> None:
    """The front door shares node 0 with prefill worker 0: under Dynamo the SGLang workers' 8000 was the frontend's
    8000; a --port equal to the front door's is refused with the reason."""
    (job,) = plan(mn_recipe(framework, image, prefill=P1_TP8, decode=D2_TP8, transfer=transfer, runner=runner))
    topology = engines.render_topology(job)
    listening = [(w.nodes[0], w.spec.port) for role in topology.roles for w in role.workers]
    assert len(listening) == len(set(listening)), listening
    router = topology.roles[-1].workers[0].spec
    with pytest.raises(ContractError, match=f"both listen on port {router.port} of node 0"):
        engines.render_topology(job, port=router.port)



@pytest.mark.parametrize(("framework", "image", "transfer", "port", "taken"), [
    ("sglang-disagg", SGLANG_IMAGE, "mori", 8998, "prefill worker 0's --disaggregation-bootstrap-port"),
    ("sglang-disagg", SGLANG_IMAGE, "mori", 20000, "prefill worker 0's --dist-init-addr"),
    ("vllm-disagg", "vllm/vllm-openai:v0.26.0", "nixl", 20000, "prefill worker 0's --master-port"),
    ("vllm-disagg", "vllm/vllm-openai:v0.26.0", "nixl", 5601, "prefill worker 0's VLLM_NIXL_SIDE_CHANNEL_PORT"),
])
def test_a_port_equal_to_one_a_worker_listens_on_besides_its_own_is_refused(
        plan: Plan, framework: str, image: str, transfer: str, port: int, taken: str) -> None:
    """`render --port 8998` of an SGLang disaggregated job rendered `--port 8998 … --disaggregation-bootstrap-port
    8998` on its prefill worker (exit 0), where `--port 30000`, the router's, was refused: a --port equal to any port
    the topology assigns on a worker's node (its bootstrap port, a multi-node worker's rendezvous, vLLM's NIXL side
    channel) is refused the same way, naming both, and its fix names the port to avoid."""
    (job,) = plan(mn_recipe(framework, image, prefill=P1_TP8, decode=D2_TP8, transfer=transfer))
    topology = engines.render_topology(job, port=port + 1000, gpus_per_node=4)  # each worker on two nodes
    head = topology.roles[0].workers[0]
    assert len(head.nodes) == 2 and head.spec.port == port + 1000
    with pytest.raises(ContractError, match=f"both listen on port {port} of node 0") as err:
        engines.render_topology(job, port=port, gpus_per_node=4)
    said = str(err.value)
    assert f"prefill worker 0 and its {taken.split(chr(39) + 's ', 1)[1]} would" in said, said
    assert err.value.fix == f"pass another --port for the workers (not {port}: {taken} takes it)"

def test_an_engine_without_a_disaggregated_launch_is_refused_with_the_reason(plan: Plan) -> None:
    (job,) = plan(mn_recipe("atom-disagg", "rocm/atom:v0.1.2", prefill=P1_TP8, decode=D2_TP8, transfer="mori"))
    with pytest.raises(ContractError, match="cannot render atom's disaggregated"):
        engines.render_topology(job)
    # The simulator renders its own roles for any engine's job (the live simulator launches them, locally or
    # under Slurm).
    assert [r.kind for r in engines.render_topology(job, simulate=True).roles] == ["prefill", "decode", "router"]


def test_a_multinode_job_that_is_not_disaggregated_is_refused_not_launched_as_prefill_decode(plan: Plan) -> None:
    """`disagg: false` with prefill and decode pools used to render (and, on the live simulator, run) a
    prefill/decode deployment with a router, stored under the job's `disagg-false` label."""
    from llmsweep.execute.pipeline import launches_roles

    text = mn_recipe("sglang-disagg", SGLANG_IMAGE, prefill=P1_TP8, decode=D2_TP8, transfer="mori")
    (job,) = plan(text.replace("  disagg: true\n", "  disagg: false\n"))
    assert job.multinode and not job.disagg
    for simulate in (False, True):
        with pytest.raises(ContractError, match="not disaggregated") as refused:
            engines.render_topology(job, simulate=simulate)
        # `render`'s fix is `validate`'s (it said to run an aggregated configuration of the model instead)
        assert refused.value.fix == next(r.fix for r in all_rules() if r.id == "launch.multinode-not-disagg")
    assert not launches_roles(job, simulate=True, live=True, executor="slurm")
    # the reason is that it is not disaggregated, live or not, simulated or not (review: live said "disaggregated
    # ... not supported by this executor yet; run it on the simulator with --simulate")
    for simulate in (True, False):
        assert engines.launch_refusal(job, simulate=simulate) == engines.MULTINODE_NOT_DISAGG_REFUSAL
    assert not launches_roles(job, simulate=True, live=True, executor="local")


AGENTIC_HICACHE = """k:
  image: lmsysorg/sglang-rocm:v0.5.17-rocm720-mi35x-20260817
  model: deepseek-ai/DeepSeek-V4-Pro
  model-prefix: dsv4
  runner: cluster:mi355x-amds
  precision: fp4
  framework: sglang-disagg
  kv-p2p-transfer: mori
  multinode: true
  disagg: true
  scenarios:
    agentic-coding:
    - dram-utilization: 0.8
      search-space:
      - spec-decoding: none
        conc-list: [16]
        kv-offloading: dram
        kv-offload-backend: {name: hicache}
        prefill: {num-worker: 1, tp: 8, ep: 1, dp-attn: false}
        decode: {num-worker: 1, tp: 8, ep: 1, dp-attn: false}
  serve: {}
"""


def test_only_the_prefill_pool_of_a_hicache_arm_offloads_kv(plan: Plan) -> None:
    """The DRAM budget is one prefill replica's (`plan.dram`); SGLang's decode server runs without the radix cache
    HiCache extends, so a decode worker with HiCache flags (sized from the prefill budget) would not start."""
    (job,) = plan(AGENTIC_HICACHE)
    topology = engines.render_topology(job)
    by_kind = {r.kind: r for r in topology.roles}
    prefill, decode = by_kind["prefill"].workers[0].spec.argv, by_kind["decode"].workers[0].spec.argv
    assert "--enable-hierarchical-cache" in prefill and flag(prefill, "--hicache-size") is not None
    assert "--enable-hierarchical-cache" not in decode and "--hicache-size" not in decode


def test_tilert_is_refused_with_why_llmsweep_cannot_launch_it(plan: Plan) -> None:
    (job,) = plan(mn_recipe("tilert", "tilert/tilert:1.0", prefill=P1_TP8, decode=D2_TP8, transfer="nixl"))
    assert job.engine is None
    with pytest.raises(ContractError, match="TileRT"):
        engines.render_topology(job)


def test_every_multinode_job_of_the_amd_master_renders_every_role(shared_dir: Path, tmp_path: Path) -> None:
    doc = yaml.safe_load((shared_dir / "reference" / "inferencex" / "amd-master.yaml").read_text())
    for entry in doc.values():
        if isinstance(entry, dict) and entry.get("multinode"):
            entry["serve"] = {}
    master = tmp_path / "amd-master.yaml"
    master.write_text(yaml.safe_dump(doc, sort_keys=False))
    jobs = [j for j in jobs_from_files([master]) if j.multinode]
    assert len(jobs) >= 40
    rendered = refused = 0
    for job in jobs:
        if job.framework == "atom-disagg":
            with pytest.raises(ContractError, match="disaggregated"):
                engines.render_topology(job)
            refused += 1
            continue
        topology = engines.render_topology(job)
        check_placement(topology, job)
        assert [r.kind for r in topology.roles] == ["prefill", "decode", "router"]
        assert topology.roles[0].gpus + topology.roles[1].gpus == job.gpus
        assert topology.kv_transfer == job.kv_p2p_transfer
        rendered += 1
    assert rendered and refused
