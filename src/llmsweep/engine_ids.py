"""Engine identities: who each engine is, defined once, read by every room.

An engine's identity is what other rooms need to recognise it without knowing how to launch it: its id, the other
names it goes by, the InferenceX `framework:` spellings that run it, the environment prefix it reads, the image
repositories it ships in, how it is told to pin an acceptance length, and the Prometheus prefix of its server metrics.
Spec resolution (`framework` → engine), the catalog (`canonical_engine`, image parsing), the adapters (foreign
environment, synthetic acceptance), `llmsweep al` and the server-metrics reader all derive from :data:`ENGINE_IDS`.

This module sits below every room (it imports nothing of llmsweep but the errors), so the spec, the catalog and the
metrics can read it without pointing up at the adapters. The adapter of an engine (``llmsweep.engines.<id>``) takes
its identity from here; its launch (argv, derived flags) stays in the adapter module.

Framework spellings resolve exactly: a spelling no identity lists maps to no engine (the recipe stays plannable but is
not runnable, with the reason from :func:`unresolved_reason`), never to a guess from a prefix or suffix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, get_args

from llmsweep.errors import ContractError

Platform = Literal["cuda", "rocm"]
EngineId = Literal["sglang", "vllm", "trtllm", "atom", "sim", "transformers"]
"""The ids of :data:`ENGINE_IDS`, as a type (`serve.engine.name`); checked against the registry on import."""


@dataclass(frozen=True)
class PinnedAcceptance:
    """What an engine's launch carries to pin the acceptance length (synthetic acceptance), in its own spelling."""

    env: tuple[tuple[str, str], ...] = ()
    args: tuple[tuple[str, str], ...] = ()
    speculative_config: tuple[tuple[str, str | float], ...] = ()
    """Keys of vLLM-style `--speculative-config` JSON, in the order they are written."""
    alternative: PinnedAcceptance | None = None
    """Another spelling of the same pin the engine accepts: shown to people and refused in recipes, never rendered."""

    def describe(self) -> str:
        """One line a user can paste: `ENV=v …`, `--flag v …`, `speculative-config: "key": v, …`."""
        parts = [f"{k}={v}" for k, v in self.env]
        parts += [f"{k} {v}" for k, v in self.args]
        if self.speculative_config:
            parts.append("speculative-config: " + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}"
                                                            for k, v in self.speculative_config))
        text = " ".join(parts)
        return f"{text} (or {self.alternative.describe()})" if self.alternative else text

    def spellings(self) -> Iterator[PinnedAcceptance]:
        """This spelling and its alternatives."""
        yield self
        if self.alternative is not None:
            yield from self.alternative.spellings()


@dataclass(frozen=True)
class AcceptanceKnobs:
    """The names engines pin an acceptance length with: a recipe must not write them by hand, an eval launch must
    not carry them."""

    env: frozenset[str]
    args: frozenset[str]
    speculative_config_keys: frozenset[str]
    """Keys that carry the pinned value (a constant such as `rejection_sample_method` is also a real-verification
    setting, so it is not one)."""


AcceptanceSpelling = Callable[[float, int | None], PinnedAcceptance]
"""(pinned AL, draft length K or None) → the engine's spelling of the pin."""


@dataclass(frozen=True)
class EngineIdentity:
    """One engine, as every room other than its adapter sees it."""

    id: str
    """Adapter and catalog id (`serve.engine.name`, `LaunchSpec.engine`)."""
    frameworks: tuple[str, ...]
    """InferenceX `framework:` spellings that run this engine (orchestrator wrappers included: `dynamo-sglang`)."""
    aliases: tuple[str, ...] = ()
    """Other names of the engine itself (project or package names), accepted wherever an engine is named."""
    env_prefixes: tuple[str, ...] = ()
    """Environment prefixes only this engine reads; every other engine's adapter refuses them as foreign."""
    image_patterns: tuple[str, ...] = ()
    """Regular expressions searched in a lower-cased image repository (`lmsysorg/sglang-rocm`) that name this engine."""
    image_version_patterns: tuple[str, ...] = ()
    """Regular expressions whose group 1 is the engine version in a lower-cased image tag, tried in order."""
    image_platform: Platform | None = None
    """Platform of an image whose tag and repository name none (`vllm/vllm-openai` is a CUDA build)."""
    metric_prefix: str | None = None
    """Prometheus name prefix of the server's metrics (`sglang:`); the reader is registered in metrics/server.py."""
    pin_acceptance: AcceptanceSpelling | None = None
    """How a launch pins the acceptance length; None when the engine cannot (no speculative decoding)."""
    simulated: bool = False
    """The built-in simulator: it stands in for any engine, so no other engine's environment is foreign to it."""
    package: str | None = None
    """The Python distribution (and top-level module) the engine's server is, whose installed version a host serving
    it has (`execute.host_engine`); None for the simulator."""

    @property
    def names(self) -> tuple[str, ...]:
        """Every spelling that names this engine, lower-case: id first, then frameworks, then aliases."""
        return tuple(dict.fromkeys(n.lower() for n in (self.id, *self.frameworks, *self.aliases)))

    def matches_image(self, repository: str) -> bool:
        repo = repository.lower()
        return any(re.search(p, repo) for p in self.image_patterns)


