"""Virtual time without prompt text: the shortcuts give what the text path gives.

An agentic replay tells the simulator its prompts as token runs (`MessageShape`: the conversation's parts, each a
run of trace blocks) instead of megabytes of synthesised text, and the predictor scrapes the core's server metrics
as rows instead of rendering Prometheus families. A user relies on both changing nothing but the time taken: these
tests replay the same AgentX-shaped window both ways and compare every record and every scrape, and check the rows
against the families the live `/metrics` endpoint renders.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from llmsweep.sim import prompt as prompt_mod
from llmsweep.sim.config import SpecDecodeConfig
from llmsweep.sim.engine import EngineConfig, build_core
from llmsweep.sim.metrics import CoreCollector
from llmsweep.sim.predict import UNBOUNDED_WINDOW_S, Predictor
from llmsweep.sim.prompt import PromptEncoder
from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
from llmsweep.workload.base import BlockRun, LaneProgram, RequestOutcome, RequestSpec, Send, Spawn, SpawnHandle
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload
from llmsweep.workload.traces.synth import SynthProfile

MTP = SpecDecodeConfig(method="mtp", k=3, acceptance_length=2.5)
CONFIG = AgenticConfig(synthetic=SynthProfile(traces=6, max_isl=60_000, main_turns_median=30.0),
                       concurrency=4, run_id="fast-prompts", warmup_requests_per_lane=2)
ENGINES = {
    "resident": EngineConfig(model="llama-3.1-8b", hardware="h200"),
    "kv-pressure-cpu-tier-mtp": EngineConfig(model="llama-3.1-8b", hardware="h200", spec=MTP,
                                             kv_capacity_tokens=20_000, dram_gb=2.0, engine_style="vllm"),
}


def _predict(engine: str, *, shapes: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Predictor]:
    predictor = Predictor(build_core(ENGINES[engine]), scrape_interval=1.0, shapes=shapes)
    records = predictor.run(AgenticWorkload(CONFIG), concurrency=4, duration=60.0)
    return records, predictor.scrapes, predictor


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_shaped_prompts_predict_exactly_what_the_text_does(engine: str) -> None:
    text_records, text_scrapes, text = _predict(engine, shapes=False)
    fast_records, fast_scrapes, fast = _predict(engine, shapes=True)
    ok = [r for r in text_records if r["status"] == 200]
    assert len(ok) > 20 and any(r["cached_tokens"] for r in ok)  # a window with traffic and prefix reuse
    assert fast_records == text_records
    assert fast_scrapes == text_scrapes
    assert fast.core.counters == text.core.counters
    if engine != "resident":
        assert text.core.counters.host_hit_tokens and text.core.counters.preemptions  # the pool was under pressure


def _drive(program: LaneProgram, specs: list[RequestSpec], limit: int) -> None:
    """Play a session tree in program order (children inline), collecting its requests."""
    value: Any = None
    while len(specs) < limit:
        try:
            action = program.send(value)
        except StopIteration:
            return
        value = None
        if isinstance(action, Send):
            specs.append(action.spec)
            value = RequestOutcome(ok=True, output_tokens=action.spec.max_tokens)
        elif isinstance(action, Spawn):
            _drive(action.program, specs, limit)
            value = SpawnHandle(0)


@pytest.mark.parametrize(("api", "template"), [("chat", False), ("chat", True), ("completions", False)])
def test_fixed_length_prompts_predict_from_their_shape_exactly_what_their_text_does(api: str, template: bool) -> None:
    """Chat prompts with and without the template counted, and completions prompts (token ids, as InferenceX's
    fixed-length rows send them): records and scrapes equal to the text path's."""
    config = FixedLengthConfig(isl=2000, osl=200, api=api, num_prompts=40, num_warmups=2, range_ratio=0.5,
                               use_chat_template=template)
    runs = []
    for shapes in (False, True):
        predictor = Predictor(build_core(ENGINES["resident"]), scrape_interval=1.0, shapes=shapes)
        workload = FixedLengthWorkload(config)
        records = predictor.run(workload, concurrency=8, duration=UNBOUNDED_WINDOW_S, max_requests=40)
        runs.append((records, predictor.scrapes))
    (text_records, text_scrapes), (fast_records, fast_scrapes) = runs
    assert len(text_records) == 42 and all(r["status"] == 200 for r in text_records)
    assert fast_records == text_records
    assert fast_scrapes == text_scrapes
    spec = FixedLengthWorkload(config).request(5)
    assert spec.shape is not None and not spec.prompt_built  # the shape is there without building the text


def test_a_shape_counts_the_tokens_the_text_has_and_shares_prefixes_where_the_text_does() -> None:
    workload = AgenticWorkload(CONFIG)
    specs: list[RequestSpec] = []
    for lane in range(3):
        _drive(next(iter(workload.sessions(lane))), specs, 40 * (lane + 1))
    by_text, by_shape = PromptEncoder(64), PromptEncoder(64)
    seen_text: dict[int, int] = {}
    seen_shape: dict[int, int] = {}
    assert len(specs) == 120
    for spec in specs:
        assert spec.shape is not None
        assert spec.messages is not None
        n_text, h_text = by_text.chat(spec.messages)
        n_shape, h_shape = by_shape.shaped(spec.shape)
        assert n_shape == n_text
        assert len(h_shape) == len(h_text)
        # the same block of the same prefix gets the same name in both paths (first seen at the same place)
        for a, b in zip(h_text, h_shape, strict=True):
            assert seen_text.setdefault(a, len(seen_text)) == seen_shape.setdefault(b, len(seen_shape))


