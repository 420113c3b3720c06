"""Score floors of the eval gate (`eval_thresholds.yaml`): model prefix → task → metric → threshold.

Packaged data, extended or replaced per model prefix by a user file of the same name (`catalog.sources`). The
`default` entry holds the per-task fallbacks and, under task `"*"`, the floor of a task nobody named. A metric is one
the gate reads (`exact_match`, or `exact_match,<filter>`), else the file is refused: a misspelt one was skipped in
silence and the eval judged against a fallback floor. Whether a task and a filter are ones llmsweep runs is the
gate's to say (`evals.gate.check_thresholds`: it knows the task files).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, RootModel, StringConstraints, ValidationError

from llmsweep.catalog.sources import Origin, cached, catalog_dirs, line_of, load_section
from llmsweep.errors import CatalogError, ConfigError

log = logging.getLogger(__name__)

FILE = "eval_thresholds.yaml"
SECTION = "thresholds"
DEFAULT = "default"
ANY_TASK = "*"
GATED_METRIC = "exact_match"
"""The metric the eval gate holds to a floor, under every filter lm-eval reports it with (`exact_match,strict-match`).
"""
_FIX = (f"write each floor as `{SECTION}: <model prefix>: <task>: <metric>: <score>`, the score a number from 0 to 1 "
        f"(e.g. `{SECTION}: {{qwen3.5: {{gsm8k: {{exact_match: 0.94}}}}}}`)")

_METRIC_FIX = (f"name the metric `{GATED_METRIC}` (a floor for every filter lm-eval reports it with) or "
               f"`{GATED_METRIC},<filter>` for one of them (e.g. `{GATED_METRIC},strict-match`)")

Floor = Annotated[float, Field(ge=0.0, le=1.0, strict=True)]
Metric = Annotated[str, StringConstraints(pattern=rf"^{GATED_METRIC}(,[^,\s]+)?$")]


class ModelThresholds(RootModel[dict[str, dict[Metric, Floor]]]):
    """One model prefix's floors: task → metric (`exact_match`, or a full `exact_match,strict-match`) → score."""

    root: dict[str, dict[Metric, Floor]] = Field(default_factory=dict)


@dataclass(frozen=True)
class FloorAt:
    """One floor of the catalog as its file states it (for the gate's check of its task and filter)."""

    prefix: str
    task: str
    metric: str
    score: float
    origin: Origin
    """The model prefix's entry: the file it came from (a user file's entry replaces the packaged one whole)."""

    @property
    def filter(self) -> str | None:
        """`strict-match` of `exact_match,strict-match`; None for a bare `exact_match` (every filter)."""
        return self.metric.split(",", 1)[1] if "," in self.metric else None

    def line(self, *, metric: bool = True) -> int | None:
        """The line of the metric's key (of the task's, with `metric` False), else of the model prefix's entry."""
        keys = [SECTION, self.prefix, self.task, *([self.metric] if metric else [])]
        return line_of(self.origin.path, keys) or self.origin.line

    def where(self, *, metric: bool = True) -> str:
        """`file:line` of the metric's key (of the task's, with `metric` False)."""
        return f"{self.origin.path}:{self.line(metric=metric) or '?'}"

    @property
    def field(self) -> str:
        return f"{self.prefix}.{self.task}.{self.metric}"


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
            loc = [str(p) for p in err["loc"] if p != "[key]"]
            fix = _FIX
            if err["type"] in ("greater_than_equal", "less_than_equal"):
                said = f"{err['input']!r} is not a score between 0 and 1"
            elif err["type"] == "string_pattern_mismatch":  # a metric key
                said, fix = f"{err['input']!r} is not a metric the eval gate reads", _METRIC_FIX
            else:
                said = err["msg"].lower()
            line = line_of(origin.path, [SECTION, key, *loc]) or origin.line
            raise CatalogError(f"eval threshold {'.'.join([key, *loc])}: {said}", file=origin.path, line=line,
                               field=".".join([SECTION, key, *loc]), fix=fix) from exc
    return out


def floors() -> list[FloorAt]:
    """Every floor of the catalog (packaged, then user files; a user's model prefix replacing the packaged one)."""
    return [FloorAt(prefix, task, metric, score, origin)
            for prefix, (entry, origin) in _catalog(catalog_dirs()).items()
            for task, metrics in entry.root.items() for metric, score in metrics.items()]


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
    files = [d / FILE for d in catalog_dirs() if (d / FILE).is_file()]
    problem = (f"no eval threshold for {task} metric {metric} (model prefix {model_prefix!r}) in "
               + ", ".join(map(str, files)))
    fix = f'add `default: {{"*": {{exact_match: 0.85}}}}` back to {FILE}, or an entry for the task'
    default = table.get(DEFAULT)
    if default is None and not files:  # no thresholds file at all: no file to point at
        raise ConfigError(problem, fix=fix)
    # at the `default` entry that lacks the task (the user's, which replaced the packaged one whole), else the last file
    where = default[1] if default is not None else Origin(files[-1], None)
    raise CatalogError(problem, file=where.path, line=where.line, field=f"{SECTION}.{DEFAULT}", fix=fix)


@dataclass(frozen=True)
class UnreadPrefix:
    """A user file's model prefix that no model of the evals at hand has: its floors are never read for them."""

    prefix: str
    origin: Origin
    closest: str
    """The evaluated model prefix nearest to it (one equal but for case first)."""

    def message(self, evaluated: list[str]) -> str:
        same = self.closest.casefold() == self.prefix.casefold()
        return (f"{self.origin}: eval thresholds of model prefix {self.prefix!r} match no model prefix of the evals "
                f"at hand ({', '.join(evaluated)}), so its floors are never read for them: prefixes match exactly"
                f"{', case included' if same else ''}; the closest model prefix is {self.closest!r}"
                f"{' (rename the entry to it)' if same else ''}")


def unread_prefixes(model_prefixes: Iterable[str | None]) -> list[UnreadPrefix]:
    """The model prefixes of the user's thresholds files that none of `model_prefixes` (the evaluated jobs') is:
    `threshold_for` matches a prefix exactly, so a `Qwen3.5` entry is never read for `qwen3.5`, and an entry for a
    model the evals do not run is not read by them; each with the evaluated prefix closest to it. The packaged file's
    prefixes (InferenceX's models) and `default` are never unread in this sense."""
    evaluated = sorted({p for p in model_prefixes if p})
    if not evaluated:
        return []
    out: list[UnreadPrefix] = []
    for prefix, (_, origin) in _catalog(catalog_dirs()).items():
        if origin.packaged or prefix == DEFAULT or prefix in evaluated:
            continue
        folded = [p for p in evaluated if p.casefold() == prefix.casefold()]
        closest = folded[0] if folded else max(
            evaluated, key=lambda p: difflib.SequenceMatcher(None, prefix.casefold(), p.casefold()).ratio())
        out.append(UnreadPrefix(prefix, origin, closest))
    return sorted(out, key=lambda u: (str(u.origin.path), u.origin.line or 0))  # as the files write them


def warn_unread_prefixes(model_prefixes: Iterable[str | None]) -> list[UnreadPrefix]:
    """Say each of :func:`unread_prefixes` as a warning (on stderr, as the CLI logs them), as the gate says a user's
    floor of a task llmsweep does not run (`evals.gate.check_thresholds`); returns them."""
    evaluated = sorted({p for p in model_prefixes if p})
    unread = unread_prefixes(evaluated)
    for one in unread:
        log.warning("%s", one.message(evaluated))
    return unread
