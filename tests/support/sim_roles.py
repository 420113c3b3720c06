"""A live simulated prefill/decode deployment over loopback for tests: a prefill worker, a decode worker behind the
link `link` describes, and the simulated PD router in front of them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.roles import RoleConfig
from llmsweep.sim.router import PDRouter, start_router
from llmsweep.sim.server import SimServer, start_server


@dataclass(frozen=True)
class PDDeployment:
    url: str
    """The router's: where a client sends."""
    prefill: SimServer
    decode: SimServer
    decode_url: str
    prefill_url: str


@asynccontextmanager
async def pd_deployment(engine: Mapping[str, Any], link: RoleConfig) -> AsyncIterator[PDDeployment]:
    async with AsyncExitStack() as stack:
        prefill = SimServer(EngineConfig(**engine), served_model_name="m", role=RoleConfig(role="prefill"))
        decode = SimServer(EngineConfig(**engine), served_model_name="m", role=link)
        urls = []
        for server in (prefill, decode):
            runner, port = await start_server(server, "127.0.0.1", 0)
            stack.push_async_callback(runner.cleanup)
            urls.append(f"http://127.0.0.1:{port}")
        router = PDRouter([urls[0]], [urls[1]], kv_transfer=link.kv_transfer or "nixl")
        runner, port = await start_router(router, "127.0.0.1", 0)
        stack.push_async_callback(runner.cleanup)
        yield PDDeployment(f"http://127.0.0.1:{port}", prefill, decode, urls[1], urls[0])
