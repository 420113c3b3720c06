"""`llmsweep changes BASE..HEAD`: the jobs a recipe change adds, removes and changes, and why; `llmsweep changelog`:
InferenceX's perf-changelog.yaml validated, its selected jobs listed, and a pull request's entries prepared to merge."""

from __future__ import annotations

import json
from pathlib import Path

import click

from llmsweep.cli.options import (
    DefaultCommandGroup,
    PathValue,
    json_group_option,
    json_option,
    option,
    recipe_files_argument,
    runner_config_option,
)
from llmsweep.words import count_of, noun


@click.command("changes")
@click.argument("revisions")
@recipe_files_argument(required=False)
@click.option("--repo", type=PathValue(exists=True, file_okay=False, path_type=Path), default=None,
              help="The git repository whose revisions are compared (default: the current directory's).")
@option("no_evals", help="Compare the plans without eval rows (as `run --changed … --no-evals`).")
@option("evals_only", help="Compare the eval jobs only (as `run --changed … --evals-only`: the evals of what changed).")
@option("all_evals", help="Compare the plans of `--all-evals` (as `run --changed … --all-evals`).")
@runner_config_option()
@json_option("the change set (added, removed and changed jobs, each change with its causes and fields)")
def changes(revisions: str, files: tuple[Path, ...], repo: Path | None, no_evals: bool, evals_only: bool,
            all_evals: bool, runner_config: Path | None, as_json: bool) -> None:
    """Jobs added, removed and changed between BASE..HEAD (git revisions, or two directories).

    Both sides are planned as `run` plans them; jobs match by recipe key and job identity, and each changed job
    names what changed it: search space, image, engine args, env, workload, golden curve or eval (the point became
    the one its curve evaluates). A multi-node job whose
    concurrency list alone grew runs only the concurrencies added (`conc-added`, a slice of the job). FILES narrows the
    comparison to those recipe files (default: every YAML file under recipes/). An empty HEAD (`main..`) is the
    working tree. `llmsweep run --changed BASE..HEAD` runs exactly the added and changed jobs; with the same eval flag
    (`--no-evals`, `--evals-only`, `--all-evals`) both sides are planned as that run plans them.
    """
    from llmsweep.changes import changes_between
    from llmsweep.plan.matrix import EvalOptions

    evals = EvalOptions(no_evals=no_evals, evals_only=evals_only, all_evals=all_evals)
    evals.check()
    change_set = changes_between(revisions, files, repo=repo, runner_config=runner_config, evals=evals)
    for note in change_set.notes:
        click.echo(f"note: {note}", err=True)
    if as_json:
        click.echo(json.dumps(change_set.as_dict(), indent=2))
        return
    _print(change_set)


def _print(change_set: object) -> None:
    """The change set as a table laid out as every table is (`cli.tables.print_tables`): the job ids shortened to
    their experiment name and hash where whole ones do not fit (`--json` lists them whole), the recipe key whole, and
    the columns that do not fit beside the job in a continuation table."""
    from llmsweep.changes import ChangeSet
    from llmsweep.changes.diff import SAME_LAUNCH
    from llmsweep.cli.tables import Column, job_labels, plain, print_tables

    assert isinstance(change_set, ChangeSet)
    colour = {"added": "green", "removed": "red", "changed": "yellow", "conc-added": "green", "conc-removed": "red",
              "conc-reordered": "yellow"}
    rows = change_set.rows()
    cells = []
    for row in rows:
        fields = ", ".join(row["fields"])
        if row["change"].startswith("conc-"):  # which points of the multi-node job's list came and went
            fields = " ".join([fields, *(f"+{c}" for c in row["added_conc"]), *(f"-{c}" for c in row["removed_conc"])])
        if row.get("same_launch"):
            fields += f" ({SAME_LAUNCH})"
        cells.append([f"[{colour[row['change']]}]{row['change']}[/]", plain(row["job"]), plain(row["recipe_key"]),
                      plain(", ".join(row["causes"])), plain(fields)])
    if cells:
        # a field path (`serve.args.--mem-fraction-static`) wraps at its spaces only, never inside itself
        longest = max((len(word) for row in cells for word in row[4].split()), default=1)
        columns = [Column("change", justify="left"), Column("job", kind="key", justify="left"),
                   Column("recipe", kind="id", justify="left"),
                   Column("cause", kind="text", justify="left", min_width=12),
                   Column("fields", kind="text", justify="left", min_width=min(32, max(8, longest)))]
        jobs = [*change_set.added, *change_set.removed, *(c.head for c in change_set.changed),
                *(j for c in change_set.concs for j in (c.head, c.to_run) if j is not None)]
        names = {j.id: j.exp_name for j in jobs}
        short = [plain(label) for label in job_labels([row["job"] for row in rows], names)]
        print_tables(plain(f"changes {change_set.base}..{change_set.head}"), columns, cells, short_keys=short)
    click.echo(f"{len(change_set.added)} added, {len(change_set.changed)} changed, {len(change_set.removed)} removed, "
               f"{change_set.concs_text()}{len(change_set.unchanged)} unchanged; "
               f"{count_of(len(change_set.to_run()), 'job')} to "
               "run")


