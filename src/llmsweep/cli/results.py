"""`llmsweep results …` (store: ingest, list, evals, show, frontier, export, import) and `llmsweep compare A B`."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from llmsweep.cli.notice import saying
from llmsweep.cli.options import (
    Opt,
    PathValue,
    held_results,
    json_group_option,
    json_option,
    option,
    out_option,
    refuse_replacing,
    store_option,
)
from llmsweep.cli.tables import Column, break_long_words, plain, print_tables, table_console
from llmsweep.errors import ResultError, ResultInputError
from llmsweep.words import count_of, noun
from llmsweep.writable import refuse_unwritable

if TYPE_CHECKING:
    from llmsweep.results.point import ResultPoint
    from llmsweep.results.rundir import RunDir


def _open(store_path: Path | None, *, readonly: bool = True) -> Any:
    """The store: read-only (never created, migrated or written) unless the command writes."""
    from llmsweep.results.store import Store

    return Store(store_path, readonly=readonly)


def _stored_in(store: Any) -> str:
    """Where an empty listing looked: the store's path, and that no file is there where none is (a mistyped --store
    read as an empty store, said as if the store had been found empty)."""
    return f"{store.path}" + ("" if store.on_disk else " (no store file there)")


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


@click.group()
@json_group_option()
def results() -> None:
    """List, show, export and import stored results."""


@results.command("ingest")
@click.argument("runs", nargs=-1, required=True, type=PathValue(exists=True, file_okay=False, path_type=Path))
@option("force", help="Store each run as its folder holds it even when that drops results the store holds for it "
        "(a re-ingest of a folder lacking some of them is refused without this).")
@store_option()
def ingest(runs: tuple[Path, ...], force: bool, store_path: Path | None) -> None:
    """Store every job and result of run directories (idempotent: re-ingesting replaces the run; one that would
    drop stored results is refused unless --force)."""
    from llmsweep.results.rundir import load_run

    # every folder read (a `bench` or job folder refused) first
    with saying(f"reading {count_of(len(runs), 'run folder')}"):
        loaded = [load_run(run) for run in runs]
    with _open(store_path, readonly=False) as store, saying(f"storing {count_of(len(loaded), 'run')} in {store.path}"):
        if not force:  # every run checked before any is written: a refusal changes nothing
            for run in loaded:
                store.refuse_dropping(run)
        for run in loaded:
            rep = store.ingest_run(run, replace=force)
            extra = ""
            if len(rep.jobs_without_result) > len(rep.unread):
                extra += f", {count_of(len(rep.jobs_without_result) - len(rep.unread), 'job')} without summary"
            if rep.unread:
                extra += f", {count_of(len(rep.unread), 'summary', 'summaries')} not read"
            if rep.missing_expected:
                extra += f", {count_of(len(rep.missing_expected), 'expected job')} missing"
            click.echo(f"{'re-ingested' if rep.replaced else 'ingested'} {rep.run_id}: "
                       f"{count_of(rep.results, 'result')}{extra}"
                       f" → {store.path}")
            for why in rep.unread:
                click.echo(f"warning: not stored: {why}", err=True)


def left_out() -> Callable[[str], None]:
    """What says, on stderr, a run folder's job that is not a point (its summary set aside) where the folder's points
    are used: once each, however often a command reads the folder (`compare RUN RUN`, --repeats-from)."""
    said: set[str] = set()

    def say(why: str) -> None:
        if why not in said:
            said.add(why)
            click.echo(f"warning: left out: {why}", err=True)

    return say


@results.command("list")
@option("run_id", help="Only results of this run: a stored run id, or a run directory (read from the folder).")
@click.option("--all", "every", is_flag=True, help="Every stored result, of every run (not the runs).")
@json_option()
@store_option()
def list_cmd(run_id: str | None, every: bool, as_json: bool, store_path: Path | None) -> None:
    """Runs in the store; the results of one run (`--run`: a stored run id or a run directory, as `compare`,
    `report` and `results frontier` take it); or every stored result (`--all`). `--json` prints the same rows as the
    table."""
    from llmsweep.results.point import describe
    from llmsweep.results.sides import is_folder

    if every and run_id is not None:
        raise click.UsageError("--all lists every run's results and --run one run's: give one of them")
    with _open(store_path) as store:
        if run_id is None and not every:
            if as_json:
                _runs_json(store)
            else:
                _print_runs(store)
            return
        folder = run_id is not None and is_folder(run_id)
        if run_id is not None and folder:  # a run directory: its results as its folder holds them, as `results
            # frontier` reads one
            where = run_id  # the folder the user named (its run's id follows)
            points, warned, run_id = _folder_points(run_id, store)
        else:
            from llmsweep.results.sides import resolve_points

            with saying(f"reading {f'run {run_id}' if run_id else 'every result'} from {store.path}"):
                # runs in the order they were stored; in a run, by series then conc; a run id the store does not hold
                # refused as `compare` and `results frontier` refuse it, naming both forms `--run` takes
                points = store.results() if run_id is None else resolve_points(run_id, store)[1]
            if run_id is not None:
                from llmsweep.results.sides import reused_points_of

                reused_points_of(store, store.run_meta(run_id), run_id, lambda line: click.echo(line, err=True))
            warned = store.job_warnings(p.run_id for p in points)
            where = _stored_in(store)
        runs = {r: i for i, r in enumerate(dict.fromkeys(p.run_id for p in points))}
        points.sort(key=lambda p: (runs[p.run_id], p.identity.series_label(), p.identity.conc, p.job_id))
        if as_json:  # each row's series as its table's title names it (the image or configuration where a run holds
            # two; `AL 3.39 est.` where the simulator estimated the acceptance length), without the source after it
            from llmsweep.results.frontier import listed_series_labels

            keys, titles = listed_series_labels(points)
            click.echo(json.dumps([{**describe(p), "series": titles[keys[p.result_id]],
                                    "warnings": warned.get((p.run_id, p.job_id), [])} for p in points],
                                  indent=1, default=str))
            return
        if not points:
            click.echo(f"no results {'in run folder' if folder else 'stored'}{f' for run {run_id}' if run_id else ''} "
                       f"in {where}")
            return
        _print_points(points, warned)


def _folder_points(ref: str, store: Any) -> tuple[list[ResultPoint], dict[tuple[str, str], list[str]], str]:
    """A run directory's results, as `compare`, `report` and `results frontier` resolve one
    (`sides.resolve_run_dir`, `folder_points`: a job left out said on stderr), what the run warned of each (its
    outcomes: run.json's, else each job's own outcome.json, as its dashboard reads them), and its run id; the jobs it
    stood on stored results of are said on stderr, listed under the run that measured them (as a stored run's listing
    says them)."""
    from llmsweep.results.sides import folder_points, resolve_run_dir, reused_points_of

    with saying(f"reading run folder {ref}"):
        run = resolve_run_dir(ref, store)
        points = folder_points(run, ref, left_out())
    reused_points_of(store, run.meta, run.run_id, lambda line: click.echo(line, err=True))
    return points, _run_warnings(run), run.run_id


def _run_warnings(run: RunDir) -> dict[tuple[str, str], list[str]]:
    """(run id, job id) -> what a run folder warned of the job: its outcomes (run.json's, else each job's own
    outcome.json), as its dashboard reads them; jobs without any left out, as `Store.job_warnings` leaves them."""
    from llmsweep.results.rundir import recorded_outcomes

    return {(run.run_id, job): o.warnings for job, o in recorded_outcomes(run).items() if o.warnings}


@results.command("runs")
@json_option()
@store_option()
def runs_cmd(as_json: bool, store_path: Path | None) -> None:
    """Runs in the store (ours and imported ones), with result counts and sources."""
    with _open(store_path) as store:
        if as_json:
            _runs_json(store)
        else:
            _print_runs(store)


def _runs_json(store: Any) -> None:
    from dataclasses import asdict

    click.echo(json.dumps([asdict(r) for r in store.runs()], indent=1))


def _print_runs(store: Any) -> None:
    runs = store.runs()
    if not runs:  # as an empty listing of results says it: not a table with no rows
        click.echo(f"no runs stored in {_stored_in(store)}")
        return
    # laid out as every table is (`cli.tables`): the run id names each row of every part, the dates are never
    # wrapped (rich folded both, `run-20261` / `206T17262` / `4Z-499960`, in an 80-column terminal), the columns that
    # do not fit go into a continuation table
    columns = [Column("run id", kind="key", justify="left", min_width=max(len(r.run_id) for r in runs)),
               Column("origin", kind="text", justify="left", min_width=8),
               Column("results"), Column("sources", kind="text", justify="left", min_width=9),
               Column("started", kind="id", justify="left"), Column("ingested", kind="id", justify="left"),
               Column("path", kind="text", justify="left", min_width=20)]
    rows = [[plain(r.run_id), plain(r.origin), str(r.results), plain(",".join(r.sources)), plain(r.started or "–"),
             plain(r.ingested_at), plain(r.path or "–")] for r in runs]
    print_tables(plain(f"runs in {store.path}"), columns, rows, console=table_console())


def _print_points(points: list[Any], warned: Mapping[tuple[str, str], list[str]] | None = None, *,
                  console: Any = None) -> None:
    """One table per series (its label is the title; with several runs, the run's id before it), laid out for the
    terminal as `run`'s table is (`cli.tables.print_tables`): result ids whole (`results show` takes them), job ids
    shortened to experiment name…hash where whole ones do not fit, the columns that do not fit in a continuation
    table; a verdict its run warned of is marked `⚠N` as in `run`'s table, the warning said under the table
    (`warned`: `Store.job_warnings`). `points` come sorted by run, then series."""
    from llmsweep.cli.tables import job_labels
    from llmsweep.cli.verdicts import Notes, verdict_cell
    from llmsweep.metrics.registry import HOT_BY_NAME
    from llmsweep.results.frontier import ListedKey, listed_series_labels
    from llmsweep.results.identity import get_field

    shown = [HOT_BY_NAME[c] for c in ("tput_per_gpu", "p90_e2e_norm_intvty", "p90_ttft")]
    columns = [Column("result", kind="id", justify="left"), Column("job", kind="key", justify="left"), Column("conc"),
               Column("topology", kind="text", justify="left", min_width=8), *(Column(c.header) for c in shown),
               Column("verdict", justify="left")]
    exp_names = {p.job_id: str(name) for p in points if (name := get_field(p.job, "exp_name"))}
    short = dict(zip((id(p) for p in points), job_labels([p.job_id for p in points], exp_names), strict=True))
    several = len({p.run_id for p in points}) > 1
    groups: dict[ListedKey, list[Any]] = {}  # a series is of one source (simulated, measured, ...)
    # a run's series of two images, or one point of which it measured under two configurations: one table each
    keys, titles = listed_series_labels(points)
    for p in points:
        groups.setdefault(keys[p.result_id], []).append(p)
    for key, group in groups.items():
        run_id, _, source = key
        series = titles[key]
        notes = Notes()
        rows = [[plain(p.result_id), plain(p.job_id), str(p.identity.conc), plain(p.identity.topology()),
                 *(c.cell(p.metric(c.name)) for c in shown),
                 verdict_cell(p.verdict, notes=notes.number((warned or {}).get((p.run_id, p.job_id), [])))]
                for p in group]
        title = f"{run_id}: " if several else ""
        print_tables(plain(f"{title}{series} ({source})"), columns, rows,
                     short_keys=[plain(short[id(p)]) for p in group], console=console,
                     caption=plain("\n".join(notes.lines())) or None)


@results.command("evals")
@option("run_id", help="Only evals of this run id.")
@json_option()
@store_option()
def evals_cmd(run_id: str | None, as_json: bool, store_path: Path | None) -> None:
    """Stored accuracy evals: one row per concurrency each eval ran at, with that run's score (the eval's verdict
    is judged over all its concurrencies)."""
    from dataclasses import asdict

    with _open(store_path) as store:
        store.require_run(run_id)
        rows = store.evals(run_id)
    if as_json:
        click.echo(json.dumps([asdict(r) for r in rows], indent=1))
        return
    if not rows:
        click.echo(f"no eval stored{f' for run {run_id}' if run_id else ''} in {store.path}")
        return
    from llmsweep.cli.tables import job_labels

    # laid out as `results list` is: result ids whole, job ids shortened to fit, the rest in a continuation table
    columns = [Column("result", kind="id", justify="left"), Column("job", kind="key", justify="left"),
               Column("conc"), Column("task", justify="left"),
               Column("score", kind="text", justify="left", min_width=26), Column("± stderr"), Column("samples"),
               Column("status", justify="left"), Column("verdict", justify="left"), Column("source", justify="left"),
               Column("mode", justify="left")]
    cells = []
    for r in rows:
        score = f"{_num(r.score, 4)} ({r.score_name})" if r.score is not None else (r.error or "–")
        cells.append([plain(r.result_id), plain(r.job_id), str(r.conc), plain(r.task_label), plain(score),
                      _num(r.score_stderr, 2), "–" if r.n_samples is None else str(r.n_samples), plain(r.status),
                      plain(r.verdict), plain(r.source or "–"), plain(r.mode)])
    print_tables(plain(f"accuracy evals in {store.path}"), columns, cells,
                 short_keys=[plain(label) for label in job_labels([r.job_id for r in rows])])


@results.command("show")
@click.argument("ref")
@json_option("the full stored record (summary included)")
@store_option()
def show(ref: str, as_json: bool, store_path: Path | None) -> None:
    """One result by result id, RUN/JOB, job id, or a run's job folder (RUN_DIR/jobs/JOB or RUN_DIR/JOB: that job's
    stored result); a job id that several stored results hold, as an import of a run beside the run, is refused,
    naming each one's result id."""
    from llmsweep.results.interchange import export_points
    from llmsweep.results.point import describe
    from llmsweep.results.sides import stored_result

    with _open(store_path) as store:
        point = stored_result(ref, store)
        warnings = store.job_warnings([point.run_id]).get((point.run_id, point.job_id), [])
    if as_json:
        record = json.loads(export_points([point], "json"))["results"][0]
        click.echo(json.dumps({**record, "warnings": warnings}, indent=1, default=str))
        return
    from llmsweep.metrics.registry import HOT_BY_NAME
    from llmsweep.sim_warnings import CATALOG_ESTIMATES_OPENING, WarningKind, catalog_estimates, warning_kind

    # a metric as a table shows it: headed as the metric table names it, in its table unit; a power figure the
    # simulator's power model gave marked so after its value, as the dashboard marks it (`HotColumn.shown`)
    shown = {(HOT_BY_NAME[k].header if k in HOT_BY_NAME else k):
             (HOT_BY_NAME[k].shown(v, point.power_source) if k in HOT_BY_NAME else v)
             for k, v in describe(point).items() if v is not None and v != []}
    if point.cost is not None and any(HOT_BY_NAME[k].header in shown for k in HOT_BY_NAME
                                      if HOT_BY_NAME[k].metric.assumed):
        # the price its cost was figured at, with whose it is and when: a stored (or reused) result keeps the price
        # of its day, whatever the catalog says now
        shown["assumed price"] = point.cost.price_words()
    accepted = point.summary.provenance.acceptance if point.summary is not None else None
    if accepted is not None and accepted.value is not None:  # the AL a simulated speculative point ran at, and whose
        # (its basis, as the simulator wrote it: which curve or typical figure, and that the job measures real AL)
        shown["acceptance length"] = (f"{accepted.value:g} ({accepted.source or 'source unrecorded'}"
                                      + (f": {accepted.basis})" if accepted.basis else ")"))
    prov = point.summary.provenance if point.summary is not None else None
    if prov is not None and prov.estimated and not any(warning_kind(w) is WarningKind.CATALOG_ESTIMATES
                                                       for w in warnings):
        # the catalog estimates the simulator modelled the point with, where its run's warning (below) does not say
        # them: a run recorded before the run warned of them
        shown["catalog estimates"] = catalog_estimates(prov.estimated).removeprefix(CATALOG_ESTIMATES_OPENING)
    hardware = prov.hardware if prov is not None and not isinstance(prov.hardware, str) else None
    if hardware is not None:  # where it ran, as it was read there (absent: not read, or a simulated point)
        if names := hardware.gpu_names:
            shown["gpu names"] = (f"{len(names)}x {names[0]}" if len(set(names)) == 1 else ", ".join(names)) + (
                f", driver {hardware.driver_version}" if hardware.driver_version else "")
        if (state := hardware.gpu_state_text()) is not None:
            shown["gpu state"] = state
        if hardware.host is not None:
            shown["server host"] = hardware.host.text()
    shown.update({f"warning {i}": w for i, w in enumerate(warnings, 1)})  # what its run warned of (run's ⚠N)
    width = max(map(len, shown))
    for key, value in shown.items():  # a list (reasons, an eval's reasons): one line each, under one another
        lines = [str(v) for v in value] if isinstance(value, list | tuple) else [value]
        for i, line in enumerate(lines):
            click.echo(f"{key if i == 0 else '':>{width}}  {line}")


