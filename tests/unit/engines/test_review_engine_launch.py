"""What an engine launch runs is what the recipe names: DSpark on SGLang is DSpark, `vllm-simple` is vLLM's simple
connector, a `kv-offloading: none` arm keeps KV on the GPU, and an `ep`, a draft tree or a parallelism flag the
launch cannot carry is refused instead of run as something else under the job's name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.recipes import engine_recipe as recipe
from support.recipes import flag

from llmsweep import engines
from llmsweep.errors import ConfigError
from llmsweep.plan import Job, jobs_from_files
from llmsweep.policy import validate_files

KIMI = dict(model="moonshotai/Kimi-K3", prefix="kimik3")
DSPARK = "    spec-decoding: { method: dspark, num-steps: 2, draft-model: Inferact/Kimi-K3-DSpark }\n"


def findings(tmp_path: Path, text: str, rule: str) -> list[str]:
    file = tmp_path / "r.yaml"
    file.write_text(text)
    return [f.render() for f in validate_files([file]).findings if f.rule == rule]


def jobs(tmp_path: Path, text: str) -> list[Job]:
    file = tmp_path / "r.yaml"
    file.write_text(text)
    return jobs_from_files([file])


def test_sglang_dspark_launches_dspark_from_its_first_release(tmp_path: Path) -> None:
    text = recipe("sglang", "lmsysorg/sglang:v0.5.17-cu130", arm="{ tp: 8, spec-decoding: mtp, kv-offloading: none, "
                  "conc-list: [4] }", serve=DSPARK, **KIMI)
    (job,) = jobs(tmp_path, text)
    argv = engines.render(job).argv
    assert flag(argv, "--speculative-algorithm") == "DSPARK"
    assert flag(argv, "--speculative-dspark-block-size") == "2"
    assert flag(argv, "--speculative-draft-model-path") == "Inferact/Kimi-K3-DSpark"
    # SGLang sets DSpark's steps, top-k and draft tokens from the block: none of EAGLE's triple is rendered
    assert not {"--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"} & set(argv)
    assert findings(tmp_path, text, "engine.feature-gate") == []
    old = text.replace("v0.5.17-cu130", "v0.5.15-cu130")
    hits = [h for h in findings(tmp_path, old, "engine.feature-gate") if "DSPARK" in h]
    assert len(hits) == 1 and "0.5.16" in hits[0] and "k.serve.spec-decoding" in hits[0], hits


def test_vllm_simple_is_the_simple_connector_per_rank_and_native_splits_over_dp_engines(tmp_path: Path) -> None:
    arm = "{{ tp: 8, ep: 8, dp-attn: {dp}, kv-offloading: dram, kv-offload-backend: {{ name: {b} }}, conc-list: [8] }}"

    def transfer(backend: str, dp: str) -> tuple[dict[str, Any], int]:
        (job,) = jobs(tmp_path, recipe("vllm", "vllm/vllm-openai:v0.26.0", arm=arm.format(dp=dp, b=backend),
                                       serve="    args: {}\n"))
        assert job.total_cpu_dram_gb
        return json.loads(flag(engines.render(job).argv, "--kv-transfer-config") or "{}"), job.total_cpu_dram_gb

    simple, total = transfer("vllm-simple", "true")
    assert simple["kv_connector"] == "SimpleCPUOffloadConnector"
    assert simple["kv_connector_extra_config"]["cpu_bytes_to_use_per_rank"] * 8 == total * 10**9
    native, total = transfer("native", "true")  # 8 DP engines each read cpu_bytes_to_use as its own pool
    assert native["kv_connector"] == "OffloadingConnector"
    assert native["kv_connector_extra_config"]["cpu_bytes_to_use"] * 8 == total * 10**9
    native, total = transfer("native", "false")
    assert native["kv_connector_extra_config"]["cpu_bytes_to_use"] == total * 10**9
    # an image before the simple connector is refused (an estimate: a warning)
    old = recipe("vllm", "vllm/vllm-openai:v0.11.0", arm=arm.format(dp="false", b="vllm-simple"),
                 serve="    args: {}\n")
    hits = findings(tmp_path, old, "engine.feature-gate")
    assert any("SimpleCPUOffloadConnector" in h for h in hits), hits


def test_num_cpu_blocks_is_refused_where_vllm_no_longer_reads_it(tmp_path: Path) -> None:
    cfg = ('"{\\"kv_connector\\": \\"OffloadingConnector\\", \\"kv_role\\": \\"kv_both\\", '
           '\\"kv_connector_extra_config\\": {\\"num_cpu_blocks\\": 1000}}"')
    arm = "{ tp: 8, kv-offloading: dram, kv-offload-backend: { name: native }, conc-list: [8] }"
    for image, refused in (("vllm/vllm-openai:v0.15.0", True), ("vllm/vllm-openai:v0.13.0", False)):
        text = recipe("vllm", image, arm=arm, serve=f"    args: {{ --kv-transfer-config: {cfg} }}\n")
        hits = [h for h in findings(tmp_path, text, "engine.feature-gate") if "num_cpu_blocks" in h]
        assert bool(hits) is refused, (image, hits)


def test_a_none_arm_that_offloads_is_refused_and_a_vllm_offload_size_counts(tmp_path: Path) -> None:
    sgl = recipe("sglang", "lmsysorg/sglang:v0.5.17-cu130", arm="{ tp: 8, kv-offloading: none, conc-list: [4] }",
                 serve="    args: { --enable-hierarchical-cache: true, --hicache-size: 100 }\n", **KIMI)
    hits = findings(tmp_path, sgl, "kv-offload.none-arm")
    assert len(hits) == 1 and "--enable-hierarchical-cache" in hits[0], hits
    off = sgl.replace("--enable-hierarchical-cache: true, --hicache-size: 100", "--enable-hierarchical-cache: false")
    assert findings(tmp_path, off, "kv-offload.none-arm") == []
    vllm = recipe("vllm", "vllm/vllm-openai:v0.26.0", arm="{ tp: 8, kv-offloading: none, conc-list: [4] }",
                  serve="    args: { --kv-offloading-backend: native, --kv-offloading-size: 64 }\n")
    assert len(findings(tmp_path, vllm, "kv-offload.none-arm")) == 1
    # on a dram arm a hand-written size above the budget is the budget rule's
    dram = recipe("vllm", "vllm/vllm-openai:v0.26.0",
                  arm="{ tp: 8, kv-offloading: dram, kv-offload-backend: { name: native }, conc-list: [4] }",
                  serve="    args: { --kv-offloading-size: 5000 }\n")
    hits = findings(tmp_path, dram, "kv-offload.dram-budget")
    assert len(hits) == 1 and "--kv-offloading-size 5000 GiB" in hits[0], hits


def test_lmcache_tuning_on_a_none_arm_is_no_offload_and_its_cpu_switch_is(tmp_path: Path) -> None:
    """A kvnone arm beside an lmcache arm, sharing `serve.env: {LMCACHE_CHUNK_SIZE: "256"}`, had been refused as
    keeping KV in host memory: without an LMCache connector in its launch no LMCache runs. `LMCACHE_LOCAL_CPU` true
    (LMCache's own CPU-pool switch) and SGLang's `--enable-lmcache` connector are offload."""
    arms = ("{ tp: 8, kv-offloading: none, conc-list: [4] }\n      - { tp: 8, kv-offloading: dram, "
            "kv-offload-backend: { name: lmcache, version: '0.5.3' }, conc-list: [4] }")
    tuned = recipe("vllm", "vllm/vllm-openai:v0.26.0", arm=arms, serve="    env: { LMCACHE_CHUNK_SIZE: '256' }\n")
    assert len(jobs(tmp_path, tuned)) == 2
    assert findings(tmp_path, tuned, "kv-offload.none-arm") == []
    switched = tuned.replace("LMCACHE_CHUNK_SIZE: '256'", "LMCACHE_LOCAL_CPU: 'True'")
    hits = findings(tmp_path, switched, "kv-offload.none-arm")
    assert len(hits) == 1 and "`LMCACHE_LOCAL_CPU` keeps KV in host memory" in hits[0], hits
    assert findings(tmp_path, tuned.replace("LMCACHE_CHUNK_SIZE: '256'", "LMCACHE_LOCAL_CPU: 'False'"),
                    "kv-offload.none-arm") == []
    sgl = recipe("sglang", "lmsysorg/sglang:v0.5.17-cu130", arm="{ tp: 8, kv-offloading: none, conc-list: [4] }",
                 serve="    args: { --enable-lmcache: true }\n", **KIMI)
    hits = findings(tmp_path, sgl, "kv-offload.none-arm")
    assert len(hits) == 1 and "--enable-lmcache" in hits[0], hits


GLM_ATOM = dict(model="amd/GLM-5.2-MXFP4", prefix="glm5.2", runner="cluster:mi355x-amds")
ATOM_IMAGE = "rocm/atom-dev:ubuntu24.04_py3.12_pytorch_release_2.10.0_glm52_agentic_0813"


def test_atom_offloads_kv_through_its_lmcache_connector(tmp_path: Path) -> None:
    """InferenceX's kimik3 and glm5.2 ATOM agentic rows run `kv-offload-backend: lmcache`: any serve block on them had
    been refused (`atom cannot offload KV with lmcache (it has: none)`). ATOM's in-engine `lmcache_offload` connector
    reads LMCache's environment, one `LMCACHE_MAX_LOCAL_CPU_SIZE` pool per TP worker (the budget over TP, as the
    InferenceX script divides it); another backend is still refused, and a kvnone arm that writes the connector
    offloads."""
    arm = ("{ tp: 4, kv-offloading: dram, kv-offload-backend: { name: lmcache, version: '0.4.5' }, conc-list: [4], "
           "spec-decoding: mtp }")
    serve = "    spec-decoding: { method: mtp, num-steps: 3 }\n"
    text = recipe("atom", ATOM_IMAGE, arm=arm, serve=serve, **GLM_ATOM)
    assert findings(tmp_path, text, "serve.kv-offload-backend") == []
    (job,) = jobs(tmp_path, text)
    spec = engines.render(job)
    assert json.loads(flag(spec.argv, "--kv-transfer-config") or "{}") == {"kv_connector": "lmcache_offload",
                                                                          "kv_role": "offload"}
    per_rank = (job.total_cpu_dram_gb or 0) // 4
    assert per_rank > 0 and spec.env["LMCACHE_LOCAL_CPU"] == "True"
    assert spec.env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == str(per_rank)
    hits = findings(tmp_path, text.replace("name: lmcache, version: '0.4.5'", "name: hicache"),
                    "serve.kv-offload-backend")
    assert len(hits) == 1 and "atom cannot offload KV with `hicache` (it has: lmcache)" in hits[0], hits
    none = recipe("atom", ATOM_IMAGE, arm="{ tp: 4, kv-offloading: none, conc-list: [4], spec-decoding: mtp }",
                  serve=serve + "    args: { --kv-transfer-config: '{\"kv_connector\": \"lmcache_offload\", "
                  "\"kv_role\": \"offload\"}' }\n", **GLM_ATOM)
    hits = findings(tmp_path, none, "kv-offload.none-arm")
    assert len(hits) == 1 and "--kv-transfer-config" in hits[0], hits


def test_an_ep_the_engine_cannot_size_is_refused(tmp_path: Path) -> None:
    for framework, image in (("vllm", "vllm/vllm-openai:v0.26.0"), ("atom", "rocm/atom:v0.1.3")):
        for ep, refused in ((2, True), (8, False), (1, False)):
            text = recipe(framework, image, scenario="fixed", arm=f"{{ tp: 8, ep: {ep}, conc-list: [4] }}",
                          serve="    args: {}\n")
            hits = findings(tmp_path, text, "serve.ep-size")
            assert bool(hits) is refused, (framework, ep, hits)
    sgl = recipe("sglang", "lmsysorg/sglang:v0.5.17-cu130", scenario="fixed", arm="{ tp: 8, ep: 2, conc-list: [4] }",
                 serve="    args: {}\n")
    assert findings(tmp_path, sgl, "serve.ep-size") == []  # SGLang renders --ep-size 2


def test_a_draft_tree_an_engine_drops_is_refused(tmp_path: Path) -> None:
    tree = "    spec-decoding: { method: eagle, num-steps: 3, topk: 4, num-draft-tokens: 8 }\n"
    chain = "    spec-decoding: { method: eagle, num-steps: 3, topk: 1, num-draft-tokens: 4 }\n"
    arm = "{ tp: 8, spec-decoding: mtp, conc-list: [4] }"
    for framework, image in (("vllm", "vllm/vllm-openai:v0.26.0"), ("atom", "rocm/atom:v0.1.3")):
        hits = findings(tmp_path, recipe(framework, image, scenario="fixed", arm=arm, serve=tree), "serve.spec-tree")
        assert len(hits) == 2, hits
        assert findings(tmp_path, recipe(framework, image, scenario="fixed", arm=arm, serve=chain),
                        "serve.spec-tree") == []
    sgl = recipe("sglang", "lmsysorg/sglang:v0.5.17-cu130", scenario="fixed", arm=arm, serve=tree)
    assert findings(tmp_path, sgl, "serve.spec-tree") == []


def test_parallelism_flags_the_adapters_do_not_derive_are_conflicts(tmp_path: Path) -> None:
    arm = "{ tp: 8, conc-list: [4] }"
    atom = recipe("atom", "rocm/atom:v0.1.3", scenario="fixed", arm=arm, serve="    args: { -dp: 2 }\n")
    assert findings(tmp_path, atom, "serve.parallelism-conflict"), "ATOM's --data-parallel-size"
    trt = recipe("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc14", scenario="fixed", arm=arm,
                 serve="    args: { --cp_size: 2 }\n")
    assert findings(tmp_path, trt, "serve.parallelism-conflict"), "TensorRT-LLM's --cp-size"


def test_an_agentic_atom_launch_turns_prefix_caching_on_unless_the_recipe_chose(tmp_path: Path) -> None:
    """ATOM releases whose `--enable_prefix_caching` is a plain store_true default it off: an agentic replay (which
    measures prefix reuse) ran with no prefix cache. The launch writes it out; a recipe's own choice stands."""
    arm = "{ tp: 8, kv-offloading: none, conc-list: [4] }"
    for args, on, off in (("{}", True, False), ("{ --no-enable-prefix-caching: true }", False, True)):
        (job,) = jobs(tmp_path, recipe("atom", "rocm/atom:v0.1.3", arm=arm, serve=f"    args: {args}\n", **KIMI))
        argv = engines.render(job).argv
        assert ("--enable_prefix_caching" in argv, "--no-enable_prefix_caching" in argv) == (on, off), argv
    fixed = recipe("atom", "rocm/atom:v0.1.3", scenario="fixed", arm="{ tp: 8, conc-list: [4] }",
                   serve="    args: {}\n", **KIMI)
    (job,) = jobs(tmp_path, fixed)
    assert "--enable_prefix_caching" not in engines.render(job).argv  # fixed-length prompts share no prefix


