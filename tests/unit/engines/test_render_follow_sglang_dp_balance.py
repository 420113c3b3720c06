"""SGLang before sgl-project/sglang#16195 asserts `--prefill-round-robin-balance` on a decode worker of dp-size > 1
(and asks for `--load-balance-method round_robin` on the prefill); later releases dropped the assert and route a
prefill's DP ranks by bootstrap room (#16110), where `round_robin` would be wrong: the flags follow the version."""

from __future__ import annotations

from collections.abc import Callable

from llmsweep import engines
from llmsweep.plan import Job

Plan = Callable[[str], list[Job]]
DP8 = "{num-worker: 1, tp: 8, ep: 8, dp-attn: true}"
TP8 = "{num-worker: 1, tp: 8, ep: 1, dp-attn: false}"


def mn_recipe(image: str, *, prefill: str, decode: str) -> str:
    return (f"k:\n  image: {image}\n  model: deepseek-ai/DeepSeek-R1-0528\n  model-prefix: dsr1\n"
            "  runner: mi355x-disagg\n  precision: fp8\n  framework: sglang-disagg\n  multinode: true\n"
            "  disagg: true\n  kv-p2p-transfer: mooncake\n  scenarios:\n    fixed-seq-len:\n    - isl: 8192\n"
            "      osl: 1024\n      search-space:\n      - spec-decoding: none\n        conc-list: [8]\n"
            f"        prefill: {prefill}\n        decode: {decode}\n  serve: {{}}\n")


def launches(plan: Plan, image: str, prefill: str = DP8, decode: str = DP8) -> tuple[tuple[str, ...], ...]:
    (job,) = plan(mn_recipe(image, prefill=prefill, decode=decode))
    topology = engines.render_topology(job, gpus_per_node=8)
    return tuple(topology.roles[i].workers[0].spec.argv for i in (0, 1))


def test_an_sglang_that_asserts_it_gets_the_round_robin_pair(plan: Plan) -> None:
    prefill, decode = launches(plan, "lmsysorg/sglang:v0.5.5-rocm700-mi35x")
    assert "--prefill-round-robin-balance" in decode and "--prefill-round-robin-balance" not in prefill
    i = prefill.index("--load-balance-method")
    assert prefill[i + 1] == "round_robin" and "--load-balance-method" not in decode


def test_a_decode_without_dp_attention_needs_nothing(plan: Plan) -> None:
    prefill, decode = launches(plan, "lmsysorg/sglang:v0.5.5-rocm700-mi35x", prefill=TP8, decode=TP8)
    assert "--prefill-round-robin-balance" not in decode and "--load-balance-method" not in prefill


def test_a_later_sglang_routes_by_bootstrap_room_and_gets_neither(plan: Plan) -> None:
    for image in ("lmsysorg/sglang:v0.5.16-rocm720-mi35x", "lmsysorg/sglang:v0.5.9-rocm700-mi35x"):
        prefill, decode = launches(plan, image)
        assert "--prefill-round-robin-balance" not in decode and "--load-balance-method" not in prefill, image