# --------------------------------------------------------------------------------------------- acceptance spellings


def _sglang_pin(al: float, k: int | None) -> PinnedAcceptance:
    return PinnedAcceptance(env=(("SGLANG_SIMULATE_ACC_LEN", f"{al:g}"),
                                 ("SGLANG_SIMULATE_ACC_METHOD", "match-expected"),
                                 ("SGLANG_SIMULATE_ACC_TOKEN_MODE", "real-draft-token")))


def _vllm_pin(al: float, k: int | None) -> PinnedAcceptance:
    return PinnedAcceptance(speculative_config=(("rejection_sample_method", "synthetic"),
                                                ("synthetic_acceptance_length", al)))


def forced_accepted_tokens(al: float) -> str:
    """TensorRT-LLM counts draft tokens only: AL − 1, rounded to the golden curve's two decimals (2.78 → 1.78)."""
    return f"{round(al - 1.0, 2):g}"


TLLM_FORCE_ACCEPTED_ENV = "TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"
"""TensorRT-LLM's pinned-acceptance environment variable (AL − 1): the pin writes it, the adapter's checks read it."""

TLLM_PROMPT_OVER_BUDGET = ("The sum of prompt length ({prompt}), query length (0) should not exceed max_num_tokens "
                           "({tokens})")
"""TensorRT-LLM's 400 for a prompt over `max_num_tokens` without chunked prefill (`tensorrt_llm/llmapi/llm.py`
`LLM._check_arguments`, PyTorch backend: the prompt's tokens over its context-parallel ranks, a float, against
max_num_tokens): the adapter's `prompt_limit` quotes it, and the simulator standing in answers with it."""


def _trtllm_pin(al: float, k: int | None) -> PinnedAcceptance:
    return PinnedAcceptance(env=((TLLM_FORCE_ACCEPTED_ENV, forced_accepted_tokens(al)),))


def _atom_pin(al: float, k: int | None) -> PinnedAcceptance:
    rate = PinnedAcceptance(args=(("--spec-decode-acceptance-rate", f"{(al - 1) / (k or 1):.4f}"),))
    return PinnedAcceptance(args=(("--spec-decode-acceptance-length", f"{al:g}"),), alternative=rate)


SIM_ACCEPTANCE_FLAG = "--acceptance-length"
"""The simulated engine's pinned-acceptance option (`llmsweep sim serve --acceptance-length`): its pin writes it, and
`sim.serve_flags` gives `sim serve` this spelling, so the pin and the option it sets cannot drift apart."""


def _sim_pin(al: float, k: int | None) -> PinnedAcceptance:
    return PinnedAcceptance(args=((SIM_ACCEPTANCE_FLAG, f"{al:g}"),))


# --------------------------------------------------------------------------------------------- the registry

VERSION_TOKEN = r"\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d*)?(?:\.dev\d*)?"
"""An engine version token in an image tag (PEP 440-ish: 0.5.12.post1, 1.2.0rc6)."""

