"""What an imported result row may hold: one judge of the figures, request counts and point numbers of both import
formats (our JSON export's rows, its summary's figures included, and InferenceX's aggregate rows), and the reading of
a row's summary that the store can read back.

A figure no measurement has — a negative throughput, latency, rate or energy, a hit rate above 1, request counts that
are fractional or negative or count more successful requests than requests — or a point whose concurrency, ISL/OSL,
parallelism or GPU count is not a whole number of at least its least value is refused (`judge`), naming the row and
the field: stored, such a row stood as a valid point (a negative TTFT on every latency axis, an error ratio of -1347 %,
a `c0` point matched with nothing).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from llmsweep.errors import ResultInputError
from llmsweep.jsonline import finite_or_null
from llmsweep.metrics.model import Summary
from llmsweep.metrics.registry import KV_USAGE_MAX, MetricDef, all_metrics
from llmsweep.words import count_of


class Figure(NamedTuple):
    """A figure of a row: the field that holds it (as the row spells it), its value as the row has it, and the most
    it can be (None: no ceiling); every figure is at least 0."""

    field: str
    value: Any
    most: float | None = None


PEAKS: frozenset[str] = frozenset({KV_USAGE_MAX.name})
"""Ratio metrics with no ceiling an import holds a row to: KV usage is a peak gauge, which servers report above 1
(AgentX reads it as a fraction up to 1.5, as a percentage above)."""


def ceiling(metric: MetricDef) -> float | None:
    """The most a figure of `metric` can be: 1 for a ratio (a hit rate, an error ratio) but a peak (`PEAKS`), else
    None."""
    return 1.0 if metric.unit == "ratio" and metric.name not in PEAKS else None


TOPOLOGY_LEAST: tuple[tuple[str, int], ...] = (
    ("conc", 1), ("users", 1), ("isl", 1), ("osl", 1), ("tp", 1), ("pp", 1), ("dcp_size", 1), ("pcp_size", 1),
    ("ep", 0), ("num_prefill_gpu", 1), ("num_decode_gpu", 0),
    *((f"prefill_{k}", 0 if k == "ep" else 1) for k in ("tp", "pp", "dcp_size", "pcp_size", "ep", "num_workers")),
    *((f"decode_{k}", 0) for k in ("tp", "pp", "dcp_size", "pcp_size", "ep", "num_workers")))
"""(InferenceX field, its least value) of the whole numbers a throughput row's point and GPU count are read from
(core spec §6.2: InferenceX refuses zero GPUs and a non-positive PP/DCP/PCP; a multinode row's decode topology is
zeroed where it has no decode GPUs). Our rows' point identity holds the same numbers (`IDENTITY_LEAST`)."""

_IDENTITY_SPELLING = {"dcp_size": "dcp", "pcp_size": "pcp"}
IDENTITY_LEAST: dict[str, int] = {_IDENTITY_SPELLING.get(f, f): least for f, least in TOPOLOGY_LEAST[:9]
                                  if f != "users"}
"""The least value of each whole number of a point identity (`PointIdentity`: conc, isl, osl, tp, pp, dcp, pcp, ep),
as `TOPOLOGY_LEAST` has it under InferenceX's spelling."""


def whole(value: Any) -> int | None:
    """A whole number as a row may spell it (an int, a float without a fraction, or the text of an int), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _number(value: Any) -> float | None:
    """A finite number (bools are not numbers here), else None: a figure that is not one is not judged."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def judge(where: str, fix: str, *, figures: Iterable[Figure] = (), counts: Iterable[tuple[str, Any]] = (),
          successful: tuple[tuple[str, Any], tuple[str, Any]] | None = None,
          whole_numbers: Iterable[tuple[str, Any, int]] = ()) -> None:
    """Refuse a row (`where`: the file and row, as the error names them; `fix`: what to do) holding a figure no
    measurement has, as either import format reads it: a figure below 0 or above its ceiling; a count of requests
    (field, value) that is negative or fractional; more successful requests than requests (`successful`: (requests,
    successful requests), each (field, value)); a whole number (field, value, least) that is not one, or is below its
    least. A value that is not a finite number is not a figure here (its reader reads it as none, or refuses it)."""
    def bad(field: str, value: Any, want: str) -> ResultInputError:
        return ResultInputError(f"{where}: `{field}` is {value!r}, not {want}", fix=fix)

    for field, value, most in figures:
        number = _number(value)
        if number is not None and (number < 0 or (most is not None and number > most)):
            raise bad(field, value, f"a figure from 0 to {most:g}" if most is not None else "a figure of 0 or more")
    for field, value in (*counts, *(successful or ())):
        number = _number(value)
        if number is not None and (number < 0 or number != int(number)):
            raise bad(field, value, "a count of requests")
    if successful is not None:
        (total_field, total), (ok_field, ok) = successful
        if _number(total) is not None and _number(ok) is not None and ok > total:
            raise bad(ok_field, ok, f"at most `{total_field}` ({total!r})")
    for field, value, least in whole_numbers:
        if value is None:
            continue
        number = whole(value)
        if number is None or number < least:
            raise bad(field, value, f"a whole number of at least {least}")


