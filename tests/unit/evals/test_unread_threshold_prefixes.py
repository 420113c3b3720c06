"""A user's eval thresholds under a model prefix no evaluated model has (`Qwen3.5` for `qwen3.5`: prefixes match
exactly) were never read, in silence: the eval was judged against the packaged or default floor. It is said before
any server starts, naming the entry's file:line and the closest model prefix of the evals at hand."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.recipes import QWEN35_FP8, recipe_text

from llmsweep.catalog.eval_thresholds import threshold_for
from llmsweep.catalog.sources import clear_caches
from llmsweep.evals.harness import EvalSettings
from llmsweep.evals.results import check_inputs
from llmsweep.plan import Job, full_sweep
from llmsweep.plan.matrix import EvalOptions
from llmsweep.spec import loads_recipes

RECIPE = recipe_text(framework="sglang", image="lmsysorg/sglang:v0.5.16-cu129", served=QWEN35_FP8, runner="h200",
                     isl=8192, osl=1024, tp=8, concs="[16]")


@pytest.fixture
def user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(tmp_path))
    clear_caches()
    yield tmp_path / "eval_thresholds.yaml"
    clear_caches()


def evals() -> list[Job]:
    jobs = full_sweep(loads_recipes(RECIPE, "t.yaml").raise_on_error().recipes, evals=EvalOptions(evals_only=True))
    assert [j.model_prefix for j in jobs] == ["qwen3.5"] and all(j.eval_only for j in jobs)
    return jobs


def test_a_prefix_differing_in_case_or_matching_no_evaluated_model_is_said(
        user: Path, caplog: pytest.LogCaptureFixture) -> None:
    user.write_text("thresholds:\n  Qwen3.5: { gsm8k: { exact_match: 0.5 } }\n"
                    "  qwen3-5: { gsm8k: { exact_match: 0.6 } }\n  dsr1: { gsm8k: { exact_match: 0.7 } }\n"
                    "  default: { gsm8k: { exact_match: 0.8 } }\n")
    assert threshold_for("qwen3.5", "gsm8k", "exact_match,strict-match") == (0.94, "qwen3.5.gsm8k.exact_match")
    with caplog.at_level(logging.WARNING):
        check_inputs(evals(), EvalSettings())  # what `run`, `validate` and `render` call before any server starts
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [
        f"{user}:2: eval thresholds of model prefix 'Qwen3.5' match no model prefix of the evals at hand (qwen3.5), so "
        "its floors are never read for them: prefixes match exactly, case included; the closest model prefix is "
        "'qwen3.5' (rename the entry to it)",
        f"{user}:3: eval thresholds of model prefix 'qwen3-5' match no model prefix of the evals at hand (qwen3.5), so "
        "its floors are never read for them: prefixes match exactly; the closest model prefix is 'qwen3.5'",
        f"{user}:4: eval thresholds of model prefix 'dsr1' match no model prefix of the evals at hand (qwen3.5), so "
        "its floors are never read for them: prefixes match exactly; the closest model prefix is 'qwen3.5'"]


def test_a_prefix_the_evals_read_and_the_packaged_ones_are_not_said(user: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    user.write_text("thresholds:\n  qwen3.5: { gsm8k: { exact_match: 0.5 } }\n")
    with caplog.at_level(logging.WARNING):
        check_inputs(evals(), EvalSettings())
    assert threshold_for("qwen3.5", "gsm8k", "exact_match,strict-match") == (0.5, "qwen3.5.gsm8k.exact_match")
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == []
