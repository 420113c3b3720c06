"""KV pool invariants and LRU order; roofline shape (MoE, TP, KV capacity); acceptance draws; catalog adapter."""

from __future__ import annotations

import dataclasses
import random
from collections import OrderedDict

import pytest

from llmsweep.errors import ConfigError
from llmsweep.sim.acceptance import AcceptanceSampler, expected_length, solve_acceptance_rate
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.kv import KVPool
from llmsweep.sim.perf import Batch, RooflineTimer, kv_capacity_tokens


def _check(pool: KVPool) -> None:
    assert (pool.ref >= 0).all()
    assert pool.used_blocks() == int((pool.ref > 0).sum())
    assert pool.n_evictable == int(((pool.ref == 0) & pool.hashed).sum())
    cached = pool.cached
    assert len(cached) == int(pool.hashed.sum())
    for h, b in cached.items():
        assert pool.hashed[b] and pool.hash_of[b] == h


def test_pool_keeps_its_books_under_random_traffic() -> None:
    rng = random.Random(3)
    pool = KVPool(64, 16)
    held: list[tuple[list[int], list[int]]] = []
    for step in range(3000):
        if held and rng.random() < 0.45:
            blocks, _ = held.pop(rng.randrange(len(held)))
            pool.release(blocks)
        else:
            prefix = rng.randrange(4)
            hashes = [prefix * 1000 + i for i in range(rng.randrange(1, 12))]
            g, _ = pool.match(hashes, len(hashes))
            got = pool.acquire_cached(hashes, g)
            new = pool.allocate(len(hashes) - g)
            if new is None:
                pool.release(got)
            else:
                pool.register_many(new, hashes[g:])
                held.append((got + new, hashes))
        if step % 50 == 0:
            _check(pool)
    _check(pool)


def test_a_hinted_prefix_lookup_answers_what_the_table_does() -> None:
    """A lookup given an earlier prompt's keys and blocks as a hint (its conversation's previous request) answers as
    the table does, whatever the hint: a true prefix, one whose blocks were since evicted or re-used for other keys,
    another conversation's, a longer or shorter one."""
    import numpy as np

    from llmsweep.sim.kv import as_keys

    rng = random.Random(5)
    pool = KVPool(96, 16)
    held: list[tuple[list[int], list[int]]] = []
    finished: list[tuple[list[int], list[int]]] = []  # (hashes, blocks) of released prompts: the hints
    hinted = 0
    for _ in range(4000):
        if held and rng.random() < 0.45:
            blocks, hashes = held.pop(rng.randrange(len(held)))
            pool.release(blocks)
            finished.append((hashes, blocks))
            continue
        conv = rng.randrange(6)
        hashes = [conv * 1000 + i for i in range(rng.randrange(1, 20))]
        hint = None
        if finished and rng.random() < 0.8:
            keys, blocks = rng.choice(finished)
            hint = (as_keys(keys), np.asarray(blocks, np.int64))
        limit = rng.randrange(0, len(hashes) + 1)
        plain, h_plain = pool.lookup_array(hashes, limit)
        with_hint, h_hint = pool.lookup_array(hashes, limit, hint)
        assert with_hint.tolist() == plain.tolist() and h_hint == h_plain
        hinted += hint is not None and len(plain) > 0
        g = len(plain)
        pool.acquire(plain)
        new = pool.allocate(len(hashes) - g)
        if new is None:
            pool.release(plain)
        else:
            pool.register_many(new, hashes[g:])
            held.append((plain.tolist() + new, hashes))
    assert hinted > 500


