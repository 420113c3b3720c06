"""Disaggregated prefill/decode on the simulator: separate instances, KV transfer over a modelled link, a router.

A deployment is a pool of prefill workers and a pool of decode workers, each worker one
:class:`~llmsweep.sim.core.EngineCore` of its own (its own batching, KV pool and roofline over its own GPUs and
parallelism), and a router in front. A request's life, as in SGLang's PD disaggregation and vLLM's disaggregated
prefill:

1. the router picks a (prefill, decode) pair (:data:`RouterPolicy`: round robin, or the least loaded of each pool);
2. the prefill worker computes the prompt (its own chunked prefill and prefix cache) and emits the first token; it
   holds the prompt's KV blocks until the transfer has read them;
3. decode-side admission: the decode worker reserves KV blocks for the prompt while it has room (running plus
   arriving requests under its running cap, blocks free); until then the request waits in its *pre-allocation queue*;
4. the KV cache moves over the link between the two workers — the scale-up interconnect (NVLink / xGMI) when both
   sit in one scale-up domain, else the scale-out NIC — in ``latency + bytes / (bandwidth x efficiency)``, where the
   bytes are the prompt's KV on the busier side's GPU (each GPU sends or receives its shard in parallel); transfers
   from one prefill worker, and into one decode worker, queue behind each other on its NICs. The link, the time and
   the queueing have one home, :mod:`llmsweep.sim.transfer`, which the live simulator's decode worker
   (`sim.roles`) models its transfers with as well;
5. when the KV has arrived the decode worker streams the first token (TTFT includes the transfer) and decodes the
   rest in its own batches, undisturbed by prefills.

:class:`DisaggPredictor` drives the whole deployment with the same discrete-event interpreter of lane programs the
aggregated predictor runs (:class:`~llmsweep.sim.predict.Predictor`), so records, scrapes and summaries look exactly
like a measured disaggregated run's. Every scrape carries each worker's engine series labelled with its ``role`` and
``worker``, plus each decode worker's KV-transfer series (pre-allocation and transfer queues, transfer seconds and
bytes: defined once in `metrics.roles`, exported through `sim.metrics.emit_kv_transfers`, as the live decode worker
exports them).
"""

from __future__ import annotations

import contextlib
import heapq
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from llmsweep.errors import ConfigError
from llmsweep.sim.core import EngineCore, SimRequest
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.kv import BlockHashes, as_keys
from llmsweep.sim.metrics import CoreCollector, KvTransfers, MetricsStyle, kv_transfer_rows
from llmsweep.sim.perf import Batch
from llmsweep.sim.predict import _ARRIVAL, _SLEEP, _STEP, _SUBMIT, _WAKE, Predictor, _Task
from llmsweep.sim.transfer import Fabric, KvCost, Link, Nic, queue_transfer

log = logging.getLogger(__name__)
_INF = float("inf")
_NO_BLOCKS = np.empty(0, np.int64)

RoleName = Literal["prefill", "decode"]
RouterPolicy = Literal["round_robin", "least_load"]
_XFER = _SLEEP + 1  # event kinds continue the predictor's (`sim.predict`)
"""Event kind: a KV transfer completed (the payload is the hand-off)."""


