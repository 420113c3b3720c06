"""The names of a discovery folder's own files (`llmsweep discover --out`), below the rooms that read them:
`discover` writes them, and the recipe loader's folder walk (`spec.loader.recipe_files`) knows a discovery folder by
its discovery.json, so that the recipes discover wrote there — its proposal, which keeps the recipe's keys, and its
stage recipes — are not read beside the recipe they came from. Light to import."""

from __future__ import annotations

DISCOVERY_FILE = "discovery.json"
"""The discovery (`discover.model.Discovery`): written last, and what marks a folder as a discovery's."""
PROPOSED_FILE = "proposed.yaml"
"""The recipe with the proposed grid, under the recipe's own keys: it replaces the recipe it was discovered from."""
PATCH_FILE = "proposed.diff"
"""The proposal as a patch of the recipe file."""
STAGES_DIR = "stages"
"""One recipe and one run folder per stage."""