@results.command("frontier")
@click.argument("run", required=False, metavar="[RUN]")
@option("run_id", help="Run id in the store, or a run directory (or give it as the argument).")
@click.option("--x", "x_axis", default="p90_e2e_norm_intvty", show_default=True, help="x axis key.")
@option("mix_sources")
@json_option()
@store_option()
def frontier(run: str | None, run_id: str | None, x_axis: str, mix_sources: bool, as_json: bool,
             store_path: Path | None) -> None:
    """Per-series Pareto frontier of RUN (a stored run id or a run directory; `--run RUN` alike): throughput per GPU
    against an x axis, north-star rule."""
    from llmsweep.results.frontier import AXIS_BY_KEY, axis_value, compute_frontiers, no_frontier_why
    from llmsweep.results.sides import resolve_points, reused_points_of

    if run is not None and run_id is not None and run != run_id:
        raise click.UsageError(f"two runs given, {run} and --run {run_id}: give one")
    run_id = run if run is not None else run_id
    if run_id is None:
        raise click.UsageError("give the run: `llmsweep results frontier RUN` (a stored run id or a run directory)")
    if x_axis not in AXIS_BY_KEY:
        raise ResultInputError(f"unknown x axis {x_axis!r}", fix=f"use one of {', '.join(AXIS_BY_KEY)}")
    with _open(store_path) as store:
        resolved, points = resolve_points(run_id, store, left_out())
        meta = store.run_meta(resolved) if store.has_run(resolved) else {}
        folder = None
        if Path(run_id).is_dir():
            from llmsweep.results.rundir import load_run

            folder = load_run(run_id)
            meta = meta or folder.meta
        # the points `run --reuse` stood jobs on are in the run's series and frontiers, as its dashboard draws them
        points += list(reused_points_of(store, meta, resolved, gone=lambda line: click.echo(line, err=True)).values())
        # what each point's run warned of it, marked `⚠N` as `results list` marks it: a run folder's own outcomes,
        # the store's for a stored run (and for the runs the reused points were measured in)
        warned = store.job_warnings(r for r in dict.fromkeys(p.run_id for p in points) if store.has_run(r))
        if folder is not None:
            warned.update(_run_warnings(folder))
    from llmsweep.results.repeats import combine_repeats

    groups = {r.point.result_id: r for r in combine_repeats(points)}  # a point measured N times is one point
    points = [r.point for r in groups.values()]
    from llmsweep.results.frontier import name_series

    # two images, or two configurations of one point, are two series, each named by what tells them apart
    names = name_series(points, mix_sources=mix_sources)
    fronts = compute_frontiers(points, [AXIS_BY_KEY[x_axis]], series_of=names.keys)[x_axis]
    by_id = {p.result_id: p for p in points}
    from llmsweep.metrics.registry import HOT_BY_NAME
    from llmsweep.results.frontier import series_labels

    x, y = AXIS_BY_KEY[x_axis], HOT_BY_NAME["tput_per_gpu"]
    # each series as its table's title and the run's dashboard name it (`AL 3.39 est.` where the simulator estimated)
    labels = series_labels(points, names.keys, names.labels)
    # each point says its series and the axes its x and y are on, in the units they are given in (stored: a latency
    # in s, which the table shows in ms)
    axes = {"x_axis": x.key, "x_label": x.label, "x_unit": x.unit, "y_axis": y.name, "y_label": y.label,
            "y_unit": y.unit}
    doc: dict[str, list[dict[str, Any]]] = {
        series: [{"result_id": i, "job_id": by_id[i].job_id, "conc": by_id[i].identity.conc,  # the table's columns
                  "x": axis_value(by_id[i], x_axis),
                  "y": by_id[i].metric("tput_per_gpu"), "verdict": by_id[i].verdict,
                  "warnings": warned.get((by_id[i].run_id, by_id[i].job_id), []),  # as `results list --json`'s
                  "repeats": groups[i].as_dict(), "series": labels[series], **axes} for i in ids]
        for series, ids in fronts.items()}
    no_frontier: dict[str, str] = {}  # why a series (or, under "", the run) has none
    if not points:  # nothing to draw a frontier from: say why, and where an all-reused run's points are
        from llmsweep.results.rundir import reused_of

        sources = sorted({str(r.get("run_id")) for r in reused_of(meta).values()})
        no_frontier[""] = f"run {resolved} has no result: no frontier" + (
            f" — its {count_of(len(reused_of(meta)), 'job')} stood on stored results of {noun(len(sources), 'run')} "
            f"{', '.join(sources)} "
            f"(`run --reuse`): `llmsweep results frontier {sources[0]}`" if sources else "")
    for key, ids in fronts.items():
        if not ids:  # no point of the series is valid with the axis's value (smoke never stands on a frontier)
            mine = [p for p in points if names.keys[p.result_id] == key]
            no_frontier[key] = f"{labels[key]}: {no_frontier_why(mine, x)}: no frontier"
    if as_json:  # the frontiers on stdout; why a series has none on stderr, as the table says it
        click.echo(json.dumps(doc, indent=1))
        for line in no_frontier.values():
            click.echo(line, err=True)
        return
    from llmsweep.cli.tables import job_labels
    from llmsweep.results.identity import get_field

    shown = (y,) if x.key == "conc" else (HOT_BY_NAME[x.key], y)  # the concurrency axis is a column already
    x_unit = HOT_BY_NAME[x.key].table_unit if x.key in HOT_BY_NAME else x.unit  # as the column shows it (ms)
    click.echo(f"x: {x.label} ({x_unit}), y: {y.label} ({y.table_unit})")
    # one table per series, laid out as `results list` is: result ids whole, job ids shortened to fit; the figures as
    # every table shows a metric (`HotColumn.cell`)
    repeated = any(groups[i].n > 1 for ids in fronts.values() for i in ids)
    columns = [Column("result", kind="id", justify="left"), Column("job", kind="key", justify="left"), Column("conc"),
               *(Column(c.header) for c in shown), *([Column("repeats", justify="left")] if repeated else [])]
    if "" in no_frontier:
        click.echo(no_frontier[""])
        return
    from llmsweep.cli.verdicts import Notes, verdict_cell

    for key, ids in fronts.items():
        if not ids:
            click.echo(no_frontier[key])
            continue
        front = [by_id[i] for i in ids]
        exp_names = {p.job_id: str(name) for p in front if (name := get_field(p.job, "exp_name"))}
        rows = [[plain(p.result_id), plain(p.job_id), str(p.identity.conc),
                 *(c.cell(p.metric(c.name)) for c in shown),
                 *([groups[p.result_id].describe() or "1 run"] if repeated else [])] for p in front]
        # every point of a frontier is valid, so no verdict column; but a point its run warned of (`sim_warnings`: a
        # real engine would refuse it, the simulator does not model what it sets, catalog estimates) has its verdict
        # marked `⚠N` as `results list` marks it, the warning said under the table
        notes = Notes()
        marks = [notes.number(warned.get((p.run_id, p.job_id), [])) for p in front]
        table = columns
        if notes.said:
            table = [*columns, Column("verdict", justify="left")]
            rows = [[*row, verdict_cell(p.verdict, notes=m)] for row, p, m in zip(rows, front, marks, strict=True)]
        title = f"{labels[key]}: frontier"
        print_tables(plain(title), table, rows, caption=plain("\n".join(notes.lines())) or None,
                     short_keys=[plain(j) for j in job_labels([p.job_id for p in front], exp_names)])


