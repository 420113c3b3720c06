"""A pull request's changelog entries made ready to merge: their links set, and main's changelog merged in.

InferenceX merges a pull request only once its `perf-changelog.yaml` entries link to it (wave-2 spec §2.1,
`prepare_perf_changelog_merge.py`); a branch written before it had a number carries the `XXX` placeholder, and a
branch that fell behind main conflicts on the changelog, since both sides append at its end. Two operations:

- :func:`canonicalize` sets the placeholder links of the entries appended since a base to the pull request's
  canonical link. Only those `  pr-link:` lines change (a comment after the value stays); history and every other byte
  are kept; a second run changes nothing. The change must validate against its base before, and with final links
  after, or nothing is returned.
- :func:`resolve_conflict` merges the three sides git leaves in the index when `git merge origin/main` stops on the
  changelog: stage 1 the merge base, stage 2 ("ours") the pull request's branch, stage 3 ("theirs") main. Main's bytes
  are kept exactly; the pull request's appended entries follow, each after exactly one blank line, with canonical
  links — but for those main already gained since the merge base (the same entry once its link is set aside,
  :meth:`ChangelogEntry.identity`). The result must validate as a change of main's changelog. An entry equal to one of
  older history is kept: the validator accepts such a repeat (a re-run), so the merge does not drop it.
  :func:`resolve_conflict_in_repo` reads the stages, writes the file and stages it with `git add`.

Every refusal is a :class:`ConfigError` that names the file (`:2:FILE` is the pull request's stage, as `git show`
spells it), the line, the field and the fix; nothing is written then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from llmsweep.changes.changelog import (
    ENTRY_MARK,
    PR_LINK_PLACEHOLDERS,
    Changelog,
    ChangelogEntry,
    link_value,
    pr_link,
    validate_changelog,
)
from llmsweep.errors import ConfigError, undecodable_line
from llmsweep.words import count_of

LINK_KEY = "  pr-link:"
_LINK_LINE = re.compile(r"(?P<head>  pr-link:[ ]+)(?P<value>\S+)(?P<tail>[ ]+#.*|[ ]*)(?P<end>\n?)")
"""A one-line `pr-link` of an entry: the key, its value (a placeholder or a link: no spaces), an optional comment."""


@dataclass(frozen=True)
class LinkChange:
    """One `pr-link` line set to the pull request's link."""

    line: int
    old: str
    new: str

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "from": self.old, "to": self.new}


@dataclass
class Resolution:
    """A merged changelog: main's text, then the pull request's entries main lacks."""

    text: str
    main_entries: int
    appended: list[int] = field(default_factory=list)
    """Lines of the result where the appended entries start."""
    dropped: list[int] = field(default_factory=list)
    """Lines of the pull request's side (stage 2) of its entries main already has."""
    links: list[LinkChange] = field(default_factory=list)
    """The placeholder links set, at their lines in the result."""


def _refuse(log: Changelog, what: str, fix: str) -> None:
    errors = [f for f in log.findings if f.is_error]
    if errors:
        listing = "\n".join(f.render() for f in errors)
        raise ConfigError(f"{what}: {count_of(len(errors), 'changelog error')}:\n{listing}", fix=fix, findings=errors)


def _blocks(lines: list[str]) -> list[tuple[int, int]]:
    """Each entry's lines, [start, end): from its `- config-keys:` line to its last non-blank line."""
    starts = [n for n, line in enumerate(lines) if line.startswith(ENTRY_MARK)]
    out: list[tuple[int, int]] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(lines)
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        out.append((start, end))
    return out


