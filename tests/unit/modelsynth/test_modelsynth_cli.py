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
