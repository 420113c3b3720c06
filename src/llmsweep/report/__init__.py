"""The report of a run: offline HTML dashboard, PNG plots and a Markdown summary.

The `run` pipeline calls :func:`write_report` once the jobs are summarised; `llmsweep report RUN` does the same.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmsweep.errors import ConfigError, ResultError
from llmsweep.jsonline import finite_or_null
from llmsweep.option_spellings import flag as _flag
from llmsweep.report.data import build_payload, own_point
from llmsweep.report.html import render_html
from llmsweep.report.markdown import run_summary_markdown
from llmsweep.report.plots import PNG_PATTERN, write_pngs
from llmsweep.results.point import ResultPoint, points_from_run
from llmsweep.results.rundir import RunDir, load_run
from llmsweep.words import count_of

_OUT = _flag("out")


log = logging.getLogger(__name__)

__all__ = ["ReportFiles", "write_report"]


@dataclass(frozen=True, slots=True)
class ReportFiles:
    out_dir: Path
    html: Path
    markdown: Path
    data: Path
    pngs: list[Path] = field(default_factory=list)
    points: int = 0
    invalid: int = 0
    missing: int = 0
    """Jobs planned and never run (the run stopped before them, or is still going)."""
    smoke: int = 0
    refused: int = 0
    """Jobs refused before running (policy, unsupported)."""
    failed: int = 0
    """Jobs that ran, or began to, and left no result (interrupted, a launch that failed, a summary that does not
    read: those also in `unreadable`). Refused, failed and missing are counted apart, as the page counts them
    (`report.data.run_counts`)."""
    reused: int = 0
    """Jobs `run --reuse` stood on earlier runs' results (not counted as missing)."""
    reused_drawn: int = 0
    """Of those, the ones whose stored result is drawn (read from the store; not counted in `points`)."""
    empty: str | None = None
    """What the page says when the run has no point at all; None otherwise."""
    overlaid: int = 0
    """Points of other runs drawn beside the run's own (`--with`; not counted in `points`)."""
    overlay_notes: list[str] = field(default_factory=list)
    """The overlays' points not drawn a second time, each said (`report.data.overlay_points`): wholly a point the
    page draws already."""
    evals: int = 0
    """The run's evals: an eval-only job's result (not counted in `points`), a run-eval row's eval."""
    evals_failed: int = 0
    """Of those, the ones that did not pass (an eval-only job's, counted here and not in `invalid`)."""
    unreadable: list[dict[str, str]] = field(default_factory=list)
    """Of the failed jobs, those whose summary.json is there but not read (it does not read, or no job.json is
    beside it): each `job_id` and its `reason`, with the fix; the page and summary.md list them too."""
    stale_pngs: list[Path] = field(default_factory=list)
    """`pareto_*.png` an earlier report left in the folder that this one did not draw again (written without plots:
    `run`, `report --no-png`), removed: they drew an earlier attempt's numbers under the same run id (a `run --force`
    or `--resume` into the same --out)."""


