"""The live simulator as one role of a disaggregated deployment: a prefill worker, a decode worker, or (in
`sim.router`) the PD router in front of them.

What crosses between them is deliberately small and honest:

- the router sends the client's request to a prefill worker with one output token: the worker computes the prompt
  (its own batching, KV pool and roofline) and answers when the prompt's KV is ready;
- the router then sends the same request to a decode worker with the header :data:`KV_TOKENS_HEADER` (how many
  prompt tokens' KV the prefill worker holds). The decode worker waits the modelled transfer time
  (:func:`transfer_seconds`: the prompt's KV bytes over the link's bandwidth, plus its latency), places the prompt's
  full blocks in its KV pool as if they had arrived, and admits the request: it computes at most the prompt's last
  partial block again, then decodes. TTFT seen through the router therefore includes the prefill, the transfer and
  the decode worker's first step.
- with them the router passes :data:`KV_CACHED_HEADER`: the prompt tokens the prefill worker found in its own prefix
  cache. That is the request's `cached_tokens` (the client's usage) — the transferred KV is not a cache hit, as in
  SGLang's and vLLM's PD deployments and in the virtual-time path (`sim.disagg`): the decode worker neither reports
  the arrived blocks as cached nor counts them in its prefix-cache series (queries, hits).

No KV bytes move over the network: the link is modelled, and every worker says so in `/version`.

The decode worker exports what its hand-offs did on `/metrics` as the virtual-time deployment's decode workers do
(the KV-transfer series of `metrics.roles`, unlabelled on the worker; a role-by-role deployment's federated scrape
adds `role` and `worker`): transfers in flight, transfers that arrived with their modelled seconds
(:func:`transfer_seconds`, what the worker waited), and their bytes (prompt tokens x the model's KV bytes per token).
Two things the live link does not model, and so does not export: a decode-side pre-allocation queue (the worker
reserves no blocks before a transfer; it places the arrived blocks when they land, or recomputes the prompt when its
pool has no room), so `llmsweep:disagg_prealloc_queue_reqs` is absent and the summary's `prealloc_queue_*` stay null;
and queueing of transfers on the NICs (concurrent transfers overlap), so the seconds are the link time alone.
"""

from __future__ import annotations

import os
import socket
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RoleName = Literal["server", "prefill", "decode", "router"]
KV_TOKENS_HEADER = "X-Llmsweep-KV-Tokens"
"""Router → decode worker: prompt tokens whose KV the prefill worker computed (the decode side models the transfer)."""
KV_SOURCE_HEADER = "X-Llmsweep-KV-Source"
"""Router → decode worker: the prefill worker the KV comes from (for the decode worker's log and counters)."""
KV_CACHED_HEADER = "X-Llmsweep-KV-Cached"
"""Router → decode worker: prompt tokens the prefill worker found in its prefix cache (the request's `cached_tokens`;
absent: 0)."""


def node_name() -> str:
    """The node this process runs on as Slurm names it (`SLURMD_NODENAME` inside a step), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


class RoleConfig(BaseModel):
    """How one simulator process serves in a disaggregated deployment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: RoleName = "server"
    kv_transfer: str | None = Field(default=None, description="The job's KV-transfer backend this link stands for.")
    link_gbs: float = Field(default=50.0, gt=0, description="Modelled KV link bandwidth, GB/s (decode side).")
    link_latency_s: float = Field(default=0.0, ge=0, description="Modelled per-transfer latency, s (decode side).")


def transfer_seconds(tokens: int, kv_bytes_per_token: float, role: RoleConfig) -> float:
    """Time to move `tokens` tokens of KV over the modelled link: bytes / bandwidth + latency."""
    if tokens <= 0:
        return 0.0
    return tokens * kv_bytes_per_token / (role.link_gbs * 1e9) + role.link_latency_s
