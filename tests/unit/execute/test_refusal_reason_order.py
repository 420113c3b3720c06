"""A job refused for several reasons is refused for the one its recipe must fix first: a policy error, before what the
run's set-up lacks. An 8k1k run-eval row over its recipe's concurrency cap, run without lm-eval, used to say only
"eval jobs need lm-eval"; installing lm-eval then met the cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.cli.main import main

CAPPED_EVAL_ROW = """\
capped-eval:
  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: mi300x
  precision: fp8
  framework: sglang
  multinode: false
  policy: { max-conc: 8 }
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 8, conc-list: [16] }
  serve:
    engine: { name: sim }
"""


def test_a_run_eval_row_with_a_policy_error_and_no_lm_eval_is_refused_for_the_policy_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "capped.yaml"
    recipe.write_text(CAPPED_EVAL_ROW)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    monkeypatch.delenv("LLMSWEEP_LM_EVAL", raising=False)
    with pytest.raises(SystemExit) as done:
        main(["run", str(recipe), "--out", str(tmp_path / "out"), "--no-report", "--json"])
    (row,) = json.loads(capsys.readouterr().out)["jobs"]
    assert done.value.code == 2 and row["verdict"] == "refused", row
    assert row["reason"].startswith("policy error [grid.max-conc]"), row["reason"]
