"""Fixtures for executor tests: the tiny HTTP server script and a helper to describe it as a LaunchSpec."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llmsweep.engines.launch import LaunchSpec

HELPERS = Path(__file__).resolve().parent / "helpers"
TINY_SERVER = HELPERS / "tiny_server.py"


def tiny_spec(*extra: str, port: int = 0, markers: tuple[str, ...] = (), secret_env: tuple[str, ...] = (),
              timeout_s: float = 20.0, env: dict[str, str] | None = None) -> LaunchSpec:
    """A LaunchSpec that starts the tiny server; port 0 is left for preflight to resolve, as adapters do."""
    return LaunchSpec(
        engine="tiny",
        argv=(sys.executable, str(TINY_SERVER), "--port", str(port), *extra),
        port=port,
        ready_log_markers=markers,
        secret_env=secret_env,
        startup_timeout_s=timeout_s,
        env=env or {},
    )


@pytest.fixture
def make_tiny_spec() -> Callable[..., LaunchSpec]:
    return tiny_spec
