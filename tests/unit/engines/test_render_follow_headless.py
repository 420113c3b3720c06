"""vLLM's multi-node worker (multiprocessing backend): the node of rank 0 serves, every node of rank >= 1 runs the same
`vllm serve` with `--headless` (vLLM docs, serving/parallelism_scaling.md, "Running vLLM with MultiProcessing").
One launch with a `{node_rank}` placeholder cannot say that, so the worker carries the followers' launch too."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llmsweep import engines
from llmsweep.cli.render import render_topology_text
from llmsweep.plan import Job

Plan = Callable[[str], list[Job]]
SGLANG_IMAGE = "lmsysorg/sglang:v0.5.16-rocm720-mi35x"
P1_TP8 = "{num-worker: 1, tp: 8, ep: 8, dp-attn: true}"


def mn_recipe(framework: str, image: str, *, prefill: str, decode: str, transfer: str | None = None) -> str:
    p2p = f"  kv-p2p-transfer: {transfer}\n" if transfer else ""
    return (f"k:\n  image: {image}\n  model: deepseek-ai/DeepSeek-R1-0528\n  model-prefix: dsr1\n"
            f"  runner: mi355x-disagg\n  precision: fp8\n  framework: {framework}\n  multinode: true\n  disagg: true\n"
            f"{p2p}  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            f"      - spec-decoding: none\n        conc-list: [8]\n        prefill: {prefill}\n"
            f"        decode: {decode}\n  serve: {{}}\n")
WIDE = "{num-worker: 1, tp: 16, ep: 16, dp-attn: false}"


def test_a_vllm_worker_wider_than_a_node_runs_headless_on_its_other_nodes(plan: Plan) -> None:
    (job,) = plan(mn_recipe("vllm-disagg", "vllm/vllm-openai:v0.26.0", prefill=P1_TP8, decode=WIDE, transfer="nixl"))
    topology = engines.render_topology(job, gpus_per_node=8)
    wide = topology.roles[1].workers[0]
    assert wide.nodes == (1, 2)
    head, follower = wide.spec_on(0), wide.spec_on(1)
    assert "--headless" not in head.argv, "rank 0 serves the API"
    assert follower.argv == (*head.argv, "--headless")
    assert "--nnodes" in follower.argv and "--node-rank" in follower.argv
    with pytest.raises(ValueError):
        wide.spec_on(2)
    # a one-node worker has no followers
    assert all(w.follower is None for w in topology.roles[0].workers)
    text = render_topology_text(job, topology)
    assert text.count("\\\n  --headless") == 1 and "its node after the first: 2" in text


def test_an_sglang_worker_runs_one_launch_on_every_node(plan: Plan) -> None:
    (job,) = plan(mn_recipe("sglang-disagg", SGLANG_IMAGE, prefill=P1_TP8, decode=WIDE, transfer="mooncake"))
    wide = engines.render_topology(job, gpus_per_node=8).roles[1].workers[0]
    assert wide.follower is None and wide.spec_on(1) == wide.spec
