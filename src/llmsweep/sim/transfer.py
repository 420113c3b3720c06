"""The simulated KV transfer of a disaggregated deployment: one home for its link, its time and its NIC queue.

Both paths that simulate a prefill/decode deployment read it — the virtual-time deployment (`sim.disagg`) and the
live simulator's decode worker (`sim.server`, its role figures rendered by `engines.sim`) — so the same request
moves its KV in the same seconds on either:

- :meth:`Fabric.link`: the link between a prefill and a decode worker from the nodes each occupies: the SKU's
  scale-up interconnect (NVLink / xGMI) when every node of both lies in one scale-up domain, else its scale-out NIC;
  :func:`catalog_fabric` takes both links' figures (per GPU) from the hardware catalog;
- :class:`KvCost`: what one token of KV costs to move — the whole model's KV bytes (what the KV-transfer series
  count), the bytes each GPU moves (each GPU sends or receives its own shard in parallel, so the side whose GPUs hold
  the larger shard bounds it: the larger of the prefill's and the decode's `kv_bytes_per_token_per_gpu(tp)`), and
  the engine's comm efficiency; :meth:`KvCost.seconds` is ``latency + tokens x bytes per GPU / (GB/s x 1e9 x
  efficiency)``;
- :func:`queue_transfer`: a transfer waits behind those already queued on every NIC it uses (:class:`Nic`), and the
  seconds a transfer counts run from when it was asked for to its arrival (queueing included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from llmsweep.errors import ConfigError

if TYPE_CHECKING:
    from llmsweep.sim.engine import EngineConfig


class Link(BaseModel):
    """The path KV takes between a prefill and a decode worker: figures per GPU, from the hardware catalog."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["scale-up", "scale-out"] = Field(description="NVLink/xGMI within a domain, or the NIC across.")
    name: str = Field(description="The interconnect (`nvlink4`, `ConnectX-7 400G`, ...).")
    gbps: float = Field(gt=0, description="Bandwidth per GPU per direction, GB/s.")
    latency_s: float = Field(ge=0, description="Set-up latency of one transfer, seconds.")
    source: str = Field(default="", description="Where the figures come from (the catalog entry's source).")

    def label(self) -> str:
        return f"{self.kind} {self.name}, {self.gbps:g} GB/s per GPU, {self.latency_s * 1e3:g} ms"


LINKS = TypeAdapter(list[Link])
"""The JSON spelling of a list of links (`llmsweep sim serve --kv-links`, the decode worker's `/version`)."""
DEFAULT_LINK = Link(kind="scale-out", name="modelled link", gbps=50.0, latency_s=0.0)
"""The link of a decode worker started without `--kv-links` (by hand): one 400 Gb/s NIC per GPU, no latency."""


def links_flag(links: Sequence[Link]) -> str:
    """`--kv-links`' value: the links as compact JSON, one per prefill worker in index order (one alone when every
    prefill worker's is the same), without their catalog sources (provenance of the catalog, not of the launch)."""
    distinct = list(dict.fromkeys(links))
    return LINKS.dump_json(distinct if len(distinct) == 1 else list(links), exclude={"__all__": {"source"}}).decode()


def parse_links(text: str) -> tuple[Link, ...]:
    """The links of a `--kv-links` value; a ConfigError naming the fix when it is not a non-empty list of links."""
    from pydantic import ValidationError

    try:
        links = LINKS.validate_json(text)
    except ValidationError as exc:
        raise ConfigError(f"--kv-links is not a list of links: {exc.errors()[0]['msg']}",
                          fix='pass a JSON list such as [{"kind":"scale-out","name":"NIC","gbps":50,'
                              '"latency_s":1e-05}], one link per prefill worker') from exc
    if not links:
        raise ConfigError("--kv-links names no link", fix="pass at least one link (one for every prefill worker)")
    return tuple(links)


