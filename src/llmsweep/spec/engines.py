"""Which engine adapter a recipe's `framework` names.

InferenceX's `framework` is a free string that also routes bash scripts (`dynamo-sglang`, `sglang-disagg`,
`llmd-vllm`, ...). We read the engine out of it explicitly; anything we cannot map stays plannable but is not
runnable, rather than guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmsweep.spec.recipe import Recipe

ADAPTERS: tuple[str, ...] = ("sglang", "vllm", "trtllm", "atom", "sim", "transformers")

_EXACT: dict[str, str] = {
    "sglang": "sglang",
    "vllm": "vllm",
    "trt": "trtllm",
    "trtllm": "trtllm",
    "tensorrt-llm": "trtllm",
    "atom": "atom",
    "sim": "sim",
    "llmd-vllm": "vllm",
    "transformers": "transformers",
    "transformers-serve": "transformers",
}


def engine_name(framework: str) -> str | None:
    """Adapter for an InferenceX framework string, or None when no adapter serves it.

    `dynamo-<x>` and `<x>-disagg` run engine `<x>` behind an orchestrator; the engine is still `<x>`.
    """
    name = framework.strip().lower()
    if name in _EXACT:
        return _EXACT[name]
    if name.startswith("dynamo-"):
        return _EXACT.get(name.removeprefix("dynamo-"))
    if name.endswith("-disagg"):
        return _EXACT.get(name.removesuffix("-disagg"))
    return None


def resolve_engine(recipe: Recipe) -> str | None:
    """The adapter a recipe runs on: `serve.engine.name` wins over the framework mapping."""
    serve = recipe.serve
    if serve is not None and serve.engine is not None and serve.engine.name is not None:
        return serve.engine.name
    return engine_name(recipe.framework)
