"""`bench --out` is one bench's for the whole run: a second bench (or `run`) given a folder a live bench holds is
refused before any load, two benches started in the same second without --out get a folder each, and `summarize`
leaves a folder alone while its bench still runs. Before, both benches ran into one folder and one printed the other
endpoint's figures as its own, and `summarize` wrote an "interrupted … (killed?)" summary into the live folder."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main
from support.stream_server import ServerConfig, StreamServer

from llmsweep.cli.bench import default_out
from llmsweep.folderlock import claim

LOAD = ("--model", "m", "--isl", "16", "--osl", "4", "--concurrency", "2", "--num-prompts", "4")


@pytest.mark.parametrize("force", [False, True])
def test_a_bench_into_a_folder_a_live_bench_holds_is_refused_and_sends_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], force: bool) -> None:
    out = tmp_path / "out"
    with StreamServer(ServerConfig(itl_s=0.0005)) as srv, claim(out, "llmsweep bench", fix="x"):
        code, stdout, err = run_main(capsys, "bench", "fixed", "--url", srv.url, *LOAD, "--out", out,
                                     *(["--force"] if force else []))
        served = len(srv.served)
    assert code == 2, (stdout, err)
    assert f"another `llmsweep bench` is using {out} (pid {os.getpid()})" in err
    assert "fix: wait for it to finish, or pass a new folder to --out" in err
    assert served == 0 and not (out / "records.jsonl").exists() and not (out / "run.json").exists()


def test_a_folder_claimed_after_the_check_is_refused_under_the_claim(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The window the first check leaves (the endpoint probe): another bench that claims the folder then is refused
    at the claim, not let through to share it."""
    from llmsweep.client import probe as probe_module

    out = tmp_path / "out"
    real = probe_module.require_endpoint
    with contextlib.ExitStack() as stack:
        def probe_then_claimed(*args: Any, **kw: Any) -> Any:
            found = real(*args, **kw)
            stack.enter_context(claim(out, "llmsweep bench", fix="x"))  # another bench, while this one probed
            return found

        srv = stack.enter_context(StreamServer(ServerConfig(itl_s=0.0005)))
        stack.enter_context(pytest.MonkeyPatch.context()).setattr(probe_module, "require_endpoint",
                                                                   probe_then_claimed)
        code, stdout, err = run_main(capsys, "bench", "fixed", "--url", srv.url, *LOAD, "--out", out)
        served = len(srv.served)
    assert code == 2 and f"another `llmsweep bench` is using {out}" in err, (stdout, err)
    assert served == 0 and not (out / "records.jsonl").exists()


def test_two_benches_started_at_once_without_out_write_a_folder_each(tmp_path: Path) -> None:
    """Launched together against two servers (a loop of `&`): each bench's folder holds its own endpoint's records."""
    assert default_out("fixed") != default_out("fixed")  # the same second, two names
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as a, \
            StreamServer(ServerConfig(ttft_s=0.02, itl_s=0.0005)) as b:
        procs = [subprocess.Popen([sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", srv.url,
                                   *LOAD, "--num-warmups", "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for srv in (a, b)]
        said = [p.communicate(timeout=120) for p in procs]
        urls = {a.url, b.url}
    assert [p.returncode for p in procs] == [0, 0], said
    folders = sorted((tmp_path / "results").iterdir())
    assert len(folders) == 2, said
    served_by = set()
    for folder in folders:
        summary = json.loads((folder / "summary.json").read_text())
        served_by.add(summary["provenance"]["endpoint"]["base_url"])
        assert summary["requests"]["successful"] == 4, folder
        assert len((folder / "records.jsonl").read_text().splitlines()) == 4
    assert served_by == urls


def test_summarize_refuses_a_folder_a_bench_still_runs_in_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    with StreamServer(ServerConfig(itl_s=0.0005)) as srv:
        code, stdout, err = run_main(capsys, "bench", "fixed", "--url", srv.url, *LOAD, "--out", out)
    assert code == 0, (stdout, err)
    written = (out / "summary.json").read_bytes()
    with claim(out, "llmsweep bench", fix="x"):  # as the bench holds it while it runs
        code, stdout, err = run_main(capsys, "summarize", out)
    assert code == 2, (stdout, err)
    assert f"{out} is still being written: `llmsweep bench` (pid {os.getpid()}) is running there" in err
    assert "fix: wait for it to finish" in err and "interrupted" not in stdout + err
    assert (out / "summary.json").read_bytes() == written
    code, stdout, err = run_main(capsys, "summarize", out)  # once it has finished
    assert code == 0, (stdout, err)


def test_a_bench_or_predict_out_inside_a_run_is_refused_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bench --out RUN/jobs/new` wrote a bench's records, summary and run.json among a run's job folders, and
    `predict --out RUN/report/p` its points into a run's dashboard folder: both are refused (exit 2, nothing sent,
    nothing written), the fix naming a folder beside the run."""
    run = tmp_path / "runs" / "sweep"
    (run / "jobs").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"recipes": []}))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with StreamServer(ServerConfig(itl_s=0.0005)) as srv:
        code, stdout, err = run_main(capsys, "bench", "fixed", "--url", srv.url, *LOAD, "--out", run / "jobs" / "new")
        served = len(srv.served)
    assert code == 2 and served == 0, (stdout, err)
    assert f"--out {run / 'jobs' / 'new'} is inside {run}, a run of `llmsweep run`" in err, err
    assert f"fix: pass a folder of its own beside it to --out, e.g. {run.parent / 'sweep-new'}" in err, err
    recipe = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "fixed-sim.yaml"
    code, stdout, err = run_main(capsys, "predict", str(recipe), "--out", run / "report" / "p", "--duration", "5")
    assert code == 2 and f"--out {run / 'report' / 'p'} is inside {run}, a run of `llmsweep run`" in err, err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