@results.command("export")
@option("run_id", help="Only this run (default: every stored result).")
@option("format", type=click.Choice(["json", "csv", "inferencex", "inferencex-evals"]), default="json",
              show_default=True, help="inferencex-evals: InferenceX's eval rows (agg_eval_all.json shape).")
@out_option("File (default stdout); one that is not empty (an earlier export, or any other file) is refused unless "
            "--force.",
            type=PathValue(dir_okay=False, path_type=Path))
@option("force", help="Replace the file --out names.")
@click.option("--include-unpublished", is_flag=True,
              help="inferencex: also the points InferenceX does not publish (simulated, predicted, smoke, invalid), "
                   "each marked `benchmark_outcome: {status: failed}` (the app drops it) and, when not measured, "
                   "with its `source`; inferencex-evals: also the evals that were not measured (simulated, "
                   "predicted) and the eval runs that did not complete (no score), marked the same way, a failed "
                   "run with its error.")
@store_option()
def export(run_id: str | None, fmt: str, out: Path | None, force: bool, include_unpublished: bool,
           store_path: Path | None) -> None:
    """Export results: our lossless JSON, flat CSV, InferenceX aggregate rows, or InferenceX eval rows.

    InferenceX rows hold only valid, measured points unless --include-unpublished; what is left out is said on
    stderr."""
    from llmsweep.results.interchange import RowKind, export_points, left_out

    if out is not None:  # before the store is read
        refuse_replacing(out, held := held_results(out), force=force, what=_held_export(out) if held else "")
        refuse_unwritable(out, folder=False, makes_parents=False)
    with _open(store_path) as store, saying(f"reading {f'run {run_id}' if run_id else 'every result'} from "
                                            f"{store.path}"):
        store.require_run(run_id)
        points = store.results(run_id)
        stood_on: list[ResultPoint] = []
        if run_id is not None:  # each result is exported once, under the run that measured it
            from llmsweep.results.sides import reused_points_of

            meta = store.run_meta(run_id)
            reused_points_of(store, meta, run_id, lambda line: click.echo(line, err=True))
            if fmt == "inferencex":  # but a point the run measured in part is the mean of every repeat it stands on
                stood_on = list(reused_points_of(store, meta, run_id).values())
        warned = store.job_warnings(p.run_id for p in [*points, *stood_on])
        started = {r.run_id: r.started for r in store.runs()}
    with saying(f"exporting {count_of(len(points), 'result')} as {fmt}"):
        text = export_points(points, fmt, include_unpublished=include_unpublished, warnings=warned, stood_on=stood_on,
                             started=started)
    kinds: dict[str, tuple[RowKind, str]] = {"inferencex": ("throughput", "point"),
                                             "inferencex-evals": ("eval", "eval row")}
    rows = kinds.get(fmt)
    if rows is not None and not include_unpublished and (skipped := left_out(points, rows[0])):
        what = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
        click.echo(f"left out {count_of(sum(skipped.values()), rows[1])} InferenceX does not publish ({what}); "
                   "--include-unpublished exports them marked failed", err=True)
    if out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        from llmsweep.atomic import write_text

        write_text(out, text)  # whole or not at all: a kill or a full disk leaves the file --force would replace
        click.echo(f"wrote {out}", err=True)


