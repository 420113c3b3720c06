"""The wall-clock interpreter of lane programs: one asyncio event loop per worker process.

It carries out `Send`/`Sleep`/`Spawn`/`Join` in real time. Closed loop: each lane owned by this worker runs the
sessions of `workload.sessions(lane)` one tree at a time (a tree = the root program and everything it spawned; the
lane takes its next session only when the whole tree drained). Open loop: sessions start at their arrival times,
whatever is in flight. After the deadline (or a stop) no new request starts and sleeping programs wake up and end;
in-flight requests get the grace period, then are cancelled and recorded as `cancelled`.

A workload that drains its warm-up (`Drain`) has its lanes' first programs held at their `Drain` until every one of
them, in this worker and in every other (`Control.drained`), has arrived or ended; `warmup_drain_s` bounds the wait,
after which the run stops (`metrics.gates.warmup_not_drained`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from llmsweep import keepalive
from llmsweep.client.arrivals import arrival_times
from llmsweep.client.clock import now_unix
from llmsweep.client.config import DURATION_REACHED, Endpoint, RunOptions
from llmsweep.client.recorder import RecordHelper, Tally
from llmsweep.client.records import OutputWriteError, RecordWriter
from llmsweep.client.transport import (
    READS_STAMPED,
    KernelStampsOn,
    RawExchange,
    StampingConnector,
    build_body,
    exchange,
    first_tokens_first,
    stalled,
    to_record,
)
from llmsweep.engine_ids import POOLED_KEEPALIVE_S, STALL_HEADER, TIMEOUT_HEADER
from llmsweep.metrics.gates import root_primer_failed, warmup_not_drained
from llmsweep.workload.base import (
    Drain,
    Join,
    LaneProgram,
    RequestOutcome,
    RequestSpec,
    Send,
    Sleep,
    Spawn,
    SpawnHandle,
    WarmupDrain,
    Workload,
)

log = logging.getLogger(__name__)



@dataclass(slots=True)
class WorkerStats:
    """Live counters of one worker; a picklable snapshot crosses process boundaries for progress and health."""

    worker: int
    started: int = 0
    finished: int = 0
    profiling_finished: int = 0
    profiling_failed: int = 0
    warmup_finished: int = 0
    cancelled: int = 0
    inflight: int = 0
    max_inflight: int = 0
    profiling_output_tokens: int = 0
    """Output tokens of the window's finished requests (the warm-up's are not counted: the bar's `tok`)."""
    first_profiling_sent: float | None = None
    deadline: float | None = None
    warmup_drained_at: float | None = None  # unix time this worker's lanes had all drained their warm-up (`Drain`)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    conn_queue_wait_s: float = 0.0
    conn_queue_waits: int = 0
    connect_s: float = 0.0
    connects: int = 0
    turns_queued: int = 0  # sends, body ends and parses that waited for a turn (see Pacer): the loop was busy
    record_helper: bool = False  # finished streams were parsed and recorded by a helper process (recorder.py)
    helper_cpu_s: float = 0.0  # that process's CPU time (client CPU, beside this loop's `cpu_s`)
    reads_kernel_stamped: int = 0  # network reads stamped with the kernel's receive time (transport._KernelReader)
    reads_loop_stamped: int = 0  # network reads stamped when the event loop handled them
    retried: int = 0  # requests sent again on a new connection: the server closed their pooled one unanswered
    stop_reason: str | None = None
    first_errors: dict[str, str] = field(default_factory=dict)
    """The first error message of each error class this worker recorded (`http`: the server's answer)."""
    write_error: tuple[int | None, str, str] | None = None
    """A write of its records failed (`OutputWriteError.wire`): the run stopped then, and `run_benchmark` raises it."""
    done: bool = False

    def snapshot(self) -> WorkerStats:
        snap = WorkerStats(**{k: getattr(self, k) for k in self.__slots__})
        snap.first_errors = dict(self.first_errors)
        return snap


class Control(Protocol):
    """How a worker hears about run-wide stops and tells the parent how it is doing."""

    def stop_reason(self) -> str | None: ...

    def request_stop(self, reason: str) -> None: ...

    def publish(self, stats: WorkerStats) -> None: ...

    async def barrier(self) -> None: ...

    async def warmed(self) -> bool:
        """This worker's warm-up requests have all ended: True once every worker's have and the profiling start is
        marked (the server's counters read, `MetricsScraper.scrape_now`), False on a run-wide stop."""

    async def drained(self) -> bool:
        """This worker's warm-up has drained (`Drain`): True once every worker's has and the profiling start is
        marked (as `warmed`), False on a run-wide stop."""


