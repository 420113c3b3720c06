"""A pull request's changelog made ready to merge: its XXX links set to its own link (`canonicalize`), and main's
changelog merged into it when both appended entries (`resolve-conflict`, the index stages as text here; the real
`git merge` is tests/integration/test_changelog_resolve_conflict.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from changes_scratch import commit, scratch_repo
from click.testing import CliRunner

from llmsweep.changes.changelog import validate_changelog
from llmsweep.changes.changelog_merge import canonicalize, resolve_conflict
from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError

PULL = "https://github.com/SemiAnalysisAI/InferenceX/pull/"
PR = 42
OWN = PULL + "42"


def entry(keys: str = "[a]", link: str = PULL + "1", why: str = "why") -> str:
    return f"- config-keys: {keys}\n  description:\n  - {why}\n  pr-link: {link}\n"


HISTORY = entry() + "\n" + entry("[b]", link="XXX")  # history keeps the links it was written with


def valid_for_pr(text: str, base: str) -> bool:
    return validate_changelog(text, "cl.yaml", base=base, pr_number=PR, final_links=True).ok


# ------------------------------------------------------------------------------------------------ canonicalize


def test_canonicalize_sets_only_the_new_entries_placeholders_and_keeps_every_other_byte() -> None:
    head = (HISTORY + "\n" + entry("[c]", link="XXX") + "\n" + entry("[d]", link=PULL + "XXX")
            + "\n" + entry("[e]", link="XXX  # filled in at merge"))
    result, changes = canonicalize(head, HISTORY, PR, "cl.yaml")
    expected = (HISTORY + "\n" + entry("[c]", link=OWN) + "\n" + entry("[d]", link=OWN)
                + "\n" + entry("[e]", link=OWN + "  # filled in at merge"))
    assert result == expected  # history's XXX stays; the comment after the link stays
    assert [(c.line, c.old, c.new) for c in changes] == [(14, "XXX", OWN), (19, PULL + "XXX", OWN), (24, "XXX", OWN)]
    assert valid_for_pr(result, HISTORY)
    again, none = canonicalize(result, HISTORY, PR, "cl.yaml")
    assert again == result and none == []


def test_canonicalize_keeps_an_entry_that_already_links_this_pull_request() -> None:
    head = HISTORY + "\n" + entry("[c]", link=OWN) + "\n" + entry("[d]", link="XXX")
    result, changes = canonicalize(head, HISTORY, PR, "cl.yaml")
    assert result == HISTORY + "\n" + entry("[c]", link=OWN) + "\n" + entry("[d]", link=OWN)
    assert [c.line for c in changes] == [19]


@pytest.mark.parametrize(("head", "line", "words"), [
    (HISTORY.replace("- why", "- because", 1) + "\n" + entry("[c]", link="XXX"), 3, "line 3 of the base"),
    (HISTORY + "\n" + entry("[c]", link=PULL + "7"), 14, "links pull request #7, not this one (#42)"),
    (HISTORY + entry("[c]", link="XXX"), 10, "exactly one blank line"),
])
def test_canonicalize_refuses_a_change_that_does_not_validate(head: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        canonicalize(head, HISTORY, PR, "cl.yaml")
    [finding] = caught.value.findings
    assert (finding.file, finding.line) == ("cl.yaml", line) and words in finding.message
    assert finding.fix


def test_canonicalize_refuses_a_link_it_cannot_set_on_one_line() -> None:
    head = HISTORY + "\n" + entry("[c]", link="XXX").replace("pr-link: XXX", "pr-link:\n    XXX")
    with pytest.raises(ConfigError, match=r"cl\.yaml:14: \[2\]\.pr-link: .* not written on one") as caught:
        canonicalize(head, HISTORY, PR, "cl.yaml")
    assert caught.value.fix is not None and "pr-link: XXX" in caught.value.fix


def test_cli_canonicalize_writes_in_place_once_and_refuses_without_writing(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _, _ = scratch_repo(tmp_path)
    changelog = repo / "perf-changelog.yaml"
    changelog.write_text(entry("[chg-sim]"))
    base = commit(repo, "changelog")
    changelog.write_text(entry("[chg-sim]") + "\n" + entry("[chg-sim]", link="XXX", why="new image"))
    monkeypatch.chdir(repo)
    run = CliRunner().invoke(cli, ["changelog", "canonicalize", "--base", base, "--pr-number", "42", "--json"])
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["links"] == [{"line": 9, "from": "XXX", "to": OWN}]
    assert changelog.read_text() == entry("[chg-sim]") + "\n" + entry("[chg-sim]", link=OWN, why="new image")
    checked = CliRunner().invoke(cli, ["changelog", "--base", base, "--pr-number", "42", "--final-links"])
    assert checked.exit_code == 0, checked.output
    again = CliRunner().invoke(cli, ["changelog", "canonicalize", "--base", base, "--pr-number", "42"])
    assert again.exit_code == 0 and "nothing to set" in again.stderr
    bad = entry("[chg-sim]") + entry("[chg-sim]", link="XXX")  # no blank line before the new entry
    changelog.write_text(bad)
    refused = CliRunner().invoke(cli, ["changelog", "canonicalize", "--base", base, "--pr-number", "42"])
    assert isinstance(refused.exception, ConfigError) and changelog.read_text() == bad
    assert "perf-changelog.yaml:5" in str(refused.exception) and "blank line" in str(refused.exception)


# ------------------------------------------------------------------------------------------------ --pr-number


def test_check_with_pr_number_refuses_a_link_to_another_pull_request(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _, _ = scratch_repo(tmp_path)
    changelog = repo / "perf-changelog.yaml"
    changelog.write_text(entry("[chg-sim]"))
    base = commit(repo, "changelog")
    changelog.write_text(entry("[chg-sim]") + "\n" + entry("[chg-sim]", link=PULL + "7", why="new image"))
    monkeypatch.chdir(repo)
    assert CliRunner().invoke(cli, ["changelog", "--base", base]).exit_code == 0  # without it: any canonical link
    other = CliRunner().invoke(cli, ["changelog", "--base", base, "--pr-number", "42"])
    assert isinstance(other.exception, ConfigError)
    assert "perf-changelog.yaml:9: error [changelog.pr-link] [1].pr-link" in other.stderr
    assert "links pull request #7, not this one (#42)" in other.stderr and f"fix: write {OWN}" in other.stderr
    for ok in (OWN, "XXX"):
        changelog.write_text(entry("[chg-sim]") + "\n" + entry("[chg-sim]", link=ok, why="new image"))
        assert CliRunner().invoke(cli, ["changelog", "--base", base, "--pr-number", "42"]).exit_code == 0, ok


def test_check_with_pr_number_needs_a_base_to_say_which_entries_are_new(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # without --base every entry would count as new, and each history entry links some other pull request
    (tmp_path / "perf-changelog.yaml").write_text(entry() + "\n" + entry("[b]", link=PULL + "7"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["changelog", "--pr-number", "42"])
    assert isinstance(result.exception, ConfigError)
    assert "no --base" in str(result.exception) and "--base origin/main" in (result.exception.fix or "")


def test_a_link_that_spells_this_pull_requests_number_with_leading_zeros_is_told_how_to_write_it() -> None:
    log = validate_changelog(HISTORY + "\n" + entry("[c]", link=PULL + "042"), "cl.yaml", base=HISTORY,
                             pr_number=PR)
    [finding] = [f for f in log.findings if f.is_error]
    assert "spells this pull request's number as 042" in finding.message and "not this one" not in finding.message
    assert OWN in (finding.fix or "")


def test_canonicalize_sets_a_placeholder_written_with_trailing_spaces() -> None:
    head = HISTORY + "\n" + entry("[c]", link="XXX   ")
    assert validate_changelog(head, "cl.yaml", base=HISTORY, pr_number=PR).ok
    result, changes = canonicalize(head, HISTORY, PR, "cl.yaml")
    assert result == HISTORY + "\n" + entry("[c]", link=OWN + "   ") and [c.new for c in changes] == [OWN]


# ------------------------------------------------------------------------------------------------ resolve-conflict


BASE = HISTORY
MAIN = BASE + "\n" + entry("[m]", link=PULL + "40", why="main's change")


def test_resolve_keeps_mains_bytes_and_appends_the_pull_requests_entries_with_its_link() -> None:
    ours = BASE + "\n" + entry("[c]", link="XXX") + "\n" + entry("[d]", link=OWN)
    res = resolve_conflict(BASE, ours, MAIN, PR, "cl.yaml")
    assert res.text == MAIN + "\n" + entry("[c]", link=OWN) + "\n" + entry("[d]", link=OWN)
    assert res.text.startswith(MAIN) and res.appended == [16, 21] and res.dropped == []
    assert [(c.line, c.old) for c in res.links] == [(19, "XXX")] and res.main_entries == 3
    assert valid_for_pr(res.text, MAIN)


def test_resolve_drops_the_entries_main_already_has_whatever_their_link() -> None:
    landed = entry("[c]", why="landed first")
    main = MAIN + "\n" + landed.replace(PULL + "1", OWN)
    ours = BASE + "\n" + landed.replace(PULL + "1", "XXX") + "\n" + entry("[d]", link="XXX")
    res = resolve_conflict(BASE, ours, main, PR, "cl.yaml")
    assert res.text == main + "\n" + entry("[d]", link=OWN)
    assert res.dropped == [11] and valid_for_pr(res.text, main)


def test_resolve_keeps_an_entry_that_repeats_older_history() -> None:
    """A re-run repeats an entry of history (the validator accepts it): it is the pull request's, not main's."""
    rerun = entry(link="XXX")  # the same keys and description as the first entry of history
    res = resolve_conflict(BASE, BASE + "\n" + rerun, MAIN, PR, "cl.yaml")
    assert res.text == MAIN + "\n" + entry(link=OWN)


def test_resolve_with_nothing_left_to_append_is_an_error() -> None:
    ours = BASE + "\n" + entry("[m]", link="XXX", why="main's change")
    with pytest.raises(ConfigError, match=r":2:cl\.yaml: every entry the pull request appends \(line 11\) is already "
                                          r"on main") as caught:
        resolve_conflict(BASE, ours, MAIN, PR, "cl.yaml")
    assert caught.value.fix is not None and "git checkout --theirs -- cl.yaml" in caught.value.fix
    with pytest.raises(ConfigError, match="appends no entry"):
        resolve_conflict(BASE, BASE, MAIN, PR, "cl.yaml")


def test_resolve_refuses_a_pull_request_side_that_links_another_pull_request() -> None:
    ours = BASE + "\n" + entry("[c]", link=PULL + "7")
    with pytest.raises(ConfigError, match="stage 2") as caught:
        resolve_conflict(BASE, ours, MAIN, PR, "cl.yaml")
    [finding] = caught.value.findings
    assert (finding.file, finding.line, finding.path) == (":2:cl.yaml", 14, "[2].pr-link")
    assert "#7, not this one (#42)" in finding.message


def test_resolve_appends_to_a_changelog_new_on_both_sides() -> None:
    main = entry("[m]", link=PULL + "40")
    res = resolve_conflict("", entry("[c]", link="XXX"), main, PR, "cl.yaml")
    assert res.text == main + "\n" + entry("[c]", link=OWN)