def _refuse_folder_import(path: Path) -> None:
    """`results import` of a folder (it reads an export file): a run folder, or a folder inside one (a job folder, its
    report), is named with the `results ingest` that stores the run; any other folder as what it is
    (`rundir.FOLDER_KINDS`)."""
    from llmsweep.results.rundir import FOLDER_KINDS, enclosing_out, folder_kind, said_path

    what = "`results import` reads an export file (`results export`'s JSON, InferenceX rows)"
    kind = folder_kind(path)
    outer = enclosing_out(path) if kind in ("job", "other") else None
    if kind == "run" or (outer is not None and outer[1] == "run"):
        run = str(path) if outer is None else said_path(outer[0])
        said = (FOLDER_KINDS["run"] if outer is None else
                f"a job folder of the run {run}" if kind == "job" else f"a folder inside the run {run}")
        raise ResultInputError(f"{path} is {said}, not a file: {what}",
                               fix=f"store the run with `llmsweep results ingest {run}`")
    raise ResultInputError(f"{path} is {FOLDER_KINDS[kind]}, not a file: {what}",
                           fix="pass the file `llmsweep results export --out FILE` wrote, or an InferenceX "
                               "agg_*.json (`llmsweep results ingest RUN` stores a run folder)")


def _held_export(path: Path) -> str:
    """What a file that is not empty holds, as `results export --out` refuses it: an export by its shape (our JSON's
    `format`, a JSON list of rows as an `inferencex` export writes, our CSV's header), else something that is not an
    llmsweep export, with its size. Read from its first 64 KiB: an export says what it is at its start."""
    import re

    from llmsweep.results.interchange import EXPORT_FORMAT, _our_csv

    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 16).decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    except OSError:
        head = ""
    if head.startswith("{") and re.search(rf'"format"\s*:\s*"{EXPORT_FORMAT}"', head):
        return "an llmsweep export (JSON)"
    if re.match(r"\[\s*(\]|\{)", head):
        return "a JSON list of rows (the shape of an inferencex export)"
    if _our_csv(path):
        return "an llmsweep export (CSV)"
    return f"something that is not an llmsweep export ({count_of(path.stat().st_size, 'byte')})"


