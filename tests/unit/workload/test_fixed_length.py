from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from llmsweep.workload.base import RequestSpec, Send
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload
from llmsweep.workload.tokenizer import Tokenizer, get_tokenizer


def _drain(workload: FixedLengthWorkload, lanes: int = 3) -> list[RequestSpec]:
    """Round-robin the lanes, one single-Send session each turn, until every lane's sequence ends."""
    iters = [workload.sessions(lane) for lane in range(lanes)]
    specs: list[RequestSpec] = []
    live = list(iters)
    while live:
        for it in list(live):
            program = next(it, None)
            if program is None:
                live.remove(it)
                continue
            action = next(program)
            assert isinstance(action, Send)
            specs.append(action.spec)
            with pytest.raises(StopIteration):
                program.send(None)
    return specs


def _measured(tok: Tokenizer, spec: RequestSpec, use_template: bool) -> int:
    if spec.api == "completions":
        assert isinstance(spec.prompt, tuple) and all(isinstance(i, int) for i in spec.prompt)
        return len(spec.prompt)
    assert spec.messages is not None
    if use_template:
        return len(tok.encode(tok.apply_chat_template(spec.messages)))
    return len(tok.encode(spec.messages[0]["content"]))


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("use_template", [False, True])
@pytest.mark.parametrize("tokenizer", ["builtin", "bpe"])
def test_input_lengths_are_exact(api: str, use_template: bool, tokenizer: str, request: pytest.FixtureRequest) -> None:
    source = None if tokenizer == "builtin" else str(request.getfixturevalue("bpe_tokenizer_dir"))
    cfg = FixedLengthConfig(
        isl=700, osl=64, api=api, num_prompts=6, range_ratio=0.8, tokenizer=source, use_chat_template=use_template
    )
    workload = FixedLengthWorkload(cfg)
    specs = _drain(workload)
    assert len(specs) == 6
    for spec in specs:
        assert spec.input_tokens is not None and 560 <= spec.input_tokens <= 700
        assert _measured(workload.tokenizer, spec, use_template) == spec.input_tokens
        assert spec.ignore_eos and 51 <= spec.max_tokens <= 64


def test_warmups_come_first_and_lanes_share_one_sequence() -> None:
    cfg = FixedLengthConfig(isl=64, osl=8, num_prompts=7, num_warmups=3)
    specs = _drain(FixedLengthWorkload(cfg), lanes=2)
    assert [s.identity.phase for s in specs] == ["warmup"] * 3 + ["profiling"] * 7
    assert sorted(s.identity.request_index for s in specs) == list(range(10))
    assert {s.identity.lane for s in specs} == {0, 1}


def test_full_range_ratio_gives_constant_lengths_and_ratio_spreads_them() -> None:
    fixed = _drain(FixedLengthWorkload(FixedLengthConfig(isl=100, osl=20, num_prompts=20)))
    assert {(s.input_tokens, s.max_tokens) for s in fixed} == {(100, 20)}
    spread = _drain(FixedLengthWorkload(FixedLengthConfig(isl=1000, osl=200, num_prompts=50, range_ratio=0.5)))
    isls = [s.input_tokens or 0 for s in spread]
    assert min(isls) >= 500 and max(isls) <= 1000 and len(set(isls)) > 20


def test_prompts_never_share_a_first_token_and_are_seeded() -> None:
    cfg = FixedLengthConfig(isl=32, osl=4, num_prompts=500)
    first = [s.prompt[0] for s in _drain(FixedLengthWorkload(cfg))]  # type: ignore[index]
    assert len(set(first)) == 500
    again = [s.prompt for s in _drain(FixedLengthWorkload(cfg))]
    assert again == [s.prompt for s in _drain(FixedLengthWorkload(cfg))]
    other = [s.prompt for s in _drain(FixedLengthWorkload(cfg.model_copy(update={"seed": 1})))]
    assert other != again


