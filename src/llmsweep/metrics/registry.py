"""The metric table: each metric defined once — name, unit, label, direction, where its per-request samples come
from, which statistics are stored — and everything else derived from it.

Derived here or from here: the summary's `units` block (`units()`), the results store's hot columns and the CLI and
report tables (`HOT_COLUMNS`, each with its label, unit, polarity, how it is read from a `Summary`, and how a table
heads and shows it: `header`, `cell`), every command's JSON key for a metric (`HotColumn.name`, its figure in the
column's unit, a latency in seconds: `run`, `predict`, `results list|show|frontier`, `compare`, the export; `sim
calibrate` and `peer crosscheck` key a figure the store does not hold as `figure` does; a whole summary holds it at
the metric's `name`), the noise bands' resampled statistics (`results.samples` computes a hot
column's statistic from its metric's `Sample`), the dashboard's axes (`report.data`). Adding a metric is one
`define(...)` here plus its computation in `metrics.summary` (and, to store it, a `stats`/`column`: the store
migrates its new column in by itself).

The names say which of the field's clashing definitions we mean (TPOT = per-request mean gap excluding the first
token; ITL = pooled inter-chunk gaps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from llmsweep.metrics.model import SIMULATED

if TYPE_CHECKING:
    from llmsweep.metrics.model import InvertedStats, Stats, Summary

Direction = Literal["higher", "lower"]
"""Which way is better."""
Polarity = Literal["max", "min"]
SampleKind = Literal["percentile", "inverse_percentile", "tokens_per_second_per_gpu"]
SampleColumn = Literal["ttft", "tpot", "e2el", "e2el_per_token", "input_tokens", "output_tokens", "total_tokens"]
"""The per-request sample columns of `results.samples.Samples` (successful profiling requests)."""

MODELLED_MARK = "(modelled)"
"""What follows a power figure (`MetricDef.power`) the simulator's power model gave rather than the GPUs, wherever it
is shown (`HotColumn.shown`): `results show`, and the dashboard (`report.data`'s `modelled_mark`, which its table,
tooltip, drill-down and key say)."""

Reader = Callable[["Summary"], "float | None"]
BlockReader = Callable[["Summary"], "Stats | InvertedStats"]


@dataclass(frozen=True, slots=True)
class Sample:
    """Where a metric's statistics come from per request, so the noise bands can resample requests.

    `percentile`: pXX of the column; `inverse_percentile`: 1 / pXX of the column (slow-tail inversion);
    `tokens_per_second_per_gpu`: the column's sum / (last end − first send) / GPUs."""

    column: SampleColumn
    kind: SampleKind = "percentile"


@dataclass(frozen=True, slots=True)
class MetricDef:
    """One metric. `block` reads its statistic block from a summary (distributions), `value` its scalar.

    Stored in the results store when `column` is set: as `<stat>_<column>` for each of `stats` (a distribution), or
    as `column` itself (a scalar)."""

    name: str
    unit: str
    description: str
    label: str | None = None
    direction: Direction | None = None
    short: str | None = None
    """How a table's column header names it, before the unit, when the label is too long for a column (tables fold
    long headers): "Output" for "Output throughput per GPU", whose unit says tok/s/GPU."""
    decimals: int = 1
    """The decimals a table shows it with, in its table unit (`HotColumn.cell`): TPOT 2 (3.75 ms, not 4 ms)."""
    column: str | None = None
    stats: tuple[str, ...] = ()
    sample: Sample | None = None
    block: BlockReader | None = None
    value: Reader | None = None
    power: bool = False
    """A figure of the GPUs' power samples: measured on the GPUs, or the simulator's power model's, as the power
    block's `source` says; wherever it is shown, a modelled one is marked so (`MODELLED_MARK`, `HotColumn.modelled`:
    `results show`, the dashboard)."""
    assumed: bool = False
    """A figure of the catalog's assumed price of a GPU-hour (`power.yaml`), not a measurement: where the price
    differs, so does the figure, whatever ran. `compare` judges it only between results priced alike
    (`results.compare`), and `results show` says the price it was figured at."""
    key: str | None = None
    """The name a command's --json keys a figure of a metric the store does not hold (`json_key`; a stored one's is
    its `column`): `output_tput` for the endpoint's output throughput, beside the stored `output_tput_per_gpu`."""

    def stats_of(self, summary: Summary) -> Stats | InvertedStats:
        """The metric's statistic block in a summary (a distribution metric)."""
        if self.block is None:
            raise ValueError(f"metric {self.name!r} is a scalar, not a distribution")
        return self.block(summary)

    def json_key(self, stat: str | None = None) -> str:
        """The one key every command's --json gives the metric's figure (of a distribution, its `stat`'s) under, in
        the metric's unit: `<stat>_<column>` or `column` for a stored metric (`HotColumn.name`: `p50_ttft`), the same
        of its `key` for one the store does not hold (`p50_schedule_lag`)."""
        base = self.column or self.key
        if base is None:
            raise ValueError(f"metric {self.name!r} has no --json key: give it a `key` (or a store `column`)")
        return f"{stat}_{base}" if stat is not None else base

    @property
    def display_unit(self) -> str:
        """The unit tables and axes print: ratios are shown as percentages, so their unit is empty."""
        return "" if self.unit == "ratio" else self.unit


