"""`bench_job`: the load generator driven by a Job, as a library call, against a simulator serving that job."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp import client_proto

from llmsweep import engines
from llmsweep.execute import signals
from llmsweep.execute.lifecycle import bench_job
from llmsweep.execute.preflight import pick_free_port
from llmsweep.plan import jobs_from_files

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "fixed-sim.yaml"


@pytest.fixture()
def served_job(tmp_path: Path):
    job = min(jobs_from_files([RECIPE]), key=lambda j: j.concs[0])
    spec = engines.render(job, port=pick_free_port())
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(list(spec.argv), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{spec.base_url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"simulator did not start: {(tmp_path / 'server.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield job, spec
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def test_bench_job_follows_the_job_and_gates_the_result(served_job, tmp_path: Path) -> None:
    job, spec = served_job
    out = tmp_path / "bench"
    summary = bench_job(job, spec.base_url, out, spec=spec, source="simulated")

    conc = job.concs[0]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    profiling = [r for r in records if r["phase"] == "profiling"]
    assert len(profiling) == 4 * conc  # the recipe's num-prompts-per-conc, not a client default
    assert sum(r["phase"] == "warmup" for r in records) == 1
    # InferenceX range ratio 0.8: output lengths are drawn in [0.8·OSL, OSL].
    assert all(int(0.8 * job.osl) <= r["max_tokens"] <= job.osl for r in profiling)
    assert summary.source == "simulated"
    assert summary.requests.successful == 4 * conc
    assert summary.validity.verdict in ("smoke", "valid")
    assert json.loads((out / "summary.json").read_text())["requests"] == summary.dump()["requests"]



def test_the_clients_own_summary_says_simulated_before_the_job_is_judged(
    served_job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source is written with the client's run.json and summary, not stamped on them afterwards: a job killed
    after its load and before its verdict leaves files that say what served it (`--resume` keeps them)."""
    from llmsweep.execute import lifecycle

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(lifecycle, "summarise_job", killed)
    job, spec = served_job
    out = tmp_path / "bench"
    with pytest.raises(KeyboardInterrupt):
        bench_job(job, spec.base_url, out, spec=spec, source="simulated")
    assert json.loads((out / "run.json").read_text())["source"] == "simulated"
    assert json.loads((out / "summary.json").read_text())["source"] == "simulated"


def test_a_signal_stops_the_load_at_the_clients_next_poll_and_then_raises(
    served_job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal handler that raises runs wherever the main thread is; inside the event loop that is some coroutine's
    frame or aiohttp's parser, whose cleanup then awaits with the loop still running. CI saw a SIGTERM become one
    failed request while the run went on against a frozen server. The first signal now asks the client to stop:
    in-flight requests are cancelled and recorded as interrupted, the summary says why (so `--resume` re-runs the
    job), and only then does `bench_job` raise the interrupt, with the signal's exit code."""
    job, spec = served_job
    real: Any = vars(client_proto)["HttpResponseParser"]  # the name aiohttp's response handler calls
    fed = itertools.count()

    class Tripwire:
        """The response parser, sending this process SIGTERM from inside its fifth feed: the handler runs there."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._parser = real(*args, **kwargs)

        def feed_data(self, data: bytes) -> object:
            if next(fed) == 4:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # a loop's backward jumps are where the interpreter runs a pending handler
                    pass
            return self._parser.feed_data(data)

        def __getattr__(self, name: str) -> object:
            return getattr(self._parser, name)

    monkeypatch.setattr(client_proto, "HttpResponseParser", Tripwire)
    saved = {sig: signal.getsignal(sig) for sig in signals.INTERRUPT_SIGNALS}
    signals.reset()
    signals.install()  # as every CLI command does: the first signal unwinds the run
    out = tmp_path / "bench"
    try:
        with pytest.raises(signals.Interrupted) as caught:
            bench_job(job, spec.base_url, out, spec=spec, source="simulated")
        assert signals.received() == [signal.SIGTERM]
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        signals.reset()
    assert caught.value.signum == signal.SIGTERM and caught.value.exit_code == 143
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["client"]["stop_reason"] == "interrupted by SIGTERM"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert sum(r["phase"] == "profiling" for r in records) < 4 * job.concs[0], "the load stopped early"
    assert any(r.get("error") == "cancelled in flight: interrupted by SIGTERM" for r in records)
    validity = json.loads((out / "summary.json").read_text())["validity"]
    assert validity["verdict"] == "invalid"
    assert "run stopped early: interrupted by SIGTERM" in validity["reasons"]
