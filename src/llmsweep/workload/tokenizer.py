"""Tokenizers: how a workload turns lengths into exact prompts.

Exact input lengths need a tokenizer on the client side. Two kinds serve here:

* `WordTokenizer` — built in, deterministic, no downloads. Its rule is one line: **every run of non-space
  characters, with the whitespace around it, is one token**. Vocabulary words therefore cost exactly one token each
  wherever they stand, lengths are exact by construction, and a server-side simulator counts the same tokens with
  `count_tokens(text)` (a `str.split`) without holding a vocabulary.
* `HFTokenizer` — a Hugging Face `tokenizer.json` (via the `tokenizers` package, imported lazily) from a local
  directory or a hub id, with the model's chat template.

Prompt synthesis builds text only from *filler words*: words that are exactly one token when preceded by a space
(`filler_words`). Joining `" " + word` pieces then never merges across words, so a block of k words is k tokens
wherever it lands — which is what makes hash-id blocks and fixed-length prompts exact.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from llmsweep.errors import ConfigError
from llmsweep.jsonline import load_json_file

log = logging.getLogger(__name__)

Message = dict[str, Any]


@runtime_checkable
class Tokenizer(Protocol):
    """What prompt synthesis needs from a tokenizer."""

    name: str

    @property
    def vocab_size(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def count_tokens(self, text: str) -> int: ...

    def apply_chat_template(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str: ...

    def filler_words(self) -> list[tuple[str, int]]:
        """(word, id) pairs such that `encode(" " + word) == [id]` and joined words never merge."""
        ...


# ---------------------------------------------------------------------------------------------------------------
# Built-in word tokenizer

_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"
_SPECIALS = ("<unk>", "<|im_start|>", "<|im_end|>")


def count_tokens(text: str) -> int:
    """Token count of `text` under the built-in rule (what `WordTokenizer.count_tokens` returns).

    A simulator that serves requests built with the word tokenizer counts prompt tokens with this function.
    """
    n = len(text.split())
    return n if n or not text else 1


def count_chat_tokens(messages: Sequence[Message], *, add_generation_prompt: bool = True) -> int:
    """Tokens of `messages` after the built-in ChatML template: content plus 3 per message (+2 for the prompt)."""
    total = sum(count_tokens(_content_text(m)) + 3 for m in messages)
    return total + (2 if add_generation_prompt else 0)


def _content_text(message: Message) -> str:
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


@functools.cache
def _word_vocabulary() -> tuple[str, ...]:
    """6,885 pronounceable two-syllable words (CV·CV and CV·CVC shapes), in a fixed order."""
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    words = [a + b for a, b in itertools.product(syllables, repeat=2)]
    words += [a + b + "n" for a, b in itertools.product(syllables[:40], repeat=2)]
    return tuple(words)


class WordTokenizer:
    """Deterministic built-in tokenizer: one token per whitespace-separated word (see the module doc).

    Ids: 0 `<unk>`, 1 `<|im_start|>`, 2 `<|im_end|>`, then the vocabulary words. Unknown words encode to `<unk>`,
    so `decode(encode(t))` keeps the token count (not the spelling) of arbitrary text. Its chat template is ChatML
    with spaces around the role marker, so every message costs its content plus exactly 3 tokens.
    """

    name = "llmsweep-words"

    def __init__(self) -> None:
        self._words = _SPECIALS + _word_vocabulary()
        self._ids = {w: i for i, w in enumerate(self._words)}

    @property
    def vocab_size(self) -> int:
        return len(self._words)

    def encode(self, text: str) -> list[int]:
        pieces = text.split()
        if not pieces:
            return [0] if text else []
        get = self._ids.get
        return [get(p, 0) for p in pieces]

    def decode(self, ids: Sequence[int]) -> str:
        words = self._words
        return " ".join(words[i] if 0 <= i < len(words) else "<unk>" for i in ids)

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def apply_chat_template(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        text = "".join(f"<|im_start|> {m['role']}\n{_content_text(m)} <|im_end|>\n" for m in messages)
        return text + ("<|im_start|> assistant\n" if add_generation_prompt else "")

    def filler_words(self) -> list[tuple[str, int]]:
        return [(w, i) for i, w in enumerate(self._words) if i >= len(_SPECIALS)]


# ---------------------------------------------------------------------------------------------------------------
# Hugging Face tokenizer

_FILLER_RE = re.compile(r"^[a-z]{3,10}$")


class HFTokenizer:
    """A Hugging Face fast tokenizer (`tokenizer.json`) plus its chat template.

    The chat template is rendered with jinja2 (as the servers render it); without jinja2, rendering one is an error
    that says to install it.
    """

    def __init__(self, backend: Any, *, name: str, chat_template: str | None = None) -> None:
        self._tok = backend
        self.name = name
        self.chat_template = chat_template
        self._fillers: list[tuple[str, int]] | None = None

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=True))

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def count_tokens(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def apply_chat_template(self, messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
        template = self.chat_template
        if not template:
            raise ConfigError(
                f"tokenizer {self.name!r} has no chat template",
                fix="use a tokenizer directory with chat_template.jinja (or chat_template in tokenizer_config.json),"
                " or turn use_chat_template off",
            )
        try:
            import jinja2
        except ModuleNotFoundError:
            # never a guess at it: a ChatML template may add text of its own (Qwen2.5's default system message),
            # and a prompt counted without it reaches the server that much longer than its recorded length
            raise ConfigError(
                f"rendering the chat template of {self.name!r} needs jinja2",
                fix="pip install jinja2 (it ships with transformers and with llmsweep[hf])",
            ) from None
        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(template).render(
            messages=list(messages), add_generation_prompt=add_generation_prompt, bos_token="", eos_token=""
        )

    def filler_words(self) -> list[tuple[str, int]]:
        """Lower-case ASCII words of 3–10 letters that encode to one token after a space, verified by encoding."""
        if self._fillers is None:
            vocab: dict[str, int] = self._tok.get_vocab(with_added_tokens=False)
            candidates: dict[str, int] = {}
            for tid in vocab.values():
                text = self._tok.decode([tid])
                if text.startswith(" ") and _FILLER_RE.match(text[1:]):
                    candidates.setdefault(text[1:], tid)
            words = sorted(candidates)
            encoded = self._tok.encode_batch([" " + w for w in words], add_special_tokens=False)
            fillers = [(w, candidates[w]) for w, enc in zip(words, encoded, strict=True) if enc.ids == [candidates[w]]]
            # Two-word check on a sample guards against tokenizers whose pre-tokenizer merges across spaces.
            probe = " ".join(w for w, _ in fillers[:64])
            if len(self._tok.encode(" " + probe, add_special_tokens=False).ids) != min(64, len(fillers)):
                raise ConfigError(
                    f"tokenizer {self.name!r} merges words across spaces; exact-length prompts are not possible",
                    fix="use the built-in tokenizer (leave tokenizer unset) or a BPE/WordPiece tokenizer",
                )
            if len(fillers) < 256:
                raise ConfigError(
                    f"tokenizer {self.name!r} has only {len(fillers)} single-token words; too few for prompt text",
                    fix="use the built-in tokenizer (leave tokenizer unset)",
                )
            self._fillers = fillers
        return self._fillers


def chat_template_from(directory: Path) -> str | None:
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    config = directory / "tokenizer_config.json"
    if config.is_file():
        template = load_json_file(config).get("chat_template")
        if isinstance(template, str):
            return template
        if isinstance(template, list) and template:  # named templates: take "default"
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            return named.get("default") or next(iter(named.values()), None)
    return None


def load_hf_tokenizer(source: str | Path) -> HFTokenizer:
    """Load a tokenizer from a local directory (or `tokenizer.json` path) or a Hugging Face hub id.

    Hub ids are fetched with `huggingface_hub` (only `tokenizer.json`, `tokenizer_config.json` and
    `chat_template.jinja`), which works only where the hub is reachable or the files are already cached.
    """
    try:
        from tokenizers import Tokenizer as _Backend
    except ModuleNotFoundError:
        raise ConfigError(
            f"loading tokenizer {str(source)!r} needs the 'tokenizers' package",
            fix="pip install 'llmsweep[hf]' (or leave tokenizer unset for the built-in one)",
        ) from None
    path = Path(source)
    if path.is_file():
        path = path.parent
    if not path.is_dir() and str(source).startswith(("/", "./", "../", "~")):
        # a path, not a hub id (`org/name`): asking the hub for it said only that the id was malformed
        raise ConfigError(f"tokenizer {str(source)!r}: no such file or directory",
                          fix="pass an existing tokenizer directory (or its tokenizer.json), or a hub id (org/name)")
    if not path.is_dir():
        try:
            path = _download_tokenizer(str(source))
        except ConfigError:
            fallback = _transformers_backend(str(source))
            if fallback is None:
                raise
            return fallback
    tokenizer_json = path / "tokenizer.json"
    if not tokenizer_json.is_file():
        missing = ConfigError(
            f"no tokenizer.json in {path}",
            fix="point tokenizer at a directory holding a fast tokenizer (tokenizer.json), or install transformers"
            " for other tokenizer formats",
        )
        try:
            fallback = _transformers_backend(str(path))
        except ConfigError as exc:  # transformers could not read the folder either: say what is missing first
            raise ConfigError(f"no tokenizer.json in {path}, and transformers could not load it: {exc.message}",
                              fix=missing.fix) from exc
        if fallback is not None:
            return fallback
        raise missing
    backend = _Backend.from_file(str(tokenizer_json))
    return HFTokenizer(backend, name=str(source), chat_template=chat_template_from(path))


def _transformers_backend(source: str) -> HFTokenizer | None:
    """A tokenizer through `transformers.AutoTokenizer` (sentencepiece-only repos), or None without transformers."""
    try:
        from transformers import AutoTokenizer
    except ModuleNotFoundError:
        return None
    try:
        auto = AutoTokenizer.from_pretrained(source, trust_remote_code=True)
    except Exception as exc:  # missing files, network: one message for the user
        raise ConfigError(f"could not load tokenizer {source!r} with transformers: {exc}",
                          fix="check the id or path (HF_TOKEN for gated models)") from exc
    backend = getattr(auto, "backend_tokenizer", None)
    if backend is None:
        raise ConfigError(f"tokenizer {source!r} has no fast (Rust) backend; exact-length prompts need one",
                          fix="use a model with tokenizer.json, or the built-in tokenizer")
    return HFTokenizer(backend, name=source, chat_template=getattr(auto, "chat_template", None))


def _download_tokenizer(repo_id: str) -> Path:
    try:
        from huggingface_hub import hf_hub_download
    except ModuleNotFoundError:
        raise ConfigError(
            f"tokenizer {repo_id!r} is not a local directory and huggingface_hub is not installed",
            fix="pip install 'llmsweep[hf]', or pass a local tokenizer directory",
        ) from None
    try:
        first = Path(hf_hub_download(repo_id, "tokenizer.json"))
    except Exception as exc:  # network, auth, missing repo: all mean the same to the user
        raise ConfigError(
            f"could not fetch tokenizer {repo_id!r} from the Hugging Face hub: {exc}",
            fix="check the id and network access (HF_TOKEN for gated models), or pass a local directory",
        ) from exc
    for optional in ("tokenizer_config.json", "chat_template.jinja"):
        try:
            hf_hub_download(repo_id, optional)
        except Exception:  # optional files: absent is fine
            log.debug("tokenizer %s has no %s", repo_id, optional)
    return first.parent


@functools.lru_cache(maxsize=8)
def get_tokenizer(source: str | None = None) -> Tokenizer:
    """The tokenizer a config names: None → the built-in `WordTokenizer`; else `load_hf_tokenizer(source)`.

    Cached per process, because workloads are rebuilt in every client worker and scanning a vocabulary for filler
    words costs a fraction of a second.
    """
    if source is None or source in ("", "builtin", WordTokenizer.name):
        return WordTokenizer()
    return load_hf_tokenizer(source)


def chat_overhead(tokenizer: Tokenizer, role: str = "user") -> int:
    """Tokens the chat template adds around one message of `role` plus the generation prompt.

    Measured as `len(encode(template([msg("x")]))) - len(encode(" x"))`-style difference on a filler word, so it
    is additive for filler text (which never merges with its neighbours).
    """
    word = tokenizer.filler_words()[0][0]
    with_content = tokenizer.encode(tokenizer.apply_chat_template([{"role": role, "content": " " + word}]))
    return len(with_content) - 1