SGLANG = EngineIdentity(
    id="sglang",
    frameworks=("sglang", "sglang-disagg", "dynamo-sglang"),
    env_prefixes=("SGLANG_",),
    image_patterns=(r"sglang", r"sgl-dev"),
    image_version_patterns=(rf"(?:^|[-_])sglang[-_]v?({VERSION_TOKEN})(?=$|[-_])",),
    image_platform="cuda",
    metric_prefix="sglang:",
    pin_acceptance=_sglang_pin,
    package="sglang",
)
VLLM = EngineIdentity(
    id="vllm",
    frameworks=("vllm", "vllm-disagg", "dynamo-vllm", "llmd-vllm"),
    env_prefixes=("VLLM_",),
    image_patterns=(r"vllm",),
    # AMD's rocm/vllm tags name ROCm first and vLLM after it (`rocm6.4.1_vllm_0.9.1_20250715`); a leading version
    # (`v0.26.0`) is vLLM's own
    image_version_patterns=(rf"(?:^|[-_])vllm[-_]v?({VERSION_TOKEN})(?=$|[-_])",),
    image_platform="cuda",
    metric_prefix="vllm:",
    pin_acceptance=_vllm_pin,
    package="vllm",
)
TRTLLM = EngineIdentity(
    id="trtllm",
    frameworks=("trt", "dynamo-trt", "dynamo-trtllm"),
    aliases=("tensorrt-llm",),
    env_prefixes=("TLLM_",),
    image_patterns=(r"tensorrt-?llm", r"trt-?llm"),
    image_platform="cuda",
    metric_prefix="trtllm_",
    pin_acceptance=_trtllm_pin,
    package="tensorrt_llm",
)
ATOM = EngineIdentity(
    id="atom",
    frameworks=("atom", "atom-disagg"),
    env_prefixes=("ATOM_",),
    image_patterns=(r"(^|/)atom(-dev)?$",),
    image_version_patterns=(rf"atom[-_]?v?({VERSION_TOKEN})(?![\d.])",),
    image_platform="rocm",
    metric_prefix="atom:",
    pin_acceptance=_atom_pin,
    package="atom",
)
SIM = EngineIdentity(
    id="sim",
    frameworks=("sim",),
    image_patterns=(r"llmsweep",),
    metric_prefix="vllm:",
    pin_acceptance=_sim_pin,
    simulated=True,
)
TRANSFORMERS = EngineIdentity(
    id="transformers",
    frameworks=("transformers",),
    aliases=("transformers-serve", "hf-transformers"),
    # Hugging Face's own images (huggingface/transformers docker/: transformers-pytorch-gpu, -pytorch-cpu,
    # -pytorch-amd-gpu, -all-latest-gpu, ...); a tag that leads with a version (`5.17.0`) names transformers', `latest`
    # names none. The platform is the repository's (gpu, amd-gpu, cpu), not one for the engine.
    image_patterns=(r"^huggingface/transformers-",),
    package="transformers",
)

ENGINE_IDS: dict[str, EngineIdentity] = {e.id: e for e in (SGLANG, VLLM, TRTLLM, ATOM, SIM, TRANSFORMERS)}
"""Every engine llmsweep can launch, in the order image repositories and server metrics are matched."""

if tuple(ENGINE_IDS) != get_args(EngineId):  # pragma: no cover - a registration missing from one of the two
    raise RuntimeError(f"EngineId {get_args(EngineId)} must list the registered engines {tuple(ENGINE_IDS)} in order")

UNSERVED_FRAMEWORKS: dict[str, str] = {
    "tilert": "TileRT is its own engine and llmsweep has no adapter for it",
}
"""InferenceX frameworks no identity serves, and why (a recipe using one is plannable, not runnable)."""


def identities() -> Iterator[EngineIdentity]:
    return iter(ENGINE_IDS.values())


_NAMES: list[tuple[tuple[EngineIdentity, ...], dict[str, str]]] = []
"""The name table of :func:`_by_name` and the registry's identities it was built from (held, so none is reused)."""


def _by_name() -> dict[str, str]:
    """Every framework spelling, alias and id → its engine id, built once per state of the registry (a registration
    added or replaced later, as a test makes one, is seen at the next lookup)."""
    state = tuple(ENGINE_IDS.values())
    held = _NAMES[0][0] if _NAMES else ()
    if len(held) != len(state) or any(a is not b for a, b in zip(held, state, strict=True)):
        _NAMES[:] = [(state, {name: e.id for e in state for name in e.names})]
    return _NAMES[0][1]


def engine_for(name: str) -> str | None:
    """The engine id a framework spelling, alias or id names (case-insensitive), or None."""
    return _by_name().get(name.strip().lower())


def identity(engine: str) -> EngineIdentity:
    """The identity an engine id, alias or framework spelling names; a ContractError lists the known engines."""
    eid = engine_for(engine)
    if eid is None:
        raise ContractError(f"no engine named {engine!r}", fix=f"use one of {', '.join(ENGINE_IDS)}")
    return ENGINE_IDS[eid]


def unresolved_reason(framework: str) -> str:
    """Why `framework` runs no engine: a known unserved framework's reason, else that no identity lists it."""
    name = framework.strip().lower()
    known = UNSERVED_FRAMEWORKS.get(name)
    if known is not None:
        return f"framework `{framework}`: {known}"
    return f"framework `{framework}` maps to no engine adapter"


def foreign_env_prefixes(engine: str) -> tuple[str, ...]:
    """Environment prefixes of every other engine: `engine` never reads them (none for the simulator)."""
    own = ENGINE_IDS[engine]
    if own.simulated:
        return ()
    return tuple(p for e in ENGINE_IDS.values() if e.id != own.id for p in e.env_prefixes)


def engine_env_prefixes() -> tuple[str, ...]:
    """Every real engine's environment prefix (what the simulator drops from a launch it stands in for)."""
    return tuple(p for e in ENGINE_IDS.values() for p in e.env_prefixes)


def engine_of_image(repository: str) -> str | None:
    """The engine an image repository (`lmsysorg/sglang-rocm`) ships, by the identities' patterns; None if none."""
    for e in ENGINE_IDS.values():
        if e.matches_image(repository):
            return e.id
    return None