class LocalControl:
    """In-process control for a single worker: the parent reads `stats` directly."""

    def __init__(self, mark: Callable[[], Awaitable[object]] | None = None) -> None:
        self._reason: str | None = None
        self.stats: WorkerStats | None = None
        self._mark = mark
        """Awaited once the warm-up ended or drained, before profiling starts (the window's base scrape)."""

    def stop_reason(self) -> str | None:
        return self._reason

    def request_stop(self, reason: str) -> None:
        self._reason = self._reason or reason

    def publish(self, stats: WorkerStats) -> None:
        self.stats = stats

    async def barrier(self) -> None:
        return None

    async def warmed(self) -> bool:
        if self._mark is not None:
            await self._mark()
        return True

    async def drained(self) -> bool:
        return await self.warmed()


def share(total: int, worker: int, workers: int) -> int:
    """This worker's part of `total`, spread as evenly as possible."""
    return total // workers + (1 if worker < total % workers else 0)


@dataclass
class _Phase:
    name: str | None  # "warmup" forces the phase label; None keeps the workload's own label
    budget: int | None
    used: int = 0


@dataclass(eq=False)
class _Join:
    pending: set[asyncio.Task[None]]


@dataclass(eq=False)
class _Tree:
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    handles: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    inflight: int = 0
    """Its requests sent (or waiting for their turn to be sent) and not yet answered (the per-tree idle cap)."""
    last: float = 0.0
    """Loop time its last request was sent or answered."""
    sleepers: set[asyncio.Future[None]] = field(default_factory=set)
    """Its programs' pending sleeps (keys of `Interpreter._sleepers`)."""
    awake: int = 1
    """Its programs that can run now: not sleeping, not waiting for an answer, for children or for the warm-up drain
    (the predictor's `ready`); the root is awake from the start, a spawned child from its Spawn, a joiner from the end
    of its last child, a held program from the release. The per-tree cap waits for none to be awake."""
    joins: list[_Join] = field(default_factory=list)
    """Its programs waiting in `Join`, each with the children it still waits for."""
    held: int = 0
    """Its programs held at `Drain` until the release."""


