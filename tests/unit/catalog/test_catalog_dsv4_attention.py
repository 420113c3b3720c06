"""DeepSeek-V4-Pro's compressed attention is recorded as its config.json gives it (head_dim 512 with rope 64, a
128-token window, per-layer compress_ratios, the CSA indexer's 64 heads of 128 and top-1024) and validated whole; the
KV bytes the HBM-fit rule and the simulator read come from it, in the cache layout its engines keep."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from llmsweep.catalog.models import ModelSpec, get_model, indexer_key_bytes


def _with_sparse(**changes: Any) -> dict[str, Any]:
    """DeepSeek-V4-Pro's entry as data, its `attention.sparse` changed."""
    entry = get_model("deepseek-v4-pro").model_dump(by_alias=True, exclude_none=True)
    entry["attention"]["sparse"].update(changes)
    return entry


def test_the_layers_are_counted_from_the_config_s_compress_ratios() -> None:
    m = get_model("deepseek-v4-pro")
    sparse = m.attention.sparse
    assert sparse is not None and sparse.kind == "csa-hca"
    assert (m.attention.head_dim, m.attention.qk_rope_head_dim, m.attention.kv_lora_rank) == (512, 64, None)
    assert (sparse.window, sparse.index_topk, sparse.index_heads, sparse.index_head_dim) == (128, 1024, 64, 128)
    assert sparse.compress_ratios is not None and len(sparse.compress_ratios) == 62  # 61 layers, then the MTP one's 0
    assert m.compressed_layers() == (61, 30, 31)  # layers 2, 4, ..., 60 CSA; 0, 1, 3, ..., 59 HCA


def test_a_cache_entry_and_a_token_of_context_take_the_engines_bytes() -> None:
    m = get_model("deepseek-v4-pro")
    assert m.cache_entry_bytes() == 448 + 64 * 2 + 7 + 1 == 584
    assert indexer_key_bytes(128) == 132 and indexer_key_bytes(128, "fp4") == 68
    assert m.compressed_bytes_per_token() == 30 * (584 + 132) / 4 + 31 * 584 / 128
    # one layout whatever the dtype asked, whole on every GPU of a TP group (what the HBM-fit rule reads)
    assert m.kv_bytes_per_token("bf16") == m.kv_bytes_per_token("fp8") == 5_512
    assert m.kv_bytes_per_token_per_gpu("fp8", tp=8) == 5_512
    bf16 = ModelSpec.model_validate(_with_sparse(entry_dtype="bf16", index_dtype="fp4"))
    assert bf16.cache_entry_bytes() == 1024
    assert bf16.compressed_bytes_per_token() == 30 * (1024 + 68) / 4 + 31 * 1024 / 128


def test_its_attention_is_mqa_over_the_512_wide_vector_in_either_phase() -> None:
    m = get_model("deepseek-v4-pro")
    assert m.attention.widths("prefill") == m.attention.widths("decode") == (128 * 512, 128 * 512)
    assert m.sparse_attention_gap() is None


@pytest.mark.parametrize(("changes", "said"), [
    ({"window": None}, "needs window"),
    ({"compress_ratios": None}, "compress_ratios"),
    ({"compress_ratios": [8] * 62}, "holds [8]"),
    ({"compress_ratios": [4] * 60}, "60 ratios"),
    ({"index_topk": None}, "needs index_topk"),
])
def test_an_incomplete_or_impossible_compressed_shape_is_refused(changes: dict[str, Any], said: str) -> None:
    entry = _with_sparse(**changes)
    for key, value in changes.items():
        if value is None:
            del entry["attention"]["sparse"][key]
    with pytest.raises(ValidationError, match=said.replace("[", r"\[").replace("]", r"\]")):
        ModelSpec.model_validate(entry)


def test_a_v3_style_latent_or_a_window_on_a_dsa_is_refused() -> None:
    entry = _with_sparse()
    entry["attention"]["kv_lora_rank"] = 512
    with pytest.raises(ValidationError, match="no kv_lora_rank"):
        ModelSpec.model_validate(entry)
    glm = get_model("glm-5.2").model_dump(by_alias=True, exclude_none=True)
    glm["attention"]["sparse"]["window"] = 128
    with pytest.raises(ValidationError, match="belong to a csa-hca"):
        ModelSpec.model_validate(glm)
