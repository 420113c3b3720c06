"""`llmsweep model synth` as a user runs it: exit codes, JSON provenance, errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")


def llmsweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def test_synth_prints_provenance_and_writes_the_directory(tmp_path: Path) -> None:
    out = tmp_path / "m"
    run = llmsweep("model", "synth", "tiny", "--out", str(out), "--weights", "random", "--layers", "1", "--json")
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    assert record == json.loads((out / "llmsweep-synth.json").read_text())
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 1
    assert "model.safetensors" in record["files"]


def test_bad_input_exits_2_with_a_fix(tmp_path: Path) -> None:
    run = llmsweep("model", "synth", "no-such-model", "--out", str(tmp_path / "x"))
    assert run.returncode == 2
    assert "fix:" in run.stderr and "Traceback" not in run.stderr
    (tmp_path / "a-file").write_text("x")
    run = llmsweep("model", "synth", "tiny", "--out", str(tmp_path / "a-file" / "m"))
    assert run.returncode == 2, run.stderr
    assert "cannot write the model directory" in run.stderr and "fix:" in run.stderr and "Traceback" not in run.stderr


def test_a_config_that_is_not_utf8_is_refused_naming_its_line(tmp_path: Path) -> None:
    """A 0xFF byte in config.json had been a UnicodeDecodeError traceback (exit 1)."""
    from llmsweep.errors import ConfigError
    from llmsweep.modelsynth.synth import load_source_config

    (tmp_path / "config.json").write_bytes(b'{"hidden_size": 8,\n "vocab_size": 9, "name": "\xff"}')
    with pytest.raises(ConfigError, match=rf"{tmp_path / 'config.json'}:2: not UTF-8 text"):
        load_source_config(str(tmp_path))


def test_with_draft_writes_the_drafter_and_its_old_spelling_says_so(tmp_path: Path) -> None:
    """`model synth --draft-model` was a flag (also write a draft model) while every other `--draft-model` names the
    drafter: the flag is `--with-draft`; `--draft-model` and `--draft` still set it, saying once what it is now."""
    new = llmsweep("model", "synth", "tiny", "--out", str(tmp_path / "a"), "--with-draft", "--json")
    assert new.returncode == 0 and "is now" not in new.stderr, new.stderr
    assert json.loads(new.stdout)["draft"] is not None and (tmp_path / "a" / "draft" / "config.json").is_file()
    old = llmsweep("model", "synth", "tiny", "--out", str(tmp_path / "b"), "--draft-model", "--json")
    assert old.returncode == 0 and old.stderr.count("warning: --draft-model is now --with-draft") == 1, old.stderr
    assert json.loads(old.stdout)["draft"] is not None


LLAMA_WITHOUT_KV_HEADS = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
                          "intermediate_size": 512, "num_attention_heads": 4, "num_hidden_layers": 2,
                          "vocab_size": 1000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5}


def test_a_config_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    """A config.json re-saved by a Windows editor starts with a UTF-8 byte-order mark: it had been refused
    ('Unexpected UTF-8 BOM'), as every JSON file we may not have written is read past one (`jsonline`)."""
    from llmsweep.modelsynth.synth import load_source_config

    text = json.dumps({**LLAMA_WITHOUT_KV_HEADS, "num_key_value_heads": 2})
    (tmp_path / "config.json").write_text(text, encoding="utf-8-sig")
    config, _ = load_source_config(str(tmp_path))
    assert config == json.loads(text)


def test_a_llama_config_without_kv_heads_is_multi_head_as_transformers_reads_it(tmp_path: Path) -> None:
    """`num_key_value_heads` is optional in a Hugging Face config (absent: one KV head per query head); `model synth`
    of such a config had died with a KeyError traceback."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_WITHOUT_KV_HEADS))
    run = llmsweep("model", "synth", str(tmp_path / "config.json"), "--out", str(tmp_path / "m"), "--json")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert json.loads((tmp_path / "m" / "config.json").read_text())["num_key_value_heads"] == 4


def test_a_config_whose_heads_do_not_divide_its_hidden_size_is_refused_naming_the_file_and_fields(
        tmp_path: Path) -> None:
    """Hidden 64 over 3 heads had been written as a model with q_proj [63, 64], which transformers refuses to load
    (LlamaConfig: "hidden size is not a multiple of the number of attention heads"): `--hidden` checked its head size
    for presets, a user's config.json was not checked. It exits 2 naming the file, the fields and the fix, and writes
    nothing."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**LLAMA_WITHOUT_KV_HEADS, "hidden_size": 64, "num_attention_heads": 3}))
    out = tmp_path / "m"
    run = llmsweep("model", "synth", str(config), "--weights", "random", "--out", str(out))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"{config}: hidden_size 64 is not a multiple of num_attention_heads 3" in run.stderr, run.stderr
    assert "fix: set hidden_size to a multiple of 3 (63, 66) or num_attention_heads to a divisor of 64 (2 or 4)" \
        in run.stderr, run.stderr
    assert not out.exists()


def test_a_head_shape_is_checked_where_it_is_set() -> None:
    """A config's explicit head_dim sets the head size of an architecture other than Llama (Qwen3's 128 over a
    hidden size it does not divide is how Qwen3 ships); a Llama is refused whatever head_dim says (transformers'
    LlamaConfig checks the hidden size against the heads); query heads must be a whole multiple of the KV heads."""
    from llmsweep.errors import ConfigError
    from llmsweep.modelsynth.architectures import check_heads

    qwen = {"model_type": "qwen3_moe", "hidden_size": 2000, "num_attention_heads": 32, "num_key_value_heads": 4,
            "head_dim": 128}
    check_heads(qwen, "q.json")
    with pytest.raises(ConfigError, match=r"q\.json: hidden_size 2000 is not a multiple of num_attention_heads 32 "
                       r"\(without head_dim its head size would be 62\.5"):
        check_heads({**qwen, "head_dim": None}, "q.json")
    with pytest.raises(ConfigError, match=r"l\.json: hidden_size 64 is not a multiple of num_attention_heads 3 "
                       r"\(transformers' LlamaConfig refuses it, head_dim or not\)"):
        check_heads({**LLAMA_WITHOUT_KV_HEADS, "hidden_size": 64, "num_attention_heads": 3, "head_dim": 16}, "l.json")
    with pytest.raises(ConfigError, match=r"num_attention_heads 4 is not a multiple of num_key_value_heads 3") as err:
        check_heads({**LLAMA_WITHOUT_KV_HEADS, "num_key_value_heads": 3}, "l.json")
    assert "set num_key_value_heads to a divisor of 4 (e.g. 1) in l.json" in str(err.value.fix)