class Pacer:
    """Turns for client work (starting a request, parsing a finished one), so the event loop polls the network at
    least about every `budget_s` and reads are stamped on time.

    A closed loop's lanes finish together and send together; without turns one loop iteration would run hundreds of
    sends and parses while the first tokens of the earliest requests wait, unread, in their sockets. Work runs at
    once while the current loop iteration has spent less than the budget on client work; past that, callers queue,
    sends before parses (parsing is never urgent), each kind first come, first served. Every later iteration lets a
    batch through; a turn that finds the iteration's budget spent goes back to the head of its queue, and the batch
    shrinks to what fitted or grows by a quarter when all of it did. `budget_s` None turns pacing off.
    """

    def __init__(self, budget_s: float | None) -> None:
        self.budget = budget_s
        self.since: float | None = None  # when the current iteration's client work began
        # futures of the turns waiting (sends, parses); the result says the turn goes ahead even if the budget is spent
        self.queues: tuple[collections.deque[asyncio.Future[bool]], ...] = (collections.deque(), collections.deque())
        self.batch = 4
        self.granted = 0
        self.returned = 0
        self.heads = [0, 0]
        self.ticking = False
        self.waits = 0

    def _spent(self) -> bool:
        """Start this iteration's budget, or say whether it is spent."""
        now = time.perf_counter()
        if self.since is None:
            self.since = now
            self._schedule()  # the tick that starts the next iteration's budget
            return False
        return now - self.since >= (self.budget or 0.0)

    async def turn(self, kind: int = 0) -> None:
        if self.budget is None:
            if kind == 1:
                await asyncio.sleep(0)  # one parse per loop iteration, as before there were turns
            return
        queue = self.queues[kind]
        if not self.queues[0] and not queue and not self._spent():
            return
        loop = asyncio.get_running_loop()
        self.waits += 1
        head = False
        while True:
            fut: asyncio.Future[bool] = loop.create_future()
            if head:  # back to the head of the queue, behind the others of its batch that came back before it
                queue.insert(self.heads[kind], fut)
                self.heads[kind] += 1
            else:
                queue.append(fut)
            self._schedule()
            try:
                forced = await fut
            except asyncio.CancelledError:
                with contextlib.suppress(ValueError):
                    queue.remove(fut)
                raise
            if not self._spent() or forced:
                return
            self.returned += 1
            head = True

    def _schedule(self) -> None:
        if not self.ticking:
            self.ticking = True
            asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        """Once per loop iteration (after the network was polled): a new budget and, when work waits, the next batch
        (its turns run in the next iteration)."""
        self.ticking = False
        self.since = None
        if self.granted:
            fitted = self.granted - self.returned
            self.batch = max(1, fitted) if self.returned else min(self.batch + max(1, self.batch // 4), 1024)
        self.granted = self.returned = 0
        self.heads = [0, 0]
        n = self.batch
        for kind, queue in enumerate(self.queues):
            forced = kind == 1 and n <= 0  # at least one parse per iteration: sends never starve the record writer
            n = max(n, 1) if kind == 1 else n
            while queue and n > 0:
                fut = queue.popleft()
                if not fut.done():
                    fut.set_result(forced)
                    forced = False
                    n -= 1
                    self.granted += 1
        if any(self.queues):
            self._schedule()


class Interpreter:
    """Runs one worker's share of a benchmark against one endpoint, writing records as requests finish."""

    def __init__(
        self,
        workload: Workload,
        endpoint: Endpoint,
        options: RunOptions,
        records_path: Path,
        *,
        worker: int = 0,
        workers: int = 1,
        control: Control | None = None,
    ) -> None:
        self.workload = workload
        workload.bind_worker(worker, workers)  # a workload sharing one sequence across lanes takes only its part
        workload.prepare()  # prompts built now cannot hold up a send or a chunk's time stamp later
        self.endpoint = endpoint
        self.options = options
        self.worker = worker
        self.workers = workers
        self.control: Control = control or LocalControl()
        self.writer = RecordWriter(records_path)
        self.stats = WorkerStats(worker=worker)
        self.stopping = False
        self._stop_at: float | None = None
        self._grace = options.grace_s
        self._sleepers: dict[asyncio.Future[None], list[Any]] = {}  # fut -> [wake (loop time), handle, shift]
        self._stop_wakers: set[asyncio.Future[None]] = set()
        self._last_activity = 0.0
        self._idle_cap = options.system_idle_gap_cap_s
        if self._idle_cap is None:
            self._idle_cap = getattr(getattr(workload, "config", None), "system_idle_gap_cap_s", None)
        self._tree_cap = workload.tree_idle_cap_s
        self._trees: set[_Tree] = set()
        self._all: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count()
        self._handle_ids = itertools.count()
        self._lane_iters: dict[int, Iterator[LaneProgram]] = {}
        self._drain: WarmupDrain | None = None
        self._released = asyncio.Event()
        """Set when every worker's warm-up has drained (or the run stops): held programs and idle lanes go on."""
        self._drain_deadline: float | None = None
        self._phase = _Phase(None, None)
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None  # pools nothing: a request's one retry (`keepalive`)
        self._protocol_stamps = options.stamp_reads in ("kernel", "protocol")
        # hooked connections are watched for stalls by `_watch_stalls`, not by aiohttp's per-read timer
        # sock_connect: a connection the server's host never completes (its SYNs dropped: a full accept queue, a host
        # gone) received nothing too; it waited for the whole-request timeout (600 s by default)
        self._timeout = aiohttp.ClientTimeout(
            total=options.timeout_s, sock_read=None if self._protocol_stamps else options.stall_s,
            sock_connect=options.stall_s,
        )
        self._inflight: set[RawExchange] = set()
        self._stall_checked = 0.0
        # the client's limits, for a gateway that gives up on a worker before them and names it
        # (`engine_ids.TIMEOUT_HEADER`)
        self._headers = {"Content-Type": "application/json", TIMEOUT_HEADER: f"{options.timeout_s:g}",
                         STALL_HEADER: f"{options.stall_s:g}", **endpoint.headers}
        if not any(k.lower() == "accept-encoding" for k in endpoint.headers):
            # aiohttp asks for gzip and deflate unless told, and a compressed stream cannot be read as it comes
            self._headers["Accept-Encoding"] = "identity"
        self._parse_queue: asyncio.Queue[tuple[RawExchange, RequestSpec, str] | None] = asyncio.Queue()
        self._pacer = Pacer(options.loop_budget_s)
        self._inline = (
            options.parse_inline
            or bool(getattr(workload, "needs_output_text", False))
            or bool(getattr(getattr(workload, "config", None), "live_assistant_responses", False))
        )
        # complete streams are parsed and recorded by a helper process, off this loop (see recorder.py)
        self._helper: RecordHelper | None = None
        if options.records_off_loop and not self._inline:
            self._helper = RecordHelper(
                records_path, worker=worker, overflow_patterns=options.context_overflow_patterns,
                sends_done=endpoint.sends_done, on_tallies=self._tallies, on_write_error=self.write_failed,
            )

    # ----------------------------------------------------------------------------------------------- lifecycle
    async def run(self) -> WorkerStats:
        """Run warmup then profiling to completion, deadline or stop; returns the final counters."""
        cpu0, wall0 = time.process_time(), time.perf_counter()
        self._last_activity = asyncio.get_running_loop().time()
        # Collections of a big heap pause the loop for milliseconds and land in someone's TTFT: freeze what exists
        # and make young-generation collections rare for the run (aiperf disables GC in its workers outright).
        thresholds = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(50_000, 50, 1000)
        trace = aiohttp.TraceConfig()
        trace.on_connection_queued_start.append(self._on_queued_start)
        trace.on_connection_queued_end.append(self._on_queued_end)
        trace.on_connection_create_start.append(self._on_create_start)
        trace.on_connection_create_end.append(self._on_create_end)
        trace.on_request_headers_sent.append(keepalive.mark_sent)
        trace.on_request_chunk_sent.append(keepalive.mark_sent)
        trace.on_connection_reuseconn.append(keepalive.mark_reused)
        connector = StampingConnector(limit=0, limit_per_host=0, force_close=False, enable_cleanup_closed=True,
                                      keepalive_timeout=POOLED_KEEPALIVE_S)
        fresh_connector = StampingConnector(limit=0, limit_per_host=0, force_close=True)
        for conn in (connector, fresh_connector):
            conn.kernel_stamps = self.options.stamp_reads == "kernel"
            conn.first_events = self.options.split_first_events
        stamped = dict(READS_STAMPED)
        stamps_on = KernelStampsOn() if connector.kernel_stamps else None
        helper_started = False
        undo_order = None
        if self._protocol_stamps and self.options.read_first_tokens_first:
            undo_order = first_tokens_first(asyncio.get_running_loop())
        try:
            if self._helper is not None:
                try:
                    await self._helper.start()
                except Exception as exc:  # e.g. no process can be started here: parse in the loop, as before
                    log.warning("finished streams are parsed in the event loop: the record helper failed (%s)", exc)
                    self._helper.abandon(kill=True)
                    self._helper = None
                except BaseException:  # cancelled while it started: it must not outlive this run
                    self._helper.abandon(kill=True)
                    raise
                else:
                    helper_started = self.stats.record_helper = True
            async with aiohttp.ClientSession(
                connector=connector, trace_configs=[trace], auto_decompress=False, skip_auto_headers=["User-Agent"]
            ) as session, aiohttp.ClientSession(
                connector=fresh_connector, trace_configs=[trace], auto_decompress=False,
                skip_auto_headers=["User-Agent"]
            ) as fresh:
                self._session, self._fresh = session, fresh
                parser = asyncio.ensure_future(self._parser())
                main = asyncio.ensure_future(self._phases())
                try:
                    await self._supervise(main)
                finally:
                    self._parse_queue.put_nowait(None)
                    await parser
        finally:
            if helper_started and self._helper is not None:
                try:
                    await self._helper.close()  # its last records written, its tallies counted
                except BaseException:
                    self._helper.abandon()
                    raise
                finally:
                    self.stats.helper_cpu_s = self._helper.cpu_s
            if undo_order is not None:
                undo_order()
            if stamps_on is not None:
                stamps_on.close()
            gc.set_threshold(*thresholds)
            gc.unfreeze()
            self.writer.close()
            self.stats.turns_queued = self._pacer.waits
            self.stats.reads_kernel_stamped = READS_STAMPED["kernel"] - stamped["kernel"]
            self.stats.reads_loop_stamped = READS_STAMPED["loop"] - stamped["loop"]
            self.stats.cpu_s = time.process_time() - cpu0
            self.stats.wall_s = time.perf_counter() - wall0
            self.stats.done = True
            self.stats.stop_reason = self.stats.stop_reason or self.control.stop_reason()
            self.control.publish(self.stats.snapshot())
        return self.stats

    async def _supervise(self, main: asyncio.Future[None]) -> None:
        """Poll for the deadline, run-wide stops and the end of the grace period; publish counters."""
        last_publish = 0.0
        while not main.done():
            await asyncio.wait([main], timeout=0.05)
            now = now_unix()
            if not self.stopping:
                if self.stats.deadline is not None and now >= self.stats.deadline:
                    self.stop(DURATION_REACHED)
                elif (reason := self.control.stop_reason()) is not None:
                    self.stop(reason, grace=0.0)
                elif (self._drain_deadline is not None and now >= self._drain_deadline
                      and not self._released.is_set() and self.stats.warmup_drained_at is None):
                    # (drained here, it waits for the profiling start's scrape and the other workers: not a failure)
                    self._abort(warmup_not_drained(self.workload.warmup_drain_s or 0.0))
            if self.stopping and self._stop_at is not None and now >= self._stop_at + self._grace:
                self._cancel_all()
            self._cap_idle_gap()
            self._watch_stalls()
            if now - last_publish >= 0.2:
                self.stats.turns_queued = self._pacer.waits
                self.control.publish(self.stats.snapshot())
                last_publish = now
        await main

    def _watch_stalls(self) -> None:
        """End in-flight requests that received nothing for `stall_s` as read timeouts (hooked connections)."""
        if not self._protocol_stamps:
            return
        now = time.perf_counter()
        stall_s = self.options.stall_s
        if now - self._stall_checked < min(0.25, stall_s / 4):
            return
        self._stall_checked = now
        for raw in list(self._inflight):  # one not hooked yet (still connecting) is left to the total timeout
            if raw.sent and stalled(raw, now, stall_s):
                self._inflight.discard(raw)

    def _blocked(self, tree: _Tree) -> None:
        """One of the tree's programs has just blocked (it sleeps, waits for an answer, its children or the drain, or
        ended): apply the per-tree cap now, at the moment the predictor applies it (`sim.predict._cap_tree`). On the
        50 ms supervision tick a sleep begun past the cap lasted until the next tick."""
        tree.awake -= 1
        self._cap_tree(tree)

    def _cap_idle_gap(self) -> None:
        """AgentX system idle cap: when nothing is in flight and every live program sleeps, and the earliest wake-up
        lies more than the cap after the last activity, bring every sleeper forward by the same amount (order and
        relative delays are kept)."""
        cap = self._idle_cap
        if cap is None or self.stopping or self.stats.inflight or not self._sleepers:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        earliest = min(entry[0] for entry in self._sleepers.values())
        shift = earliest - max(self._last_activity + cap, now)
        if shift > 1e-6:
            self._shift(list(self._sleepers), shift)

    def _cap_tree(self, tree: _Tree) -> None:
        """AgentX's per-tree idle cap: a session tree with no request in flight whose earliest wake-up lies more than
        the cap after its last activity has all its sleepers brought forward by the same amount."""
        cap = self._tree_cap
        if cap is None or self.stopping or tree.inflight or tree.awake or not tree.sleepers:
            return
        futs = [f for f in tree.sleepers if f in self._sleepers]
        if not futs:
            return
        now = asyncio.get_running_loop().time()
        shift = min(self._sleepers[f][0] for f in futs) - max(tree.last + cap, now)
        if shift > 1e-6:
            self._shift(futs, shift)

    def _shift(self, futs: list[asyncio.Future[None]], shift: float) -> None:
        """Bring these sleepers forward by `shift` seconds (their order and relative delays kept)."""
        loop = asyncio.get_running_loop()
        for fut in futs:
            entry = self._sleepers[fut]
            entry[1].cancel()
            entry[0] -= shift
            entry[2] += shift
            entry[1] = loop.call_at(entry[0], _wake, fut)

    def stop(self, reason: str, *, grace: float | None = None) -> None:
        """Stop starting requests; wake sleepers so their programs end; in-flight ones get the grace period."""
        if grace is not None:
            self._grace = min(self._grace, grace)
        if self.stopping:
            return
        log.info("worker %d stopping: %s", self.worker, reason)
        self.stopping = True
        self._stop_at = now_unix()
        self.stats.stop_reason = reason
        self._released.set()  # held programs and idle lanes see `stopping` and end
        for fut in [*self._sleepers, *self._stop_wakers]:
            if not fut.done():
                fut.set_result(None)

    def _cancel_all(self) -> None:
        for task in list(self._all):
            if not task.done():
                task.cancel()

    # ----------------------------------------------------------------------------------------------- phases
    async def _phases(self) -> None:
        opts = self.options
        closed_lanes = self._my_lanes()
        if opts.warmup_requests > 0 and not self.stopping:
            budget = share(opts.warmup_requests, self.worker, self.workers)
            if budget > 0:
                self._phase = _Phase("warmup", budget)
                lanes = closed_lanes or [self.worker + i * self.workers for i in range(min(budget, 16))]
                await self._closed_loop(lanes)
        if opts.warmup_requests > 0:  # every worker, with a share or not: the profiling start is marked once
            await self.control.warmed()
        await self.control.barrier()
        main_budget = share(opts.num_requests, self.worker, self.workers) if opts.num_requests else None
        self._phase = _Phase(None, main_budget)
        if self.stopping or main_budget == 0:
            return
        arrivals = self.workload.arrivals()
        if opts.request_rate is not None or (arrivals is not None and opts.concurrency is None):
            await self._open_loop(arrivals if opts.request_rate is None else None)
        else:
            lanes = closed_lanes or [self.worker]
            if (grace := self.workload.warmup_drain_s) is not None:
                self._drain = WarmupDrain(len(lanes))
                self._drain_deadline = now_unix() + grace
            await self._closed_loop(lanes)

    def _my_lanes(self) -> list[int]:
        conc = self.options.concurrency
        if conc is None:
            return []
        return [lane for lane in range(conc) if lane % self.workers == self.worker]

    def _sessions(self, lane: int) -> Iterator[LaneProgram]:
        if lane not in self._lane_iters:
            self._lane_iters[lane] = iter(self.workload.sessions(lane))
        return self._lane_iters[lane]

    def _budget_left(self) -> bool:
        ph = self._phase
        return ph.budget is None or ph.used < ph.budget

    async def _closed_loop(self, lanes: list[int]) -> None:
        tasks = [self._track(self._lane(lane)) for lane in lanes]
        for lane, result in zip(lanes, await asyncio.gather(*tasks, return_exceptions=True), strict=True):
            if isinstance(result, Exception):  # an interpreter fault: said, never a silently empty lane
                log.error("lane %d ended on an error: %r", lane, result, exc_info=result)

    async def _lane(self, lane: int) -> None:
        sessions = self._sessions(lane)
        armed = self._drain is not None  # the lane's first program must reach its `Drain`
        try:
            while not self.stopping and self._budget_left():
                if not armed and self._drain is not None and not self._released.is_set():
                    await self._released.wait()  # a second session waits for every lane's warm-up
                    continue
                try:
                    program = next(sessions, None)
                except Exception:
                    log.exception("lane %d: the workload could not produce its next session; the lane stops", lane)
                    return
                if program is None:
                    return
                armed, first = False, armed
                await self._run_tree(program, lane, time.perf_counter(), armed=first)
        finally:
            if armed:  # it ended before its first program ran: nothing of it to drain
                self._leave()

    def _leave(self) -> None:
        """An armed program reached `Drain` or ended: after the last of this worker's, wait for the other workers',
        then release."""
        assert self._drain is not None
        if self._drain.leave() and not self.stopping:  # a stop releases everyone itself, as a stop
            self._track(self._release())

    async def _release(self) -> None:
        self.stats.warmup_drained_at = now_unix()
        if await self.control.drained():
            released = asyncio.get_running_loop().time()
            for tree in self._trees:  # profiling starts from the snapshot: idle time counts from here
                tree.last = released
                tree.awake += tree.held
                tree.held = 0
            self._released.set()

    async def _open_loop(self, arrivals: Iterator[Any] | None) -> None:
        """Start sessions at their arrival offsets from a common start; arrival i belongs to worker i mod N."""
        opts = self.options
        t0 = time.perf_counter()
        trees: set[asyncio.Task[None]] = set()
        if arrivals is not None:
            source: Iterator[tuple[float, LaneProgram | None]] = ((a.at, a.program) for a in arrivals)
        else:
            assert opts.request_rate is not None
            source = ((t, None) for t in arrival_times(opts.request_rate, opts.arrival, opts.seed))
        own_sessions = self._sessions(self.worker)
        for i, (at, program) in enumerate(source):
            if i % self.workers != self.worker:
                if program is not None:
                    program.close()
                continue
            if self.stopping or not self._budget_left():
                if program is not None:
                    program.close()
                break
            if program is None:
                program = next(own_sessions, None)
                if program is None:
                    break
            due = t0 + at
            delay = due - time.perf_counter()
            if delay > 0:
                await self._sleep(delay)
                if self.stopping:
                    program.close()
                    break
            task = self._track(self._run_tree(program, self.worker, due))
            trees.add(task)
            task.add_done_callback(trees.discard)
        if trees:
            await asyncio.gather(*list(trees), return_exceptions=True)

    # ----------------------------------------------------------------------------------------------- programs
    def _track(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._all.add(task)
        task.add_done_callback(self._all.discard)
        return task

    async def _run_tree(self, program: LaneProgram, lane: int, scheduled: float, *, armed: bool = False) -> None:
        """Run a session tree to its end: the root and every descendant, joined or not."""
        tree = _Tree(last=asyncio.get_running_loop().time())
        self._trees.add(tree)
        try:
            await self._run_program(program, lane, tree, scheduled, armed)
        finally:
            try:
                while pending := [t for t in tree.tasks if not t.done()]:
                    await asyncio.wait(pending)
            finally:
                self._trees.discard(tree)

    async def _run_program(
        self, gen: LaneProgram, lane: int, tree: _Tree, scheduled: float | None, armed: bool = False
    ) -> None:
        """Carry out one program's actions; `armed`: it has to reach its `Drain` (see the module doc)."""
        value: Any = None
        intended = scheduled
        try:
            while True:
                try:
                    action = gen.send(value)
                except StopIteration:
                    return
                except Exception:  # a workload bug ends this session, loudly, not the run
                    log.exception("lane %d: the workload program raised; ending its session", lane)
                    return
                if isinstance(action, Send):
                    if self.stopping or not self._budget_left():
                        return
                    self._phase.used += 1
                    loop = asyncio.get_running_loop()
                    tree.inflight += 1
                    tree.awake -= 1
                    tree.last = loop.time()
                    try:
                        outcome, overflow = await self._send(action.spec, intended)
                    finally:
                        tree.inflight -= 1
                        tree.awake += 1
                        tree.last = loop.time()
                    intended = None
                    if action.spec.identity.primer and not outcome.ok and not self.stopping:
                        ident = action.spec.identity  # AgentX: a failed root primer aborts the run
                        self._abort(root_primer_failed(ident.lane, ident.trace, outcome.error))
                        return
                    if overflow:
                        return  # AgentX: a context overflow ends that session
                    value = outcome
                elif isinstance(action, Sleep):
                    intended = time.perf_counter() + max(action.seconds, 0.0)
                    intended -= await self._sleep(action.seconds, cappable=True, tree=tree)
                    if self.stopping:
                        return
                    value = None
                elif isinstance(action, Spawn):
                    hid = next(self._handle_ids)
                    if armed:
                        assert self._drain is not None
                        self._drain.join()
                    tree.awake += 1
                    task = self._track(self._run_program(action.program, lane, tree, time.perf_counter(), armed))
                    tree.tasks.add(task)
                    tree.handles[hid] = task
                    value = SpawnHandle(hid)
                elif isinstance(action, Join):
                    children = [tree.handles[h.id] for h in action.handles if h.id in tree.handles]
                    if pending := {c for c in children if not c.done()}:
                        join = _Join(pending)  # the last of them to end makes this program awake again
                        tree.joins.append(join)
                        self._blocked(tree)
                        try:
                            await asyncio.wait(children)
                        finally:
                            if join in tree.joins:  # cancelled before its children ended
                                tree.joins.remove(join)
                                tree.awake += 1
                    value = None
                elif isinstance(action, Drain):
                    if armed:
                        armed = False
                        self._leave()
                        if not self._released.is_set():
                            tree.held += 1  # the release makes it awake again
                            self._blocked(tree)
                        await self._released.wait()
                        if self.stopping:
                            return
                    value = None
                else:
                    log.error("lane %d: unknown action %r; ending the session", lane, action)
                    return
        finally:
            gen.close()
            if armed:
                self._leave()
            this = asyncio.current_task()
            for join in list(tree.joins):
                join.pending.discard(this)
                if not join.pending:
                    tree.joins.remove(join)
                    tree.awake += 1
            self._blocked(tree)

    async def _sleep(self, seconds: float, *, cappable: bool = False, tree: _Tree | None = None) -> float:
        """Sleep, waking early on stop; returns by how much the idle caps shortened it (program sleeps only; `tree`:
        the session tree whose per-tree cap applies)."""
        if seconds <= 0 or self.stopping:
            return 0.0
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        wake = loop.time() + seconds
        entry: list[Any] = [wake, loop.call_at(wake, _wake, fut), 0.0]
        if cappable:
            self._sleepers[fut] = entry
            if tree is not None:
                tree.sleepers.add(fut)
                self._blocked(tree)
        else:
            self._stop_wakers.add(fut)
        try:
            await fut
        finally:
            entry[1].cancel()
            self._sleepers.pop(fut, None)
            self._stop_wakers.discard(fut)
            if tree is not None:
                tree.sleepers.discard(fut)
                tree.awake += 1
        return float(entry[2])

    # ----------------------------------------------------------------------------------------------- sending
    async def _send(self, spec: RequestSpec, intended: float | None) -> tuple[RequestOutcome, bool]:
        assert self._session is not None
        scheduled = intended if intended is not None else time.perf_counter()
        await self._pacer.turn()  # waiting for a turn is schedule lag: `scheduled` was taken before it
        if self.stopping:
            return RequestOutcome(ok=False, error="not sent: the run stopped"), False
        phase = self._phase.name or spec.identity.phase
        if phase == "profiling" and self.stats.first_profiling_sent is None:
            self.stats.first_profiling_sent = now_unix()
            if self.options.duration_s is not None:
                self.stats.deadline = self.stats.first_profiling_sent + self.options.duration_s
        body = build_body(spec, self.endpoint)
        url = self.endpoint.url_for(spec.api)
        raw = RawExchange(scheduled=scheduled)
        st = self.stats
        loop = asyncio.get_running_loop()
        self._last_activity = loop.time()
        st.started += 1
        st.inflight += 1
        st.max_inflight = max(st.max_inflight, st.inflight)
        self._inflight.add(raw)
        try:
            await exchange(
                self._session, url, body, self._headers, raw, self._timeout, stamp_in_protocol=self._protocol_stamps,
                turn=self._pacer.turn, fresh=self._fresh,
            )
        except asyncio.CancelledError:
            if self.stopping and self._grace == 0.0 and raw.error_class == "cancelled":  # no drain: say why
                raw.error = f"cancelled in flight: {self.stats.stop_reason}"
            self._record(raw, spec, phase)
            raise
        finally:
            st.inflight -= 1
            if raw.retried is not None:
                st.retried += 1
            self._inflight.discard(raw)
            self._last_activity = loop.time()
        if self._inline or raw.error_class is not None or _error_in_stream(raw):
            # (an error the server sent inside a 200 stream is the program's outcome too: a failed root primer aborts
            # the run, a context overflow ends its session, as when it came as an HTTP error)
            rec_ok, text, tokens, error, overflow = self._record(raw, spec, phase)
            return RequestOutcome(ok=rec_ok, output_text=text, output_tokens=tokens, error=error), overflow
        # A complete stream: let the program send its next request first; parse later, one response at a time.
        if self._helper is not None:
            self._helper.submit(raw, spec, self._next_id(), phase, self._ignore_eos(spec))
        else:
            self._parse_queue.put_nowait((raw, spec, phase))
        return RequestOutcome(ok=True), False

    async def _parser(self) -> None:
        """Parse finished streams into records between network events: a burst of completions never blocks the
        loop for more than one response's parse, so chunk stamps and new sends stay on time."""
        queue = self._parse_queue
        while True:
            item = await queue.get()
            if item is None:
                while not queue.empty():  # drain what is left at the end of the run
                    rest = queue.get_nowait()
                    if rest is not None:
                        self._record(*rest)
                return
            await self._pacer.turn(1)
            self._record(*item)

    def _record(
        self, raw: RawExchange, spec: RequestSpec, phase: str
    ) -> tuple[bool, str, int | None, str | None, bool]:
        rec, text = to_record(
            raw, spec, rid=self._next_id(), worker=self.worker, phase=phase,
            overflow_patterns=self.options.context_overflow_patterns,
            ignore_eos=self._ignore_eos(spec), sends_done=self.endpoint.sends_done,
        )
        try:
            self.writer.write(rec)
        except OutputWriteError as exc:  # counted only once written: the counters never claim a lost record
            self.write_failed(exc)
        else:
            self._tally(phase, rec.error_class, rec.output_tokens, rec.error)
        return rec.ok, text, rec.completion_tokens, rec.error, rec.error_class == "context_overflow"

    def write_failed(self, exc: OutputWriteError) -> None:
        """A write of this worker's records failed: stop the whole run now (`_abort`: what is in flight is cancelled,
        nothing more is sent) rather than send the rest of the window into records that are not kept. The first
        failure is kept for `run_benchmark` to raise; the cancelled requests' records fail the same way, unsaid."""
        if self.stats.write_error is None:
            log.error("worker %d: %s", self.worker, exc.reason())
            self.stats.write_error = exc.wire()
            self._abort(exc.reason())

    def _next_id(self) -> str:
        return f"w{self.worker}-{next(self._ids)}"

    def _ignore_eos(self, spec: RequestSpec) -> bool:
        return spec.ignore_eos and self.endpoint.send_ignore_eos

    def _tallies(self, tallies: list[Tally]) -> None:
        for phase, error_class, tokens, error in tallies:
            self._tally(phase, error_class, tokens, error)

    def _tally(self, phase: str, error_class: str | None, completion_tokens: int | None,
               error: str | None = None) -> None:
        """Count one written record (whoever parsed it); a failure may stop the run (failure ratio)."""
        st = self.stats
        st.finished += 1
        if error_class is not None and error_class not in st.first_errors:
            st.first_errors[error_class] = error or error_class
        if error_class == "cancelled":
            st.cancelled += 1
        elif phase == "warmup":
            st.warmup_finished += 1
        else:
            st.profiling_finished += 1
            if completion_tokens:
                st.profiling_output_tokens += completion_tokens
            if error_class is not None:
                st.profiling_failed += 1
                self._check_failures()

    def _check_failures(self) -> None:
        st, opts = self.stats, self.options
        if st.profiling_finished < opts.stop_floor or self.stopping:
            return
        ratio = st.profiling_failed / st.profiling_finished
        if ratio > opts.max_failure_ratio:
            self._abort(f"failure ratio {ratio:.3f} ({st.profiling_failed}/{st.profiling_finished}) exceeded "
                        f"max_failure_ratio {opts.max_failure_ratio}")

    def _abort(self, reason: str) -> None:
        """Stop the whole run now (every worker), for `reason`: what is in flight is cancelled, not drained."""
        self.control.request_stop(reason)
        self.stop(reason, grace=0.0)

    # ----------------------------------------------------------------------------------------------- tracing
    async def _on_queued_start(self, session: Any, ctx: Any, params: Any) -> None:
        ctx.queued_at = time.perf_counter()

    async def _on_queued_end(self, session: Any, ctx: Any, params: Any) -> None:
        self.stats.conn_queue_wait_s += time.perf_counter() - getattr(ctx, "queued_at", time.perf_counter())
        self.stats.conn_queue_waits += 1

    async def _on_create_start(self, session: Any, ctx: Any, params: Any) -> None:
        ctx.create_at = time.perf_counter()

    async def _on_create_end(self, session: Any, ctx: Any, params: Any) -> None:
        self.stats.connect_s += time.perf_counter() - getattr(ctx, "create_at", time.perf_counter())
        self.stats.connects += 1


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


_ERROR_MARKS = (b'"error"', b"event: error", b"event:error")
"""What an error event inside a streamed body carries: an `"error"` key (a quote inside generated text is escaped, so
the token never matches text) or an SSE `event: error` line."""


def _error_in_stream(raw: RawExchange) -> bool:
    """Whether a complete 200 stream holds an error event: a byte scan, so only such streams are parsed at once."""
    body = raw.body if raw.body is not None else b"".join(raw.pieces)
    return any(mark in body for mark in _ERROR_MARKS)