def acceptance_knobs(*, simulated: bool = True) -> AcceptanceKnobs:
    """Every env name, flag and speculative-config key an engine pins an acceptance length with (alternatives
    included); `simulated=False` leaves the simulator's own flag out."""
    env: set[str] = set()
    args: set[str] = set()
    keys: set[str] = set()
    for e in ENGINE_IDS.values():
        if e.pin_acceptance is None or (e.simulated and not simulated):
            continue
        for pin in e.pin_acceptance(2.0, 1).spellings():
            env |= {k for k, _ in pin.env}
            args |= {k for k, _ in pin.args}
            keys |= {k for k, v in pin.speculative_config if not isinstance(v, str)}
    return AcceptanceKnobs(frozenset(env), frozenset(args), frozenset(keys))


def acceptance_spellings(al: float, k: int | None) -> dict[str, str]:
    """How each real engine spells a pinned acceptance length (`llmsweep al` prints these)."""
    return {e.id: e.pin_acceptance(al, k).describe() for e in ENGINE_IDS.values()
            if e.pin_acceptance is not None and not e.simulated}


MAX_SPEC_K = 16
"""The most draft tokens per verify step llmsweep models (`sim serve --spec-k`, a recipe's K, `al collect -k`), and so
the most one speculative step adds past a limit checked once per step (`client.sse.STEP_OVERSHOOT_TOKENS`). Here,
below the simulator and the client, so both read one figure."""

__all__ = [
    "ENGINE_IDS",
    "MAX_SPEC_K",
    "TLLM_FORCE_ACCEPTED_ENV",
    "TLLM_PROMPT_OVER_BUDGET",
    "UNSERVED_FRAMEWORKS",
    "VERSION_TOKEN",
    "AcceptanceKnobs",
    "AcceptanceSpelling",
    "EngineId",
    "EngineIdentity",
    "PinnedAcceptance",
    "acceptance_knobs",
    "acceptance_spellings",
    "engine_env_prefixes",
    "engine_for",
    "engine_of_image",
    "forced_accepted_tokens",
    "foreign_env_prefixes",
    "identities",
    "identity",
    "unresolved_reason",
]


SERVER_IDLE_KEEPALIVE_S = 5.0
"""How long an engine's HTTP server keeps an idle keep-alive connection before closing it: uvicorn's
`timeout_keep_alive` (default 5), which serves vLLM (`VLLM_HTTP_TIMEOUT_KEEP_ALIVE`, default 5), SGLang (uvicorn's
default) and TensorRT-LLM. The simulator's servers (aiohttp) keep theirs far longer."""

POOLED_KEEPALIVE_S = SERVER_IDLE_KEEPALIVE_S - 3.0
"""How long llmsweep's HTTP clients of an engine — the load client (`client.interpreter`) and the PD router
(`router.PDRouter`) — keep an idle connection for a later request: below `SERVER_IDLE_KEEPALIVE_S`, so that
no request goes out on a connection the server is closing (aiohttp's default, 15 s, outlived it: a request sent on a
connection idle about 5 s crossed the server's close and failed before any answer byte). The 3 s between them are for
the two idle clocks to disagree (the server's starts when it wrote the answer, the client's when it released the
connection, later); a server whose timeout is shorter still is covered by the one retry both make (`keepalive`)."""

KEEPALIVE_RACE_S = (SERVER_IDLE_KEEPALIVE_S - POOLED_KEEPALIVE_S) / 2
"""How soon after a request went out on a pooled connection a close or reset of it, with nothing of an answer, may
still be the server's keep-alive close crossing the request (`keepalive.post_once_more` sends only such a one again):
1.5 s. The race happens at the send — the server's close was on its way as the request was written, or the server's
kernel resets the request it meets on a closed socket — so its failure reaches the client one network trip and one
wake of the client's event loop after the send. The slack under `POOLED_KEEPALIVE_S` allows the client's idle clock to
trail the server's by two such steps (the answer's end reaching the client's loop, the request's task releasing the
connection); half of it is one. A failure later than this came from a server that had the request (read it, worked on
it, then dropped the connection): sent again, it would run twice."""

TIMEOUT_HEADER, STALL_HEADER = "X-Llmsweep-Timeout-S", "X-Llmsweep-Stall-S"
"""Request headers in which llmsweep's load client (`client.interpreter`) says, in seconds, how long it waits for a
request's whole answer and for its next byte once the body began: a gateway in front of several workers (llmsweep's PD
router, `router.PDRouter`) gives up on the worker it waits on a little before the client would, and answers 504 naming
that worker, so the client's record of a hang says which worker hung (its own timeout could say only that it timed
out). An engine ignores them."""