@results.command("import")
@click.argument("file", type=PathValue(exists=True, path_type=Path))
@option("force", help="Replace an earlier import of a run with this file's rows even when that drops results the "
        "store holds for it (an import lacking some of them is refused without this).")
@store_option()
def import_cmd(file: Path, force: bool, store_path: Path | None) -> None:
    """Import an export of ours or InferenceX aggregate result JSON as its own run (source kept); replacing an
    earlier import with fewer of the run's results is refused unless --force. A run folder is refused, naming
    `results ingest`, which stores it."""
    from llmsweep.results.interchange import import_into, read_import

    if file.is_dir():
        _refuse_folder_import(file)
    with saying(f"reading {file} ({file.stat().st_size / 1e6:.0f} MB)"):
        parsed = read_import(file)  # a file that imports nothing is refused before the store is opened (or made)
    with _open(store_path, readonly=False) as store, saying(f"importing into {store.path}"):
        done = import_into(store, file, parsed, force=force)
    rows = ", ".join(map(str, parsed.copies[:10])) + (f" and {len(parsed.copies) - 10} more"
                                                      if len(parsed.copies) > 10 else "")
    copies = (f"; {count_of(len(parsed.copies), 'duplicate row')} skipped ({noun(len(parsed.copies), 'row')} {rows}: "
              "the same content as an earlier row, stored once)") if parsed.copies else ""
    if done.already:
        jobs = ", ".join(f"{run}/{job}" for run, job in done.already[:5]) + (
            f" and {len(done.already) - 5} more" if len(done.already) > 5 else "")
        copies += (f"; {count_of(len(done.already), 'result')} already stored, skipped ({jobs}: the store holds each "
                   "whole, its throughput and its eval, from an earlier import of the JSON export)")
    run_ids = done.run_ids
    click.echo(f"imported {count_of(done.stored, 'result')} as {noun(len(run_ids), 'run')} {', '.join(run_ids)}"
               f"{copies}")


IGNORABLE: tuple[str, ...] = ("image", "engine", "hardware", "precision", "tp", "pp", "dcp", "pcp", "ep", "dp_attn",
                              "spec", "offload", "offload_backend", "model", "workers", "router", "corpus")
