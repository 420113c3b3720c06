"""The simulated engine core: a pure, clock-injected step machine (no asyncio, no wall clock inside).

One step, as in vLLM's V1 / SGLang's unified scheduler:

1. schedule — running requests first (decodes take 1 token of the step budget, K+1 with speculative decoding;
   unfinished prefills take a chunk), then waiting requests FCFS while the batch has room (running slots, token
   budget, KV blocks). A newly admitted request first looks its prompt's block hashes up in the prefix cache (GPU,
   then CPU tier). When a running request needs a block and none is left, the most recently admitted request is
   preempted (its blocks released, recomputed later) — counted; a step that preempted admits no waiting request.
   SGLang-style (`engine_style="sglang"`) the decodes are first checked as a whole: when their next step does not
   fit, some are retracted in SGLang's order until the rest fit (:meth:`EngineCore._retract_decodes`), and counted.
2. time — the :class:`~llmsweep.sim.perf.StepTimer` prices the batch.
3. apply — at the step's end prefills advance (completed prompt blocks enter the prefix cache), a finished prefill
   emits its first token, decodes emit 1 token (or a seeded draw in [1, K+1]), finished requests release their blocks.

Callers drive it: ``end = core.begin_step(now)`` (None when idle), then at ``end``: ``core.end_step()`` returns the
requests that emitted tokens this step. The live server sleeps until ``end``; the predictor jumps there.

Event to event: a caller in virtual time passes ``begin_step(now, horizon=...)``, the time of its next event (an
arrival, a lane's wake-up; not a metrics scrape: a scrape reads a block's state as of its time, :meth:`as_of`).
When the step just scheduled is decode-only, the core then runs the following decode steps too, as one *block*,
while the batch's composition cannot change: no step of the block ends at or after the horizon, no request reaches
its output length before the last step (``begin_step(..., finish=True)``: the step in which one does ends the block,
its draws taken request by request as the step path takes them; without it that step is left to the step path), and
every KV block the decodes need fits the pool (no preemption, evictions in the same order). Step times come
vectorised from the timer (the context grows by the tokens each step emits), speculative draws from the same stream
the step path reads (:meth:`~llmsweep.sim.acceptance.AcceptanceController.plan`), so a block equals its steps taken
one by one.
``end_step`` then applies the whole block; :attr:`EngineCore.last_block` holds each step's end time and each
request's tokens per step, so a caller can still stamp every chunk. ``coalesce=False`` keeps the step-by-step path.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmsweep.engine_ids import TLLM_PROMPT_OVER_BUDGET
from llmsweep.sim.acceptance import AcceptanceController
from llmsweep.sim.config import SimConfig
from llmsweep.sim.kv import BlockHashes, Hint, KVPool
from llmsweep.sim.perf import Batch, StepTimer, decode_step_times

_INF = float("inf")
_NO_BLOCKS = np.empty(0, np.int64)
BLOCK_ELEMENTS = 1 << 16
"""Most (step x request) cells one coalesced block plans at once (bounds the arrays; a longer run is several blocks)."""
MIN_BLOCK = 4.0
"""Expected steps below which the core does not plan a block (planning costs a few single steps; exactness does not
depend on it: any run of steps may be taken one by one)."""
MANY = 32
"""From this many decodes a step costs more than planning a block: blocks of 2 expected steps are planned too."""
ROWS = 64
"""From this many running requests the batch moves into arrays (:meth:`EngineCore._schedule_rows`; back below half
of it): a step's numpy calls cost more than a Python pass over a smaller batch (exactness does not depend on it)."""
PLAN_MARGIN = 1.25
"""With speculative decoding a block plans at most this times the expected steps (plus 8) until a request reaches its
length: a longer run is unlikely to be needed, and a block that stops short is simply followed by the next one."""


@dataclass(slots=True, eq=False)
class SimRequest:
    """One request inside the engine. `owner` is the caller's handle (a stream queue, a record); never read here."""

    rid: int
    prompt_len: int
    block_hashes: BlockHashes
    """The prompt's chain hashes (a uint64 array from the encoder)."""
    max_tokens: int
    owner: Any = None
    arrival: float = 0.0
    computed: int = 0
    """Tokens whose KV is in the pool (prompt progress, then prompt + outputs)."""
    generated: int = 0
    buf: np.ndarray = field(default_factory=lambda: _NO_BLOCKS)
    """The KV blocks held are `buf[:held]`, in prompt order (int64). Room past `held` lets a decode's new block be
    appended without copying the prefix's thousands (:meth:`grow`); the held part is never changed in place, so a
    view of :attr:`blocks` taken earlier stays what it was."""
    held: int = 0
    """How many KV blocks the request holds."""
    owned: bool = False
    """`buf` is this request's own (made by :meth:`grow`): blocks may be written past `held` in place."""
    cached_tokens: int = -1
    """Prompt tokens served from the prefix cache at first admission (-1 until admitted)."""
    host_cached_tokens: int = 0
    chunk: int = 0
    """Tokens of prefill scheduled in the current step (0 for a decode)."""
    last_emitted: int = 0
    prefilled: bool = False
    """True once the (re)computed prefill is done and the request decodes."""
    first_token_at: float | None = None
    finished_at: float | None = None
    preemptions: int = 0
    aborted: bool = False
    error: str | None = None
    hint: Hint | None = None
    """Keys and blocks of an earlier prompt this one may extend (the caller's guess; see `KVPool.lookup_array`);
    dropped once the request is admitted."""
    released: np.ndarray = field(default_factory=lambda: _NO_BLOCKS)
    """The blocks the request held when it last released them (its prompt's come first)."""

    @property
    def done(self) -> bool:
        return self.finished_at is not None or self.aborted or self.error is not None

    @property
    def blocks(self) -> np.ndarray:
        """The KV blocks held, in prompt order (a view; replaced, never changed in place)."""
        return self.buf[:self.held]

    @blocks.setter
    def blocks(self, blocks: np.ndarray) -> None:
        self.buf = blocks
        self.held = len(blocks)
        self.owned = False

    def grow(self, got: np.ndarray) -> None:
        """Append newly taken blocks (into spare room past the held ones, doubling it when it runs out)."""
        held, n = self.held, len(got)
        end = held + n
        buf = self.buf
        if end > len(buf) or not self.owned:
            grown = np.empty(max(end, 2 * held, 16), np.int64)
            grown[:held] = buf[:held]
            buf = self.buf = grown
            self.owned = True
        buf[held:end] = got
        self.held = end


@dataclass(slots=True)
class Block:
    """Decode steps applied together (see the module doc): what ``end_step`` returns emitted this many tokens, in
    this order, at these times."""

    ends: list[float]
    """End time of each step of the block (the last is the block's end)."""
    tokens: list[list[int]]
    """Per emitted request (same order as ``end_step``'s list), its tokens in each step."""
    finishes: bool = False
    """The last step is one in which requests reach their length (``begin_step(finish=True)``): they are finished."""


@dataclass(slots=True)
class _Plan:
    steps: int
    ends: np.ndarray
    busy: float
    tokens: np.ndarray | None
    """(steps, requests) tokens per step with speculative decoding; None when each step emits one token."""
    extra: list[int] | np.ndarray
    """KV blocks taken at planning for each scheduled request, beyond those its first step needed."""
    extra_total: int
    finishes: bool = False
    """The last step is the one in which a request reaches its length."""
    booked: tuple[int, int] | None = None
    """(verify draws, accepted drafts) when the draws were booked at planning (a finishing last step is drawn one
    request at a time, after the steps before it)."""


