"""A scenario is spelled once (`spec.components.ScenarioId`; the two a recipe's `scenarios` block names,
`RECIPE_SCENARIOS`), and whether one is agentic is InferenceX's rule, named once (`results.identity.agentic_scenario`).

Hand-written copies of `fixed-seq-len` sat in the recipe schema's unused `ScenarioType`, the changelog's
`scenario-type`, `matrix --scenario-type`, the serve overrides' `when: {scenario}` and the policy's isl path, and
`startswith("agentic")` in three places of the results room: a scenario added or renamed in one place was not in the
others."""

from __future__ import annotations

import ast
from pathlib import Path

import click

from llmsweep.changes.changelog import validate_changelog
from llmsweep.cli.main import cli
from llmsweep.results.identity import INFERENCEX_AGENTIC_PREFIX, agentic_scenario
from llmsweep.spec.components import RECIPE_SCENARIOS, ScenarioId
from llmsweep.spec.serve import WHEN_CHOICES

SRC = Path(__file__).resolve().parents[3] / "src" / "llmsweep"
HOME = SRC / "spec" / "components.py"


def _constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_no_module_spells_a_scenario_but_its_home() -> None:
    spellings = {s.value for s in ScenarioId}
    found = [f"{path.relative_to(SRC)}:{line}: {value!r}" for path in sorted(SRC.rglob("*.py")) if path != HOME
             for line, value in _constants(path) if value in spellings]
    assert found == [], "spell these as ScenarioId members (or RECIPE_SCENARIOS):\n" + "\n".join(found)


def test_only_inferencex_s_rule_tells_an_agentic_scenario_by_its_prefix() -> None:
    """No module tests a scenario with `startswith("agentic")` of its own (`results.identity._conc`, the frontier's
    `is_agentic` and the importer's `_agentic_row` each did): `agentic_scenario` applies the rule."""
    found = [f"{path.relative_to(SRC)}:{node.lineno}" for path in sorted(SRC.rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"
             and any(isinstance(a, ast.Constant) and a.value == INFERENCEX_AGENTIC_PREFIX for a in node.args)]
    assert found == [], "use results.identity.agentic_scenario:\n" + "\n".join(found)
    assert [s for s in ScenarioId if agentic_scenario(s)] == [ScenarioId.AGENTIC_CODING]


def test_every_place_a_user_names_a_recipe_scenario_offers_the_recipe_blocks() -> None:
    names = [s.value for s in RECIPE_SCENARIOS]
    assert names == ["fixed-seq-len", "agentic-coding"]  # InferenceX's block names
    assert list(WHEN_CHOICES["scenario"]) == names
    matrix = cli.get_command(click.Context(cli), "matrix")
    assert isinstance(matrix, click.Group)
    for name in ("full-sweep", "test-config"):
        command = matrix.get_command(click.Context(matrix), name)
        assert command is not None
        (option,) = [p for p in command.params if p.name == "scenario_type"]
        assert isinstance(option.type, click.Choice) and list(option.type.choices) == names


def test_a_changelog_scenario_type_typo_names_the_choices_as_a_recipe_writes_them() -> None:
    text = ("- config-keys: [k]\n  description:\n  - why\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/"
            "pull/12\n  scenario-type:\n  - fixed-seq\n")
    (finding,) = validate_changelog(text, "cl.yaml").findings
    assert finding.rule == "changelog.enum" and finding.line == 6, finding
    assert "'fixed-seq-len' or 'agentic-coding'" in finding.message and "did you mean `fixed-seq-len`" in \
        finding.message, finding.message
    # a Mooncake replay is what an agentic block runs, not a block a changelog entry can select
    (finding,) = validate_changelog(text.replace("fixed-seq\n", "mooncake-replay\n"), "cl.yaml").findings
    assert finding.rule == "changelog.enum", finding
    ok = validate_changelog(text.replace("fixed-seq\n", "agentic-coding\n"), "cl.yaml")
    assert ok.findings == [] and ok.entries[0].scenario_type == [ScenarioId.AGENTIC_CODING]