class Fabric(BaseModel):
    """The links a deployment's workers can reach each other over, and the rule that picks one for a pair."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hardware: str = Field(description="The SKU (for the error that names a missing catalog figure).")
    scaleup: Link
    scaleout: Link | None = Field(description="None: the hardware catalog has no scale-out figures for the GPU.")
    domain_nodes: int = Field(ge=1, description="Nodes one scale-up domain spans (NVL72 racks: 18 trays).")

    def link(self, prefill_nodes: Sequence[int], decode_nodes: Sequence[int]) -> Link:
        """The link between a prefill worker on `prefill_nodes` and a decode worker on `decode_nodes` (node indices
        within the allocation): scale-up when every node of both lies in one scale-up domain, else scale-out. A
        ConfigError when that needs figures the catalog lacks."""
        nodes = {*prefill_nodes, *decode_nodes}
        if len({n // self.domain_nodes for n in nodes}) == 1:
            return self.scaleup
        if self.scaleout is None:
            raise ConfigError(
                f"simulator: {self.hardware} has no scale-out bandwidth in the hardware catalog, and this job's "
                "prefill and decode workers sit in different scale-up domains",
                fix="add scaleout_gbps (and scaleout_latency_us) to the SKU's hardware catalog entry")
        return self.scaleout


def catalog_fabric(hardware: str, gpus_per_node: int, *, scaleup_latency_s: float) -> Fabric:
    """The links of `hardware` from the hardware catalog, for nodes of `gpus_per_node` GPUs: its scale-up
    interconnect (per direction, with `scaleup_latency_s`: the simulated engine's collective latency), its scale-out
    NIC (None where the catalog records none) and the nodes one scale-up domain spans
    (`HardwareSpec.scaleup_domain_nodes`: one node, or an NVL72-style rack where the catalog says it spans hosts)."""
    from llmsweep.catalog.hardware import get_hardware

    hw = get_hardware(hardware)
    scaleout = None
    if hw.scaleout_gbps is not None:
        scaleout = Link(kind="scale-out", name=hw.scaleout or "scale-out NIC", gbps=hw.scaleout_gbps,
                        latency_s=(hw.scaleout_latency_us or 0.0) / 1e6, source=hw.scaleout_source or "")
    return Fabric(hardware=hardware,
                  scaleup=Link(kind="scale-up", name=hw.scaleup, gbps=hw.link_gbs, latency_s=scaleup_latency_s,
                               source=hw.source),
                  scaleout=scaleout, domain_nodes=hw.scaleup_domain_nodes(gpus_per_node))


@dataclass(frozen=True, slots=True)
class KvCost:
    """What moving one prompt token's KV from a prefill to a decode worker costs."""

    bytes_per_token: float
    """The whole model's KV bytes per token: what a transfer's bytes count (`llmsweep:kv_transfer_bytes`)."""
    bytes_per_token_per_gpu: float
    """The bytes per token one GPU moves: the larger shard of the two sides."""
    efficiency: float
    """The engine's comm efficiency (achieved share of the link's bandwidth)."""
    prefill_tp: int
    decode_tp: int

    @classmethod
    def between(cls, prefill: EngineConfig, decode: EngineConfig) -> KvCost:
        """The cost between a prefill worker serving `prefill` and a decode worker serving `decode` (the prefill
        engine's KV bytes and comm efficiency; each side's shard by its own TP)."""
        p, d = prefill.perf_inputs(), decode.perf_inputs()
        return cls(bytes_per_token=p.kv_bytes_per_token,
                   bytes_per_token_per_gpu=max(p.kv_bytes_per_token_per_gpu(prefill.tp),
                                               d.kv_bytes_per_token_per_gpu(decode.tp)),
                   efficiency=prefill.efficiency_factors().comm, prefill_tp=prefill.tp, decode_tp=decode.tp)

    def seconds(self, tokens: int, link: Link) -> float:
        """Seconds to move `tokens` tokens of KV over `link` once it is free: latency + bytes per GPU / (bandwidth x
        efficiency); no tokens, no transfer."""
        if tokens <= 0:
            return 0.0
        return link.latency_s + tokens * self.bytes_per_token_per_gpu / (link.gbps * 1e9 * self.efficiency)

    def nbytes(self, tokens: int) -> float:
        """The KV bytes of `tokens` tokens (the whole model's: what the series count)."""
        return max(tokens, 0) * self.bytes_per_token


@dataclass(slots=True)
class Nic:
    """A worker's NICs: when they finish the transfers already queued on them."""

    free: float = 0.0


def queue_transfer(now: float, seconds: float, nics: Sequence[Nic]) -> float:
    """Queue a transfer of `seconds` asked for at `now` behind what is already queued on every NIC it uses (the
    prefill worker's and the decode worker's); returns when it ends, and books the NICs until then."""
    end = max([now, *(n.free for n in nics)]) + seconds
    for n in nics:
        n.free = end
    return end


__all__ = [
    "DEFAULT_LINK",
    "Fabric",
    "KvCost",
    "Link",
    "Nic",
    "catalog_fabric",
    "links_flag",
    "parse_links",
    "queue_transfer",
]
