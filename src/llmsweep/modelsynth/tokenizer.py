"""An offline byte-level BPE tokenizer with a ChatML chat template.

Engines refuse to start without a tokenizer, and nothing may be downloaded, so llmsweep ships one trained on
synthetic text (prose, numbers, code and JSON, so agentic prompts tokenize at realistic rates). Training takes
seconds; the packaged copy is used unless a different vocabulary size is asked for.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import logging
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from llmsweep.errors import ConfigError

log = logging.getLogger(__name__)

PAD_TOKEN = "<|endoftext|>"
BOS_TOKEN = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN)
"""Trained first, so their ids are 0, 1, 2 in every tokenizer built here."""

PACKAGED_VOCAB = 32000
"""The packaged tokenizer's size: TinyLlama's vocabulary, so `llama-1b` has a realistic lm_head."""

MODEL_MAX_LENGTH = 131072

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{%- set text = message['content'] -%}"
    "{%- elif message['content'] is none -%}{%- set text = '' -%}"
    "{%- else -%}{%- set text = message['content'] | selectattr('type', 'equalto', 'text')"
    " | map(attribute='text') | join('') -%}{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + text + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)
"""ChatML, as Qwen models use it; list-of-parts content (OpenAI style) keeps its text parts."""

_COMMON_TEXT = (
    "the of and to a in is it you that he was for on are with as his they be at one have this from or had by not"
    " word but what some we can out other were all there when up use your how said an each she which do their time"
    " if will way about many then them write would like so these her long make thing see him two has look more day"
    " could go come did number sound no most people my over know water than call first who may down side been now"
    " find any new work part take get place made live where after back little only round man year came show every"
    " good me give our under name very through just form sentence great think say help low line differ turn cause"
    " much mean before move right boy old too same tell does set three want air well also play small end put home"
    " read hand port large spell add even land here must big high such follow act why ask men change went light"
    " kind off need house picture try us again animal point mother world near build self earth father model data"
    " request response server token user system function return value error file code test result question"
    " answer"
)
_COMMON: tuple[str, ...] = tuple(_COMMON_TEXT.split())

_PACKAGE = "llmsweep.modelsynth"
_PACKAGED_FILE = "tokenizer.json.gz"


@dataclass(frozen=True)
class TokenizerFiles:
    """A serialised tokenizer: the `tokenizer.json` text and where it came from."""

    tokenizer_json: str
    vocab_size: int
    source: str  # "packaged" or "trained"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.tokenizer_json.encode()).hexdigest()

    def token_id(self, token: str) -> int:
        """The id of a special token, read from the serialised added-tokens table."""
        for entry in json.loads(self.tokenizer_json)["added_tokens"]:
            if entry["content"] == token:
                return int(entry["id"])
        raise ConfigError(f"tokenizer has no special token {token!r}", fix="retrain it with `--retrain-tokenizer`")


def synthetic_corpus(n_lines: int, seed: int = 0) -> Iterator[str]:
    """Lines of made-up but statistically plausible text: Zipf-distributed words, numbers, code and JSON."""
    rnd = random.Random(seed)
    onsets = ["", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "tr", "ch"]
    nuclei = ["a", "e", "i", "o", "u", "ai", "ou", "ea", "ie"]
    codas = ["", "", "n", "r", "s", "t", "l", "nd", "ng"]
    syllables = [o + n + c for o in onsets for n in nuclei for c in codas]
    made_up = sorted({"".join(rnd.choices(syllables, k=rnd.randint(1, 3))) for _ in range(40000)} - set(_COMMON))
    rnd.shuffle(made_up)
    words = list(_COMMON) + made_up  # real function words rank first, as in any natural language
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(words))))
    idents = ["x", "i", "n", "self", "data", "result", "value", "items", "config", "request", "model", "path"]
    for _ in range(n_lines):
        kind = rnd.random()
        if kind < 0.70:
            ws = rnd.choices(words, cum_weights=cum, k=rnd.randint(4, 28))
            if rnd.random() < 0.3:
                ws.insert(rnd.randrange(len(ws)), str(rnd.randint(0, 10 ** rnd.randint(1, 6))))
            line = " ".join(ws)
            yield line[0].upper() + line[1:] + rnd.choice([".", ".", ",", "!", "?", ";", ":"])
        elif kind < 0.85:
            name = rnd.choice(words[:2000])
            arg = rnd.choice(idents)
            yield rnd.choice(
                [
                    f"def {name}_{arg}({arg}, {rnd.choice(idents)}=None):\n    return {arg}.{name}()",
                    f"    for {arg} in {rnd.choice(idents)}:\n        if {arg} > {rnd.randint(0, 99)}:",
                    f"{arg} = {{'{name}': {rnd.randint(0, 999)}, '{rnd.choice(words[:500])}': [{arg}]}}",
                    f"    {arg}.{name}({rnd.random():.3f})  # {' '.join(rnd.choices(words[:3000], k=4))}",
                ]
            )
        else:
            keys = rnd.choices(words[:1000], k=rnd.randint(1, 4))
            body = ", ".join(f'"{k}": "{rnd.choice(words)}"' if rnd.random() < 0.6 else f'"{k}": {rnd.randint(0, 9999)}'
                             for k in keys)
            yield "{" + body + "}"


def train_tokenizer(vocab_size: int, *, n_lines: int | None = None, seed: int = 0) -> TokenizerFiles:
    """Train a byte-level BPE tokenizer of `vocab_size` entries (specials included) on the synthetic corpus.

    The corpus grows with the vocabulary (4 lines a token, 120k at most: the packaged 32000 uses 120k), so a small
    tokenizer trains in a second.
    """
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "training a tokenizer needs the `tokenizers` package", fix="pip install tokenizers"
        ) from exc
    if vocab_size < 512:
        raise ConfigError(f"--vocab {vocab_size} is too small for a byte-level BPE", fix="use --vocab 512 or more")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = n_lines if n_lines is not None else min(120_000, max(10_000, 4 * vocab_size))
    tok.train_from_iterator(synthetic_corpus(lines, seed), trainer=trainer)
    size = tok.get_vocab_size()
    if size != vocab_size:
        log.warning("corpus yielded %d tokens, fewer than the %d asked for", size, vocab_size)
    return TokenizerFiles(tokenizer_json=tok.to_str(), vocab_size=size, source="trained")


def packaged_tokenizer() -> TokenizerFiles:
    """The tokenizer shipped with llmsweep (32000 entries, gzip-compressed package data)."""
    blob = (resources.files(_PACKAGE) / "data" / "tokenizer" / _PACKAGED_FILE).read_bytes()
    text = gzip.decompress(blob).decode()
    vocab = len(json.loads(text)["model"]["vocab"])
    return TokenizerFiles(tokenizer_json=text, vocab_size=vocab, source="packaged")


def pad_tokenizer(files: TokenizerFiles, vocab_size: int) -> TokenizerFiles:
    """Grow a tokenizer to exactly `vocab_size` with plain added tokens `<|extra_N|>`.

    A model whose vocabulary is larger than its tokenizer can sample ids the tokenizer cannot decode; with random
    weights it does so all the time, and streamed text then goes missing. Plain (non-special) added tokens decode to
    visible text, so every generated id yields a chunk.
    """
    from tokenizers import AddedToken, Tokenizer

    if vocab_size <= files.vocab_size:
        return files
    tok = Tokenizer.from_str(files.tokenizer_json)
    start = files.vocab_size
    tok.add_tokens([AddedToken(f"<|extra_{i}|>", special=False, normalized=False) for i in range(vocab_size - start)])
    return TokenizerFiles(tokenizer_json=tok.to_str(), vocab_size=tok.get_vocab_size(), source=f"{files.source}+padded")


def packaged_path() -> Path:
    """Where the packaged tokenizer lives in the source tree (for rebuilding it)."""
    return Path(__file__).resolve().parent / "data" / "tokenizer" / _PACKAGED_FILE


def rebuild_packaged(path: Path | None = None) -> TokenizerFiles:
    """Retrain the packaged tokenizer from the synthetic corpus and write it, byte-reproducibly (gzip mtime 0).

    Training is deterministic, so a change to the corpus shows up as a changed file: run this after editing
    `synthetic_corpus` and commit the result.
    """
    files = train_tokenizer(PACKAGED_VOCAB)
    (path or packaged_path()).write_bytes(gzip.compress(files.tokenizer_json.encode(), 9, mtime=0))
    return files


def resolve_tokenizer(vocab_size: int, *, retrain: bool = False, seed: int = 0) -> TokenizerFiles:
    """A tokenizer of exactly `vocab_size` entries, so the model never samples an id the tokenizer cannot decode.

    The packaged one serves 32000 and, padded with added tokens, any larger size; a smaller size (or `retrain`)
    trains a fresh one, which takes seconds.
    """
    if not retrain and vocab_size >= PACKAGED_VOCAB:
        files = packaged_tokenizer()
    else:
        log.info("training a %d-token BPE tokenizer (takes seconds)", vocab_size)
        files = train_tokenizer(vocab_size, seed=seed)
    return pad_tokenizer(files, vocab_size)


def tokenizer_config(files: TokenizerFiles) -> dict[str, object]:
    """`tokenizer_config.json`: the class, special tokens and chat template transformers, vLLM and SGLang read."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MODEL_MAX_LENGTH,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(files.token_id(t)): {
                "content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                "special": True,
            }
            for t in SPECIAL_TOKENS
        },
    }


def write_tokenizer(files: TokenizerFiles, out: Path) -> list[str]:
    """Write the tokenizer files into `out`; return their names."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(files.tokenizer_json)
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(files), indent=2) + "\n")
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    specials = {"eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN}
    (out / "special_tokens_map.json").write_text(json.dumps(specials, indent=2) + "\n")
    return ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"]


def copy_tokenizer(src: Path, out: Path) -> None:
    """Copy an already-written tokenizer (the draft model shares the target's)."""
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
        shutil.copy2(src / name, out / name)