def test_open_ended_sequence_keeps_producing_fresh_prompts() -> None:
    workload = FixedLengthWorkload(FixedLengthConfig(isl=16, osl=4))
    lane = workload.sessions(0)
    prompts = [next(next(lane)).spec.prompt for _ in range(2000)]  # type: ignore[union-attr]
    assert len(set(prompts)) == 2000


def test_text_is_built_only_when_read() -> None:
    workload = FixedLengthWorkload(FixedLengthConfig(isl=5000, osl=4, api="chat", num_prompts=1))
    spec = next(next(workload.sessions(0))).spec  # type: ignore[union-attr]
    assert not spec.prompt_built
    assert get_tokenizer(None).count_tokens(spec.messages[0]["content"]) == 5000  # type: ignore[index]
    assert spec.prompt_built


def test_config_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        FixedLengthConfig(isl=10, osl=1, prompts=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(("warmups", "prompts", "workers"), [(3, 7, 2), (1, 1, 2), (0, 5, 3), (4, 2, 3), (8, 10, 4)])
def test_bound_workers_split_each_phase_evenly_and_together_replay_the_sequence_once(
    warmups: int, prompts: int, workers: int
) -> None:
    cfg = FixedLengthConfig(isl=200, osl=16, num_prompts=prompts, num_warmups=warmups, range_ratio=0.5)
    whole = {s.identity.request_index: s for s in _drain(FixedLengthWorkload(cfg))}
    seen: list[int] = []
    for w in range(workers):
        workload = FixedLengthWorkload(cfg)
        workload.bind_worker(w, workers)
        specs = _drain(workload, lanes=2)
        phases = [s.identity.phase for s in specs]
        # the even split the client budgets per worker: ceil((total - w) / workers) of each phase, warm-ups first
        own_warmups, own_prompts = len(range(w, warmups, workers)), len(range(w, prompts, workers))
        assert phases == ["warmup"] * own_warmups + ["profiling"] * own_prompts
        for s in specs:
            twin = whole[s.identity.request_index]
            assert (s.identity.phase, s.input_tokens, s.max_tokens, s.prompt) == (
                twin.identity.phase, twin.input_tokens, twin.max_tokens, twin.prompt
            )
        seen += [s.identity.request_index for s in specs]
    assert sorted(seen) == list(range(warmups + prompts))


def test_bound_worker_of_an_open_ended_sequence_keeps_to_its_stride() -> None:
    workload = FixedLengthWorkload(FixedLengthConfig(isl=16, osl=4, num_warmups=2))
    workload.bind_worker(1, 3)
    lane = workload.sessions(0)
    indices = [next(next(lane)).spec.identity.request_index for _ in range(4)]  # type: ignore[union-attr]
    assert indices == [1, 3, 6, 9]  # warm-up 1 of 0..1, then prompts 2+1, 2+4, 2+7


@pytest.mark.parametrize(("worker", "workers"), [(2, 2), (-1, 2), (0, 0)])
def test_bind_worker_rejects_a_worker_outside_the_pool(worker: int, workers: int) -> None:
    with pytest.raises(ValueError, match="worker"):
        FixedLengthWorkload(FixedLengthConfig(isl=16, osl=4)).bind_worker(worker, workers)


class _CountingTokenizer:
    """The built-in tokenizer, counting how often a prompt is measured (each measure is an encode)."""

    def __init__(self) -> None:
        self._inner = get_tokenizer(None)
        self.measures = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def count_tokens(self, text: str) -> int:
        self.measures += 1
        return self._inner.count_tokens(text)


@pytest.mark.parametrize("workers", [1, 2])
def test_prepare_builds_the_whole_share_up_front_and_sending_then_measures_nothing(workers: int) -> None:
    cfg = FixedLengthConfig(isl=300, osl=8, api="chat", num_prompts=9, num_warmups=3, range_ratio=0.5, seed=5)
    lazy = {s.identity.request_index: s.messages for s in _drain(FixedLengthWorkload(cfg))}
    for w in range(workers):
        tok = _CountingTokenizer()
        workload = FixedLengthWorkload(cfg, tokenizer=tok)  # type: ignore[arg-type]
        workload.bind_worker(w, workers)
        workload.prepare()
        built = tok.measures
        specs = _drain(workload, lanes=2)
        assert [s.messages for s in specs] == [lazy[s.identity.request_index] for s in specs]
        assert built > 0 and tok.measures == built  # sending re-measured no prompt: the hot loop only sends
        assert len(specs) == len(range(w, 3, workers)) + len(range(w, 9, workers))


def test_prepare_leaves_open_ended_and_oversized_runs_lazy(monkeypatch: pytest.MonkeyPatch) -> None:
    open_ended = FixedLengthWorkload(FixedLengthConfig(isl=16, osl=4, api="chat"))
    open_ended.prepare()
    assert not next(next(open_ended.sessions(0))).spec.prompt_built  # type: ignore[union-attr]
    import llmsweep.workload.fixed as fixed

    monkeypatch.setattr(fixed, "PREPARE_BUDGET_BYTES", 1000)
    tok = _CountingTokenizer()
    big = FixedLengthWorkload(FixedLengthConfig(isl=500, osl=4, api="chat", num_prompts=4), tokenizer=tok)  # type: ignore[arg-type]
    big.prepare()
    assert tok.measures == 0
    assert [len(s.messages or ()) for s in _drain(big)] == [1] * 4 and tok.measures > 0


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("range_ratio", [1.0, 0.8])
def test_a_chat_template_longer_than_the_prompt_is_refused_when_the_workload_is_built(
    api: str, range_ratio: float, bpe_tokenizer_dir: Path, tmp_path: Path,
) -> None:
    """A template with a long system preamble (106 tokens here) and isl 40: with range_ratio 1 the first prompt read
    mid-run raised 'could not synthesise' with a wrong fix (use completions), and with range_ratio < 1 every prompt was
    silently 107 tokens under a job that says 40."""
    from llmsweep.errors import ConfigError

    tok_dir = tmp_path / "tok"
    shutil.copytree(bpe_tokenizer_dir, tok_dir)
    (tok_dir / "chat_template.jinja").write_text(
        "<|im_start|>system\n" + "You are a helpful assistant that answers carefully. " * 5 + "<|im_end|>\n"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    pytest.importorskip("jinja2")
    cfg = FixedLengthConfig(isl=40, osl=4, api=api, num_prompts=2, range_ratio=range_ratio, tokenizer=str(tok_dir),
                            use_chat_template=True)
    with pytest.raises(ConfigError, match=r"prompts of \d+ tokens.* cannot hold the chat template .* takes 106 "
                                          r"tokens") as err:
        FixedLengthWorkload(cfg)
    assert "at least 107" in (err.value.fix or "")
    # long enough for the template: exact, as the template is counted
    workload = FixedLengthWorkload(cfg.model_copy(update={"isl": 200}))
    for spec in _drain(workload):
        assert _measured(workload.tokenizer, spec, True) == spec.input_tokens


def test_an_open_ended_run_keeps_the_lengths_of_two_chunks_of_prompts_not_every_one_sent() -> None:
    """A duration-bounded run (no prompt count) drew its lengths 1,024 prompts at a time and kept every chunk (~120 B a
    prompt, for as long as the run sends): only the last two are kept, and a prompt read again after its chunk went is
    drawn to the same lengths (each prompt's own generator defines them)."""
    from llmsweep.workload.fixed import LENGTHS_CHUNK

    wl = FixedLengthWorkload(FixedLengthConfig(isl=500, osl=50, range_ratio=0.5, seed=3))
    first = [wl.lengths(i) for i in range(8)]
    for i in range(6 * LENGTHS_CHUNK):
        wl.lengths(i)
    assert len(wl._chunks) <= 2
    assert [wl.lengths(i) for i in range(8)] == first == [wl._drawn(i) for i in range(8)]
    assert wl.lengths(6 * LENGTHS_CHUNK - 1) == wl._drawn(6 * LENGTHS_CHUNK - 1)
