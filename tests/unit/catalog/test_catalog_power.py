"""Power and cost per SKU: every catalogued SKU has sourced watts and a labelled, dated price assumption; a user
lays their own prices (or watts) over an entry, a figure with its source; a price without its source is refused."""

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


def test_a_price_alone_is_laid_over_the_packaged_entry(user_catalog: Path) -> None:
    """A user entry sets the groups it names (a figure with its source) and keeps the rest with their own sources; its
    key resolves as a lookup does (`MI300X` is the packaged `mi300x`)."""
    packaged = find_power("mi300x")
    assert packaged is not None and packaged.estimates
    (user_catalog / "power.yaml").write_text(
        "power:\n  MI300X:\n    usd_per_gpu_hour: 1.0\n    cost_source: our contract\n    cost_date: '2026-12-07'\n")
    clear_caches()
    spec = find_power("mi300x")
    assert spec is not None
    assert (spec.usd_per_gpu_hour, spec.cost_source, spec.cost_date) == (1.0, "our contract", "2026-12-07")
    assert (spec.idle_w, spec.max_w, spec.watts_source) == (packaged.idle_w, packaged.max_w, packaged.watts_source)
    assert spec.estimates == packaged.estimates  # the packaged idle_w is still the estimate its note says
    clear_caches()


def test_a_group_the_user_sets_is_theirs_whole(user_catalog: Path) -> None:
    """Their measured watts drop the packaged estimate note of idle_w; the all-in figure they left out stays, with
    InferenceX as its source."""
    packaged = find_power("h200")
    assert packaged is not None and "idle_w" in packaged.estimates and packaged.all_in_kw_per_gpu
    (user_catalog / "power.yaml").write_text(
        "power:\n  h200:\n    idle_w: 80\n    max_w: 700\n    watts_source: our bench\n")
    clear_caches()
    spec = find_power("h200")
    assert spec is not None and (spec.idle_w, spec.watts_source) == (80, "our bench") and not spec.estimates
    assert (spec.all_in_kw_per_gpu, spec.all_in_source) == (packaged.all_in_kw_per_gpu, packaged.all_in_source)
    assert spec.usd_per_gpu_hour == packaged.usd_per_gpu_hour and spec.cost_source == packaged.cost_source
    clear_caches()


@pytest.mark.parametrize(("text", "said", "field"), [
    # a price is the user's whole: the packaged source is not claimed for it
    ("power:\n  h200:\n    usd_per_gpu_hour: 1.5\n", "usd_per_gpu_hour needs cost_source and cost_date", "power.h200"),
    # a note on a figure the entry does not set
    ("power:\n  h200:\n    usd_per_gpu_hour: 1.5\n    cost_source: x\n    cost_date: '2026-12-07'\n"
     "    estimates: {max_w: from memory}\n", "notes max_w as an estimate, a figure it does not set",
     "power.h200.estimates.max_w"),
    # a SKU the catalog has no entry for gives its watts itself
    ("power:\n  h999:\n    usd_per_gpu_hour: 1.5\n    cost_source: x\n    cost_date: '2026-12-07'\n",
     "idle_w: Field required", "power.h999.idle_w"),
])
def test_a_user_entry_that_cannot_be_laid_over_is_refused_naming_file_line_and_field(
        user_catalog: Path, text: str, said: str, field: str) -> None:
    (user_catalog / "power.yaml").write_text(text)
    clear_caches()
    with pytest.raises(ConfigError, match=said) as caught:
        find_power("h200")
    (finding,) = caught.value.as_findings("unused")
    assert finding.rule == "catalog.file" and finding.file == str(user_catalog / "power.yaml") and finding.path == field
    assert finding.line is not None and finding.line >= 2 and finding.fix
    clear_caches()


@pytest.mark.parametrize("text", [
    # two spellings of one SKU in one file: one would be laid over the other without a word
    "power:\n  h200: {usd_per_gpu_hour: 1.0, cost_source: a, cost_date: '2026-12-07'}\n"
    "  H200-SXM: {usd_per_gpu_hour: 2.0, cost_source: b, cost_date: '2026-12-07'}\n",
    # an id that names another SKU than the key
    "power:\n  h200: {id: mi300x, usd_per_gpu_hour: 1.0, cost_source: a, cost_date: '2026-12-07'}\n",
])
def test_one_sku_named_twice_in_a_file_is_refused(user_catalog: Path, text: str) -> None:
    (user_catalog / "power.yaml").write_text(text)
    clear_caches()
    with pytest.raises(ConfigError, match=r"names h200, (which key 'h200'|but its id says mi300x)"):
        all_power()


def test_an_all_in_figure_without_its_source_is_refused(user_catalog: Path) -> None:
    (user_catalog / "power.yaml").write_text("power:\n  h200: {all_in_kw_per_gpu: 2.0}\n")
    clear_caches()
    with pytest.raises(ConfigError, match="all_in_kw_per_gpu needs all_in_source"):
        all_power()
