"""`llmsweep predict`'s worker pool: a unit that fails in a worker with an unexpected error is that unit's refusal,
with the reason, and the other units still complete; in this process (`--processes 1`) the error raises, with its
traceback, as it always did."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

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


@pytest.mark.timeout(120)
def test_an_interrupted_pool_has_wound_down_before_the_interrupt_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool's manager thread closes its wake-up pipe while it winds down, and the interpreter's exit writes to that
    pipe without a lock: a thread still winding down at the exit made a Ctrl-C'd `predict` print a Bad file descriptor
    traceback (seen once on CI's loaded cores). Its close is slowed here, as load slows it: `_terminate` waits for
    it."""
    import multiprocessing as mp
    import time
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures import process as cf_process

    from llmsweep.execute.predict_pool import _terminate

    real_close = cf_process._ThreadWakeup.close

    def slow_close(self: cf_process._ThreadWakeup) -> None:
        time.sleep(1.0)
        real_close(self)

    monkeypatch.setattr(cf_process._ThreadWakeup, "close", slow_close)
    pool = ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("spawn"))
    for _ in range(2):
        pool.submit(time.sleep, 60)
    deadline = time.monotonic() + 60
    while len(pool._processes or {}) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = list((pool._processes or {}).values())
    assert len(workers) == 2
    manager: Any = pool._executor_manager_thread  # (the pool drops both references as it shuts down)
    wakeup = pool._executor_manager_thread_wakeup
    _terminate(pool, workers)
    assert not any(w.is_alive() for w in workers)
    assert not manager.is_alive() and wakeup._closed
    wakeup.wakeup()  # what the interpreter's exit does: a no-op once closed, never a write to a closed pipe


def test_a_dead_worker_is_said_dead_as_every_death_is() -> None:
    """`pid N killed by SIGKILL` and `exited 3` were the pool's own words for what every other death says with
    `signals.exit_said` (a SIGKILL naming the OOM killer); the workers the pool then terminated (SIGTERM) are not
    the ones that died."""
    import types
    from typing import cast

    from llmsweep.execute.predict_pool import _deaths

    def ended(code: int) -> Any:
        return types.SimpleNamespace(exitcode=code, join=lambda timeout: None)

    dead, said = _deaths(cast(Any, {101: ended(-9), 102: ended(-15), 103: ended(3)}))
    assert dead == [101, 103]
    assert said == ("pid 101 was killed by SIGKILL (signal 9: the kernel's out-of-memory killer, or a `kill -9` from "
                    "outside this run); pid 103 exited with status 3")


def test_a_refused_job_of_one_concurrency_names_it_also_where_its_concurrencies_are_a_list(tmp_path: Path) -> None:
    """`predict --json`'s row of a policy-refused disaggregated job of `conc-list: [1]` said `"conc": null` (its
    `conc` is a list, of one), where a simulator-refused point says 1: a job of one concurrency names it."""
    recipe = tmp_path / "one.yaml"
    text = (RECIPE.parent / "disagg-sim.yaml").read_text()
    assert "conc-list: [2, 4]" in text
    recipe.write_text(text.replace("conc-list: [2, 4]", "conc-list: [2]"))
    (job,) = jobs_from_files([recipe])
    assert job.conc == [2]
    (refused,) = plan([job], {}, {job.id: {None: "policy error [x]: why"}})
    assert refused == Outcome(job.id, 2, refused="policy error [x]: why")
    assert refused.doc()["conc"] == 2
