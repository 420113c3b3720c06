"""`llmsweep run` checks what an eval reads besides its server before any server starts: a malformed user
`eval_thresholds.yaml` is bad input (exit 2, file:line, the field and the fix), as `render` of an eval job says too,
where it used to fail a run-eval job after its throughput point and its eval had run; and an `--eval-dataset` the task
cannot run on (not JSON, a row without the task's columns or the scored shape, fewer rows than the few-shot examples
need) is refused the same way, where lm-eval used to find it once the eval began."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_main

from llmsweep.catalog.sources import clear_caches

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "tests" / "data" / "recipes" / "run" / "eval-8k1k.yaml"  # one 8k1k row at conc 16: run-eval


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    (tmp_path / "catalog").mkdir()  # an empty user catalog (a folder that is not there is refused)
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(tmp_path / "catalog"))
    clear_caches()
    yield
    clear_caches()


def _thresholds(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalog" / "eval_thresholds.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_malformed_thresholds_file_stops_run_and_render_before_any_server(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _thresholds(tmp_path, "thresholds:\n  qwen3.5:\n    gsm8k: { exact_match: 1.5 }\n")
    out = tmp_path / "run"
    code, _, err = run_main(capsys, "run", RECIPE, "--simulate", "--out", out, "--no-report")
    assert code == 2, err
    said = f"{path}:3: eval threshold qwen3.5.gsm8k.exact_match: 1.5 is not a score between 0 and 1"
    assert said in err and "fix: write each floor as" in err
    assert not out.exists()  # refused before --out, the store or a server were touched

    # `render` of the eval job says the same (exit 2); a throughput-only plan of the same row does not read it
    code, _, err = run_main(capsys, "render", RECIPE, "--job", "qwen3.5_8k1k", "--simulate")
    assert code == 2 and said in err
    # and `validate`, which checks what `run` would refuse before running it, lists it as a finding (and counts it)
    code, stdout, err = run_main(capsys, "validate", RECIPE)
    assert code == 2 and f"{path}:3: error [catalog.file] thresholds.qwen3.5.gsm8k.exact_match: eval threshold " \
        "qwen3.5.gsm8k.exact_match: 1.5 is not a score between 0 and 1" in stdout and "1 error" in err, stdout + err
    code, _, err = run_main(capsys, "run", RECIPE, "--simulate", "--no-evals", "--out", out, "--no-report")
    assert code == 0, err

    # a task the user's file leaves without a floor (its `default` replaces the packaged one, `"*"` and all)
    _thresholds(tmp_path, "thresholds:\n  default:\n    gsm8k: { exact_match: 0.9 }\n")
    clear_caches()
    code, _, err = run_main(capsys, "run", RECIPE, "--simulate", "--eval-task", "gpqa_diamond_cot_n_shot",
                            "--out", tmp_path / "run2", "--no-report")
    assert code == 2 and "no eval threshold for gpqa_diamond_cot_n_shot" in err, err
    assert not (tmp_path / "run2").exists()


def test_a_misspelt_metric_in_the_thresholds_file_stops_an_evals_only_run_before_any_server(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It was skipped in silence: the eval was judged against `default.gsm8k.exact_match` (0.90), not the 0.5 the
    user wrote."""
    path = _thresholds(tmp_path, "thresholds: {qwen3.5: {gsm8k: {exact_matsh: 0.5}}}\n")
    out = tmp_path / "run"
    code, _, err = run_main(capsys, "run", RECIPE, "--simulate", "--evals-only", "--out", out, "--no-report")
    assert code == 2, err
    assert (f"{path}:1: eval threshold qwen3.5.gsm8k.exact_matsh: 'exact_matsh' is not a metric the eval gate "
            "reads") in err and "fix: name the metric `exact_match`" in err
    assert not out.exists()


def _rows(n: int) -> str:
    return "".join(f'{{"question": "What is {i} + 1?", "answer": "{i} + 1 = {i + 1}.\\n#### {i + 1}"}}\n'
                   for i in range(n))


@pytest.mark.parametrize(("text", "said"), [
    ('{"q": "What is 1 + 1?", "a": "#### 2"}\n' * 8, ":1: the row lacks 'question', 'answer' (gsm8k reads"),
    (_rows(3) + "not json\n" + _rows(4), ":4: not a JSON object"),
    (_rows(2) + '{"question": "What is 2 + 2?", "answer": "4"}\n' + _rows(5),
     ":3: 'answer' does not end in a `#### <number>` line"),
    ("", " holds no row"),
    (_rows(5), " holds 5 rows: gsm8k takes 5 few-shot examples for each question from the same file"),
])
def test_an_eval_dataset_that_cannot_run_is_refused_before_any_server(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, said: str) -> None:
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(text, encoding="utf-8")
    out = tmp_path / "run"
    code, _, err = run_main(capsys, "run", RECIPE, "--simulate", "--evals-only", "--eval-dataset", data,
                            "--out", out, "--no-report")
    assert code == 2, err
    assert f"eval dataset {data}{said}" in err and "fix: give" in err, err
    assert not out.exists()


