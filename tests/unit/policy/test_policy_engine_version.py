"""Version gates follow the image that runs: a `serve.engine.version` the image tag contradicts is refused
(`engine.version-mismatch`) and never satisfies a gate; it stands in only for a tag that names no version."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.findings import Finding, Severity
from llmsweep.policy import validate_files

CORPUS = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy"
GATED = CORPUS / "engine.feature-gate.yaml"  # SGLANG_SIMULATE_ACC_TOKEN_MODE: read only from SGLang 0.5.16


def _validate(tmp_path: Path, image: str, stated: str | None, *, simulate: bool = False) -> list[Finding]:
    text = GATED.read_text(encoding="utf-8").replace("lmsysorg/sglang:v0.5.12-rocm720-mi30x", image)
    if stated is not None:
        text = text.replace("  serve:\n", f"  serve:\n    engine: {{ name: sglang, version: '{stated}' }}\n")
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    return validate_files([path], simulate=simulate).findings


def _rules(found: list[Finding]) -> dict[str, Severity]:
    return {f.rule: f.severity for f in found if f.rule.startswith("engine.")}


def test_a_stated_version_the_tag_contradicts_is_refused_and_the_gate_holds_at_the_tags_version(
        tmp_path: Path) -> None:
    """The audit: a 0.5.12 image stated as 0.5.16 validated clean and ran 0.5.12 with a knob it ignores."""
    found = _validate(tmp_path, "lmsysorg/sglang:v0.5.12-rocm720-mi30x", "0.5.16")
    assert _rules(found) == {"engine.version-mismatch": Severity.ERROR, "engine.feature-gate": Severity.ERROR}
    (mismatch,) = [f for f in found if f.rule == "engine.version-mismatch"]
    assert mismatch.line == 16 and mismatch.path == "bad-recipe.serve.engine.version"
    assert "0.5.16" in mismatch.message and "0.5.12" in mismatch.message
    assert "lmsysorg/sglang:v0.5.12-rocm720-mi30x" in mismatch.message
    (gate,) = [f for f in found if f.rule == "engine.feature-gate"]
    assert "sglang 0.5.12" in gate.message


@pytest.mark.parametrize("stated", ["0.5.16", "v0.5.16", "0.5.16.0"])
def test_a_stated_version_the_tag_agrees_with_is_no_finding(tmp_path: Path, stated: str) -> None:
    assert _rules(_validate(tmp_path, "lmsysorg/sglang:v0.5.16-rocm720-mi30x", stated)) == {}


def test_a_newer_image_stated_as_older_is_a_mismatch_without_a_gate(tmp_path: Path) -> None:
    found = _validate(tmp_path, "lmsysorg/sglang:v0.5.16-rocm720-mi30x", "0.5.12")
    assert _rules(found) == {"engine.version-mismatch": Severity.ERROR}


@pytest.mark.parametrize(("stated", "expected"), [
    ("0.5.16", {}),  # the stated version stands in for the tag: the gate is met, the version known
    ("0.5.12", {"engine.feature-gate": Severity.ERROR}),  # ... and it gates
    (None, {"engine.version-unknown": Severity.WARNING}),  # nothing to go by
])
def test_a_tag_without_a_version_goes_by_the_stated_one(tmp_path: Path, stated: str | None,
                                                        expected: dict[str, Severity]) -> None:
    assert _rules(_validate(tmp_path, "lmsysorg/sglang:nightly-20260801-abc1234", stated)) == expected


def test_under_simulation_the_mismatch_is_a_warning_like_the_other_image_findings(tmp_path: Path) -> None:
    found = _validate(tmp_path, "lmsysorg/sglang:v0.5.12-rocm720-mi30x", "0.5.16", simulate=True)
    assert _rules(found) == {"engine.version-mismatch": Severity.WARNING, "engine.feature-gate": Severity.WARNING}
