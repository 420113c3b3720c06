"""The transformers serve adapter: the launch a user reads in server_command.txt, and the dialect the client follows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.catalog.engines import canonical_engine, get_engine
from llmsweep.errors import ContractError
from llmsweep.execute.lifecycle import _endpoint
from llmsweep.plan import Job
from llmsweep.policy import validate_files

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "transformers" / "tiny-cpu-transformers.yaml"
FLEET = REPO / "examples" / "transformers" / "fleet.yaml"
H200 = REPO / "examples" / "transformers" / "llama-1b-bf16-h200-transformers.yaml"
H200_FLEET = REPO / "examples" / "gpu" / "fleet.yaml"
Plan = Callable[[str], list[Job]]


def recipe(*, args: str = "", arm: str = "{ tp: 1, conc-list: [4] }", scenario: str = "fixed", extra: str = "",
           workload: str = "    use-chat-template: true\n", engine: str = "") -> str:
    if scenario == "fixed":
        scen = f"    fixed-seq-len:\n    - isl: 1024\n      osl: 128\n      search-space:\n      - {arm}\n"
    else:
        scen = f"    agentic-coding:\n    - search-space:\n      - {arm}\n"
    serve = f"    model-path: /models/llama-1b\n{engine}{extra}"
    if args:
        serve += f"    args:\n{args}"
    return (f"k:\n  image: huggingface/transformers-pytorch-gpu:5.17.0\n  model: llmsweep/llama-1b\n"
            f"  model-prefix: llama-1b\n  runner: h200\n  precision: bf16\n  framework: transformers\n"
            f"  multinode: false\n  scenarios:\n{scen}  serve:\n{serve}  workload:\n{workload}")


def flag(argv: tuple[str, ...], name: str) -> str | None:
    if name not in argv:
        return None
    i = argv.index(name)
    return argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""


def test_gpu_launch_is_continuous_batching_with_cuda_graphs(plan: Plan) -> None:
    job = plan(recipe())[0]
    assert job.engine == "transformers"
    spec = engines.render(job)
    assert spec.argv[:5] == ("python3", "-m", "transformers.cli.transformers", "serve", "/models/llama-1b")
    assert flag(spec.argv, "--continuous-batching") == "" and flag(spec.argv, "--cb-use-cuda-graph") == ""
    assert flag(spec.argv, "--host") == "0.0.0.0" and flag(spec.argv, "--port") == "8000"
    assert spec.gpus == 1
    assert spec.health_path == "/health" and spec.ready_log_markers == ("Uvicorn running on",)
    assert spec.metrics_path is None and spec.metrics_prefix is None
    # The server answers 400 to any model name but the argument it was started with.
    assert spec.served_model_name == "/models/llama-1b"


def test_cpu_device_drops_cuda_graphs_and_the_gpu_preflight(plan: Plan) -> None:
    spec = engines.render(plan(recipe(args="      --device: cpu\n"))[0])
    assert "--cb-use-cuda-graph" not in spec.argv and flag(spec.argv, "--device") == "cpu"
    assert spec.gpus == 0
    assert any("90% of free host RAM" in n for n in spec.notes)
    sized = engines.render(plan(recipe(args="      --device: cpu\n      --cb-num-blocks: 64\n"
                                            "      --cb-max-batch-tokens: 512\n"))[0])
    assert flag(sized.argv, "--cb-num-blocks") == "64"
    assert not any("host RAM" in n for n in sized.notes)


@pytest.mark.parametrize(("off", "derived"), [("--no-cb-use-cuda-graph", "--cb-use-cuda-graph"),
                                              ("--no-continuous-batching", "--continuous-batching")])
def test_a_recipe_turns_a_derived_switch_off(plan: Plan, off: str, derived: str) -> None:
    argv = engines.render(plan(recipe(args=f"      {off}: true\n"))[0]).argv
    assert off in argv and derived not in argv


def test_framework_and_engine_override_both_select_it(plan: Plan) -> None:
    assert canonical_engine("transformers") == "transformers"
    text = recipe(engine="    engine: { name: transformers, version: 5.17.0 }\n").replace(
        "framework: transformers", "framework: vllm")
    assert plan(text)[0].engine == "transformers"


def test_the_endpoint_run_builds_follows_the_dialect(plan: Plan) -> None:
    job = plan(recipe())[0]
    spec = engines.render(job, port=0)
    ep = _endpoint(job, spec, "http://127.0.0.1:9")
    assert ep.api == "chat" and ep.model == "/models/llama-1b"
    assert ep.send_ignore_eos is False  # HTTP 422 on unknown fields
    assert ep.send_stream_options is True  # accepted and ignored; usage arrives on the final chunk anyway
    assert ep.resolved_metrics_url() is None  # no /metrics to scrape


def test_other_engines_keep_ignore_eos_and_scrape_their_own_metrics_path(plan: Plan) -> None:
    text = recipe().replace("framework: transformers", "framework: trt").replace(
        "huggingface/transformers-pytorch-gpu:5.17.0", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0")
    job = plan(text)[0]
    ep = _endpoint(job, engines.render(job), "http://127.0.0.1:9")
    assert ep.send_ignore_eos and ep.resolved_metrics_url() == "http://127.0.0.1:9/prometheus/metrics"


def test_dialect_is_catalog_data_and_not_part_of_the_launch_fingerprint(plan: Plan) -> None:
    assert get_engine("transformers").rejected_request_fields == ["ignore_eos"]
    spec = engines.render(plan(recipe())[0])
    assert spec.fingerprint() == spec.model_copy(update={"rejected_request_fields": ()}).fingerprint()


@pytest.mark.parametrize(("arm", "extra", "workload", "says"), [
    ("{ tp: 2, conc-list: [4] }", "", "    use-chat-template: true\n", "parallelism (tp 2"),
    ("{ tp: 1, conc-list: [4] }", "    load-format: dummy\n", "    use-chat-template: true\n", "load-format: dummy"),
    ("{ tp: 1, conc-list: [4] }", "", "    use-chat-template: false\n", "prompt must be a string"),
    ("{ tp: 1, spec-decoding: mtp, conc-list: [4] }", "    spec-decoding: { method: mtp, num-steps: 3 }\n",
     "    use-chat-template: true\n", "speculative decoding"),
])
def test_what_it_cannot_run_is_refused_not_dropped(plan: Plan, arm: str, extra: str, workload: str,
                                                   says: str) -> None:
    job = plan(recipe(arm=arm, extra=extra, workload=workload))[0]
    with pytest.raises(ContractError, match="transformers serve cannot run") as err:
        engines.render(job)
    assert says in str(err.value)


@pytest.mark.parametrize(("flag_name", "hint"), [("--max-num-seqs", "--cb-max-batch-tokens"),
                                                 ("--gpu-memory-utilization", "--cb-max-memory-percent"),
                                                 ("--served-model-name", "model argument")])
def test_other_engines_spellings_are_unsupported_args(plan: Plan, flag_name: str, hint: str) -> None:
    job = plan(recipe(args=f"      {flag_name}: 8\n"))[0]
    found = engines.adapter_for(job).unsupported(job)
    assert [f for f, _ in found] == [flag_name] and hint in found[0][1]


def test_the_cpu_example_validates_and_shares_one_server() -> None:
    report = validate_files([EXAMPLE], runner_config=FLEET)
    assert report.ok and not report.findings, report.findings
    jobs = report.jobs
    assert sorted(j.concs[0] for j in jobs) == [1, 2, 4]
    assert len({engines.launch_fingerprint(j) for j in jobs}) == 1
    spec = engines.render(jobs[0])
    assert spec.gpus == 0 and "--cb-use-cuda-graph" not in spec.argv and spec.engine_version == "5.17.0"


def test_the_h200_example_renders_cuda_graphs_on_one_gpu() -> None:
    report = validate_files([H200], runner_config=H200_FLEET)
    assert report.ok and not report.findings, report.findings
    assert sorted(j.concs[0] for j in report.jobs) == [1, 8, 32]
    spec = engines.render(report.jobs[0])
    assert flag(spec.argv, "--cb-use-cuda-graph") == "" and flag(spec.argv, "--dtype") == "bfloat16"
    assert spec.gpus == 1 and spec.served_model_name == "/tmp/models/llama-1b-w"


@pytest.mark.parametrize(("precision", "dtype"), [("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16"),
                                                  ("fp8", None)])
def test_the_launch_loads_the_weights_in_the_recipes_precision(plan: Plan, precision: str, dtype: str | None) -> None:
    """transformers serve's `--dtype` defaults to `auto` (the checkpoint's torch_dtype): without the flag an fp32 row
    ran the checkpoint's bf16. A quantised precision derives none: `auto` keeps the checkpoint's quantisation."""
    spec = engines.render(plan(recipe().replace("precision: bf16", f"precision: {precision}"))[0])
    assert flag(spec.argv, "--dtype") == dtype


@pytest.mark.parametrize(("precision", "given", "loads"), [
    ("bf16", "float32", "as fp32 (`float32`)"),
    ("fp32", "bfloat16", "as bf16 (`bfloat16`)"),
    ("fp32", "auto", "in the checkpoint's own `torch_dtype` (`auto`)"),
    ("fp16", "float8_e4m3fn", "as `float8_e4m3fn`"),
])
def test_a_dtype_that_contradicts_precision_is_refused(tmp_path: Path, precision: str, given: str,
                                                       loads: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(recipe(args=f"      --dtype: {given}\n").replace("precision: bf16", f"precision: {precision}"))
    report = validate_files([path], runner_config=H200_FLEET)
    (hit,) = [f for f in report.findings if f.rule == "serve.precision-conflict"]
    assert hit.severity == "error" and hit.line == 18 and hit.path == "k.serve.args.--dtype"
    assert loads in hit.message and f"the recipe's precision is `{precision}`" in hit.message
    assert hit.fix is not None and f"delete `--dtype`: `precision: {precision}` renders" in hit.fix


@pytest.mark.parametrize(("precision", "given"), [("fp32", "float32"), ("fp32", "float"), ("bf16", "bfloat16"),
                                                  ("fp16", "half"), ("fp8", "bfloat16")])
def test_a_dtype_that_agrees_with_precision_passes(tmp_path: Path, precision: str, given: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(recipe(args=f"      --dtype: {given}\n").replace("precision: bf16", f"precision: {precision}"))
    report = validate_files([path], runner_config=H200_FLEET)
    assert not [f for f in report.findings if f.rule == "serve.precision-conflict"]
