"""`run --config-keys` says what it found about the recipes it runs, not about every recipe of the file: on
InferenceX's master file (56 keys, no `serve` blocks) one key printed 40 warnings about the others, each saying the
recipe "cannot be run by llmsweep" while the selected one, just as bare, ran on the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.cli.main import main

TWO = """\
{key}:
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
      - {{ tp: 8, ep: 1, conc-list: [4] }}
"""


def test_findings_about_unselected_recipes_are_not_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "master.yaml"
    recipe.write_text(TWO.format(key="picked") + TWO.format(key="other"))
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    with pytest.raises(SystemExit) as done:
        main(["run", str(recipe), "--simulate", "--config-keys", "picked", "--out", str(tmp_path / "run"),
              "--no-report", "--json"])
    captured = capsys.readouterr()
    assert done.value.code == 0, captured.err
    assert [r["verdict"] for r in json.loads(captured.out)["jobs"]] == ["valid"]
    said = [line for line in captured.err.splitlines() if "spec.not-runnable" in line]
    assert len(said) == 1 and "picked" in said[0] and "other" not in captured.err, said
    assert "run --simulate" in said[0]  # a bare recipe runs on the simulator; no real engine can launch it
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert not any("other" in json.dumps(f) for f in recorded.get("findings", []))
