"""Every schema-level malformed recipe is reported with its rule id, at its line, with a useful message.

Each file under tests/data/recipes/malformed/ starts with `# expect: rule=<id> line=<n> message=<fragment>`.
Files whose rule is not a `schema.*` rule belong to the policy engine's corpus and are checked there.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmsweep.spec import load_recipes

CORPUS = Path(__file__).resolve().parents[2] / "data" / "recipes" / "malformed"
EXPECT = re.compile(r"^# expect: rule=(?P<rule>\S+) line=(?P<line>\d+) message=(?P<message>.+)$")


def _cases() -> list[tuple[Path, str, int, str]]:
    cases = []
    for path in sorted(CORPUS.glob("*.yaml")):
        match = EXPECT.match(path.read_text(encoding="utf-8").splitlines()[0])
        assert match, f"{path.name}: first line must be `# expect: rule=... line=... message=...`"
        if match["rule"].startswith("schema."):
            cases.append((path, match["rule"], int(match["line"]), match["message"].strip()))
    return cases


CASES = _cases()


def test_corpus_covers_at_least_fifteen_schema_rules() -> None:
    assert len({rule for _, rule, _, _ in CASES}) >= 15


@pytest.mark.parametrize(("path", "rule", "line", "fragment"), CASES, ids=[c[0].stem for c in CASES])
def test_malformed_recipe_is_reported_at_its_line(path: Path, rule: str, line: int, fragment: str) -> None:
    result = load_recipes([path])
    assert not result.ok, "a malformed recipe must produce an error finding"
    assert "bad-recipe" not in result.recipes or rule == "schema.duplicate-key"
    matching = [f for f in result.errors if f.rule == rule]
    assert matching, f"expected {rule}, got {[(f.rule, f.line, f.message) for f in result.errors]}"
    finding = matching[0]
    assert finding.file == str(path)
    assert finding.line == line, finding.render()
    assert fragment in finding.message, finding.render()
    assert finding.fix, "every finding says how to fix it"


def test_a_bad_list_item_is_named_by_its_list_and_the_fix_quotes_its_value() -> None:
    """`conc-list: [4, four]`: the finding says `conc-list[1]` (not `1`, the index alone) and the fix names the value
    to rewrite, `four`, not the index."""
    (finding,) = [f for f in load_recipes([CORPUS / "type-list-item.yaml"]).errors if f.rule == "schema.type"]
    assert (finding.path or "").endswith("conc-list[1]") and "`conc-list[1]`" in finding.message, finding.render()
    assert finding.fix == "write `four` (`conc-list[1]`) as an integer", finding.render()


def test_a_mapping_flag_value_with_a_non_string_key_is_one_finding_naming_that_key() -> None:
    """It was six: the key's (named by pydantic's union tag, `dict[str,any]`, with the fix `quote the key: ""`) and
    one per other type the flag's value could have had (str, int, float, bool, list), each named by its tag."""
    result = load_recipes([CORPUS / "serve-flag-mapping-key.yaml"])
    (finding,) = result.errors
    assert finding.path == "bad-recipe.serve.args.--speculative-config.1" and finding.fix == 'quote the key: `"1": ...`'
