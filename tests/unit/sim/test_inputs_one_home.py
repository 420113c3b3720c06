"""The simulator reads hardware figures and bytes per value from the catalogs only.

It kept its own tables beside them: after the hardware catalog learned that an H200 holds 150.76 GB (the driver's
figure; the vendor's "141 GB" are binary), a SKU the catalog names only by prefix (`h200-lent`) still got 141 GB
from the simulator's table, and FP4 weights were 0.5 bytes where the weight-format table says 0.5625 (one FP8 scale
per 16 values); an engine's KV dtype spelling (`fp8_e4m3`) was read as bf16."""

from __future__ import annotations

import pytest

from llmsweep.catalog.hardware import find_hardware
from llmsweep.catalog.precision import weight_format
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.perf import GB


@pytest.mark.parametrize(("sku", "entry"), [("h200", "h200"), ("h200-lent", "h200"), ("mi300x-amds", "mi300x")])
def test_a_sku_named_by_its_catalog_entry_or_a_suffix_of_it_gets_the_catalogs_memory(sku: str, entry: str) -> None:
    spec = find_hardware(entry)
    assert spec is not None
    inputs = perf_inputs("llama-3.1-8b", sku)
    assert inputs.hbm_bytes == pytest.approx(spec.hbm_gb * GB)
    assert inputs.hbm_bw == pytest.approx(spec.hbm_bw_tbs * 1e12)


@pytest.mark.parametrize("precision", ["bf16", "fp8", "nvfp4", "mxfp4"])
def test_weights_take_the_weight_format_tables_bytes(precision: str) -> None:
    fmt = weight_format(precision)
    assert fmt is not None
    assert perf_inputs("llama-3.1-70b", "b200", precision=precision).bytes_per_param == fmt.bytes_per_param


def test_an_engines_fp8_kv_dtype_spelling_halves_the_kv_bytes() -> None:
    bf16 = perf_inputs("llama-3.1-8b", "h200").kv_bytes_per_token
    for spelling in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        assert perf_inputs("llama-3.1-8b", "h200", kv_dtype=spelling).kv_bytes_per_token == pytest.approx(bf16 / 2)
