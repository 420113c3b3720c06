"""B200 HBM bandwidth is the driver's 7.67 TB/s, not the marketing 8.0 (DGX B200's 64 TB/s / 8).

The CUDA driver reports a 7,680-bit memory bus at 3,996 MHz: 7680 / 8 x 3996e6 x 2 = 7.67 TB/s
(https://github.com/pytorch/ao/pull/4002, merged 2026-03-05). Decode is bandwidth-bound, so the simulator's B200
decode steps were ~4 % too fast."""

from __future__ import annotations

import pytest

from llmsweep.catalog.hardware import get_hardware
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.perf import Batch, RooflineTimer


def test_b200_bandwidth_is_the_drivers_bus_width_times_memory_clock() -> None:
    assert get_hardware("b200").hbm_tbps == pytest.approx(7680 / 8 * 3996e6 * 2 / 1e12, abs=0.005)


def test_a_bandwidth_bound_b200_decode_step_takes_the_drivers_bandwidth() -> None:
    catalog = perf_inputs("llama-3.1-70b", "b200")
    marketing = perf_inputs("llama-3.1-70b", "b200", overrides={"hbm_bw": 8.0e12})
    decode = Batch(decode_seqs=1, decode_tokens=1, decode_ctx=1000)
    slow, fast = RooflineTimer(catalog).step_time(decode), RooflineTimer(marketing).step_time(decode)
    assert slow > fast and slow / fast == pytest.approx(8.0 / 7.67, rel=0.02)
