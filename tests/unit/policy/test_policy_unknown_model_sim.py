"""A recipe serving local weights of a model no catalog holds passes for a real engine (the weights say what is
served), but under `--simulate` validate says what `run --simulate`, `predict` and `al collect --simulate` will do:
refuse its jobs, the simulator having no figures for it, with the catalog entry that would give them."""

from __future__ import annotations

from pathlib import Path

from llmsweep.findings import Finding, Severity
from llmsweep.policy import validate_files

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "examples" / "gpu" / "smollm2-135m-bf16-h200-vllm-ngram.yaml"
FLEET = ROOT / "examples" / "gpu" / "fleet.yaml"


def _unknown_model(simulate: bool) -> list[Finding]:
    findings = validate_files([RECIPE], runner_config=FLEET, simulate=simulate).findings
    return [f for f in findings if f.rule == "input.unknown-model"]


def test_local_weights_of_an_uncatalogued_model_warn_only_under_simulate() -> None:
    assert _unknown_model(simulate=False) == []
    (hit,) = _unknown_model(simulate=True)
    assert hit.severity == Severity.WARNING  # a warning: the other jobs of a sweep still run, each refused alone
    assert "SmolLM2-135M-Instruct" in hit.message and "refuse its jobs" in hit.message
    assert "models.yaml in $LLMSWEEP_CATALOG_DIR" in (hit.fix or "")
