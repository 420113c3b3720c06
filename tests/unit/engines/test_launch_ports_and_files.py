"""Every launch starts as planned: the serving port substituted in the engine's own flag (ATOM's `--server-port`),
and the files an engine reads at start-up (TensorRT-LLM's LLM-API options) written where its argv points."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmsweep import engines
from llmsweep.catalog.fleet import load_fleet
from llmsweep.engines.launch import LAUNCH_DIR
from llmsweep.execute.artifacts import write_launch_files
from llmsweep.execute.docker import DockerOptions, render_docker_run
from llmsweep.execute.preflight import resolve_port
from llmsweep.plan import EvalOptions, Job, full_sweep
from llmsweep.spec import loads_recipes

Plan = Callable[[str], list[Job]]
TRT_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0"


def flag(argv: tuple[str, ...] | list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def amd_master_with_serve(inferencex: Path) -> list[Job]:
    """InferenceX's AMD master, each ATOM entry given the `serve` block llmsweep needs to launch it (the master
    itself leaves the launch to per-model shell scripts): MTP arms draft 3 tokens."""
    doc: dict[str, Any] = yaml.safe_load((inferencex / "amd-master.yaml").read_text())
    for entry in doc.values():
        if str(entry.get("framework", "")).startswith("atom"):
            arms = [a for s in entry["scenarios"].values() for e in s for a in e.get("search-space", [])]
            mtp = any(a.get("spec-decoding", "none") != "none" for a in arms)
            entry["serve"] = {"spec-decoding": {"method": "mtp", "num-steps": 3}} if mtp else {}
    loaded = loads_recipes(yaml.safe_dump(doc, sort_keys=False), "amd-master.yaml").raise_on_error()
    return full_sweep(loaded.recipes, load_fleet(inferencex / "runners.yaml"), EvalOptions())


def test_every_atom_job_of_the_amd_master_starts_on_the_port_the_executor_picks(shared_dir: Path) -> None:
    jobs = [j for j in amd_master_with_serve(shared_dir / "reference" / "inferencex")
            if j.engine == "atom" and not j.multinode]
    assert len([j for j in jobs if not j.run_eval]) == 98 and len(jobs) == 128, "98 ATOM jobs, 30 more with evals"
    for job in jobs:
        spec = engines.render(job, port=0)
        assert spec.port_flag == "--server-port" and flag(spec.argv, "--server-port") == "0", job.id
        assert "--port" not in spec.argv, "ATOM's --port is its internal engine port, never the HTTP one"
        started = resolve_port(spec)
        assert started.port > 0 and flag(started.argv, "--server-port") == str(started.port), job.id


def test_port_substitution_follows_the_spec_port_flag(plan: Plan) -> None:
    vllm = plan("k:\n  image: vllm/vllm-openai:v0.26.0\n  model: m/M\n  model-prefix: x\n  runner: h200\n"
                "  precision: fp8\n  framework: vllm\n  multinode: false\n  scenarios:\n    fixed-seq-len:\n"
                "    - isl: 1024\n      osl: 1024\n      search-space:\n      - { tp: 1, conc-list: [1] }\n"
                "  serve: {}\n")[0]
    spec = resolve_port(engines.render(vllm, port=0))
    assert flag(spec.argv, "--port") == str(spec.port) and spec.port > 0


def trt_recipe(spec_decoding: str) -> str:
    return ("k:\n  image: " + TRT_IMAGE + "\n  model: deepseek-ai/DeepSeek-R1-0528\n  model-prefix: dsr1\n"
            "  runner: h200\n  precision: fp8\n  framework: trt\n  multinode: false\n  scenarios:\n"
            "    fixed-seq-len:\n    - isl: 1024\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, ep: 8, spec-decoding: mtp, conc-list: [4] }\n"
            f"  serve:\n    spec-decoding: {spec_decoding}\n")


@pytest.mark.parametrize(("sd", "expected"), [
    ("{ method: mtp, num-steps: 3 }", {"decoding_type": "MTP", "num_nextn_predict_layers": 3}),
    ("{ method: eagle3, num-steps: 4, draft-model: org/R1-EAGLE3 }",
     {"decoding_type": "Eagle", "max_draft_len": 4, "speculative_model_dir": "org/R1-EAGLE3"}),
])
def test_trtllm_speculative_config_is_the_file_its_launch_reads(plan: Plan, tmp_path: Path, sd: str,
                                                                 expected: dict[str, Any]) -> None:
    job = plan(trt_recipe(sd))[0]
    spec = engines.render(job, port=0)
    [file] = spec.files
    assert file.name == "extra_llm_api_options.yaml"
    assert flag(spec.argv, "--extra_llm_api_options") == f"{LAUNCH_DIR}/extra_llm_api_options.yaml"
    options = yaml.safe_load(file.content)
    assert options["speculative_config"] == expected
    assert options["return_perf_metrics"] is True and options["enable_iter_perf_stats"] is True

    placed = write_launch_files(spec, tmp_path)
    path = Path(flag(placed.argv, "--extra_llm_api_options") or "")
    assert path == tmp_path.resolve() / "extra_llm_api_options.yaml" and path.read_text() == file.content
    docker = render_docker_run(placed.model_copy(update={"image": TRT_IMAGE}), DockerOptions(), "c")
    assert f"{tmp_path.resolve()}:{tmp_path.resolve()}:ro" in docker, "the container sees the file at its path"


def test_trtllm_without_speculative_decoding_writes_no_file(plan: Plan) -> None:
    text = trt_recipe("{ method: mtp, num-steps: 3 }").replace("spec-decoding: mtp, ", "")
    text = text.replace("  serve:\n    spec-decoding: { method: mtp, num-steps: 3 }\n", "  serve: {}\n")
    spec = engines.render(plan(text)[0])
    assert spec.files == () and "--extra_llm_api_options" not in spec.argv


def test_trtllm_eagle_without_a_draft_checkpoint_is_refused(plan: Plan) -> None:
    from llmsweep.errors import ConfigError

    with pytest.raises(ConfigError, match="draft-model"):
        engines.render(plan(trt_recipe("{ method: eagle, num-steps: 3 }"))[0])


def test_render_shows_the_file_and_the_script_writes_it(plan: Plan, tmp_path: Path) -> None:
    import subprocess
    import sys

    recipe = tmp_path / "trt.yaml"
    recipe.write_text(trt_recipe("{ method: mtp, num-steps: 2 }"))
    cmd = [sys.executable, "-m", "llmsweep.cli.main", "render", str(recipe), "--job", "dsr1_1k1k"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert "# file {launch_dir}/extra_llm_api_options.yaml" in text and "decoding_type: MTP" in text
    script = subprocess.run([*cmd, "--format", "sh"], capture_output=True, text=True, check=True).stdout
    assert "> ./extra_llm_api_options.yaml" in script and "<<" not in script  # one quoted word, no here-document
    assert "--extra_llm_api_options ./extra_llm_api_options.yaml" in script
    # The script writes exactly the file's text (run up to, not including, the exec of the server).
    body = script.split("\nexec ", 1)[0]
    subprocess.run(["bash", "-c", body.split("set -euo pipefail", 1)[1]], cwd=tmp_path, check=True)
    assert yaml.safe_load((tmp_path / "extra_llm_api_options.yaml").read_text())["speculative_config"] == {
        "decoding_type": "MTP", "num_nextn_predict_layers": 2}
