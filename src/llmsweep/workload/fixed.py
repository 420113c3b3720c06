"""Fixed-length workload: exact input/output lengths, the InferenceX `fixed-seq-len` scenario.

Conventions (InferenceX `benchmark_serving.py`, see research/inferencex-core-spec §4.5):
* input and output lengths each uniform in `[ratio·L, L]` (`--random-range-ratio`; 0.8 when a Job drives it, 1.0
  standalone), `ignore_eos` and `max_tokens` = the drawn output length;
* `/v1/completions` gets token ids (no decode→re-encode drift); chat gets text whose length is verified by
  re-encoding and adjusted until exact, with the chat-template overhead subtracted when `use_chat_template`;
* `num_warmups` requests marked `phase="warmup"` come first.

Prompt *i* is a pure function of `(seed, i)`, so any worker process can build any prompt, and every prompt starts
with a marker that encodes its index: no two prompts share even one leading token, so the server's prefix cache can
never turn one prompt into a hit for another. Several client processes split the sequence with `bind_worker`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.errors import ConfigError, DatasetError
from llmsweep.workload.base import (
    Api,
    BlockRun,
    Deferred,
    LaneProgram,
    MessageShape,
    Phase,
    RequestIdentity,
    RequestSpec,
    Send,
    ShapedMessage,
    TokenRun,
    Workload,
)
from llmsweep.workload.seeded import bounded_pairs
from llmsweep.workload.tokenizer import Tokenizer, WordTokenizer, chat_overhead, get_tokenizer

PREPARE_BUDGET_BYTES = 256 * 2**20
"""`prepare` builds every prompt of a worker's share up front when they fit this estimate; larger runs stay lazy."""
LENGTHS_CHUNK = 1024
"""Prompts whose lengths `lengths` draws at once (`seeded.bounded_pairs`: ~1 µs a prompt, against ~20 µs for a
generator per prompt)."""
MARKER_WORDS = 3
"""Leading words that encode the prompt index (a bijection of the index, so markers never collide)."""

_MIX = 0x9E3779B97F4A7C15  # odd multiplier: index → marker code is a bijection modulo any power of the vocabulary


def _coprime_multiplier(vocab: int) -> int:
    """An odd multiplier coprime with `vocab`, so `index → index·m mod vocab^k` is a bijection."""
    m = _MIX
    while math.gcd(m, vocab) != 1:
        m += 2
    return m


