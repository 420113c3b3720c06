"""An lm-eval interpreter that cannot import lm_eval is refused before any server starts (it ran the throughput
point, launched the eval, and stored an eval failed on `ModuleNotFoundError`)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from llmsweep.evals.harness import EvalSettings, check_harness


@pytest.mark.skipif(importlib.util.find_spec("lm_eval") is not None, reason="this Python has lm-eval")
def test_a_python_without_lm_eval_is_refused_with_the_fix() -> None:
    why = check_harness(EvalSettings(python=sys.executable))
    assert why is not None and "cannot import lm_eval (ModuleNotFoundError: No module named 'lm_eval')" in why
    assert "install 'lm-eval[api]==0.4.13' into it" in why


def test_a_path_that_is_no_executable_names_the_fix() -> None:
    why = check_harness(EvalSettings(python="/nonexistent/bin/python"))
    assert why is not None and "is not an executable file (fix: name the Python of a venv" in why