CHECK = "check"
_FILE = click.argument("changelog_file", type=PathValue(dir_okay=False, path_type=Path),
                       default=Path("perf-changelog.yaml"))


# `llmsweep changelog [FILE] …` validates (the `check` subcommand, its default, so every existing spelling keeps
# working); `canonicalize` and `resolve-conflict` prepare a pull request's changelog for its merge.
@click.group("changelog", cls=DefaultCommandGroup, default_command=CHECK, default_when_empty=True,
             invoke_without_command=False)
@json_group_option()
def changelog() -> None:
    """InferenceX's perf-changelog.yaml: `llmsweep changelog [FILE] [--base REV] [--pr-number N] …` validates it and
    lists the jobs its new entries select (the default subcommand, `check`: see `llmsweep changelog check --help`);
    `canonicalize` sets a pull request's placeholder links; `resolve-conflict` merges main's changelog into a pull
    request's when `git merge` stopped on it."""


@changelog.command(CHECK)
@_FILE
@recipe_files_argument(required=False)
@option("changelog_base", help="The changelog before this change (a git revision of its repository, or a "
        "file): history must be unchanged and only the entries added since select jobs.")
@option("pr_number", help="The pull request this change belongs to (with --base): a new entry's pr-link must be "
        "its link (https://github.com/SemiAnalysisAI/InferenceX/pull/N) or the XXX placeholder; a link to another "
        "pull request is refused.")
