"""A model no golden curve covers may pin the acceptance length it measured, citing where (InferenceX's rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.engines.sim import simulated_acceptance
from llmsweep.findings import Finding
from llmsweep.policy import validate_files

CORPUS = Path(__file__).resolve().parents[2] / "data" / "recipes" / "policy"
MISSING = CORPUS / "golden-al.missing.yaml"
SPEC = '{ method: eagle, num-steps: 12, topk: 1, num-draft-tokens: 4, thinking: "on" }'


def _recipe(tmp_path: Path, extra: str) -> Path:
    text = MISSING.read_text(encoding="utf-8")
    assert SPEC in text
    path = tmp_path / "recipe.yaml"
    path.write_text(text.replace(SPEC, SPEC[:-2] + extra + " }"), encoding="utf-8")
    return path


def _golden(findings: list[Finding]) -> list[str]:
    return [f.rule for f in findings if f.rule.startswith("golden-al.")]


def test_a_cited_pin_on_a_model_without_a_curve_plans_and_runs_at_the_pin_with_its_source(tmp_path: Path) -> None:
    result = validate_files([_recipe(tmp_path, ', acceptance-length: 2.1, acceptance-length-source: '
                                               '"https://example.org/speedbench/run/17"')], simulate=True)
    assert _golden(result.findings) == []
    assert result.ok, [f.render() for f in result.findings if f.is_error]
    assert result.jobs
    dumps = [j.acceptance.model_dump() if j.acceptance else None for j in result.jobs]
    assert all(d == dumps[0] for d in dumps)
    acceptance = dumps[0]
    assert acceptance is not None
    assert acceptance["value"] == 2.1 and acceptance["source"] == "pinned" and acceptance["golden"] is None
    assert acceptance["cited"] == "https://example.org/speedbench/run/17"
    estimate = simulated_acceptance(result.jobs[0])
    assert estimate is not None and estimate.value == 2.1
    assert "https://example.org/speedbench/run/17" in estimate.basis  # what the result's provenance carries


@pytest.mark.parametrize("extra", ["", ", acceptance-length: 2.1"])
def test_without_a_cited_source_a_model_without_a_curve_is_refused(tmp_path: Path, extra: str) -> None:
    result = validate_files([_recipe(tmp_path, extra)])
    missing = [f for f in result.findings if f.rule == "golden-al.missing"]
    assert missing and not result.ok
    assert "acceptance-length-source" in (missing[0].fix or "")


def test_a_blank_citation_is_refused_at_its_field(tmp_path: Path) -> None:
    result = validate_files([_recipe(tmp_path, ', acceptance-length: 2.1, acceptance-length-source: "  "')])
    [finding] = [f for f in result.findings if f.is_error]
    assert finding.rule == "schema.missing" and "is blank" in finding.message and finding.line == 16


AGENTIC_ROW = """    agentic-coding:
    - dram-utilization: 0.80
      search-space:
      - { tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [4, 8, 16] }"""
FIXED_ROW = """    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 8, spec-decoding: mtp, conc-list: [4] }"""


def _as_fixed_length(case: str, tmp_path: Path) -> Path:
    """The policy corpus's agentic `case` with its row made fixed-length (8k/1k, conc 4), the rest as written."""
    text = (CORPUS / case).read_text(encoding="utf-8")
    assert AGENTIC_ROW in text
    path = tmp_path / "fixed.yaml"
    path.write_text(text.replace(AGENTIC_ROW, FIXED_ROW), encoding="utf-8")
    return path


def test_a_cited_pin_on_a_fixed_length_job_gets_only_the_fixed_pin_warning(tmp_path: Path) -> None:
    # The curve covers qwen3.5 MTP K=3, but a fixed-length job is not pinned to it: deleting the pin (as
    # citation-unused's fix says) would change what is measured, so only golden-al.fixed-pinned speaks.
    path = _as_fixed_length("golden-al.citation-unused.yaml", tmp_path)
    assert _golden(validate_files([path]).findings) == ["golden-al.fixed-pinned", "golden-al.precision-provenance"]


def test_a_pin_other_than_the_golden_value_on_a_fixed_length_job_is_a_probe_not_an_error(tmp_path: Path) -> None:
    """A fixed-length row pinned at 3.0 where the golden AL is another value got `golden-al.pinned-differs`, an error
    whose fix said "delete it: the planner pins the golden value", while the planner pins nothing on a fixed-length
    row (deleting it verifies for real) and `golden-al.fixed-pinned` told the same user a pin probe is fine. Only the
    warning speaks there; an agentic row's differing pin is still refused."""
    assert "golden-al.pinned-differs" in _golden(validate_files([CORPUS / "golden-al.pinned-differs.yaml"]).findings)
    golden = _golden(validate_files([_as_fixed_length("golden-al.pinned-differs.yaml", tmp_path)]).findings)
    assert "golden-al.pinned-differs" not in golden and "golden-al.fixed-pinned" in golden, golden
