"""The score gate: every exact_match metric of every run against the model prefix's threshold (with the catalog's
fallbacks), reasons naming metric, score and threshold; thresholds are user-extendable catalog data."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmsweep.catalog.eval_thresholds import threshold_for
from llmsweep.catalog.sources import clear_caches
from llmsweep.errors import ConfigError
from llmsweep.evals.gate import check_thresholds, judge
from llmsweep.evals.tasks import task_filters
from llmsweep.metrics.model import EvalBlock, EvalMetric, EvalRun


@pytest.fixture(autouse=True)
def _fresh_catalog(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    (tmp_path / "none").mkdir()  # an empty user catalog (a folder that is not there is refused)
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(tmp_path / "none"))
    clear_caches()
    yield
    clear_caches()


def block(prefix: str, *runs: EvalRun, task: str = "gsm8k") -> EvalBlock:
    return EvalBlock(mode="eval-only", task=task, dataset="openai/gsm8k", model_prefix=prefix, context_length=9472,
                     max_tokens=5376, runs=list(runs), verdict="invalid")


def run(strict: float, flexible: float, conc: int = 64) -> EvalRun:
    return EvalRun(conc=conc, status="completed", n_samples=1319, metrics=[
        EvalMetric(name="exact_match,strict-match", value=strict, stderr=0.008),
        EvalMetric(name="exact_match,flexible-extract", value=flexible, stderr=0.007)])


def test_thresholds_resolve_model_prefix_then_task_default_then_any_task() -> None:
    assert threshold_for("qwen3.5", "gsm8k", "exact_match,strict-match") == (0.94, "qwen3.5.gsm8k.exact_match")
    assert threshold_for("glm5.2", "gsm8k", "exact_match,strict-match") == (0.90, "default.gsm8k.exact_match")
    assert threshold_for("qwen3.5", "gpqa_diamond_cot_n_shot", "exact_match,extract_abcd")[0] == 0.30
    assert threshold_for(None, "mmlu_pro", "exact_match,custom") == (0.85, "default.*.exact_match")


def test_both_gsm8k_filters_must_pass_and_the_reason_names_metric_score_and_threshold() -> None:
    judged = judge(block("qwen3.5", run(0.95, 0.93)))
    assert judged.verdict == "invalid" and [c.ok for c in judged.checks] == [True, False]
    assert judged.reasons == ["eval gsm8k: exact_match,flexible-extract = 0.9300 is below the threshold 0.94 "
                              "(qwen3.5.gsm8k.exact_match)"]
    assert judged.score == 0.95 and judged.score_name == "exact_match,strict-match"
    assert judge(block("qwen3.5", run(0.95, 0.95))).verdict == "valid"


def test_every_batched_run_is_gated_and_a_failed_run_fails_the_eval() -> None:
    failed = EvalRun(conc=128, status="failed", error="lm-eval exited 1")
    judged = judge(block("dsr1", run(0.95, 0.95, conc=64), failed))
    assert judged.verdict == "invalid"
    assert judged.reasons == ["eval gsm8k (conc 128) did not complete: lm-eval exited 1"]
    nothing = EvalRun(conc=8, status="completed", metrics=[EvalMetric(name="acc,none", value=0.9)])
    assert "no exact_match metric" in judge(block("dsr1", nothing)).reasons[0]
    assert judge(block("dsr1")).reasons == ["eval gsm8k: lm-eval never ran"]


def test_a_user_catalog_adds_a_model_prefix_and_a_bad_threshold_names_the_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    user = tmp_path / "cat"
    user.mkdir()
    (user / "eval_thresholds.yaml").write_text("thresholds:\n  smollm2: { gsm8k: { exact_match: 0.05 } }\n")
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(user))
    clear_caches()
    assert threshold_for("smollm2", "gsm8k", "exact_match,strict-match") == (0.05, "smollm2.gsm8k.exact_match")
    assert judge(block("smollm2", run(0.06, 0.07))).verdict == "valid"
    (user / "eval_thresholds.yaml").write_text("thresholds:\n  smollm2: { gsm8k: { exact_match: 5 } }\n")
    clear_caches()
    with pytest.raises(ConfigError, match=r"eval_thresholds.yaml:2.*smollm2.*between 0 and 1"):
        threshold_for("smollm2", "gsm8k", "exact_match,strict-match")


def user_thresholds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, text: str) -> Path:
    user = tmp_path / "cat"
    user.mkdir(exist_ok=True)
    (user / "eval_thresholds.yaml").write_text(text)
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(user))
    clear_caches()
    return user / "eval_thresholds.yaml"


def test_a_misspelt_metric_is_refused_naming_file_line_field_and_fix(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    """It was skipped in silence: the eval judged against default.gsm8k's 0.90, the user's 0.5 never read."""
    path = user_thresholds(monkeypatch, tmp_path, "thresholds:\n  llama3.1-8b:\n    gsm8k:\n"
                                                  "      exact_matsh: 0.5\n")
    with pytest.raises(ConfigError) as caught:
        threshold_for("llama3.1-8b", "gsm8k", "exact_match,strict-match")
    assert caught.value.message == (f"{path}:4: eval threshold llama3.1-8b.gsm8k.exact_matsh: 'exact_matsh' is not "
                                    "a metric the eval gate reads")
    assert "`exact_match`" in (caught.value.fix or "") and "`exact_match,<filter>`" in (caught.value.fix or "")
    with pytest.raises(ConfigError, match="exact_matsh"):
        check_thresholds(["llama3.1-8b"], "gsm8k")  # what `run` and `validate` call before any server starts
    for bad in ("exact_match,", "exact_match, strict-match", "acc"):
        user_thresholds(monkeypatch, tmp_path, f"thresholds:\n  m:\n    gsm8k:\n      '{bad}': 0.5\n")
        with pytest.raises(ConfigError, match="not a metric the eval gate reads"):
            threshold_for("m", "gsm8k", "exact_match,strict-match")


def test_a_filter_the_task_does_not_report_is_refused_and_one_it_does_is_read(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    assert task_filters("gsm8k") == ("strict-match", "flexible-extract")
    assert task_filters("gpqa_diamond_cot_n_shot") == ("extract_abcd",)
    path = user_thresholds(monkeypatch, tmp_path, "thresholds:\n  m:\n    gsm8k:\n      exact_match: 0.8\n"
                                                  "      exact_match,strict_match: 0.5\n")
    with pytest.raises(ConfigError) as caught:
        check_thresholds(["m"], "gsm8k")
    assert caught.value.message == (f"{path}:5: eval threshold m.gsm8k.exact_match,strict_match: lm-eval reports "
                                    "no filter 'strict_match' for gsm8k, so the gate never reads this floor")
    assert "`exact_match,strict-match`, `exact_match,flexible-extract`" in (caught.value.fix or "")
    # under "*" a filter of any task llmsweep runs is one the gate may read; another is not
    user_thresholds(monkeypatch, tmp_path, "thresholds:\n  m:\n    '*': { 'exact_match,extract_abcd': 0.4 }\n")
    check_thresholds(["m"], "gsm8k")
    user_thresholds(monkeypatch, tmp_path, "thresholds:\n  m:\n    '*': { 'exact_match,extract-abcd': 0.4 }\n")
    with pytest.raises(ConfigError, match=r"no filter 'extract-abcd' for any task llmsweep runs"):
        check_thresholds(["m"], "gsm8k")
    # a filter the task reports is checked under its own floor
    user_thresholds(monkeypatch, tmp_path, "thresholds:\n  m:\n    gsm8k:\n      exact_match: 0.8\n"
                                           "      exact_match,strict-match: 0.5\n")
    check_thresholds(["m"], "gsm8k")
    assert threshold_for("m", "gsm8k", "exact_match,strict-match") == (0.5, "m.gsm8k.exact_match,strict-match")
    assert threshold_for("m", "gsm8k", "exact_match,flexible-extract") == (0.8, "m.gsm8k.exact_match")


def test_a_users_floor_of_a_task_llmsweep_does_not_run_is_said_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A warning, not an error: the packaged file keeps InferenceX's `swebench_lite`, said by no warning."""
    with caplog.at_level(logging.WARNING, logger="llmsweep.evals.gate"):
        check_thresholds(["qwen3.5"], "gsm8k")
        assert caplog.messages == []
        path = user_thresholds(monkeypatch, tmp_path, "thresholds:\n  m:\n    gsm8:\n      exact_match: 0.5\n"
                                                      "      exact_match,strict-match: 0.5\n")
        check_thresholds(["m"], "gsm8k")
        check_thresholds(["m", "qwen3.5"], "gsm8k")  # a second check of the same catalog says nothing again
    assert caplog.messages == [f"{path}:3: eval threshold m.gsm8: llmsweep runs no eval task 'gsm8' (it runs "
                               "gpqa_diamond_cot_n_shot, gsm8k; \"*\" is any task), so its floors are never read: "
                               "name one of those tasks"]


