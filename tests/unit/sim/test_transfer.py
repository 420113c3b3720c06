"""One simulated KV transfer for both paths of a disaggregated deployment (`sim.transfer`): the live decode worker
moves a prompt's KV in the seconds the virtual-time deployment gives the same pair (per-GPU shard of the busier side,
comm efficiency, the pair's link), and the live roles `llmsweep render` launches carry the link the hardware catalog
gives each (prefill, decode) pair, as virtual time has it, and the prefill workers' TP."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.execute.virtual_disagg import disagg_config
from llmsweep.plan import Job, jobs_from_files
from llmsweep.sim.disagg import Cluster, DisaggConfig, RolePlan
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.roles import RoleConfig
from llmsweep.sim.server import SimServer
from llmsweep.sim.transfer import Link, parse_links

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "disagg-sim.yaml"
PD_EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "gpu" / "llama-1b-bf16-h200x2-vllm-1p1d.yaml"
NIC = Link(kind="scale-out", name="test NIC", gbps=25.0, latency_s=20e-6)
NVLINK = Link(kind="scale-up", name="test NVLink", gbps=400.0, latency_s=8e-6)


def test_the_live_decode_worker_moves_kv_in_the_seconds_the_virtual_deployment_gives_the_same_pair() -> None:
    # Prefill workers of TP2 hand KV to a decode worker of TP4: each GPU moves its shard, the prefill side's (half
    # the model's KV) bounds it; only a decode worker told the prefill TP can know that.
    prefill, decode = EngineConfig(model="llama-1b", tp=2), EngineConfig(model="llama-1b", tp=4)
    config = DisaggConfig(prefill=RolePlan(kind="prefill", engine=prefill, gpus_per_worker=2, nodes=((0,), (2,))),
                          decode=RolePlan(kind="decode", engine=decode, gpus_per_worker=4, nodes=((1,),)),
                          scaleup=NVLINK, scaleout=NIC, domain_nodes=2, gpus_per_node=8, transfer_backend="nixl")
    cluster = Cluster(config, model_name="m")
    assert (config.link(0, 0), config.link(1, 0)) == (NVLINK, NIC)  # node 0 shares node 1's domain, node 2 not
    live = SimServer(decode, role=RoleConfig(role="decode", links=(NVLINK, NIC), prefill_tp=2))

    inputs = prefill.perf_inputs()
    efficiency = prefill.efficiency_factors().comm
    assert 0 < efficiency < 1  # the roofline's comm efficiency applies to the link as well
    for p, link in enumerate((NVLINK, NIC)):
        for tokens in (1, 700, 12_345):
            want = link.latency_s + tokens * inputs.kv_bytes_per_token / 2 / (link.gbps * 1e9 * efficiency)
            assert cluster.transfer_time(tokens, p, 0) == pytest.approx(want, rel=1e-12)
            assert live.kv_cost.seconds(tokens, live.role.link_from(p)) == pytest.approx(want, rel=1e-12)
    assert live.kv_cost == cluster.cost
    assert live.kv_cost.nbytes(700) == 700 * inputs.kv_bytes_per_token  # the series count the whole model's bytes


def decode_flags(job: Job) -> tuple[list[Link], int]:
    """The links and prefill TP the rendered live decode worker is launched with (`llmsweep render`)."""
    topology = engines.render_topology(job, simulate=True)
    (decode,) = topology.role("decode").workers  # type: ignore[union-attr]
    argv = decode.spec.argv
    return list(parse_links(argv[argv.index("--kv-links") + 1])), int(argv[argv.index("--prefill-tp") + 1])


def catalog_links(job: Job) -> list[Link]:
    """The link virtual time gives each prefill worker's pair with the decode worker (its catalog source aside,
    which the launch does not carry)."""
    config = disagg_config(job)
    return [config.link(p, 0).model_copy(update={"source": ""}) for p in range(config.prefill.workers)]


@pytest.fixture
def disagg_job() -> Job:
    (job,) = jobs_from_files([RECIPE])
    return job


def test_the_rendered_live_decode_worker_takes_the_catalogs_scale_out_link_and_the_prefill_tp(disagg_job: Job) -> None:
    # MI355X nodes of 8 GPUs, one scale-up domain each: two TP8 prefill workers and the decode worker on three
    # nodes, so KV crosses the scale-out NIC (the catalog's Pollara 400G, 50 GB/s per GPU, 10 us)
    links, prefill_tp = decode_flags(disagg_job)
    (nic,) = set(catalog_links(disagg_job))
    assert (nic.kind, nic.name, nic.gbps, nic.latency_s) == ("scale-out", "Pollara 400G", 50.0, 10e-6)
    assert links == [nic]  # one link: from every prefill worker
    assert prefill_tp == disagg_job.prefill.tp == 8  # type: ignore[union-attr]


def test_the_rendered_live_decode_worker_takes_each_pairs_link_across_an_nvl72_domain(disagg_job: Job) -> None:
    # GB200 NVL72: 4 GPUs per node, 18 nodes per NVLink domain. Ten TP8 prefill workers take nodes 0-19 and the
    # decode worker 20-21: the last prefill worker shares its domain (NVLink), the other nine reach it over the NIC.
    assert disagg_job.prefill is not None
    job = disagg_job.model_copy(update={"runner": "gb200", "runner_label": "gb200", "sku": "gb200",
                                        "prefill": disagg_job.prefill.model_copy(update={"num_worker": 10})})
    links, prefill_tp = decode_flags(job)
    want = catalog_links(job)
    assert [link.kind for link in want] == ["scale-out"] * 9 + ["scale-up"]
    assert (want[9].name, want[9].gbps) == ("nvlink5", 900.0)
    assert links == want and prefill_tp == 8


@pytest.mark.parametrize("gpus_per_node", [1, 2, 8])
def test_workers_on_separate_nodes_of_a_host_sized_domain_move_kv_over_the_nic(gpus_per_node: int) -> None:
    # One TP1 prefill and one TP1 decode worker of H200 (the catalog's NVLink domain: one 8-GPU host), each on a node
    # of its own: with nodes of one GPU they are two hosts too, so the KV crosses the NIC, as with nodes of 8 — the
    # smaller hosts never get the faster link. Render's launch and virtual time's deployment say the same.
    (job,) = jobs_from_files([PD_EXAMPLE], runner_config=PD_EXAMPLE.with_name("fleet.yaml"))
    job = job.model_copy(update={"gpus_per_node": gpus_per_node})
    links, _ = decode_flags(job)
    assert [(link.kind, link.name, link.gbps) for link in links] == [("scale-out", "ConnectX-7 400G", 50.0)]
    assert links == catalog_links(job)
