"""`predict` on worker processes is never silent for long: a line every `HEARTBEAT_S` names the units still running
and how long each has run (it printed nothing for 156 s between two finished units while its ETA said 86 s), the ETA
is shown only while units wait for a worker, and every line is timestamped, the first one too."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace
from typing import Any

import pytest

from llmsweep.cli import sim
from llmsweep.execute import predict_pool
from llmsweep.execute.predict_pool import Outcome, Settings

JOB = ("dsr1_p1x8_d1x8_conc1024x2048_fp8_sglang_prefill-tp8-pp1-dcp1-pcp1-ep1-dpfalse-nw1_decode-tp8-pp1-dcp1-pcp1-"
       "ep1-dpfalse-nw1_disagg-true_spec-none_conc1024x2048_mi355x-amds_0123456789ab")


def _unit(job_id: str, exp_name: str, *concs: int) -> Any:
    return SimpleNamespace(job=SimpleNamespace(id=job_id, exp_name=exp_name), concurrencies=list(concs))


def test_a_heartbeat_names_the_units_still_running(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    units = [_unit(JOB, "dsr1_p1x8_d1x8_conc1024x2048", 1024, 2048), _unit("small_111111111111", "small", 4),
             _unit("other_222222222222", "other", 8), _unit("third_333333333333", "third", 16)]

    def fake(units: list[Any], settings: Settings, processes: int, on_done: Any = None,
             on_start: Any = None) -> list[list[Outcome]]:
        for i in (0, 1):
            on_start(i)
        time.sleep(0.1)
        on_done(1, [Outcome("small_111111111111", 4)])  # one waits for a worker: an ETA from the rate so far
        on_start(2)
        on_done(2, [Outcome("other_222222222222", 8)])  # none waits: no ETA it cannot know
        on_start(3)
        on_done(3, [Outcome("third_333333333333", 16)])
        time.sleep(0.3)  # the long one runs on: heartbeats name it
        on_done(0, [Outcome(JOB, 1024), Outcome(JOB, 2048)])
        return [[Outcome(JOB, 1024), Outcome(JOB, 2048)], [Outcome("small_111111111111", 4)],
                [Outcome("other_222222222222", 8)], [Outcome("third_333333333333", 16)]]

    monkeypatch.setattr(predict_pool, "predict_parallel", fake)
    monkeypatch.setattr(sim, "HEARTBEAT_S", 0.12)
    sim._predict_parallel(units, units, Settings(), 2)
    lines = capsys.readouterr().err.splitlines()
    assert all(re.match(r"^\[\d\d:\d\d:\d\d\] ", line) for line in lines), lines
    assert lines[0].endswith("] predicting 5 points of 4 jobs on 2 worker processes"), lines
    done = [line for line in lines if " done: " in line]
    assert re.search(r"point 1/5 done: small_111111111111 conc 4 \(ETA ~\d+ s at the rate so far\)$", done[0]), done
    assert done[1].endswith("point 2/5 done: other_222222222222 conc 8 (2 units still running)"), done
    assert done[2].endswith("point 3/5 done: third_333333333333 conc 16 (1 unit still running)"), done
    assert "ETA" not in done[3] and "still running" not in done[3], done
    beats = [line for line in lines if "still running (" in line]
    assert beats, lines
    assert re.search(r"still running \(3/5 points done\): dsr1_p1x8_d1x8_conc1024x2048…0123456789ab conc 1024, 2048 "
                     r"for \d+s$", beats[-1]), beats