def _relink(lines: list[str], block: tuple[int, int], entry: ChangelogEntry, index: int, link: str,
            file: str) -> int:
    """Set the entry's one-line `pr-link` to `link` in place, keeping its indentation and comment; its line index."""
    start, end = block
    at = [n for n in range(start, end) if lines[n].startswith(LINK_KEY)]
    match = _LINK_LINE.fullmatch(lines[at[0]]) if len(at) == 1 else None
    if match is None or link_value(lines[at[0]]) != entry.pr_link:
        raise ConfigError(
            f"{file}:{(at[0] if at else start) + 1}: [{index}].pr-link: the entry's pr-link {entry.pr_link!r} is not "
            f"written on one `{LINK_KEY} VALUE` line, so it cannot be set to {link} without rewriting the entry",
            fix=f"write the link as `{LINK_KEY} XXX` on a line of its own, or write `{LINK_KEY} {link}` by hand")
    lines[at[0]] = f"{match['head']}{link}{match['tail'] or ''}{match['end']}"
    if link_value(lines[at[0]]) != link:  # pragma: no cover - a link without spaces always reads back
        raise ConfigError(f"{file}:{at[0] + 1}: [{index}].pr-link: the link set does not read back as {link}",
                          fix=f"write `{LINK_KEY} {link}` by hand")
    return at[0]


def canonicalize(text: str, base: str, pr_number: int,
                 file: str = "perf-changelog.yaml") -> tuple[str, list[LinkChange]]:
    """`text` with the placeholder links of the entries appended since `base` set to pull request `pr_number`'s link.

    Refused (ConfigError with the findings) when `text` is not a valid change of `base` for that pull request, or
    when the result would not validate with final links; the text is returned unchanged when nothing is to be set.
    """
    link = pr_link(pr_number)
    log = validate_changelog(text, file, base=base, pr_number=pr_number)
    _refuse(log, f"{file} is not a valid change of its base changelog, so its links are left as they are",
            "fix the lines named above, then run canonicalize again")
    lines = text.splitlines(keepends=True)
    blocks = _blocks(lines)
    changes: list[LinkChange] = []
    for index in range(log.added_from, len(log.entries)):
        entry = log.entries[index]
        if entry.pr_link in PR_LINK_PLACEHOLDERS:
            n = _relink(lines, blocks[index], entry, index, link, file)
            changes.append(LinkChange(n + 1, entry.pr_link, link))
    result = "".join(lines)
    after = validate_changelog(result, file, base=base, pr_number=pr_number, final_links=True)
    _refuse(after, f"{file} with its links set would not validate, so it is left as it is",
            "fix the lines named above, then run canonicalize again")
    return result, changes


def resolve_conflict(base: str, ours: str, theirs: str, pr_number: int,
                     file: str = "perf-changelog.yaml") -> Resolution:
    """Merge the pull request's changelog (`ours`, stage 2) with main's (`theirs`, stage 3) over their merge base
    (`base`, stage 1): see the module doc."""
    link = pr_link(pr_number)
    pr = validate_changelog(ours, f":2:{file}", base=base, pr_number=pr_number)
    _refuse(pr, f"the pull request's side of {file} (index stage 2) is not a valid change of the merge base's "
            "(stage 1)", "fix those lines on the pull request's branch (before the merge), then merge main again")
    main = validate_changelog(theirs, f":3:{file}")
    # every entry of a changelog read without a base counts as new: history's old link forms are not main's fault
    main.findings = [f for f in main.findings if f.rule != "changelog.pr-link"]
    _refuse(main, f"main's side of {file} (index stage 3) is not a readable changelog",
            "fix the changelog on main first, then merge it again")
    if not pr.added:
        raise ConfigError(f":2:{file}: the pull request appends no entry to {file}, so there is nothing to merge "
                          "onto main's (pr-link corrections of history are not merged by this command)",
                          fix=f"take main's changelog (`git checkout --theirs -- {file}`) and make the pull "
                              "request's change to it again by hand")
    since_base = {e.identity() for e in main.entries[pr.added_from:]}
    lines = ours.splitlines(keepends=True)
    blocks = _blocks(lines)
    out = Resolution(text=theirs, main_entries=len(main.entries))
    kept: list[str] = []
    line = theirs.count("\n") + 1
    for index in range(pr.added_from, len(pr.entries)):
        entry = pr.entries[index]
        if entry.identity() in since_base:
            out.dropped.append(pr.lines[index])
            continue
        start, end = blocks[index]
        block = lines[start:end]
        if not block[-1].endswith("\n"):  # pragma: no cover - the PR side ends with a newline (validated)
            block[-1] += "\n"
        line += 1 if (kept or theirs) else 0  # the one blank line before it
        if entry.pr_link != link:
            at = _relink(block, (0, len(block)), entry, index, link, f":2:{file}")
            out.links.append(LinkChange(line + at, entry.pr_link, link))
        out.appended.append(line)
        line += len(block)
        kept.append("".join(block))
    if not kept:
        shown = ", ".join(str(n) for n in out.dropped)
        raise ConfigError(f":2:{file}: every entry the pull request appends (line {shown}) is already on main, so "
                          "nothing is left to append",
                          fix=f"take main's changelog (`git checkout --theirs -- {file} && git add {file}`); if the "
                              "pull request needs a sweep of its own, append a new entry after it")
    separator = "\n" if theirs else ""
    out.text = theirs + separator + "\n".join(kept)
    result = validate_changelog(out.text, file, base=theirs, pr_number=pr_number, final_links=True)
    _refuse(result, f"the merged {file} would not validate as a change of main's, so nothing is written",
            "resolve the conflict by hand: main's file, then the pull request's entries after one blank line each")
    return out