def test_eval_options_under_no_evals_are_said_to_be_ignored(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(_rows(8), encoding="utf-8")
    code, _, err = run_main(capsys, "run", RECIPE, "--simulate", "--no-evals", "--eval-dataset", data,
                            "--eval-limit", "4", "--out", tmp_path / "run", "--no-report")
    assert code == 0, err
    assert "warning: --no-evals runs no eval: --eval-dataset, --eval-limit ignored" in err
    code, _, err = run_main(capsys, "run", RECIPE, "--simulate", "--no-evals", "--out", tmp_path / "run2",
                            "--no-report")
    assert code == 0 and "--no-evals runs no eval" not in err  # nothing given, nothing to say
    # a plan with no eval row at all ignores them the same way, and says so
    fixed = tmp_path / "no-eval-row.yaml"
    text = RECIPE.read_text()
    assert "isl: 8192" in text
    fixed.write_text(text.replace("isl: 8192", "isl: 1024"))
    code, _, err = run_main(capsys, "run", fixed, "--simulate", "--eval-limit", "4", "--out", tmp_path / "run3",
                            "--no-report")
    assert code == 0 and "warning: no job of this plan runs an eval" in err and "--eval-limit ignored" in err, err


@pytest.mark.skipif(not Path(os.environ.get("LLMSWEEP_LM_EVAL") or "/nonexistent").is_file(),
                    reason="needs lm-eval (set LLMSWEEP_LM_EVAL to a Python with lm-eval[api]==0.4.13)")
def test_an_answer_budget_that_leaves_no_room_for_the_prompt_refuses_the_eval_job(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(_rows(6), encoding="utf-8")
    out = tmp_path / "run"
    # 8k1k: the eval's context is ISL + OSL + 256 = 9,472 tokens
    code, stdout, err = run_main(capsys, "run", RECIPE, "--simulate", "--eval-dataset", data, "--eval-limit", "1",
                                 "--eval-max-tokens", "9472", "--out", out, "--no-report", "--json")
    assert code == 1, err  # a refused job: the run is not ok
    (row,) = json.loads(stdout)["jobs"]
    assert row["verdict"] == "refused" and row["summary_file"] is None  # the run-eval row is refused whole
    assert row["reason"].startswith("--eval-max-tokens 9,472 does not fit the eval's context of 9,472 tokens: no "
                                    "room is left for the prompt"), row["reason"]
    assert "(the default, 5,376, leaves 4,096 tokens)" in row["reason"]
    assert f"job {row['job']}: refused — --eval-max-tokens 9,472" in err
    assert "launching" not in err  # no server started for it


@pytest.mark.skipif(not Path(os.environ.get("LLMSWEEP_LM_EVAL") or "/nonexistent").is_file(),
                    reason="needs lm-eval (set LLMSWEEP_LM_EVAL to a Python with lm-eval[api]==0.4.13)")
def test_require_power_does_not_apply_to_an_eval_only_job_and_the_run_says_so(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(_rows(6), encoding="utf-8")
    out = tmp_path / "run"
    # no power can be sampled (--power-backend off), and it is required: an eval-only job samples none either way
    code, stdout, err = run_main(capsys, "run", RECIPE, "--simulate", "--evals-only", "--require-power",
                                 "--power-backend", "off", "--eval-dataset", data, "--eval-limit", "1",
                                 "--eval-max-tokens", "16", "--out", out, "--no-report", "--json")
    (row,) = json.loads(stdout)["jobs"]
    assert row["verdict"] == "invalid" and code == 1, err  # its eval ran: the simulator scores 0 against the floor
    assert row["reason"].startswith("eval gsm8k: exact_match"), row["reason"]
    said = err.index("power is not required of 1 eval-only job, though asked (--require-power or the recipe's "
                     "`require-power`): an eval measures accuracy, not throughput, and records no power")
    assert said < err.index("launching sim server")  # said before any server starts
    assert "power will not be recorded" not in err  # nothing was to be recorded
    summary = json.loads((out / "jobs" / row["job"] / "summary.json").read_text())
    assert summary.get("power") is None and summary["eval"]["verdict"] == "invalid"