_SUMMARY_RATES = ("server_metrics.cache.overall_hit_rate", "server_metrics.cache.cpu_hit_rate")
"""Hit rates a summary holds beside its metric table's (the GPU hit rate's column falls back to the overall one)."""


def summary_figures(summary: Summary) -> list[Figure]:
    """The figures of one of our summaries the judge reads: every metric of the metric table where the summary holds
    it (a whole summary holds a metric at its `name`: a distribution's every statistic, a block's every figure), and
    the server's other hit rates, each named `summary.<path>`."""
    out: list[Figure] = []

    def at(path: str) -> Any:
        node: Any = summary
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else getattr(node, part, None)
        if isinstance(node, BaseModel):  # a block: its fields as the summary spells them (`p99.9`)
            return {f.alias or name: getattr(node, name) for name, f in type(node).model_fields.items()}
        return node

    for metric in all_metrics():
        node, most = at(metric.name), ceiling(metric)
        if isinstance(node, Mapping):
            out += [Figure(f"summary.{metric.name}.{key}", value, most) for key, value in node.items()]
        else:
            out.append(Figure(f"summary.{metric.name}", node, most))
    out += [Figure(f"summary.{path}", at(path), 1.0) for path in _SUMMARY_RATES]
    return out


def summary_counts(summary: Summary) -> tuple[list[tuple[str, Any]], tuple[tuple[str, Any], tuple[str, Any]] | None]:
    """A summary's request counts as the judge reads them (`judge`'s `counts` and `successful`): every count of its
    requests block, and its requests against its successful ones where it counts the requests (`total`: a summary
    of an aiperf export, `peer import`, counts only the successful and failed ones, its `total` 0)."""
    requests = summary.requests
    counts = [(f"summary.requests.{name}", value) for name, value in requests.model_dump().items()
              if isinstance(value, int) and not isinstance(value, bool)]
    pair = (("summary.requests.total", requests.total), ("summary.requests.successful", requests.successful))
    return counts, pair if requests.total > 0 else None


def read_summary(doc: Mapping[str, Any], where: str, fix: str) -> Summary:
    """One of our summaries as a row of our JSON export holds it, in a form the store reads back: a figure that is
    not a number (NaN, ±Infinity) is read as none (null), where the summary has a null for it; where it has none (a
    statistic, a throughput), or a field is not what a summary holds, the row is refused, naming the field (never
    pydantic's text: the file's reader has no job folder to summarise again). The summary read is read once more
    from what the store will hold, so what the import stores always reads back."""
    try:
        json.dumps(doc, allow_nan=False)  # (the common case, quickly: every number finite)
        finite: Any = doc
    except ValueError:
        finite = finite_or_null(dict(doc))
    stored = _validated(finite, doc, where, fix).dump()
    return _validated(stored, stored, where, fix)


def _validated(doc: Any, said: Any, where: str, fix: str) -> Summary:
    try:
        return Summary.from_doc(doc, where=f"{where}: `summary`", fix=fix)
    except ResultInputError as exc:
        if not isinstance(exc.__cause__, ValidationError):
            raise
        errors = exc.__cause__.errors(include_url=False)
    first = errors[0]
    loc: tuple[Any, ...] = tuple(first["loc"])
    field = ".".join(["summary", *map(str, loc)])
    value, present = _at(said, loc)
    if not present:
        why = f"`{field}` is missing ({_lower(first['msg'])})"
    elif isinstance(value, float) and not math.isfinite(value):
        why = f"`{field}` is {value!r}, not a number, and a summary holds one there (it has no null for it)"
    else:
        why = f"`{field}` is {value!r}: {_lower(first['msg'])}"
    more = f" (and {count_of(len(errors) - 1, 'other field')} of the summary)" if len(errors) > 1 else ""
    raise ResultInputError(f"{where}: {why}{more}", fix=fix) from None


def _at(doc: Any, loc: tuple[Any, ...]) -> tuple[Any, bool]:
    """The value at a validation error's location in the document it was given, and whether it is there."""
    node = doc
    for part in loc:
        held = ((isinstance(node, Mapping) and part in node)
                or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)))
        if held:
            node = node[part]
        else:
            return None, False
    return node, True


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]
