"""A result's labels have one home each (`metrics.model`): what served a run (`run_source`) and the clock it was
timed on (`run_clock`); every writer and reader takes them from there."""

from __future__ import annotations

from typing import get_args

from llmsweep.metrics.model import VIRTUAL, WALL, Clock, Provenance, run_clock


def test_the_simulator_in_process_is_virtual_time_and_everything_served_is_wall_clock_time() -> None:
    assert run_clock(simulated=True, live=False) == VIRTUAL
    assert run_clock(simulated=True, live=True) == WALL
    assert run_clock(simulated=False, live=False) == WALL
    assert run_clock(simulated=False, live=True) == WALL
    assert set(get_args(Clock)) == {VIRTUAL, WALL}
    assert Provenance(clock=VIRTUAL).clock == VIRTUAL

