"""A prediction built on catalog figures the catalog marks as estimates says so: a placeholder model shape or an
unsourced bandwidth had moved every predicted number with nothing in the result, the table or the JSON to say it."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from llmsweep.catalog.hardware import find_hardware
from llmsweep.catalog.models import find_model
from llmsweep.cli.main import cli
from llmsweep.engines.sim import NAMING_FIELDS, estimated_figures
from llmsweep.execute.lifecycle import simulator_provenance
from llmsweep.plan import jobs_from_files

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def test_the_figures_listed_are_the_models_and_gpus_estimates_that_size_something() -> None:
    job = jobs_from_files([FIXED])[0]
    model, gpu = find_model(job.model), find_hardware(job.sku or "")
    assert model is not None and gpu is not None and model.estimates and gpu.estimates
    figures = estimated_figures(job)
    assert figures == [f"{model.id} {f}" for f in model.estimates if f not in NAMING_FIELDS] + \
        [f"{gpu.id} {f}" for f in gpu.estimates]
    assert "hf_architecture" in model.estimates and not any(f.endswith("hf_architecture") for f in figures)
    assert simulator_provenance(job)["estimated"] == figures
    # a GPU whose figures are all sourced adds nothing
    h200 = job.model_copy(update={"sku": "h200"})
    assert find_hardware("h200") is not None and not find_hardware("h200").estimates  # type: ignore[union-attr]
    assert estimated_figures(h200) == [f"{model.id} {f}" for f in model.estimates if f not in NAMING_FIELDS]


def test_predict_records_them_and_its_table_says_them(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["predict", str(FIXED), "--max-requests", "3", "--processes", "1", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    job = jobs_from_files([FIXED])[0]
    assert rows and all(r["summary"]["provenance"]["estimated"] == estimated_figures(job) for r in rows)
    table = CliRunner().invoke(cli, ["predict", str(FIXED), "--max-requests", "3", "--processes", "1"],
                               env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert "modelled with catalog estimates: " + ", ".join(estimated_figures(job)) in table.stdout
