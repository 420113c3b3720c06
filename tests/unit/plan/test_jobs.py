"""What a Job carries beyond the matrix entry: fingerprint, resolved serve/workload, engine, acceptance."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.plan import EvalOptions, Job, full_sweep, jobs_from_files, select_job, test_config
from llmsweep.spec import load_recipes

REPO = Path(__file__).resolve().parents[3]
SEED_KEY = "qwen3.5-fp8-mi300x-sglang-agentic-mtp"

FIXED_SPEC = """
r:
  image: img:1
  model: org/model
  model-prefix: qwen3.5
  precision: fp8
  framework: {framework}
  runner: h200
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - {{ tp: 8, spec-decoding: mtp, conc-list: [4, 16] }}
      - {{ tp: 8, conc-list: [4] }}
{serve}"""


@pytest.fixture(scope="module")
def seed_jobs():
    loaded = load_recipes([REPO / "recipes"])
    assert loaded.ok, [f.render() for f in loaded.errors]
    return test_config(loaded.recipes, [SEED_KEY])


def test_fingerprint_is_shared_by_the_points_of_one_curve_and_is_sha256_of_the_entry(seed_jobs) -> None:
    resident = [j for j in seed_jobs if j.kv_offloading == "none"]
    offload = [j for j in seed_jobs if j.kv_offloading == "dram"]
    assert len({j.recipe_fingerprint for j in resident}) == 1
    assert len({j.recipe_fingerprint for j in offload}) == 1
    assert resident[0].recipe_fingerprint != offload[0].recipe_fingerprint
    entry = {k: v for k, v in resident[0].matrix_entry().items() if k not in ("conc", "exp-name", "run-eval")}
    canonical = json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert resident[0].recipe_fingerprint == hashlib.sha256(canonical.encode()).hexdigest()
    # The id's hash folds the recipe key into the fingerprint (ids stay unique across recipes with equal entries).
    salt = f"{resident[0].recipe_fingerprint}\0{SEED_KEY}"
    assert resident[0].id.endswith("_" + hashlib.sha256(salt.encode()).hexdigest()[:12])


def test_seed_recipe_overrides_apply_only_to_the_offload_arm(seed_jobs) -> None:
    for job in seed_jobs:
        assert job.serve is not None and job.engine == "sglang" and job.runnable
        args = job.serve.args
        assert args["--attention-backend"] == "triton" and args["--mem-fraction-static"] == 0.75
        assert args["--skip-server-warmup"] is True
        assert job.serve.env == {"SGLANG_ENABLE_SPEC_V2": "1"}
        if job.kv_offloading == "dram":
            assert args["--enable-hierarchical-cache"] is True and args["--page-size"] == 1
            assert args["--hicache-io-backend"] == "direct" and args["--hicache-mem-layout"] == "layer_first"
            assert job.serve.applied_overrides == [0]
        else:
            assert "--enable-hierarchical-cache" not in args and job.serve.applied_overrides == []


def test_seed_recipe_pins_the_golden_acceptance_not_an_env_value(seed_jobs) -> None:
    for job in seed_jobs:
        assert job.acceptance is not None
        assert (job.acceptance.value, job.acceptance.source, job.acceptance.k) == (3.39, "golden", 3)
        assert job.acceptance.golden == 3.39 and job.acceptance.thinking == "on"
        assert job.acceptance.provenance and "qwen3.5" in job.acceptance.provenance
        assert not any(name.startswith("SGLANG_SIMULATE_ACC") for name in job.serve.env)


def test_agentic_workload_defaults(seed_jobs) -> None:
    wl = seed_jobs[0].workload
    assert (wl.scenario, wl.duration, wl.warmup_per_lane, wl.seed) == ("agentic-coding", 3600, 10, 42)
    assert wl.traces is not None and wl.traces.hf == "semianalysisai/cc-traces-weka-062126-256k"
    assert wl.tokenizer == wl.served_model_name == "Qwen/Qwen3.5-397B-A17B-FP8"


def test_eval_jobs_carry_no_acceptance(seed_jobs) -> None:
    loaded = load_recipes([REPO / "recipes"])
    evals = test_config(loaded.recipes, [SEED_KEY], evals=EvalOptions(evals_only=True))
    assert len(evals) == 1 and evals[0].conc == 16 and evals[0].acceptance is None


def test_million_context_families_default_to_the_unfiltered_corpus(recipes_from, fleet) -> None:
    text = """
    r:
      image: img:1
      model: deepseek-ai/DeepSeek-V4-Pro
      model-prefix: dsv4
      precision: fp4
      framework: vllm
      runner: cluster:b300-nv
      multinode: false
      scenarios:
        agentic-coding:
        - search-space:
          - { tp: 8, kv-offloading: none, conc-list: [4] }
      workload:
        duration: 1200
        tokenizer: /models/dsv4-tokenizer
    """
    (job,) = test_config(recipes_from(text), ["r"], fleet)
    assert job.workload.traces is not None and job.workload.traces.hf == "semianalysisai/cc-traces-weka-062126"
    assert job.workload.duration == 1200, "the recipe's workload wins over the matrix default"
    assert job.duration == 3600, "the matrix entry keeps InferenceX's value"
    assert job.workload.tokenizer == "/models/dsv4-tokenizer"


def test_fixed_workload_defaults_and_chat_template_follows_spec_decoding(recipes_from, fleet) -> None:
    jobs = test_config(recipes_from(FIXED_SPEC.format(framework="sglang", serve="")), ["r"], fleet)
    spec4, spec16, plain = jobs
    assert (spec4.workload.num_prompts, spec4.workload.num_warmups, spec4.workload.range_ratio) == (40, 8, 0.8)
    assert spec16.workload.num_prompts == 160
    assert spec4.workload.use_chat_template is True and plain.workload.use_chat_template is False
    assert (spec4.workload.isl, spec4.workload.osl) == (8192, 1024)


def test_fixed_seq_len_spec_jobs_use_real_acceptance_unless_pinned(recipes_from, fleet) -> None:
    serve = ("  serve:\n    spec-decoding: { method: mtp, num-steps: 3, thinking: off }\n")
    jobs = test_config(recipes_from(FIXED_SPEC.format(framework="sglang", serve=serve)), ["r"], fleet)
    assert [j.acceptance for j in jobs] == [None, None, None]
    pinned = serve.replace("thinking: off", "thinking: off, acceptance-length: 2.5")
    jobs = test_config(recipes_from(FIXED_SPEC.format(framework="sglang", serve=pinned)), ["r"], fleet)
    acc = jobs[0].acceptance
    assert acc is not None and (acc.value, acc.source, acc.golden) == (2.5, "pinned", 3.33)
    assert jobs[2].acceptance is None, "non-speculative arm"


@pytest.mark.parametrize(("framework", "serve", "engine"), [
    ("sglang", "", None),
    ("sglang", "  serve: {}\n", "sglang"),
    ("dynamo-vllm", "  serve: {}\n", "vllm"),
    ("tilert", "  serve: {}\n", None),
    ("tilert", "  serve: { engine: { name: sim } }\n", "sim"),
])
def test_engine_is_none_when_not_runnable(recipes_from, fleet, framework, serve, engine) -> None:
    jobs = test_config(recipes_from(FIXED_SPEC.format(framework=framework, serve=serve)), ["r"], fleet)
    assert {j.engine for j in jobs} == {engine}
    assert all(j.runnable == (engine is not None) for j in jobs)


def test_job_json_round_trips(seed_jobs) -> None:
    for job in seed_jobs:
        again = Job.model_validate(json.loads(json.dumps(job.to_json())))
        assert again == job and again.matrix_entry() == job.matrix_entry()


def test_select_job_by_id_or_unique_exp_name(seed_jobs) -> None:
    target = seed_jobs[3]
    assert select_job(seed_jobs, target.id) is target
    assert select_job(seed_jobs, "qwen3.5_tp8_conc1_kvnone_spec-mtp").conc == 1


def test_select_job_lists_candidates_when_ambiguous_or_absent(seed_jobs, recipes_from, fleet) -> None:
    with pytest.raises(ConfigError, match="matches 9 jobs") as info:
        select_job(seed_jobs, "qwen3.5_tp8_conc")
    assert seed_jobs[1].id in str(info.value)
    with pytest.raises(ConfigError, match="no job matches `nope`"):
        select_job(seed_jobs, "nope")
    fixed = test_config(recipes_from(FIXED_SPEC.format(framework="sglang", serve="")), ["r"], fleet)
    with pytest.raises(ConfigError, match="matches 3 jobs"):
        select_job(fixed, "qwen3.5_8k1k")


def test_resident_recipe_matches_the_master_shape(fleet) -> None:
    loaded = load_recipes([REPO / "recipes"])
    jobs = full_sweep(loaded.recipes, fleet, model_prefixes=("qwen3.5-fp8-mi300x-sglang-agentic-mtp-resident",))
    assert [(j.ep, j.conc) for j in jobs] == [(ep, c) for ep in (1, 8) for c in (4, 16, 20, 24, 32)]
    assert {j.serve.args["--attention-backend"] for j in jobs if j.serve is not None} == {"aiter"}
    assert {j.kv_offloading for j in jobs} == {"none"}
    assert {j.acceptance.value for j in jobs if j.acceptance is not None} == {3.39}
    assert all(j.serve is not None and j.acceptance is not None for j in jobs)


def test_jobs_from_files_plans_or_raises_with_findings(tmp_path) -> None:
    jobs = jobs_from_files([REPO / "recipes"], config_keys=[SEED_KEY])
    assert len(jobs) == 9 and {j.runner_label for j in jobs} == {"cluster:mi300x-amds"}
    assert {j.sku for j in jobs} == {"mi300x"}
    with pytest.raises(ConfigError) as info:
        jobs_from_files([REPO / "tests" / "data" / "recipes" / "malformed" / "conc-range.yaml"])
    assert [f.rule for f in info.value.findings] == ["schema.conc-range"]