@dataclass(frozen=True, slots=True)
class HotColumn:
    """One stored column: a metric's statistic (or scalar), with its label, unit and polarity for tables and axes.
    `figure` gives the same for a figure of a metric the store does not hold, which a command shows all the same."""

    name: str
    label: str
    unit: str
    polarity: Polarity
    metric: MetricDef
    stat: str | None = None

    @property
    def table_unit(self) -> str:
        """The unit a table shows the column in: a latency (stored in s) in ms, anything else in its own unit."""
        return "ms" if self.unit == "s" else self.unit

    @property
    def header(self) -> str:
        """How a table heads the column: its short name (else its label), then the unit its cells are in."""
        return self.header_in(self.table_unit)

    def cell(self, value: float | None) -> str:
        """How a table shows a value of the column (given in its stored unit), under `header`: in `table_unit`
        with the metric's decimals and thousands separators (`2,006.9`, a TPOT `3.75`), a ratio as a percentage,
        `-` where there is none. Every CLI table and the comparison's Markdown show a metric this way."""
        if value is None:
            return "-"
        if self.metric.unit == "ratio":
            return f"{value:.{self.metric.decimals}%}"
        return f"{value * (1e3 if self.unit == 's' else 1):,.{self.metric.decimals}f}"

    def modelled(self, power_source: str | None) -> bool:
        """Whether a figure of the column is the simulator's power model's: a power figure (`MetricDef.power`) of a
        point whose power block's `source` (`power_source`: `ResultPoint.power_source`, `run --json`'s) is simulated."""
        return self.metric.power and power_source == SIMULATED

    def shown(self, value: float | None, power_source: str | None) -> str:
        """`cell`, marked `MODELLED_MARK` after the value where the simulator's power model gave it (`modelled`)."""
        modelled = value is not None and self.modelled(power_source)
        return self.cell(value) + (f" {MODELLED_MARK}" if modelled else "")

    def header_in(self, unit: str) -> str:
        """The header of a table that shows the column in `unit` (`header`: in its table unit)."""
        name = self.metric.short or self.metric.label or self.label
        if self.stat is not None:
            name = f"{self.stat.upper()} {name}"
        return f"{name} {unit}".strip()

    def read(self, summary: Summary) -> float | None:
        """The column's value in a summary (None where the summary does not have it)."""
        m = self.metric
        if self.stat is not None and m.block is not None:
            return m.block(summary).stat(self.stat)
        return m.value(summary) if m.value is not None else None


_REGISTRY: dict[str, MetricDef] = {}


