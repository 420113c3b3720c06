"""Score floors of the eval gate (`eval_thresholds.yaml`): model prefix → task → metric → threshold.

Packaged data, extended or replaced per model prefix by a user file of the same name (`catalog.sources`). The
`default` entry holds the per-task fallbacks and, under task `"*"`, the floor of a task nobody named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, RootModel, ValidationError

from llmsweep.catalog.sources import Origin, cached, catalog_dirs, line_of, load_section
from llmsweep.errors import ConfigError

FILE = "eval_thresholds.yaml"
SECTION = "thresholds"
DEFAULT = "default"
ANY_TASK = "*"
_FIX = (f"write each floor as `{SECTION}: <model prefix>: <task>: <metric>: <score>`, the score a number from 0 to 1 "
        f"(e.g. `{SECTION}: {{qwen3.5: {{gsm8k: {{exact_match: 0.94}}}}}}`)")

Floor = Annotated[float, Field(ge=0.0, le=1.0, strict=True)]


class ModelThresholds(RootModel[dict[str, dict[str, Floor]]]):
    """One model prefix's floors: task → metric (`exact_match`, or a full `exact_match,strict-match`) → score."""

    root: dict[str, dict[str, Floor]] = Field(default_factory=dict)


@cached
def _catalog(dirs: tuple[Path, ...]) -> dict[str, tuple[ModelThresholds, Origin]]:
    """Every model prefix's floors, packaged then user files; a malformed floor names its file:line, the field (prefix,
    task, metric) and how to write one."""
    out: dict[str, tuple[ModelThresholds, Origin]] = {}
    for key, (raw, origin) in load_section(FILE, SECTION, dirs).items():
        try:
            out[key] = (ModelThresholds.model_validate(raw), origin)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = [str(p) for p in err["loc"]]
            said = (f"{err['input']!r} is not a score between 0 and 1"
                    if err["type"] in ("greater_than_equal", "less_than_equal") else err["msg"].lower())
            line = line_of(origin.path, [SECTION, key, *loc]) or origin.line
            raise ConfigError(f"{origin.path}:{line or '?'}: eval threshold {'.'.join([key, *loc])}: {said}",
                              fix=_FIX) from exc
    return out


def threshold_for(model_prefix: str | None, task: str, metric: str) -> tuple[float, str]:
    """(floor, where it came from) for a metric lm-eval reported (`exact_match,strict-match`): the full name first,
    then its base (`exact_match`); the model prefix's entry, then `default.<task>`, then `default."*"`."""
    table = _catalog(catalog_dirs())
    base = metric.split(",", 1)[0]
    lookups = [(model_prefix, task)] if model_prefix and model_prefix != DEFAULT else []
    lookups += [(DEFAULT, task), (DEFAULT, ANY_TASK)]
    for prefix, key in lookups:
        entry = table.get(prefix or "")
        metrics = entry[0].root.get(key) if entry is not None else None
        if not metrics:
            continue
        for name in (metric, base):
            if name in metrics:
                return metrics[name], f"{prefix}.{key}.{name}"
    raise ConfigError(f"no eval threshold for {task} metric {metric} (model prefix {model_prefix!r}) in "
                      + ", ".join(str(d / FILE) for d in catalog_dirs() if (d / FILE).is_file()),
                      fix=f'add `default: {{"*": {{exact_match: 0.85}}}}` back to {FILE}, or an entry for the task')
