"""Recipes as data: typed models, a YAML loader that remembers lines, and the JSON Schema.

Public API:
    load_recipes(paths) -> LoadResult           recipes keyed by recipe key, plus findings (file:line, path, fix)
    loads_recipes(text, file="<string>")        the same for YAML text
    Recipe / SingleNodeRecipe / MultiNodeRecipe one recipe key; `recipe.line_of(path)`, `recipe.source`
    Serve, ResolvedServe, SpecDecoding, WorkloadSpec, ResolvedWorkload, TraceSource
    engine_name(framework) -> str | None        adapter for an InferenceX framework string
    recipe_json_schema() -> dict
"""

from __future__ import annotations

from llmsweep.spec.components import ComponentMetadata, KvOffloadBackend, WorkerBlock
from llmsweep.spec.engines import ADAPTERS, engine_name, resolve_engine
from llmsweep.spec.loader import LoadResult, load_recipes, loads_recipes, recipe_files
from llmsweep.spec.recipe import (
    AgenticEntry,
    AgenticScenario,
    MultiNodeFixedEntry,
    MultiNodeRecipe,
    Recipe,
    SingleNodeFixedEntry,
    SingleNodeRecipe,
)
from llmsweep.spec.schema import recipe_json_schema
from llmsweep.spec.serve import ResolvedServe, Serve, SpecDecoding
from llmsweep.spec.source import SourceMap, render_path
from llmsweep.spec.workload import ResolvedWorkload, SyntheticTraces, TraceSource, WorkloadSpec, default_corpus

__all__ = [
    "ADAPTERS",
    "AgenticEntry",
    "AgenticScenario",
    "ComponentMetadata",
    "KvOffloadBackend",
    "LoadResult",
    "MultiNodeFixedEntry",
    "MultiNodeRecipe",
    "Recipe",
    "ResolvedServe",
    "ResolvedWorkload",
    "Serve",
    "SingleNodeFixedEntry",
    "SingleNodeRecipe",
    "SourceMap",
    "SpecDecoding",
    "SyntheticTraces",
    "TraceSource",
    "WorkerBlock",
    "WorkloadSpec",
    "default_corpus",
    "engine_name",
    "load_recipes",
    "loads_recipes",
    "recipe_files",
    "recipe_json_schema",
    "render_path",
    "resolve_engine",
]
