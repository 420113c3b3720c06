"""perf-changelog.yaml: every malformed part gets a located error; valid entries select InferenceX's jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from changes_scratch import commit, scratch_repo
from click.testing import CliRunner

from llmsweep.changes.changelog import select_jobs, trim_concurrencies, validate_changelog
from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError
from llmsweep.spec.loader import load_recipes

KEYS = ["chg-sim", "other-key"]
LINK = "https://github.com/SemiAnalysisAI/InferenceX/pull/12"


def entry(keys: str = "[chg-sim]", link: str = LINK, extra: str = "") -> str:
    return f"- config-keys: {keys}\n  description:\n  - why\n  pr-link: {link}\n{extra}"


def rules(text: str, **kw: object) -> list[tuple[str, int | None]]:
    log = validate_changelog(text, "cl.yaml", recipe_keys=KEYS, **kw)  # type: ignore[arg-type]
    return [(f.rule, f.line) for f in log.findings]


def test_a_valid_changelog_has_no_finding() -> None:
    text = entry() + "\n" + entry("['chg-*']", extra="  evals-only: true\n")
    log = validate_changelog(text, "cl.yaml", recipe_keys=KEYS)
    assert log.findings == [] and len(log.entries) == 2 and log.lines == [1, 6]


@pytest.mark.parametrize(("text", "expected"), [
    (entry("[no-such]"), [("changelog.unknown-key", 1)]),
    (entry("['zz-*']"), [("changelog.unknown-key", 1)]),
    (entry(link="https://example.com/pr/1"), [("changelog.pr-link", 4)]),
    (entry(extra="  colour: red\n"), [("changelog.unknown-key", 5)]),
    (entry(extra="  pr-link: x\n"), [("changelog.duplicate-key", 5), ("changelog.pr-link", 5)]),
    (entry().rstrip("\n"), [("changelog.final-newline", 4)]),
    (entry().replace("  description", "\tdescription", 1), [("changelog.bytes", 2), ("changelog.yaml-syntax", 2)]),
    ("- config-keys: [chg-sim]\n  description: [a\n", [("changelog.yaml-syntax", 3)]),
    # an entry that does not begin `- config-keys:` at column 0 is named at its line (it had none: the file's only
    # word was "N entries but M lines start with …")
    # a byte-order mark an editor wrote: named as one, once (it was then said again as an entry that does not
    # begin `- config-keys:`: "1 entries but 0 lines start with …"), at the file's start or an entry's
    ("\ufeff" + entry(), [("changelog.bytes", 1)]),
    (entry() + "\n\ufeff" + entry("[other-key]"), [("changelog.bytes", 6)]),
    (entry() + "\n- description:\n  - why\n  config-keys: [other-key]\n  pr-link: " + LINK + "\n",
     [("changelog.entry-lines", 6)]),
])
def test_malformed_changelogs_get_located_errors(text: str, expected: list[tuple[str, int]]) -> None:
    assert rules(text) == expected


def test_entries_not_begun_as_entries_are_counted_in_words() -> None:
    (off,) = validate_changelog(entry() + "\n- description:\n  - why\n  config-keys: [other-key]\n  pr-link: " + LINK
                                + "\n", "cl.yaml", recipe_keys=KEYS).findings
    assert off.message == "2 entries but 1 line starts with `- config-keys:`"
    (none,) = validate_changelog("- description:\n  - why\n  config-keys: [other-key]\n  pr-link: " + LINK + "\n",
                                 "cl.yaml", recipe_keys=KEYS).findings
    assert none.message == "1 entry but 0 lines start with `- config-keys:`"


def test_an_unknown_key_one_slip_from_a_recipes_is_named() -> None:
    """Among InferenceX's hundreds of config keys, a misspelt one was only "not found in the recipes"."""
    (typo,) = validate_changelog(entry("[chg-smi]"), "cl.yaml", recipe_keys=KEYS).findings
    assert typo.line == 1 and typo.message.endswith("not found in the recipes; did you mean `chg-sim`?")
    (far,) = validate_changelog(entry("[zz-top]"), "cl.yaml", recipe_keys=KEYS).findings
    assert far.message == "Config key 'zz-top' not found in the recipes"


def test_missing_field_points_at_its_entry() -> None:
    found = rules("- config-keys: [chg-sim]\n  pr-link: " + LINK + "\n")
    assert found == [("changelog.missing", 1)]


def test_placeholder_link_is_refused_only_when_final() -> None:
    text = entry(link="https://github.com/SemiAnalysisAI/InferenceX/pull/XXX")
    assert rules(text) == []
    assert rules(text, final_links=True) == [("changelog.pr-link", 4)]