def _local(prefix: str, *runs: EvalRun, limit: int | None = None) -> EvalBlock:
    return EvalBlock(mode="eval-only", task="gsm8k", dataset="/data/adds.jsonl", limit=limit, model_prefix=prefix,
                     context_length=9472, max_tokens=5376, runs=list(runs), verdict="invalid")


def _small(score: float, n: int, of: int, stderr: float | None) -> EvalRun:
    return EvalRun(conc=16, status="completed", n_samples=n, n_samples_original=of, metrics=[
        EvalMetric(name="exact_match,strict-match", value=score, stderr=stderr),
        EvalMetric(name="exact_match,flexible-extract", value=score, stderr=stderr)])


def test_a_pass_on_too_few_samples_is_smoke_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--eval-dataset adds.jsonl --eval-limit 6` and a user's floor of 0.40: 0.50 ± 0.22 over 6 questions earned the
    same `valid` as a full GSM8K. Part of the samples, or a local file's few whose score a standard error from its
    floor cannot tell, is `smoke`; a fail stays invalid; the task's whole hub dataset is judged as InferenceX does."""
    user = tmp_path / "cat"
    user.mkdir()
    (user / "eval_thresholds.yaml").write_text("thresholds:\n  smollm2: { gsm8k: { exact_match: 0.40 } }\n")
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(user))
    clear_caches()
    limited = judge(_local("smollm2", _small(0.5, 6, 32, 0.2236), limit=6))
    assert limited.verdict == "smoke" and [c.ok for c in limited.checks] == [True, True]
    assert limited.reasons == ["smoke eval: gsm8k scored 6 samples of 32 (--eval-limit 6); a pass on part of the "
                               "samples is not the task's score (drop the limit to judge it)"]
    whole_file = judge(_local("smollm2", _small(0.5, 6, 6, 0.2236), limit=6))  # the limit cut nothing
    assert whole_file.verdict == "smoke" and whole_file.reasons == [
        "smoke eval: exact_match,strict-match = 0.5000 ± 0.2236 over 6 samples of /data/adds.jsonl lies within a "
        "standard error of its threshold 0.40: too few samples to tell it passes (score more of them)"]
    # every answer right: a stderr of 0 tells nothing of 6 samples; the threshold's binomial one does
    assert judge(_local("smollm2", _small(1.0, 6, 6, 0.0))).verdict == "valid"  # 1.0 - 0.2 clears 0.40
    assert judge(_local("qwen3.5", _small(1.0, 6, 6, 0.0))).verdict == "smoke"  # 1.0 - 0.097 does not clear 0.94
    assert judge(_local("smollm2", _small(0.9, 400, 400, 0.015))).verdict == "valid"  # a file large enough
    assert judge(_local("smollm2", _small(0.3, 6, 32, 0.2), limit=6)).verdict == "invalid"  # a fail is a fail
    # the hub's whole split: InferenceX's gate, however near the floor (nothing more to score)
    assert judge(block("smollm2", _small(0.405, 1319, 1319, 0.0135))).verdict == "valid"
    hub_part = block("smollm2", _small(0.9, 50, 1319, 0.04)).model_copy(update={"limit": 50})
    assert judge(hub_part).verdict == "smoke"
