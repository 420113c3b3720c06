"""Where a real engine can run on this machine's CPU: `transformers serve` from a python that imports torch and
transformers[serving] (CI installs one in `.venv-tf` and names it in LLMSWEEP_TRANSFORMERS_PYTHON)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SERVES = ("import importlib.metadata as m, importlib.util as u; "
          "assert all(u.find_spec(n) for n in ('torch', 'transformers', 'fastapi', 'uvicorn', 'requests')); "
          "assert int(m.version('transformers').split('.')[0]) >= 5")
"""Whether a python has what `transformers serve` needs, read from what it has installed (importing torch and
transformers to find out cost ~7 CPU-seconds per test file on the 2-core CI machine)."""


def serving_python() -> Path | None:
    """The `python3` the transformers adapter runs (LLMSWEEP_TRANSFORMERS_PYTHON's folder first on PATH), when it has
    torch and transformers[serving] >= 5 installed."""
    given = os.environ.get("LLMSWEEP_TRANSFORMERS_PYTHON")
    path = (str(Path(given).parent) + os.pathsep if given else "") + os.environ.get("PATH", "")
    exe = shutil.which("python3", path=path)
    if exe is None:
        return None
    try:
        ok = subprocess.run([exe, "-c", SERVES], capture_output=True, timeout=60).returncode == 0
    except subprocess.TimeoutExpired:
        return None
    return Path(exe) if ok else None


def transformers_path() -> str | None:
    """The PATH under which the adapter's `python3` can serve with transformers (None: no such python here)."""
    exe = serving_python()
    return None if exe is None else str(exe.parent) + os.pathsep + os.environ.get("PATH", "")


def tiny_transformers_recipe(model_dir: Path, *, key: str = "tf", concs: str = "[1, 2, 4]", extra_args: str = "",
                             prompts_per_conc: int = 4, isl: int = 64, osl: int = 16, warmups: int = 1,
                             health_timeout: int = 120) -> str:
    """A fixed-length recipe (64 in / 16 out by default) that `transformers serve` runs on the CPU for a synthesised
    model in `model_dir` (continuous batching, one thread, offline)."""
    return f"""{key}:
  image: huggingface/transformers-pytorch-cpu:5.17.0
  model: llmsweep/tiny
  model-prefix: tiny
  runner: h200
  precision: bf16
  framework: transformers
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: {isl}
      osl: {osl}
      search-space:
      - {{ tp: 1, conc-list: {concs} }}
  serve:
    engine: {{ name: transformers, version: 5.17.0 }}
    model-path: {model_dir}
    health-timeout: {health_timeout}
    args:
      --device: cpu
      --cb-num-blocks: 64
      --cb-max-batch-tokens: 512{extra_args}
    env:
      HF_HUB_OFFLINE: "1"
      TRANSFORMERS_OFFLINE: "1"
      OMP_NUM_THREADS: "1"
  workload:
    tokenizer: {model_dir}
    use-chat-template: true
    num-prompts-per-conc: {prompts_per_conc}
    num-warmups: {warmups}
"""
