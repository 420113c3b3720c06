"""Adapters render what the job means, in each engine's spelling; recipe flags win; evals never pin acceptance."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from support.recipes import engine_recipe as recipe
from support.recipes import flag

from llmsweep import engines
from llmsweep.errors import ContractError
from llmsweep.plan import Job, jobs_from_files

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
Plan = Callable[[str], list[Job]]


VLLM_SPEC = ("    spec-decoding: { method: eagle3, num-steps: 3, draft-model: Inferact/MiniMax-M3-EAGLE3-GQA }\n")


@pytest.fixture(scope="module")
def seed_jobs() -> list[Job]:
    return jobs_from_files([SEED])


def test_sglang_seed_command_and_synthetic_acceptance(seed_jobs: list[Job]) -> None:
    job = next(j for j in seed_jobs if j.kv_offloading == "none" and j.conc == 8)
    spec = engines.render(job)
    line = " ".join(spec.argv)
    assert "--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 " \
           "--speculative-num-draft-tokens 4 --attention-backend triton --mem-fraction-static 0.75 " \
           "--skip-server-warmup" in line
    assert spec.env == {"SGLANG_ENABLE_SPEC_V2": "1", "SGLANG_SIMULATE_ACC_LEN": "3.39",
                        "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
                        "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}
    assert flag(spec.argv, "--tp-size") == "8" and flag(spec.argv, "--ep-size") == "1"
    assert flag(spec.argv, "--max-running-requests") == "16" and flag(spec.argv, "--cuda-graph-max-bs") == "8"
    assert flag(spec.argv, "--enable-metrics") == ""
    assert spec.metrics_prefix == "sglang:" and spec.port == 30000 and spec.engine_version == "0.5.16"
    assert spec.image == job.image and spec.gpus == 8


def test_sglang_hicache_arm_sizes_the_host_pool_per_rank(seed_jobs: list[Job]) -> None:
    job = next(j for j in seed_jobs if j.kv_offloading == "dram")
    spec = engines.render(job)
    assert flag(spec.argv, "--enable-hierarchical-cache") == ""
    assert job.total_cpu_dram_gb is not None and flag(spec.argv, "--hicache-size") == str(job.total_cpu_dram_gb // 8)
    assert flag(spec.argv, "--hicache-mem-layout") == "layer_first"
    resident = next(j for j in seed_jobs if j.kv_offloading == "none")
    assert "--enable-hierarchical-cache" not in engines.render(resident).argv


def test_recipe_flag_replaces_the_derived_one(plan: Plan) -> None:
    jobs = plan(recipe("sglang", "lmsysorg/sglang:v0.5.16-cu129", model="Qwen/Qwen3.5-397B-A17B-FP8",
                       prefix="qwen3.5", arm="{ tp: 8, spec-decoding: none, kv-offloading: none, conc-list: [128] }",
                       serve="    args:\n      --max-running-requests: 64\n"))
    argv = engines.render(jobs[0]).argv
    assert argv.count("--max-running-requests") == 1 and flag(argv, "--max-running-requests") == "64"
    assert flag(argv, "--cuda-graph-max-bs") == "64"  # min(conc, 64)


def test_vllm_speculative_config_carries_synthetic_acceptance(plan: Plan) -> None:
    jobs = plan(recipe("vllm", "vllm/vllm-openai:v0.26.0",
                       arm="{ tp: 8, ep: 8, spec-decoding: mtp, kv-offloading: dram, "
                           "kv-offload-backend: { name: vllm-simple }, conc-list: [16] }",
                       serve=VLLM_SPEC))
    job = jobs[0]
    assert job.acceptance is not None and job.total_cpu_dram_gb is not None
    spec = engines.render(job)
    cfg = json.loads(flag(spec.argv, "--speculative-config") or "{}")
    assert cfg == {"method": "eagle3", "num_speculative_tokens": 3, "model": "Inferact/MiniMax-M3-EAGLE3-GQA",
                   "rejection_sample_method": "synthetic", "synthetic_acceptance_length": job.acceptance.value}
    assert job.acceptance.value == 2.78  # minimaxm3 eagle3-gqa thinking on K=3, the golden curve
    transfer = json.loads(flag(spec.argv, "--kv-transfer-config") or "{}")
    assert transfer["kv_connector"] == "SimpleCPUOffloadConnector"  # vllm-simple, as InferenceX launches it
    assert transfer["kv_connector_extra_config"] == {
        "cpu_bytes_to_use_per_rank": job.total_cpu_dram_gb * 10**9 // 8, "lazy_offload": False}
    assert spec.env["PYTHONHASHSEED"] == "42"
    assert flag(spec.argv, "--max-num-seqs") == "32" and flag(spec.argv, "--enable-expert-parallel") == ""
    assert spec.argv[:3] == ("vllm", "serve", job.model) and "--enable-metrics" not in spec.argv
    assert spec.metrics_prefix == "vllm:"


def test_eval_launches_never_pin_acceptance(plan: Plan) -> None:
    """A run-eval row's throughput point runs its pin; its eval's launch (a relaunch) and an eval-only job's carry
    no spelling of synthetic acceptance."""
    from llmsweep.engine_ids import acceptance_knobs
    from llmsweep.execute.lifecycle import ServerGroup, eval_launch

    text = recipe("vllm", "vllm/vllm-openai:v0.26.0", scenario="fixed", arm="{ tp: 8, spec-decoding: mtp, "
                  "conc-list: [4, 8, 16] }", serve=VLLM_SPEC.replace("}", ", acceptance-length: 2.78 }"))
    jobs = plan(text)
    (run_eval,) = [j for j in jobs if j.run_eval]
    pinned = json.loads(flag(engines.render(run_eval).argv, "--speculative-config") or "{}")
    assert pinned["synthetic_acceptance_length"] == 2.78, "the run-eval row's throughput point runs its pin"
    knobs = acceptance_knobs()
    for simulate in (False, True):
        spec = engines.render(run_eval, simulate=simulate, port=0)
        relaunch = eval_launch(run_eval, ServerGroup(id="g", spec=spec, jobs=[run_eval]))
        assert relaunch is not None and relaunch.fingerprint() != spec.fingerprint()
        text_of = " ".join([*relaunch.argv, *relaunch.env])
        assert not any(k in text_of for k in (*knobs.env, *knobs.args, *knobs.speculative_config_keys)), text_of
        if not simulate:
            cfg = json.loads(flag(relaunch.argv, "--speculative-config") or "{}")
            assert cfg == {"method": "eagle3", "num_speculative_tokens": 3, "model": cfg["model"]}
    unpinned = run_eval.model_copy(update={"acceptance": None})
    spec = engines.render(unpinned, port=0)
    assert eval_launch(unpinned, ServerGroup(id="g", spec=spec, jobs=[unpinned])) is None, "one server, no pin"
    eval_only = run_eval.model_copy(update={"eval_only": True, "run_eval": False})
    assert "synthetic" not in (flag(engines.render(eval_only).argv, "--speculative-config") or "")
    throughput = [j for j in jobs if not (j.run_eval or j.eval_only)]
    cfg = json.loads(flag(engines.render(throughput[0]).argv, "--speculative-config") or "{}")
    assert cfg["synthetic_acceptance_length"] == 2.78
    assert flag(engines.render(jobs[0]).argv, "--max-model-len") == str(jobs[0].max_model_len)


def test_trtllm_forces_al_minus_one_and_atom_keeps_al(plan: Plan) -> None:
    arm = "{ tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [8] }"
    serve = VLLM_SPEC
    trt = plan(recipe("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0", arm=arm, serve=serve))[0]
    spec = engines.render(trt)
    assert spec.env["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"] == "1.78"
    assert spec.argv[0] == "trtllm-serve" and flag(spec.argv, "--tp_size") == "8"
    atom = plan(recipe("atom", "rocm/atom:rocm7.2.0-ubuntu24.04-pytorch2.9-atom0.1.3", arm=arm, serve=serve,
                       runner="cluster:mi355x-amds"))[0]
    spec = engines.render(atom)
    assert flag(spec.argv, "--spec-decode-acceptance-length") == "2.78"
    assert flag(spec.argv, "--num-speculative-tokens") == "3"


def test_secrets_are_passed_by_name_only(plan: Plan) -> None:
    jobs = plan(recipe("vllm", "vllm/vllm-openai:v0.26.0", arm="{ tp: 1, spec-decoding: none, kv-offloading: "
                       "none, conc-list: [1] }", serve="    secret-env: [MY_GATE]\n    env:\n"
                       "      VLLM_LOGGING_LEVEL: DEBUG\n      WANDB_API_KEY: abc123\n"))
    spec = engines.render(jobs[0])
    assert set(spec.secret_env) == {"MY_GATE", "WANDB_API_KEY"}
    assert "WANDB_API_KEY" not in spec.env and spec.env["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert "abc123" not in spec.shell_command() and "abc123" not in spec.model_dump_json()


def test_sim_translates_the_recipe_into_simulator_flags(plan: Plan) -> None:
    jobs = plan(recipe("vllm", "vllm/vllm-openai:v0.26.0",
                       arm="{ tp: 4, ep: 4, spec-decoding: mtp, kv-offloading: dram, "
                           "kv-offload-backend: { name: vllm-simple }, conc-list: [8] }",
                       serve=VLLM_SPEC + "    args:\n      --gpu-memory-utilization: 0.85\n"
                                         "      --max-num-batched-tokens: 16384\n"))
    job = jobs[0]
    spec = engines.render(job, simulate=True, port=9123)
    argv = spec.argv
    assert argv[1:5] == ("-m", "llmsweep.cli.main", "sim", "serve")
    assert flag(argv, "--hardware") == "h200" and flag(argv, "--tp") == "4" and flag(argv, "--ep") == "4"
    assert flag(argv, "--mem-fraction-static") == "0.85" and flag(argv, "--chunked-prefill-size") == "16384"
    assert flag(argv, "--spec-method") == "eagle3" and flag(argv, "--spec-k") == "3"
    assert flag(argv, "--acceptance-length") == "2.78"
    assert flag(argv, "--kv-offload") == "dram" and float(flag(argv, "--dram-gb") or 0) == job.total_cpu_dram_gb
    assert flag(argv, "--max-running-requests") == "16" and flag(argv, "--port") == "9123"
    assert spec.image is None and spec.gpus == 0 and spec.engine == "sim"


def test_not_runnable_job_renders_only_on_the_simulator(plan: Plan) -> None:
    text = recipe("sglang", "lmsysorg/sglang:v0.5.16-cu129", arm="{ tp: 2, spec-decoding: none, kv-offloading: "
                  "none, conc-list: [4] }", serve="")
    text = text.replace("  serve:\n", "")
    job = plan(text)[0]
    with pytest.raises(ContractError, match="not runnable"):
        engines.render(job)
    spec = engines.render(job, simulate=True)
    assert flag(spec.argv, "--tp") == "2" and flag(spec.argv, "--engine-style") == "sglang"


def test_launch_fingerprint_separates_launches(seed_jobs: list[Job]) -> None:
    a, b = seed_jobs[0], seed_jobs[1]
    assert engines.launch_fingerprint(a) == engines.launch_fingerprint(a)
    assert engines.launch_fingerprint(a) != engines.launch_fingerprint(b)  # sizing follows conc
    assert engines.launch_fingerprint(a) != engines.launch_fingerprint(a, simulate=True)


def test_shell_command_round_trips(seed_jobs: list[Job]) -> None:
    spec = engines.render(seed_jobs[0])
    words = shlex.split(spec.shell_command())
    assert words[-len(spec.argv):] == list(spec.argv)


@pytest.mark.parametrize("method", ["mtp", "eagle", "eagle3", "draft_model", "dspark", "ngram", "medusa"])
def test_every_simulator_flag_is_one_sim_serve_accepts(plan: Plan, method: str) -> None:
    from llmsweep.cli.sim import serve

    spec_block = f"    spec-decoding: {{ method: {method}, num-steps: 2 }}\n"
    jobs = plan(recipe("sglang", "lmsysorg/sglang:v0.5.16-cu129",
                       arm="{ tp: 4, spec-decoding: mtp, kv-offloading: dram, kv-offload-backend: { name: hicache }, "
                           "conc-list: [4] }",
                       serve=spec_block + "    args:\n      --kv-cache-dtype: fp8_e4m3\n      --hicache-size: 100\n"
                                          "      --chunked-prefill-size: 4096\n"))
    argv = engines.render(jobs[0], simulate=True).argv
    ctx = serve.make_context("serve", list(argv[5:]))  # click rejects unknown flags and bad values
    assert ctx.params["kv_offload"] == "dram" and ctx.params["dram_gb"] == 400.0
    assert ctx.params["kv_dtype"] == "fp8" and ctx.params["chunked_prefill_size"] == 4096
    assert ctx.params["spec_k"] == 2


def test_a_fixed_length_job_with_real_acceptance_runs_on_the_simulator_at_a_labelled_estimate(plan: Plan) -> None:
    from llmsweep.engines.sim import simulated_acceptance

    # MiniMax-M3 EAGLE3-GQA has a golden curve: the estimate is its K=3 value (thinking on: 2.78).
    text = recipe("vllm", "vllm/vllm-openai:v0.26.0", scenario="fixed", arm="{ tp: 8, spec-decoding: mtp, "
                  "conc-list: [4] }", serve=VLLM_SPEC)
    (job,) = [j for j in plan(text) if not (j.run_eval or j.eval_only)]
    assert job.acceptance is None  # fixed-seq-len: the real engine measures real acceptance
    estimate = simulated_acceptance(job)
    assert estimate is not None and estimate.source == "estimate" and estimate.value == pytest.approx(2.78)
    spec = engines.render(job, simulate=True)
    assert flag(spec.argv, "--acceptance-length") == "2.78" and flag(spec.argv, "--spec-k") == "3"
    assert any("simulator's estimate" in n for n in spec.notes)
    # No curve for this model: the method's typical per-draft acceptance, still labelled an estimate.
    other = recipe("vllm", "vllm/vllm-openai:v0.26.0", scenario="fixed", arm="{ tp: 8, spec-decoding: mtp, "
                   "conc-list: [4] }", serve=VLLM_SPEC, model="meta-llama/Llama-3.1-8B-Instruct", prefix="llama3.1")
    (job,) = [j for j in plan(other) if not (j.run_eval or j.eval_only)]
    estimate = simulated_acceptance(job)
    assert estimate is not None and estimate.source == "estimate" and "typical eagle3" in estimate.basis
    assert 1.0 < estimate.value < 4.0


def test_an_fp4_checkpoint_served_at_fp8_keeps_its_fp4_weights_on_the_simulator() -> None:
    """An FP4 checkpoint served at "fp8" is not sized at 1 byte per parameter: DeepSeek-V4-Pro holds what InferenceX
    states vLLM's FP8 dequantization holds (the catalog's `served_weights_gb`, ~1.05 TB), between its FP4 checkpoint
    and every weight at FP8."""
    from llmsweep.sim.inputs import perf_inputs

    fp8 = perf_inputs("deepseek-ai/DeepSeek-V4-Pro", "mi300x", precision="fp8")
    from llmsweep.catalog.precision import weight_format

    fp4 = weight_format("fp4")
    assert fp4 is not None and fp4.bytes_per_param < 1.0
    assert fp4.bytes_per_param < fp8.bytes_per_param < 1.0  # InferenceX's dequantized weights, not 1 byte each
    assert fp8.weight_bytes == 1.05e12
    assert fp8.weight_bytes / 8 < 0.88 * fp8.hbm_bytes  # so it fits 8 x MI300X with room for a KV cache
    assert perf_inputs("Qwen/Qwen3.5-397B-A17B-FP8", "mi300x", precision="fp8").bytes_per_param == 1.0


@pytest.mark.parametrize("spec_decoding", ["none", "mtp"])
def test_trtllm_attention_dp_is_switched_on_in_the_llm_api_options(plan: Plan, spec_decoding: str) -> None:
    """trtllm-serve has no flag for attention DP: a `dp-attn: true` point that did not write `enable_attention_dp`
    ran plain TP attention under a `dpatrue` label."""
    arm = f"{{ tp: 8, ep: 8, dp-attn: true, spec-decoding: {spec_decoding}, conc-list: [8] }}"
    serve = VLLM_SPEC if spec_decoding != "none" else "    args: {}\n"
    job = plan(recipe("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0", arm=arm, serve=serve,
                      scenario="fixed"))[0]
    assert job.dp_attn
    spec = engines.render(job)
    [options] = [f for f in spec.files if f.name == "extra_llm_api_options.yaml"]
    assert "enable_attention_dp: true" in options.content
    assert flag(spec.argv, "--extra_llm_api_options") is not None
    plain = plan(recipe("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0", arm=arm.replace("true", "false"),
                        serve=serve, scenario="fixed"))[0]
    assert all("enable_attention_dp" not in f.content for f in engines.render(plain).files)


def test_sglang_refuses_medusa_rather_than_serve_its_heads_as_an_eagle_draft(tmp_path: Path) -> None:
    from llmsweep.policy import validate_files

    text = recipe("sglang", "lmsysorg/sglang:v0.5.16", arm="{ tp: 8, spec-decoding: mtp, conc-list: [8] }",
                  serve="    spec-decoding: { method: medusa, num-steps: 3, draft-model: FasterDecoding/medusa }\n",
                  scenario="fixed")
    path = tmp_path / "medusa.yaml"
    path.write_text(text, encoding="utf-8")
    errors = [f for f in validate_files([path]).findings if f.is_error]
    assert any("SGLang has no `medusa` speculative decoding" in f.message for f in errors), [f.render() for f in
                                                                                          errors]