"""The identity fields `compare --ignore` may leave out of point matching (its choices; `compare_points` refuses the
topology's with the reason, and names those of them that would match points where none did)."""


@click.command()
@click.argument("runs", nargs=-1, metavar="A B | B --baseline A")
@option("baseline", help="The baseline run (stored run id or run directory); the one argument is then the run under "
        "test.")
@option("repeats_from", multiple=True,
              help="Further runs of A's points (dir or run id); repeatable.")
@option("b_repeats_from", multiple=True, help="Further runs of B's points (dir or run id).")
@click.option("--ignore", "ignore", cls=Opt, listed=True,
              type=click.Choice(IGNORABLE),
              help="Identity field to leave out of point matching (named in the output).")
@option("mix_sources")
@click.option("--no-history", is_flag=True, help="Do not use earlier stored runs of the same points as repeats.")
@option("seed", default=None, hidden=True, help="No longer used: the within-run band draws nothing at random.")
@click.option("--resamples", default=None, type=click.IntRange(min=2), hidden=True,
              help="No longer used: the within-run band is the exact bootstrap, over every resample.")
@json_option("the deltas, bands and verdicts")
@click.option("--markdown", "markdown", type=PathValue(dir_okay=False, path_type=Path), default=None,
              help="Also write a PR-comment table to this file.")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when any metric is a (between-run) regression; "
              "exit 2 when nothing was compared though the points differ only in the image or corpus they were "
              "measured under (the same points: `--ignore` pairs them).")
@option("format", type=click.Choice(["table", "json", "markdown"]), default=None,
              help="`markdown`: the pull-request verdict (per point improvement / regression / no change / "
              "unverified, and the sweep's success rate) on stdout; `json` is --json; default: the table.")
