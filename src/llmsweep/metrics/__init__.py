"""Records → summary: metric definitions (registry), statistic blocks, server-metric adapters, validity gates."""

from __future__ import annotations

from llmsweep.metrics.accumulate import iter_records
from llmsweep.metrics.gates import GateConfig
from llmsweep.metrics.model import Summary
from llmsweep.metrics.summary import SCHEMA_VERSION, summarise

__all__ = ["SCHEMA_VERSION", "GateConfig", "Summary", "iter_records", "summarise"]
