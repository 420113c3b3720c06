"""A job running in a Slurm batch job is shown on the driver as a local run shows its job: its worker on the node
reports the client's live counters (`progress.ReportingProgress`) and the driver's plain-line progress prints them
while the job measures, not only "running · Xs so far". Against the real single-node Slurm
(scripts/ci/start_slurm.sh); the job is the simulator served live with a 3-s window."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from support.slurm import require_slurm

from llmsweep.execute.pipeline import RunRequest, run_sweep
from llmsweep.execute.progress import PlainProgress, use_progress

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run"

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module", autouse=True)
def slurm_available() -> None:
    require_slurm()


COUNTERS = re.compile(r"^\[\d\d:\d\d:\d\d\] job 1/1 conc 8 · (measuring|draining) · (\d+) ok, (\d+) failed, (\d+) in "
                      r"flight · window (\d+)/3 s")


def test_the_workers_live_counters_reach_the_drivers_plain_progress(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = tmp_path / "one-arm.yaml"
    text = (RECIPES / "agentic-sim.yaml").read_text()
    arm = "      - { tp: 8, spec-decoding: mtp, kv-offloading: dram, kv-offload-backend: { name: hicache }, " \
          "conc-list: [8] }\n"
    assert arm in text and "duration: 8" in text
    recipe.write_text(text.replace(arm, "").replace("duration: 8", "duration: 3"))  # one server, one job
    monkeypatch.setenv("LLMSWEEP_TEST_SECRET", "llmsweep-slurm-progress-secret")
    stream = io.StringIO()
    request = RunRequest(files=[recipe], executor="slurm", live=True, out=tmp_path / "out",
                         store=tmp_path / "store.sqlite", report=False,
                         executor_options={"poll_s": 0.5, "time_limit": "00:05:00"})
    with use_progress(PlainProgress(stream, interval_s=1.0)) as progress:
        outcome = run_sweep(request, event=progress.line)
    lines = stream.getvalue().splitlines()
    assert len(outcome.outcomes) == 1 and outcome.ok, lines[-30:]  # a 3-s window: a smoke run, judged as one
    (job_id,) = (o.job_id for o in outcome.outcomes)
    done = next(i for i, line in enumerate(lines) if re.search(rf"\[slurm \d+\] job {job_id}: (valid|smoke)", line))
    # While the job measured on the node, the driver printed its counters and window as they moved (each second while
    # it measured, and as it drained).
    seen = [(i, m.group(1), [int(g) for g in m.groups()[1:]]) for i, line in enumerate(lines)
            if (m := COUNTERS.match(line))]
    assert all(i < done for i, _, _ in seen) and any(phase == "measuring" for _, phase, _ in seen), lines
    (_, _, (ok0, _, _, w0)), (_, _, (ok1, failed, _, w1)) = seen[0], seen[-1]
    assert ok1 > ok0 and w1 > w0 and failed == 0, lines
    # Its phases, as on a local run (the server's launch, then the window's), each said as the driver saw it come.
    phases = [m.group(1) for line in lines if (m := re.search(r"job 1/1 conc 8 · (\w+)", line))]
    assert phases[0] == "launching" and "measuring" in phases, phases
    assert "running" not in phases  # what the driver showed when it knew nothing but that the batch job ran
