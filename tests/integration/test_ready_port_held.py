"""Readiness when another process holds the server's port: what answers /health there is not the server launched.

A run had benchmarked `llmsweep sim serve` started on its pinned port a second after its `transformers serve`
launch, and stored the simulator's figures as a valid measurement of transformers: uvicorn prints `Application
startup complete.` (the transformers marker then) before it binds, and even when the bind fails, and /health answered
from the simulator. The launch is ready at uvicorn's line after the bind; a log that says the bind failed fails the
launch whatever answers; and a server whose /version names another engine is not taken for the one launched.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.held_port import holder

from llmsweep.catalog.engines import get_engine
from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LaunchError
from llmsweep.execute.local import LocalLauncher
from llmsweep.execute.preflight import pick_free_port
from llmsweep.execute.ready import wait_ready

UVICORN_LIKE = Path(__file__).resolve().parents[1] / "unit" / "execute" / "helpers" / "uvicorn_like.py"


def spec_of(engine: str, port: int, *extra: str, markers: tuple[str, ...] | None = None) -> LaunchSpec:
    """A launch of the uvicorn-like stand-in as `engine`, ready at the catalog's markers for it unless given."""
    return LaunchSpec(engine=engine, argv=(sys.executable, str(UVICORN_LIKE), "--port", str(port), *extra),
                      port=port, ready_log_markers=tuple(get_engine(engine).ready_markers) if markers is None
                      else markers, startup_timeout_s=20)


@pytest.mark.parametrize("engine", ["transformers", "atom"])
def test_an_engine_that_leaves_the_bind_to_uvicorn_is_not_ready_on_another_servers_health(
        tmp_path: Path, engine: str) -> None:
    """transformers serve and ATOM run uvicorn.run(app, host, port): their launch on a port another server holds had
    been ready at once (the pre-bind marker, the other's /health). It fails, saying the address is in use, and a
    server that lives on after its failed bind is stopped: its failure is an exit, as a port race needs."""
    port = pick_free_port()
    with holder(port):
        handle = LocalLauncher().launch(spec_of(engine, port), log_path=tmp_path / "server.log")
        try:
            with pytest.raises(LaunchError) as err:
                wait_ready(handle, poll_s=0.1)
        finally:
            handle.stop(grace_s=5)
    said = err.value.message
    assert f"{engine} server could not bind an address another process holds" in said, said
    assert "address already in use" in said and "did not exit; stopped it" in said, said
    assert handle.returncode is not None
    fix = str(err.value.fix)
    assert f"`ss -ltnp 'sport = :{port}'`" in fix and "delete the recipe's `serve.port`" in fix, fix


def test_a_failed_bind_in_the_log_fails_the_launch_even_at_a_marker_printed_before_the_bind(tmp_path: Path) -> None:
    """An engine whose marker comes before the bind (uvicorn's `Application startup complete.`): its log's bind error
    fails the launch whatever answers the port."""
    port = pick_free_port()
    with holder(port):
        spec = spec_of("trtllm", port, markers=("Application startup complete.",))
        handle = LocalLauncher().launch(spec, log_path=tmp_path / "server.log")
        try:
            with pytest.raises(LaunchError, match="address already in use"):
                wait_ready(handle, poll_s=0.1)
        finally:
            handle.stop(grace_s=5)


def test_a_server_that_binds_its_port_is_ready_at_uvicorns_line(tmp_path: Path) -> None:
    """The stand-in that binds is ready at the catalog's marker, `Uvicorn running on`; a /version that names no
    engine (transformers serve has none) is no tell."""
    port = pick_free_port()
    handle = LocalLauncher().launch(spec_of("transformers", port), log_path=tmp_path / "server.log")
    try:
        ready = wait_ready(handle, poll_s=0.1)
    finally:
        handle.stop(grace_s=5)
    assert ready.marker == "Uvicorn running on"
