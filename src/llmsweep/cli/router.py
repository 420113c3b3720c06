"""`llmsweep router`: llmsweep's prefill/decode router in front of a disaggregated deployment's workers."""

from __future__ import annotations

import asyncio

import click

from llmsweep.cli.options import BIND_PORT, option
from llmsweep.cli.serving import serve_router


@click.command("router")
@click.option("--protocol", required=True, type=click.Choice(["vllm-nixl", "sim"]),
              help="What the workers speak: vLLM's P/D protocol with its NIXL connector, or the simulator's roles "
                   "(as `llmsweep sim router`).")
@option("prefill_urls")
@option("decode_urls")
@option("kv_transfer")
@option("bind_host")
@click.option("--port", default=8000, show_default=True, type=BIND_PORT, help="Port to bind (0 = any free port).")
def router(protocol: str, prefill: tuple[str, ...], decode: tuple[str, ...], kv_transfer: str | None, host: str,
           port: int) -> None:
    """Serve a PD router: each request's prompt on a prefill worker, its answer from a decode worker that receives the
    prompt's KV (round robin over each), `/health` only while every worker is healthy."""
    asyncio.run(serve_router("router", protocol, list(prefill), list(decode), kv_transfer=kv_transfer, host=host,
                             port=port))
