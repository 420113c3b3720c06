"""What the commands that are servers of ours share (`sim serve`, `sim router`, `router`): the fix for a port that is
taken, serving until a stop signal, and the PD router's start (one router, `llmsweep.router`, whichever protocol)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

import click

from llmsweep.errors import LlmsweepError


def bind_fix(port: int) -> str:
    """Started by hand, the port is the user's to change; started by `llmsweep run` (a role on a node), it is the
    launch's, and what holds it is what to stop (a recipe's --port is refused: `serve.launch-conflict`)."""
    return (f"stop what listens on port {port} on this host (`ss -ltnp 'sport = :{port}'` shows it); started by "
            "hand, pick a free --port (or 0 for any)")


async def wait_for_stop(command: str) -> None:
    """Serve until an interrupt signal (SIGINT, SIGTERM, SIGHUP unless `nohup` ignores it, SIGQUIT, SIGUSR1, ...:
    `execute.signals.INTERRUPT_SIGNALS`), then stop cleanly: a server asked to stop exits 0, whichever signal asked
    (SIGHUP ended it with 129 while the others gave 0; SIGUSR1 or SIGALRM killed it). Says on stderr which signal
    stopped `command`, so a log that ends there says why the server went (not a crash, not the OOM killer: those
    leave no such line)."""
    from llmsweep.execute.signals import INTERRUPT_SIGNALS, taken_over

    stop = asyncio.Event()
    received: list[signal.Signals] = []

    def _stop(sig: signal.Signals) -> None:
        received.append(sig)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in INTERRUPT_SIGNALS:
        if taken_over(sig):
            with contextlib.suppress(NotImplementedError):  # non-POSIX
                loop.add_signal_handler(sig, _stop, sig)
    await stop.wait()
    click.echo(f"llmsweep {command}: stopping on {received[0].name}", err=True)
    sys.stderr.flush()


async def serve_router(command: str, protocol: str, prefill: list[str], decode: list[str], *, kv_transfer: str | None,
                       host: str, port: int) -> None:
    """`llmsweep router` and `llmsweep sim router` (the `sim` protocol): bind, say the protocol's ready line with the
    address and the workers on stderr, serve until a stop signal."""
    from llmsweep.router import PDRouter, protocol_named, start_router

    pd = PDRouter(prefill, decode, protocol=protocol_named(protocol), kv_transfer=kv_transfer)
    try:
        runner, bound = await start_router(pd, host, port)
    except OSError as exc:
        raise LlmsweepError(f"llmsweep {command}: cannot bind {host}:{port}: {exc.strerror}",
                            fix=bind_fix(port)) from exc
    click.echo(f"{pd.protocol.ready_line}{host}:{bound}: protocol {protocol}; prefill {', '.join(pd.prefill)}; "
               f"decode {', '.join(pd.decode)}", err=True)
    await wait_for_stop(command)
    await runner.cleanup()
