"""Agentic traces in the Weka format (AgentX corpora): schema, loader, synthetic generator and corpus statistics.

No text is ever stored in a trace: only token counts, 64-token prefix-block hash ids, timings and subagent identity
(research/agentx-spec §2). Replay turns hash ids into deterministic text (`llmsweep.workload.blocks`).
"""

from llmsweep.workload.traces.schema import SubagentEntry, Trace, TraceRequest

__all__ = ["SubagentEntry", "Trace", "TraceRequest"]
