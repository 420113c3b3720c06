"""Stat blocks match numpy's linear percentiles; interactivity inverts the slow tail."""

from __future__ import annotations

import numpy as np

from llmsweep.metrics import registry
from llmsweep.metrics.stats import Column, clean, inverted_block, stat_block


def test_stat_block_matches_numpy_linear_percentiles_and_population_std() -> None:
    v = np.random.default_rng(3).gamma(2.0, 0.01, size=1001)
    b = stat_block(v)
    assert b["count"] == 1001
    for key, p in (("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)):
        assert b[key] == np.percentile(v, p)
    assert b["std"] == np.std(v) and b["mean"] == np.mean(v)


def test_empty_sample_gives_zeros_and_single_value_has_zero_std() -> None:
    assert stat_block(np.zeros(0))["count"] == 0 and stat_block(np.zeros(0))["p99"] == 0.0
    assert stat_block(np.array([0.5]))["std"] == 0.0


def test_clean_drops_non_finite_and_non_positive_latencies() -> None:
    assert clean(np.array([0.1, -1.0, 0.0, np.nan, np.inf, 0.2])).tolist() == [0.1, 0.2]


def test_interactivity_is_the_inverse_of_the_tpot_percentile_not_the_percentile_of_speeds() -> None:
    tpot = np.array([0.01] * 9 + [0.1])  # one slow user
    inv = inverted_block(tpot)
    assert inv["p90"] == 1 / np.percentile(tpot, 90)
    assert inv["p90"] < inv["p50"]  # p90 interactivity is a slow tail
    assert inv["mean"] == 1 / tpot.mean()
    assert inv["std"] == np.std(1 / tpot)


def test_columns_grow_incrementally_and_view_as_numpy() -> None:
    c = Column("f")
    c.append(1.5)
    c.extend(np.array([2.0, 3.0]))
    c.extend([4.0])
    assert c.numpy().dtype == np.float32 and c.numpy().tolist() == [1.5, 2.0, 3.0, 4.0]


def test_every_metric_is_defined_once_with_a_unit() -> None:
    units = registry.units()
    assert units["latency.ttft"] == "s" and units["interactivity"] == "tok/s/user"
    assert all(m.unit for m in registry.all_metrics())
