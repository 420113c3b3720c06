"""Malformed changelogs a benchmark engineer writes at 2 a.m.: each refused with its file, line, field and fix, before
InferenceX's CI would refuse (or misread) them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.changes.changelog import load_changelog, validate_changelog
from llmsweep.cli.main import main

ENTRY = "- config-keys:{anchor}\n  - {key}\n  description:\n  - {text}\n  pr-link: XXX\n"


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def test_an_appended_entry_aliasing_an_anchor_of_history_is_refused_at_its_line() -> None:
    """InferenceX's CI parses only the lines a change adds, where `*keys` names no anchor ("found undefined alias"):
    the pull request's sweep failed although `llmsweep changelog --base` passed it."""
    base = ENTRY.format(anchor=" &keys", key="a", text="first")
    head = base + "\n" + ENTRY.format(anchor="", key="b", text="second").replace("  - b\n", "").replace(
        "- config-keys:", "- config-keys: *keys")
    log = validate_changelog(head, "perf-changelog.yaml", recipe_keys=["a", "b"], base=base)
    errors = [f for f in log.findings if f.is_error]
    assert [(f.rule, f.file, f.line) for f in errors] == [("changelog.appended-yaml", "perf-changelog.yaml", 7)]
    assert "undefined alias 'keys'" in errors[0].message and "without aliases" in (errors[0].fix or "")
    # an anchor and its alias both among the added lines read there too: accepted, as InferenceX accepts them
    own = head.replace("- config-keys: *keys\n", "- config-keys: &mine\n  - b\n")
    own += "\n" + ENTRY.format(anchor="", key="", text="third").replace("  - \n", "").replace(
        "- config-keys:", "- config-keys: *mine")
    assert validate_changelog(own, "perf-changelog.yaml", recipe_keys=["a", "b"], base=base).ok
    # without a base every line is new and the file parses as a whole: nothing to say
    assert validate_changelog(head, "perf-changelog.yaml", recipe_keys=["a", "b"]).ok


def test_a_byte_order_mark_is_named_as_one_where_it_stands(tmp_path: Path) -> None:
    """An editor that saves "UTF-8 with BOM" put U+FEFF before the first `- config-keys:`: the only error said to
    begin every entry with `- config-keys:` at column 0, which the line visibly did."""
    path = tmp_path / "perf-changelog.yaml"
    entry = ENTRY.format(anchor="", key="a", text="x")
    for text, line in ((f"\ufeff{entry}", 1), (f"{entry}\n\ufeff{entry}", 7)):  # a file saved, or pasted, with one
        path.write_bytes(text.encode("utf-8"))
        errors = [f for f in load_changelog(path, recipe_keys=["a"]).findings if f.is_error]
        bom = [f for f in errors if "byte-order mark" in f.message]
        assert [(f.rule, f.file, f.line) for f in bom] == [("changelog.bytes", str(path), line)], errors
        assert "without a byte-order mark" in (bom[0].fix or "")
        assert errors == bom  # said once: not again as an entry that does not begin `- config-keys:`


def test_changelog_run_where_no_recipes_are_says_so_not_that_every_key_is_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], shared_dir: Path) -> None:
    """Run from a folder without `recipes/` (InferenceX keeps its master configs elsewhere), every config key was
    "not found in the recipes": a changelog error for a changelog that was right."""
    (tmp_path / "perf-changelog.yaml").write_text(ENTRY.format(anchor="", key="dsr1-fp4-mi355x-sglang", text="x"))
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(capsys, "changelog")
    assert code == 2, (out, err)
    assert "no recipe files to check perf-changelog.yaml's config keys against" in err and "not found" not in err
    assert "`llmsweep changelog perf-changelog.yaml FILE...`" in err
    # named, InferenceX's own master selects the entry's jobs
    reference = shared_dir / "reference" / "inferencex"
    code, out, err = _main(capsys, "changelog", "perf-changelog.yaml", str(reference / "amd-master.yaml"),
                           "--runner-config", str(reference / "runners.yaml"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ok"] and {j["recipe_key"] for j in doc["jobs"]} == {"dsr1-fp4-mi355x-sglang"}
    assert sorted(j["conc"] for j in doc["jobs"] if j["kind"] == "throughput") == [4, 4, 8, 8, 16, 16, 32, 32, 64, 64]


def _history(n: int) -> list[str]:
    return [ENTRY.format(anchor="", key=f"k{i}", text=f"why {i}").replace(
        "XXX", f"https://github.com/SemiAnalysisAI/InferenceX/pull/{i + 1}") for i in range(n)]


def test_an_entry_pasted_inside_history_is_one_error_at_its_place() -> None:
    """A new entry pasted above the end (or put there by a merge): every later line of the base read as changed —
    hundreds of errors, in a real changelog thousands, each naming a line nobody touched ("'- k3' → '- k999'")."""
    entries = _history(200)
    base = "\n".join(entries)
    new = ENTRY.format(anchor="", key="k999", text="new")
    head = "\n".join([*entries[:3], new, *entries[3:]])
    errors = [f for f in validate_changelog(head, "perf-changelog.yaml", base=base).findings if f.is_error]
    assert [(f.rule, f.line) for f in errors] == [("changelog.history", 19)], [f.render() for f in errors]
    assert "lines 19-24 are inserted inside history, before line 19 of the base (history's entry [3])" in \
        errors[0].message and "move those lines to the end of the file" in (errors[0].fix or "")
    # the same entry at the end is a valid change
    assert validate_changelog(base + "\n" + new, "perf-changelog.yaml", base=base).ok


def test_an_entry_deleted_from_history_is_named_where_it_was_not_at_the_end_of_the_file() -> None:
    entries = _history(200)
    base = "\n".join(entries)
    errors = [f for f in validate_changelog("\n".join([*entries[:3], *entries[4:]]), "perf-changelog.yaml",
                                            base=base).findings if f.is_error]
    assert [(f.rule, f.line) for f in errors] == [("changelog.history", 19)], [f.render() for f in errors]
    assert "lines 19-24 of the base are deleted here (history's entry [3])" in errors[0].message
    # one line edited while entries are appended stays the edit of that line
    edited = base.replace("  - why 3\n", "  - because 3\n") + "\n" + entries[3]
    errors = [f for f in validate_changelog(edited, "perf-changelog.yaml", base=base).findings if f.is_error]
    assert [(f.rule, f.line) for f in errors] == [("changelog.history", 22)] and "changed" in errors[0].message
