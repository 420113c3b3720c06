"""What llmsweep's own HTTP servers share (the live simulator's worker, `sim.server`, and the PD router,
`llmsweep.router`): the OpenAI-style error body, reading a request body that must be one JSON object, starting an app
on a port with a short stop grace, and the node a server says it runs on. A client sees one error shape whichever of
them it talks to."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

from aiohttp import web

STOP_GRACE_S = 1.0
"""How long a stopping server of ours (`sim serve`, `sim router`, `router`) lets in-flight requests run on before it
cuts them (aiohttp waits this twice, then cancels the handlers, which aborts their requests). aiohttp's default, 60 s,
kept a stopped server up for two minutes while a client streamed, past the stop grace a launcher gives
(`execute.handle`, 10 s) and into its SIGKILL."""


def node_name() -> str:
    """The node this process runs on as Slurm names it (`SLURMD_NODENAME` inside a step), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def error_response(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    """The error body vLLM's and SGLang's OpenAI servers send: `{"error": {message, type, code}, ...}`."""
    return web.json_response({"error": {"message": message, "type": kind, "code": status}, "object": "error",
                              "message": message}, status=status)


def json_object(raw: bytes) -> dict[str, Any] | web.Response:
    """A request's body as a JSON object, or the 400 answer that says why it is not one.

    Every way the decoder refuses a body is the client's error: JSON nested deeper than the decoder recurses
    (RecursionError) and an integer longer than Python converts (a ValueError that is no JSONDecodeError) gave a 500
    with a traceback in the server's log, where a malformed body is a 400."""
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        return error_response(400, f"request body is not valid JSON ({exc.msg}: line {exc.lineno}, column {exc.colno})")
    except UnicodeDecodeError:
        return error_response(400, "request body is not valid JSON (not UTF-8 text)")
    except RecursionError:
        return error_response(400, "request body is not valid JSON the server reads (nested too deeply)")
    except ValueError as exc:  # e.g. an integer literal past Python's digit limit
        return error_response(400, f"request body is not valid JSON the server reads ({str(exc)[:120]})")
    if not isinstance(body, dict):
        return error_response(400, "request body must be a JSON object")
    return body


async def start_app(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start `app` on (host, port); returns the runner (call `cleanup()` to stop) and the bound port.

    handler_cancellation: a client that goes away cancels its handler. The worker then aborts its request whether it
    streams or not and whether it runs or waits, as vLLM and SGLang abort a disconnected request (aiohttp's default,
    off, left a non-streaming or still-queued request running to its max_tokens); the router drops its upstream
    request, and the worker aborts that one in turn, as a real PD router's client disconnect does."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True,
                           shutdown_timeout=STOP_GRACE_S)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    addresses = runner.addresses
    return runner, int(addresses[0][1]) if addresses else port
