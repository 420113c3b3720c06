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
