"""An error about particular jobs names exactly those jobs (`llmsweep run` refuses what a finding names, and a
finding that names no job refuses its whole recipe); recipe-wide errors name none.

Each family's corpus recipe gets a second, clean arm; the finding must name the jobs of the faulty arm only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llmsweep.plan.job import Job
from llmsweep.policy import validate_files

DATA = Path(__file__).resolve().parents[2] / "data" / "recipes"
CORPUS = DATA / "policy"
SPEC_NONE = "{ tp: 8, spec-decoding: none, kv-offloading: none, conc-list: [4] }"
TP8_MTP = "{ tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [4] }"


def _with_arm(tmp_path: Path, case: str, arm: str | None) -> Path:
    """The corpus recipe of `case`, with `arm` added as a second search-space entry."""
    lines = (CORPUS / f"{case}.yaml").read_text(encoding="utf-8").splitlines()
    if arm is not None:
        at = next(i for i, line in enumerate(lines) if line.strip() == "search-space:") + 1
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines.insert(at + 1, f"{indent}- {arm}")
    path = tmp_path / f"{case}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _named(findings: list, rule: str) -> set[str]:
    hits = [f for f in findings if f.rule == rule]
    assert hits, f"no {rule}"
    assert all(f.jobs for f in hits), f"{rule} must name the jobs it concerns"
    return {i for f in hits for i in f.jobs}


FAMILIES: list[tuple[str, str, Callable[[Job], bool]]] = [
    # (rule, the second arm, which jobs the rule concerns)
    ("workload.chat-template", SPEC_NONE, lambda j: j.spec_decoding != "none"),  # agentx
    ("serve.spec-missing", SPEC_NONE, lambda j: j.spec_decoding != "none"),  # consumed
    ("engine.feature-gate", SPEC_NONE, lambda j: j.spec_decoding != "none"),  # engine
    ("golden-al.missing", SPEC_NONE, lambda j: j.spec_decoding != "none"),  # golden
    ("grid.max-conc", TP8_MTP, lambda j: max(j.concs) > 16),  # grid
    ("resources.gpus-per-node", TP8_MTP, lambda j: j.gpus > 8),  # resources
]


@pytest.mark.parametrize(("rule", "arm", "concerned"), FAMILIES, ids=[f[0] for f in FAMILIES])
def test_a_job_error_names_exactly_the_jobs_it_concerns(
    tmp_path: Path, rule: str, arm: str, concerned: Callable[[Job], bool]
) -> None:
    result = validate_files([_with_arm(tmp_path, rule, arm)])
    expected = {j.id for j in result.jobs if concerned(j)}
    assert expected and expected != {j.id for j in result.jobs}, "the case needs concerned and clean jobs"
    assert _named(result.findings, rule) == expected


def test_max_conc_names_only_the_point_above_the_cap() -> None:
    result = validate_files([DATA / "run" / "policy-max-conc.yaml"])
    (over,) = [j for j in result.jobs if j.conc == 4]
    assert _named(result.findings, "grid.max-conc") == {over.id}
    (in_cap,) = [j for j in result.jobs if j.conc == 2]
    assert not [f for f in result.findings_for(in_cap) if f.is_error]


def test_a_secret_in_an_override_names_the_jobs_that_apply_it(tmp_path: Path) -> None:
    text = (CORPUS / "serve.secret-value.yaml").read_text(encoding="utf-8")
    text = text.replace("      HF_TOKEN: hf_abcdefghijklmnop  #<-\n", "")
    text = text.replace("    args: {}\n", "    args: {}\n    overrides:\n    - when: { tp: 4 }\n"
                                         "      env: { HF_TOKEN: hf_abcdefghijklmnop }\n")
    text = text.replace("conc-list: [4, 8, 16] }", "conc-list: [4, 8, 16] }\n      - { tp: 4, spec-decoding: mtp, "
                                                  "kv-offloading: none, conc-list: [4] }")
    path = tmp_path / "secret.yaml"
    path.write_text(text, encoding="utf-8")
    result = validate_files([path])
    assert not [f for f in result.findings if f.rule.startswith("schema.")], [f.render() for f in result.findings]
    assert _named(result.findings, "serve.secret-value") == {j.id for j in result.jobs if j.tp == 4}


@pytest.mark.parametrize("rule", ["serve.secret-value", "serve.spec-unused", "client.isolation",
                                  "kv-offload.hardware-metadata"])
def test_a_recipe_wide_error_names_no_job(rule: str) -> None:
    result = validate_files([CORPUS / f"{rule}.yaml"])
    hits = [f for f in result.findings if f.rule == rule and f.is_error]
    assert hits and all(f.jobs == () for f in hits)
    # ... so every job of the recipe is concerned.
    assert all(any(f.rule == rule for f in result.findings_for(j)) for j in result.jobs)
