from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.workload.tokenizer import (
    WordTokenizer,
    chat_overhead,
    count_chat_tokens,
    count_tokens,
    get_tokenizer,
    load_hf_tokenizer,
)


def test_word_tokenizer_counts_one_token_per_word_wherever_it_stands() -> None:
    tok = WordTokenizer()
    words = [w for w, _ in tok.filler_words()[:50]]
    text = " " + " ".join(words)
    assert len(tok.encode(text)) == 50 == count_tokens(text) == tok.count_tokens(text)
    # Concatenating blocks never changes the count: the property prefix-cache block synthesis relies on.
    assert count_tokens(text + text) == 100
    assert tok.decode(tok.encode(text)) == text.strip()


def test_word_tokenizer_is_total_on_arbitrary_text() -> None:
    tok = WordTokenizer()
    text = "[rid:0a1b2c3d4e5f]\n\nhello,   wörld!"
    assert len(tok.encode(text)) == count_tokens(text) == 3
    assert count_tokens("") == 0 and tok.encode("") == []
    assert count_tokens("   ") == 1


def test_word_chat_template_costs_three_tokens_per_message_plus_two() -> None:
    tok = WordTokenizer()
    messages = [{"role": "user", "content": " a b c"}, {"role": "assistant", "content": " d"}]
    templated = tok.apply_chat_template(messages)
    assert tok.count_tokens(templated) == 4 + 3 * 2 + 2 == count_chat_tokens(messages)
    assert chat_overhead(tok) == 5


def test_default_tokenizer_is_builtin() -> None:
    assert isinstance(get_tokenizer(None), WordTokenizer)


def test_bpe_filler_words_are_single_tokens_and_never_merge(bpe_tokenizer_dir: Path) -> None:
    tok = load_hf_tokenizer(bpe_tokenizer_dir)
    fillers = tok.filler_words()
    assert len(fillers) > 1000
    words = [w for w, _ in fillers[::37][:300]]
    text = "[rid:0123456789ab]\n\n" + "".join(" " + w for w in words)
    marker = tok.count_tokens("[rid:0123456789ab]\n\n")
    assert tok.count_tokens(text) == marker + len(words)
    assert tok.encode(" " + words[0]) == [dict(fillers)[words[0]]]


def test_bpe_chat_template_is_chatml_and_overhead_is_additive(bpe_tokenizer_dir: Path) -> None:
    tok = load_hf_tokenizer(bpe_tokenizer_dir)
    templated = tok.apply_chat_template([{"role": "user", "content": "hi"}])
    assert templated.startswith("<|im_start|>user\nhi<|im_end|>\n")
    assert templated.endswith("<|im_start|>assistant\n")
    overhead = chat_overhead(tok)
    words = [w for w, _ in tok.filler_words()[:100]]
    content = "".join(" " + w for w in words)
    assert len(tok.encode(tok.apply_chat_template([{"role": "user", "content": content}]))) == 100 + overhead


def test_missing_tokenizer_directory_is_a_config_error(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    with pytest.raises(ConfigError, match=r"tokenizer\.json"):
        load_hf_tokenizer(tmp_path)


@pytest.mark.parametrize("where", ["absolute", "./relative"])
def test_a_tokenizer_path_that_does_not_exist_is_named_as_a_path_not_asked_of_the_hub(tmp_path: Path,
                                                                                      where: str) -> None:
    """`bench --tokenizer /no/such/dir` was sent to the Hugging Face hub, whose answer was that the id is malformed."""
    pytest.importorskip("tokenizers")
    missing = str(tmp_path / "no-such-dir") if where == "absolute" else "./no-such-tokenizer-dir"
    with pytest.raises(ConfigError, match="no such file or directory") as raised:
        load_hf_tokenizer(missing)
    assert "Hugging Face" not in raised.value.message and "existing tokenizer directory" in (raised.value.fix or "")


def test_a_tokenizer_config_saved_with_a_byte_order_mark_gives_its_chat_template(tmp_path: Path) -> None:
    """A model folder's tokenizer_config.json re-saved by a Windows editor starts with a UTF-8 byte-order mark: its
    chat template is read past the mark, as every JSON file we may not have written (`jsonline`)."""
    from llmsweep.workload.tokenizer import chat_template_from

    template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}), encoding="utf-8-sig")
    assert chat_template_from(tmp_path) == template


QWEN25_STYLE = (  # Qwen2.5's shape: ChatML with a default system message when the messages bring none
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}{%- endif %}"
    "{%- for m in messages %}{%- if m.role != 'system' %}{{- '<|im_start|>' + m.role + '\\n' + m.content"
    " + '<|im_end|>\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def test_a_chatml_template_is_rendered_as_written_or_refused_without_jinja2(
    bpe_tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without jinja2 (which `llmsweep[hf]` did not install) any template holding `<|im_start|>` was rendered as bare
    ChatML: a Qwen2.5-style default system message was left out of the count, so every templated fixed-length prompt
    reached the server that much longer than its recorded length."""
    import shutil

    pytest.importorskip("jinja2")
    tok_dir = tmp_path / "qwen"
    shutil.copytree(bpe_tokenizer_dir, tok_dir)
    (tok_dir / "chat_template.jinja").write_text(QWEN25_STYLE)
    templated = load_hf_tokenizer(tok_dir).apply_chat_template([{"role": "user", "content": "hi"}])
    assert templated.startswith("<|im_start|>system\nYou are Qwen")
    monkeypatch.setitem(__import__("sys").modules, "jinja2", None)  # as if not installed
    with pytest.raises(ConfigError, match="needs jinja2") as err:
        load_hf_tokenizer(tok_dir).apply_chat_template([{"role": "user", "content": "hi"}])
    assert "pip install jinja2" in (err.value.fix or "")