def write_report(run: RunDir | Path | str, out_dir: Path | str | None = None, *, png: bool = True,
                 overlay: Sequence[ResultPoint] = (), mix_sources: bool = False,
                 store: Path | str | None = None) -> ReportFiles:
    """Write `index.html`, `summary.md`, `data.json` and `pareto_<axis>.png` for a run (default `RUN/report/`).

    `overlay`: points of other runs (e.g. imported published rows) drawn as separate, tagged series.
    `mix_sources`: let measured, simulated and predicted points share series and frontiers.
    `store`: the results store the run's `--reuse` jobs were stood on; their stored results are read from it and
    drawn, marked as reused (None: not read; those jobs are listed without a point).
    """
    # a job whose summary.json does not read is listed as unreadable, its fix said; the rest is drawn
    run = run if isinstance(run, RunDir) else load_run(run, set_aside=True)
    out = Path(out_dir) if out_dir is not None else run.path / "report"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create report folder {out}: {exc}", fix=f"pass {_OUT} to a writable folder") from exc
    points = points_from_run(run)
    reused, unread = reused_points(run, store)
    payload = build_payload(run, points, overlay=overlay, mix_sources=mix_sources, reused=reused,
                            reused_unread=unread)
    html_path, md_path, data_path = out / "index.html", out / "summary.md", out / "data.json"
    html_path.write_text(render_html(payload, f"llmsweep · {run.run_id}"), encoding="utf-8")
    md_path.write_text(run_summary_markdown(payload), encoding="utf-8")
    slim = {k: v for k, v in payload.items() if k != "details"}
    data_path.write_text(json.dumps(finite_or_null(slim), indent=1, default=str), encoding="utf-8")
    pngs = write_pngs(payload, out) if png else []
    stale = remove_stale_pngs(out, keep=pngs)
    log.info("report of %s written to %s", run.run_id, out)
    # an overlay's point not drawn a second time is never dropped unsaid: on the page, in summary.md, and in
    # `overlay_notes`, which `llmsweep report` says on stderr as its other notes (`note: …`), not as a log record
    verdicts = payload["verdicts"]
    counts = payload["counts"]
    # the run's own points as the page draws and counts them (a point that is the mean of its repeats once; an
    # eval-only job's result is an eval), neither those `--reuse` stood on nor other runs' (`--with`)
    own = [p for p in payload["points"] if own_point(p, run.run_id) and not p["reused"]]
    return ReportFiles(out, html_path, md_path, data_path, pngs, len(own), sum(1 for p in own if not p["valid"]),
                       counts["missing"], smoke=sum(1 for p in own if p["verdict"] == "smoke"),
                       refused=counts["refused"], failed=counts["failed"],
                       reused=verdicts.get("reused", {}).get("count", 0),
                       reused_drawn=counts["reused_drawn"], empty=payload["empty"], overlaid=counts["overlaid"],
                       stale_pngs=stale, evals=counts["evals"], evals_failed=counts["evals_failed"],
                       overlay_notes=list(payload["overlay_notes"]),
                       unreadable=[{"job_id": m["job_id"], "reason": m["reason"]} for m in payload["missing"]
                                   if m["status"] == "unreadable"])


def remove_stale_pngs(out: Path, keep: Sequence[Path] = ()) -> list[Path]:
    """Remove the `pareto_<axis>.png` (`plots.PNG_PATTERN`) of an earlier report that this one did not draw again
    (`keep`: the plots it wrote; none with `png=False`, or without matplotlib): beside the new page they would show
    an earlier report's numbers as this run's. Returns the files removed."""
    removed = []
    for path in sorted(set(out.glob(PNG_PATTERN)) - set(keep)):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ResultError(f"cannot remove the outdated plot {path}: {exc}",
                              fix="delete it by hand, or write the report with its plots (`llmsweep report RUN`)") \
                from exc
        removed.append(path)
    if removed:
        log.info("removed %s from %s", count_of(len(removed), "outdated PNG plot"), out)
    return removed


def reused_points(run: RunDir, store: Path | str | None) -> tuple[dict[str, ResultPoint], str]:
    """The stored results the run's `--reuse` jobs stand on (job id -> point, one batched read of `store`), and
    what a job whose result is not among them says about why it is not drawn."""
    if not run.reused:
        return {}, ""
    if store is None:
        return {}, "no results store was given to read its stored result from"
    from llmsweep.errors import LlmsweepError
    from llmsweep.results.sides import REUSED_GONE
    from llmsweep.results.store import Store

    try:
        with Store(store, readonly=True) as opened:
            return opened.reused_points(run.reused, by=run.run_id), f"{REUSED_GONE} ({opened.path})"
    except LlmsweepError as exc:
        return {}, f"the results store {store} cannot be read ({exc.one_line()})"
