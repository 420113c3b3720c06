"""`llmsweep report RUN`: the offline HTML dashboard, PNG plots and Markdown summary of a run."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder (default RUN/report/).")
@click.option("--no-png", is_flag=True, help="Skip the matplotlib PNG plots.")
def report(run: Path, out: Path | None, no_png: bool) -> None:
    """Write index.html (works offline), summary.md, data.json and pareto_<axis>.png for RUN."""
    from llmsweep.report import write_report

    files = write_report(run, out, png=not no_png)
    click.echo(f"{files.points} point(s), {files.invalid} invalid, {files.missing} missing")
    click.echo(f"dashboard: {files.html}")
    click.echo(f"summary:   {files.markdown}")
    if files.pngs:
        click.echo(f"plots:     {len(files.pngs)} PNG(s) in {files.out_dir}")
    elif not no_png:
        click.echo("plots:     skipped (matplotlib not installed: pip install matplotlib)")
