"""Shared helpers of the `llmsweep run` end-to-end tests: run the real CLI (in a subprocess, or in this process through
its entry point) and read what it left.

(A module of helpers, no tests: named test_run_* so it sits with the tests it serves.)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llmsweep.execute.signals import INTERRUPT_SIGNALS

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run"
JOB_ARTIFACTS = ("job.json", "server_command.txt", "server.log", "records.jsonl", "server_metrics.jsonl",
                 "summary.json")


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI run: the store in tmp (never the user's home), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "LLMSWEEP_TEST_SECRET"}
    return {**env, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite"), "PYTHONUNBUFFERED": "1", **extra}


def run_argv(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "llmsweep.cli.main", "run", *(str(a) for a in args)]


def run_cli(args: Sequence[str | Path], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(run_argv(*args), env=env, capture_output=True, text=True, timeout=timeout)


def run_here(args: Sequence[str | Path], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`llmsweep run ARGS` in this process, through `main` as the console script calls it, under `env` (the
    process's environment for the call, restored after): its exit status, stdout and stderr as `run_cli` gives them,
    without a Python start and llmsweep's imports (seconds on CI's 2 cores). For runs that end on their own; a test
    about signals, or about the processes a run leaves, runs the CLI as its own process (`run_cli`, `start_cli`).
    (Log records are pytest's here, not stderr's: assert on what the run prints, not on a `WARNING` record.)"""
    return cli_here(["run", *args], env)


def cli_here(args: Sequence[str | Path], env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`llmsweep ARGS` (any command) in this process, as `run_here` runs `llmsweep run`; in `cwd` when given (the
    working directory restored after), under this process's own environment when `env` is None."""
    from llmsweep.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    # `main` takes over the interrupt signals and the unraisable hook for the rest of its process: given back after
    handlers = {sig: signal.getsignal(sig) for sig in INTERRUPT_SIGNALS}
    hook = sys.unraisablehook
    os.environ.clear()
    os.environ.update(saved if env is None else env)
    hub, hub_offline = _hub_offline_as(os.environ)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                contextlib.chdir(cwd or Path.cwd()):
            try:
                main([str(a) for a in args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if hub is not None:
            hub.HF_HUB_OFFLINE = hub_offline
        for sig, handler in handlers.items():
            if handler is not None:  # None: not set from Python (nothing to give back)
                signal.signal(sig, handler)
        sys.unraisablehook = hook
    argv = [sys.executable, "-m", "llmsweep.cli.main", *(str(a) for a in args)]
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def _hub_offline_as(environ: Mapping[str, str]) -> tuple[Any, bool]:
    """Set huggingface_hub's offline switch as `environ` says for an in-process call, and return (its constants module
    or None, the value to restore). huggingface_hub reads `HF_HUB_OFFLINE` once, when first imported: an earlier test
    of the same worker process may have imported it online, and a run given `HF_HUB_OFFLINE=1` then tried the hub for
    each job until its connection failed (two reuse-key tests took 163 s of the suite; 5 s offline)."""
    try:
        from huggingface_hub import constants
    except ModuleNotFoundError:
        return None, False
    before = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    return constants, before


def cli_exits(*args: str | Path, ok: int = 0) -> subprocess.CompletedProcess[str]:
    """`llmsweep ARGS` in this process (`cli_here`), asserting it exits `ok` (stderr's tail shown when not)."""
    proc = cli_here(args)
    assert proc.returncode == ok, proc.stderr[-4000:]
    return proc


def start_cli(args: Sequence[str | Path], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start `llmsweep run` in the background, stdout+stderr to `log` (a pipe nobody reads could block it)."""
    fh = open(log, "wb")  # noqa: SIM115 - handed to the child; closed when the test's tmp dir goes
    return subprocess.Popen(run_argv(*args), env=env, stdout=fh, stderr=subprocess.STDOUT)


def job_dirs(out: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted((out / "jobs").iterdir()) if p.is_dir()}


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def verdict(job_dir: Path) -> str | None:
    path = job_dir / "summary.json"
    return read_json(path)["validity"]["verdict"] if path.exists() else None


def record_lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_bytes().splitlines() if line.strip())
    except FileNotFoundError:
        return 0


def server_pids(out: Path) -> list[int]:
    return [int(read_json(p)["pid"]) for p in sorted((out / "servers").glob("*/server.pid")) if p.stat().st_size]


def kill_quietly(pid: int) -> None:
    """Test clean-up of a process this test caused to start (never by name)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stood_on_runs(tmp_path: Path) -> tuple[Path, Path, Path, Path, dict[str, str]]:
    """A source run of `fixed-sim.yaml` and a second run that stands every job on it (`run --reuse`): (recipe,
    source, reusing, store, env)."""
    env, store = cli_env(tmp_path), tmp_path / "store.sqlite"
    recipe = tmp_path / "r.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text())
    source, reusing = tmp_path / "source", tmp_path / "reusing"
    assert run_here([recipe, "--out", source, "--no-report"], env).returncode == 0
    stood = run_here([recipe, "--out", reusing, "--no-report", "--reuse", "--json"], env)
    assert stood.returncode == 0 and all(r["reused"] for r in json.loads(stood.stdout)["jobs"]), stood.stderr[-3000:]
    return recipe, source, reusing, store, env
