"""InferenceX's recipe fingerprint: the identity of a curve, independent of its points.

sha256 over the canonical JSON (sorted keys, compact, ASCII) of the throughput matrix entry minus `conc`,
`exp-name` and `recipe-fingerprint`. Every concurrency point of one curve shares it, so results can be grouped,
reused and appended to the right curve.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from llmsweep.spec.workload import ScenarioId

POINT_FIELDS = frozenset({"conc", "exp-name", "recipe-fingerprint"})
EVAL_FIELDS = frozenset({"run-eval", "eval-only", "eval-conc", "eval-all-concs"})


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def recipe_fingerprint(entry: dict[str, Any]) -> str:
    """64 lowercase hex of the entry without its point fields."""
    curve = {k: v for k, v in entry.items() if k not in POINT_FIELDS}
    return hashlib.sha256(canonical_json(curve).encode("ascii")).hexdigest()


def throughput_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as InferenceX's changelog generates it (`--no-evals`) before fingerprinting.

    Fixed-seq-len rows carry `run-eval: false`; agentic rows carry no eval fields.
    """
    out = {k: v for k, v in entry.items() if k not in EVAL_FIELDS}
    if entry.get("scenario-type") != ScenarioId.AGENTIC_CODING:
        out["run-eval"] = False
    return out
