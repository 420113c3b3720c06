"""The simulator reads a recipe's flags as the engine it stands in for parses them: `--mem-frac: 0.7` is SGLang's
`--mem-fraction-static 0.7` (argparse expands a unique prefix), and vLLM's `--gpu-memory-util` its
`--gpu-memory-utilization`. The simulator used to read only the exact spelling: under `--simulate` such a job ran at
the simulator's default memory fraction (another KV pool than SGLang would size) while `validate --simulate` said
nothing, and a `sim`-engine recipe was told the flag is not modelled."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.plan import jobs_from_files
from llmsweep.policy import validate_files

RECIPE = """flags-sim:
  image: IMAGE
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi300x
  precision: fp8
  framework: FRAMEWORK
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 256
      osl: 64
      search-space:
      - { tp: 8, conc-list: [4] }
  serve:
ENGINE    args: { FLAG: 0.7, --max-num-s: 48 }
"""
SGLANG = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730"
VLLM = "vllm/vllm-openai-rocm:v0.26.0"


def _write(tmp_path: Path, framework: str, image: str, flag: str, *, sim_engine: bool) -> Path:
    path = tmp_path / "r.yaml"
    text = RECIPE.replace("FRAMEWORK", framework).replace("IMAGE", image).replace("FLAG", flag)
    text = text.replace("ENGINE", "    engine: { name: sim }\n" if sim_engine else "")
    if framework == "sglang":
        text = text.replace("--max-num-s: 48", "--max-running-req: 48")
    path.write_text(text, encoding="utf-8")
    return path


def _flag(argv: Sequence[str], name: str) -> str | None:
    return argv[list(argv).index(name) + 1] if name in argv else None


@pytest.mark.parametrize("sim_engine", [False, True], ids=["--simulate", "engine-sim"])
@pytest.mark.parametrize(("framework", "image", "flag"), [
    ("sglang", SGLANG, "--mem-frac"),
    ("vllm", VLLM, "--gpu-memory-util"),
])
def test_an_abbreviated_flag_reaches_the_simulator_as_the_engine_reads_it(
        tmp_path: Path, framework: str, image: str, flag: str, sim_engine: bool) -> None:
    path = _write(tmp_path, framework, image, flag, sim_engine=sim_engine)
    (job,) = jobs_from_files([path])
    argv = engines.render(job, simulate=True).argv
    assert _flag(argv, "--mem-fraction-static") == "0.7", argv
    assert _flag(argv, "--max-running-requests") == "48", argv
    # ...and the recipe check does not call a flag the simulator honours unmodelled
    said = [f for f in validate_files([path], simulate=True).findings if f.rule == "serve.sim-ignored"]
    assert said == [], [f.message for f in said]


def test_two_spellings_of_one_flag_on_a_sim_recipe_are_the_duplicate_the_engine_would_take_silently(
        tmp_path: Path) -> None:
    """Both reach the simulator as one flag, the last value winning unseen: the error a real engine's recipe gets."""
    path = _write(tmp_path, "sglang", SGLANG, "--mem-fraction-static", sim_engine=True)
    text = path.read_text().replace("--mem-fraction-static: 0.7,", "--mem-fraction-static: 0.7, --mem-frac: 0.8,")
    path.write_text(text)
    said = [f for f in validate_files([path]).findings if f.rule == "serve.duplicate-flag"]
    assert len(said) == 1 and "`--mem-fraction-static` and `--mem-frac` are one flag to sglang" in said[0].message
