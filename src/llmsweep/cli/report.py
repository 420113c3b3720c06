"""`llmsweep report RUN`: the offline HTML dashboard, PNG plots and Markdown summary of a run."""

from __future__ import annotations

import json
from pathlib import Path

import click

from llmsweep.cli.options import PathValue, json_option, option, out_option, store_option
from llmsweep.words import count_of
from llmsweep.writable import refuse_unwritable


@click.command()
@click.argument("run", metavar="RUN")
@out_option("Output folder (default RUN/report/); its report files are written anew.",
            type=PathValue(file_okay=False, path_type=Path))
@click.option("--no-png", is_flag=True, help="Skip the matplotlib PNG plots.")
@click.option("--with", "overlays", multiple=True, metavar="RUN_OR_ID",
              help="Overlay another run (directory, stored run id, or imported InferenceX rows) as separate series.")
@option("mix_sources")
@store_option(help="Results store for --with run ids and for the results a `run --reuse` stood jobs on (drawn, "
              "marked reused), and for RUN given as a stored run id. Default: $LLMSWEEP_STORE, else "
              "~/.llmsweep/results.sqlite.")
@json_option("the written files' paths and the counts")
def report(run: str, out: Path | None, no_png: bool, overlays: tuple[str, ...], mix_sources: bool,
           store_path: Path | None, as_json: bool) -> None:
    """Write index.html (works offline), summary.md, data.json and pareto_<axis>.png for RUN (a run directory, or a
    stored run id whose folder is still where it was ingested from)."""
    from llmsweep.cli.results import left_out
    from llmsweep.report import write_report
    from llmsweep.report.data import without_result
    from llmsweep.results.point import ResultPoint
    from llmsweep.results.rundir import folder_kind
    from llmsweep.results.sides import resolve_points, resolve_run_dir, reused_points_of, run_meta_of
    from llmsweep.results.store import Store, default_store_path

    if out is not None:  # before the run is read
        refuse_unwritable(out, folder=True)
    extra: list[ResultPoint] = []
    if overlays or folder_kind(Path(run)) == "other":  # a stored run id, or runs to draw beside it: ask the store
        with Store(store_path, readonly=True) as store:
            run_dir = resolve_run_dir(run, store, set_aside=True)
            warn = left_out()
            for ref in overlays:  # each overlay as its own dashboard draws it: its results and those it stood on
                resolved, own = resolve_points(ref, store, warn, set_aside=True)  # a corrupt summary: said
                extra += own + list(reused_points_of(store, run_meta_of(ref, store), resolved).values())
            if (same := [ref for ref in overlays if ref in (run, run_dir.run_id)]):
                _note(f"--with {same[0]} is the run itself: its points are drawn once")
    else:  # a folder needs no store (a bad one must not stop its report)
        run_dir = resolve_run_dir(run, None, set_aside=True)
    files = write_report(run_dir, out, png=not no_png, overlay=extra, mix_sources=mix_sources,
                         store=default_store_path(store_path))
    for note in files.overlay_notes:  # a --with point the page draws already: said, as the page and summary say it
        _note(note)
    for job in files.unreadable:  # the rest is drawn (exit 0); the job is listed on the page and in summary.md too
        _note(f"job {job['job_id']} is not drawn, its summary unreadable: {job['reason']}")
    if as_json:
        from dataclasses import asdict

        # every field of ReportFiles, so a file (or count) added to it is never left out here
        click.echo(json.dumps({"run_id": run_dir.run_id, **asdict(files)}, indent=1, default=str))
        return
    smoke = f", {files.smoke} smoke" if files.smoke else ""
    drawn = "drawn" if files.reused_drawn == files.reused else f"{files.reused_drawn} drawn"
    reused = f", {files.reused} reused from earlier runs ({drawn})" if files.reused else ""
    beside = f"; {count_of(files.overlaid, 'point')} of other runs drawn beside them" if files.overlaid else ""
    failed = f" ({files.evals_failed} did not pass)" if files.evals_failed else ""
    evals = f", {count_of(files.evals, 'eval')}{failed}" if files.evals else ""
    without = ", ".join(without_result({"refused": files.refused, "failed": files.failed,
                                        "unreadable": len(files.unreadable), "missing": files.missing}))
    click.echo(f"{count_of(files.points, 'point')}, {files.invalid} invalid, {without}{smoke}{reused}{evals}{beside}")
    if files.empty:
        listed = files.refused + files.failed + files.missing
        click.echo(f"{files.empty}" + (" The reasons are in the summary and the dashboard." if listed else ""))
    click.echo(f"dashboard: {files.html}")
    click.echo(f"summary:   {files.markdown}")
    if files.pngs:
        click.echo(f"plots:     {count_of(len(files.pngs), 'PNG')} in {files.out_dir}")
    elif not no_png:
        click.echo("plots:     skipped (matplotlib not installed: pip install matplotlib)")
    if files.stale_pngs:
        redraw = "drop --no-png" if no_png else "install matplotlib"  # what left this report without plots
        click.echo(f"plots:     removed {count_of(len(files.stale_pngs), 'outdated PNG')} of an earlier report from "
                   f"{files.out_dir} (they drew its numbers; {redraw} to draw this report's)")


def _note(text: str) -> None:
    """A note of `report` on stderr, as the CLI says its notes (`note: …`; stdout stays the `--json` document)."""
    click.echo(f"note: {text}", err=True)
