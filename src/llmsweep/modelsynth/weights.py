"""Random weights as safetensors shards, made with numpy alone (no torch on the machine that builds them).

bf16 is the default because it is what the engines serve these models in: numpy has no bfloat16, so values are drawn
in float32, rounded to nearest-even into their upper 16 bits, and handed to `safetensors.serialize_file` with dtype
`bfloat16` (the library's own writer, which its torch front-end uses too). fp16 and fp32 are there for loaders that
want a numpy-native dtype. The lm_head rows of special tokens are zeroed so greedy decoding never picks EOS and every
request runs to `max_tokens`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from llmsweep.errors import ConfigError
from llmsweep.modelsynth.tensors import Init, TensorSpec

log = logging.getLogger(__name__)

DType = Literal["bf16", "fp16", "fp32"]

_ST_DTYPE: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}


def torch_dtype(dtype: str) -> str:
    """The `torch_dtype` a config.json names for weights stored as `dtype` (`bf16` -> `bfloat16`): the safetensors
    dtype of the tensors written."""
    return _ST_DTYPE[dtype]
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
DEFAULT_SHARD_BYTES = 2 * 1024**3
INIT_STD = 0.02


@dataclass(frozen=True)
class WrittenWeights:
    files: list[str]
    total_bytes: int
    parameters: int


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bit patterns (uint16), rounding to nearest, ties to even. In place on one scratch array:
    the expression form allocated four arrays the tensor's size (1.3 s of SmolLM2's import on a 2-core machine, 0.5
    s this way), with the same bits (uint32 wraps alike)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits >> np.uint32(16)
    rounded &= np.uint32(1)
    rounded += np.uint32(0x7FFF)
    rounded += bits
    rounded >>= np.uint32(16)
    return rounded.astype(np.uint16)


def _fill(spec: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    if spec.init is Init.ONES:
        return np.ones(spec.shape, dtype=np.float32)
    if spec.init is Init.ZEROS:
        return np.zeros(spec.shape, dtype=np.float32)
    return rng.standard_normal(spec.shape, dtype=np.float32) * np.float32(INIT_STD)


def _encode(values: np.ndarray, dtype: DType) -> np.ndarray:
    """The array whose raw little-endian bytes are the tensor's storage in `dtype`."""
    if dtype == "bf16":
        return to_bf16_bits(values)
    return np.ascontiguousarray(values, dtype=np.float16 if dtype == "fp16" else np.float32)


def _serialize_entry(dtype: DType, shape: tuple[int, ...], data: np.ndarray) -> object:
    """One entry of `safetensors.serialize_file`'s dict: a `TensorSpec` (0.8+) or the older dict of bytes."""
    import safetensors

    spec_type = getattr(safetensors, "TensorSpec", None)
    if spec_type is not None:
        return spec_type(dtype=_ST_DTYPE[dtype], shape=list(shape), data_ptr=data.ctypes.data, data_len=data.nbytes)
    return {"dtype": _ST_DTYPE[dtype], "shape": list(shape), "data": data.tobytes()}


@dataclass(frozen=True)
class NamedTensor:
    """A tensor to write: its name, its shape and how to make its float32 values (called once, when it is written)."""

    name: str
    shape: tuple[int, ...]
    values: Callable[[], np.ndarray]

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _shards(tensors: Iterable[NamedTensor], dtype: DType, shard_bytes: int) -> Iterator[list[NamedTensor]]:
    """Group tensors in order into shards of at most `shard_bytes` (a single larger tensor gets its own shard)."""
    shard: list[NamedTensor] = []
    size = 0
    for tensor in tensors:
        nbytes = tensor.numel * _BYTES[dtype]
        if shard and size + nbytes > shard_bytes:
            yield shard
            shard, size = [], 0
        shard.append(tensor)
        size += nbytes
    if shard:
        yield shard


def write_weights(
    tensors: Sequence[NamedTensor],
    out: Path,
    *,
    dtype: DType = "bf16",
    shard_bytes: int = DEFAULT_SHARD_BYTES,
) -> WrittenWeights:
    """Write `tensors` in `dtype`; one `model.safetensors`, or shards plus `model.safetensors.index.json`.

    Each tensor's values are made when its shard is written, so only one shard is in memory at a time.
    """
    try:
        from safetensors import serialize_file
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "writing weights needs the `safetensors` package", fix="pip install safetensors, or use --weights none"
        ) from exc
    if dtype not in _ST_DTYPE:
        raise ConfigError(f"unknown weight dtype {dtype!r}", fix=f"use one of {', '.join(_ST_DTYPE)}")
    groups = list(_shards(tensors, dtype, shard_bytes))
    names = (
        [SINGLE_FILE]
        if len(groups) == 1
        else [f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i in range(len(groups))]
    )
    weight_map: dict[str, str] = {}
    total = 0
    params = 0
    for name, group in zip(names, groups, strict=True):
        entries: dict[str, object] = {}
        keep_alive: list[np.ndarray] = []  # TensorSpec holds raw pointers into these buffers
        for tensor in group:
            values = tensor.values()
            if values.shape != tensor.shape:
                raise ValueError(f"{tensor.name}: values of shape {values.shape}, declared {tensor.shape}")
            data = _encode(values, dtype)
            keep_alive.append(data)
            entries[tensor.name] = _serialize_entry(dtype, tensor.shape, data)
            weight_map[tensor.name] = name
            total += data.nbytes
            params += tensor.numel
        log.info("writing %s (%d tensors)", name, len(group))
        serialize_file(entries, str(out / name), metadata={"format": "pt"})  # type: ignore[arg-type]
        (out / name).chmod(0o644)  # the writer creates 0600; an engine in a container may run as another user
        del keep_alive
    files = list(names)
    if len(names) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (out / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
        files.append(INDEX_FILE)
    return WrittenWeights(files=files, total_bytes=total, parameters=params)


def write_random_weights(
    specs: Sequence[TensorSpec],
    out: Path,
    *,
    seed: int,
    dtype: DType = "bf16",
    zero_lm_head_rows: Sequence[int] = (),
    shard_bytes: int = DEFAULT_SHARD_BYTES,
) -> WrittenWeights:
    """Write `specs` with random values; one `model.safetensors`, or shards plus `model.safetensors.index.json`."""
    rng = np.random.default_rng(seed)

    def random_values(spec: TensorSpec) -> Callable[[], np.ndarray]:
        def make() -> np.ndarray:
            values = _fill(spec, rng)
            if spec.name == "lm_head.weight" and zero_lm_head_rows:
                values[list(zero_lm_head_rows)] = 0.0
            return values

        return make

    # Values are drawn in write order, as before: the same seed gives the same bytes.
    tensors = [NamedTensor(spec.name, tuple(spec.shape), random_values(spec)) for spec in specs]
    return write_weights(tensors, out, dtype=dtype, shard_bytes=shard_bytes)