class FixedLengthConfig(BaseModel):
    """What a fixed-length run sends. Picklable; every client worker rebuilds the workload from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["fixed"] = "fixed"
    isl: int = Field(ge=1, description="Input sequence length in tokens (the upper end when range_ratio < 1).")
    osl: int = Field(ge=1, description="Output sequence length in tokens (max_tokens; ignore_eos keeps it exact).")
    api: Api = Field(default="completions", description="'completions' sends token ids; 'chat' sends text.")
    num_prompts: int | None = Field(
        default=None, ge=1, description="Profiling requests; None = open-ended (for duration-bounded runs)."
    )
    num_warmups: int = Field(default=0, ge=0, description="Requests marked phase=warmup sent before profiling.")
    range_ratio: float = Field(
        default=1.0, gt=0.0, le=1.0, description="Lengths uniform in [ratio·L, L] (InferenceX --random-range-ratio)."
    )
    seed: int = Field(default=0, description="Seed of lengths and prompt text.")
    tokenizer: str | None = Field(
        default=None, description="Hugging Face tokenizer directory or hub id that prompt lengths are counted in "
        "(default: the built-in word tokenizer: one token per word, not the model's tokens)."
    )
    use_chat_template: bool = Field(
        default=False, description="Count the chat template in the input length (InferenceX --use-chat-template)."
    )
    ignore_eos: bool = True
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Extra JSON fields merged into each body.")

    @model_validator(mode="after")
    def _template_fits(self) -> FixedLengthConfig:
        if self.use_chat_template and self.isl < 32:
            raise ValueError("use_chat_template needs isl >= 32 so the template overhead leaves room for content")
        return self

    @property
    def total_requests(self) -> int | None:
        return None if self.num_prompts is None else self.num_warmups + self.num_prompts


class FixedLengthWorkload(Workload):
    """Single-request sessions pulled from one shared, deterministic prompt sequence across lanes."""

    name = "fixed"

    def __init__(self, config: FixedLengthConfig, *, tokenizer: Tokenizer | None = None) -> None:
        self.config = config
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer(config.tokenizer)
        fillers = self.tokenizer.filler_words()
        self._words = np.array([w for w, _ in fillers], dtype=object)
        self._ids = np.array([i for _, i in fillers], dtype=np.int64)
        self._overhead = chat_overhead(self.tokenizer) if config.use_chat_template else 0
        if config.use_chat_template and (low := self._lowest_isl()) <= self._overhead:
            spread = f" (the least of [{low}, {config.isl}], isl × range_ratio)" if low < config.isl else ""
            raise ConfigError(
                f"fixed-length prompts of {low} tokens{spread} cannot hold the chat template of tokenizer"
                f" {self.tokenizer.name!r}, which takes {self._overhead} tokens before any content",
                fix=f"raise isl so that isl × range_ratio is at least {self._overhead + 1}, or turn"
                " use_chat_template off",
            )
        self._worker, self._workers = 0, 1
        self._next = 0  # how many prompts of this worker's share the lanes have taken
        self._lock = threading.Lock()
        self._built: dict[int, Any] = {}  # index -> prompt ids or messages, filled by `prepare`
        self._chunks: dict[int, list[tuple[int, int] | None]] = {}
        """Prompts' lengths by chunk of `LENGTHS_CHUNK` indices (`_lengths_from`): the chunk last drawn and, if held,
        the chunk just below it by index, which the lanes, taking indices in order, may still read; any other is
        dropped when a chunk is drawn and drawn again if it is read (the same values), so an open-ended run holds at
        most two chunks, not one per 1,024 prompts sent."""
        self._bulk = True
        """Whether `seeded.bounded_pairs` gives this numpy's draws (checked once a chunk)."""

    # -- the sequence ---------------------------------------------------------------------------------------------

    def _lowest_isl(self) -> int:
        """The shortest input `lengths` may draw."""
        cfg = self.config
        return cfg.isl if cfg.range_ratio >= 1.0 else max(1, int(cfg.isl * cfg.range_ratio))

    def lengths(self, index: int) -> tuple[int, int]:
        """(input, output) length of prompt `index`: uniform integers in [ratio·L, L], seeded by (seed, index)
        (:meth:`_drawn`; read from :meth:`_lengths_from`'s chunks of many prompts at once, the same values)."""
        cfg = self.config
        if cfg.range_ratio >= 1.0:
            return cfg.isl, cfg.osl
        chunk = self._chunks.get(index // LENGTHS_CHUNK)
        if chunk is None:
            chunk = self._lengths_from(index - index % LENGTHS_CHUNK)
        pair = chunk[index % LENGTHS_CHUNK]
        return pair if pair is not None else self._drawn(index)

    def _ranges(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The [low, high) ranges of a prompt's input and output lengths."""
        cfg = self.config
        return (self._lowest_isl(), cfg.isl + 1), (max(1, int(cfg.osl * cfg.range_ratio)), cfg.osl + 1)

    def _drawn(self, index: int) -> tuple[int, int]:
        """Prompt `index`'s lengths from its own generator: what defines them."""
        rng = np.random.default_rng([self.config.seed & 0xFFFFFFFF, index, 1])
        isl_range, osl_range = self._ranges()
        return int(rng.integers(*isl_range)), int(rng.integers(*osl_range))

    def _lengths_from(self, first: int) -> list[tuple[int, int] | None]:
        """The lengths of the `LENGTHS_CHUNK` prompts from `first` (fewer past the sequence's end), each as
        :meth:`_drawn` gives it, without a generator per prompt (`seeded.bounded_pairs`; None where it leaves the
        prompt to its generator). The chunk's first known prompt is checked against its generator: if this numpy
        drew otherwise, every prompt is drawn from its own."""
        total = self.config.total_requests
        n = LENGTHS_CHUNK if total is None else max(1, min(LENGTHS_CHUNK, total - first))
        isl_range, osl_range = self._ranges()
        pairs = None if not self._bulk else bounded_pairs(self.config.seed & 0xFFFFFFFF, first, n, 1, isl_range,
                                                          osl_range)
        chunk: list[tuple[int, int] | None] = [None] * LENGTHS_CHUNK
        if pairs is not None:
            isls, osls, known = pairs
            for k, (isl, osl, ok) in enumerate(zip(isls, osls, known, strict=True)):
                if ok:
                    chunk[k] = (isl, osl)
            probe = next((k for k, pair in enumerate(chunk) if pair is not None), None)
            if probe is not None and chunk[probe] != self._drawn(first + probe):
                self._bulk = False
                chunk = [None] * LENGTHS_CHUNK
        key = first // LENGTHS_CHUNK
        self._chunks = {k: c for k, c in self._chunks.items() if k == key - 1}
        self._chunks[key] = chunk
        return chunk

    def phase(self, index: int) -> Phase:
        return "warmup" if index < self.config.num_warmups else "profiling"

    def request(self, index: int, *, lane: int = 0) -> RequestSpec:
        """The request at position `index` of the sequence (warmups first). Text is built on first read."""
        cfg = self.config
        isl, osl = self.lengths(index)
        identity = RequestIdentity(
            lane=lane, phase=self.phase(index), session=f"fixed-{index}", request_index=index
        )
        common: dict[str, Any] = {
            "max_tokens": osl,
            "ignore_eos": cfg.ignore_eos,
            "input_tokens": isl,
            "theoretical_cached_tokens": 0,
            "identity": identity,
            "extra_body": dict(cfg.extra_body),
        }
        if cfg.api == "completions":
            shape = None if cfg.use_chat_template else self._shape(index, isl)  # ids without a template: its runs
            return RequestSpec(api="completions", prompt=Deferred(lambda: self.prompt_ids(index, isl)), shape=shape,
                               **common)
        return RequestSpec(api="chat", messages=Deferred(lambda: self.messages(index, isl)),
                           shape=self._shape(index, isl), **common)

    def _shape(self, index: int, isl: int) -> tuple[MessageShape, ...] | None:
        """The prompt as token runs (`MessageShape`), with the built-in tokenizer only (one token per word, so a chat
        content is exactly its words, at the first try of `_exact`): the marker's words, then the prompt's own
        random words — a source of their own, (seed, length) and the index, as no other prompt shares them. (A
        completions prompt without a template is the same `isl` tokens, `_choices`, as ids.)"""
        if not isinstance(self.tokenizer, WordTokenizer):
            return None
        n = max(1, isl - self._overhead)
        seed = self.config.seed
        runs: list[TokenRun] = list(self._words[self._marker(index, n)].tolist())
        if n > len(runs):
            runs.append(BlockRun(f"fixed|{seed}|{n}", (index,), n - len(runs), n - len(runs)))
        return (ShapedMessage(("fixed", seed, n, index), "user", tuple(runs)),)

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        while (index := self._take()) is not None:
            yield self._program(index, lane)

    def bind_worker(self, worker: int, workers: int) -> None:
        """Take only worker `worker`'s share of `workers`: within each phase, its positions worker, worker+workers, …

        Each phase is strided on its own (warm-ups `w, w+n, …`, then prompts `W+w, W+w+n, …`), not the whole
        sequence, so worker w holds exactly ⌈(W−w)/n⌉ warm-ups and ⌈(P−w)/n⌉ prompts: the even split the client
        gives each worker as its warm-up and request budgets. The workers together then send the single-worker
        sequence, every prompt once, with the same phase labels. Call it before the first session.
        """
        if workers < 1 or not 0 <= worker < workers:
            raise ValueError(f"worker {worker} of {workers}: need workers >= 1 and 0 <= worker < workers")
        with self._lock:
            self._worker, self._workers, self._next = worker, workers, 0
            self._built.clear()

    def prepare(self) -> None:
        """Build this worker's whole share of prompts now when the run has a request count and they fit
        `PREPARE_BUDGET_BYTES`: a chat prompt is re-encoded until its length is exact, milliseconds each, which in
        the event loop would delay other lanes' sends and chunk stamps (seen at concurrency 128 as ~0.1 s lag)."""
        total = self.config.total_requests
        if total is None:
            return
        indices = []
        with self._lock:
            k = 0
            while (index := self._index(k)) is not None:
                indices.append(index)
                k += 1
        per_token = 8 if self.config.api == "completions" else 6  # a Python int in a tuple; ~6 characters of text
        isls = [self.lengths(i)[0] for i in indices]
        if sum(isls) * per_token > PREPARE_BUDGET_BYTES:
            return
        for index, isl in zip(indices, isls, strict=True):
            completions = self.config.api == "completions"
            self._built[index] = self.prompt_ids(index, isl) if completions else self.messages(index, isl)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.config.model_dump(mode="json"), "tokenizer_name": self.tokenizer.name}

    # -- prompt synthesis -----------------------------------------------------------------------------------------

    def prompt_ids(self, index: int, isl: int) -> tuple[int, ...]:
        """Exactly `isl` token ids (template included when `use_chat_template`)."""
        if (built := self._built.get(index)) is not None:
            return built  # type: ignore[no-any-return]
        if not self.config.use_chat_template:
            return tuple(self._ids[self._choices(index, isl)].tolist())
        text = self._templated_text(index, isl)
        ids = self.tokenizer.encode(text)
        return tuple(ids)

    def messages(self, index: int, isl: int) -> tuple[dict[str, Any], ...]:
        """One user message whose content encodes to exactly `isl` tokens (minus template overhead if counted)."""
        if (built := self._built.get(index)) is not None:
            return built  # type: ignore[no-any-return]
        content = self._content(index, isl - self._overhead)
        content = self._exact(index, content, isl)
        return ({"role": "user", "content": content},)

    def _templated_text(self, index: int, isl: int) -> str:
        content = self._exact(index, self._content(index, isl - self._overhead), isl)
        return self.tokenizer.apply_chat_template([{"role": "user", "content": content}])

    def _measure(self, content: str) -> int:
        if self.config.use_chat_template:
            templated = self.tokenizer.apply_chat_template([{"role": "user", "content": content}])
            return len(self.tokenizer.encode(templated))
        return self.tokenizer.count_tokens(content)

    def _exact(self, index: int, content: str, target: int) -> str:
        """Re-encode and add or drop filler words until the measured length is exactly `target`."""
        n_words = max(1, target - self._overhead)
        for _ in range(8):
            measured = self._measure(content)
            if measured == target:
                return content
            n_words = max(1, n_words + target - measured)
            content = self._content(index, n_words)
        raise DatasetError(
            f"could not synthesise a prompt of exactly {target} tokens with tokenizer {self.tokenizer.name!r}"
            f" (last attempt measured {self._measure(content)})",
            fix="use api=completions (token ids are exact) or the built-in tokenizer",
        )

    def _content(self, index: int, n_words: int) -> str:
        words = self._words[self._choices(index, max(1, n_words))]
        return " " + " ".join(words.tolist())

    def _choices(self, index: int, n: int) -> np.ndarray:
        """Indices into the filler table: `MARKER_WORDS` digits of a bijective code of `index`, then random words."""
        vocab = len(self._words)
        rng = np.random.default_rng([self.config.seed & 0xFFFFFFFF, index, 2])
        out = rng.integers(0, vocab, size=n)
        marker = self._marker(index, n)
        out[:len(marker)] = marker
        return out

    def _marker(self, index: int, n: int) -> list[int]:
        """The first min(`MARKER_WORDS`, n) filler indices of prompt `index`: digits of a bijective code of it."""
        vocab = len(self._words)
        code = (index * _coprime_multiplier(vocab) + (self.config.seed & 0xFFFFFFFF)) % (vocab**MARKER_WORDS)
        digits = []
        for _ in range(min(MARKER_WORDS, n)):
            digits.append(code % vocab)
            code //= vocab
        return digits

    # -- lanes ----------------------------------------------------------------------------------------------------

    def _take(self) -> int | None:
        """The sequence index of this worker's next prompt, or None when its share is spent."""
        with self._lock:
            index = self._index(self._next)
            if index is not None:
                self._next += 1
            return index

    def _index(self, k: int) -> int | None:
        """Sequence index of this worker's `k`-th prompt: its warm-ups first, then its profiling prompts."""
        w, n, warmups = self._worker, self._workers, self.config.num_warmups
        own_warmups = len(range(w, warmups, n))
        if k < own_warmups:
            return w + k * n
        index = warmups + w + (k - own_warmups) * n
        total = self.config.total_requests
        return None if total is not None and index >= total else index

    def _program(self, index: int, lane: int) -> LaneProgram:
        yield Send(self.request(index, lane=lane))
