"""InferenceX's `perf-changelog.yaml`: validated with file:line findings, and turned into the jobs it selects.

Format (InferenceX core spec §3.1): a YAML list of entries, each `config-keys` (recipe keys, `*` wildcards), a
`description` (list of lines), a `pr-link`, and the optional `evals-only`, `all-evals`, `append-only`,
`eval-min-prefill-ep` and `scenario-type`. The file is append-only history: a pull request adds entries at the end,
separated by exactly one blank line.

Validation (:func:`validate_changelog`) reports every problem as a `Finding` with its file and line, as the recipe
loader does: bytes (UTF-8, no CR/tab/NUL, one final newline), YAML syntax and duplicate keys, the root a list, one
`- config-keys:` line per entry, each entry's fields (`append-only` with no eval field), the new entries' links
(InferenceX's canonical pull-request link — on a pull request, that pull request's own — or the `XXX` placeholder
until merged) and config keys (a wildcard must match), duplicate entries, and — against a base version — that history
is unchanged and the appended bytes follow the base, exactly one blank line before and between the new entries,
and are YAML on their own (InferenceX's CI parses only the added lines: no alias to an anchor of history).
History may change only by pr-link corrections (wave-2 spec §2.1): each sets a base entry's link to a canonical one it
did not hold, on `  pr-link:` lines alone, in a change that appends no entry. Putting a pull request's link in its
entries, and merging main's changelog into a pull request's, are :mod:`llmsweep.changes.changelog_merge`.

Selection (:func:`select_jobs`) follows `utils/process_changelog.py` (§3.3): entries with `all-evals` first;
throughput jobs unless the entry (or the caller) suppresses them; eval jobs (all evals for `all-evals`), filtered by
`eval-min-prefill-ep`; each (recipe, scenario) generated once; `trim_conc` keeps each curve's lowest concurrency.
Append-only entries (§3.4) select only the points added to existing curves since a base revision
(:func:`append_only_delta`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmsweep.catalog.fleet import FleetCatalog, default_fleet
from llmsweep.errors import ConfigError, undecodable_line
from llmsweep.findings import Finding, Severity
from llmsweep.plan import EvalOptions, Job, test_config
from llmsweep.plan.slices import slice_concurrencies
from llmsweep.spec.components import RECIPE_SCENARIOS, RecipeScenario
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.source import SourceMap, YamlSyntaxError, parse_yaml, render_path
from llmsweep.spec.validation_findings import findings_from_validation_error
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import count_of

ENTRY_MARK = "- config-keys:"
PULL_URL = "https://github.com/SemiAnalysisAI/InferenceX/pull/"
CANONICAL_PR_LINK = re.compile(re.escape(PULL_URL) + r"([0-9]+)")
"""InferenceX's pull-request link (wave-2 spec §2.1: `.../pull/<n>`, full-matched; the number is any run of ASCII
digits, as InferenceX accepts it): what a new entry's `pr-link` holds once merged, and the only value a correction of
history may write."""
PR_LINK_PLACEHOLDERS = frozenset({"XXX", "https://github.com/SemiAnalysisAI/InferenceX/pull/XXX"})
"""What a pull request writes before it has a number (InferenceX's two spellings; refused with `final_links`)."""
CANONICAL_LINK_FORM = PULL_URL + "NUMBER"


def pr_link(pr_number: int) -> str:
    """The canonical link of pull request `pr_number`."""
    return f"{PULL_URL}{pr_number}"


class ChangelogEntry(BaseModel):
    """One entry of `perf-changelog.yaml`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    config_keys: list[str] = Field(alias="config-keys", min_length=1,
                                   description="Recipe keys the entry selects; `*` matches any run of characters.")
    description: list[str] = Field(min_length=1, description="What changed and why (one item per line).")
    pr_link: str = Field(alias="pr-link", description="The pull request: https://github.com/SemiAnalysisAI/"
                         "InferenceX/pull/N (`XXX` until it has a number).")
    evals_only: bool = Field(default=False, alias="evals-only", description="Run evals only, no throughput.")
    all_evals: bool = Field(default=False, alias="all-evals",
                            description="Evals on every fixed-seq-len job, and no throughput.")
    append_only: bool = Field(default=False, alias="append-only",
                              description="Run only points added to existing curves.")
    eval_min_prefill_ep: int | None = Field(default=None, alias="eval-min-prefill-ep", ge=1,
                                            description="Drop multi-node eval jobs whose prefill EP is below this.")
    scenario_type: list[RecipeScenario] | None = Field(default=None, alias="scenario-type", min_length=1,
                                                     description="Restrict the entry to these scenarios.")

    def identity(self) -> str:
        """The entry without its link, as canonical JSON: two entries equal here are duplicates."""
        doc = self.model_dump(mode="json", by_alias=True, exclude={"pr_link"})
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))


@dataclass
class Changelog:
    """A validated (or not) changelog: its entries with their lines, the new ones, and every finding."""

    file: str
    entries: list[ChangelogEntry] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    added_from: int = 0
    """Index of the first entry not in the base (0 without a base: every entry counts as added)."""
    findings: list[Finding] = field(default_factory=list)

    @property
    def added(self) -> list[ChangelogEntry]:
        return self.entries[self.added_from:]

    @property
    def ok(self) -> bool:
        return not any(f.is_error for f in self.findings)

    def raise_on_error(self) -> Changelog:
        errors = [f for f in self.findings if f.is_error]
        if errors:
            listing = "\n".join(f.render() for f in errors)
            raise ConfigError(f"{self.file}: {count_of(len(errors), 'changelog error')}:\n{listing}",
                              fix="fix the lines named above", findings=errors)
        return self


def _error(rule: str, file: str, line: int | None, message: str, fix: str, path: str | None = None) -> Finding:
    return Finding(rule=f"changelog.{rule}", severity=Severity.ERROR, file=file, line=line, path=path,
                   message=message, fix=fix)


def validate_changelog(text: str, file: str = "perf-changelog.yaml", *, recipe_keys: Sequence[str] | None = None,
                       base: str | None = None, final_links: bool = False,
                       pr_number: int | None = None) -> Changelog:
    """Check a changelog's text; `recipe_keys` checks that config keys exist, `base` that history is append-only,
    `final_links` refuses the `XXX` placeholder (a merged changelog), `pr_number` that the new entries link to that
    pull request (a canonical link to another one is refused)."""
    log = Changelog(file)
    _check_bytes(text, file, log.findings)
    # a byte-order mark is one `changelog.bytes` error at its line (above); the entries are read without it, so it is
    # not reported again as the YAML reader's (`spec.source.parse_yaml` refuses one past the file's start)
    read = text.replace("\ufeff", "")
    try:
        doc = parse_yaml(read, file)
    except YamlSyntaxError as exc:
        log.findings.append(_error("yaml-syntax", file, exc.line, f"YAML syntax error: {exc.problem}",
                                   exc.fix or "fix the YAML at that line"))
        return log
    for dup in doc.duplicates:
        log.findings.append(_error("duplicate-key", file, dup.line, f"key `{dup.path[-1]}` is written twice in one "
                                   f"entry (first at line {dup.first_line})", "delete one of them",
                                   render_path(dup.path)))
    data = [] if doc.data is None else doc.data
    if not isinstance(data, list):
        log.findings.append(_error("not-list", file, 1, f"the changelog must be a YAML list of entries, got "
                                   f"{type(data).__name__}", f"start each entry with `{ENTRY_MARK}`"))
        return log
    # the lines as the entries were read, without a byte-order mark: one at an entry's start is its `changelog.bytes`
    # error alone, not a second one that the entry does not begin `- config-keys:`
    lines = read.splitlines()
    marks = sum(1 for line in lines if line.startswith(ENTRY_MARK))
    if marks != len(data):
        # located at the first entry that does not begin so (`-  config-keys:`, another field first), else at the
        # first such line that begins no entry (an entry written inside a string)
        starts = [doc.source.line_of((index,)) for index in range(len(data))]
        off = next((n for n in starts if n is not None and not lines[n - 1].startswith(ENTRY_MARK)), None)
        if off is None:
            off = next((n for n, line in enumerate(lines, start=1) if line.startswith(ENTRY_MARK)
                        and n not in starts), None)
        verb = "starts" if marks == 1 else "start"
        log.findings.append(_error("entry-lines", file, off, f"{count_of(len(data), 'entry', 'entries')} but "
                                   f"{count_of(marks, 'line')} {verb} with `{ENTRY_MARK}`",
                                   f"begin every entry with `{ENTRY_MARK}` at column 0"))
    seen: dict[str, int] = {}
    placed: list[tuple[int, ChangelogEntry]] = []
    repeats: list[tuple[int, int | None, int]] = []
    for index, raw in enumerate(data):
        line = doc.source.line_of((index,))
        entry = _entry(index, raw, doc.source, log.findings)
        if entry is None:
            continue
        log.entries.append(entry)
        log.lines.append(line or 0)
        placed.append((index, entry))
        _check_entry(entry, index, doc.source, log.findings)
        ident = entry.identity()
        if ident in seen:
            repeats.append((index, line, seen[ident]))
        else:
            seen[ident] = line or 0
    if base is not None:
        log.added_from = _check_append_only(base, text, file, log.findings)
    for index, line, first in repeats:  # InferenceX accepts repeats (a re-run PR): said, for this change's only
        if index >= log.added_from:
            log.findings.append(Finding(rule="changelog.duplicate-entry", severity=Severity.WARNING, file=file,
                                        line=line, path=f"[{index}]",
                                        message=f"entry {index} repeats the entry at line {first} (same keys, "
                                                "description and flags)",
                                        fix="say what this run changes in its description, or drop the entry if "
                                            "it was added twice by mistake"))
    # InferenceX checks the links and keys of the added entries only: history holds links of other forms (`XXX`, the
    # repository's old name) and may name recipes deleted since
    for index, entry in placed:
        if index >= log.added_from:
            _check_link(entry, index, doc.source, final_links, pr_number, log.findings)
            if recipe_keys is not None:
                _check_keys(entry, index, doc.source, recipe_keys, log.findings)
    log.findings.sort(key=lambda f: f.line or 0)  # in file order (stable: a line's findings as they were found)
    return log


_LAYOUT_FIX = "use LF line ends and spaces for indentation"


def _check_bytes(text: str, file: str, findings: list[Finding]) -> None:
    for number, line in enumerate(text.split("\n"), start=1):
        for char, name, fix in (("\r", "a carriage return (CRLF line end)", _LAYOUT_FIX), ("\t", "a tab", _LAYOUT_FIX),
                                ("\0", "a NUL byte", _LAYOUT_FIX),
                                ("\ufeff", "a byte-order mark (U+FEFF, invisible in most editors)",
                                 "save the file as UTF-8 without a byte-order mark (BOM)")):
            if char in line:
                findings.append(_error("bytes", file, number, f"line holds {name}", fix))
    if text and not text.endswith("\n"):
        findings.append(_error("final-newline", file, text.count("\n") + 1, "the file does not end with a newline",
                               "end the last line with one newline"))


def _entry(index: int, raw: Any, source: SourceMap, findings: list[Finding]) -> ChangelogEntry | None:
    if not isinstance(raw, dict):
        findings.append(_error("not-mapping", source.file, source.line_of((index,)),
                               f"entry {index} must be a mapping (config-keys, description, pr-link, ...)",
                               f"write the entry as `{ENTRY_MARK} [...]` with its fields indented under it"))
        return None
    try:
        return ChangelogEntry.model_validate(raw)
    except ValidationError as exc:
        found = findings_from_validation_error(exc, ChangelogEntry, raw, (index,), source)
        findings.extend(f.model_copy(update={"rule": f.rule.replace("schema.", "changelog.", 1)}) for f in found)
        return None


def _check_link(entry: ChangelogEntry, index: int, source: SourceMap, final_links: bool, pr_number: int | None,
                findings: list[Finding]) -> None:
    """A new entry's link: InferenceX's canonical form — on a pull request (`pr_number`) that pull request's own —
    or a placeholder until merged (`final_links`)."""
    line = source.line_of((index, "pr-link"))
    path = f"[{index}].pr-link"
    own = pr_link(pr_number) if pr_number is not None else CANONICAL_LINK_FORM
    if entry.pr_link in PR_LINK_PLACEHOLDERS:
        if final_links:
            findings.append(_error("pr-link", source.file, line, "pr-link still holds the XXX placeholder",
                                   "put the pull request's number in" if pr_number is None else
                                   f"write {own} (`llmsweep changelog canonicalize` does it)", path))
        return
    canonical = CANONICAL_PR_LINK.fullmatch(entry.pr_link)
    if canonical is None:
        findings.append(_error("pr-link", source.file, line,
                               f"pr-link {entry.pr_link!r} is not an InferenceX pull-request link",
                               f"write {own} (or XXX until the pull request has a number)", path))
    elif pr_number is not None and entry.pr_link != own:
        number = canonical.group(1)
        said = (f"spells this pull request's number as {number}, not as GitHub writes it ({pr_number})"
                if int(number) == pr_number else
                f"links pull request #{number}, not this one (#{pr_number}): a new entry links the pull request "
                "that adds it")
        findings.append(_error("pr-link", source.file, line, f"pr-link {entry.pr_link!r} {said}",
                               f"write {own} (or XXX, which `llmsweep changelog canonicalize` fills in)", path))


def _check_entry(entry: ChangelogEntry, index: int, source: SourceMap, findings: list[Finding]) -> None:
    file = source.file
    # core spec §3.1: append-only is incompatible with the eval fields (InferenceX's ChangelogEntry refuses them)
    evals = [name for name, on in (("evals-only", entry.evals_only), ("all-evals", entry.all_evals),
                                   ("eval-min-prefill-ep", entry.eval_min_prefill_ep is not None)) if on]
    if entry.append_only and evals:
        findings.append(_error("append-only", file, source.line_of((index, "append-only")),
                               f"append-only cannot be combined with eval fields ({', '.join(evals)}): an append-only "
                               "entry adds throughput points and selects no eval",
                               f"drop {' and '.join(evals)} or append-only", f"[{index}].append-only"))
    seen: set[str] = set()
    for k, key in enumerate(entry.config_keys):
        line = source.line_of((index, "config-keys", k))
        if key in seen:
            findings.append(_error("duplicate-key", file, line, f"config key {key!r} is listed twice",
                                   "list each key once", f"[{index}].config-keys[{k}]"))
        seen.add(key)


def _check_keys(entry: ChangelogEntry, index: int, source: SourceMap, recipe_keys: Sequence[str],
                findings: list[Finding]) -> None:
    file = source.file
    for k, key in enumerate(entry.config_keys):
        line = source.line_of((index, "config-keys", k))
        if "*" in key:
            pattern = re.compile(".*".join(re.escape(p) for p in key.split("*")))
            if not any(pattern.fullmatch(r) for r in recipe_keys):
                findings.append(_error("unknown-key", file, line,
                                       f"No config keys matched the wildcard pattern {key!r}",
                                       "check the pattern against the recipe keys", f"[{index}].config-keys[{k}]"))
        elif key not in recipe_keys:
            # a key one slip from a recipe's (of hundreds, as InferenceX's master configs hold) is named
            close = difflib.get_close_matches(key.strip(), list(recipe_keys), n=1, cutoff=0.8)
            findings.append(_error("unknown-key", file, line, f"Config key {key!r} not found in the recipes"
                                   + (f"; did you mean `{close[0]}`?" if close else ""),
                                   "name an existing recipe key (see `llmsweep matrix`)",
                                   f"[{index}].config-keys[{k}]"))


def _check_append_only(base: str, head: str, file: str, findings: list[Finding]) -> int:
    """Head = base bytes + new entries, one blank line before and between them; pr-link-only corrections of history
    (each writing a canonical link the line did not hold) stand alone.

    Returns the number of entries in the base (the index of the first added entry)."""
    base_lines, head_lines = base.splitlines(), head.splitlines()
    try:
        base_entries = len(parse_yaml(base, f"{file} (base)").data or [])
    except YamlSyntaxError:
        base_entries = sum(1 for line in base_lines if line.startswith(ENTRY_MARK))
    if (moved := _moved_block(base_lines, head_lines, file)) is not None:
        findings.append(moved)
        return base_entries
    edited = [n for n, (a, b) in enumerate(zip(base_lines, head_lines, strict=False), start=1) if a != b]
    removed = len(head_lines) < len(base_lines)
    link_only = all(base_lines[n - 1].startswith("  pr-link:") and head_lines[n - 1].startswith("  pr-link:")
                    for n in edited)
    if removed:
        findings.append(_error("history", file, len(head_lines) + 1, f"lines of the base are missing (the base has "
                               f"{len(base_lines)} lines, this file {len(head_lines)})",
                               "history is append-only: restore the deleted lines"))
        return base_entries
    appended = head_lines[len(base_lines):]
    for n in edited:
        if not link_only:
            findings.append(_error("history", file, n, f"line {n} of the base was changed: "
                                   f"{base_lines[n - 1].strip()!r} → {head_lines[n - 1].strip()!r}",
                                   "history is append-only: restore the line and add a new entry at the end"))
            continue
        # wave-2 spec §2.1: a correction writes a canonical link, and one that keeps the value is no correction
        old, new = link_value(base_lines[n - 1]), link_value(head_lines[n - 1])
        path = f"[{sum(1 for line in head_lines[:n] if line.startswith(ENTRY_MARK)) - 1}].pr-link"
        if old == new and new is not None:
            findings.append(_error("history", file, n, f"line {n} of the base was rewritten without changing its "
                                   f"value ({new!r}): {base_lines[n - 1].strip()!r} → {head_lines[n - 1].strip()!r}",
                                   "history is byte-for-byte: restore the line as the base writes it", path))
        elif not (isinstance(new, str) and CANONICAL_PR_LINK.fullmatch(new)):
            findings.append(_error("history", file, n, f"a pr-link correction of history must write InferenceX's "
                                   f"canonical link, not {new!r}",
                                   f"write {CANONICAL_LINK_FORM}, or restore the line as the base writes it", path))
    if edited and link_only and any(line.strip() for line in appended):
        findings.append(_error("history", file, edited[0], "pr-link corrections of history are mixed with new "
                               "entries", "correct links in a change of their own"))
    start = len(base_lines) + 1  # the line of appended[0]
    if appended and base_lines:
        if appended[0].strip() or (len(appended) > 1 and not appended[1].strip()):
            findings.append(_error("separator", file, start, "the appended entries must follow the base after "
                                   "exactly one blank line", "leave one empty line between entries"))
        # InferenceX reads the appended lines as entries of their own: indented lines after the blank line would
        # continue the base's last entry (a change to published history that the byte check cannot see)
        first = next((n for n, line in enumerate(appended) if line.strip()), None)
        if first is not None and not appended[first].startswith(ENTRY_MARK):
            findings.append(_error("history", file, start + first, "the appended lines continue the base's last "
                                   f"entry: {appended[first].strip()!r}",
                                   f"history is append-only: start each new entry with `{ENTRY_MARK}`"))
    if any(line.strip() for line in appended):
        # InferenceX's CI parses the lines a change adds on their own (`process_changelog.get_added_lines`): an alias
        # to an anchor of history (`*keys`) reads here and is undefined there, which fails the pull request's sweep
        try:
            parse_yaml("\n".join(appended) + "\n", f"{file} (appended lines)")
        except YamlSyntaxError as exc:
            findings.append(_error("appended-yaml", file, start + (exc.line or 1) - 1,
                                   f"the appended lines are not YAML on their own: {exc.problem}; InferenceX's CI "
                                   "reads only the lines a change adds",
                                   "write the new entries in full, without aliases (`*name`) to anchors of earlier "
                                   "entries" if "alias" in exc.problem else exc.fix or "fix the YAML at that line"))
    # the same one blank line between the appended entries (the first one's is checked above)
    marks = [n for n, line in enumerate(appended) if line.startswith(ENTRY_MARK)]
    for n in marks[1:]:
        run = n
        while run > 0 and not appended[run - 1].strip():
            run -= 1
        if n - run != 1:
            findings.append(_error("separator", file, start + run, f"appended entries must be separated by exactly "
                                   f"one blank line, not {n - run} (before the entry at line {start + n})",
                                   "leave one empty line between entries"))
    if appended and not appended[-1].strip():
        findings.append(_error("separator", file, len(head_lines), "the file ends with a blank line",
                               "end with the last entry's line and one newline"))
    return base_entries


def _moved_block(base_lines: list[str], head_lines: list[str], file: str) -> Finding | None:
    """One finding, at its place, for lines inserted inside history or deleted from it (every later line of the base
    otherwise reads as changed: hundreds of errors, each naming a line nobody touched); None for any other change."""
    p = next((n for n, (a, b) in enumerate(zip(base_lines, head_lines, strict=False)) if a != b),
             min(len(base_lines), len(head_lines)))
    rest = len(base_lines) - p  # the base's lines from the first that differs
    if p == len(base_lines):
        return None  # appended only
    count = abs(len(head_lines) - len(base_lines))
    if sum(1 for a, b in zip(base_lines, head_lines, strict=False) if a != b) <= count:
        return None  # fewer lines differ in place than a block would move: lines edited (and entries appended)

    def entry_at(n: int) -> str:  # the history entry base line n+1 is in (or before), as the user counts them
        k = sum(1 for line in base_lines[:n + 1] if line.startswith(ENTRY_MARK))
        return f"history's entry [{max(k - 1, 0)}]"
    if len(head_lines) > len(base_lines) and head_lines[len(head_lines) - rest:] == base_lines[p:]:
        p = _block_start(head_lines, p, count)
        return _error("history", file, p + 1, f"lines {p + 1}-{p + count} are inserted inside history, before line "
                      f"{p + 1} of the base ({entry_at(p)}): {head_lines[p].strip()!r}",
                      "history is append-only: move those lines to the end of the file, after one blank line")
    if len(head_lines) < len(base_lines) and head_lines[p:] == base_lines[len(base_lines) - (len(head_lines) - p):]:
        p = _block_start(base_lines, p, count)
        return _error("history", file, p + 1, f"lines {p + 1}-{p + count} of the base are deleted here "
                      f"({entry_at(p)}): {base_lines[p].strip()!r}",
                      "history is append-only: restore the deleted lines")
    return None


def _block_start(lines: list[str], at: int, count: int) -> int:
    """Where a block of `count` lines inserted (or deleted) at index `at` of `lines` is said to start: a block that
    begins with the lines before it (`- config-keys:`, a blank line) could stand that much higher; of those places, the
    one that starts an entry (else the highest)."""
    low = at
    while low > 0 and lines[low - 1] == lines[low - 1 + count]:
        low -= 1
    return next((n for n in range(low, at + 1) if lines[n].startswith(ENTRY_MARK)), low)


def link_value(line: str) -> object:
    """The value a `  pr-link:` line writes, as YAML reads it (None when the line alone is not YAML)."""
    try:
        data = parse_yaml(line.strip(), "pr-link").data
    except YamlSyntaxError:
        return None
    return data.get("pr-link") if isinstance(data, dict) else None


def load_changelog(path: Path, **kw: Any) -> Changelog:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read changelog {path}: {exc}", fix="check the path") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = undecodable_line(exc)
        log = Changelog(str(path))
        log.findings.append(_error("bytes", str(path), line, f"not UTF-8 text: {exc.reason}", "save as UTF-8"))
        return log
    return validate_changelog(text, str(path), **kw)


# ------------------------------------------------------------------------------------------------ selection


@dataclass
class Selection:
    """The jobs a changelog selects: throughput and eval jobs, each with the entries that chose them."""

    throughput: list[Job] = field(default_factory=list)
    evals: list[Job] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    """Entries that select no job at all, each said as why (a pull request would sweep nothing for them)."""

    @property
    def jobs(self) -> list[Job]:
        return [*self.throughput, *self.evals]


def _scenarios(entry: ChangelogEntry) -> tuple[str, ...]:
    return tuple(entry.scenario_type or RECIPE_SCENARIOS)


def select_jobs(entries: Sequence[ChangelogEntry], recipes: Mapping[str, Recipe], *,
                fleet: FleetCatalog | None = None, trim_conc: bool = False, evals_only: bool = False,
                all_evals: bool = False, base_recipes: Mapping[str, Recipe] | None = None,
                base_fleet: FleetCatalog | None = None, base_label: str = "the base") -> Selection:
    """The jobs `entries` select, as InferenceX's `process_changelog.py` generates them (see module doc).

    Append-only entries (all of them or none) select the points they add to curves the base already has, against
    `base_recipes` (the recipes at the base revision, planned with `base_fleet`): see :func:`append_only_delta`.
    """
    if not entries:
        return Selection()
    fleet = fleet or default_fleet()
    if any(e.append_only for e in entries):
        if not all(e.append_only for e in entries):
            raise ConfigError("append-only entries cannot share a sweep with regular changelog entries",
                              fix="put the append-only entry in a pull request of its own")
        if evals_only or all_evals:
            raise ConfigError("append-only entries cannot run with the evals-only or all-evals modifier: they add "
                              "throughput points and skip evals",
                              fix="drop the eval label (or flag) from this sweep")
        if base_recipes is None:
            raise ConfigError("append-only entries select the points added since a base revision, and none was given",
                              fix="pass --base REV, the commit the pull request is compared with")
        delta = append_only_delta(entries, recipes, base_recipes, fleet=fleet, base_fleet=base_fleet or fleet,
                                  base_label=base_label)
        # InferenceX trims after generating, the append-only delta included (core spec §3.3 step 6): each curve keeps
        # its lowest *added* concurrency, so a trimmed sweep still runs no point the base has.
        return Selection(throughput=trim_concurrencies(delta) if trim_conc else delta)
    out = Selection()
    done_bench: set[tuple[str, str]] = set()
    done_eval: set[tuple[str, str]] = set()
    for entry in sorted(entries, key=lambda e: not e.all_evals):  # all-evals first: the broader eval set wins
        keys = tuple(entry.config_keys)
        scenarios = _scenarios(entry)
        bench_only = not (evals_only or entry.evals_only or entry.all_evals)
        bench: list[Job] = []
        if bench_only:
            bench = test_config(recipes, keys, fleet, EvalOptions(no_evals=True), scenario_types=scenarios)
            out.throughput += _new(bench, done_bench)
        jobs = test_config(recipes, keys, fleet, EvalOptions(evals_only=True, all_evals=all_evals or entry.all_evals),
                           scenario_types=scenarios)
        if entry.eval_min_prefill_ep is not None:
            jobs = [j for j in jobs if j.prefill is None or j.prefill.ep >= entry.eval_min_prefill_ep]
        out.evals += _new(jobs, done_eval)
        if not bench and not jobs:
            what = "no throughput job and no eval" if bench_only else "no eval (it runs evals only)"
            out.empty.append(f"the entry for {', '.join(keys)} selects {what}: "
                             + ("none of its rows is marked for an eval (an 8k1k row, or `all-evals`)"
                                if not bench_only else "its configs plan no job of its scenarios"))
    if trim_conc:
        out.throughput = trim_concurrencies(out.throughput)
    return out


_APPEND_ONLY_FIX = "append-only only adds concurrencies to curves the base has; run anything else with a regular " \
                   "changelog entry (drop `append-only`)"


def append_only_delta(entries: Sequence[ChangelogEntry], head: Mapping[str, Recipe], base: Mapping[str, Recipe], *,
                      fleet: FleetCatalog, base_fleet: FleetCatalog, base_label: str = "the base") -> list[Job]:
    """InferenceX's append-only mode (core spec §3.4): only the points the entries' configs add to existing curves.

    Both sides are planned (throughput, no evals). Configs and scenarios the entries do not select must plan the same
    jobs on both sides; every selected config must exist at the base; the selected jobs are grouped into curves (a job
    without its concurrency); no base curve may go, no curve may be new, no base concurrency may go. The delta is each
    curve's concurrencies the base lacks — a single-node job per point, a multi-node job sliced to them (source
    order) — and must not be empty. Every delta point joins a visual series (model, prefix, precision, framework,
    runner, disagg, scenario family, sequence lengths, offload on/off, spec decoding, worker hardware) whose base
    points all used one image. Evals are not selected. Errors name the config, the job and the fix.
    """
    from llmsweep.changes.diff import diff_jobs
    from llmsweep.plan import expand_config_keys
    from llmsweep.plan.slices import curve_key

    scope: dict[str, set[str]] = {}
    for entry in entries:
        for key in expand_config_keys(tuple(entry.config_keys), list(head)):
            scope.setdefault(key, set()).update(_scenarios(entry))
    if missing := [k for k in scope if k not in base]:
        raise ConfigError(f"append-only: config key {missing[0]!r} is not in the recipes at {base_label}, so it has no "
                          "curve to add points to", fix=_APPEND_ONLY_FIX)
    no_evals = EvalOptions(no_evals=True)
    head_jobs = test_config(head, list(head), fleet, no_evals)
    base_jobs = test_config(base, list(base), base_fleet, no_evals)

    def selected(job: Job) -> bool:
        return job.scenario.value in scope.get(job.recipe_key, set())

    outside = diff_jobs([j for j in base_jobs if not selected(j)], [j for j in head_jobs if not selected(j)])
    if not outside.empty:
        row = outside.rows()[0]
        raise ConfigError(f"append-only: config {row['recipe_key']!r} changed outside the entries' scope "
                          f"({row['change']} job {row['job']}); configs and scenarios an append-only entry does "
                          f"not select must plan the same jobs as at {base_label}",
                          fix="revert that change, or select the config (and scenario) in the entry if only its "
                              "concurrencies grew")
    base_sel = [j for j in base_jobs if selected(j)]
    head_sel = [j for j in head_jobs if selected(j)]
    base_curves: dict[str, set[int]] = {}
    head_curves: dict[str, set[int]] = {}
    first_of: dict[str, Job] = {}
    head_of: dict[str, Job] = {}
    for jobs, curves in ((base_sel, base_curves), (head_sel, head_curves)):
        for job in jobs:
            key = curve_key(job)
            curves.setdefault(key, set()).update(job.concs)
            first_of.setdefault(key, job)
            if jobs is head_sel:
                head_of.setdefault(key, job)

    def where(job: Job) -> str:
        return f"config {job.recipe_key!r}" + (f" in {job.recipe_file}" if job.recipe_file else "")
    for key in base_curves.keys() - head_curves.keys():
        job = first_of[key]
        raise ConfigError(f"append-only: the curve of {job.id} (config {job.recipe_key!r}) at {base_label} is gone or "
                          "changed: an append-only change keeps every published curve as it is",
                          fix=f"restore that search-space entry and its fields; {_APPEND_ONLY_FIX}")
    for key in head_curves.keys() - base_curves.keys():
        job = head_of[key]
        raise ConfigError(f"append-only: {job.id} ({where(job)}) is on a curve {base_label} does not "
                          "have: append-only adds points to existing curves only", fix=_APPEND_ONLY_FIX)
    for key, concs in base_curves.items():
        if gone := sorted(concs - head_curves[key]):
            job = head_of[key]
            raise ConfigError(f"append-only: concurrency {', '.join(map(str, gone))} of the curve of {job.id} "
                              f"({where(job)}) at {base_label} is gone: published points stay",
                              fix="put the concurrency back in the conc-list; append-only only adds points")
    delta: list[Job] = []
    emitted: dict[str, set[int]] = {}
    for job in head_sel:
        key = curve_key(job)
        done = emitted.setdefault(key, set())
        new = [c for c in dict.fromkeys(job.concs) if c not in base_curves[key] and c not in done]
        if new:
            done.update(new)
            delta.append(slice_concurrencies(job, new))
    if not delta:
        raise ConfigError(f"append-only: the selected configs ({', '.join(scope)}) add no concurrency to their curves "
                          f"at {base_label}", fix="add the new points to a conc-list, or drop the entry")
    series_images: dict[tuple[object, ...], set[str]] = {}
    for job in base_sel:
        series_images.setdefault(_visual_series(job), set()).add(job.image)
    for job in delta:
        images = series_images.get(_visual_series(job), set())
        if images != {job.image}:
            raise ConfigError(f"append-only: {job.id} adds a point to a series whose points at {base_label} used "
                              f"{len(images)} images ({', '.join(sorted(images))}), not only {job.image}: its new "
                              "points would be drawn beside points of another image",
                              fix="re-run the whole series on one image with a regular changelog entry")
    return delta


def _visual_series(job: Job) -> tuple[object, ...]:
    """The dashboard series a point is drawn in (InferenceX's append-only visual series)."""
    agentic = job.scenario is ScenarioId.AGENTIC_CODING
    return (job.model, job.model_prefix, job.precision, job.framework, job.runner, bool(job.disagg),
            "agentic" if agentic else "single-turn", None if agentic else (job.isl, job.osl),
            job.kv_offloading not in (None, "none"), "" if agentic else job.spec_decoding,
            job.prefill.hardware if job.prefill else None, job.decode.hardware if job.decode else None)


def _new(jobs: list[Job], done: set[tuple[str, str]]) -> list[Job]:
    """Jobs of (recipe, scenario) pairs no earlier entry generated (per scenario, so disjoint filters both count)."""
    fresh = {(j.recipe_key, j.scenario.value) for j in jobs} - done
    done |= fresh
    return [j for j in jobs if (j.recipe_key, j.scenario.value) in fresh]


def trim_concurrencies(jobs: Sequence[Job]) -> list[Job]:
    """`--trim-conc` (label `sweep-enabled`): each curve keeps its lowest concurrency; a multi-node job its lowest (a
    slice of it, `plan.slices.slice_concurrencies`)."""
    best: dict[tuple[str, str], Job] = {}
    order: list[tuple[str, str]] = []
    for job in jobs:
        if job.multinode:
            key = (job.recipe_key, job.id)
            order.append(key)
            best[key] = slice_concurrencies(job, [min(job.concs)])
            continue
        key = (job.recipe_key, job.recipe_fingerprint)
        if key not in best:
            order.append(key)
            best[key] = job
        elif min(job.concs) < min(best[key].concs):
            best[key] = job
    return [best[k] for k in order]