class RolePlan(BaseModel):
    """One pool of identical workers: the engine each runs and where each lands."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: RoleName
    engine: EngineConfig = Field(description="The simulated engine one worker runs (its own TP/EP, KV pool).")
    gpus_per_worker: int = Field(ge=1, description="GPUs of one worker (tp·pp·pcp).")
    nodes: tuple[tuple[int, ...], ...] = Field(description="Node indices of each worker within the allocation.")

    @property
    def workers(self) -> int:
        return len(self.nodes)

    @property
    def gpus(self) -> int:
        return self.workers * self.gpus_per_worker


class DisaggConfig(BaseModel):
    """A disaggregated deployment the simulator runs: both pools, the links between them and the router."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefill: RolePlan
    decode: RolePlan
    scaleup: Link
    scaleout: Link | None = Field(description="None: the hardware catalog has no scale-out figures for the GPU.")
    domain_nodes: int = Field(ge=1, description="Nodes one scale-up domain spans (NVL72 racks: 18 trays).")
    gpus_per_node: int = Field(ge=1)
    transfer_backend: str = Field(description="The KV-transfer backend the job names (mori, nixl, mooncake, ...).")
    router_policy: RouterPolicy = "round_robin"

    @property
    def gpus(self) -> int:
        """GPUs of every role: what throughput per GPU divides by (a router holds none)."""
        return self.prefill.gpus + self.decode.gpus

    @property
    def nodes(self) -> int:
        return 1 + max(n for role in (self.prefill, self.decode) for nodes in role.nodes for n in nodes)

    @property
    def fabric(self) -> Fabric:
        """The deployment's links and the rule that picks one per pair (`sim.transfer`)."""
        return Fabric(hardware=self.decode.engine.hardware, scaleup=self.scaleup, scaleout=self.scaleout,
                      domain_nodes=self.domain_nodes)

    def link(self, prefill: int, decode: int) -> Link:
        """The link between prefill worker `prefill` and decode worker `decode` (:meth:`Fabric.link` over the nodes
        each occupies). A ConfigError when that needs figures the catalog lacks."""
        return self.fabric.link(self.prefill.nodes[prefill], self.decode.nodes[decode])

    def links(self) -> list[Link]:
        """Every distinct link some (prefill, decode) pair uses."""
        out: list[Link] = []
        for p in range(self.prefill.workers):
            for d in range(self.decode.workers):
                link = self.link(p, d)
                if link not in out:
                    out.append(link)
        return out

    def describe(self) -> dict[str, Any]:
        """The deployment as provenance records it (`provenance.topology`; the summary's `deployment` and `roles`
        blocks are read from it)."""
        return {
            "disaggregated": True,
            "nodes": self.nodes,
            "gpus": self.gpus,
            "gpus_per_node": self.gpus_per_node,
            "kv_transfer": self.transfer_backend,
            "router_policy": self.router_policy,
            "links": [link.model_dump(mode="json") for link in self.links()],
            "roles": {
                role.kind: {"kind": role.kind, "workers": role.workers, "gpus_per_worker": role.gpus_per_worker,
                            "gpus": role.gpus, "nodes": sorted({n for nodes in role.nodes for n in nodes}),
                            "tp": role.engine.tp, "ep": role.engine.ep, "dp_attention": role.engine.dp_attention,
                            "max_running_requests": role.engine.max_running_requests}
                for role in (self.prefill, self.decode)
            } | {"router": {"kind": "router", "workers": 1, "gpus_per_worker": 0, "gpus": 0, "nodes": [0]}},
        }


@dataclass(slots=True, eq=False)
class _Handoff:
    """A request between its prefill and its decode: what the decode worker needs to continue it."""

    task: _Task
    record: dict[str, Any]
    prompt_len: int
    hashes: BlockHashes
    max_tokens: int
    prefill: int
    decode: int
    cached_tokens: int = 0
    blocks: list[int] = field(default_factory=list)
    """Decode-side blocks reserved for the prompt's KV."""
    held: np.ndarray = field(default_factory=lambda: _NO_BLOCKS)
    """Prefill-side blocks of the prompt's KV, held until the transfer has read them."""
    started: float = 0.0
    nbytes: float = 0.0
    reserved: int = 0
    """No-evict decode: blocks reserved beyond `blocks` for the rest of its length while its KV is in flight."""


