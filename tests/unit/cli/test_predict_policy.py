"""`predict` refuses the jobs a policy error is about, with the finding as the reason, as `run` does: it used to
plan with the bare planner and predicted a tp 3 job on an 8-GPU node (smoke row, exit 0) that `validate` and `run`
refuse, and gave a job whose isl exceeds the model's context 'no successful profiling request'."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError, ResultError

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"
ARM = "{ tp: 8, conc-list: [2, 4] }"


def _recipe(tmp_path: Path, arms: str, *, isl: int = 256) -> Path:
    text = FIXED.read_text(encoding="utf-8")
    assert ARM in text and "isl: 256" in text
    path = tmp_path / "r.yaml"
    path.write_text(text.replace(ARM, arms).replace("isl: 256", f"isl: {isl}"), encoding="utf-8")
    return path


def _predict(path: Path) -> tuple[object, list[dict[str, object]], str]:
    res = CliRunner().invoke(cli, ["predict", str(path), "--max-requests", "3", "--processes", "1", "--json"])
    return res.exception, json.loads(res.stdout) if res.stdout.strip() else [], res.stderr


def test_a_policy_error_refuses_its_job_with_the_finding_and_the_others_are_predicted(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "{ tp: 8, conc-list: [2] }\n      - { tp: 3, conc-list: [2] }")
    exc, rows, err = _predict(path)
    # the others were predicted: it partly ran, exit 1 as `run` exits (2 only where nothing could be predicted)
    assert isinstance(exc, ResultError) and exc.exit_code == 1 and "refused for recipe errors" in exc.message
    assert "the others predicted" in exc.message
    good, bad = rows
    assert "summary" in good and "tp8" in str(good["job"])
    assert "tp3" in str(bad["job"]) and str(bad["refused"]).startswith("policy error [resources.gpu-divisibility]")
    assert f"{path}:17: error [resources.gpu-divisibility]" in err  # the finding, with its file:line and fix


def test_a_job_beyond_the_models_context_is_refused_for_that_reason(tmp_path: Path) -> None:
    exc, rows, err = _predict(_recipe(tmp_path, ARM, isl=10_000_000))
    assert isinstance(exc, ConfigError) and "all 2 points were refused" in exc.message
    assert len(rows) == 2 and all(str(r["refused"]).startswith("policy error [input.context-length]") for r in rows)
    assert "no successful profiling request" not in err


def test_an_empty_file_is_refused_with_its_findings_as_run_refuses_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    exc, _, err = _predict(empty)
    assert isinstance(exc, ConfigError) and "the recipes expand to no job" in exc.message
    assert "[schema.empty-file]" in err and "[plan.no-jobs]" in err


def test_a_policy_error_about_one_point_of_a_multinode_job_refuses_that_point_alone(tmp_path: Path) -> None:
    """`grid.max-conc` names the points above the cap: `run` refuses those and runs the rest; so does `predict`, each
    row in its concurrency's place."""
    text = (FIXED.parent / "disagg-sim.yaml").read_text(encoding="utf-8")
    assert "  serve:\n" in text and "conc-list: [2, 4]" in text
    path = tmp_path / "capped.yaml"
    path.write_text(text.replace("  serve:\n", "  policy: { max-conc: 2 }\n  serve:\n"), encoding="utf-8")
    exc, rows, _ = _predict(path)
    assert isinstance(exc, ResultError) and exc.exit_code == 1
    assert [(r["conc"], "summary" in r) for r in rows] == [(2, True), (4, False)]
    assert str(rows[1]["refused"]).startswith("policy error [grid.max-conc]")