@store_option()
def compare(runs: tuple[str, ...], baseline: str | None, fmt: str | None, repeats_a: tuple[str, ...],
            repeats_b: tuple[str, ...], ignore: tuple[str, ...],
            mix_sources: bool, no_history: bool, seed: int | None, resamples: int | None, as_json: bool,
            markdown: Path | None,
            fail_on_regression: bool, store_path: Path | None) -> None:
    """Compare run B against run A point by point, with noise bands (A, B: run directories or stored run ids).

    Only a between-run band (repeats: `llmsweep run --repeats N`, --repeats-from, or earlier stored runs) may call a
    change an improvement or a regression; `--baseline A --format markdown` gives a pull request's verdict.
    """
    from llmsweep.results.compare import compare_points
    from llmsweep.results.rundir import retired_of
    from llmsweep.results.sides import (
        history_from_store,
        is_folder,
        recorded_inputs,
        recorded_measurements,
        resolve_points,
        run_meta_of,
        run_started,
        stands_on_stored,
        stood_on_points,
    )

    if seed is not None or resamples is not None:  # accepted, so a script that passes them still runs: said
        click.echo("note: compare's --seed and --resamples no longer apply: the within-run band is the exact "
                   "bootstrap, over every resample of the requests (the same band for any seed)", err=True)
    expected = 1 if baseline is not None else 2
    if len(runs) != expected:
        raise click.UsageError("give the run under test after --baseline RUN" if baseline is not None
                               else "give two runs, A (the baseline) and B, or --baseline A and B")
    a, b = (baseline, runs[0]) if baseline is not None else runs
    if as_json and fmt not in (None, "json"):  # markdown won, and a script reading JSON got a PR comment
        raise click.UsageError(f"--json and --format {fmt} ask for two outputs on stdout: give one of them")
    as_json = as_json or fmt == "json"
    if markdown is not None:  # before the store is read
        refuse_unwritable(markdown, folder=False, option_name="--markdown", makes_parents=False)
    # the store is opened only where it is read: a stored run id names a side, or earlier runs join A's noise band
    # (`compare DIR DIR --no-history` needs none, and a damaged default store must not stop it)
    # (and where either run stood jobs on stored results, `run --reuse`: the baseline's are its points too, and what
    # the run under test stood on is the result the store reads for it — its record's ids name the job's result,
    # which a later measurement of the job holds once its run measured it again: `_success`)
    needs_store = not no_history or not all(map(is_folder, (a, b, *repeats_a, *repeats_b))) \
        or stands_on_stored(a) or stands_on_stored(b)
    with _open(store_path) if needs_store else contextlib.nullcontext() as store:
        warn = left_out()
        label_a, pa = resolve_points(a, store, warn)
        # the baseline's points are those its frontier draws: its own and the stored results it stood jobs on
        stood_a = stood_on_points(a, label_a, store, lambda why: click.echo(f"warning: {why}", err=True))
        pa = [*pa, *stood_a]
        label_b, pb = resolve_points(b, store, warn)
        repeats = [(ref, resolve_points(ref, store, warn)[1]) for ref in (*repeats_a, *repeats_b)]
        ra = [p for _, points in repeats[:len(repeats_a)] for p in points]
        rb = [p for _, points in repeats[len(repeats_a):] for p in points]
        # the reuse key each result ran under: two virtual-time results of one key are one result's figures again
        inputs = {**recorded_inputs(a, label_a, store), **recorded_inputs(b, label_b, store)}
        # the measurement definitions each was measured under (run.json): said beside a verdict where they differ
        measured = {k: v for ref, points in ((a, pa), (b, pb), *repeats)
                    for k, v in recorded_measurements(ref, points, store).items()}
        used = {label_a, label_b, *(p.run_id for p in ra + rb)}
        starts = [t for ref, run_id in ((a, label_a), (b, label_b)) if (t := run_started(ref, run_id, store))]
        history = [] if no_history or store is None else history_from_store(
            store, used, max(starts, default=None), lambda why: click.echo(f"warning: {why}", err=True),
            # matched exactly (no --ignore): only A's points can join its noise estimate
            point_keys=None if ignore else {p.identity.key() for p in pa})
        history = [p for p in history if p.result_id not in {q.result_id for q in stood_a}]  # A's own, not history
        verdict = fmt == "markdown" or baseline is not None  # the pull request's verdict, and its success rate
        # the table lists what B reused from A too, and A's points B ran without a result (B's run record)
        gone_b: list[str] = []
        success, reused, elsewhere, meta_b, stood_b = _success(b, label_b, pb, store, gone_b.append)
        success = success if verdict else None  # --markdown FILE and the table need only the results B reused
        retired_a = retired_of(run_meta_of(a, store)) if stood_b else {}  # A's jobs its recipe no longer plans
    comp = compare_points(pa, pb, label_a=label_a, label_b=label_b, repeats_a=ra, repeats_b=rb, history=history,
                          ignore=ignore, mix_sources=mix_sources, inputs=inputs,
                          measurements=measured, ignorable=IGNORABLE)
    from llmsweep.results.verdict import (
        earlier_note,
        left_out_note,
        lost_by_b,
        lost_note,
        partly_reused,
        stood_on_earlier,
        stood_on_left_out,
    )

    if earlier := stood_on_earlier(comp, stood_b):  # B stands on A's earlier measurement of a job A measured again
        comp = dataclasses.replace(comp, earlier=earlier)
        comp = dataclasses.replace(comp, notes=(*comp.notes, earlier_note(comp)))
    if unshown := stood_on_left_out(comp, stood_b):  # B stands on a result of A's job A no longer plans: said
        comp = dataclasses.replace(comp, notes=(*comp.notes, left_out_note(comp, unshown, retired_a)))
    if gone_b:  # B stood jobs on results the store no longer holds as reused: compared with nothing, said
        comp = dataclasses.replace(comp, notes=(*comp.notes, *gone_b))
    if lost := lost_by_b(comp, meta_b):  # B ran A's valid point and got no result: a point the change lost
        comp = dataclasses.replace(comp, lost=tuple(lost), notes=(*comp.notes, lost_note(lost)))
    if partly := partly_reused(comp, reused):  # B's point stands on A's repeats too: said where B's side is shown
        comp = dataclasses.replace(comp, notes=(*comp.notes, *partly))
    if stood_a:  # A's points that are stored results of other runs: said, as its dashboard marks them
        sources = sorted({p.run_id for p in stood_a})
        comp = dataclasses.replace(comp, notes=(*comp.notes, (
            f"A ({label_a}) stood {count_of(len(stood_a), 'job')} on stored results of {noun(len(sources), 'run')} "
            f"{', '.join(sources)} (`run "
            "--reuse`): they are A's points here, as its dashboard draws them")))
    a_ids = {p.result_id for p in pa}  # B's jobs that stand on what A stands on are reused from A, said as such
    stood_elsewhere = [run for run, result_id in elsewhere.values() if run != label_a and result_id not in a_ids]
    if stood_elsewhere:  # B stood jobs on results of a third run: compared nowhere here, so said where they are
        others, n = sorted(set(stood_elsewhere)), len(stood_elsewhere)
        comp = dataclasses.replace(comp, notes=(*comp.notes, (
            f"B ({label_b}) stood {count_of(n, 'job')} on stored results of {noun(len(others), 'run')} "
            f"{', '.join(others)} (`run --reuse`), not "
            f"on A's: this comparison leaves them out (`llmsweep compare {a} {others[0]}` compares them)")))
    if markdown is not None:
        from llmsweep.report.markdown import comparison_markdown

        markdown.write_text(comparison_markdown(comp, reused=reused), encoding="utf-8")
    if fmt == "markdown" and success is not None:
        from llmsweep.report.verdict import verdict_markdown

        click.echo(verdict_markdown(comp, success, reused=reused), nl=False)
    elif as_json:
        from llmsweep.results.verdict import verdict_as_dict

        doc = comp.as_dict(reused)  # A's points B reused are `reused`, not `only_a`, as the table lists them
        if success is not None:  # --baseline: the pull request's verdict, as the markdown gives it
            doc["verdict"] = verdict_as_dict(comp, success, reused)
        click.echo(json.dumps(doc, indent=1, default=str))
    else:
        _print_comparison(comp, reused)
    if fail_on_regression and not comp.matched and comp.skipped:
        # every point it could pair was refused (sources differ, two configurations of a point): a gate that compared
        # nothing passed in silence, and a baseline of the wrong kind let every change through
        reasons = "; ".join(dict.fromkeys(s.reason for s in comp.skipped))
        raise ResultError(f"nothing was compared: {count_of(len(comp.skipped), 'result')} "
                          f"{'was' if len(comp.skipped) == 1 else 'were'} not compared ({reasons})",
                          fix="compare with a baseline of the same source and configuration (or pass --mix-sources "
                              "to compare across sources on purpose)")
    if fail_on_regression and comp.mispaired:  # the same points under another corpus, image, …: nothing compared
        # (B's new configurations alone, with nothing near them, still pass: no point of A was measured again)
        raise ResultInputError(f"nothing was compared: {comp.unmatched}",
                                   fix="compare with a baseline that ran the same points; where an identity field "
                                       "named above differs on purpose, `compare --ignore FIELD` leaves it out of "
                                       "matching")
    if fail_on_regression and (comp.regressions or comp.invalidated or comp.lost):
        # counted as the verdict counts them (points), with the metrics that regressed beside
        from llmsweep.results.verdict import verdict_counts

        points = verdict_counts(comp)["regression"] or len({id(point) for point, _ in comp.regressions})
        said = [f"{count_of(points, 'point')} regressed beyond run-to-run noise "
                f"({count_of(len(comp.regressions), 'metric')})"] \
            if comp.regressions else []
        said += [f"{count_of(len(comp.invalidated), 'point')} B measured invalid where A's is valid"] \
            if comp.invalidated else []
        said += [f"{count_of(len(comp.lost), 'point')} B ran without a result where A's is valid"] if comp.lost else []
        where = "the verdict above" if fmt == "markdown" else "the table above"
        raise ResultError(", ".join(said),
                          fix=f"inspect {where}" + ("; re-run with more repeats if the band is wide"
                                                    if comp.regressions else "")
                          + ("; B's run record gives each lost point's reason" if comp.lost else ""))


