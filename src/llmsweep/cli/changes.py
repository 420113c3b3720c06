"""`llmsweep changes BASE..HEAD`: the jobs a recipe change adds, removes and changes, and why."""

from __future__ import annotations

import json
from pathlib import Path

import click

from llmsweep.cli.options import json_option, runner_config_option


@click.command("changes")
@click.argument("revisions")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The git repository whose revisions are compared (default: the current directory's).")
@runner_config_option()
@json_option("the change set (added, removed and changed jobs, each change with its causes and fields)")
def changes(revisions: str, files: tuple[Path, ...], repo: Path | None, runner_config: Path | None,
            as_json: bool) -> None:
    """Jobs added, removed and changed between BASE..HEAD (git revisions, or two directories).

    Both sides are planned as `run` plans them; jobs match by recipe key and job identity, and each changed job
    names what changed it: search space, image, engine args, env, workload or golden curve. FILES narrows the
    comparison to those recipe files (default: every YAML file under recipes/). An empty HEAD (`main..`) is the
    working tree. `llmsweep run --changed BASE..HEAD` runs exactly the added and changed jobs.
    """
    from llmsweep.changes import changes_between

    change_set = changes_between(revisions, files, repo=repo, runner_config=runner_config)
    if as_json:
        click.echo(json.dumps(change_set.as_dict(), indent=2))
        return
    _print(change_set)


def _print(change_set: object) -> None:
    from rich.console import Console
    from rich.table import Table

    from llmsweep.changes import ChangeSet

    assert isinstance(change_set, ChangeSet)
    console = Console()
    if not console.is_terminal:
        console = Console(width=10_000)
    table = Table(title=f"changes {change_set.base}..{change_set.head}", header_style="bold")
    for col in ("change", "job", "recipe", "cause", "fields"):
        table.add_column(col, overflow="fold")
    colour = {"added": "green", "removed": "red", "changed": "yellow"}
    for row in change_set.rows():
        table.add_row(f"[{colour[row['change']]}]{row['change']}[/]", row["job"], row["recipe_key"],
                      ", ".join(row["causes"]), ", ".join(row["fields"]))
    if change_set.rows():
        console.print(table)
    click.echo(f"{len(change_set.added)} added, {len(change_set.changed)} changed, {len(change_set.removed)} removed, "
               f"{len(change_set.unchanged)} unchanged; {len(change_set.to_run())} job(s) to run")