@dataclass(slots=True, eq=False)
class Worker:
    """One engine instance of a pool, with the deployment-side state around it."""

    role: RoleName
    index: int
    core: EngineCore
    collector: CoreCollector
    busy: bool = False
    outstanding: int = 0
    """Requests the router sent here that have not finished here (its load, for `least_load`)."""
    nic: Nic = field(default_factory=Nic)
    """The worker's NICs: transfers from a prefill worker, and into a decode worker, queue on them."""
    prealloc: deque[_Handoff] = field(default_factory=deque)
    reserved: int = 0
    """No-evict decode: the blocks its in-flight hand-offs have reserved beyond their prompts' (`_Handoff.reserved`),
    which the core's own reservations (its running requests) do not count yet."""
    kv: KvTransfers = field(default_factory=KvTransfers)
    """Decode: KV transfers into this worker (in flight from block reservation to arrival; its transfer series)."""
    shortest_step: float = 0.0
    """A lower bound on any decode step's time here: one sequence at the shortest context (step times grow with the
    batch and its context)."""
    first_finish: tuple[float, int, float] = (-1.0, 0, 0.0)
    """(end of the step in flight, running requests, `_first_finish` of them): computed once per step and batch (a
    request adopted meanwhile joins the next step), read by every other worker."""


class Cluster:
    """Every worker of a deployment, built from a :class:`DisaggConfig`; kept across the points run on it."""

    def __init__(self, config: DisaggConfig, *, model_name: str = "sim", coalesce: bool = True) -> None:
        self.config = config
        style: MetricsStyle = config.decode.engine.engine_style
        self.prefill = [self._worker("prefill", i, config.prefill.engine, model_name, style, coalesce)
                        for i in range(config.prefill.workers)]
        self.decode = [self._worker("decode", i, config.decode.engine, model_name, style, coalesce)
                       for i in range(config.decode.workers)]
        if len({w.core.block_size for w in self.workers}) != 1:
            raise ConfigError("simulator: prefill and decode workers need one KV block size",
                              fix="give both pools the same --block-size")
        self.cost = KvCost.between(config.prefill.engine, config.decode.engine)
        """What one token's KV costs to move between the pools (`sim.transfer`, as the live decode worker has it)."""
        self._links = {(p, d): config.link(p, d) for p in range(len(self.prefill)) for d in range(len(self.decode))}
        self._rr = [0, 0]

    @staticmethod
    def _worker(role: RoleName, index: int, engine: EngineConfig, model_name: str, style: MetricsStyle,
                coalesce: bool) -> Worker:
        core = build_core(engine, coalesce=coalesce)
        k = core.spec_k
        shortest = core.timer.step_time(Batch(decode_seqs=1, decode_tokens=k + 1, decode_ctx=1,
                                              draft_tokens=k))
        return Worker(role, index, core, CoreCollector(core, model_name=model_name, style=style),
                      shortest_step=shortest)

    @property
    def workers(self) -> list[Worker]:
        return [*self.prefill, *self.decode]

    def transfer_time(self, tokens: int, prefill: int, decode: int) -> float:
        """Seconds to move `tokens` tokens of KV from prefill worker `prefill` to decode worker `decode`."""
        return self.cost.seconds(tokens, self._links[(prefill, decode)])

    def route(self) -> tuple[int, int]:
        """The (prefill, decode) pair the router sends the next request to."""
        picks: list[int] = []
        for i, pool in enumerate((self.prefill, self.decode)):
            if self.config.router_policy == "least_load":
                loads = [w.outstanding for w in pool]
                picks.append(loads.index(min(loads)))
            else:
                picks.append(self._rr[i] % len(pool))
                self._rr[i] += 1
        return picks[0], picks[1]

    def has_work(self) -> bool:
        return any(w.core.has_work() or w.prealloc or w.kv.in_flight for w in self.workers)

    def drained(self) -> bool:
        """Nothing running, waiting, queued for KV or in transfer anywhere (InferenceX's drain condition)."""
        return not self.has_work() and not any(w.busy for w in self.workers)

    def reset_links(self) -> None:
        """Between points: the NICs are idle once the deployment has drained."""
        for w in self.workers:
            w.nic.free = 0.0

    def scrape_samples(self) -> list[list[Any]]:
        """Every worker's engine series labelled with its role and index; each decode worker's KV-transfer series."""
        out: list[list[Any]] = []
        for w in self.workers:
            extra = {"role": w.role, "worker": str(w.index)}
            out += [[name, {**labels, **extra}, value] for name, labels, value in w.collector.samples()]
            if w.role == "decode":
                out += kv_transfer_rows(w.kv, extra, prealloc=len(w.prealloc))
        return out

    def counters(self) -> dict[str, Any]:
        return {f"{w.role}{w.index}": {"steps": w.core.counters.steps, "busy_s": w.core.counters.busy_seconds}
                for w in self.workers}