def define(name: str, unit: str, description: str, **kw: object) -> MetricDef:
    if name in _REGISTRY:
        raise ValueError(f"metric {name!r} is defined twice")
    metric = MetricDef(name, unit, description, **kw)  # type: ignore[arg-type]
    if metric.column is not None and (metric.label is None or metric.direction is None):
        raise ValueError(f"stored metric {name!r} needs a label and a direction")
    if metric.stats and metric.block is None:
        raise ValueError(f"metric {name!r} stores statistics but says no block to read them from")
    _REGISTRY[name] = metric
    return metric


def get(name: str) -> MetricDef:
    return _REGISTRY[name]


def units() -> dict[str, str]:
    """The summary's `units` block: every metric's unit by name."""
    return {name: m.unit for name, m in _REGISTRY.items()}


def all_metrics() -> list[MetricDef]:
    return list(_REGISTRY.values())


def _server_gpu_hit_rate(s: Summary) -> float | None:
    """The engine's GPU prefix-cache hit rate, else its overall one, else the client-side observed one."""
    cache = s.server_metrics.cache
    if cache is not None:
        if cache.gpu_hit_rate is not None:
            return cache.gpu_hit_rate
        if cache.overall_hit_rate is not None:
            return cache.overall_hit_rate
    return s.cache.observed_hit_rate


def _kv_usage_max(s: Summary) -> float | None:
    kv = s.server_metrics.kv_cache
    return kv.gpu_usage_max if kv is not None else None


# ---------------------------------------------------------------------------------------------------- the table
# Order: stored metrics in the order of the store's original columns (tables list them in this order).

TOTAL_PER_GPU = define(
    "throughput.per_gpu.total_tps", "tok/s/GPU", "Input plus output throughput divided by the GPUs serving it.",
    label="Throughput per GPU", short="Total", direction="higher", column="tput_per_gpu",
    sample=Sample("total_tokens", "tokens_per_second_per_gpu"), value=lambda s: s.throughput.per_gpu.total_tps)
OUTPUT_PER_GPU = define(
    "throughput.per_gpu.output_tps", "tok/s/GPU", "Output throughput divided by the GPUs serving the endpoint.",
    label="Output throughput per GPU", short="Output", direction="higher", column="output_tput_per_gpu",
    sample=Sample("output_tokens", "tokens_per_second_per_gpu"), value=lambda s: s.throughput.per_gpu.output_tps)
INPUT_PER_GPU = define(
    "throughput.per_gpu.input_tps", "tok/s/GPU", "Input throughput divided by the GPUs serving the endpoint.",
    label="Input throughput per GPU", short="Input", direction="higher", column="input_tput_per_gpu",
    sample=Sample("input_tokens", "tokens_per_second_per_gpu"), value=lambda s: s.throughput.per_gpu.input_tps)
TTFT = define(
    "latency.ttft", "s", "First non-empty content chunk minus request send time.",
    label="TTFT", direction="lower", column="ttft", stats=("p50", "p90", "p99"), sample=Sample("ttft"),
    block=lambda s: s.latency.ttft)
TPOT = define(
    "latency.tpot", "s", "Per request (E2EL - TTFT) / (OSL - 1), requests with OSL >= 2.",
    label="TPOT", decimals=2, direction="lower", column="tpot", stats=("p50", "p90", "p99"), sample=Sample("tpot"),
    block=lambda s: s.latency.tpot)
E2EL = define(
    "latency.e2el", "s", "Last non-empty content chunk minus request send time (AgentX request latency).",
    label="E2E latency", direction="lower", column="e2el", stats=("p50", "p90"), sample=Sample("e2el"),
    block=lambda s: s.latency.e2el)
INTERACTIVITY = define(
    "interactivity", "tok/s/user", "Slow-tail inversion of TPOT: pXX = 1 / pXX(TPOT).",
    label="interactivity", direction="higher", column="intvty", stats=("p50", "p90"),
    sample=Sample("tpot", "inverse_percentile"), block=lambda s: s.interactivity)
