"""A synthesised model directory is what an engine needs: matching config, weights, tokenizer and provenance."""

from __future__ import annotations

import errno
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from llmsweep.errors import ConfigError
from llmsweep.modelsynth import SynthRequest, synth_model

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")


def read_header(path: Path) -> dict[str, dict]:
    """The safetensors JSON header, parsed by the format's definition (8-byte length, then JSON)."""
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def read_bf16(path: Path, name: str) -> np.ndarray:
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        start, end = header[name]["data_offsets"]
        f.seek(8 + n + start)
        raw = np.frombuffer(f.read(end - start), dtype=np.uint16)
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(header[name]["shape"])


def llama_parameters(cfg: dict) -> int:
    """Llama's parameter count from its config, by the architecture's definition."""
    h, v, i, layers = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    hd = cfg["head_dim"]
    attn = h * hd * cfg["num_attention_heads"] * 2 + h * hd * cfg["num_key_value_heads"] * 2
    per_layer = attn + 3 * h * i + 2 * h
    lm_head = 0 if cfg["tie_word_embeddings"] else v * h
    return v * h + layers * per_layer + h + lm_head


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny")
    synth_model(SynthRequest(source="tiny", out=out, weights="random", draft=True, seed=7))
    return out


def test_weights_match_the_configs_parameter_count(tiny: Path) -> None:
    cfg = json.loads((tiny / "config.json").read_text())
    header = read_header(tiny / "model.safetensors")
    assert {t["dtype"] for t in header.values()} == {"BF16"}
    assert sum(int(np.prod(t["shape"])) for t in header.values()) == llama_parameters(cfg)
    assert header["model.embed_tokens.weight"]["shape"] == [cfg["vocab_size"], cfg["hidden_size"]]
    provenance = json.loads((tiny / "llmsweep-synth.json").read_text())
    assert provenance["parameters"] == llama_parameters(cfg)
    assert provenance["seed"] == 7 and provenance["weights"] == "random" and provenance["dtype"] == "bf16"


def test_special_token_rows_of_lm_head_are_zero_so_greedy_never_stops(tiny: Path) -> None:
    cfg = json.loads((tiny / "config.json").read_text())
    lm_head = read_bf16(tiny / "model.safetensors", "lm_head.weight")
    assert not lm_head[cfg["eos_token_id"]].any()
    assert not lm_head[cfg["pad_token_id"]].any()
    assert np.count_nonzero(lm_head.any(axis=1)) == cfg["vocab_size"] - 3  # the three specials only
    assert 0.015 < float(lm_head[3:].std()) < 0.025  # normal(0, 0.02) survives the bf16 rounding


def test_same_seed_same_weights_other_seed_other_weights(tmp_path: Path, tiny: Path) -> None:
    again = synth_model(SynthRequest(source="tiny", out=tmp_path / "a", weights="random", seed=7)).out
    other = synth_model(SynthRequest(source="tiny", out=tmp_path / "b", weights="random", seed=8)).out
    ref = (tiny / "model.safetensors").read_bytes()
    assert (again / "model.safetensors").read_bytes() == ref
    assert (other / "model.safetensors").read_bytes() != ref


def test_large_models_are_sharded_with_an_index(tmp_path: Path) -> None:
    out = tmp_path / "sharded"
    synth_model(SynthRequest(source="tiny", out=out, weights="random", shard_bytes=1_500_000))
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and not (out / "model.safetensors").exists()
    seen: dict[str, str] = {}
    total = 0
    for shard in shards:
        for name, t in read_header(out / shard).items():
            seen[name] = shard
            total += t["data_offsets"][1] - t["data_offsets"][0]
    assert seen == index["weight_map"]
    assert total == index["metadata"]["total_size"]


def test_draft_shares_the_vocabulary_and_tokenizer(tiny: Path) -> None:
    target = json.loads((tiny / "config.json").read_text())
    draft = json.loads((tiny / "draft" / "config.json").read_text())
    assert draft["vocab_size"] == target["vocab_size"]
    assert draft["eos_token_id"] == target["eos_token_id"]
    assert draft["max_position_embeddings"] >= target["max_position_embeddings"]
    assert (tiny / "draft" / "tokenizer.json").read_bytes() == (tiny / "tokenizer.json").read_bytes()
    assert draft["hidden_size"] <= target["hidden_size"]  # a draft is never bigger than its target
    header = read_header(tiny / "draft" / "model.safetensors")
    assert sum(int(np.prod(t["shape"])) for t in header.values()) == llama_parameters(draft)


