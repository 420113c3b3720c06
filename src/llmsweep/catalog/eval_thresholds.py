"""Score floors of the eval gate (`eval_thresholds.yaml`): model prefix → task → metric → threshold.

Packaged data, extended or replaced per model prefix by a user file of the same name (`catalog.sources`). The
`default` entry holds the per-task fallbacks and, under task `"*"`, the floor of a task nobody named.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, RootModel, field_validator

from llmsweep.catalog.sources import Origin, build_models, cached, catalog_dirs
from llmsweep.errors import ConfigError

DEFAULT = "default"
ANY_TASK = "*"


class ModelThresholds(RootModel[dict[str, dict[str, float]]]):
    """One model prefix's floors: task → metric (`exact_match`, or a full `exact_match,strict-match`) → score."""

    root: dict[str, dict[str, float]] = Field(default_factory=dict)

    @field_validator("root")
    @classmethod
    def _in_range(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for task, metrics in value.items():
            for metric, floor in metrics.items():
                if not 0.0 <= floor <= 1.0:
                    raise ValueError(f"{task}.{metric}: threshold {floor} is not a score between 0 and 1")
        return value


@cached
def _catalog(dirs: tuple[Path, ...]) -> dict[str, tuple[ModelThresholds, Origin]]:
    return build_models("eval_thresholds.yaml", "thresholds", ModelThresholds, dirs)


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
    raise ConfigError(f"no eval threshold for {task} metric {metric} (model prefix {model_prefix!r})",
                      fix='add `default: {"*": {exact_match: 0.85}}` back to eval_thresholds.yaml, or an entry for '
                          "the task")
