"""`llmsweep report RUN`: the offline HTML dashboard, PNG plots and Markdown summary of a run."""

from __future__ import annotations

from pathlib import Path

import click

from llmsweep.cli.options import option, store_option


@click.command()
@click.argument("run", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Output folder (default RUN/report/).")
@click.option("--no-png", is_flag=True, help="Skip the matplotlib PNG plots.")
@click.option("--with", "overlays", multiple=True, metavar="RUN_OR_ID",
              help="Overlay another run (directory, stored run id, or imported InferenceX rows) as separate series.")
@option("mix_sources")
@store_option(help="Results store for --with run ids and for the results a `run --reuse` stood jobs on (drawn, "
              "marked reused). Default: $LLMSWEEP_STORE, else ~/.llmsweep/results.sqlite.")
def report(run: Path, out: Path | None, no_png: bool, overlays: tuple[str, ...], mix_sources: bool,
           store_path: Path | None) -> None:
    """Write index.html (works offline), summary.md, data.json and pareto_<axis>.png for RUN."""
    from llmsweep.report import write_report
    from llmsweep.results.store import default_store_path

    extra = []
    if overlays:
        from llmsweep.results.sides import resolve_points
        from llmsweep.results.store import Store

        with Store(store_path, readonly=True) as store:
            extra = [p for ref in overlays for p in resolve_points(ref, store)[1]]
    files = write_report(run, out, png=not no_png, overlay=extra, mix_sources=mix_sources,
                         store=default_store_path(store_path))
    refused = f" ({files.refused} refused)" if files.refused else ""
    smoke = f", {files.smoke} smoke" if files.smoke else ""
    drawn = "drawn" if files.reused_drawn == files.reused else f"{files.reused_drawn} drawn"
    reused = f", {files.reused} reused from earlier runs ({drawn})" if files.reused else ""
    click.echo(f"{files.points} point(s), {files.invalid} invalid, {files.missing} missing{refused}{smoke}{reused}")
    if files.empty:
        click.echo(files.empty)
    click.echo(f"dashboard: {files.html}")
    click.echo(f"summary:   {files.markdown}")
    if files.pngs:
        click.echo(f"plots:     {len(files.pngs)} PNG(s) in {files.out_dir}")
    elif not no_png:
        click.echo("plots:     skipped (matplotlib not installed: pip install matplotlib)")
