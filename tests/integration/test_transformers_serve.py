"""`transformers serve` as a real engine: its dialect, the client that copes with it, and `llmsweep run` end to end.

Three levels: the real client against an in-process server that speaks exactly transformers serve's dialect (422 on
`ignore_eos`, no `[DONE]`, usage on the last chunk); `llmsweep run` launching a stand-in `transformers` module through
the adapter's own argv; and, when the `python3` the adapter launches can import torch and transformers, the real
server on the CPU (skipped otherwise — CI does not install torch). `LLMSWEEP_TRANSFORMERS_PYTHON` may name such a
python (e.g. /tmp/venv-tfserve/bin/python); its folder then goes first on PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.real_engine import tiny_transformers_recipe, transformers_path
from support.transformers_dialect import DialectServer, fake_transformers_package

from llmsweep import engines
from llmsweep.client import run_benchmark
from llmsweep.execute.lifecycle import LifecycleSettings, _endpoint, _run_options, _workload
from llmsweep.plan import Job, full_sweep
from llmsweep.sim_warnings import no_gpu_figures
from llmsweep.spec import loads_recipes

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def model_dir(tiny_model_dir: Path) -> Path:
    return tiny_model_dir


FP32_ARGS = "\n      --dtype: float32"
"""The real server computes in float32: on an AVX2-only CPU torch multiplies bf16 about 20x slower than fp32."""


def fp32_recipe(text: str) -> str:
    """A tiny recipe whose job says the precision its `--dtype float32` server runs at."""
    assert text.count("precision: bf16\n") == 1
    return text.replace("precision: bf16\n", "precision: fp32\n")


def plan(text: str) -> list[Job]:
    return full_sweep(loads_recipes(text, "tf.yaml").raise_on_error().recipes)


def records(job_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (job_dir / "records.jsonl").read_text().splitlines()]


def test_the_client_run_builds_for_a_transformers_job_completes_against_its_dialect(model_dir: Path,
                                                                                   tmp_path: Path) -> None:
    job = plan(tiny_transformers_recipe(model_dir, concs="[4]"))[0]
    spec = engines.render(job, port=0)
    with DialectServer(model=str(model_dir), ttft_s=0.03, itl_s=0.004) as srv:
        res = run_benchmark(_workload(job, "measured"), _endpoint(job, spec, srv.url),
                            _run_options(job, spec, LifecycleSettings()), tmp_path)
        seen = srv.state
    recs = records(tmp_path)
    profiled = [r for r in recs if r["phase"] == "profiling"]
    # 4 prompts per conc at conc 4 are measured; the one warm-up is sent apart from them.
    assert len(profiled) == 16 and len(recs) == 17, recs[:2]
    assert all(r["error_class"] is None for r in recs), recs[:2]
    for r in recs:
        # max_tokens honoured (max_completion_tokens would be ignored: 1024 tokens), counts from the final usage
        assert r["completion_tokens"] == r["max_tokens"] == sum(r["chunk_tokens"])
        assert r["prompt_tokens"] and r["first_token_at"] is not None
    assert {s.status for s in seen.requests} == {200}
    assert all("ignore_eos" not in s.fields and "max_completion_tokens" not in s.fields for s in seen.requests)
    assert "/metrics" not in seen.gets  # nothing to scrape, so no scraping
    s = res.summary
    assert s.requests.failed == 0 and s.validity.verdict == "smoke"
    assert s.latency.ttft.p50 >= 0.03  # the server's first-token delay is measured, not hidden
    assert s.latency.itl.count > 0 and s.tokens.output_total == sum(r["max_tokens"] for r in profiled)


def test_without_the_dialect_every_request_is_a_422(model_dir: Path, tmp_path: Path) -> None:
    """The negative control: the default endpoint (ignore_eos on) fails against this server."""
    from llmsweep.client import Endpoint

    job = plan(tiny_transformers_recipe(model_dir, concs="[1]"))[0]
    spec = engines.render(job, port=0)
    with DialectServer(model=str(model_dir)) as srv:
        ep = Endpoint(base_url=srv.url, model=str(model_dir), api="chat", metrics_url="")
        options = _run_options(job, spec, LifecycleSettings()).model_copy(update={"max_failure_ratio": 1.0})
        res = run_benchmark(_workload(job, "measured"), ep, options, tmp_path)
    assert {r["status"] for r in records(tmp_path)} == {422}
    assert res.summary.validity.verdict == "invalid"


def _cli(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def _check_run(out: Path, proc: subprocess.CompletedProcess[str]) -> list[dict]:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = sorted((out / "jobs").iterdir())
    assert len(jobs) == 3
    summaries = []
    for job_dir in jobs:
        recs = records(job_dir)
        assert recs and all(r["error_class"] is None for r in recs), recs[:2]
        assert all(r["completion_tokens"] == r["max_tokens"] for r in recs)
        summary = json.loads((job_dir / "summary.json").read_text())
        assert summary["validity"]["verdict"] == "valid" and summary["requests"]["failed"] == 0
        assert summary["latency"]["ttft"]["count"] > 0 and summary["latency"]["itl"]["count"] > 0
        assert "transformers.cli.transformers serve" in (job_dir / "server_command.txt").read_text()
        # the local executor ran the engine on the host (allow_image): not in the image the recipe names
        launch = summary["provenance"]["launch"]
        assert launch["image"] is None and launch["recipe_image"] == "huggingface/transformers-pytorch-cpu:5.17.0"
        # a server on no GPU: its per-GPU figures are labelled as the endpoint's, in its result and its outcome
        assert summary["provenance"]["gpus_known"] is False, summary["provenance"]
        assert summary["provenance"]["gpus_from"] == no_gpu_figures(1)
        assert json.loads((job_dir / "outcome.json").read_text())["warnings"] == [no_gpu_figures(1)]
        summaries.append(summary)
    assert "3 jobs ran on no GPU (their launch uses 0): per-GPU figures are the whole endpoint's" in \
        proc.stdout + proc.stderr
    return summaries


def test_llmsweep_run_launches_the_rendered_command_and_follows_the_dialect(model_dir: Path, tmp_path: Path) -> None:
    """The real pipeline (local executor, readiness, endpoint, gates) with a stand-in `transformers` module."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shim / "python3").chmod(0o755)
    fake = fake_transformers_package(tmp_path / "fake")
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": f"{fake}{os.pathsep}{REPO / 'src'}", "LLMSWEEP_STORE": str(tmp_path / "store.sqlite")}
    rfile = tmp_path / "tf.yaml"
    rfile.write_text(tiny_transformers_recipe(model_dir))
    out = tmp_path / "run"
    proc = _cli([str(rfile), "--executor", "local", "--executor-option", "allow_image=true", "--out", str(out),
                 "--no-report"], env, timeout=120)
    _check_run(out, proc)
    log = [json.loads(x) for x in (model_dir / "dialect-requests.jsonl").read_text().splitlines()]
    (model_dir / "dialect-requests.jsonl").unlink()
    posts = [e for e in log if e["method"] == "POST"]
    assert posts and {e["status"] for e in posts} == {200}
    assert not any("ignore_eos" in e["fields"] for e in posts)
    assert not any(e["path"] == "/metrics" for e in log)


