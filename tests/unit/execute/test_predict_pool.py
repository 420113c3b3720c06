"""`llmsweep predict`'s worker pool: a unit that fails in a worker with an unexpected error is that unit's refusal,
with the reason, and the other units still complete; in this process (`--processes 1`) the error raises, with its
traceback, as it always did."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from llmsweep.execute.predict_pool import Outcome, PointUnit, Settings, plan, predict_parallel, predict_unit
from llmsweep.plan import jobs_from_files

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def _units() -> tuple[PointUnit, PointUnit]:
    first, second = plan(jobs_from_files([RECIPE]), {})
    assert isinstance(first, PointUnit) and isinstance(second, PointUnit)
    return first, second


def _broken(unit: PointUnit) -> PointUnit:
    """The unit on an engine with zero GPUs, which validation would have refused: the model divides by it."""
    return replace(unit, config=unit.config.model_copy(update={"tp": 0}))


@pytest.mark.timeout(120)
def test_an_unexpected_error_in_a_worker_refuses_that_unit_and_the_others_complete(tmp_path: Path) -> None:
    first, second = _units()
    finished: list[int] = []
    settings = Settings(duration=3, out_dir=tmp_path)
    outcomes = predict_parallel([first, _broken(first), second], settings, 2,
                                on_done=lambda i, _: finished.append(i))
    assert sorted(finished) == [0, 1, 2]
    (good,), (bad,), (other,) = outcomes
    assert good.summary is not None and other.summary is not None
    assert (good.job, good.concurrency, other.concurrency) == (first.job.id, 2, 4)
    assert bad == Outcome(first.job.id, 2, refused="the prediction failed: ZeroDivisionError: float division by "
                          "zero (fix: report it; `--processes 1` shows its traceback)")
    # the workers wrote the points' files; the parent got the summaries, the same as this process predicts
    assert (tmp_path / first.job.id / "conc2" / "summary.json").is_file()
    assert good.summary.dump() == predict_unit(first, Settings(duration=3))[0].summary.dump()  # type: ignore[union-attr]


def test_in_this_process_an_unexpected_error_raises() -> None:
    first, _ = _units()
    with pytest.raises(ZeroDivisionError):
        predict_unit(_broken(first), Settings(duration=3))
