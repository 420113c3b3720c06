"""A speculative fixed-length job measures real acceptance on an engine; on the simulator it runs at an estimate
for (model, method, K). Where its numbers are read — `predict`'s table and the dashboard's series — the acceptance
length says it is an estimate (it did only in the provenance and the launch notes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.report.data import build_payload
from llmsweep.results.point import points_from_run
from llmsweep.results.rundir import load_run

RECIPE = """\
dsr1-mtp-sim:
  image: lmsysorg/sglang:v0.5.16-cu130
  model: deepseek-ai/DeepSeek-R1-0528
  model-prefix: dsr1
  runner: h200
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 256
      search-space:
      - { tp: 8, ep: 1, spec-decoding: mtp, conc-list: [4] }
  serve:
    engine: { name: sim }
    spec-decoding: { method: mtp, num-steps: 3 }
  workload:
    num-prompts-per-conc: 4
"""


def test_the_estimated_acceptance_length_is_labelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    monkeypatch.setenv("COLUMNS", "220")
    res = CliRunner().invoke(cli, ["predict", str(recipe)])
    assert res.exit_code == 0, res.output
    assert "2.95 est." in res.stdout and "AL est.: the simulator's estimate" in res.stdout
    # the calibration column says "uncalibrated"; the caption carries only what the column cannot (no echo of it)
    assert "uncalibrated" in res.stdout and "uncalibrated;" not in res.stdout
    assert not [line for line in res.stdout.splitlines() if line.strip() == "uncalibrated"]
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    res = CliRunner().invoke(cli, ["run", str(recipe), "--out", str(tmp_path / "run"), "--no-report"])
    assert res.exit_code == 0, res.output
    run = load_run(tmp_path / "run")
    (series,) = build_payload(run, points_from_run(run))["series"]
    assert series["label"].endswith("· AL 2.95 est."), series["label"]
