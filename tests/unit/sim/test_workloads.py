"""The project's real workloads run through the predictor, and the simulator counts tokens as the client intends."""

from __future__ import annotations

from typing import Any

import pytest

from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.predict import predict
from llmsweep.sim.prompt import PromptEncoder
from llmsweep.workload.agentic import AgenticConfig, AgenticWorkload
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload
from llmsweep.workload.tokenizer import count_chat_tokens, count_tokens
from llmsweep.workload.traces.synth import SynthProfile

ENGINE = EngineConfig(model="llama-3.1-8b", hardware="h200")


@pytest.mark.parametrize("api,template", [("completions", False), ("chat", False), ("chat", True)])
def test_fixed_length_prompts_are_counted_exactly_as_the_workload_built_them(api: str, template: bool) -> None:
    workload = FixedLengthWorkload(FixedLengthConfig(isl=700, osl=20, api=api, num_prompts=12, range_ratio=0.5,
                                                     use_chat_template=template))
    records = predict(workload, ENGINE, concurrency=4, duration=600)
    assert len(records) == 12
    for r in records:
        assert r["status"] == 200 and r["completion_tokens"] == r["max_tokens"]
        if api == "completions" or template:
            assert r["prompt_tokens"] == r["input_tokens_expected"]
        else:  # the workload's ISL covers the content; the server also counts the template, like a real engine
            assert r["prompt_tokens"] == r["input_tokens_expected"] + 5


def test_token_counts_match_the_built_in_tokenizer() -> None:
    enc = PromptEncoder(64)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "  what is  2+2 ?\n"},
        {"role": "assistant", "content": [{"type": "text", "text": "four"}]}, {"role": "user", "content": ""}]
    assert enc.chat(messages)[0] == count_chat_tokens(messages)
    for text in ("a b  c", "", " ", "x\ny\tz"):
        assert enc.text(text)[0] == count_tokens(text)


def test_agentic_replay_hits_about_what_an_ideal_cache_would() -> None:
    workload = AgenticWorkload(AgenticConfig(synthetic=SynthProfile(traces=8, max_isl=20_000), concurrency=4,
                                             run_id="t"))
    records = predict(workload, ENGINE, concurrency=4, duration=300)
    ok = [r for r in records if r["status"] == 200]
    assert len(ok) > 50
    assert all(r["prompt_tokens"] >= r["input_tokens_expected"] for r in ok)  # template tokens on top
    observed = sum(r["cached_tokens"] for r in ok) / sum(r["prompt_tokens"] for r in ok)
    ideal = sum(r["theoretical_cached_tokens"] for r in ok) / sum(r["input_tokens_expected"] for r in ok)
    assert 0.85 * ideal <= observed <= ideal * 1.02, (observed, ideal)
