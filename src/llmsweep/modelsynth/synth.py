"""Write a model directory an engine can serve with nothing downloaded: config, tokenizer, optional random weights.

This is how llmsweep benchmarks a real architecture on a machine with no network: vLLM and SGLang fill the weights
themselves under `--load-format dummy` (`weights="none"`), transformers-based servers read the random safetensors
written here (`weights="random"`). A provenance file records what was built from what, so a result can name it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmsweep import __version__
from llmsweep.errors import ConfigError, undecodable_line
from llmsweep.jsonline import load_json_file
from llmsweep.modelsynth.architectures import (
    DRAFT_PRESET,
    PRESETS,
    SUPPORTED_MODEL_TYPES,
    Config,
    check_heads,
    model_type,
    preset_config,
    scale_config,
)
from llmsweep.modelsynth.outdir import DRAFT_DIR, staged_out
from llmsweep.modelsynth.tensors import parameter_count, tensor_specs
from llmsweep.modelsynth.tokenizer import (
    BOS_TOKEN,
    EOS_TOKEN,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    TokenizerFiles,
    copy_tokenizer,
    resolve_tokenizer,
    write_tokenizer,
)
from llmsweep.modelsynth.weights import DEFAULT_SHARD_BYTES, write_random_weights

log = logging.getLogger(__name__)

PROVENANCE_FILE = "llmsweep-synth.json"


class SynthRequest(BaseModel):
    """What to build; the CLI's options map one to one onto these fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="A preset name (see `llmsweep model synth --help`) or a path to a config.json.")
    out: Path = Field(description="Directory to write; must be empty or absent unless forced.")
    weights: Literal["random", "none"] = Field(
        "none", description="`none`: config + tokenizer for --load-format dummy; `random`: safetensors too."
    )
    draft: bool = Field(False, description="Also write a small Llama draft model of the same vocabulary in out/draft.")
    layers: int | None = Field(None, ge=1, description="Override the number of decoder layers.")
    hidden: int | None = Field(None, ge=64, description="Override the hidden size (heads and MLP scale with it).")
    vocab: int | None = Field(
        None, ge=512,
        description="Vocabulary of model and tokenizer (default: the config's). 32000 is the packaged tokenizer, a "
        "larger one pads it with plain added tokens, a smaller one retrains it (seconds).",
    )
    seed: int = Field(0, ge=0, description="Seed of the random weights and of a retrained tokenizer.")
    dtype: Literal["bf16", "fp16", "fp32"] = Field("bf16", description="Storage dtype of random weights.")
    retrain_tokenizer: bool = Field(False, description="Train a fresh tokenizer instead of the packaged one.")
    shard_bytes: int = Field(DEFAULT_SHARD_BYTES, ge=1, description="Largest safetensors shard, in bytes.")
    force: bool = Field(False, description="Write into a non-empty directory, replacing files of the same name.")


class SynthResult(BaseModel):
    """What was written, as recorded in the provenance file."""

    model_config = ConfigDict(extra="forbid")

    out: Path
    source: str
    architecture: str
    model_type: str
    parameters: int | None = Field(description="Parameter count; None for an architecture llmsweep cannot count.")
    vocab_size: int
    weights: str
    dtype: str | None
    seed: int
    tokenizer: dict[str, Any]
    files: list[str]
    llmsweep_version: str
    created_utc: str
    draft: SynthResult | None = None


def load_source_config(source: str) -> tuple[Config, str]:
    """The config named by `source` (preset, config.json or a directory holding one) and a label for provenance."""
    if source in PRESETS:
        return preset_config(source), f"preset:{source}"
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ConfigError(
            f"model source {source!r} is neither a preset nor a config.json file",
            fix=f"use one of {', '.join(PRESETS)}, or the path of a Hugging Face config.json",
        )
    try:
        config = load_json_file(path)  # a Hugging Face config.json, a BOM at its start skipped
    except UnicodeDecodeError as exc:  # (JSON is UTF-8 text: a binary file, a config saved as Latin-1)
        line = undecodable_line(exc)
        raise ConfigError(f"{path}{f':{line}' if line else ''}: not UTF-8 text ({exc.reason})",
                          fix="pass a valid Hugging Face config.json (UTF-8 JSON)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}", fix="pass a valid Hugging Face config.json") from exc
    if not isinstance(config, dict) or "hidden_size" not in config or "vocab_size" not in config:
        raise ConfigError(
            f"{path} is not a causal-LM config (no hidden_size/vocab_size)",
            fix="pass the text model's config.json",
        )
    if "num_attention_heads" in config and config.get("num_key_value_heads") is None:
        # optional in a Hugging Face config: absent, the model is multi-head (one KV head per query head), as
        # transformers reads it; every shape below reads the field
        config["num_key_value_heads"] = config["num_attention_heads"]
    check_heads(config, str(path))  # before --hidden rescales them from a head size that is not one
    return config, f"config:{path}"


