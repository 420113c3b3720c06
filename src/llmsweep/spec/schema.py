"""The recipe JSON Schema, for editors (`llmsweep schema`).

A recipe file maps recipe keys to recipes; each recipe is single- or multi-node depending on `multinode`. Field
descriptions in the pydantic models are the single source of the help text shown here.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from llmsweep.spec.recipe import MultiNodeRecipe, SingleNodeRecipe


def recipe_json_schema() -> dict[str, Any]:
    """JSON Schema of a recipe file: `{<recipe-key>: SingleNodeRecipe | MultiNodeRecipe}`."""
    adapter: TypeAdapter[Any] = TypeAdapter(SingleNodeRecipe | MultiNodeRecipe)
    recipe = adapter.json_schema(by_alias=True, ref_template="#/$defs/{model}")
    defs = recipe.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "llmsweep recipe file",
        "description": "Recipe key → recipe. A strict superset of an InferenceX master-config file.",
        "type": "object",
        "propertyNames": {"not": {"pattern": "\\*"}},
        "additionalProperties": recipe,
        "$defs": defs,
    }