E2E_NORM = define(
    "e2e_norm_interactivity", "tok/s/user", "pXX = 1 / pXX(E2EL / OSL) per request.",
    label="E2E-normalised interactivity", short="E2E-norm intvty", direction="higher", column="e2e_norm_intvty",
    stats=("p90", "p75"),
    sample=Sample("e2el_per_token", "inverse_percentile"), block=lambda s: s.e2e_norm_interactivity)
QPS = define(
    "qps", "req/s", "Completions counted in consecutive 1-second windows from the first completion.",
    label="Requests per second", short="Requests", decimals=2, direction="higher", column="request_qps",
    value=lambda s: s.qps.mean)
ERROR_RATIO = define(
    "requests.error_ratio", "ratio",
    "Failed / (successful + failed) profiling requests; none (a table's `-`) when no profiling request finished.",
    label="Error ratio", short="Errors", direction="lower", column="error_ratio",
    value=lambda s: s.requests.error_ratio)
GPU_CACHE_HIT = define(
    "server_metrics.cache.gpu_hit_rate", "ratio",
    "The engine's GPU prefix-cache hit rate over the window (else its overall rate, else the observed one).",
    label="GPU prefix-cache hit rate", short="GPU cache hit", direction="higher", column="gpu_cache_hit_rate",
    value=_server_gpu_hit_rate)
KV_USAGE_MAX = define(
    "server_metrics.kv_cache.gpu_usage_max", "ratio", "Peak GPU KV-cache usage the engine reported over the window.",
    label="Peak GPU KV-cache usage", short="Peak KV use", direction="lower", column="gpu_kv_usage_max",
    value=_kv_usage_max)


def _power(field: str) -> Reader:
    """A figure of the power block (None without a block, or when power is not valid)."""
    def read(s: Summary) -> float | None:
        value = getattr(s.power, field) if s.power is not None and s.power.power_valid else None
        return float(value) if value is not None else None
    return read


def _cost(field: str) -> Reader:
    def read(s: Summary) -> float | None:
        cost = s.power.cost if s.power is not None else None
        value = getattr(cost, field) if cost is not None else None
        return float(value) if value is not None else None
    return read


# Power and cost (`llmsweep.power`): per window, not per request, so no `sample` (the noise bands of `compare`
# come from repeats for these). InferenceX spells the energy figures as the columns do.
TOKENS_PER_JOULE = define(
    "power.tokens_per_joule", "tok/J", "Input plus output tokens per joule of GPU energy over the profile window.",
    label="Tokens per joule", short="Efficiency", decimals=3, direction="higher", column="tokens_per_joule",
    power=True, value=_power("tokens_per_joule"))
J_PER_OUTPUT_TOKEN = define(
    "power.joules_per_output_token", "J/tok", "GPU energy over the window / output tokens (InferenceX's name).",
    label="Energy per output token", short="Output energy", decimals=3, direction="lower",
    column="joules_per_output_token", power=True, value=_power("joules_per_output_token"))
AVG_POWER = define(
    "power.avg_power_w", "W/GPU", "Average power per GPU over the profile window (trapezoid of the samples).",
    label="Average power per GPU", short="Power", direction="lower", column="avg_power_w", power=True,
    value=_power("avg_power_w"))
USD_PER_MTOK_OUTPUT = define(
    "power.cost.usd_per_mtok_output", "$/Mtok",
    "ASSUMED price of a GPU-hour (catalog power.yaml) / output tokens per GPU-hour, per million tokens.",
    label="Cost per million output tokens (assumed $/GPU-h)", short="Assumed output cost", decimals=2,
    direction="lower", column="usd_per_mtok_output", assumed=True,
    value=_cost("usd_per_mtok_output"))
J_PER_TOTAL_TOKEN = define("power.joules_per_total_token", "J/tok", "GPU energy / (input + output tokens).",
                           power=True)
J_PER_INPUT_TOKEN = define("power.joules_per_input_token", "J/tok", "GPU energy / input tokens.", power=True)
TOKENS_PER_MW = define("power.tokens_per_s_per_mw", "tok/s/MW",
                       "Input plus output tokens/s per MW of GPU power over the profile window (measured on the GPUs, "
                       "or the simulator's power model's: the power block's `source` says which).", power=True)
