"""What a job sets that the simulator does not model is named, so a simulated point's planned label is never read as
modelled (a walkthrough saw `P2x(tp8 ep8 dpa)` on a point the simulator ran without DP attention)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.engines.sim import DP_ATTENTION_UNMODELLED, unmodelled
from llmsweep.plan import jobs_from_files

RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


def test_a_pool_that_plans_dp_attention_names_what_its_balanced_ranks_leave_out() -> None:
    """DP attention runs as balanced ranks (`--dp-attention`): their own prefix caches and whole attention weights
    are what the result names as not modelled."""
    (job,) = jobs_from_files([RUN / "disagg-sim.yaml"])
    assert job.prefill is not None and job.prefill.dp_attn and job.decode is not None and not job.decode.dp_attn
    assert unmodelled(job) == [DP_ATTENTION_UNMODELLED]


def test_an_aggregated_job_names_pp_and_context_parallelism_and_a_plain_one_nothing() -> None:
    plain = jobs_from_files([RUN / "fixed-sim.yaml"])[0]
    assert unmodelled(plain) == []
    wide = plain.model_copy(update={"pp": 2, "dp_attn": True, "dcp_size": 4})
    assert unmodelled(wide) == [DP_ATTENTION_UNMODELLED, "pipeline parallelism (pp 2)",
                                "decode context parallelism (dcp 4)"]



CALIBRATED = """llama-h200:
  image: IMAGE
  model: llmsweep/llama-1b
  model-prefix: llama-1b
  runner: h200
  precision: bf16
  framework: FRAMEWORK
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 256
      osl: 128
      search-space:
      - { tp: 1, conc-list: [4] }
"""


@pytest.mark.parametrize(("framework", "image", "label"), [
    ("vllm", "vllm/vllm-openai:v0.26.0", "calibrated: vllm-h200-dense-tiny"),
    ("trt", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0", "uncalibrated"),
    ("atom", "rocm/atom:v0.1.0", "uncalibrated"),
])
def test_a_job_of_an_engine_no_calibration_was_fitted_on_is_served_uncalibrated(
        tmp_path: Path, framework: str, image: str, label: str) -> None:
    """A TensorRT-LLM (or ATOM) job runs on the simulator in vLLM's style, and took vLLM's stored factors under the
    label `calibrated: vllm-h200-dense-tiny (vllm 0.26.0 …)`: a label it did not earn."""
    from llmsweep import engines
    from llmsweep.sim.serve_args import engine_config_from_argv

    path = tmp_path / "r.yaml"
    path.write_text(CALIBRATED.replace("IMAGE", image).replace("FRAMEWORK", framework), encoding="utf-8")
    (job,) = jobs_from_files([path])
    argv = engines.render(job, simulate=True).argv
    assert engine_config_from_argv(argv).calibration_label().startswith(label)
    assert ("--no-calibration" in argv) == (label == "uncalibrated")