@pytest.mark.parametrize("done", [0, 37, 64])
def test_a_shape_hashes_each_block_as_the_token_by_token_rolling_hash_of_its_prefix(done: int) -> None:
    """The encoder hashes a block per source and block in closed form; it must equal the rolling hash
    H(t+1) = H(t)·P + code(t) taken token by token (code = source code + position code), at every block boundary and
    at every message end, from any partial block."""
    items: list[Any] = ["<|im_start|>", "user", BlockRun("trace-a", (3, 7, 9), 64, 17), "marker",
                        BlockRun("fixed|1|100", (5,), 100, 100), "<|im_end|>", "x"]
    raw: list[int] = []
    lens: list[int] = []
    xors: list[tuple[int, int, int]] = []
    total, longest = prompt_mod._add_runs(items, raw, lens, xors, 0)
    mask, p = (1 << 64) - 1, prompt_mod._P

    def mix(x: int) -> int:
        return int(prompt_mod._mix(np.array([x], np.uint64))[0])

    sources = [(mix(hash(item) & mask), 1) if isinstance(item, str) else
               (mix(i ^ (hash(item.namespace) & mask)), item.size if k < len(item.ids) - 1 else item.last)
               for item in items for k, i in enumerate((0,) if isinstance(item, str) else item.ids)]
    assert total == sum(n for _, n in sources) == 2 + 64 * 2 + 17 + 1 + 100 + 2
    assert lens == [n for _, n in sources]
    assert longest >= max(n for _, n in sources)
    tokens = [(c + mix(x + 1)) & mask for c, n in sources for x in range(n)]
    acc, block, cuts = 0xABCDEF, 16, [5, 70, len(tokens)]
    hashed, ends, counts = prompt_mod._extend_sources(block, acc, done, raw, lens, xors, longest, cuts)
    h, at_blocks, at_cuts, pieces = acc, [], [], []
    for i, code in enumerate(tokens):
        h = (h * p + code) & mask
        if (done + i + 1) % block == 0:
            at_blocks.append(h)
        if i + 1 in cuts:
            at_cuts.append(h)
            pieces.append(len(at_blocks))
    assert counts == pieces
    assert hashed.tolist() == at_blocks
    assert ends == at_cuts


def test_scrape_rows_are_the_samples_the_metrics_endpoint_renders() -> None:
    _, _, predictor = _predict("kv-pressure-cpu-tier-mtp", shapes=True)
    for style in ("sglang", "vllm", "both"):
        collector = CoreCollector(predictor.core, model_name="m", style=style)
        rendered = [[s.name, dict(s.labels), s.value] for fam in collector.collect() for s in fam.samples]
        assert collector.samples() == rendered
        assert any(str(row[0]).endswith("_total") for row in rendered)


@pytest.mark.parametrize("block", [2, 5, 64])
def test_a_conversation_that_branches_encodes_each_prompt_as_a_fresh_encoder_does(block: int) -> None:
    """The encoder hands each prompt's whole chain on to the conversation's next turn; a second prompt that extends
    the same turn (a branch: a retry, a subagent), an older turn or a longer jump gets the same hashes as an encoder
    that never saw the others."""
    from llmsweep.workload.base import ShapedMessage

    def message(i: int, branch: int = 0) -> ShapedMessage:
        key = (branch, i) if branch else i
        return ShapedMessage(key, "user" if i % 2 else "assistant",
                             ("w", BlockRun(f"t{branch}", tuple(range(i, i + 3 + i % 4)), 64, 5 + i)))

    trunk = [message(i) for i in range(12)]
    prompts = [trunk[:3], trunk[:5], trunk[:5], [*trunk[:5], message(5, 1)], trunk[:7], trunk[:4],
               [*trunk[:7], message(7, 2)], trunk[:12], [*trunk[:5], message(5, 1), message(6, 1)], trunk[:7]]
    shared = PromptEncoder(block)
    for messages in prompts:
        n, hashes = shared.shaped(messages)
        n_fresh, fresh = PromptEncoder(block).shaped(messages)
        assert n == n_fresh and hashes.tolist() == fresh.tolist()


def test_the_encoders_power_tables_hold_the_powers_of_p_past_their_first_row() -> None:
    """The tables of P^j and P^-j modulo 2^64 are built as a column of 1024th powers times a row of the first 1024:
    every entry, across the rows' seams, must be the power itself (a wrong one would rename blocks silently)."""
    pw, inv = prompt_mod._Powers.upto(5000)
    mask = (1 << 64) - 1
    for j in (0, 1, 1023, 1024, 1025, 2047, 2048, 4097, 4999):
        assert int(pw[j]) == pow(prompt_mod._P, j, 1 << 64)
        assert int(pw[j]) * int(inv[j]) & mask == 1
