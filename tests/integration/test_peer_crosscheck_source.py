"""`peer crosscheck` against the simulator: both clients' summaries say `source: simulated` and the server's GPU
count, as the server says on /version before any load (the probe `bench` reads), not the client's defaults (`measured`,
1 GPU). aiperf's side is a stand-in
that leaves recorded aiperf artifacts (the real aiperf run is `test_peer_crosscheck.py`, which needs aiperf)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import sim_serve

from llmsweep.client import Endpoint
from llmsweep.errors import ConfigError
from llmsweep.peers.crosscheck import CrossCheckConfig, run_crosscheck

ARTIFACTS = Path(__file__).resolve().parents[1] / "data" / "aiperf" / "ok"
STAND_IN = f"""#!{sys.executable}
import shutil, sys
shutil.copytree({str(ARTIFACTS)!r}, sys.argv[sys.argv.index("--artifact-dir") + 1], dirs_exist_ok=True)
"""


@pytest.fixture
def sim_url() -> Iterator[str]:
    with sim_serve("--model", "llama-3.1-8b", "--served-model-name", "sim", "--timing", "constant", "--ttft-ms", "2",
                   "--itl-ms", "1", "--tp", "2") as url:
        yield url


def test_both_clients_runs_against_the_simulator_are_labelled_simulated(sim_url: str, tmp_path: Path) -> None:
    aiperf = tmp_path / "aiperf"
    aiperf.write_text(STAND_IN)
    aiperf.chmod(0o755)
    cfg = CrossCheckConfig(endpoint=Endpoint(base_url=sim_url, model="sim", api="chat"), isl=32, osl=4,
                           concurrencies=[1], prompts_per_concurrency=2, min_prompts=2, warmups_per_concurrency=0,
                           repeats=1, tokenizer="builtin", aiperf=str(aiperf))
    check = run_crosscheck(cfg, tmp_path / "cc")
    assert [(r.client, r.error) for r in check.runs] == [("llmsweep", None), ("aiperf", None)]
    for run in check.runs:
        assert run.summary is not None and run.summary.source == "simulated", run.client
        folder = tmp_path / "cc" / run.out_dir
        assert json.loads((folder / "run.json").read_text())["source"] == "simulated"
        assert json.loads((folder / "summary.json").read_text())["source"] == "simulated"
        summary = json.loads((folder / "summary.json").read_text())
        # the server said tp 2 on /version: per-GPU figures divide by 2, and say where the 2 came from (as `bench`)
        assert summary["throughput"]["gpus"] == 2, run.client
        assert summary["provenance"]["gpus_known"] is True and "tp 2" in summary["provenance"]["gpus_from"]
    assert check.config["gpus"] == 2


def test_an_aiperf_that_cannot_start_is_refused_before_any_load(sim_url: str, tmp_path: Path) -> None:
    """A missing aiperf failed every aiperf run only after llmsweep's run at that level had loaded the server (on a
    GPU, a whole cross-check's worth of llmsweep runs for nothing); now nothing is run and the fix says what to do."""
    cfg = CrossCheckConfig(endpoint=Endpoint(base_url=sim_url, model="sim", api="chat"), isl=32, osl=4,
                           concurrencies=[1], prompts_per_concurrency=2, min_prompts=2, warmups_per_concurrency=0,
                           repeats=1, tokenizer="builtin", aiperf=str(tmp_path / "no-aiperf"))
    with pytest.raises(ConfigError, match="no-aiperf") as err:
        run_crosscheck(cfg, tmp_path / "cc")
    assert err.value.fix is not None and "--aiperf" in err.value.fix
    assert not (tmp_path / "cc").exists()  # no llmsweep run was made


HUNG = f"""#!{sys.executable}
import shutil, sys, time
shutil.copytree({str(ARTIFACTS)!r}, sys.argv[sys.argv.index("--artifact-dir") + 1], dirs_exist_ok=True)
time.sleep(3600)  # its work written, the process never exits (as aiperf's services sometimes do not)
"""


def test_an_aiperf_that_never_exits_is_stopped_by_the_default_deadline(
        sim_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --run-deadline a hung aiperf held the cross-check (and the GPU) forever; now each run is bounded by
    the longest a run that keeps making progress can take, and the run says it was stopped and why."""
    import time

    import llmsweep.peers.crosscheck as crosscheck

    monkeypatch.setattr(crosscheck, "AIPERF_START_STOP_S", 1.0)  # the start/exit allowance, shortened for the test
    aiperf = tmp_path / "aiperf"
    aiperf.write_text(HUNG)
    aiperf.chmod(0o755)
    cfg = CrossCheckConfig(endpoint=Endpoint(base_url=sim_url, model="sim", api="chat"), isl=32, osl=4,
                           concurrencies=[2], prompts_per_concurrency=1, min_prompts=2, warmups_per_concurrency=0,
                           repeats=1, tokenizer="builtin", aiperf=str(aiperf), timeout_s=0.5)
    assert cfg.deadline(2) == (1 + 1) * 0.5 + 1.0  # 2 requests at conc 2: one round, one more, the allowance
    assert cfg.model_copy(update={"run_deadline_s": 7.0}).deadline(2) == 7.0
    t0 = time.monotonic()
    check = run_crosscheck(cfg, tmp_path / "cc")
    assert time.monotonic() - t0 < 30
    aiperf_run = next(r for r in check.runs if r.client == "aiperf")
    assert aiperf_run.error is not None and aiperf_run.error.startswith("aiperf ran past 2 s and was stopped")
    assert "--run-deadline" in aiperf_run.error