def test_append_only_against_a_base() -> None:
    base = entry()
    assert rules(base + "\n" + entry("[other-key]"), base=base) == []
    log = validate_changelog(base + "\n" + entry("[other-key]"), "cl.yaml", recipe_keys=KEYS, base=base)
    assert [e.config_keys for e in log.added] == [["other-key"]]
    edited = base.replace("- why", "- because") + "\n" + entry("[other-key]")
    assert rules(edited, base=base) == [("changelog.history", 3)]
    assert rules(base + entry("[other-key]"), base=base) == [("changelog.separator", 5)]
    assert rules(base + "\n\n" + entry("[other-key]"), base=base) == [("changelog.separator", 5)]
    assert rules("", base=base)[0][0] == "changelog.history"
    relinked = base.replace(LINK, LINK.replace("12", "13"))  # a canonical correction
    assert rules(relinked, base=base) == []
    assert rules(relinked + "\n" + entry("[other-key]"), base=base) == [("changelog.history", 4)]


def _recipes(tmp_path: Path) -> dict[str, object]:
    _, _, _ = scratch_repo(tmp_path)
    return dict(load_recipes([tmp_path / "repo" / "recipes" / "chg.yaml"]).raise_on_error().recipes)


def test_selection_semantics(tmp_path: Path) -> None:
    recipes = _recipes(tmp_path)
    log = validate_changelog(entry(), "cl.yaml", recipe_keys=list(recipes))
    sel = select_jobs(log.entries, recipes)  # type: ignore[arg-type]
    assert sorted((j.tp, j.conc) for j in sel.throughput) == [(4, 2), (4, 4), (4, 8), (8, 2), (8, 4)]
    assert all(not j.eval_only for j in sel.throughput)
    trimmed = select_jobs(log.entries, recipes, trim_conc=True)  # type: ignore[arg-type]
    assert sorted((j.tp, j.conc) for j in trimmed.throughput) == [(4, 2), (8, 2)]
    assert trim_concurrencies(sel.throughput) == trimmed.throughput
    assert sel.empty == []
    evals = validate_changelog(entry(extra="  evals-only: true\n"), "cl.yaml").entries
    nothing = select_jobs(evals, recipes)  # type: ignore[arg-type]
    assert nothing.jobs == []  # no 8k1k row to evaluate: a pull request would sweep nothing, and it is said
    assert nothing.empty == ["the entry for chg-sim selects no eval (it runs evals only): none of its rows is marked "
                             "for an eval (an 8k1k row, or `all-evals`)"]
    twice = validate_changelog(entry() + "\n" + entry(link=LINK.replace("12", "13")), "cl.yaml").entries
    assert len(select_jobs(twice, recipes).throughput) == 5  # type: ignore[arg-type]  # a pair is generated once
    append = validate_changelog(entry(extra="  append-only: true\n"), "cl.yaml").entries
    with pytest.raises(ConfigError, match=r"pass --base REV"):  # the added points are counted against a base
        select_jobs(append, recipes)  # type: ignore[arg-type]


def test_cli_validates_against_git_base_and_lists_the_new_entries_jobs(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _, _ = scratch_repo(tmp_path)
    (repo / "perf-changelog.yaml").write_text(entry("[other]"))
    base = commit(repo, "changelog")
    (repo / "perf-changelog.yaml").write_text(entry("[other]") + "\n" + entry())
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["changelog", "--base", base, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["added"] == 1 and len(doc["jobs"]) == 5  # history may name a deleted recipe
    (repo / "perf-changelog.yaml").write_text(entry("[other]") + entry())
    bad = CliRunner().invoke(cli, ["changelog", "--base", base])
    assert bad.exit_code != 0
    assert "perf-changelog.yaml:5" in bad.stderr and "separator" in bad.stderr
    (repo / "perf-changelog.yaml").write_text(entry("[other]") + "\n" + entry(extra="  evals-only: true\n"))
    empty = CliRunner().invoke(cli, ["changelog", "--base", base, "--json"])
    assert empty.exit_code == 0, empty.output
    assert "warning: the entry for chg-sim selects no eval (it runs evals only)" in empty.stderr
    assert json.loads(empty.stdout)["jobs"] == [] and len(json.loads(empty.stdout)["empty_entries"]) == 1


def test_a_repeated_entry_is_a_warning_for_the_entries_a_change_adds_only() -> None:
    """InferenceX accepts repeated entries (a re-run PR says "Update image" again); refusing them also made a pair
    already in history block every later change, since history cannot be edited."""
    log = validate_changelog(entry() + "\n" + entry(), "cl.yaml", recipe_keys=KEYS)
    assert [(f.rule, f.line, f.severity.value) for f in log.findings] == [("changelog.duplicate-entry", 6, "warning")]
    assert log.ok
    history = entry() + "\n" + entry()
    later = validate_changelog(history + "\n" + entry("[other-key]"), "cl.yaml", recipe_keys=KEYS, base=history)
    assert later.findings == [] and later.ok


def test_appended_lines_that_continue_the_last_history_entry_are_refused() -> None:
    """Indented lines after the blank line are read by YAML as part of the base's last entry: a change to published
    history (here its scenario-type) that passed the byte check."""
    base = entry()
    sneaky = base + "\n  scenario-type:\n    - fixed-seq-len\n"
    assert ("changelog.history", 6) in rules(sneaky, base=base)
    assert rules(base + "\n" + entry("[other-key]"), base=base) == []
