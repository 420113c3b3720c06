"""Which engine version a launch is checked and recorded at: the one the image tag names; `serve.engine.version` only
where the tag names none (nightly, dev, latest). A stated version never relabels the build that runs."""

from __future__ import annotations

import pytest

from llmsweep import engines
from llmsweep.plan import Job, full_sweep
from llmsweep.spec import loads_recipes


def _job(framework: str, image: str, stated: str | None) -> Job:
    engine = f"    engine: {{ version: '{stated}' }}\n" if stated else ""
    text = (f"k:\n  image: {image}\n  model: Qwen/Qwen3.5-397B-A17B-FP8\n  model-prefix: qwen3.5\n  runner: h200\n"
            f"  precision: fp8\n  framework: {framework}\n  multinode: false\n  scenarios:\n    fixed-seq-len:\n"
            f"    - isl: 1024\n      osl: 128\n      search-space:\n      - {{ tp: 8, conc-list: [4] }}\n"
            f"  serve:\n{engine}    args: {{}}\n")
    return full_sweep(loads_recipes(text, "t.yaml").raise_on_error().recipes)[0]


@pytest.mark.parametrize(("framework", "image", "stated", "recorded"), [
    # the tag names a version: it is what runs, whatever the recipe states
    ("sglang", "lmsysorg/sglang:v0.5.12-rocm720-mi30x", "0.5.16", "0.5.12"),
    ("sglang", "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", "0.5.12", "0.5.16"),
    ("sglang", "rocm/sgl-dev:sglang-0.5.9-rocm720-mi35x-mori-0227-2", "0.5.16", "0.5.9"),
    ("vllm", "vllm/vllm-openai:v0.11.0", "0.26.0", "0.11.0"),
    ("vllm", "rocm/vllm-dev:v0.11.0-rocm700", "0.26.0", "0.11.0"),
    ("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6", "1.3.0", "1.2.0rc6"),
    ("atom", "rocm/atom:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3", "0.2.0", "0.1.3"),
    ("sglang", "lmsysorg/sglang:v0.5.16-cu130", None, "0.5.16"),
    # the tag names none: the stated version is all there is to go by
    ("sglang", "lmsysorg/sglang:nightly-20260801-abc1234", "0.5.16", "0.5.16"),
    ("vllm", "vllm/vllm-openai:latest", "0.26.0", "0.26.0"),
    ("vllm", "rocm/vllm-dev:nightly_main_20250801", "0.11.0", "0.11.0"),
    ("atom", "rocm/atom-dev:nightly_202606101403", "0.1.3", "0.1.3"),
    ("sglang", "lmsysorg/sglang:dev", None, None),
])
def test_the_launch_carries_the_tags_version_and_the_stated_one_only_for_a_tag_without_one(
        framework: str, image: str, stated: str | None, recorded: str | None) -> None:
    job = _job(framework, image, stated)
    spec = engines.render(job)
    assert spec.engine_version == recorded  # what provenance records as launch.engine_version
    assert engines.adapter_for(job).image_and_version(job) == (image, recorded)
