"""Power and cost per SKU: every catalogued SKU has sourced watts and a labelled, dated price assumption; a user
replaces an entry with their own prices; a price without its source is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.catalog.hardware import all_hardware
from llmsweep.catalog.power import all_power, find_power
from llmsweep.catalog.sources import clear_caches
from llmsweep.errors import ConfigError


def test_every_sku_has_sourced_watts_and_a_dated_price_assumption() -> None:
    power = {p.id: p for p in all_power()}
    for hw in all_hardware():
        spec = power.get(hw.id)
        assert spec is not None, f"{hw.id} has no power.yaml entry"
        assert 0 < spec.idle_w < spec.max_w and spec.watts_source.startswith("http")
        assert spec.usd_per_gpu_hour and spec.cost_source and "assumption" in spec.cost_source and spec.cost_date


def test_lookup_goes_through_hardware_aliases() -> None:
    spec = find_power("H200-SXM")
    assert spec is not None and spec.id == "h200" and spec.max_w == 700
    assert find_power("tpu-v9") is None and find_power(None) is None


def test_user_catalog_replaces_prices(user_catalog: Path) -> None:
    (user_catalog / "power.yaml").write_text(
        "power:\n  h200:\n    idle_w: 80\n    max_w: 700\n    watts_source: my bench\n    usd_per_gpu_hour: 1.5\n"
        "    cost_source: our contract\n    cost_date: '2026-11-01'\n")
    clear_caches()
    spec = find_power("h200")
    assert spec is not None and spec.usd_per_gpu_hour == 1.5 and spec.cost_source == "our contract"
    clear_caches()


def test_a_price_without_its_source_is_refused(user_catalog: Path) -> None:
    (user_catalog / "power.yaml").write_text(
        "power:\n  h200:\n    idle_w: 80\n    max_w: 700\n    watts_source: x\n    usd_per_gpu_hour: 1.5\n")
    clear_caches()
    with pytest.raises(ConfigError, match="cost_source"):
        find_power("h200")
    clear_caches()