def _success(ref: str, run_id: str, points: list[Any], store: Any, gone: Callable[[str], None] | None = None
             ) -> tuple[Any, frozenset[str], dict[str, tuple[str, str]], Mapping[str, Any], dict[str, ResultPoint]]:
    """The success rate of the run under test, the stored result ids it reused (`run --reuse`), per reused job the
    run and result it stood on, its run record (its run.json, a directory, or the store's copy of it), and the stored
    results its reused jobs stand on as the store reads them ({} without a store).

    With a store, what a job stood on is the result the store reads for it (`Store.reused_points`, as the run's
    frontier and dashboard draw it): where the source run measured the job again since and kept the earlier attempt
    for this run (`rundir.KEPT_ATTEMPTS`), that attempt's result, not the job's result id the record names — which
    the new measurement holds now, and which `compare` had listed as reused by this run. A job whose result the store
    no longer holds as reused stood on nothing here (`sides.REUSED_GONE`; `gone` is told of them); the record's ids
    name the rest."""
    from llmsweep.results.rundir import is_run_dir, load_run, reused_of, reused_result_ids
    from llmsweep.results.sides import reused_points_of
    from llmsweep.results.verdict import success_rate

    meta = load_run(Path(ref)).meta if is_run_dir(Path(ref)) else store.run_meta(run_id)
    stood = {job: (str(src.get("run_id")), str(src.get("result_id"))) for job, src in reused_of(meta).items()}
    if store is None:  # nothing to read them back from: as the record names them
        return success_rate(meta, points), reused_result_ids(meta), stood, meta, {}
    found = reused_points_of(store, meta, run_id, gone=gone, left="compared")
    stood.update({job: (p.run_id, p.result_id) for job, p in found.items()})
    return success_rate(meta, points), frozenset(p.result_id for p in found.values()), stood, meta, found


def _print_comparison(comp: Any, reused: frozenset[str] = frozenset()) -> None:
    """The comparison as terminal tables; `reused`: the stored result ids B stood jobs on (`run --reuse`): A's points
    among them are listed as reused by B, as `--markdown FILE` lists them, not as points B does not have."""
    from llmsweep.metrics.registry import HOT_BY_NAME
    from llmsweep.report.markdown import VERDICT_MARK, delta_cell, signed, verdict_legend
    from llmsweep.results.compare import VERDICT_MEANING, apart_words
    from llmsweep.results.verdict import lost_lines, lost_note, reused_from_baseline

    con = table_console()
    if any(comp.sides):  # the sides' figures differ in kind (--mix-sources, virtual vs wall-clock time): say which
        for which in ("a", "b"):
            label, what = comp.side(which)
            con.print(f"{which.upper()}: {plain(label)} — {what}")
    # said in red where the table lists A's points: A's points B lost, and why none of A's matches one of B's
    said = {lost_note(comp.lost) if comp.lost else None, comp.unmatched or None}
    for note in comp.notes:
        if note not in said:
            con.print(f"[yellow]note:[/] {note}")
    # laid out as every table is (`cli.tables.print_tables`): A's and B's figures and the verdict whole, the metric's
    # label what gives, the band's words wrapped at their spaces
    columns = [Column("metric", kind="key", justify="left"),
               Column(f"A{f' ({comp.sides[0]})' if comp.sides[0] else ''}"),
               Column(f"B{f' ({comp.sides[1]})' if comp.sides[1] else ''}"),
               Column("Δ ± band", kind="text", justify="left", min_width=16), Column("verdict", justify="left")]
    for pc in comp.matched:
        rows = []
        for d in pc.deltas:  # A, B and the delta as every table shows the metric (the unit in its name)
            hot = HOT_BY_NAME[d.metric]
            rows.append([plain(hot.header), hot.cell(d.a), hot.cell(d.b), plain(delta_cell(d)),
                         VERDICT_MARK[d.verdict]])
        if pc.served_apart:  # another build, power limit, clock or client served B: beside the verdicts
            rows.append(["served apart", "", "", plain(apart_words(pc.served_apart)), ""])
        if pc.eval is not None:
            e = pc.eval
            band = f" ± {_num(e.band, 4)} ({e.band_words})" if e.band is not None else ""
            kinds = f" (A {e.mode_a}, B {e.mode_b})" if e.mode_a != e.mode_b else ""  # which kind of job ran each
            delta = "–" if e.delta is None else signed(e.delta, lambda x: _num(x, 4))  # signed as every delta is
            rows.append([plain(f"eval {e.task} score{kinds}"), plain(f"{_num(e.a, 4)} ({e.verdict_a})"),
                         plain(f"{_num(e.b, 4)} ({e.verdict_b})"), plain(f"{delta}{band}"),
                         VERDICT_MARK[e.verdict]])
            if e.differs:  # said where the verdict is: the scores are of other samples or budgets
                rows.append(["", "", "", plain(f"not compared: {e.differs}"), ""])
        print_tables(plain(f"{pc.label}  (runs A {pc.runs('a')}, B {pc.runs('b')}, history {pc.history})"), columns,
                     rows, console=con)
        if pc.past:  # the earlier stored runs that joined A's noise band: same point, same configuration, valid
            con.print("history (A's configuration): " + ", ".join(f"{p.run_id}/{p.job_id}" for p in pc.past))
    shown = [*(d.verdict for pc in comp.matched for d in pc.deltas),
             *(pc.eval.verdict for pc in comp.matched if pc.eval is not None)]
    if legend := verdict_legend(VERDICT_MEANING, shown):  # what the verdicts in the tables above mean
        con.print(f"verdicts: {plain(legend)}")
    taken, only_a = reused_from_baseline(comp, reused)
    gone = {x.point.result_id for x in comp.lost}  # A's points B ran without a result: said apart, in red
    only_a = [p for p in only_a if p.result_id not in gone]
    for line in lost_lines(comp.lost):
        con.print(f"[red]B ran A's valid {noun(len(comp.lost), 'point')} without a result[/] (a regression): {line}")
    for title, pts in (("reused by B from A, not measured again", taken), ("only in A", only_a),
                       ("only in B", comp.only_b)):
        if pts:  # an id wider than the console breaks at its `_`/`-` joints, never mid-name
            con.print(break_long_words(f"{title}: " + ", ".join(plain(p.job_id) for p in pts), con.width))
    refused: dict[str, list[str]] = {}  # one line per reason, naming every result it kept out
    for s in comp.skipped:
        refused.setdefault(s.reason, []).append(s.point.job_id)
    for reason, jobs in refused.items():
        con.print(break_long_words(f"[red]not compared[/] {', '.join(plain(j) for j in dict.fromkeys(jobs))}: "
                                   f"{plain(reason)}", con.width))
    if not comp.matched and not comp.skipped:  # points that matched and were refused are said above, with why
        # (a side without a result is said in the notes; A's points B reused are B's, listed above as reused)
        if comp.unmatched and (only_a or comp.lost):  # which identity fields differ, and what would match (left
            # out of the notes above); not where B reused every point of A's, which is no comparison set up wrong
            con.print(break_long_words(f"[red]nothing compared[/]: {plain(comp.unmatched)}", con.width))
    elif not comp.matched:
        con.print("[red]nothing compared[/]: every point that matches was left out, for the reasons above")
