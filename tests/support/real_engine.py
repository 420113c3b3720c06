"""Where a real engine can run on this machine's CPU: `transformers serve` from a python that imports torch and
transformers[serving] (CI installs one in `.venv-tf` and names it in LLMSWEEP_TRANSFORMERS_PYTHON)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def transformers_path() -> str | None:
    """The PATH under which the adapter's `python3` can serve with transformers (None: no such python here)."""
    given = os.environ.get("LLMSWEEP_TRANSFORMERS_PYTHON")
    path = (str(Path(given).parent) + os.pathsep if given else "") + os.environ.get("PATH", "")
    exe = shutil.which("python3", path=path)
    if exe is None:
        return None
    probe = "import torch, transformers, fastapi, uvicorn, requests; assert transformers.__version__ >= '5'"
    try:
        ok = subprocess.run([exe, "-c", probe], capture_output=True, timeout=120).returncode == 0
    except subprocess.TimeoutExpired:
        return None
    return path if ok else None
