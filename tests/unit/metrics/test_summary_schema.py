"""`llmsweep schema summary`: the JSON Schema of summary.json, generated from the typed Summary."""

from __future__ import annotations

import json

from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.metrics.model import SCHEMA_VERSION


def test_schema_summary_prints_the_summary_json_schema() -> None:
    res = CliRunner().invoke(cli, ["schema", "summary"], catch_exceptions=False)
    assert res.exit_code == 0
    schema = json.loads(res.output)
    assert schema["title"] == "Summary"
    props = schema["properties"]
    for block in ("requests", "latency", "interactivity", "throughput", "cache", "server_metrics", "client_health",
                  "validity", "readback", "provenance", "units", "eval", "power", "roles"):
        assert block in props, block
    assert props["schema_version"]["default"] == SCHEMA_VERSION
    assert "p99.9" in schema["$defs"]["Stats"]["properties"]  # keys as summary.json spells them
    assert schema["$defs"]["Requests"]["additionalProperties"] is False


def test_schema_without_subject_is_still_the_recipe_schema() -> None:
    res = CliRunner().invoke(cli, ["schema"], catch_exceptions=False)
    assert res.exit_code == 0 and json.loads(res.output)["title"] == "llmsweep recipe file"


def test_every_power_figure_is_described_truly_of_modelled_power_too() -> None:
    """The simulator's power model gives every power figure a real GPU's samples give (the power block's `source`:
    `simulated`), so a description that calls the power "measured" is false of a simulated run's figure: tokens/s per
    MW said "measured GPU power" in the metric table and in `llmsweep schema summary`."""
    import re

    from llmsweep.metrics.registry import all_metrics

    res = CliRunner().invoke(cli, ["schema", "summary"], catch_exceptions=False)
    block = json.loads(res.output)["$defs"]["PowerBlock"]["properties"]
    said = {m.name: m.description for m in all_metrics() if m.power}
    said |= {f"summary power.{name}": prop["description"] for name, prop in block.items() if "description" in prop}
    assert "power.tokens_per_s_per_mw" in said and "summary power.tokens_per_s_per_mw" in said, sorted(said)
    false_of_modelled = {name: text for name, text in said.items()
                         if re.search(r"\bmeasured\b", text) and not re.search(r"model", text)}
    assert not false_of_modelled, false_of_modelled