# ------------------------------------------------------------------------------------------------ git


def _git(top: Path, *args: str) -> tuple[int, bytes, str]:
    from llmsweep.changes.diff import _git as run

    proc = run(top, *args)
    return proc.returncode, proc.stdout, proc.stderr.decode(errors="replace").strip()


def _decode(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = undecodable_line(exc)
        raise ConfigError(f"{what}:{line}: not UTF-8 text: {exc.reason}", fix="save the changelog as UTF-8") from exc


def read_changelog(path: Path) -> str:
    """A changelog file's text, exactly (no newline translation)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read changelog {path}: {exc}", fix="check the path") from exc
    return _decode(raw, str(path))


def resolve_conflict_in_repo(path: Path, pr_number: int) -> Resolution:
    """Resolve the merge conflict git left in the changelog at `path`: read stages 1-3 from the index, write the
    merged file and `git add` it. Only during a merge (MERGE_HEAD): a rebase swaps the sides."""
    from llmsweep.changes.diff import git_toplevel

    top = git_toplevel(path.resolve().parent)
    if top is None:
        raise ConfigError(f"{path} is not in a git repository", fix="run it in the pull request's checkout")
    rel = path.resolve().relative_to(top.resolve()).as_posix()
    if _git(top, "rev-parse", "-q", "--verify", "MERGE_HEAD")[0] != 0:
        raise ConfigError(f"{path}: no merge is in progress in {top}",
                          fix="run it after `git merge origin/main` on the pull request's branch stopped on a "
                              f"conflict in {rel} (in a rebase the sides are swapped: merge instead)")
    rc, listing, err = _git(top, "ls-files", "-u", "-z", "--", rel)
    if rc != 0:
        raise ConfigError(f"{path}: git ls-files failed: {err}", fix="check the repository")
    stages = {int(item.split(b" ")[2].split(b"\t")[0]) for item in listing.split(b"\0") if item}
    if not stages:
        raise ConfigError(f"{rel} has no merge conflict in the index (already resolved, or merged cleanly)",
                          fix=f"nothing to resolve; to resolve it again, restore the conflict first with `git "
                              f"checkout -m -- {rel}`")
    if not {2, 3} <= stages:
        side = "main (stage 3)" if 2 in stages else "the pull request (stage 2)"
        raise ConfigError(f"{rel}: {side} deleted the changelog, so there is nothing to merge it with",
                          fix="resolve the conflict by hand")
    texts: dict[int, str] = {}
    for stage in sorted(stages):
        rc, raw, err = _git(top, "show", f":{stage}:{rel}")
        if rc != 0:
            raise ConfigError(f"{rel}: cannot read index stage {stage}: {err}", fix="check `git status`")
        texts[stage] = _decode(raw, f":{stage}:{rel}")
    resolution = resolve_conflict(texts.get(1, ""), texts[2], texts[3], pr_number, rel)
    path.write_bytes(resolution.text.encode("utf-8"))
    rc, _, err = _git(top, "add", "--", rel)
    if rc != 0:
        raise ConfigError(f"{rel} was written but `git add` failed: {err}", fix=f"run `git add {rel}` yourself")
    return resolution
