"""The registry of metric definitions: each metric is defined once, with its unit and meaning.

The summary carries the units of every block it reports (`summary["units"]`), the CLI labels its table from here,
and the names say which of the field's clashing definitions we mean (TPOT = per-request mean gap excluding the first
token; ITL = pooled inter-chunk gaps).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetricDef:
    name: str
    unit: str
    description: str


_REGISTRY: dict[str, MetricDef] = {}


def define(name: str, unit: str, description: str) -> MetricDef:
    if name in _REGISTRY:
        raise ValueError(f"metric {name!r} is defined twice")
    _REGISTRY[name] = MetricDef(name, unit, description)
    return _REGISTRY[name]


def get(name: str) -> MetricDef:
    return _REGISTRY[name]


def units() -> dict[str, str]:
    return {name: m.unit for name, m in _REGISTRY.items()}


def all_metrics() -> list[MetricDef]:
    return list(_REGISTRY.values())


TTFT = define("latency.ttft", "s", "First non-empty content chunk minus request send time.")
E2EL = define("latency.e2el", "s", "Last non-empty content chunk minus request send time (AgentX request latency).")
TPOT = define("latency.tpot", "s", "Per request (E2EL - TTFT) / (OSL - 1), requests with OSL >= 2.")
ITL = define("latency.itl", "s", "Pooled gaps between consecutive content chunks (a chunk may hold several tokens).")
INTERACTIVITY = define("interactivity", "tok/s/user", "Slow-tail inversion of TPOT: pXX = 1 / pXX(TPOT).")
E2E_NORM = define("e2e_norm_interactivity", "tok/s/user", "pXX = 1 / pXX(E2EL / OSL) per request.")
QPS = define("qps", "req/s", "Completions counted in consecutive 1-second windows from the first completion.")
INPUT_TPUT = define("throughput.input_tps", "tok/s", "Sum of input tokens / (last end - first send).")
OUTPUT_TPUT = define("throughput.output_tps", "tok/s", "Sum of output tokens / (last end - first send).")
TOTAL_TPUT = define("throughput.total_tps", "tok/s", "Input plus output throughput.")
REQ_TPUT = define("throughput.request_rps", "req/s", "Successful requests / (last end - first send).")
PER_GPU = define("throughput.per_gpu", "tok/s/gpu", "Each throughput divided by the GPUs serving the endpoint.")
THEO_CACHE = define("cache.theoretical_hit_rate", "ratio", "Sum of theoretically cached / sum of input tokens.")
OBS_CACHE = define("cache.observed_hit_rate", "ratio", "Sum of server cached_tokens / sum of server prompt_tokens.")
INPUT_TOKENS = define("tokens.input", "tok", "Server prompt_tokens per request (else the workload's intended ISL).")
OUTPUT_TOKENS = define("tokens.output", "tok", "Server completion_tokens per request (else the sum of chunk tokens).")
SCHEDULE_LAG = define("client_health.schedule_lag", "s", "Actual send time minus scheduled send time.")