def test_generation_config_names_the_tokenizers_eos(tiny: Path) -> None:
    gen = json.loads((tiny / "generation_config.json").read_text())
    vocab = json.loads((tiny / "tokenizer.json").read_text())["added_tokens"]
    ids = {t["content"]: t["id"] for t in vocab}
    assert gen["eos_token_id"] == ids["<|im_end|>"]
    assert "max_new_tokens" not in gen  # vLLM would take it as every request's default max_tokens


def test_weights_none_writes_config_and_tokenizer_only(tmp_path: Path) -> None:
    out = tmp_path / "qn"
    result = synth_model(SynthRequest(source="qwen3-next-small", out=out))
    assert not list(out.glob("*.safetensors"))
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
            "llmsweep-synth.json"} <= {p.name for p in out.iterdir()}
    assert result.parameters and result.parameters > 1e9


def test_a_given_config_keeps_its_architecture_and_gets_our_tokenizer(tmp_path: Path) -> None:
    src = tmp_path / "config.json"
    src.write_text(json.dumps({"architectures": ["MysteryForCausalLM"], "model_type": "mystery", "hidden_size": 256,
                               "vocab_size": 33000, "eos_token_id": 99999, "num_hidden_layers": 3}))
    out = tmp_path / "given"
    result = synth_model(SynthRequest(source=str(src), out=out))
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["MysteryForCausalLM"] and cfg["num_hidden_layers"] == 3
    assert cfg["vocab_size"] == 33000 and result.parameters is None
    tok = json.loads((out / "tokenizer.json").read_text())
    assert max(t["id"] for t in tok["added_tokens"]) == 32999  # padded to the model's vocabulary exactly
    assert cfg["eos_token_id"] == 2  # points at our <|im_end|>, not the foreign tokenizer's id


def test_random_weights_for_an_unknown_architecture_fail_before_writing(tmp_path: Path) -> None:
    src = tmp_path / "config.json"
    src.write_text(json.dumps({"model_type": "mystery", "hidden_size": 256, "vocab_size": 32000}))
    with pytest.raises(ConfigError, match="--weights none"):
        synth_model(SynthRequest(source=str(src), out=tmp_path / "x", weights="random"))
    assert not (tmp_path / "x").exists()


def test_refuses_a_non_empty_directory_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="--force"):
        synth_model(SynthRequest(source="tiny", out=tmp_path))
    synth_model(SynthRequest(source="tiny", out=tmp_path, force=True))
    assert (tmp_path / "keep.txt").read_text() == "mine" and (tmp_path / "config.json").exists()


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device", "model.safetensors"),
                                     KeyboardInterrupt()], ids=["disk-full", "interrupted"])
