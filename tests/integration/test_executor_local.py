"""The local executor end to end with a real HTTP server: ready, stop, no orphans, failures that say why."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError, LaunchError
from llmsweep.execute.handle import ServerHandle
from llmsweep.execute.local import LocalLauncher, LocalOptions
from llmsweep.execute.preflight import port_is_free, resolve_port
from llmsweep.execute.process import read_proc
from llmsweep.execute.ready import exit_text, wait_ready

TINY_SERVER = Path(__file__).resolve().parents[1] / "unit" / "execute" / "helpers" / "tiny_server.py"
TOKEN = "hf_integrationSECRETvalue42"


def tiny_spec(*extra: str, markers: tuple[str, ...] = (), timeout_s: float = 30.0, **kw: object) -> LaunchSpec:
    spec = LaunchSpec(engine="tiny", argv=(sys.executable, str(TINY_SERVER), "--port", "0", *extra), port=0,
                      ready_log_markers=markers, startup_timeout_s=timeout_s, **kw)
    return resolve_port(spec)


def alive(pid: int) -> bool:
    info = read_proc(pid)
    return info is not None and info.state not in ("Z", "X")


def test_server_becomes_ready_after_health_and_marker_then_stops_without_orphans(tmp_path: Path) -> None:
    pids_file = tmp_path / "children"
    spec = tiny_spec("--delay", "0.8", "--marker", "Application startup complete",
                     "--spawn-children", str(pids_file), markers=("Application startup complete",))
    handle = LocalLauncher().launch(spec, log_path=tmp_path / "server.log")
    try:
        readiness = wait_ready(handle, poll_s=0.1)
        assert readiness.health_status == 200 and readiness.marker == "Application startup complete"
        assert readiness.seconds >= 0.8  # /health said 503 until the delay passed
        with urllib.request.urlopen(f"{handle.base_url}/v1/models", timeout=5) as resp:
            assert json.load(resp)["pid"] == handle.pid
        children = [int(p) for p in pids_file.read_text().split()]
        assert len(children) == 2 and all(alive(c) for c in children)
    finally:
        handle.stop(grace_s=5.0)
    assert not handle.is_alive()
    assert [c for c in children if alive(c)] == []
    assert port_is_free(spec.port)
    log_text = (tmp_path / "server.log").read_text()
    assert "Application startup complete" in log_text and "got SIGTERM, shutting down" in log_text


def test_server_that_dies_during_startup_raises_with_exit_code_and_log_tail(tmp_path: Path) -> None:
    handle = LocalLauncher().launch(tiny_spec("--exit-after", "0.3"), log_path=tmp_path / "server.log")
    with pytest.raises(LaunchError) as err:
        wait_ready(handle, poll_s=0.1)
    text = str(err.value)
    assert "exited with status 3" in text
    assert "simulated CUDA out of memory" in text  # the log tail names the cause
    assert err.value.exit_code == 1
    # what a failure's text reads off any handle (`ServerHandle`): a local process is one part, and its launcher
    # knows nothing of the exit beyond its status
    server: ServerHandle = handle
    assert server.dead_role is None and server.exit_cause() is None and server.exit_fix() is None
    assert exit_text(server) == "it exited with status 3"


def test_server_that_never_gets_ready_times_out_with_log_tail(tmp_path: Path) -> None:
    handle = LocalLauncher().launch(tiny_spec("--delay", "60"), log_path=tmp_path / "server.log")
    try:
        started = time.monotonic()
        with pytest.raises(LaunchError) as err:
            wait_ready(handle, timeout_s=1.5, poll_s=0.2)
        assert time.monotonic() - started < 15
    finally:
        handle.stop(grace_s=2.0)
    text = str(err.value)
    assert "not ready after 1.5 s" in text  # the deadline as given (it read "2 s", and 0.3 s read "0 s")
    assert "HTTP 503" in text and "tiny server starting" in text
    # the fix names what a user sets (it said `startup_timeout_s`, a field of neither the recipe nor the CLI)
    fix = err.value.fix or ""
    assert "`serve.health-timeout`" in fix and "--startup-timeout" in fix, fix


def test_missing_ready_marker_keeps_a_healthy_server_unready(tmp_path: Path) -> None:
    spec = tiny_spec(markers=("warm-up finished",))
    handle = LocalLauncher().launch(spec, log_path=tmp_path / "server.log")
    try:
        with pytest.raises(LaunchError, match="none of the markers"):
            wait_ready(handle, timeout_s=1.0, poll_s=0.2)
    finally:
        handle.stop(grace_s=2.0)


def test_secret_reaches_server_but_not_its_log(tmp_path: Path) -> None:
    spec = tiny_spec("--echo-env", "HF_TOKEN", secret_env=("HF_TOKEN",))
    environ = {"PATH": "/usr/bin:/bin", "HF_TOKEN": TOKEN}
    handle = LocalLauncher().launch(spec, log_path=tmp_path / "server.log", environ=environ)
    try:
        wait_ready(handle, poll_s=0.1)
    finally:
        handle.stop(grace_s=2.0)
    log_text = (tmp_path / "server.log").read_text()
    assert "env HF_TOKEN=***" in log_text and TOKEN not in log_text
    assert handle.scrubber.scrub(f"cmd --token {TOKEN}") == "cmd --token ***"


def test_sigterm_deaf_server_is_killed_after_grace(tmp_path: Path) -> None:
    handle = LocalLauncher().launch(tiny_spec("--ignore-term"), log_path=tmp_path / "server.log")
    wait_ready(handle, poll_s=0.1)
    handle.stop(grace_s=0.5)
    assert not handle.is_alive() and handle.returncode == -9


def test_missing_binary_is_a_launch_error(tmp_path: Path) -> None:
    spec = LaunchSpec(engine="vllm", argv=("/nonexistent/vllm", "serve"), port=1)
    with pytest.raises(LaunchError, match="cannot start `/nonexistent/vllm`"):
        LocalLauncher().launch(spec, log_path=tmp_path / "server.log")


def test_local_refuses_image_jobs_unless_allowed() -> None:
    spec = LaunchSpec(engine="vllm", image="vllm/vllm-openai:v0.9", argv=("vllm", "serve"), port=1)
    with pytest.raises(ConfigError, match="the local executor runs on the host") as refused:
        LocalLauncher().render(spec)
    fix = refused.value.fix or ""  # each executor's way, the local one's option named as the local executor's
    assert "docker executor" in fix and "slurm with srun" in fix and "--executor-option allow_image=true" in fix
    assert LocalLauncher(LocalOptions(allow_image=True)).render(spec) == ["vllm", "serve"]


def test_a_server_that_dies_after_ready_is_reported_by_check_alive(tmp_path: Path) -> None:
    from llmsweep.execute.ready import check_alive

    handle = LocalLauncher().launch(tiny_spec(), log_path=tmp_path / "server.log")
    try:
        wait_ready(handle, poll_s=0.1)
        check_alive(handle, during="benchmark")  # alive: no error
        handle.process.stop(grace_s=2.0)  # the server goes away behind the lifecycle's back
        with pytest.raises(LaunchError, match="died during benchmark") as err:
            check_alive(handle, during="benchmark")
        assert "got SIGTERM" in str(err.value)
    finally:
        handle.stop(grace_s=1.0)