@pytest.mark.timeout(240)
def test_real_transformers_serve_on_the_cpu(model_dir: Path, tmp_path: Path) -> None:
    path = transformers_path()
    if path is None:
        pytest.skip("no python3 on PATH (or LLMSWEEP_TRANSFORMERS_PYTHON) imports torch + transformers[serving]")
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(REPO / "src"),
           "LLMSWEEP_STORE": str(tmp_path / "store.sqlite")}
    rfile = tmp_path / "tf.yaml"
    rfile.write_text(fp32_recipe(tiny_transformers_recipe(model_dir, extra_args=FP32_ARGS)))
    out = tmp_path / "run"
    proc = _cli([str(rfile), "--executor", "local", "--executor-option", "allow_image=true", "--out", str(out),
                 "--no-report"], env, timeout=220)
    summaries = _check_run(out, proc)
    assert all(s["throughput"]["output_tps"] > 0 for s in summaries)
    for job_dir in (out / "jobs").iterdir():  # the rows say the precision the server computed in
        assert json.loads((job_dir / "job.json").read_text())["precision"] == "fp32"
        assert "--dtype float32" in (job_dir / "server_command.txt").read_text()
    log = (next((out / "servers").iterdir()) / "server.log").read_text()
    assert "Unexpected fields" not in log and "CB: True" in log  # continuous batching served every request

    # `--reuse` of the host's engine: no image pins its build, so each stored result stands only while the host has
    # the version its server read back; read before any server starts, from the interpreter the launch would run.
    launch = json.loads(next((out / "jobs").iterdir()).joinpath("summary.json").read_text())["provenance"]["launch"]
    installed = launch["engine_version_installed"]  # transformers serve reports none: its interpreter's, read there
    assert installed and installed.split(".")[0] == "5" and launch["engine_version_reported"] is None
    reused = _cli([str(rfile), "--executor", "local", "--executor-option", "allow_image=true", "--out",
                   str(tmp_path / "again"), "--no-report", "--reuse"], env, timeout=220)
    assert reused.returncode == 0 and "0 to run" in reused.stderr and "3 reused" in reused.stderr, reused.stderr[-3000:]
    site = tmp_path / "site" / "transformers-99.0.0.dist-info"  # the host's engine upgraded (its metadata says so)
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: transformers\nVersion: 99.0.0\n")
    one = next(p.name for p in (out / "jobs").iterdir() if "_conc1_" in p.name)
    upgraded = _cli([str(rfile), "--executor", "local", "--executor-option", "allow_image=true", "--out",
                     str(tmp_path / "upgraded"), "--no-report", "--reuse", "--job", one],
                    {**env, "PYTHONPATH": f"{site.parent}{os.pathsep}{env['PYTHONPATH']}"}, timeout=220)
    assert f"ran on engine version {installed}; the host now has 99.0.0; the job runs again" in upgraded.stderr, \
        upgraded.stderr[-3000:]


@pytest.mark.timeout(180)
def test_real_transformers_serve_on_a_port_another_server_holds_is_not_ready(model_dir: Path, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers serve prints uvicorn's `Application startup complete.` before it binds its port, and on a port
    another server holds it had been taken as ready on that server's /health (a run stored the simulator's figures as
    transformers'). Its `[Errno 98] ... address already in use` fails the launch, and the server is ended."""
    from support.held_port import holder

    from llmsweep.errors import LaunchError
    from llmsweep.execute.local import LocalLauncher, LocalOptions
    from llmsweep.execute.preflight import pick_free_port
    from llmsweep.execute.ready import wait_ready

    path = transformers_path()
    if path is None:
        pytest.skip("no python3 on PATH (or LLMSWEEP_TRANSFORMERS_PYTHON) imports torch + transformers[serving]")
    monkeypatch.setenv("PATH", path)
    job = plan(fp32_recipe(tiny_transformers_recipe(model_dir, concs="[1]", extra_args=FP32_ARGS)))[0]
    port = pick_free_port()
    with holder(port, host="0.0.0.0"):
        launcher = LocalLauncher(LocalOptions(allow_image=True))  # the host's transformers, as `run` runs it
        handle = launcher.launch(engines.render(job, port=port), log_path=tmp_path / "server.log")
        try:
            with pytest.raises(LaunchError) as err:
                wait_ready(handle, poll_s=0.25)
        finally:
            handle.stop(grace_s=5)
    assert "could not bind an address another process holds" in err.value.message, err.value.message
    assert "address already in use" in err.value.message and handle.returncode is not None
    assert "Uvicorn running on" not in (tmp_path / "server.log").read_text()
