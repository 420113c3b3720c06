"""InferenceX's stricter changelog rules (wave-2 spec §2.1, core spec §3.1-§3.2): history changes only by canonical
pr-link corrections that change the value, new entries link to InferenceX's pull requests, exactly one blank line
separates every appended entry, and append-only takes no eval field. Each refusal is a located finding."""

from __future__ import annotations

from llmsweep.changes.changelog import validate_changelog
from llmsweep.findings import Finding

PULL = "https://github.com/SemiAnalysisAI/InferenceX/pull/"
LINK = PULL + "1"


def entry(keys: str = "[a]", link: str = LINK, extra: str = "") -> str:
    return f"- config-keys: {keys}\n  description:\n  - why\n  pr-link: {link}\n{extra}"


BASE = entry()


def found(text: str, base: str | None = BASE, final_links: bool = False) -> list[Finding]:
    return validate_changelog(text, "cl.yaml", base=base, final_links=final_links).findings


def rules(text: str, base: str | None = BASE, final_links: bool = False) -> list[tuple[str, int | None]]:
    return [(f.rule, f.line) for f in found(text, base, final_links)]


def test_history_changes_only_by_canonical_pr_link_corrections() -> None:
    """A correction must write InferenceX's canonical link; another repository's link or a placeholder is refused."""
    for link in ("https://github.com/acme/recipes/pull/77", "XXX", PULL + "XXX", PULL + "77/", "http://github.com/"
                 "SemiAnalysisAI/InferenceX/pull/77"):
        assert rules(BASE.replace(LINK, link)) == [("changelog.history", 4)], link
    [finding] = found(BASE.replace(LINK, "https://github.com/acme/recipes/pull/77"))
    assert (finding.file, finding.line, finding.path) == ("cl.yaml", 4, "[0].pr-link")
    assert "canonical" in finding.message and "acme/recipes/pull/77" in finding.message
    assert finding.fix is not None and PULL + "NUMBER" in finding.fix
    # what InferenceX allows: a placeholder, or the repository's old name, or a wrong number made canonical
    for old in ("XXX", PULL + "XXX", "https://github.com/NVIDIA/InferenceMAX/pull/1722", PULL + "2"):
        assert rules(entry(link=LINK), base=entry(link=old)) == [], old
    # corrections stand alone, and a refused correction in a base of several entries names its own entry
    two = BASE + "\n" + entry("[b]", link="XXX")
    assert rules(BASE + "\n" + entry("[b]", link=PULL + "5"), base=two) == []
    [later] = found(BASE + "\n" + entry("[b]", link="https://github.com/acme/recipes/pull/5"), base=two)
    assert (later.rule, later.line, later.path) == ("changelog.history", 9, "[1].pr-link")


def test_an_edit_that_keeps_the_pr_link_value_is_refused() -> None:
    """Quoting an unchanged link, or adding a comment, changes bytes of history but not the value: no correction."""
    for line in (f'  pr-link: "{LINK}"', f"  pr-link: '{LINK}'", f"  pr-link: {LINK}  # the PR", f"  pr-link:  {LINK}"):
        edited = BASE.replace(f"  pr-link: {LINK}", line)
        [finding] = found(edited)
        assert (finding.rule, finding.line, finding.path) == ("changelog.history", 4, "[0].pr-link"), line
        assert "without changing its value" in finding.message
        assert finding.fix is not None and "restore" in finding.fix


def test_appended_entries_are_separated_by_exactly_one_blank_line() -> None:
    """Not only after the base: between every two appended entries (and in a changelog new in this change)."""
    good = BASE + "\n" + entry("[b]") + "\n" + entry("[c]")
    assert rules(good) == []
    assert rules(BASE + "\n" + entry("[b]") + entry("[c]")) == [("changelog.separator", 10)]
    assert rules(BASE + "\n" + entry("[b]") + "\n\n" + entry("[c]")) == [("changelog.separator", 10)]
    assert rules(BASE + "\n" + entry("[b]") + "\n" + entry("[c]") + "\n\n\n" + entry("[d]")) == [
        ("changelog.separator", 15)]
    [finding] = found(BASE + "\n" + entry("[b]") + "\n\n" + entry("[c]"))
    assert finding.file == "cl.yaml" and "not 2" in finding.message and "line 12" in finding.message
    assert finding.fix == "leave one empty line between entries"
    assert rules(entry() + entry("[b]"), base="") == [("changelog.separator", 5)]
    assert rules(entry() + "\n" + entry("[b]"), base="") == []