def _with_tokens(config: Config, tok: TokenizerFiles) -> Config:
    """Point the config's special-token ids at our tokenizer (a given config's ids name another tokenizer)."""
    cfg = dict(config)
    cfg["vocab_size"] = tok.vocab_size
    cfg["bos_token_id"] = tok.token_id(PAD_TOKEN)  # as Qwen does: no BOS is prepended, the id is for completeness
    cfg["eos_token_id"] = tok.token_id(EOS_TOKEN)
    cfg["pad_token_id"] = tok.token_id(PAD_TOKEN)
    return cfg


def _generation_config(cfg: Config) -> dict[str, Any]:
    # Token ids only: vLLM takes sampling defaults (max_tokens, temperature) from this file, and a benchmark must
    # get exactly what each request asks for.
    return {key: cfg[key] for key in ("bos_token_id", "eos_token_id", "pad_token_id")}


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def _write_model(
    out: Path,
    cfg: Config,
    tok: TokenizerFiles,
    *,
    request: SynthRequest,
    source: str,
    seed: int,
    tokenizer_from: Path | None,
) -> SynthResult:
    files = ["config.json", "generation_config.json"]
    if request.weights == "random":  # the config names the dtype the weights are written in (engines load as it says)
        from llmsweep.modelsynth.weights import torch_dtype

        cfg = {**cfg, "torch_dtype": torch_dtype(request.dtype)}
    _write_json(out / "config.json", cfg)
    _write_json(out / "generation_config.json", _generation_config(cfg))
    if tokenizer_from is None:
        files += write_tokenizer(tok, out)
    else:
        copy_tokenizer(tokenizer_from, out)
        files += ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"]
    params = parameter_count(cfg) if cfg.get("model_type") in SUPPORTED_MODEL_TYPES else None
    if request.weights == "random":
        written = write_random_weights(
            list(tensor_specs(cfg)),
            out,
            seed=seed,
            dtype=request.dtype,
            zero_lm_head_rows=[tok.token_id(t) for t in SPECIAL_TOKENS],
            shard_bytes=request.shard_bytes,
        )
        files += written.files
    return SynthResult(
        out=out,
        source=source,
        architecture=str((cfg.get("architectures") or ["?"])[0]),
        model_type=str(cfg.get("model_type")),
        parameters=params,
        vocab_size=tok.vocab_size,
        weights=request.weights,
        dtype=request.dtype if request.weights == "random" else None,
        seed=seed,
        tokenizer={"source": tok.source, "vocab_size": tok.vocab_size, "sha256": tok.sha256,
                   "special_tokens": {"bos": BOS_TOKEN, "eos": EOS_TOKEN, "pad": PAD_TOKEN}},
        files=[*files, PROVENANCE_FILE],
        llmsweep_version=__version__,
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def draft_config(target: Config, tok: TokenizerFiles) -> Config:
    """The `model synth --with-draft` drafter: a small Llama with the target's vocabulary and context, never wider
    than it."""
    width = min(int(preset_config(DRAFT_PRESET)["hidden_size"]), max(64, int(target["hidden_size"]) // 64 * 64))
    cfg = _with_tokens(scale_config(preset_config(DRAFT_PRESET), hidden=width), tok)
    # vLLM caps speculative decoding at the draft's context length: let it cover the target's.
    cfg["max_position_embeddings"] = max(
        int(cfg["max_position_embeddings"]), int(target.get("max_position_embeddings", 0))
    )
    return cfg


def _write_draft(request: SynthRequest, target: Config, tok: TokenizerFiles, staging: Path) -> SynthResult:
    draft_dir = staging / DRAFT_DIR
    draft_dir.mkdir(exist_ok=True)
    draft = _write_model(
        draft_dir, draft_config(target, tok), tok, request=request, source=f"preset:{DRAFT_PRESET}",
        seed=request.seed + 1, tokenizer_from=staging,
    ).model_copy(update={"out": request.out / DRAFT_DIR})
    _write_json(draft_dir / PROVENANCE_FILE, draft.model_dump(mode="json"))
    return draft


def synth_model(request: SynthRequest) -> SynthResult:
    """Build the model directory (and its draft) that `request` describes; return what was written."""
    config, source = load_source_config(request.source)
    config = scale_config(config, layers=request.layers, hidden=request.hidden)
    vocab = request.vocab or int(config["vocab_size"])
    tok = resolve_tokenizer(vocab, retrain=request.retrain_tokenizer, seed=request.seed)
    cfg = _with_tokens(config, tok)
    if request.weights == "random":
        model_type(cfg)  # fail on an architecture whose tensors are unknown before writing anything
    with staged_out(request.out, request.force) as staging:  # whole or absent: see outdir.py
        result = _write_model(
            staging, cfg, tok, request=request, source=source, seed=request.seed, tokenizer_from=None,
        ).model_copy(update={"out": request.out})
        if request.draft:
            result = result.model_copy(update={"draft": _write_draft(request, cfg, tok, staging)})
        _write_json(staging / PROVENANCE_FILE, result.model_dump(mode="json"))
    log.info("wrote %s (%s, %s parameters)", request.out, result.architecture, result.parameters)
    return result
