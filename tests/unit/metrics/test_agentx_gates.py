"""The validity gates of agentic (AgentX) points against the behaviour spec: a point is `valid` only when the run
earned it."""

from __future__ import annotations

from typing import Any

from llmsweep.client.records import OutputWriteError
from llmsweep.metrics import GateConfig, summarise
from llmsweep.workload.scenario import AgenticCoding


def rec(i: int, *, sent: float, osl: int = 8, took: float = 2.0) -> dict[str, Any]:
    chunks = [sent + 0.2 + k * (took - 0.2) / (osl - 1) for k in range(osl)]
    return {"id": str(i), "phase": "profiling", "sent_at": sent, "scheduled_at": sent, "first_token_at": chunks[0],
            "end_at": chunks[-1], "chunk_times": chunks, "chunk_tokens": [1] * osl, "error_class": None,
            "prompt_tokens": 1000, "completion_tokens": osl, "max_tokens": osl}


def agentic_window(seconds: float) -> list[dict[str, Any]]:
    """One lane replaying back to back (2 s requests, 1 s think time) over a `seconds` window."""
    return [rec(i, sent=1000.0 + 3.0 * i) for i in range(int(seconds // 3.0))]


def test_a_run_stopped_because_its_output_could_not_be_written_is_not_valid() -> None:
    """A full disk under `server_metrics.jsonl` stops the load at once (in-flight requests cancelled, nothing more
    sent): what was kept is a run cut short. Stopped at 98 % of a 1,800 s agentic window, its coverage passes; the
    stop reason run.json keeps must still make it invalid (`llmsweep summarize` after the disk was freed said valid,
    and `--resume` then kept it as a finished point)."""
    gates = AgenticCoding.gate.config(planned_duration_s=1800.0)
    records = agentic_window(1765.0)
    stop = OutputWriteError(28, "No space left on device", "/runs/j/server_metrics.jsonl").reason()
    clean = summarise(records, gpus=8, gates=gates, client={"stop_reason": "duration reached"})
    assert clean.validity.verdict == "valid", clean.validity.reasons  # the same records, a run that ended on its own
    cut = summarise(records, gpus=8, gates=gates, client={"stop_reason": stop})
    assert cut.validity.verdict == "invalid"
    assert f"run stopped early: {stop}" in cut.validity.reasons


def test_default_gates_are_not_those_of_an_agentic_point() -> None:
    """Guards the test above: the agentic profile is what judges it (0.10 error ratio, 900 s submission minimum)."""
    gates = AgenticCoding.gate.config(planned_duration_s=1800.0)
    assert gates.max_error_ratio == 0.10 and gates.min_submission_s == 900.0 and gates.min_coverage == 0.95
    assert GateConfig().max_error_ratio == 0.05