def test_a_dram_budget_below_one_gb_a_rank_is_refused_where_pools_are_sized_per_rank(tmp_path: Path) -> None:
    """SGLang's --hicache-size is whole GB per rank: a budget below one GB a rank renders 0, which SGLang reads as
    'size by --hicache-ratio', a pool that is not the budget's (the rule caught only a budget of exactly 0)."""
    arm = "{ tp: 8, kv-offloading: dram, kv-offload-backend: { name: hicache }, conc-list: [4] }"
    text = recipe("sglang", "lmsysorg/sglang:v0.5.17-cu130", arm=arm, serve="    args: {}\n", **KIMI)
    tiny = text.replace("dram-utilization: 0.8", "dram-utilization: 0.001")
    hits = findings(tmp_path, tiny, "kv-offload.dram-budget")
    assert len(hits) == 1 and "over 8 ranks is 0 GB a rank" in hits[0], hits
    assert findings(tmp_path, text, "kv-offload.dram-budget") == []


def test_a_dp_attention_launch_says_how_the_running_request_cap_it_runs_is_counted(tmp_path: Path) -> None:
    """vLLM's --max-num-seqs is per DP engine, ATOM's per rank, and SGLang's --max-running-requests the server's
    total: the note says the count of the cap in the launch's argv (a recipe's own cap, not the 2 x conc llmsweep
    would set), each engine only its own; an SGLang cap below the DP ranks, which leaves each rank none, is refused
    (the simulator refused the job while validate said nothing, and the note read "4 // 8 = 0")."""
    arm = "{{ tp: 8, ep: 8, dp-attn: {dp}, kv-offloading: none, conc-list: [{conc}] }}"

    def launch(framework: str, image: str, dp: str = "true", conc: int = 32, args: str = "{}",
               **kw: Any) -> tuple[str, str]:
        text = recipe(framework, image, arm=arm.format(dp=dp, conc=conc), serve=f"    args: {args}\n", **kw)
        (job,) = jobs(tmp_path, text)
        spec = engines.render(job)
        cap = engines.get_adapter(framework).running_cap_flag
        assert cap is not None
        return flag(spec.argv, cap) or "", " ".join(spec.notes)

    vllm, sglang = "vllm/vllm-openai:v0.26.0", "lmsysorg/sglang:v0.5.17-cu130"
    cap, notes = launch("vllm", vllm)
    assert cap == "64"
    assert "--max-num-seqs 64 (2 x conc 32, AgentX's headroom" in notes and "is per DP rank: vLLM" in notes
    assert "server admits up to 512 running requests" in notes and "SGLang" not in notes
    assert "per DP rank" not in launch("vllm", vllm, dp="false")[1]
    cap, notes = launch("vllm", vllm, args="{ --max-num-seqs: 16 }")
    assert cap == "16" and "--max-num-seqs 16 (as serve.args writes it" in notes
    assert "server admits up to 128 running requests" in notes and "512" not in notes
    cap, notes = launch("sglang", sglang)
    assert cap == "64" and "is the server's total: SGLang gives each of its 8 DP-attention ranks 64 // 8 = 8" in notes
    assert "vLLM" not in notes
    cap, notes = launch("sglang", sglang, args="{ --max-running-requests: 20 }")
    assert cap == "20" and "20 // 8 = 2" in notes and "runs at most 16 requests" in notes
    cap, notes = launch("atom", ATOM_IMAGE, "true", 32, "{}", **GLM_ATOM)
    assert cap == "64" and "is per DP rank: ATOM" in notes and "up to 512 running requests" in notes

    # TensorRT-LLM's --max_batch_size is each attention-DP rank's (enable_attention_dp in its LLM-API options)
    trt = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0"
    cap, notes = launch("trtllm", trt)
    assert cap == "64" and "--max_batch_size 64 (2 x conc 32" in notes and "is per DP rank: TensorRT-LLM" in notes
    assert "up to 512 running requests" in notes
    assert "per DP rank" not in launch("trtllm", trt, dp="false")[1]

    small = recipe("sglang", sglang, arm=arm.format(dp="true", conc=2), serve="    args: {}\n")
    (job,) = jobs(tmp_path, small)
    with pytest.raises(ConfigError, match=r"--max-running-requests 4 // 8 = 0 requests"):
        engines.render(job)
    hits = findings(tmp_path, small, "serve.render-failed")
    assert len(hits) == 1 and "4 // 8 = 0 requests" in hits[0] and "concurrency of 4 or more" in hits[0], hits
    assert findings(tmp_path, small.replace("dp-attn: true", "dp-attn: false"), "serve.render-failed") == []
