"""The rule catalogue is complete and check() reports like a reviewer would: once per problem, naming the jobs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from llmsweep.findings import Severity
from llmsweep.plan import full_sweep
from llmsweep.policy import all_rules, check
from llmsweep.spec import loads_recipes

SPEC_SRC = Path(__file__).resolve().parents[3] / "src" / "llmsweep" / "spec"

RECIPE = """\
k:
  image: lmsysorg/sglang:v0.5.12-rocm720-mi30x
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: cluster:mi300x-amds
  precision: fp8
  framework: {framework}
  multinode: false
  scenarios:
    agentic-coding:
    - search-space:
      - {{ tp: 8, spec-decoding: mtp, kv-offloading: none, conc-list: [4, 8, 16] }}
  serve:
    spec-decoding: {{ method: eagle, num-steps: 3 }}
"""


def test_every_loader_rule_id_is_listed() -> None:
    listed = {r.id for r in all_rules()}
    text = "\n".join(p.read_text(encoding="utf-8") for p in SPEC_SRC.glob("*.py"))
    raised = {f"schema.{m}" for m in re.findall(r'rule_error\(\s*"([a-z0-9-]+)"', text)}
    literal = set(re.findall(r'"((?:schema|spec)\.[a-z0-9-]+)"', text))
    assert (raised | literal) - listed == set()


def test_rules_have_unique_ids_titles_and_fixes() -> None:
    rules = all_rules()
    assert len({r.id for r in rules}) == len(rules)
    assert all(r.title and r.fix for r in rules)
    stages = ["schema", "plan", "policy", "changelog"]
    assert [r.stage for r in rules] == sorted((r.stage for r in rules), key=stages.index)


def _run(framework: str, simulate: bool = False) -> tuple[list[Any], list[Any]]:
    loaded = loads_recipes(RECIPE.format(framework=framework), "r.yaml").raise_on_error()
    jobs = full_sweep(loaded.recipes)
    return check(loaded, jobs, simulate=simulate), jobs


def test_one_finding_per_problem_naming_every_job() -> None:
    found, jobs = _run("sglang")
    gates = [f for f in found if f.rule == "engine.feature-gate"]
    assert len(gates) == 1 and gates[0].severity is Severity.ERROR
    assert list(gates[0].jobs) == [j.id for j in jobs] and len(jobs) == 3
    assert gates[0].file == "r.yaml" and gates[0].line == 14


def test_simulation_softens_image_and_version_findings() -> None:
    found, _ = _run("sglang", simulate=True)
    assert [f.severity for f in found if f.rule == "engine.feature-gate"] == [Severity.WARNING]
    found, _ = _run("sim")
    assert not [f for f in found if f.rule == "engine.feature-gate"], "the sim engine has no version gates"


def test_a_finding_shows_control_characters_from_a_recipe_escaped() -> None:
    """A key or value with a carriage return, an escape sequence or a newline must not rewrite the terminal or print
    a line that reads as a finding of its own."""
    from llmsweep.findings import Finding, Severity

    f = Finding(rule="schema.serve-flag", severity=Severity.ERROR, file="r.yaml", line=3,
                path="k1.serve.args.--x\rr.yaml:1: error [fake]", message="bad \x1b[2J value\nr.yaml:9: error [fake]")
    text = f.render()
    assert text.splitlines()[0] == ("r.yaml:3: error [schema.serve-flag] k1.serve.args.--x\\rr.yaml:1: error [fake]: "
                                    "bad \\x1b[2J value\\nr.yaml:9: error [fake]")
    assert "\r" not in text and "\x1b" not in text and len(text.splitlines()) == 1


def test_every_rule_a_finding_of_the_product_names_is_listed() -> None:
    """`llmsweep rules` is the catalogue of what a finding can name: a rule written into a finding (`rule="…"`, or a
    class's `RULE = "…"`, or the changelog's `_error("…")`) anywhere in the product is listed there. `catalog.file`,
    `eval.input`, `policy.input`, `policy.internal`
    and `fleet.invalid` were named by findings `validate` printed and listed nowhere."""
    listed = {r.id for r in all_rules()}
    named: dict[str, str] = {}
    for path in SPEC_SRC.parent.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for rule_id in re.findall(r'(?:rule=|RULE\s*=)\s*"([a-z0-9_-]+\.[a-z0-9_.-]+)"', text):
            named.setdefault(rule_id, str(path))
        # the changelog's findings: `_error("name", …)` is `changelog.name`
        for rule_id in re.findall(r'(?<!\w)_error\(\s*"([a-z0-9-]+)"', text):
            named.setdefault(f"changelog.{rule_id}", str(path))
    unlisted = {r: p for r, p in named.items() if r not in listed}
    assert unlisted == {}


def test_the_changelog_rules_are_listed_and_name_what_it_reports() -> None:
    """`llmsweep changelog` names `changelog.*` rules (its own checks, and an entry's field errors renamed from the
    loader's `schema.*`): `llmsweep rules` listed none of them. A changelog holding one of each kind of error gives
    only listed rules."""
    from llmsweep.changes.changelog import validate_changelog

    listed = {r.id: r for r in all_rules()}
    assert {"changelog.pr-link", "changelog.history", "changelog.type", "changelog.missing"} <= set(listed)
    assert all(r.stage == "changelog" for i, r in listed.items() if i.startswith("changelog."))
    bad = ("- config-keys:\n    - k\n  description: 5\n  pr-link: XXX\n  color: red\n\n"
           "- config-keys:\n    - k\n  pr-link: XXX\n\n"
           "- config-keys:\n    - k\n    - k\n  description:\n    - b\n"
           "  pr-link: http://example.com/1  # a tab:\there\n")
    found = validate_changelog(bad, recipe_keys=["k"], pr_number=5).findings
    assert {f.rule for f in found} == {"changelog.type", "changelog.unknown-key", "changelog.pr-link",
                                       "changelog.duplicate-key", "changelog.bytes", "changelog.missing"}, found
    assert {f.rule for f in found} <= set(listed), found
