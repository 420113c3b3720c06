"""The offline tokenizer behaves like a real one: lossless, ChatML chat template, exact vocabulary sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.modelsynth import SynthRequest, synth_model
from llmsweep.modelsynth.tokenizer import (
    CHAT_TEMPLATE,
    packaged_tokenizer,
    rebuild_packaged,
    resolve_tokenizer,
)

tokenizers = pytest.importorskip("tokenizers")

TEXTS = [
    "The quick brown fox jumps over 12345 lazy dogs.",
    'def f(x):\n    return {"key": [1, 2.5, None]}  # ünïcödé, 中文, emoji 🚀',
    "  leading spaces\tand tabs\n\nand blank lines",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tok")
    synth_model(SynthRequest(source="tiny", out=out))
    return out


def test_round_trips_any_text(model_dir: Path) -> None:
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    for text in TEXTS:
        ids = tok.encode(text).ids
        assert tok.decode(ids) == text
        assert len(ids) < len(text.encode())  # it merges: fewer tokens than bytes


def test_special_tokens_are_single_tokens_and_skipped_in_decode(model_dir: Path) -> None:
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>").ids
    assert ids[0] == tok.token_to_id("<|im_start|>") and ids[-1] == tok.token_to_id("<|im_end|>")
    assert tok.decode(ids, skip_special_tokens=True) == "user\nhi"
    assert cfg["eos_token"] == "<|im_end|>" and cfg["pad_token"] == "<|endoftext|>"
    decoder = {int(k): v["content"] for k, v in cfg["added_tokens_decoder"].items()}
    assert decoder == {tok.token_to_id(t): t for t in decoder.values()}


def test_chat_template_renders_chatml(model_dir: Path) -> None:
    jinja2 = pytest.importorskip("jinja2")
    cfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert cfg["chat_template"] == (model_dir / "chat_template.jinja").read_text() == CHAT_TEMPLATE
    template = jinja2.Environment().from_string(cfg["chat_template"])
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "image_url"},
                                     {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": None},
    ]
    rendered = template.render(messages=messages, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHello there<|im_end|>\n"
        "<|im_start|>assistant\n<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert not template.render(messages=messages[:1], add_generation_prompt=False).endswith("assistant\n")


def test_packaged_tokenizer_is_the_default_and_has_32000_entries() -> None:
    files = resolve_tokenizer(32000)
    assert files.source == "packaged" and files.vocab_size == 32000
    assert packaged_tokenizer().sha256 == files.sha256


def test_a_larger_vocabulary_pads_with_decodable_tokens() -> None:
    files = resolve_tokenizer(32100)
    tok = tokenizers.Tokenizer.from_str(files.tokenizer_json)
    assert tok.get_vocab_size() == files.vocab_size == 32100
    assert tok.decode([32099]) != ""  # an id the random model may sample still streams text


def test_a_smaller_vocabulary_retrains() -> None:
    files = resolve_tokenizer(1000)
    tok = tokenizers.Tokenizer.from_str(files.tokenizer_json)
    assert files.source == "trained" and tok.get_vocab_size() == 1000
    assert tok.decode(tok.encode(TEXTS[1]).ids) == TEXTS[1]
    assert tok.token_to_id("<|im_end|>") == 2


@pytest.mark.slow
def test_the_packaged_tokenizer_is_reproducible_from_the_source(tmp_path: Path) -> None:
    rebuilt = rebuild_packaged(tmp_path / "tokenizer.json.gz")
    assert rebuilt.sha256 == packaged_tokenizer().sha256  # else: run rebuild_packaged() and commit the data file
