"""The vLLM images InferenceX runs ship Python 3.12 (vllm-project/vllm docker/Dockerfile: `ARG PYTHON_VERSION=3.12`,
installed as python3 in the vllm-base stage that becomes vllm/vllm-openai). The image catalog had no entry for them,
so a recipe naming one as its `serve.client-image` was warned "Python unknown" although it can run the client."""

from __future__ import annotations

from pathlib import Path

from llmsweep.catalog.images import parse_image
from llmsweep.policy import validate_files


def test_vllm_openai_images_are_known_to_ship_python_3_12() -> None:
    img = parse_image("vllm/vllm-openai:v0.26.0")
    assert img.python_version == "3.12" and img.python_estimate and img.python_at_least("3.11") is True
    assert parse_image("vllm/vllm-openai:v0.6.3").python_version is None  # older lines are not claimed


RECIPE = """k:
  image: vllm/vllm-openai:v0.26.0
  model: meta-llama/Llama-3.1-8B-Instruct
  model-prefix: llama3.1-8b
  runner: h200
  precision: bf16
  framework: vllm
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 1024
      search-space:
      - { tp: 1, conc-list: [4] }
  serve:
    client-image: vllm/vllm-openai:v0.26.0
"""


def test_a_vllm_client_image_is_not_warned_as_unknown_python(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE, encoding="utf-8")
    findings = validate_files([path]).findings
    assert not [f for f in findings if f.rule == "client.isolation" and "unknown" in f.message]
    path.write_text(RECIPE.replace("client-image: vllm/vllm-openai:v0.26.0", "client-image: vllm/vllm-openai:v0.6.3"),
                    encoding="utf-8")  # a line the entry does not claim is still warned
    assert [f for f in validate_files([path]).findings if f.rule == "client.isolation" and "unknown" in f.message]
