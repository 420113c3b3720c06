"""Golden acceptance-length collection (`llmsweep al collect`): a curve measured on a served model.

Public API:
    load_prompts(source, category, limit) -> PromptSet          SPEED-Bench rows: hub, a JSONL file, or builtin
    collection_job(jobs, simulate=...) -> Job                     the recipe's speculative single-server job
    curve_file_name(job, variant) -> str                          <prefix>_<method>[_<variant>].yaml
    collect_curve(job, settings, prompts, run_dir, out, launcher=..., simulate=..., event=...) -> CollectResult
"""

from __future__ import annotations

from llmsweep.alcollect.collect import (
    CellResult,
    CollectResult,
    CollectSettings,
    Sampling,
    collect_curve,
    collection_job,
    curve_file_name,
)
from llmsweep.alcollect.prompts import PromptSet, load_prompts

__all__ = [
    "CellResult",
    "CollectResult",
    "CollectSettings",
    "PromptSet",
    "Sampling",
    "collect_curve",
    "collection_job",
    "curve_file_name",
    "load_prompts",
]