class _PlainPool:
    """The pool's rules written plainly, for comparison: per-block reference counts, a dict cache (first writer
    wins), an ordered dict of evictable blocks (a release appends its newly unreferenced cached blocks tail first, an
    acquire takes them out), a free stack."""

    def __init__(self, n: int) -> None:
        self.ref = [0] * n
        self.key_of: dict[int, int] = {}
        self.cache: dict[int, int] = {}
        self.lru: OrderedDict[int, None] = OrderedDict()
        self.free = list(range(n - 1, -1, -1))

    def lookup(self, hashes: list[int]) -> list[int]:
        found = []
        for h in hashes:
            if h not in self.cache:
                break
            found.append(self.cache[h])
        return found

    def acquire(self, blocks: list[int]) -> None:
        for b in blocks:
            self.lru.pop(b, None)
            self.ref[b] += 1

    def allocate(self, n: int) -> list[int] | None:
        if n > len(self.free) + len(self.lru):
            return None
        take = min(n, len(self.free))
        out = self.free[len(self.free) - take:]
        del self.free[len(self.free) - take:]
        while len(out) < n:
            b, _ = self.lru.popitem(last=False)
            del self.cache[self.key_of.pop(b)]
            out.append(b)
        for b in out:
            self.ref[b] = 1
        return out

    def register(self, blocks: list[int], hashes: list[int]) -> None:
        for b, h in zip(blocks, hashes, strict=False):
            if h not in self.cache:
                self.cache[h] = b
                self.key_of[b] = h

    def release(self, blocks: list[int]) -> None:
        for b in reversed(blocks):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                if b in self.key_of:
                    self.lru[b] = None
                else:
                    self.free.append(b)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pool_allocates_and_evicts_exactly_as_the_plain_rules_say(seed: int) -> None:
    """Blocks are taken in the plain rules' order (free stack, then least recently released cached blocks, a
    release's tail first) through re-acquired, re-released, shared and twice-registered blocks, and lookups agree:
    the records of a prediction depend on exactly these block numbers."""
    rng = random.Random(seed)
    pool, plain = KVPool(80, 16), _PlainPool(80)
    held: list[tuple[list[int], list[int]]] = []
    evicted = 0
    for _ in range(4000):
        if held and rng.random() < 0.42:
            blocks, _ = held.pop(rng.randrange(len(held)))
            pool.release(blocks)
            plain.release(blocks)
            continue
        conv = rng.randrange(8)
        hashes = [conv * 1000 + i for i in range(rng.randrange(1, 24))]
        found, _ = pool.lookup(hashes, len(hashes))
        assert found == plain.lookup(hashes)
        pool.acquire(found)
        plain.acquire(found)
        before = len(pool.free)
        new = pool.allocate(len(hashes) - len(found))
        assert new == plain.allocate(len(hashes) - len(found))
        if new is None:
            pool.release(found)
            plain.release(found)
            continue
        evicted += max(0, len(new) - before)
        if rng.random() < 0.1:  # registered in two chunks, the second repeating a key of the first
            cut = len(new) // 2
            pool.register_many(new[:cut], hashes[len(found):len(found) + cut])
            pool.register_many(new[cut:], hashes[len(found):len(found) + 1] + hashes[len(found) + cut + 1:])
            plain.register(new[:cut], hashes[len(found):len(found) + cut])
            plain.register(new[cut:], hashes[len(found):len(found) + 1] + hashes[len(found) + cut + 1:])
        else:
            pool.register_many(new, hashes[len(found):])
            plain.register(new, hashes[len(found):])
        held.append((found + new, hashes))
        assert pool.cached == plain.cache
        assert pool.n_evictable == len(plain.lru)
    assert evicted > 1000


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_several_allocations_in_one_pass_take_the_blocks_the_calls_one_by_one_take(seed: int) -> None:
    """`allocate_each` (the core's block-crossing decodes of a step) gives each size the blocks its own
    `allocate_array` call would, in order, through the free list's end, evictions and both at once, and leaves the
    pool as those calls do: the records depend on these block numbers."""
    rng = random.Random(seed)
    one, each = KVPool(96, 16), KVPool(96, 16)
    held: list[list[int]] = []
    mixed = 0
    for _ in range(3000):
        if held and rng.random() < 0.4:
            blocks = held.pop(rng.randrange(len(held)))
            one.release(blocks)
            each.release(blocks)
            continue
        conv = rng.randrange(6)
        hashes = [conv * 1000 + i for i in range(rng.randrange(1, 20))]
        found, _ = one.lookup(hashes, len(hashes))
        assert each.lookup(hashes, len(hashes))[0] == found
        one.acquire(found)
        each.acquire(found)
        sizes = [rng.randrange(1, 5) for _ in range(rng.randrange(1, 6))]
        free_before = len(one.free)
        if sum(sizes) > free_before + one.n_evictable:
            assert each.allocate_each(sizes) is None
            one.release(found)
            each.release(found)
            continue
        singles = [one.allocate_array(n) for n in sizes]
        together = each.allocate_each(sizes)
        assert together is not None
        assert [a.tolist() for a in together] == [a.tolist() if a is not None else None for a in singles]
        mixed += 0 < free_before < sum(sizes)
        new = [b for a in together for b in a.tolist()]
        keys = [conv * 1000 + 100 + i for i in range(len(new))]
        one.register_many(new, keys)
        each.register_many(new, keys)
        held.append(found + new)
        assert one.free == each.free
        assert one.cached == each.cached
        assert one.n_evictable == each.n_evictable
        assert (one.ref == each.ref).all()
    assert mixed > 20