def test_a_write_cut_short_leaves_no_model_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     failure: BaseException) -> None:
    """Config and tokenizer are written before the weights: a write that dies there must not leave a directory
    that looks like a model, nor spoil the one a --force write was replacing."""
    def fail(*args: object, **kwargs: object) -> None:
        raise failure

    monkeypatch.setattr("llmsweep.modelsynth.synth.write_random_weights", fail)
    expected = (ConfigError, KeyboardInterrupt)[isinstance(failure, KeyboardInterrupt)]
    with pytest.raises(expected) as caught:
        synth_model(SynthRequest(source="tiny", out=tmp_path / "new", weights="random"))
    if isinstance(caught.value, ConfigError):
        assert "No space left on device" in str(caught.value) and str(tmp_path / "new") in str(caught.value)
        assert caught.value.fix and "writable" in caught.value.fix
    else:
        assert isinstance(failure, KeyboardInterrupt)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # neither the directory nor a staging leftover
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text('{"previous": true}')
    with pytest.raises(expected):
        synth_model(SynthRequest(source="tiny", out=old, weights="random", force=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]
    assert [p.name for p in old.iterdir()] == ["config.json"] and "previous" in (old / "config.json").read_text()


def test_force_leaves_no_weights_of_the_previous_model(tmp_path: Path) -> None:
    """An engine loads a stale shard index (vLLM) or a stale model.safetensors (transformers) before new weights."""
    (tmp_path / "keep.txt").write_text("mine")
    synth_model(SynthRequest(source="tiny", out=tmp_path, weights="random", shard_bytes=2 * 1024 * 1024, force=True))
    assert (tmp_path / "model.safetensors.index.json").exists()
    synth_model(SynthRequest(source="tiny", out=tmp_path, weights="random", seed=3, force=True))
    weights = sorted(p.name for p in tmp_path.glob("*.safetensors*"))
    assert weights == ["model.safetensors"]
    synth_model(SynthRequest(source="tiny", out=tmp_path, weights="none", draft=True, force=True))
    assert not list(tmp_path.glob("*.safetensors*")) and not list((tmp_path / "draft").glob("*.safetensors*"))
    assert (tmp_path / "keep.txt").read_text() == "mine"
    assert json.loads((tmp_path / "llmsweep-synth.json").read_text())["weights"] == "none"



def test_force_without_a_draft_leaves_no_drafter_of_the_previous_model(tmp_path: Path) -> None:
    """`--force` over a directory a `--with-draft` write made kept its `draft/`: the old model's drafter, of the old
    vocabulary, which a recipe's `draft-model: <out>/draft` served beside the new model (and the new provenance says
    there is no draft). It goes; a folder of the user's own stays."""
    synth_model(SynthRequest(source="tiny", out=tmp_path, draft=True))
    assert json.loads((tmp_path / "draft" / "config.json").read_text())["vocab_size"] == 32000
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    result = synth_model(SynthRequest(source="tiny", out=tmp_path, vocab=40000, force=True))
    assert result.draft is None and json.loads((tmp_path / "config.json").read_text())["vocab_size"] == 40000
    assert not (tmp_path / "draft").exists()
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"
    synth_model(SynthRequest(source="tiny", out=tmp_path, draft=True, force=True))  # a new drafter replaces the old
    assert json.loads((tmp_path / "draft" / "config.json").read_text())["vocab_size"] == 32000

@pytest.mark.parametrize(
    ("preset", "layers", "hidden"), [("tiny", None, None), ("qwen3-moe-small", 2, 256), ("qwen3-next-small", 4, 256)]
)
def test_transformers_loads_every_tensor_and_generates_to_max_tokens(
    tmp_path: Path, preset: str, layers: int | None, hidden: int | None
) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    out = tmp_path / preset
    result = synth_model(SynthRequest(source=preset, out=out, weights="random", layers=layers, hidden=hidden))
    tok = transformers.AutoTokenizer.from_pretrained(out)
    model, info = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32,
                                                                    output_loading_info=True)
    assert not info["missing_keys"] and not info.get("mismatched_keys")  # our names and shapes are the real ones
    loaded = sum(p.numel() for p in model.parameters())
    assert loaded == result.parameters or (preset == "qwen3-next-small" and loaded < result.parameters)  # MTP skipped
    prompt = tok.apply_chat_template([{"role": "user", "content": "hello"}], add_generation_prompt=True,
                                     return_tensors="pt")
    ids = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    generated = model.generate(ids, max_new_tokens=16, do_sample=False)
    assert generated.shape[1] == ids.shape[1] + 16  # EOS is never chosen


def test_the_config_names_the_dtype_the_weights_are_written_in(tmp_path: Path) -> None:
    """`--dtype fp32` wrote float32 tensors under a config saying `torch_dtype: bfloat16`: engines load it as bf16,
    and `al collect` labels its curve by it."""
    out = synth_model(SynthRequest(source="tiny", out=tmp_path / "m", weights="random", dtype="fp32", seed=1)).out
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "float32"
    header_len = struct.unpack("<Q", (out / "model.safetensors").read_bytes()[:8])[0]
    header = json.loads((out / "model.safetensors").read_bytes()[8:8 + header_len])
    assert {v["dtype"] for k, v in header.items() if k != "__metadata__"} == {"F32"}
