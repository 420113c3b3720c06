"""An unknown runner label is refused wherever the jobs would run (their GPU would be guessed from the label's
spelling); a serve-less recipe checked for planning only (InferenceX master files, `matrix`) keeps a warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmsweep.findings import Severity
from llmsweep.policy import validate_files

CORPUS = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy"


def _recipe(tmp_path: Path, *, serve: bool) -> Path:
    text = (CORPUS / "fleet.unknown-label.yaml").read_text(encoding="utf-8").replace("mi300x-typo", "h200-typo")
    if not serve:
        text = text.split("  serve:\n")[0]
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _severity(path: Path, *, simulate: bool) -> Severity:
    (hit,) = [f for f in validate_files([path], simulate=simulate).findings if f.rule == "fleet.unknown-label"]
    assert hit.line == 6 and "`h200-typo`" in hit.message
    return hit.severity


@pytest.mark.parametrize(("serve", "simulate", "expected"), [
    (True, False, Severity.ERROR),  # a real engine would run on the guessed GPU
    (True, True, Severity.ERROR),  # the simulator would model the guessed GPU
    (False, True, Severity.ERROR),  # `run --simulate` serves a serve-less recipe on the simulator's defaults
    (False, False, Severity.WARNING),  # runs nowhere (validate, matrix): planned, label kept
])
def test_the_label_is_an_error_wherever_the_jobs_would_run(tmp_path: Path, serve: bool, simulate: bool,
                                                          expected: Severity) -> None:
    assert _severity(_recipe(tmp_path, serve=serve), simulate=simulate) is expected


def test_run_simulate_refuses_a_serve_less_recipe_on_an_unknown_label(tmp_path: Path) -> None:
    """The audit: `runner: h200-typo` came out `valid` on a guessed H200 (exit 0)."""
    out = tmp_path / "out"
    env = {**os.environ, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite")}
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", "--simulate",
                           str(_recipe(tmp_path, serve=False)), "--out", str(out), "--no-report"],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "refused" in proc.stderr and "fleet.unknown-label" in proc.stderr
    assert not list(out.glob("jobs/*/summary.json")), "no result is labelled with a guessed GPU"


def test_the_fix_offers_runner_label_and_matrix_gives_the_rules_own_finding(tmp_path: Path) -> None:
    """An unlisted label that self-hosted runners do carry (InferenceX's `cluster:mi325x-tw`) is vouched for with
    `--runner-label`; the fix says so. `matrix` warns without the policy pass and used to restate an older fix."""
    from llmsweep.catalog.fleet import default_fleet
    from llmsweep.cli.matrix import _unknown_labels
    from llmsweep.spec import load_recipes

    path = _recipe(tmp_path, serve=False)
    (hit,) = [f for f in validate_files([path]).findings if f.rule == "fleet.unknown-label"]
    assert hit.fix is not None and "--runner-label LABEL" in hit.fix
    (warned,) = _unknown_labels(load_recipes([path]), default_fleet())
    assert (warned.rule, warned.line, warned.message, warned.fix) == (hit.rule, hit.line, hit.message, hit.fix)
    with_label = [f for f in validate_files([path], simulate=True, runner_labels=["h200-typo"]).findings
                  if f.rule == "fleet.unknown-label"]
    assert with_label == [], "the label the fix names is vouched for by --runner-label"