def test_eviction_takes_the_least_recently_released_prefix_tail_first() -> None:
    pool = KVPool(8, 16)
    a, b = [1, 2, 3, 4], [11, 12, 13, 14]
    blocks_a = pool.allocate(4)
    assert blocks_a is not None
    pool.register_many(blocks_a, a)
    blocks_b = pool.allocate(4)
    assert blocks_b is not None
    pool.register_many(blocks_b, b)
    pool.release(blocks_a)  # older
    pool.release(blocks_b)
    pool.allocate(2)  # evicts a's tail (3, 4), keeps its head
    assert pool.match(a, 4) == (2, 0)
    assert pool.match(b, 4) == (4, 0)


def test_prefix_cache_answers_as_a_dict_would_through_growth_evictions_and_odd_keys() -> None:
    """The hash -> block table (numpy open addressing) against a plain dict: random registrations (keys that
    collide in their home slots, negative Python hashes, keys past 2^63, a key twice in one call), evictions and
    re-registrations; every lookup stops at the first uncached hash, as a dict walk does."""
    rng = random.Random(5)
    pool = KVPool(4096, 16)
    ref: dict[int, int] = {}
    big = [rng.randrange(-(1 << 63), 1 << 64) for _ in range(3000)]
    held: list[list[int]] = []
    for _ in range(400):
        if held and rng.random() < 0.4:
            pool.release(held.pop(rng.randrange(len(held))))
        n = rng.randrange(1, 60)
        start = rng.randrange(len(big) - n)
        hashes = big[start:start + n]
        if rng.random() < 0.1:
            hashes = hashes + hashes[:3]  # a key twice: its first block wins
        blocks = pool.allocate(len(hashes))
        if blocks is None:
            continue
        evicted = {h for h, b in ref.items() if b in set(blocks)}
        for h in evicted:
            del ref[h]
        pool.register_many(blocks, hashes)
        for h, b in zip(hashes, blocks, strict=True):
            ref.setdefault(h & ((1 << 64) - 1), b)
        held.append(blocks)
        assert pool.cached == ref
        probe = big[start:start + n + rng.randrange(5)]
        expect = 0
        while expect < len(probe) and probe[expect] & ((1 << 64) - 1) in ref:
            expect += 1
        found, _ = pool.lookup(probe, len(probe))
        assert found == [ref[h & ((1 << 64) - 1)] for h in probe[:expect]]
    assert len(ref) > 1024  # the table grew past its first size
    _check(pool)


def test_host_tier_answers_past_the_gpu_hits() -> None:
    pool = KVPool(4, 16, host_blocks=100)
    blocks = pool.allocate(4)
    assert blocks is not None
    pool.register_many(blocks, [1, 2, 3, 4])
    pool.release(blocks)
    pool.allocate(4)  # evicts every GPU copy
    assert pool.match([1, 2, 3, 4, 5], 5) == (0, 4)


def test_moe_reads_more_experts_as_the_batch_grows_and_tp_shortens_big_steps() -> None:
    moe = perf_inputs("qwen3-30b-a3b", "h200")
    timer = RooflineTimer(moe)
    touched = [timer.experts_touched(t) for t in (1, 8, 64, 1024)]
    assert touched[0] == pytest.approx(moe.experts_per_token)
    assert touched == sorted(touched) and touched[-1] <= moe.n_experts
    dense = perf_inputs("llama-3.1-70b", "h200")
    big = Batch(prefill_tokens=8192, prefill_attn=8192 * 4096, decode_seqs=0)
    t1 = RooflineTimer(dense, tp=2).step_time(big)
    t8 = RooflineTimer(dense, tp=8).step_time(big)
    assert t8 < t1
    assert RooflineTimer(dense, tp=8).comm_time(8192) > 0 == RooflineTimer(dense, tp=1).comm_time(8192)
    decode = [RooflineTimer(dense, tp=2).step_time(Batch(decode_seqs=n, decode_tokens=n, decode_ctx=n * 4000))
              for n in (1, 8, 64)]
    assert decode == sorted(decode)


def test_a_steps_attention_flops_are_the_models_query_heads_times_head_dims() -> None:
    """The roofline priced attention at 4 x layers x hidden per token of context attended: for MiniMax-M3 (64 query
    heads of 128 on a 6144-wide model) a long prompt's attention was a quarter short, and DeepSeek-R1's decode in
    absorbed MLA (128 heads over the 576-wide latent) was counted as if its heads were 56 wide."""
    def attention_s(model: str, batch: Batch) -> float:
        inputs = dataclasses.replace(perf_inputs(model, "h200"), hbm_bw=1e30)  # no memory term: a step is its FLOPs
        timer = RooflineTimer(inputs)
        without = dataclasses.replace(batch, prefill_attn=0.0, decode_ctx=0)
        # the FLOPs of the attention term
        return (timer.step_time(batch) - timer.step_time(without)) * inputs.flops * timer.efficiency.compute

    prompt = Batch(prefill_tokens=8192, prefill_attn=8192 * 8193 / 2, new_seqs=1)
    assert attention_s("minimax-m3", prompt) == pytest.approx(60 * 2 * 2 * 64 * 128 * prompt.prefill_attn)
    decode = Batch(decode_seqs=16, decode_tokens=16, decode_ctx=16 * 4096)
    assert attention_s("deepseek-r1", decode) == pytest.approx(61 * 2 * 128 * (576 + 512) * decode.decode_ctx)
    assert attention_s("deepseek-r1", prompt) == pytest.approx(61 * 2 * 128 * (192 + 128) * prompt.prefill_attn)
    # the idle-TTFT fit of `sim calibrate records.jsonl` reads the same figure (`PerfInputs.attention_flops`)
    assert perf_inputs("minimax-m3", "h200").attention_flops == (60 * 4 * 64 * 128, 60 * 4 * 64 * 128)


def test_kv_capacity_follows_hbm_weights_and_mem_fraction() -> None:
    p = perf_inputs("llama-3.1-8b", "h100")
    full = kv_capacity_tokens(p, tp=1, mem_fraction_static=0.9)
    assert kv_capacity_tokens(p, tp=1, mem_fraction_static=0.7) < full
    assert kv_capacity_tokens(p, tp=2, mem_fraction_static=0.9) > 2 * full  # weights split, KV heads split
    weights_gb = p.weight_bytes / 1e9
    # 85.52 GB: the H100 80GB's 81,559 MiB as NVML reports them (hardware.yaml hbm_gb)
    assert full == pytest.approx((85.52 * 0.9 - 1.073741824 - weights_gb) * 1e9 / p.kv_bytes_per_token, rel=1e-3)


def test_acceptance_draws_stay_in_range_with_the_configured_mean() -> None:
    for k, al in ((3, 3.39), (3, 2.5), (1, 1.7), (5, 4.2)):
        assert expected_length(solve_acceptance_rate(al, k), k) == pytest.approx(al, abs=1e-9)
        sampler = AcceptanceSampler(k, al, seed=11)
        draws = [sampler.draw() for _ in range(50_000)]
        assert min(draws) >= 1 and max(draws) == k + 1
        assert sum(draws) / len(draws) == pytest.approx(al, rel=0.01)


def test_unknown_model_or_hardware_names_the_fix() -> None:
    with pytest.raises(ConfigError, match="no model figures") as model:
        perf_inputs("no-such-model-xyz", "h200")
    with pytest.raises(ConfigError, match="no hardware figures") as hardware:
        perf_inputs("llama-3.1-8b", "no-such-gpu")
    # the fix lists what the simulator serves: the catalog's entries (their only home; `llama-1b` is an alias)
    for name in ("deepseek-v4-pro", "qwen3.5-397b-a17b", "llama-1.1b"):
        assert name in (model.value.fix or ""), model.value.fix
        perf_inputs(name, "h200")
    # a name the catalog does not know that begins with one of PREFIX_MODELS takes that entry's figures
    for name, entry in (("llama-3.1-8b-instruct-awq", "llama-3.1-8b"), ("tinyllama", "llama-1b")):
        assert dataclasses.replace(perf_inputs(name, "h200"), model=entry) == perf_inputs(entry, "h200")
    for sku in ("gb200", "b300", "mi355x", "h200"):
        assert sku in (hardware.value.fix or ""), hardware.value.fix
        perf_inputs("llama-3.1-8b", sku)
    custom = perf_inputs("no-such-model-xyz", "h200", overrides={"params_total": 2e9, "n_layers": 10, "hidden": 1024,
                                                                  "kv_bytes_per_token": 1000.0})
    assert custom.params_active == 2e9
