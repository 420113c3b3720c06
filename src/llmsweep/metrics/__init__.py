"""Records → summary: the typed Summary (model), the metric table (registry), statistic blocks, server-metric adapters,
validity gates."""

from __future__ import annotations

from llmsweep.metrics.accumulate import iter_records
from llmsweep.metrics.gates import GateConfig
from llmsweep.metrics.model import SCHEMA_VERSION, Summary
from llmsweep.metrics.summary import summarise

__all__ = ["SCHEMA_VERSION", "GateConfig", "Summary", "iter_records", "summarise"]