@click.option("--final-links", is_flag=True, help="Refuse the `XXX` pr-link placeholder (a merged changelog).")
@click.option("--trim-conc", is_flag=True, help="Keep only each curve's lowest concurrency (label `sweep-enabled`).")
@option("evals_only", help="Select eval jobs only (label `evals-only`).")
@option("all_evals", help="Evals on every 8k1k fixed-seq-len job, throughput kept (label `all-evals`).")
@runner_config_option()
@json_option("the findings and the selected jobs")
def check(changelog_file: Path, files: tuple[Path, ...], base: str | None, pr_number: int | None, final_links: bool,
          trim_conc: bool, evals_only: bool, all_evals: bool, runner_config: Path | None, as_json: bool) -> int:
    """Validate a perf-changelog.yaml (file:line errors) and list the jobs its entries select.

    FILES are the recipes its config keys name (default: every YAML file under recipes/). With --base, history must
    be unchanged and only the appended entries select jobs, as InferenceX's CI does for a pull request; with
    --pr-number, they must link to that pull request (or hold XXX). Append-only entries select only the concurrencies
    their configs add to existing curves since --base (a revision): nothing else may change, and evals are not
    selected; --trim-conc keeps each curve's lowest added concurrency.
    """
    from llmsweep.catalog.fleet import default_fleet, load_fleet
    from llmsweep.changes.changelog import load_changelog, select_jobs
    from llmsweep.errors import ConfigError
    from llmsweep.spec.loader import RECIPE_SUFFIXES, load_recipes
    from llmsweep.spec.scope import RECIPES_DIR

    if pr_number is not None and base is None:
        # without a base every entry is new, and each history entry links some other pull request
        raise ConfigError("--pr-number checks the entries a pull request adds, and no --base says which those are",
                          fix="pass --base with the pull request's base (e.g. --base origin/main)")
    paths = list(files) or sorted(p for p in Path(RECIPES_DIR).rglob("*") if p.suffix in RECIPE_SUFFIXES)
    if not paths:
        # with no recipe read, every config key was "not found in the recipes", which sent people to fix the changelog
        raise ConfigError(f"no recipe files to check {changelog_file}'s config keys against: no FILES were given and "
                          f"{Path(RECIPES_DIR).resolve()} holds no YAML file",
                          fix=f"name the recipe (master config) files after the changelog: `llmsweep changelog "
                              f"{changelog_file} FILE...`, or run it where {RECIPES_DIR}/ is")
    recipes = load_recipes(paths).raise_on_error().recipes
    base_text = _base_text(base, changelog_file) if base is not None else None
    log = load_changelog(changelog_file, recipe_keys=list(recipes), base=base_text, final_links=final_links,
                         pr_number=pr_number)
    for finding in log.findings:
        click.echo(finding.render(), err=True)
    if not log.ok:
        if as_json:
            click.echo(json.dumps({"ok": False, "findings": [f.to_json() for f in log.findings]}, indent=2))
        raise ConfigError(f"{changelog_file}: {count_of(sum(f.is_error for f in log.findings), 'changelog error')}",
                          fix="fix the lines named above")
    fleet = load_fleet(runner_config) if runner_config is not None else default_fleet()
    if log.added and all(e.append_only for e in log.added):
        # the points added to curves the base has: the recipes are planned as the base revision has them
        from llmsweep.changes.diff import recipes_at

        if base is None or Path(base).is_file():
            raise ConfigError("append-only entries select the points added to the curves of the base revision"
                              + (f", and --base {base} is a changelog file: it does not say what the recipes were"
                                 if base is not None else ", and no --base was given"),
                              fix="pass --base as a git revision of the repository (the pull request's base commit)")
        with recipes_at(base, list(files) or [Path(RECIPES_DIR)], repo=changelog_file.resolve().parent,
                        runner_config=runner_config) as (base_recipes, base_fleet):
            selection = select_jobs(log.added, recipes, fleet=fleet, trim_conc=trim_conc, evals_only=evals_only,
                                    all_evals=all_evals, base_recipes=base_recipes, base_fleet=base_fleet,
                                    base_label=base)
    else:
        selection = select_jobs(log.added, recipes, fleet=fleet, trim_conc=trim_conc, evals_only=evals_only,
                                all_evals=all_evals)
    rows = [{"job": j.id, "recipe_key": j.recipe_key, "kind": kind, "conc": j.conc}
            for kind, jobs in (("throughput", selection.throughput), ("eval", selection.evals)) for j in jobs]
    for why in selection.empty:  # a pull request would sweep nothing for it: said, never a silent empty matrix
        click.echo(f"warning: {why}", err=True)
    if as_json:
        click.echo(json.dumps({"ok": True, "entries": len(log.entries), "added": len(log.added),
                               "findings": [f.to_json() for f in log.findings], "jobs": rows,
                               "empty_entries": selection.empty}, indent=2))
        return 0
    for row in rows:
        click.echo(f"{row['kind']:<10} {row['job']}")
    click.echo(f"{len(log.entries)} entries ({len(log.added)} new) select "
               f"{count_of(len(selection.throughput), 'throughput job')} and "
               f"{count_of(len(selection.evals), 'eval job')}", err=True)
    return 0


def _base_text(base: str, changelog_file: Path) -> str:
    """The base changelog: a file, else `git show REV:path` of the changelog's repository."""
    import subprocess

    from llmsweep.changes.diff import git_toplevel, is_commit, missing_rev_hint
    from llmsweep.errors import ConfigError

    if Path(base).is_file():
        try:
            return Path(base).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"--base {base} is not UTF-8 text: {exc}", fix="save the base changelog as UTF-8") \
                from exc
    top = git_toplevel(changelog_file.resolve().parent)
    if top is None:
        raise ConfigError(f"--base {base}: no such file, and {changelog_file} is not in a git repository",
                          fix="give the base changelog as a file, or run inside the repository")
    rel = changelog_file.resolve().relative_to(top.resolve())
    if not is_commit(top, base):
        # checked first: `git show SHA:path` of a full SHA the clone lacks (a shallow clone's base) says the path
        # "exists on disk, but not in" it, read as a changelog new in this change: all of history counted as appended
        raise ConfigError(f"--base {base}: no such file, and no commit of {top}{missing_rev_hint(top, base)}",
                          fix="name a commit of the changelog's repository (fetch it first), or a file")
    proc = subprocess.run(["git", "-C", str(top), "show", f"{base}:{rel.as_posix()}"], capture_output=True,
                          check=False)
    if proc.returncode != 0:
        if b"does not exist" in proc.stderr or b"exists on disk, but not in" in proc.stderr:
            return ""  # the changelog is new in this change: everything in it is appended
        raise ConfigError(f"--base {base}: {proc.stderr.decode(errors='replace').strip()}",
                          fix="name a commit of the changelog's repository, or a file")
    try:
        return proc.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--base {base}: the changelog there is not UTF-8 text: {exc}",
                          fix="compare against a revision whose changelog is UTF-8") from exc


