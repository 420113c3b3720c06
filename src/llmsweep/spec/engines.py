"""Which engine adapter a recipe's `framework` names.

InferenceX's `framework` is a free string that also routes bash scripts (`dynamo-sglang`, `sglang-disagg`,
`llmd-vllm`, ...). We read the engine out of it through the engine identities (:mod:`llmsweep.engine_ids`), exactly;
anything no identity lists stays plannable but is not runnable, rather than guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmsweep.engine_ids import ENGINE_IDS, engine_for

if TYPE_CHECKING:
    from llmsweep.spec.recipe import Recipe

ADAPTERS: tuple[str, ...] = tuple(ENGINE_IDS)
"""Ids of the engines llmsweep can launch (`serve.engine.name`)."""


def engine_name(framework: str) -> str | None:
    """Adapter for an InferenceX framework string (or an engine id or alias), or None when no adapter serves it."""
    return engine_for(framework)


def resolve_engine(recipe: Recipe) -> str | None:
    """The adapter a recipe runs on: `serve.engine.name` wins over the framework mapping."""
    serve = recipe.serve
    if serve is not None and serve.engine is not None and serve.engine.name is not None:
        return serve.engine.name
    return engine_name(recipe.framework)
