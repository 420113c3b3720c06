"""The live simulator as one role of a disaggregated deployment: a prefill worker, a decode worker, or the PD router in
front of them (`llmsweep.router`, speaking the protocol of `sim.router`).

What crosses between them is deliberately small and honest:

- the router sends the client's request to a prefill worker with one output token: the worker computes the prompt
  (its own batching, KV pool and roofline) and answers when the prompt's KV is ready;
- the router then sends the same request to a decode worker with the header :data:`KV_TOKENS_HEADER` (how many
  prompt tokens' KV the prefill worker holds) and :data:`KV_SOURCE_WORKER_HEADER` (which prefill worker holds it).
  The decode worker waits the modelled transfer — the one the virtual-time deployment (`sim.disagg`) gives the same
  pair, from the one home :mod:`llmsweep.sim.transfer`: latency + tokens x the KV bytes one GPU moves (the larger
  shard of the prefill workers' TP, `RoleConfig.prefill_tp`, and its own) / (the pair's link GB/s per GPU x the
  engine's comm efficiency), queued behind the transfers already on its NICs — places the prompt's full blocks in
  its KV pool as if they had arrived, and admits the request: it computes at most the prompt's last partial block
  again, then decodes. TTFT seen through the router therefore includes the prefill, the transfer and the decode
  worker's first step. Its links (`RoleConfig.links`, one per prefill worker) and the prefill TP are what `llmsweep
  render` derives from the job's topology and the hardware catalog (`engines.sim`), as virtual time derives them.
- with them the router passes :data:`KV_CACHED_HEADER`: the prompt tokens the prefill worker found in its own prefix
  cache. That is the request's `cached_tokens` (the client's usage) — the transferred KV is not a cache hit, as in
  SGLang's and vLLM's PD deployments and in the virtual-time path (`sim.disagg`): the decode worker neither reports
  the arrived blocks as cached nor counts them in its prefix-cache series (queries, hits).

No KV bytes move over the network: the link is modelled, and every worker says so in `/version`.

The decode worker exports what its hand-offs did on `/metrics` as the virtual-time deployment's decode workers do
(the KV-transfer series of `metrics.roles`, unlabelled on the worker; a role-by-role deployment's federated scrape
adds `role` and `worker`): transfers in flight, transfers that arrived with their modelled seconds (from the request's
arrival to the KV's, queueing on the NICs included: what the worker waited), and their bytes (prompt tokens x the
model's KV bytes per token). `/version` says how it models them (`kv_links`, `prefill_tp`,
`kv_bytes_per_token_per_gpu`, `kv_comm_efficiency`). What the live link does not model, and so does not export: a
decode-side pre-allocation queue (the worker reserves no blocks before a transfer; it places the arrived blocks when
they land, or recomputes the prompt when its pool has no room), so `llmsweep:disagg_prealloc_queue_reqs` is absent
and the summary's `prealloc_queue_*` stay null; and the prefill worker's NICs (each decode worker keeps only its own
NICs' queue, so transfers from one prefill worker to two decode workers at once overlap, where virtual time queues
them; with one decode worker, or one transfer at a time per prefill worker, the two agree).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.errors import ConfigError
from llmsweep.sim.transfer import DEFAULT_LINK, Link
from llmsweep.words import count_of

RoleName = Literal["server", "prefill", "decode", "router"]
KV_TOKENS_HEADER = "X-Llmsweep-KV-Tokens"
"""Router → decode worker: prompt tokens whose KV the prefill worker computed (the decode side models the transfer)."""
KV_SOURCE_HEADER = "X-Llmsweep-KV-Source"
"""Router → decode worker: the prefill worker the KV comes from (for the decode worker's log and counters)."""
KV_SOURCE_WORKER_HEADER = "X-Llmsweep-KV-Source-Worker"
"""Router → decode worker: the index of that prefill worker in the router's list (which link the KV takes)."""
KV_CACHED_HEADER = "X-Llmsweep-KV-Cached"
"""Router → decode worker: prompt tokens the prefill worker found in its prefix cache (the request's `cached_tokens`;
absent: 0)."""

ROUTER_READY_LINE = "simulated PD router on http://"
"""What `llmsweep sim router` logs once it listens: its launch's readiness marker (`engines.sim`), so that its
readiness is its own process's, never a /health answered by whatever else holds its port."""

class RoleConfig(BaseModel):
    """How one simulator process serves in a disaggregated deployment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: RoleName = "server"
    kv_transfer: str | None = Field(default=None, description="The job's KV-transfer backend this link stands for.")
    links: tuple[Link, ...] = Field(
        default=(DEFAULT_LINK,), min_length=1,
        description="Decode side: the link from each prefill worker, in the router's order (one: from every one).")
    prefill_tp: int | None = Field(
        default=None, ge=1, description="Decode side: the prefill workers' TP (None: the decode worker's own).")

    def link_from(self, prefill: int | None) -> Link:
        """The link KV from prefill worker `prefill` arrives over (None: the router did not say; the first link).
        A ConfigError when the worker was given links for fewer prefill workers than the router routes from."""
        if len(self.links) == 1 or prefill is None:
            return self.links[0]
        if not 0 <= prefill < len(self.links):
            raise ConfigError(f"decode worker: KV from prefill worker {prefill}, but --kv-links names links for "
                              f"{count_of(len(self.links), 'prefill worker')}",
                              fix="give the decode worker one link per prefill worker the router routes from")
        return self.links[prefill]