@dataclass(slots=True)
class Counters:
    """Monotonic counters and last-step gauges the metrics endpoint exposes."""

    requests_submitted: int = 0
    requests_finished: int = 0
    requests_rejected: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_query_tokens: int = 0
    device_hit_tokens: int = 0
    host_hit_tokens: int = 0
    transferred_tokens: int = 0
    """Prompt tokens whose KV arrived from a prefill worker (a disaggregated decode worker's: vLLM's
    `prompt_tokens_by_source{source="external_kv_transfer"}`)."""
    computed_prompt_tokens: int = 0
    preemptions: int = 0
    spec_verify_steps: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    steps: int = 0
    busy_seconds: float = 0.0
    host_load_tokens: int = 0
    max_running_seen: int = 0

    def took_over(self, prompt_len: int, *, transferred: int | None = None) -> None:
        """A request whose prompt's KV arrived from a prefill worker (disaggregated decode): its prompt counts as
        taken in, `transferred` tokens of it (all of it by default) by transfer (what vLLM's decode worker counts:
        `prompt_tokens`, and by source `external_kv_transfer`)."""
        self.prompt_tokens += prompt_len
        self.transferred_tokens += prompt_len if transferred is None else min(transferred, prompt_len)


class EngineCore:
    """Waiting and running queues, a token budget per step, a KV block pool with prefix cache, preemption and
    speculative decoding — see the module doc for one step's order."""

    def __init__(self, config: SimConfig, timer: StepTimer, *, coalesce: bool = True) -> None:
        self.config = config
        self.timer = timer
        self.coalesce = coalesce
        """Run decode steps as blocks when the caller passes a horizon (False: always one step at a time)."""
        self.last_block: Block | None = None
        """The block the last ``end_step`` applied; None when it applied a single step."""
        self._plan: _Plan | None = None
        self._unbegun_blocks = 0
        """Inside :meth:`as_of`: KV blocks the block in flight took for steps not begun at the read's time."""
        bs = config.block_size
        self.block_size = bs
        self.num_blocks = config.pool_tokens // bs
        self.pool = KVPool(self.num_blocks, bs, host_blocks=config.host_capacity_tokens // bs,
                           prefix_caching=config.prefix_caching)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.segments: list[tuple[SimRequest, int, int, list[int] | None]] | None = None
        """Deferred chunk stamps, for a caller that takes them (the predictor sets a list): without speculative
        decoding, a running decode's steps live in the batch's arrays (see :meth:`_schedule_rows`) and `end_step`
        returns only the requests whose first token or last came in the step; every other emission is handed out
        later as `(request, lo, hi, tokens)`: it emitted at the end of each of the steps `step_ends[lo:hi]` one token
        (`tokens` None) or `tokens[j]` (speculative decoding), before anything `end_step` returns for it afterwards.
        None: `end_step` returns every request that emitted."""
        self.step_ends: list[float] = []
        """With `segments`: the end time of every step applied so far (what a segment's indices point into)."""
        self.rows_from = ROWS
        """Running requests from which the batch moves into arrays (tests set 1 to take that path everywhere)."""
        self._rows = False
        """The running batch's hot state lives in the arrays below (rows in batch order; see :meth:`_schedule_rows`).
        Its prefilled requests' `computed` and `generated` are then stale until :meth:`settle`."""
        self._comp = self._gen = self._maxt = self._held = self._seg = _NO_BLOCKS
        self._pre = np.empty(0, bool)
        self._row_prefills: list[int] = []
        """Rows scheduled to prefill in the step in flight (batch order)."""
        self._slot = _NO_BLOCKS
        """With speculative decoding: each row's column of `_toks` (stable while the request runs; reused after)."""
        self._free_slots: list[int] = []
        self._slots = 0
        self._toks = np.zeros((0, 0), np.int16)
        """With speculative decoding: tokens each slot's decode emitted in each step, row `j` for `step_ends[_tok_base +
        j]` (what a deferred segment's tokens are read from; rows before the oldest open segment are dropped)."""
        self._tok_base = 0
        self.counters = Counters()
        self.now = 0.0
        self._next_rid = 0
        self._in_step = False
        self._aborts = 0
        self._step_end = 0.0
        self._scheduled: list[SimRequest] = []
        self.prefill_first = config.scheduler == "prefill-first"
        """ATOM's scheduler: prefill-only steps while anything can be prefilled, a prompt's KV taken whole at
        admission (`SimConfig.scheduler`)."""
        self.no_evict = config.capacity == "no-evict"
        """TensorRT-LLM's GUARANTEED_NO_EVICT admission: a request is admitted only when its whole length fits the
        blocks the running requests have not reserved to their completion (`SimConfig.capacity`,
        :meth:`spare_blocks`)."""
        self.sglang = config.engine_style == "sglang"
        """KV pressure as SGLang meets it: decodes retracted before the step (:meth:`_retract_decodes`)."""
        spec = config.spec
        self.spec_k = spec.k if spec else 0
        self.sampler = (
            AcceptanceController(spec.k, spec.acceptance_length, config.seed,
                                 counts_first_token=config.engine_style == "sglang")
            if spec else None
        )

    # -- intake -----------------------------------------------------------------------------------------------------
    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    def new_request(self, prompt_len: int, block_hashes: BlockHashes, max_tokens: int, *, owner: Any = None,
                    now: float | None = None, hint: Hint | None = None) -> SimRequest:
        """Queue a request; one that can never fit the KV pool is returned with `error` set and not queued. `hint`:
        see `SimRequest.hint`."""
        rid = self._next_rid
        self._next_rid += 1
        req = SimRequest(rid, prompt_len, block_hashes, max(1, max_tokens), owner,
                         self.now if now is None else now, hint=hint)
        self.counters.requests_submitted += 1
        req.error = self.refusal(prompt_len, req.max_tokens)
        if req.error is not None:
            self.counters.requests_rejected += 1
            return req
        self.waiting.append(req)
        return req

    def refusal(self, prompt_len: int, max_tokens: int) -> str | None:
        """Why the engine refuses a request of `prompt_len` prompt tokens asking for up to `max_tokens` (None when it
        takes it): an empty prompt; prompt + output beyond the context length, refused as vLLM and SGLang refuse it
        (a 400 whose text a client reads as a context overflow), a request the KV pool could never hold among them:
        the one limit is `SimConfig.served_context`, which the server reports."""
        if prompt_len < 1:
            return "prompt is empty"
        limit = self.config.max_prompt_tokens
        if limit is not None and prompt_len > limit:
            return TLLM_PROMPT_OVER_BUDGET.format(prompt=float(prompt_len), tokens=limit)
        total = prompt_len + max(1, max_tokens)
        context = self.config.served_context()
        if total > context:
            return (f"This model's maximum context length is {context} tokens. However, you requested {total} tokens "
                    f"({prompt_len} in the messages, {max(1, max_tokens)} in the completion). Please reduce the "
                    f"length of the messages or completion.")
        return None

    def adopt(self, prompt_len: int, block_hashes: BlockHashes, max_tokens: int, blocks: list[int], *,
              owner: Any = None, now: float, cached_tokens: int = 0) -> SimRequest:
        """Take over a request another engine prefilled (disaggregated decode): its prompt's KV already sits in
        `blocks` (taken from this pool) and its first token was emitted; it joins the running batch to decode the
        rest. The caller checks the running cap and the length against the pool first."""
        rid = self._next_rid
        self._next_rid += 1
        req = SimRequest(rid, prompt_len, block_hashes, max(1, max_tokens), owner, now, computed=prompt_len,
                         generated=1, buf=np.asarray(blocks, np.int64), held=len(blocks), cached_tokens=cached_tokens,
                         prefilled=True, first_token_at=now)
        self.counters.requests_submitted += 1
        self.counters.took_over(prompt_len)
        if req.generated >= req.max_tokens:
            req.finished_at = now
            self.counters.requests_finished += 1
            self._release(req)
        else:
            # with the batch in arrays (a step in flight or not), it joins them at the next schedule, after their rows
            # (`_join_tail`): a decode worker adopts a request almost every step, and settling each time would keep
            # its batch request by request
            self.running.append(req)
        return req

    def abort(self, req: SimRequest) -> None:
        """Stop a request (client went away); its blocks are released at the next step boundary."""
        if req.done:
            return
        req.aborted = True
        self._aborts += 1
        if req in self.waiting:
            self.waiting.remove(req)
            self._release(req)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # -- step -------------------------------------------------------------------------------------------------------
    def begin_step(self, now: float, horizon: float | None = None, *, finish: bool = False) -> float | None:
        """Schedule a batch at `now`; returns the time it ends, or None when there is nothing to run.

        With a `horizon` (the caller's next event; see the module doc) a decode-only batch may run as a block of
        steps that all end before it; the returned time is then the block's end. With `finish` (the predictor's
        contract: its horizon is the next submit, it finishes requests at a block's end) a block may also end with
        the step in which requests reach their length or in which the horizon falls: a submit inside a step only
        queues a request for the step after."""
        assert not self._in_step, "end_step() must follow begin_step()"
        self.now = now
        lookahead = self.spec_k + 1
        picked = None
        n_run = len(self.running)
        if (self.segments is not None and self.coalesce
                and (n_run >= self.rows_from or (self._rows and 2 * n_run >= self.rows_from)) and not self._aborts
                and (not self.prefill_first or not self.waiting or n_run >= self.config.max_running_requests)
                and not (self.sglang and len(self.running) * -(-lookahead // self.block_size)
                         > self.pool.available())):
            picked = self._schedule_rows()
        if picked is None:
            self.settle()
            picked = self._schedule_steps()
        scheduled, batch, host_load, admit = picked
        running = self.running
        if not scheduled:
            return None
        if self.spec_k:
            batch.decode_tokens = batch.decode_seqs * lookahead
            batch.draft_tokens = self.spec_k if batch.decode_seqs else 0
        else:
            batch.decode_tokens = batch.decode_seqs
        batch.host_load_tokens = host_load
        self.counters.host_load_tokens += host_load
        dt = self.timer.step_time(batch)
        self._scheduled = scheduled
        self._in_step = True
        self._step_end = now + dt
        c = self.counters
        c.steps += 1
        c.busy_seconds += dt
        if len(running) > c.max_running_seen:
            c.max_running_seen = len(running)
        if (horizon is not None and self.coalesce and not batch.prefill_tokens and now + dt < horizon
                and len(scheduled) == len(running) and not self._aborts and admit):
            # (a step that preempted did not try the waiting queue: the next step may admit, so it runs alone)
            plan = self._plan_block(batch, now, dt, horizon, finish)
            if plan is not None:
                self._plan = plan
                self._step_end = float(plan.ends[-1])
                c.steps += plan.steps - 1
                c.busy_seconds += plan.busy - dt
            elif finish and len(scheduled) >= MANY and not self._rows:  # (rows: a step is applied as arrays)
                self._plan = self._one_step(dt)
        return self._step_end

    # -- the running batch as arrays (deferred stamps; speculative or not; unified or prefill-first steps) ------------
    def _enliven(self) -> None:
        """Move the running batch's hot state into arrays (rows in batch order)."""
        running = self.running
        n = len(running)
        self._comp = np.fromiter((r.computed for r in running), np.int64, n)
        self._gen = np.fromiter((r.generated for r in running), np.int64, n)
        self._maxt = np.fromiter((r.max_tokens for r in running), np.int64, n)
        self._held = np.fromiter((r.held for r in running), np.int64, n)
        self._pre = np.fromiter((r.prefilled for r in running), bool, n)
        self._seg = np.full(n, len(self.step_ends), np.int64)
        self._rows = True
        if self.sampler is not None:
            self._slot = np.arange(n, dtype=np.int64)
            self._free_slots = []
            self._slots = n
            self._toks = np.zeros((0, 0), np.int16)
            self._tok_base = len(self.step_ends)

    def _seg_tokens(self, slot: int, lo: int, hi: int) -> list[int] | None:
        """A deferred segment's tokens per step (None without speculative decoding: one each)."""
        if self.sampler is None:
            return None
        base = self._tok_base
        tokens: list[int] = self._toks[lo - base:hi - base, slot].tolist()
        return tokens

    def _tok_room(self, steps: int) -> None:
        """Room in `_toks` for `steps` more steps and every slot (dropping the steps before every open segment)."""
        now = len(self.step_ends)
        toks = self._toks
        if now + steps - self._tok_base <= toks.shape[0] and self._slots <= toks.shape[1]:
            return
        open_ = self._seg[self._pre]
        base = min(int(open_.min()), now) if len(open_) else now
        keep = now - base
        grown = np.zeros((max(2 * (keep + steps), 256), max(self._slots, toks.shape[1], 16)), np.int16)
        if keep > 0:
            at = base - self._tok_base
            grown[:keep, :toks.shape[1]] = toks[at:at + keep]
        self._toks = grown
        self._tok_base = base

    def settle(self) -> None:
        """Write the arrays' state back to the running requests and hand out their open segments (`segments`): the
        request by request path, and any reader of a running request's `computed` or `generated`, may follow."""
        if not self._rows:
            return
        self._rows = False
        segments = self.segments
        assert segments is not None
        hi = len(self.step_ends)
        rows = len(self._comp)  # (requests adopted after the rows are current already: `_join_tail`)
        slots = self._slot.tolist() if self.sampler is not None else [0] * rows
        for r, pre, comp, gen, seg, slot in zip(self.running[:rows], self._pre.tolist(), self._comp.tolist(),
                                                self._gen.tolist(), self._seg.tolist(), slots, strict=True):
            if pre:
                r.computed = comp
                r.generated = gen
                if seg < hi:
                    segments.append((r, seg, hi, self._seg_tokens(slot, seg, hi)))

    def _schedule_rows(self) -> tuple[list[SimRequest], Batch, int, bool] | None:
        """:meth:`_schedule_steps` on the batch's arrays: decodes in one pass, the few prefills and the few decodes
        that cross a KV block one by one in batch order (the same allocations in the same order), then admission as
        there. None, with nothing changed, where the step path could differ: a decode the budget would skip, or more
        KV blocks needed than the pool can give (a preemption: its order is the step path's).

        Prefill-first (ATOM), the arrays take only a decode step: nothing to prefill, nobody to admit (the caller
        checks the waiting queue is empty or the batch full), where that scheduler's steps are the step path's."""
        if not self._rows:
            if self.prefill_first and not all(r.prefilled for r in self.running):
                return None
            self._enliven()
        elif len(self.running) > len(self._comp):
            self._join_tail()
        if self.prefill_first and not self._pre.all():
            return None  # (a request to prefill: a prefill-only step; `settle` writes the rows back)
        cfg, pool, bs = self.config, self.pool, self.block_size
        running = self.running
        n = len(running)
        budget = cfg.max_prefill_tokens
        chunk_cap = cfg.chunked_prefill_size
        prefill_left = cfg.prefill_budget if cfg.prefill_budget is not None else budget
        pre, comp, held = self._pre, self._comp, self._held
        la = self.spec_k + 1
        prefills = (~pre).nonzero()[0].tolist()
        n_dec = n - len(prefills)
        last_dec = -1
        if n_dec:
            last_dec = n - 1
            while not pre[last_dec]:
                last_dec -= 1
        # the prefills in batch order, each with the budget the decodes and prefills before it left
        chunks: list[int] = []
        needs: list[tuple[int, int]] = []
        used = 0
        used_before_last = 0
        left = prefill_left
        for k, i in enumerate(prefills):
            r = running[i]
            computed = r.computed
            chunk = min(r.prompt_len + r.generated - computed, chunk_cap, budget - (i - k) * la - used, left)
            if chunk <= 0:
                chunks.append(-1)
                continue
            chunks.append(chunk)
            used += chunk
            left -= chunk
            if i < last_dec:
                used_before_last = used
            if computed + chunk > r.held * bs:
                needs.append((i, -(-(computed + chunk) // bs) - r.held))
        if n_dec and budget - (n_dec - 1) * la - used_before_last < la:
            return None  # a decode would be skipped for budget
        cross = (pre & (comp + la > held * bs)).nonzero()[0]
        if len(cross):
            need_d = -(-(comp[cross] + la) // bs) - held[cross]
            if needs:
                needs = sorted(needs + list(zip(cross.tolist(), need_d.tolist(), strict=True)))
            else:
                needs = list(zip(cross.tolist(), need_d.tolist(), strict=True))
        if needs and sum(e for _, e in needs) > pool.available():
            return None  # an allocation would fail: the step path preempts
        if needs:  # (the allocations one by one would take these blocks, in this order)
            gots = pool.allocate_each([e for _, e in needs])
            assert gots is not None
            for (i, _), got in zip(needs, gots, strict=True):
                r = running[i]
                r.grow(got)
                held[i] = r.held
        batch = Batch(decode_seqs=n_dec, decode_ctx=int(comp[pre].sum()) if n_dec else 0)
        prefill_tokens = 0
        prefill_attn = 0.0
        skipped = False
        rows: list[int] = []
        for i, chunk in zip(prefills, chunks, strict=True):
            r = running[i]
            if chunk < 0:
                r.chunk = -1
                skipped = True
                continue
            r.chunk = chunk
            rows.append(i)
            prefill_tokens += chunk
            prefill_attn += chunk * r.computed + chunk * (chunk + 1) / 2
        batch.prefill_tokens = prefill_tokens
        batch.prefill_attn = prefill_attn
        scheduled = [r for r in running if r.prefilled or r.chunk > 0] if skipped else running.copy()
        host_load = 0
        if not self.prefill_first:  # (prefill-first, a decode step admits nobody: the waiting queue went first)
            _, host_load = self._admit(batch, budget - n_dec * la - used, scheduled, whole_prompt=self.no_evict,
                                       prefill_left=left)
        added = len(running) - n
        if added:
            rows.extend(range(n, n + added))
            new = running[n:]
            self._comp = np.concatenate((comp, np.fromiter((r.computed for r in new), np.int64, added)))
            self._gen = np.concatenate((self._gen, np.fromiter((r.generated for r in new), np.int64, added)))
            self._maxt = np.concatenate((self._maxt, np.fromiter((r.max_tokens for r in new), np.int64, added)))
            self._held = np.concatenate((held, np.fromiter((r.held for r in new), np.int64, added)))
            self._pre = np.concatenate((pre, np.zeros(added, bool)))
            self._seg = np.concatenate((self._seg, np.full(added, -1, np.int64)))
            if self.sampler is not None:
                free = self._free_slots
                new_slots = [free.pop() if free else self._next_slot() for _ in range(added)]
                self._slot = np.concatenate((self._slot, np.array(new_slots, np.int64)))
        self._row_prefills = rows
        return scheduled, batch, host_load, True

    def _join_tail(self) -> None:
        """Rows for the running requests past the arrays' (adopted since the last schedule, :meth:`adopt`), in batch
        order: each decodes from the next step, as a request the step path finds running."""
        tail = self.running[len(self._comp):]
        k = len(tail)
        pre = np.fromiter((r.prefilled for r in tail), bool, k)
        self._comp = np.concatenate((self._comp, np.fromiter((r.computed for r in tail), np.int64, k)))
        self._gen = np.concatenate((self._gen, np.fromiter((r.generated for r in tail), np.int64, k)))
        self._maxt = np.concatenate((self._maxt, np.fromiter((r.max_tokens for r in tail), np.int64, k)))
        self._held = np.concatenate((self._held, np.fromiter((r.held for r in tail), np.int64, k)))
        self._pre = np.concatenate((self._pre, pre))
        self._seg = np.concatenate((self._seg, np.where(pre, len(self.step_ends), -1)))
        if self.sampler is not None:
            free = self._free_slots
            self._slot = np.concatenate((self._slot, np.array([free.pop() if free else self._next_slot()
                                                               for _ in range(k)], np.int64)))

    def _next_slot(self) -> int:
        self._slots += 1
        return self._slots - 1

    def _draws(self, left: np.ndarray, breaks: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """The verify draws of decodes in batch order (`left`: each one's tokens to its length), with a prefill's
        first token booked before the decode at each index of `breaks` (ascending; SGLang's count): the same stream
        positions in the same order as :meth:`~llmsweep.sim.acceptance.AcceptanceController.verify` one by one —
        runs without a clamp or a cut that moves the debt planned at once, the others drawn one by one. Returns
        (tokens drawn, tokens emitted after the cut), booked."""
        sampler = self.sampler
        assert sampler is not None
        m = len(left)
        drawn = np.empty(m, np.int64)
        out = np.empty(m, np.int64)
        cut_moves = sampler.counts_first_token  # (the debt counts emitted tokens: a cut changes the next draws)
        pos = bi = 0
        nb = len(breaks)
        while True:
            while bi < nb and breaks[bi] <= pos:
                sampler.first_token()
                bi += 1
            if pos >= m:
                break
            end = breaks[bi] if bi < nb else m
            t = sampler.plan(end - pos, 1)[:, 0]
            k = len(t)
            if k:
                lk = left[pos:pos + k]
                if cut_moves:
                    cut = (t > lk).nonzero()[0]
                    if len(cut):
                        k = int(cut[0])
                        t, lk = t[:k], lk[:k]
                if k:
                    drawn[pos:pos + k] = t
                    np.minimum(t, lk, out=out[pos:pos + k])
                    sampler.commit(k, int(t.sum()))
                    pos += k
                    continue
            drawn[pos], out[pos] = sampler.verify(int(left[pos]))
            pos += 1
        return drawn, out

    def _end_rows(self) -> list[SimRequest]:
        """:meth:`end_step` on the batch's arrays: every decode emits one token (its stamp deferred to a segment), the
        prefills and the decodes that reach their length are applied one by one in batch order, as the step path
        applies them; returns those that emitted (a first token or a last)."""
        now = self.now
        log = self.step_ends
        sampler = self.sampler
        if sampler is not None:
            self._tok_room(1)
        log.append(now)
        hi = len(log) - 1
        c = self.counters
        running = self.running
        pre, comp, gen, seg = self._pre, self._comp, self._gen, self._seg
        prefills = self._row_prefills
        self._row_prefills = []
        out: np.ndarray | None = None
        if sampler is None:
            n_dec = int(np.count_nonzero(pre))
            comp += pre
            gen += pre
        else:  # the draws in batch order, a finishing prefill's first token at its place
            dec = pre.nonzero()[0]
            breaks = []
            if sampler.counts_first_token:
                for i in prefills:
                    r = running[i]
                    if r.computed + r.chunk >= r.prompt_len + r.generated:
                        breaks.append(i)
                if breaks:
                    breaks = np.searchsorted(dec, breaks).tolist()
            drawn, out = self._draws(self._maxt[dec] - gen[dec], breaks)
            comp[dec] += out
            gen[dec] += out
            self._toks[hi - self._tok_base, self._slot[dec]] = out
            n_dec = int(out.sum())
            verify = len(dec)
            c.spec_verify_steps += verify
            c.spec_draft_tokens += verify * self.spec_k
            c.spec_accepted_tokens += int(drawn.sum()) - verify
        done = (pre & (gen >= self._maxt)).nonzero()[0].tolist()
        step_tok: dict[int, int] = {}
        if done and out is not None:  # (the tokens of the decodes that finish, for their last chunk)
            step_tok = dict(zip(done, out[np.searchsorted(dec, done)].tolist(), strict=True))
        events = sorted(done + prefills) if done and prefills else done or prefills
        emitted: list[SimRequest] = []
        gone: list[int] = []
        generated_total = n_dec
        prompt_computed = 0
        segments = self.segments
        assert segments is not None
        for i in events:
            r = running[i]
            if pre[i]:  # a decode that reached its length
                r.computed = int(comp[i])
                r.generated = int(gen[i])
                start = int(seg[i])
                if start < hi:
                    segments.append((r, start, hi, self._seg_tokens(int(self._slot[i]), start, hi)
                                     if sampler is not None else None))
                r.last_emitted = step_tok[i] if sampler is not None else 1
            else:
                prompt_computed += r.chunk
                if not self._apply_chunk(r):
                    continue
                if r.first_token_at is None:
                    r.first_token_at = now
                r.generated += 1
                generated_total += 1
                if r.generated < r.max_tokens:
                    pre[i] = True
                    comp[i] = r.computed
                    gen[i] = r.generated
                    seg[i] = hi + 1
                    r.last_emitted = 1
                    emitted.append(r)
                    continue
                r.last_emitted = 1
            r.finished_at = now
            c.requests_finished += 1
            self._release(r)
            gone.append(i)
            emitted.append(r)
        c.generation_tokens += generated_total
        c.computed_prompt_tokens += prompt_computed
        if gone:
            self._drop_rows(gone)
        self._scheduled = []
        return emitted

    def _drop_rows(self, gone: list[int]) -> None:
        """Remove finished rows (ascending indices) from the running batch and its arrays."""
        keep = np.ones(len(self._comp), bool)  # (requests adopted after the rows stay, unjoined: `_join_tail`)
        keep[gone] = False
        for i in reversed(gone):
            del self.running[i]
        self._comp = self._comp[keep]
        self._gen = self._gen[keep]
        self._maxt = self._maxt[keep]
        self._held = self._held[keep]
        self._pre = self._pre[keep]
        self._seg = self._seg[keep]
        if self.sampler is not None:
            self._free_slots.extend(self._slot[gone].tolist())
            self._slot = self._slot[keep]

    def _schedule_steps(self) -> tuple[list[SimRequest], Batch, int, bool]:
        """Schedule the step request by request (see the module doc): the scheduled requests, their batch, the tokens
        loaded from the CPU tier, and whether the waiting queue was tried (a step that preempted does not)."""
        cfg, pool, bs = self.config, self.pool, self.block_size
        if self._aborts:
            self._aborts = 0
            for r in self.running:
                if r.aborted:
                    self._release(r)
            self.running = [r for r in self.running if not r.aborted]
        budget = cfg.max_prefill_tokens
        chunk_cap = cfg.chunked_prefill_size
        # prompt tokens this step may take (`prefill_budget`; unset, the step budget alone bounds them: never binds)
        prefill_left = cfg.prefill_budget if cfg.prefill_budget is not None else budget
        lookahead = self.spec_k + 1
        preempted_before = self.counters.preemptions
        if self.sglang and len(self.running) * -(-lookahead // bs) > pool.available():
            # (a decode needs at most ceil(lookahead / block) new blocks: within that bound nothing is retracted)
            self._retract_decodes(lookahead)
        running = self.running
        scheduled: list[SimRequest] = []
        append = scheduled.append
        prefill_tokens = decode_seqs = decode_ctx = 0
        prefill_attn = 0.0
        host_load = 0
        prefilling = False
        if self.prefill_first:
            # ATOM's shape: unfinished prefills first, then waiting requests; a step that prefills does nothing else
            for r in running:
                computed = r.computed
                chunk = 0 if r.prefilled else min(r.prompt_len + r.generated - computed, chunk_cap, budget,
                                                  prefill_left)
                if chunk <= 0:  # (its whole prompt's KV was taken at admission: a chunk needs no block)
                    r.chunk = -1
                    continue
                r.chunk = chunk
                prefill_tokens += chunk
                prefill_attn += chunk * computed + chunk * (chunk + 1) / 2
                budget -= chunk
                prefill_left -= chunk
                append(r)
            batch = Batch(prefill_tokens=prefill_tokens, prefill_attn=prefill_attn)
            if self.counters.preemptions == preempted_before:  # (a step that retracted admits nobody, as below)
                budget, host_load = self._admit(batch, budget, scheduled, whole_prompt=True, prefill_left=prefill_left)
            prefilling = bool(scheduled)
        admit = True
        if not prefilling:
            i = 0
            n_running = len(running)
            while i < n_running:
                r = running[i]
                computed = r.computed
                if r.prefilled:
                    if budget < lookahead:
                        r.chunk = -1
                        i += 1
                        continue
                    chunk = 0
                    need_tokens = computed + lookahead
                else:
                    chunk = min(r.prompt_len + r.generated - computed, chunk_cap, budget, prefill_left)
                    if chunk <= 0:
                        r.chunk = -1
                        i += 1
                        continue
                    need_tokens = computed + chunk
                if need_tokens > r.held * bs:
                    need = -(-need_tokens // bs) - r.held
                    got = pool.allocate_array(need)
                    while got is None and len(running) - 1 > i:
                        self._preempt(running.pop())
                        got = pool.allocate_array(need)
                    n_running = len(running)
                    if got is None:
                        running.pop()
                        self._preempt(r)
                        break
                    r.grow(got)
                r.chunk = chunk
                if chunk:
                    prefill_tokens += chunk
                    prefill_attn += chunk * computed + chunk * (chunk + 1) / 2
                    budget -= chunk
                    prefill_left -= chunk
                else:
                    decode_seqs += 1
                    decode_ctx += computed
                    budget -= lookahead
                append(r)
                i += 1
            batch = Batch(prefill_tokens=prefill_tokens, prefill_attn=prefill_attn, decode_seqs=decode_seqs,
                          decode_ctx=decode_ctx)
            # a step that preempted admits nobody (vLLM V1 schedules WAITING only `if not preempted_reqs`; SGLang
            # retracts while forming a decode batch): a victim is not taken straight back in to recompute in the
            # same step. A preemption that left nothing to run (blocks held outside the batch, e.g. a decode
            # worker's reservations) admits anyway: the engine's empty step is followed at once by an admitting one,
            # it does not go idle. Prefill-first, the waiting queue was tried before the decodes.
            admit = self.counters.preemptions == preempted_before or not scheduled
            if admit and not self.prefill_first:
                budget, host_load = self._admit(batch, budget, scheduled, whole_prompt=self.no_evict,
                                                prefill_left=prefill_left)
        return scheduled, batch, host_load, admit

    def _admit(self, batch: Batch, budget: int, scheduled: list[SimRequest], *, whole_prompt: bool,
               prefill_left: int) -> tuple[int, int]:
        """Admit waiting requests FCFS into `batch` while it has running slots, budget (`prefill_left` of it for prompt
        tokens) and KV blocks (head-of-line: the first that does not fit stops admission); returns the budget left and
        the tokens loaded from the CPU tier. A request looks its prompt's block hashes up first; it takes blocks for
        its first chunk, or with `whole_prompt` for all of its remaining prompt (ATOM, TensorRT-LLM). No-evict
        (`no_evict`), the head waits until its whole length fits the blocks nobody has reserved
        (:meth:`spare_blocks`)."""
        cfg, pool, bs = self.config, self.pool, self.block_size
        waiting, running = self.waiting, self.running
        host_load = 0
        spare = self.spare_blocks() if self.no_evict and waiting and budget > 0 else 0
        while waiting and budget > 0 and prefill_left > 0 and len(running) < cfg.max_running_requests:
            r = waiting[0]
            if self.no_evict:
                whole = self.blocks_to_completion(r.prompt_len, r.max_tokens, 0)
                if whole > spare:
                    break
                spare -= whole
            target = r.prompt_len + r.generated
            limit = (r.prompt_len - 1) // bs
            cached_blocks, h = pool.lookup_array(r.block_hashes, limit, r.hint)
            g = len(cached_blocks)
            hit_tokens = (g + h) * bs
            chunk = min(target - hit_tokens, cfg.chunked_prefill_size, budget, prefill_left)
            pool.acquire(cached_blocks)
            need = -(-(target if whole_prompt else hit_tokens + chunk) // bs) - g
            got = pool.allocate_array(need)
            if got is None:
                pool.release(cached_blocks)
                break
            waiting.popleft()
            r.hint = None
            if h:
                pool.register_many(got[:h], r.block_hashes[g:g + h])
                host_load += h * bs
            r.blocks = np.concatenate((cached_blocks, got)) if g else got
            r.computed = hit_tokens
            c = self.counters
            if r.cached_tokens < 0:
                r.cached_tokens = hit_tokens
                r.host_cached_tokens = h * bs
                c.prompt_tokens += r.prompt_len
                c.prefix_query_tokens += r.prompt_len
                c.device_hit_tokens += g * bs
                c.host_hit_tokens += h * bs
            r.chunk = chunk
            batch.prefill_tokens += chunk
            batch.prefill_attn += chunk * hit_tokens + chunk * (chunk + 1) / 2
            batch.new_seqs += 1
            budget -= chunk
            prefill_left -= chunk
            running.append(r)
            scheduled.append(r)
        return budget, host_load

    def blocks_to_completion(self, prompt_len: int, max_tokens: int, held: int) -> int:
        """KV blocks a request of `prompt_len` prompt tokens asking for `max_tokens` still needs to reach its full
        length (plus a verify step's drafts) when it holds `held`: TensorRT-LLM's remaining blocks to completion,
        with no credit for prefix blocks it will share (the engine gives none either)."""
        return max(0, -(-(prompt_len + max(1, max_tokens) + self.spec_k) // self.block_size) - held)

    def spare_blocks(self) -> int:
        """Blocks an admission may reserve (no-evict): those an allocation may take now (free, or cached and held by
        nobody) less what every running request still needs to its completion. Decodes take from both alike, so it
        changes only as requests are admitted or finish."""
        return self.pool.available() - sum(self.blocks_to_completion(r.prompt_len, r.max_tokens, r.held)
                                           for r in self.running)

    def _one_step(self, dt: float) -> _Plan | None:
        """A decode-only step of many requests as a block of one: its draws in one pass, its tokens applied and
        stamped as a block's (no Python per request beyond one addition). Its KV was taken while it was scheduled;
        requests that reach their length finish at its end (`finish`), the draws then taken request by request as
        the step path takes them. None when a draw meets a clamp (the step path takes it)."""
        scheduled = self._scheduled
        n = len(scheduled)
        ends = np.array([self._step_end])
        remaining = np.fromiter((r.max_tokens - r.generated for r in scheduled), np.int64, n)
        sampler = self.sampler
        if sampler is None:
            return _Plan(1, ends, dt, None, [0] * n, 0, bool(remaining.min() <= 1))
        row = sampler.plan(1, n)
        if not len(row):
            return None
        if not (row[0] >= remaining).any():
            return _Plan(1, ends, dt, row, [0] * n, 0)
        emitted: list[int] = []
        accepted = 0
        for k in remaining.tolist():
            drawn, out = sampler.verify(k)
            emitted.append(out)
            accepted += drawn - 1
        return _Plan(1, ends, dt, np.array([emitted], np.int64), [0] * n, 0, True, (n, accepted))

    def _plan_block(self, batch: Batch, now: float, dt: float, horizon: float, finish: bool) -> _Plan | None:
        """The longest run of decode steps, from the one just scheduled, that keeps the batch's composition (see the
        module doc) — with `finish`, up to and including the step in which a request reaches its length; extra KV
        blocks it needs are taken now. None when that run is a single step."""
        scheduled = self._scheduled
        n = len(scheduled)
        lookahead = self.spec_k + 1
        remaining: list[int] | np.ndarray
        if self._rows:  # (every running request decodes in this step: the arrays are the batch)
            remaining = self._maxt - self._gen
            least = int(remaining.min())
        else:
            remaining = [r.max_tokens - r.generated for r in scheduled]
            least = min(remaining)
        sampler = self.sampler
        # each step emits >= 1 token per request; the step in which one reaches its length stays out of the block
        cap = least - 1
        expected = cap / sampler.acceptance_length if sampler is not None else cap
        if horizon != _INF:
            # step times never fall while the context grows: at most this many steps end before the horizon
            before = (horizon - now) / dt
            cap = min(cap, int(before) + 1 + finish)
            expected = min(expected, before + finish)
        if expected < (MIN_BLOCK if n < MANY else 2.0):  # a block this short costs more than its steps one by one
            return None
        if sampler is not None:  # draws emit ~AL tokens each: plan about as many steps as are likely needed
            cap = min(cap, int(expected * PLAN_MARGIN) + 8)
        cap = min(cap, BLOCK_ELEMENTS // n)
        if cap < 2:
            return None
        tokens: np.ndarray | None = None
        if sampler is not None:
            tokens = sampler.plan(cap, n)
            steps = len(tokens)
            if steps < 2:
                return None
            done = tokens.cumsum(axis=0)
            reach = np.asarray((done >= np.array(remaining)).any(axis=1))
            last = False
            if reach[-1]:  # the row in which a request reaches its length: the block's last step, or outside it
                steps = int(reach.argmax()) + finish
                last = finish
                if steps < 2:
                    return None
            grown = done.sum(axis=1)  # tokens emitted by the end of each step
            ctx = np.empty(steps, np.int64)
            ctx[0] = 0
            ctx[1:] = grown[:steps - 1]
            ctx += batch.decode_ctx
        else:
            last = finish and cap == least - 1  # the step after these finishes a request
            steps = cap + last
            ctx = np.arange(batch.decode_ctx, batch.decode_ctx + n * steps, n, dtype=np.int64)
        times = decode_step_times(self.timer, batch, ctx)
        times[0] = now + dt
        ends = times.cumsum()  # ((now + t0) + t1) + ...: the step path's sums, bit for bit
        if ends[steps - 1] >= horizon:
            # with `finish` the step in which the horizon falls closes the block (the caller's event there only
            # queues a request, for the step after); else the block ends before it
            cut = int(ends.searchsorted(horizon, "left")) + finish
            if cut < steps:
                steps = cut
                last = False
            if steps < 2:
                return None
        # KV: every decode must find its blocks in every step of the block (the last step needs the most)
        extra = self._extra_blocks(None if tokens is None else done[steps - 2], steps, lookahead)
        total = int(extra.sum()) if isinstance(extra, np.ndarray) else sum(extra)
        if total > self.pool.available():
            steps = self._kv_steps(tokens, steps, n, lookahead)
            last = False
            if steps < 2:
                return None
            extra = self._extra_blocks(None if tokens is None else done[steps - 2], steps, lookahead)
            total = int(extra.sum()) if isinstance(extra, np.ndarray) else sum(extra)
        if total:
            got = self.pool.allocate_array(total)
            assert got is not None
            at = 0
            if self._rows:
                held = self._held
                for i in np.flatnonzero(extra).tolist():
                    e = int(extra[i])
                    r = scheduled[i]
                    r.grow(got[at:at + e])
                    held[i] = r.held
                    at += e
            else:
                taken = got.tolist()
                for r, e in zip(scheduled, extra, strict=True):
                    if e:
                        end = r.held + e
                        if e == 1 and end <= len(r.buf) and r.owned:  # (`grow`'s usual case, inline)
                            r.buf[r.held] = taken[at]
                            r.held = end
                        else:
                            r.grow(got[at:at + e])
                        at += e
        ends = ends[:steps]
        booked: tuple[int, int] | None = None
        if tokens is not None:
            tokens = tokens[:steps]
            if last:  # the steps before as planned, then the last one drawn request by request (cuts move the debt)
                assert sampler is not None
                body = int(done[steps - 2].sum())
                sampler.commit((steps - 1) * n, body)
                accepted = body - (steps - 1) * n
                tokens = tokens.copy()
                if self._rows:  # (the same draws, runs of them at once)
                    drawn_row, tokens[-1] = self._draws(np.asarray(remaining) - done[steps - 2], [])
                    accepted += int(drawn_row.sum()) - n
                else:
                    left = (np.array(remaining) - done[steps - 2]).tolist()
                    row = []
                    for k in left:
                        drawn, emitted = sampler.verify(k)
                        row.append(emitted)
                        accepted += drawn - 1
                    tokens[-1] = row
                booked = (steps * n, accepted)
        return _Plan(steps, ends, float(ends[-1] - now), tokens, extra, total, last, booked)

    def _extra_blocks(self, grown: np.ndarray | None, steps: int, lookahead: int) -> list[int] | np.ndarray:
        """Blocks each scheduled request needs beyond those it holds for the last of `steps` steps, given the tokens
        it emitted before that step (`grown`; None: one per step). An array when the batch is in arrays."""
        bs = self.block_size
        if self._rows:
            g = steps - 1 if grown is None else grown
            need: np.ndarray = np.maximum(-(-(self._comp + g + lookahead) // bs) - self._held, 0)
            return need
        last = [steps - 1 + lookahead] * len(self._scheduled) if grown is None else (grown + lookahead).tolist()
        return [max(0, -(-(r.computed + g) // bs) - r.held) for r, g in zip(self._scheduled, last, strict=True)]

    def _kv_steps(self, tokens: np.ndarray | None, steps: int, n: int, lookahead: int) -> int:
        """Steps (from the first) whose KV blocks fit in the pool's free or evictable blocks (near a full pool)."""
        if self._rows:
            computed, held = self._comp, self._held
        else:
            computed = np.fromiter((r.computed for r in self._scheduled), np.int64, n)
            held = np.fromiter((r.held for r in self._scheduled), np.int64, n)
        grown = np.zeros((steps, n), np.int64)
        if tokens is not None:
            np.cumsum(tokens[:steps - 1], axis=0, out=grown[1:])
        else:
            grown += np.arange(steps, dtype=np.int64)[:, None]
        need = np.maximum(-(-(computed + grown + lookahead) // self.block_size) - held, 0).sum(axis=1)
        return int(np.searchsorted(need, self.pool.available(), "right"))

    def end_step(self) -> list[SimRequest]:
        """Apply the scheduled step at its end time; returns requests that emitted tokens (`last_emitted` > 0)."""
        assert self._in_step, "begin_step() must come first"
        self._in_step = False
        now = self.now = self._step_end
        self.last_block = None
        if self._plan is not None:
            return self._end_block(self._plan)
        if self._rows:
            return self._end_rows()
        c = self.counters
        sampler = self.sampler
        emitted: list[SimRequest] = []
        append = emitted.append
        any_done = False
        verify = accepted = generated_total = prompt_computed = 0
        for r in self._scheduled:
            if r.aborted:
                r.last_emitted = 0
                self._release(r)
                any_done = True
                continue
            chunk = r.chunk
            if chunk:
                prompt_computed += chunk
                if not self._apply_chunk(r):
                    continue
                n = 1
                if sampler is not None:
                    sampler.first_token()
                if r.first_token_at is None:
                    r.first_token_at = now
            else:
                if sampler is not None:
                    drawn, n = sampler.verify(r.max_tokens - r.generated)
                    verify += 1
                    accepted += drawn - 1
                else:
                    n = 1
                r.computed += n
            gen = r.generated = r.generated + n
            r.last_emitted = n
            generated_total += n
            if gen >= r.max_tokens:
                r.finished_at = now
                c.requests_finished += 1
                self._release(r)
                any_done = True
            append(r)
        c.generation_tokens += generated_total
        c.computed_prompt_tokens += prompt_computed
        if verify:
            c.spec_verify_steps += verify
            c.spec_draft_tokens += verify * self.spec_k
            c.spec_accepted_tokens += accepted
        if any_done:  # (`done` inlined: this runs over every running request)
            self.running = [r for r in self.running
                            if r.finished_at is None and not r.aborted and r.error is None]
        self._scheduled = []
        return emitted

    def _apply_chunk(self, r: SimRequest) -> bool:
        """At its step's end, `r`'s scheduled prefill chunk: its tokens computed, the prompt blocks it completed
        registered in the prefix cache; True when that finished its prompt (and any outputs it recomputes: it
        decodes from now on), else its step emitted nothing. One home for the step path and the batch in arrays."""
        before = r.computed
        r.computed = after = before + r.chunk
        bs = self.block_size
        hashes = r.block_hashes
        lo = before // bs
        hi = min(after // bs, len(hashes))
        if hi > lo:
            self.pool.register_many(r.blocks[lo:hi], hashes[lo:hi])
        if after < r.prompt_len + r.generated:
            r.last_emitted = 0
            return False
        r.prefilled = True
        return True

    def _end_block(self, plan: _Plan) -> list[SimRequest]:
        """Apply a planned block: no request starts in it, every decode emits in every step; requests finish only in
        its last step (`plan.finishes`)."""
        self._plan = None
        scheduled = self._scheduled
        self._scheduled = []
        c = self.counters
        steps, n = plan.steps, len(scheduled)
        if self._rows:
            return self._end_block_rows(plan, scheduled)
        if plan.tokens is None:
            per_step = [1] * steps
            rows = [per_step] * n
            totals = [steps] * n
            emitted = steps * n
        else:
            cols = plan.tokens.T
            rows = cols.tolist()
            totals = cols.sum(axis=1).tolist()
            emitted = int(sum(totals))
            self._book_draws(plan, steps * n, emitted)
        for r, tot in zip(scheduled, totals, strict=True):
            r.computed += tot
            r.generated += tot
            r.last_emitted = tot
        c.generation_tokens += emitted
        if plan.finishes:  # as the step path's last step: finished requests release their blocks in batch order
            now = self.now
            for r in scheduled:
                if r.generated >= r.max_tokens:
                    r.finished_at = now
                    c.requests_finished += 1
                    self._release(r)
            self.running = [r for r in self.running
                            if r.finished_at is None and not r.aborted and r.error is None]
        self.last_block = Block(plan.ends.tolist(), rows, plan.finishes)
        return scheduled

    def _book_draws(self, plan: _Plan, draws: int, emitted: int) -> None:
        """Count a speculative block's verify draws (`draws`, one per request and step) and accepted drafts: the
        sampler's debt committed for the `emitted` tokens, unless the plan booked them already (a last step drawn
        request by request). One home for the block request by request and in arrays."""
        if plan.booked is None:
            assert self.sampler is not None
            self.sampler.commit(draws, emitted)
            accepted = emitted - draws
        else:
            draws, accepted = plan.booked
        c = self.counters
        c.spec_verify_steps += draws
        c.spec_draft_tokens += draws * self.spec_k
        c.spec_accepted_tokens += accepted

    def _end_block_rows(self, plan: _Plan, scheduled: list[SimRequest]) -> list[SimRequest]:
        """:meth:`_end_block` on the batch's arrays (one token per request and step): the steps are logged for the
        deferred stamps; returns the requests that reach their length in the last step, finished in batch order, and
        :attr:`last_block` their tokens in the block's steps (their stamps before it deferred)."""
        c = self.counters
        steps = plan.steps
        log = self.step_ends
        toks = plan.tokens
        totals: np.ndarray | None = None
        if toks is None:
            self._comp += steps
            self._gen += steps
            c.generation_tokens += steps * len(scheduled)
        else:
            totals = toks.sum(axis=0)
            self._comp += totals
            self._gen += totals
            emitted_total = int(totals.sum())
            self._book_draws(plan, steps * len(scheduled), emitted_total)
            c.generation_tokens += emitted_total
            self._tok_room(steps)
            at = len(log) - self._tok_base
            self._toks[at:at + steps, self._slot] = toks
        log.extend(plan.ends.tolist())
        if not plan.finishes:
            self.last_block = Block(log[len(log) - steps:], [], False)
            return []
        hi = len(log) - steps  # the finishing requests' stamps before the block are deferred, the block's returned
        segments = self.segments
        assert segments is not None
        now = self.now
        comp, gen, seg = self._comp, self._gen, self._seg
        gone = (gen >= self._maxt).nonzero()[0].tolist()
        emitted: list[SimRequest] = []
        for i in gone:
            r = scheduled[i]
            r.computed = int(comp[i])
            r.generated = int(gen[i])
            start = int(seg[i])
            if start < hi:
                segments.append((r, start, hi, None if totals is None else self._seg_tokens(int(self._slot[i]),
                                                                                            start, hi)))
            r.last_emitted = steps if totals is None else int(totals[i])
            r.finished_at = now
            c.requests_finished += 1
            self._release(r)
            emitted.append(r)
        rows = [[1] * steps] * len(emitted) if toks is None else [toks[:, i].tolist() for i in gone]
        self._drop_rows(gone)
        self.last_block = Block(log[len(log) - steps:], rows, True)
        return emitted

    # -- internals --------------------------------------------------------------------------------------------------
    def _release(self, r: SimRequest) -> None:
        if r.held:
            blocks = r.blocks
            self.pool.release(blocks)
            r.released = blocks
            r.blocks = _NO_BLOCKS

    def _preempt(self, r: SimRequest, *, to_tail: bool = False) -> None:
        """Recompute preemption: free everything, requeue at the head of the waiting queue (vLLM), or at its tail
        (`to_tail`: SGLang's retraction)."""
        self._release(r)
        r.computed = 0
        r.chunk = 0
        r.prefilled = False
        r.preemptions += 1
        self.counters.preemptions += 1
        if to_tail:
            self.waiting.append(r)
        else:
            self.waiting.appendleft(r)

    def _retract_decodes(self, lookahead: int) -> None:
        """SGLang's `retract_decode`: when the decodes' next step needs more KV blocks than the pool can give (free
        or evictable), retract decodes until the rest fit, keeping at least one. Order: without speculative decoding
        the request with the fewest output tokens goes first (ties: the longer prompt first, then the later in the
        batch); with it, the batch from its end (the most recently admitted first). A retracted request releases its
        blocks (its prompt's stay cached, evictable), joins the tail of the waiting queue, and later recomputes its
        prompt and outputs; each counts as a preemption (`sglang:num_retracted_requests`)."""
        bs = self.block_size
        need = {r: max(0, -(-(r.computed + lookahead) // bs) - r.held) for r in self.running if r.prefilled}
        total = sum(need.values())
        if total <= self.pool.available():
            return
        keep = list(need)  # batch order; retracted from the end
        if self.sampler is None:
            keep.sort(key=lambda r: (r.generated, -r.prompt_len), reverse=True)
        retracted = set()
        while total > self.pool.available() and len(keep) > 1:
            victim = keep.pop()
            total -= need[victim]
            self._preempt(victim, to_tail=True)  # its blocks freed before the next check, as SGLang frees them
            retracted.add(victim)
        self.running = [r for r in self.running if r not in retracted]

    # -- a read of the state inside a block ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def as_of(self, t: float) -> Iterator[None]:
        """Inside the block in flight, the readable state (counters, KV usage) as the step path shows it at time `t`:
        the steps that ended before `t` applied, the one in flight begun (its KV taken, counted in `steps` and
        `busy_seconds`), the rest not. A no-op outside a block. Restored on exit: a metrics scrape or a power probe
        reads through it, so a block runs on across scrapes. (:meth:`enter_as_of` and :meth:`exit_as_of` are the
        same as a pair of calls, for a caller that reads once per virtual second.)"""
        saved = self.enter_as_of(t)
        try:
            yield
        finally:
            if saved is not None:
                self.exit_as_of(saved)

    def enter_as_of(self, t: float) -> tuple[int, float, int, int, int, int] | None:
        """:meth:`as_of`'s entry: shows the state as of `t` and returns what :meth:`exit_as_of` restores, or None
        (nothing to restore) outside a block."""
        plan = self._plan
        if plan is None or not self._in_step:
            return None
        ends = plan.ends
        steps = plan.steps
        ended = int(ends.searchsorted(t, "left"))  # a step ending at `t` is applied after the read
        begun = ended + 1 if ended < steps else steps
        c = self.counters
        saved = (c.steps, c.busy_seconds, c.generation_tokens, c.spec_verify_steps, c.spec_draft_tokens,
                 c.spec_accepted_tokens)
        c.steps -= steps - begun
        c.busy_seconds -= ends.item(-1) - ends.item(begun - 1)
        tokens = plan.tokens
        grown: list[int] | np.ndarray | None = None
        """Tokens each request emitted in the steps before the one in flight (with speculative decoding)."""
        if tokens is None:
            if ended:
                c.generation_tokens += ended * len(self._scheduled)
        elif ended:
            summed = tokens[:ended].sum(axis=0)
            done: list[int] | np.ndarray = summed
            if self._rows:
                emitted = int(summed.sum())
            else:  # (a few requests: summed as ints, which `_blocks_through` reads too)
                done = summed.tolist()
                emitted = sum(done)
            draws = ended * len(self._scheduled)
            c.generation_tokens += emitted
            c.spec_verify_steps += draws
            c.spec_draft_tokens += draws * self.spec_k
            c.spec_accepted_tokens += emitted - draws
            if ended == begun - 1:
                grown = done
        total = plan.extra_total  # (none: every request's extra is 0, and so are those it has taken)
        self._unbegun_blocks = total - self._blocks_through(plan, begun, grown) if total else 0
        return saved

    def exit_as_of(self, saved: tuple[int, float, int, int, int, int]) -> None:
        """:meth:`as_of`'s exit: the state :meth:`enter_as_of` showed back to the block's."""
        c = self.counters
        (c.steps, c.busy_seconds, c.generation_tokens, c.spec_verify_steps, c.spec_draft_tokens,
         c.spec_accepted_tokens) = saved
        self._unbegun_blocks = 0

    def _blocks_through(self, plan: _Plan, begun: int, grown: list[int] | np.ndarray | None = None) -> int:
        """KV blocks of the plan's extra ones that its first `begun` steps need (what the step path has taken).
        `grown`: the tokens each request emitted in the steps before the `begun`th, where the caller summed them."""
        bs, lookahead = self.block_size, self.spec_k + 1
        tokens = plan.tokens
        if self._rows:
            e = np.asarray(plan.extra)
            g: int | np.ndarray = begun - 1 if tokens is None else (
                grown if isinstance(grown, np.ndarray) else tokens[:begun - 1].sum(axis=0))
            return int(np.minimum(e, np.maximum(-(-(self._comp + g + lookahead) // bs) - (self._held - e),
                                                0)).sum())
        if tokens is None or begun == 1:  # each request grew by a token a step, or by none yet
            ahead = begun - 1 + lookahead + bs - 1
            total = 0
            for r, e in zip(self._scheduled, plan.extra, strict=True):
                if e:  # (a request with no extra blocks takes none of them)
                    need = (r.computed + ahead) // bs - r.held + e  # ceil((computed + grown + lookahead) / bs)
                    if need > 0:
                        total += need if need < e else e
            return total
        if grown is None:
            grown = tokens[:begun - 1].sum(axis=0).tolist()
        ahead = lookahead + bs - 1
        total = 0
        for r, g, e in zip(self._scheduled, grown, plan.extra, strict=True):
            if e:
                need = (r.computed + g + ahead) // bs - r.held + e
                if need > 0:
                    total += need if need < e else e
        return total

    # -- gauges -----------------------------------------------------------------------------------------------------
    def used_blocks(self) -> int:
        """KV blocks held by requests (inside :meth:`as_of`: as of its time)."""
        return self.pool.used_blocks() - self._unbegun_blocks

    def kv_usage(self) -> float:
        return self.used_blocks() / self.num_blocks

    def used_tokens(self) -> int:
        return self.used_blocks() * self.block_size

    def host_used_tokens(self) -> int:
        return len(self.pool.host) * self.block_size
