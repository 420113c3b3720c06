"""What a local checkpoint's weights are, read from its folder: the one reader that `al collect` states a curve's
`precision:` with and `input.weights-precision` checks a recipe's `precision` against.

llmsweep's own records first (`llmsweep-import.json`: a GGUF file dequantised to a dtype), then a quantisation the
folder names (ModelOpt's `hf_quant_config.json`; config.json's `quantization_config`: compressed-tensors, AMD Quark,
a `quant_method`/`quant_algo`/`fmt`, `bits`), then config.json's `torch_dtype` (a quantised checkpoint's `torch_dtype`
is that of its unquantised tensors, so it is read last).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmsweep.catalog.precision import format_named_in
from llmsweep.errors import ConfigError
from llmsweep.jsonline import load_json_file


@dataclass(frozen=True, slots=True)
class Weights:
    """A checkpoint's weight format and where it was read."""

    word: str | None
    """The format (`fp8`, `mxfp4`, `bf16`, `int4`, ...); None where llmsweep's import record names no dtype, or the
    folder is quantised in a way not read here (its `torch_dtype` is then not the weights' format)."""
    where: str
    """Which file of the folder said it, and how (`config.json of /m`)."""

    def said(self, default: str) -> str:
        """``fp8 (config.json quantization_config of /m: quant_method fp8)``; `default` where no word was read."""
        return f"{self.word or default} ({self.where})"


def read_weights(folder: Path, *, why: str) -> Weights | None:
    """What the weights in `folder` are, None where nothing there says (no folder, no records, no dtype). A record that
    does not read as a JSON object is refused (ConfigError naming it and `why` it is read)."""
    imported = folder / "llmsweep-import.json"
    if imported.is_file():
        doc = _json_record(imported, why)
        quants = "/".join(doc.get("quantizations") or [])
        return Weights(doc.get("dtype"), f"llmsweep-import.json: {doc.get('source')} dequantised from {quants}")
    config = folder / "config.json"
    doc = _json_record(config, why) if config.is_file() else {}
    quantised = _quantisation(folder, doc, why)
    if quantised is not None:  # a quantised checkpoint's torch_dtype is that of its unquantised tensors
        return quantised
    qc = doc.get("quantization_config")
    if isinstance(qc, dict) and qc:  # quantised in a way not read here (bitsandbytes nf4, torchao, hqq): not its dtype
        method = qc.get("quant_method") or qc.get("quant_type") or "a quantisation"
        return Weights(None, f"config.json quantization_config of {folder}: {method}, whose format is not read")
    dtype = doc.get("torch_dtype") or doc.get("dtype")
    if dtype:
        short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(dtype), str(dtype))
        return Weights(short, f"config.json of {folder}")
    return None


def _json_record(path: Path, why: str) -> dict[str, Any]:
    """A JSON object the model directory holds (the weights' own records); one that does not read as such is refused
    naming it and `why` it is read, not a traceback."""
    try:
        doc = load_json_file(path)
    except (OSError, ValueError) as exc:  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        raise ConfigError(f"{path} cannot be read as JSON ({exc}): {why}",
                          fix=f"repair {path.name} (or remove it where the model does not need it)") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} holds a JSON {type(doc).__name__}, not an object: {why}", fix=f"repair {path.name}")
    return doc


def _weights_word(qc: dict[str, Any]) -> str | None:
    """compressed-tensors: the weight scheme of the first config group (``{type: float, num_bits: 8}`` -> fp8)."""
    groups = qc.get("config_groups")
    if not isinstance(groups, dict):
        return None
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, dict) else None
        if isinstance(weights, dict) and weights.get("num_bits"):
            bits, kind = int(weights["num_bits"]), str(weights.get("type", "int"))
            if kind == "float":
                return {8: "fp8", 4: "nvfp4" if weights.get("group_size") == 16 else "fp4"}.get(bits)
            return {8: "int8", 4: "int4"}.get(bits)
    return None


def _quark_word(qc: dict[str, Any]) -> str | None:
    """AMD Quark (``quant_method: quark``): the weight spec of ``global_quant_config`` (a list: its first), as vLLM and
    SGLang read it: ``fp4`` in groups of 32 with E8M0 scales is MXFP4, another ``fp4`` a bare fp4, ``fp8_e4m3`` fp8,
    ``int4``/``uint4`` int4, ``int8`` int8 (`catalog.precision.format_named_in`)."""
    spec = qc.get("global_quant_config")
    weight = spec.get("weight") if isinstance(spec, dict) else None
    if isinstance(weight, list):
        weight = weight[0] if weight else None
    if not isinstance(weight, dict) or not isinstance(weight.get("dtype"), str):
        return None
    dtype = weight["dtype"].lower()
    if dtype == "fp4":
        return "mxfp4" if weight.get("group_size") == 32 and weight.get("scale_format") == "e8m0" else "fp4"
    return format_named_in(dtype)


def _quantisation(folder: Path, config: dict[str, Any], why: str) -> Weights | None:
    """The served precision of a quantised checkpoint and where it was read: ModelOpt's ``hf_quant_config.json``
    (``quant_algo``), else config.json's ``quantization_config`` (``quant_method``, ``quant_algo``, ``fmt``,
    compressed-tensors' weight scheme or ``format``, AMD Quark's global weight spec, ``bits``)."""
    hf = folder / "hf_quant_config.json"
    if hf.is_file():
        doc = _json_record(hf, why)
        quant = doc["quantization"] if isinstance(doc.get("quantization"), dict) else doc
        algo = str(quant.get("quant_algo") or "")
        word = format_named_in(algo)
        if word:
            return Weights(word, f"hf_quant_config.json of {folder}: quant_algo {algo}")
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method") or "")
    if method == "compressed-tensors" and (word := _weights_word(qc)):
        return Weights(word, f"config.json quantization_config of {folder}: compressed-tensors weights")
    if method == "quark" and (word := _quark_word(qc)):
        return Weights(word, f"config.json quantization_config of {folder}: quark global weights")
    for key in ("quant_algo", "quant_method", "fmt", "weight_dtype", "format"):
        value = qc.get(key)
        if isinstance(value, str) and (word := format_named_in(value)):
            return Weights(word, f"config.json quantization_config of {folder}: {key} {value}")
    bits = qc.get("bits") or qc.get("w_bit")
    if isinstance(bits, int) and bits in (4, 8):
        return Weights(f"int{bits}", f"config.json quantization_config of {folder}: {method or 'quantised'} {bits}-bit")
    return None