PEAK_POWER = define("power.peak_power_w", "W", "Highest per-GPU power in the profile window.", power=True)
ENERGY = define("power.energy_j", "J", "Energy of all the job's GPUs over the profile window.", power=True)
USD_PER_MTOK_TOTAL = define("power.cost.usd_per_mtok_total", "$/Mtok",
                            "ASSUMED price of a GPU-hour / total tokens per GPU-hour, per million tokens.",
                            assumed=True)
TOKENS_PER_MW_ALL_IN = define("power.cost.tokens_per_s_per_mw_all_in", "tok/s/MW",
                              "Throughput per GPU x 1000 / all-in utility kW per GPU (InferenceX app's table).")

ITL = define("latency.itl", "s", "Pooled gaps between consecutive content chunks (a chunk may hold several tokens).",
             label="ITL", direction="lower", block=lambda s: s.latency.itl)
INPUT_TPUT = define("throughput.input_tps", "tok/s", "Sum of input tokens / (last end - first send).")
OUTPUT_TPUT = define("throughput.output_tps", "tok/s", "Sum of output tokens / (last end - first send).",
                     label="Output throughput", short="Output", decimals=0, direction="higher", key="output_tput",
                     value=lambda s: s.throughput.output_tps)
TOTAL_TPUT = define("throughput.total_tps", "tok/s", "Input plus output throughput.")
REQ_TPUT = define("throughput.request_rps", "req/s", "Successful requests / (last end - first send).")
PER_GPU = define("throughput.per_gpu", "tok/s/gpu", "Each throughput divided by the GPUs serving the endpoint.")
THEO_CACHE = define("cache.theoretical_hit_rate", "ratio", "Sum of theoretically cached / sum of input tokens.")
OBS_CACHE = define("cache.observed_hit_rate", "ratio", "Sum of server cached_tokens / sum of server prompt_tokens.")
INPUT_TOKENS = define("tokens.input", "tok", "Server prompt_tokens per request (else the workload's intended ISL).")
OUTPUT_TOKENS = define("tokens.output", "tok", "Server completion_tokens per request (else the sum of chunk tokens).")
SCHEDULE_LAG = define("client_health.schedule_lag", "s", "Actual send time minus scheduled send time.",
                      label="Schedule lag", decimals=2, direction="lower", key="schedule_lag")


def figure(metric: MetricDef, stat: str | None = None) -> HotColumn:
    """A figure of a metric (of a distribution, its `stat`) as a table and --json show it: keyed `json_key`, headed
    and shown as a stored column is (`HotColumn.header`, `cell`). Every stored column is one (`HOT_COLUMNS`); a
    command that shows a figure the store does not hold (`sim calibrate`'s endpoint output throughput, `peer
    crosscheck`'s schedule lag) takes it from here, never a spelling of its own."""
    if metric.label is None or metric.direction is None:
        raise ValueError(f"metric {metric.name!r} needs a label and a direction to be shown")
    polarity: Polarity = "max" if metric.direction == "higher" else "min"
    label = f"{stat.upper()} {metric.label}" if stat is not None else metric.label
    return HotColumn(metric.json_key(stat), label, metric.display_unit, polarity, metric, stat)


def _hot_columns() -> tuple[HotColumn, ...]:
    out: list[HotColumn] = []
    for m in _REGISTRY.values():
        if m.column is None or m.label is None or m.direction is None:
            continue
        out += [figure(m, stat) for stat in m.stats] if m.stats else [figure(m)]
    return tuple(out)


HOT_COLUMNS: tuple[HotColumn, ...] = _hot_columns()
"""Every stored column, in table order."""
HOT_BY_NAME: dict[str, HotColumn] = {c.name: c for c in HOT_COLUMNS}
HOT_NAMES: tuple[str, ...] = tuple(c.name for c in HOT_COLUMNS)
