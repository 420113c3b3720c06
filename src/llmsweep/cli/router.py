"""`llmsweep router`: llmsweep's prefill/decode router in front of a disaggregated deployment's workers."""

from __future__ import annotations

import asyncio

import click

from llmsweep.errors import LlmsweepError


@click.command("router")
@click.option("--protocol", required=True, type=click.Choice(["vllm-nixl", "sim"]),
              help="What the workers speak: vLLM's P/D protocol with its NIXL connector, or the simulator's roles "
                   "(as `llmsweep sim router`).")
@click.option("--prefill", "prefill", multiple=True, required=True, help="A prefill worker's URL (repeatable).")
@click.option("--decode", "decode", multiple=True, required=True, help="A decode worker's URL (repeatable).")
@click.option("--kv-transfer", default=None, help="The KV-transfer backend the workers use (said in /version).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port to bind (0 = any free port).")
def router(protocol: str, prefill: tuple[str, ...], decode: tuple[str, ...], kv_transfer: str | None, host: str,
           port: int) -> None:
    """Serve a PD router: each request's prompt on a prefill worker, its answer from a decode worker that receives the
    prompt's KV (round robin over each), `/health` only while every worker is healthy."""
    asyncio.run(_route(protocol, list(prefill), list(decode), kv_transfer=kv_transfer, host=host, port=port))


async def _route(protocol: str, prefill: list[str], decode: list[str], *, kv_transfer: str | None, host: str,
                 port: int) -> None:
    from llmsweep.cli.sim import _bind_fix, _wait_for_stop
    from llmsweep.router import PDRouter, protocol_named, start_router

    pd = PDRouter(prefill, decode, protocol=protocol_named(protocol), kv_transfer=kv_transfer)
    try:
        runner, bound = await start_router(pd, host, port)
    except OSError as exc:
        raise LlmsweepError(f"llmsweep router: cannot bind {host}:{port}: {exc.strerror}", fix=_bind_fix(port)) from exc
    click.echo(f"{pd.protocol.ready_line}{host}:{bound}: protocol {protocol}; prefill {', '.join(pd.prefill)}; "
               f"decode {', '.join(pd.decode)}", err=True)
    await _wait_for_stop()
    await runner.cleanup()
