"""The simulator's PD protocol: what llmsweep's router (`llmsweep.router`) carries between simulator roles (the
analogue of SGLang's `sglang_router.launch_router --pd-disaggregation`).

The prefill leg is the client's request with one output token, not streamed. The decode leg is the client's request
as it came, with the number of prompt tokens whose KV is to arrive, which prefill worker holds it (its index: the
decode worker models the transfer over that pair's link) and the number the prefill worker found in its prefix cache
(`sim.roles`: the request's `cached_tokens`, which the decode worker reports); its answer is relayed byte for byte.
`/version` says what the router is, where it runs and which workers it routes to.
"""

from __future__ import annotations

from typing import Any

from llmsweep.engine_ids import SIM
from llmsweep.router import STALLED_AFTER_S, DecodeLeg, PDProtocol, prompt_cached_tokens, start_router
from llmsweep.router import PDRouter as Router
from llmsweep.sim.roles import (
    KV_CACHED_HEADER,
    KV_SOURCE_HEADER,
    KV_SOURCE_WORKER_HEADER,
    KV_TOKENS_HEADER,
    ROUTER_READY_LINE,
)

__all__ = ["PDRouter", "SimProtocol", "start_router"]


class SimProtocol(PDProtocol):
    """The simulator roles' protocol: llmsweep's own KV headers (`sim.roles`) on the decode leg."""

    name = "sim"
    ready_line = ROUTER_READY_LINE

    def prefill_body(self, body: dict[str, Any]) -> dict[str, Any]:
        first = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "max_completion_tokens")}
        first["max_tokens"] = 1
        return first

    def decode_leg(self, raw: bytes, body: dict[str, Any], answer: dict[str, Any], headers: dict[str, str],
                   worker: int, url: str) -> DecodeLeg:
        prompt_tokens = int(answer["usage"]["prompt_tokens"])
        cached_tokens = prompt_cached_tokens(answer)
        return DecodeLeg(raw, {KV_TOKENS_HEADER: str(prompt_tokens), KV_SOURCE_HEADER: url,
                               KV_SOURCE_WORKER_HEADER: str(worker), KV_CACHED_HEADER: str(cached_tokens),
                               "Content-Type": "application/json"})

    async def version(self, router: Router) -> dict[str, Any]:
        from llmsweep import __version__
        from llmsweep.sim.identity import simulator_digest

        # `simulator_digest`: the build of the simulator this router fronts (`llmsweep sim router` runs from the
        # install that launched the workers), which a live disaggregated result records (`provenance.simulator`)
        return {"version": __version__, "engine": SIM.id, "simulator_digest": simulator_digest(), "role": "router",
                "node": router.node, "tp": 0,
                "prefill": router.prefill, "decode": router.decode, "kv_transfer": router.kv_transfer,
                "routed": router.routed}


class PDRouter(Router):
    """llmsweep's PD router speaking the simulator's protocol (what `llmsweep sim router` serves)."""

    def __init__(self, prefill: list[str], decode: list[str], *, kv_transfer: str | None = None,
                 health_timeout_s: float = 2.0, headers_after_s: float | None = None,
                 stalled_after_s: float = STALLED_AFTER_S) -> None:
        super().__init__(prefill, decode, protocol=SimProtocol(), kv_transfer=kv_transfer,
                         health_timeout_s=health_timeout_s, headers_after_s=headers_after_s,
                         stalled_after_s=stalled_after_s)

