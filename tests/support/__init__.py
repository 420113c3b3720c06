"""Test support shared across rooms: a real aiohttp streaming server with injectable timing and faults
(`tests.support.stream_server`) and small workloads (`tests.support.workloads`)."""

from __future__ import annotations

from typing import Any

__all__ = ["FAULTS", "ServerConfig", "StreamServer", "run_in_subprocess"]


def __getattr__(name: str) -> Any:
    # Lazy, so `python -m tests.support.stream_server` does not import the module twice.
    if name in __all__:
        from . import stream_server

        return getattr(stream_server, name)
    raise AttributeError(name)