@changelog.command("canonicalize")
@_FILE
@option("changelog_base", required=True, help="The changelog the pull request started from (a git revision of "
        "its repository, or a file): only the entries appended since are touched.")
@option("pr_number", required=True, help="The pull request whose link (https://github.com/SemiAnalysisAI/InferenceX/"
        "pull/N) replaces the XXX placeholders.")
@json_option("the links set (line, from, to)")
def canonicalize(changelog_file: Path, base: str, pr_number: int, as_json: bool) -> None:
    """Set the XXX pr-links of the entries appended since --base to pull request N's link, in place.

    Only those `pr-link:` lines change (history and every other byte are kept); running it again changes nothing. The
    change must validate against --base, and with the links set; otherwise nothing is written and the errors say
    where. InferenceX's `prepare_perf_changelog_merge.py canonicalize`.
    """
    from llmsweep.changes.changelog import pr_link
    from llmsweep.changes.changelog_merge import canonicalize as set_links
    from llmsweep.changes.changelog_merge import read_changelog

    text = read_changelog(changelog_file)
    result, links = set_links(text, _base_text(base, changelog_file), pr_number, str(changelog_file))
    if result != text:
        changelog_file.write_bytes(result.encode("utf-8"))
    if as_json:
        click.echo(json.dumps({"file": str(changelog_file), "pr_number": pr_number, "link": pr_link(pr_number),
                               "written": result != text, "links": [c.to_json() for c in links]}, indent=2))
        return
    for change in links:
        click.echo(f"{changelog_file}:{change.line}: pr-link {change.old} -> {change.new}")
    if links:
        click.echo(f"{changelog_file}: {count_of(len(links), 'pr-link')} set to {pr_link(pr_number)}", err=True)
    else:
        click.echo(f"{changelog_file}: nothing to set, the new entries already link to {pr_link(pr_number)}",
                   err=True)


@changelog.command("resolve-conflict")
@_FILE
@option("pr_number", required=True, help="The pull request being merged: its entries get its link "
        "(https://github.com/SemiAnalysisAI/InferenceX/pull/N), and must not link another one.")
@json_option("what was kept, appended and dropped")
def resolve_conflict(changelog_file: Path, pr_number: int, as_json: bool) -> None:
    """Resolve a merge conflict in the changelog after `git merge origin/main` on the pull request's branch.

    Reads the index stages git left (1 the merge base, 2 the pull request's branch, 3 main), keeps main's file byte
    for byte and appends the pull request's entries after it, each after one blank line and with its canonical link;
    entries main already gained since the merge base (equal once the link is set aside) are dropped. The file is
    written and staged (`git add`); commit the merge as usual. Refused, with nothing written, when nothing is left to
    append or the result would not validate. InferenceX's `prepare_perf_changelog_merge.py resolve-conflict`.
    """
    from llmsweep.changes.changelog_merge import resolve_conflict_in_repo

    res = resolve_conflict_in_repo(changelog_file, pr_number)
    if as_json:
        click.echo(json.dumps({"file": str(changelog_file), "pr_number": pr_number, "main_entries": res.main_entries,
                               "appended_lines": res.appended, "dropped_lines": res.dropped,
                               "links": [c.to_json() for c in res.links], "staged": True}, indent=2))
        return
    for change in res.links:
        click.echo(f"{changelog_file}:{change.line}: pr-link {change.old} -> {change.new}")
    dropped = (f"; {len(res.dropped)} already on main dropped (line {', '.join(map(str, res.dropped))} of the pull "
               "request's side)" if res.dropped else "")
    click.echo(f"{changelog_file}: main's {res.main_entries} entries kept as they are, "
               f"{count_of(len(res.appended), 'entry', 'entries')} "
               f"of pull request #{pr_number} appended at {noun(len(res.appended), 'line')} "
               f"{', '.join(map(str, res.appended))}{dropped}; staged",
               err=True)
