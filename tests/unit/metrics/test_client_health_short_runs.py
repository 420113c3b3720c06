"""A worker's CPU share flags a saturated client only over a run long enough to say it: every request answered 401
in 5 ms keeps the loop busy start to end, and was flagged "SATURATED: worker 0 used 91% CPU"."""

from __future__ import annotations

from typing import Any

import pytest

from llmsweep.metrics import summarise


def _records(n: int = 4) -> list[dict[str, Any]]:
    return [{"id": str(i), "phase": "profiling", "scheduled_at": i * 0.001, "sent_at": i * 0.001,
             "first_byte_at": i * 0.001 + 0.0005, "first_token_at": None, "end_at": i * 0.001 + 0.001,
             "chunk_times": [], "chunk_tokens": [], "status": 401, "error_class": "http", "error": "HTTP 401",
             "prompt_tokens": None, "completion_tokens": None, "max_tokens": 4, "worker": 0} for i in range(n)]


@pytest.mark.parametrize(("cpu_s", "wall_s", "saturated"), [
    (0.0045, 0.0049, False),  # the reviewer's run: 91 % of 4.9 ms, no figure of a client that fell behind
    (0.95, 1.0, True),  # a second: judged (`metrics.summary.MIN_CPU_SHARE_WALL_S`)
    (0.5, 2.0, False),
])
def test_the_cpu_share_is_judged_only_over_a_long_enough_wall_time(cpu_s: float, wall_s: float,
                                                                   saturated: bool) -> None:
    client = {"workers": [{"worker": 0, "cpu_s": cpu_s, "wall_s": wall_s}], "saturation_cpu_ratio": 0.9}
    health = summarise(_records(), gpus=1, client=client).client_health
    assert health.saturated is saturated, health.saturation_reasons
    assert health.workers[0]["cpu_share"] == pytest.approx(cpu_s / wall_s)  # recorded either way
