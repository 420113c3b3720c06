"""Peer benchmark clients, driven against the same endpoint and workload as llmsweep's own client.

A client's numbers are trusted once they agree with the field's reference client on the same server. This room runs
aiperf (the client InferenceX uses for AgentX) on exactly the prompts llmsweep would send, reads aiperf's per-request
export back into llmsweep's raw record format, and puts both clients side by side. Reading the peer's records back
splits every difference in two: the part that comes from the two tools' metric definitions (aiperf's own figures
against its records summarised by llmsweep) and the part that comes from measuring (its records against ours, under
one set of definitions).

Depends on `workload` (the prompts), `client` (the record format, our runs) and `metrics` (one summariser for both).
"""

from __future__ import annotations

from llmsweep.peers.aiperf import (
    AiperfRun,
    aiperf_argv,
    aiperf_warmups,
    import_aiperf_dir,
    read_aiperf_figures,
    read_aiperf_records,
    read_aiperf_server_latency,
    run_aiperf,
    write_aiperf_dataset,
)

__all__ = [
    "AiperfRun",
    "aiperf_argv",
    "aiperf_warmups",
    "import_aiperf_dir",
    "read_aiperf_figures",
    "read_aiperf_records",
    "read_aiperf_server_latency",
    "run_aiperf",
    "write_aiperf_dataset",
]