def test_new_entries_link_to_inferencex_pull_requests() -> None:
    """`https://github.com/SemiAnalysisAI/InferenceX/pull/<n>`, full-matched; `XXX` (either spelling) until merged."""
    for link in ("https://github.com/acme/recipes/pull/3", "https://github.com/semianalysisai/inferencex/pull/3",
                 PULL + "3/files", "http://github.com/SemiAnalysisAI/InferenceX/pull/3"):
        assert rules(BASE + "\n" + entry("[b]", link=link)) == [("changelog.pr-link", 9)], link
    [finding] = found(BASE + "\n" + entry("[b]", link="https://github.com/acme/recipes/pull/3"))
    assert (finding.file, finding.line, finding.path) == ("cl.yaml", 9, "[1].pr-link")
    assert finding.fix is not None and PULL + "NUMBER" in finding.fix
    for placeholder in ("XXX", PULL + "XXX"):
        assert rules(BASE + "\n" + entry("[b]", link=placeholder)) == [], placeholder
        assert rules(BASE + "\n" + entry("[b]", link=placeholder), final_links=True) == [("changelog.pr-link", 9)]
    # history keeps the links it was written with (InferenceX's own holds `XXX` and its old repository name)
    history = entry(link="https://github.com/NVIDIA/InferenceMAX/pull/1722") + "\n" + entry("[b]", link="XXX")
    assert rules(history + "\n" + entry("[c]", link=PULL + "9"), base=history, final_links=True) == []
    assert rules(entry(link="https://github.com/acme/recipes/pull/3"), base=None) == [("changelog.pr-link", 4)]


def test_append_only_refuses_eval_fields() -> None:
    """Core spec §3.1: append-only is incompatible with every eval field, `eval-min-prefill-ep` included."""
    extra = "  append-only: true\n  eval-min-prefill-ep: 2\n"
    assert rules(BASE + "\n" + entry("[b]", extra=extra)) == [("changelog.append-only", 10)]
    [finding] = found(BASE + "\n" + entry("[b]", extra=extra))
    assert (finding.file, finding.path) == ("cl.yaml", "[1].append-only")
    assert "eval-min-prefill-ep" in finding.message and finding.fix == "drop eval-min-prefill-ep or append-only"
    both = "  append-only: true\n  evals-only: true\n  eval-min-prefill-ep: 2\n"
    [finding] = found(entry(extra=both), base=None)
    assert (finding.rule, finding.line) == ("changelog.append-only", 5)
    assert "evals-only, eval-min-prefill-ep" in finding.message
    assert rules(BASE + "\n" + entry("[b]", extra="  append-only: true\n")) == []
    assert rules(BASE + "\n" + entry("[b]", extra="  eval-min-prefill-ep: 2\n")) == []


def test_on_a_pull_request_new_entries_link_to_it_or_hold_the_placeholder() -> None:
    """`pr_number`: InferenceX's PR gate takes that pull request's own link or `XXX`; a canonical link to another pull
    request (copied from an older entry) is refused. History keeps whatever links it has."""
    def on_pr(link: str, final_links: bool = False) -> list[Finding]:
        return validate_changelog(BASE + "\n" + entry("[b]", link=link), "cl.yaml", base=BASE, pr_number=42,
                                  final_links=final_links).findings

    for ok in (PULL + "42", "XXX", PULL + "XXX"):
        assert on_pr(ok) == [], ok
    [other] = on_pr(PULL + "41")
    assert (other.rule, other.file, other.line, other.path) == ("changelog.pr-link", "cl.yaml", 9, "[1].pr-link")
    assert PULL + "41" in other.message and "#41, not this one (#42)" in other.message
    assert other.fix is not None and other.fix.startswith(f"write {PULL}42")
    [foreign] = on_pr("https://github.com/acme/recipes/pull/42")
    assert foreign.fix is not None and f"{PULL}42" in foreign.fix
    [placeholder] = on_pr("XXX", final_links=True)
    assert placeholder.fix is not None and f"{PULL}42" in placeholder.fix
    history = entry(link=PULL + "41")  # base entries are not this pull request's
    assert validate_changelog(history + "\n" + entry("[b]", link=PULL + "42"), "cl.yaml", base=history,
                              pr_number=42).findings == []


def test_a_pull_request_number_is_any_run_of_ascii_digits_as_in_inferencex() -> None:
    """The spec's `.../pull/<n>` full match: InferenceX takes `pull/0` and `pull/007`; other scripts' digits are not
    a number GitHub writes in a link."""
    for link in (PULL + "0", PULL + "007"):
        assert rules(BASE + "\n" + entry("[b]", link=link)) == [], link
        assert rules(entry(link=link), base=entry(link="XXX")) == [], link  # a correction of history
    assert rules(BASE + "\n" + entry("[b]", link=PULL + "\u0661\u0662")) == [("changelog.pr-link", 9)]


def test_findings_are_reported_in_file_order() -> None:
    # the missing final newline (line 9) is found by the byte check, before the link of the entry at line 4 is read
    text = entry(link="https://example.org/pull/2") + "\n" + entry("[b]").rstrip("\n")
    assert rules(text, base=None) == [("changelog.pr-link", 4), ("changelog.final-newline", 9)]