class DisaggPredictor(Predictor):
    """The lane-program interpreter over a :class:`Cluster` (see the module doc): one event heap, a step in flight
    per worker, transfers as events of their own."""

    defer_stamps = False  # (the prefill workers emit first tokens only; decode workers defer, see `_stamp_decode`)

    def __init__(self, cluster: Cluster, *, start_time: float = 0.0, scrape_interval: float | None = None,
                 model_name: str = "sim") -> None:
        self.cluster = cluster
        first = cluster.prefill[0].core
        super().__init__(first, start_time=start_time, scrape_interval=scrape_interval,
                         metrics_style=cluster.config.decode.engine.engine_style, model_name=model_name)
        cluster.reset_links()
        self._decode_ends: list[tuple[int, list[float]]] = []
        """Per decode worker: (the first of its core's `step_ends` this run can meet, those steps' end times from
        there on in absolute time), what its deferred segments are stamped from (`_stamp_decode`)."""
        for w in cluster.decode:
            if w.core.segments is None:  # its batch may run in arrays, its decodes' stamps deferred (`EngineCore`)
                w.core.segments = []
            self._decode_ends.append((len(w.core.step_ends), []))

    def scrape(self, now: float, *, probes: bool = True) -> None:
        """A snapshot of every worker as of `now` (inside a block of decode steps: as the step path shows it, see
        :meth:`EngineCore.as_of`), so scrapes do not cut blocks."""
        with contextlib.ExitStack() as stack:
            for w in self.cluster.workers:
                stack.enter_context(w.core.as_of(now))
            self.scrapes.append({"t": self.start_time + now, "samples": self.cluster.scrape_samples()})
            for probe in self.probes if probes else ():  # e.g. every worker's modelled power
                probe(self.start_time + now)

    def _engine_busy(self) -> bool:
        return any(w.busy for w in self.cluster.workers) or self.cluster.has_work()

    # -- request path ------------------------------------------------------------------------------------------------
    def _submit(self, payload: tuple[_Task, dict[str, Any], int, BlockHashes, int], now: float) -> None:
        task, record, n_tokens, hashes, max_tokens = payload
        cluster = self.cluster
        p, d = cluster.route()
        decode = cluster.decode[d].core
        error = decode.refusal(n_tokens, max_tokens)  # the decode worker holds the whole request
        handoff = _Handoff(task, record, n_tokens, hashes, max_tokens, p, d)
        if error is None:
            hint = self._hints.get((record["session"], record["node"]))  # (its agent's last prompt, see `_remember`)
            req = cluster.prefill[p].core.new_request(n_tokens, hashes, 1, owner=handoff, now=now, hint=hint)
            error = req.error
        if error is not None:
            self._rejected(task, record, n_tokens, error, now)
            return
        cluster.prefill[p].outstanding += 1
        cluster.decode[d].outstanding += 1

    def _remember(self, record: dict[str, Any], r: SimRequest) -> None:
        """The prefix-lookup hints are the prefill side's (:meth:`_prefilled` keeps them): a finished request's
        blocks are the decode worker's, which no prompt is looked up in."""

    def _prefilled(self, r: SimRequest, now: float) -> None:
        """A prefill finished (its first token is computed): queue the hand-off for decode-side admission."""
        handoff: _Handoff = r.owner
        handoff.cached_tokens = max(r.cached_tokens, 0)
        # The prefill worker keeps the prompt's KV until the transfer has read it: its full blocks (now in the prefix
        # cache) are held, so neither eviction nor a new request takes them meanwhile.
        # The request has just released them: its own blocks are the lookup's hint (the same answer, read from two
        # arrays instead of a dict probe a block), and the hint for its agent's next prompt on the prefill side.
        pool = self.cluster.prefill[handoff.prefill].core.pool
        held, _ = pool.lookup_array(handoff.hashes, len(handoff.hashes), (as_keys(handoff.hashes), r.released))
        pool.acquire(held)
        handoff.held = held
        super()._remember(handoff.record, r)
        self.cluster.prefill[handoff.prefill].outstanding -= 1
        self.cluster.decode[handoff.decode].prealloc.append(handoff)
        self._admit(handoff.decode, now)

    def _admit(self, d: int, now: float) -> None:
        """Decode-side admission: reserve KV blocks for queued hand-offs while the worker has room, and start their
        transfers (queued behind earlier ones on both workers' NICs)."""
        cluster = self.cluster
        worker = cluster.decode[d]
        core = worker.core
        bs = core.block_size
        while worker.prealloc:
            if len(core.running) + len(core.waiting) + worker.kv.in_flight >= core.config.max_running_requests:
                return
            h = worker.prealloc[0]
            whole = core.blocks_to_completion(h.prompt_len, h.max_tokens, 0) if core.no_evict else 0
            if core.no_evict and whole > core.spare_blocks() - worker.reserved:
                return  # TensorRT-LLM's GUARANTEED_NO_EVICT: its whole length must fit what nobody has reserved
            blocks = core.pool.allocate(-(-h.prompt_len // bs))
            if blocks is None:
                return
            worker.prealloc.popleft()
            h.blocks = blocks
            h.reserved = max(0, whole - len(blocks))
            worker.reserved += h.reserved
            worker.kv.start()
            source = cluster.prefill[h.prefill]
            end = queue_transfer(now, cluster.transfer_time(h.prompt_len, h.prefill, d), (source.nic, worker.nic))
            h.started = now
            h.nbytes = cluster.cost.nbytes(h.prompt_len)
            self._push(end, _XFER, h)

    def _arrived(self, h: _Handoff, now: float) -> None:
        """The KV is on the decode worker: it streams the first token and decodes the rest in its batches."""
        worker = self.cluster.decode[h.decode]
        core = worker.core
        self.cluster.prefill[h.prefill].core.pool.release(h.held)
        h.held = _NO_BLOCKS
        worker.kv.arrived(now - h.started, h.nbytes)
        worker.reserved -= h.reserved  # (adopted: its remaining length is a running request's reservation now)
        r = core.adopt(h.prompt_len, h.hashes, h.max_tokens, h.blocks, now=now, cached_tokens=h.cached_tokens,
                       owner=(h.task, h.record, h.record["chunk_times"], h.record["chunk_tokens"]))
        t_abs = self.start_time + now
        h.record["first_token_at"] = h.record["first_byte_at"] = t_abs
        h.record["chunk_times"].append(t_abs)
        h.record["chunk_tokens"].append(1)
        if r.finished_at is not None:
            self._done(r, now, worker.index)

    def _done(self, r: SimRequest, now: float, d: int) -> None:
        task, record = r.owner[0], r.owner[1]
        self.cluster.decode[d].outstanding -= 1
        self._finish(r, task, record, now)
        self._admit(d, now)

    def _step_ended(self, worker: Worker, now: float) -> None:
        core = worker.core
        emitted = core.end_step()
        if worker.role == "prefill":
            for r in emitted:
                if r.finished_at is not None:
                    self._prefilled(r, now)
            return
        if core.segments:
            self._stamp_decode(worker)
        block = core.last_block
        if block is not None:
            ends = [self.start_time + t for t in block.ends]
            for r, tokens in zip(emitted, block.tokens, strict=True):
                r.owner[2].extend(ends)
                r.owner[3].extend(tokens)
            if block.finishes:  # its last step finished requests: as the step path's loop below
                done = [r for r in emitted if r.finished_at is not None]
                for r in done:
                    self._done(r, now, worker.index)
                if done:
                    self._admit(worker.index, now)
            return
        t_abs = self.start_time + now
        finished = False
        for r in emitted:
            r.owner[2].append(t_abs)
            r.owner[3].append(r.last_emitted)
            if r.finished_at is not None:
                finished = True
                self._done(r, now, worker.index)
        if finished:
            self._admit(worker.index, now)

    def _stamp_decode(self, worker: Worker) -> None:
        """Stamp the chunks decode worker `worker`'s core deferred (`EngineCore.segments`; as `Predictor._stamp` does
        for the aggregated core): at the end of each step of each, a token or the segment's tokens of that step."""
        core = worker.core
        segments = core.segments
        assert segments is not None
        base, ends = self._decode_ends[worker.index]
        log = core.step_ends
        if base + len(ends) < len(log):
            start = self.start_time
            ends.extend([start + t for t in log[base + len(ends):]])
        for r, lo, hi, tokens in segments:
            r.owner[2].extend(ends[lo - base:hi - base])
            r.owner[3].extend([1] * (hi - lo) if tokens is None else tokens)
        segments.clear()

    # -- main loop ---------------------------------------------------------------------------------------------------
    def _loop(self) -> float:
        now = self._events()
        for w in self.cluster.decode:  # (a stalled or stopped worker's requests keep the chunks they emitted)
            w.core.settle()
            if w.core.segments:
                self._stamp_decode(w)
        return now

    def _events(self) -> float:
        workers = self.cluster.workers
        now = 0.0
        while self._heap or any(not w.busy and w.core.has_work() for w in workers):
            if not self._wound_down:
                now = self._wind_down_if_stopped(now)
            if self._idle_cap is not None and not self._stopped(now):
                self._cap_idle_gap()
            heap = self._heap
            if heap:
                if heap[0][0] >= self._next_scrape:
                    self.scrape(self._next_scrape)
                    self._next_scrape += self.scrape_interval or float("inf")
                    continue
                now, _, kind, payload = heapq.heappop(heap)
                if kind == _STEP:
                    worker = workers[payload]
                    worker.busy = False
                    self._step_ended(worker, now)
                elif kind == _XFER:
                    self._arrived(payload, now)
                elif kind == _SUBMIT:
                    self._submit(payload, now)
                elif kind in (_WAKE, _SLEEP):
                    self._on_wake(kind, payload, now)
                elif kind == _ARRIVAL:
                    self._on_arrival(payload, now)
            if heap and heap[0][0] <= now:
                continue  # every event of this instant first, then the steps it enables
            started = False
            for i, w in enumerate(workers):
                if w.busy or not w.core.has_work():
                    continue
                end = w.core.begin_step(now, self._horizon_of(w, now), finish=True)
                if end is not None:
                    w.busy = started = True
                    self._push(end, _STEP, i)
            if not started and not heap and not any(w.busy for w in workers):
                if self.cluster.has_work():
                    log.warning("predict: disaggregated deployment stalled (%s)", self.cluster.counters())
                break
        return now

    def _horizon_of(self, worker: Worker, now: float) -> float:
        """Until when nothing can change `worker`'s batch or KV pool (a block of its decode steps may run through the
        step in which this falls: `begin_step(..., finish=True)`; a scrape reads a block as of its time and does not
        bound it). A transfer's arrival, a submit and a prefill worker's step end (which reserves decode-side KV) act
        at their time; a lane's wake-up, an arrival and another decode worker's step end (which finishes requests and
        so wakes their lanes) only run lane programs, whose requests reach the deployment a frontend latency later."""
        if worker.role == "prefill":
            return self._heap[0][0] if self._heap else _INF
        frontend, workers = self.frontend, self.cluster.workers
        horizon = _INF
        for t, _, kind, payload in self._heap:
            if kind == _STEP and workers[payload].role == "decode":
                t = _first_finish(workers[payload], t) + frontend
            elif kind in (_WAKE, _SLEEP, _ARRIVAL):
                t += frontend
            if t < horizon:
                horizon = t
        for w in self.cluster.decode:  # about to begin a step at the same instant: it might finish requests
            if w is not worker and not w.busy and w.core.has_work():
                horizon = min(horizon, now + frontend)
        return horizon

    def _finish_stats(self, now: float) -> None:
        self.stats.requests = len(self.records)
        self.stats.steps = sum(w.core.counters.steps for w in self.cluster.workers)
        self.stats.virtual_seconds = now
        self.stats.preemptions = sum(w.core.counters.preemptions for w in self.cluster.workers)
        self.stats.counters = self.cluster.counters()


def _first_finish(worker: Worker, end: float) -> float:
    """The earliest time a decode worker whose step (or block of steps) in flight ends at `end` can finish a request:
    `end` itself when that step may finish one, else after the fewest further steps that could bring the closest
    request to its length (at most K + 1 tokens a step), each at least `worker.shortest_step` long. (A request that
    is preempted and recomputed finishes later still.)"""
    t, n, at = worker.first_finish
    if t == end and n == len(worker.core.running):
        return at
    at = _earliest_finish(worker, end)
    worker.first_finish = (end, len(worker.core.running), at)
    return at


def _earliest_finish(worker: Worker, end: float) -> float:
    core = worker.core
    scheduled, plan, lookahead = core._scheduled, core._plan, core.spec_k + 1
    if core._rows:
        return _earliest_finish_rows(worker, end)
    if plan is None:
        emitted = {id(r): lookahead for r in scheduled}
    elif plan.finishes:
        return end
    else:
        per_request = [plan.steps] * len(scheduled) if plan.tokens is None else plan.tokens.sum(axis=0).tolist()
        emitted = dict(zip(map(id, scheduled), per_request, strict=True))
    left = min((r.max_tokens - r.generated - emitted.get(id(r), 0) for r in core.running), default=0)
    if left <= 0 or any(r.chunk > 0 for r in scheduled):  # a prefill in flight may emit a first token
        return end
    return end + -(-left // lookahead) * worker.shortest_step


def _earliest_finish_rows(worker: Worker, end: float) -> float:
    """:func:`_earliest_finish` of a batch in arrays (`EngineCore._schedule_rows`): the step in flight's rows hold the
    requests' token counts (a decoding row's `SimRequest` fields are stale), every decoding row emits in it, a
    prefilling row emits only if it was given a chunk; the requests adopted since (past the rows) emit nothing in it."""
    core = worker.core
    plan, lookahead, running = core._plan, core.spec_k + 1, core.running
    gen, maxt, pre = core._gen, core._maxt, core._pre
    rows = len(gen)
    if plan is None:
        if not pre.all() and any(running[i].chunk > 0 for i in (~pre).nonzero()[0].tolist()):
            return end  # a prefill in flight may emit a first token
        left_rows = maxt - gen - lookahead * pre
    elif plan.finishes:
        return end
    else:  # (a block: every row decodes in every step)
        left_rows = maxt - gen - (plan.steps if plan.tokens is None else plan.tokens.sum(axis=0))
    left = int(left_rows.min()) if rows else 0
    if len(running) > rows:
        tail = min(r.max_tokens - r.generated for r in running[rows:])
        left = tail if not rows else min(left, tail)
    if left <= 0:
        return end
    return end + -(-left // lookahead) * worker.shortest_step


DRAIN_POLL_S = 10.0
"""InferenceX's agentic multinode client polls the deployment every 10 s between concurrencies ..."""
DRAIN_POLLS = 3
"""... and starts the next one after this many polls in a row found nothing running or waiting (wave-2 spec §6.3)."""


def drain_wait_s() -> float:
    """Idle seconds between two points on one deployment once it has drained: the polls that must see it empty."""
    return DRAIN_POLL_S * DRAIN_POLLS


__all__ = [
    "DRAIN_POLLS",
    "DRAIN_POLL_S",
    "Cluster",
    "DisaggConfig",
    "DisaggPredictor",
    "Link",
    "RolePlan",
    "RouterPolicy",
    "drain_wait_s",
]
