"""Markdown for pull-request comments: a run's summary (`summary.md`) and a comparison's table.

GitHub-flavoured tables, no HTML, short enough to paste: per series the frontier points on the north-star axis,
then every invalid point with its reasons and every job that produced no result.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from llmsweep.execute.failure_text import failure_gist
from llmsweep.metrics.registry import HOT_BY_NAME
from llmsweep.option_spellings import flag as _flag
from llmsweep.report.data import REPEATS_SPREAD, own_point, reused_jobs, reused_reason, without_result
from llmsweep.results.compare import VERDICT_MEANING, Comparison, EvalDelta, MetricDelta, apart_words
from llmsweep.results.pareto import NORTH_STAR_X
from llmsweep.results.repeats import describe_repeats
from llmsweep.results.verdict import reused_from_baseline
from llmsweep.words import count_of

_REQUEST_TIMEOUT = _flag("request_timeout")
_REUSE = _flag("reuse")


VERDICT_MARK: Mapping[str, str] = {
    "improvement": "✅ improvement", "regression": "❌ regression", "within noise": "≈ within noise",
    "unverified": "❔ unverified", "same inputs": "= same inputs", "n/a": "n/a", "no change": "➖ no change"}
"""How a verdict is shown, a metric's (`compare.Verdict`) or a point's (`verdict.PointVerdict`): every table, the
Markdown and the legend under them (`verdict_legend`)."""


_Kind = TypeVar("_Kind", bound=str)


def verdict_legend(meanings: Mapping[_Kind, str], present: Iterable[_Kind]) -> str:
    """One line that says what each verdict shown means: those of `present`, as `VERDICT_MARK` marks them, with their
    meaning (`meanings`: a metric's, `compare.VERDICT_MEANING`, or a point's, `verdict.POINT_VERDICT_MEANING`), in
    the order the meanings give them; "" when none is shown."""
    shown = set(present)
    return "; ".join(f"{VERDICT_MARK[v]} — {meaning}" for v, meaning in meanings.items() if v in shown)


MINUS = "−"
"""The sign of a negative delta in a comparison (U+2212, as wide as `+`): every signed figure there uses it."""


def signed(value: float, magnitude: Callable[[float], str]) -> str:
    """`value` with its sign always written, `+` or `MINUS` (a percentage, a delta in its metric's unit and an eval
    score alike: one style in a comparison's cells); `magnitude` writes its absolute value."""
    return ("+" if value >= 0 else MINUS) + magnitude(abs(value))


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if unit == "":
        return f"{value:.1%}" if abs(value) <= 1 else f"{value:.3g}"
    if unit == "s":
        return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


SUMMARY_COLUMNS = ("tput_per_gpu", NORTH_STAR_X, "p90_intvty", "p90_ttft", "p90_e2el")
"""The frontier table's metrics in summary.md (the PR comment)."""


def one_line(text: str) -> str:
    """`text` as one line of a Markdown list item: its first line, marked `…` when more was cut."""
    lines = text.strip().splitlines() or [""]
    return lines[0] + (" …" if len(lines) > 1 else "")


def _row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def which_points(ids: Sequence[str], by_id: Mapping[str, Mapping[str, Any]],
                 series: Mapping[str, Mapping[str, Any]]) -> str:
    """Which points a grouped line is about, as the dashboard's banners say it: `conc 4, 8` when the run has one
    series, else each series named with its concurrencies (several series share a concurrency)."""
    concs: dict[str, list[int]] = {}
    for pid in ids:
        if (p := by_id.get(pid)) is not None:
            concs.setdefault(p["series"], []).append(p["metrics"]["conc"])
    rank = {key: n for n, key in enumerate(series)}
    said = [(key, "conc " + ", ".join(str(c) for c in sorted(set(cs)))) for key, cs in concs.items()]
    return "; ".join(f"{series[key]['label']} · {text}" if len(series) > 1 and key in series else text
                     for key, text in sorted(said, key=lambda k: rank.get(k[0], len(rank))))


WARNING_HEADS = {"simulated-only": "Simulated although a real engine would refuse them",
                 "not-modelled": "Predicted without modelling all their jobs set",
                 "catalog-estimates": "Modelled with catalog figures the catalog marks as estimates",
                 "engine-version": "Served by another engine version than their recipes declare",
                 "context-served": "Served with another context length than their launches set",
                 "no-gpu": "Served on no GPU: per-GPU figures are the endpoint's",
                 "timeout-not-applied": f"Requests longer than {_REQUEST_TIMEOUT}, which virtual time does not apply"}
"""summary.md's heading of each banner of outcome warnings (`report.data.WARNING_BANNER`)."""


def run_summary_markdown(payload: Mapping[str, Any]) -> str:
    """summary.md from the dashboard payload (so the page and the comment never disagree)."""
    run = payload["run"]
    points = payload["points"]
    series = {s["key"]: s for s in payload["series"]}
    by_id = {p["id"]: p for p in points}
    invalid = [p for p in points if not p["valid"] and own_point(p, run["run_id"])]  # the run's; overlays' apart
    counts = payload["counts"]
    # stood on earlier runs' results, not missing: drawn as those runs stored them, or listed when not read
    drawn = [job for p in points if own_point(p, run["run_id"]) for job in reused_jobs(p)]
    reused = [m for m in payload["missing"] if m["kind"] == "reused"]
    missing = [m for m in payload["missing"] if m["kind"] != "reused"]
    verdicts = f" · {counts['invalid']} invalid · {counts['smoke']} smoke" if counts["points"] else ""
    lines = [f"## llmsweep run `{run['run_id']}`", "",
             f"{payload['headline']}{verdicts} · {' · '.join(without_result(counts))}"
             + (f" · {len(drawn) + len(reused)} reused ({len(drawn)} drawn)" if drawn or reused else ""), ""]
    if payload.get("empty"):
        lines += [f"**{payload['empty']}" + (" The reasons are listed below." if payload["missing"] else "") + "**", ""]
    if payload.get("overlay_notes"):  # overlay points drawn once, as the run's (report.data.overlay_points)
        lines += [f"> note: {n}" for n in payload["overlay_notes"]] + [""]
    shown = [HOT_BY_NAME[name] for name in SUMMARY_COLUMNS]  # headed and printed as every table prints them
    if series:  # no throughput point (an eval-only run, an empty one): no frontier to head a table with
        lines += ["### Frontier: throughput per GPU vs P90 E2E-normalised interactivity "
                  "(north-star rule for agentic series)", "",
                  _row(["Series", "Conc", "Topology", *(c.header for c in shown), "Verdict"]),
                  _row(["---"] * (4 + len(shown)))]
    frontier = payload["frontiers"].get(NORTH_STAR_X, {})
    gaps = (payload.get("no_frontier") or {}).get(payload["y"]["key"], {}).get(NORTH_STAR_X, {})
    notes: dict[str, int] = {}  # a warned point's verdict is marked ⚠N, the warning said once under the table
    spread = False  # a mean of repeats in the table, its figures with the repeats' SD

    def marks(p: Mapping[str, Any]) -> str:
        numbers = [notes.setdefault(w, len(notes) + 1) for w in p.get("warnings") or ()]
        return f" ⚠{','.join(map(str, sorted(numbers)))}" if numbers else ""  # in order, as the notes read

    for key, s in series.items():
        ids = frontier.get(key, [])
        if not ids:
            # why, as the page says it (report.data.frontier_gaps): no valid point with the metric, or all smoke
            lines.append(_row([s["label"], "–", "–", *("–" for _ in shown),
                               f"no frontier: {gaps.get(key, 'no valid point with the metric')}"]))
        for pid in sorted(ids, key=lambda i: by_id[i]["metrics"]["conc"]):
            p = by_id[pid]
            m = p["metrics"]
            reused_from = f" (reused from run `{p['reused']['run_id']}`)" if p["reused"] else ""
            repeats = p.get("repeats")
            # where some of its repeats were reused (a point reused whole says so already)
            from_runs = [] if p["reused"] or not repeats else [r["run_id"] for r in repeats.get("reused") or ()]
            mean_of = f" ({describe_repeats(repeats['n'], from_runs)})" if repeats else ""
            sds = (repeats or {}).get("sd") or {}
            spread = spread or any(sds.get(c.name) is not None for c in shown)
            lines.append(_row([s["label"], m["conc"], p["topology"],
                               *(c.cell(m[c.name]) + (f" ± {c.cell(sds[c.name])}" if sds.get(c.name) is not None
                                                      else "") for c in shown),
                               p["verdict"] + marks(p) + reused_from + mean_of]))
    if spread:  # as the page's and the PNGs' keys say what their bars span
        lines += ["", f"The figures of a mean of repeats read mean ± SD: {REPEATS_SPREAD}, the span of its bars on "
                      "the dashboard and in the PNGs."]
    if notes:
        lines += ["", *(f"⚠{n} {w}" + ("  " if n < len(notes) else "") for w, n in notes.items())]
    if invalid:
        lines += ["", "### Invalid points (shown in the dashboard, excluded from frontiers)", ""]
        # the point's reason as its table row says it (a mean of repeats: each cause once, with its count)
        lines += [f"- `{p['job_id']}` ({series[p['series']]['label']}, conc {p['metrics']['conc']}): "
                  + (p.get("reason") or "; ".join(p["reasons"]) or "no reason recorded") for p in invalid]
    evals = payload.get("evals") or []
    if evals:
        lines += ["", "### Evaluation (lm-eval; every exact_match metric against its threshold)", "",
                  _row(["Job", "Mode", "Task", "Score", "± stderr", "Samples", "Verdict", "Reason"]),
                  _row(["---"] * 8)]
        lines += [_row([f"`{e['job_id']}`", e["mode"], e["task"], fmt(e["score"]), fmt(e["score_stderr"]),
                        e["n_samples"] if e["n_samples"] is not None else "–", e["verdict"],
                        "; ".join(e["reasons"])]) for e in evals]  # every check that failed
    smoke = payload.get("verdicts", {}).get("smoke")
    if smoke:
        lines += ["", f"### Smoke points ({smoke['count']}: they ran, but too little to be valid)", ""]
        lines += [f"- ×{g['count']} {g['reason']} — {which_points(g['ids'], by_id, series)}"
                  for g in smoke["reasons"]]
    theirs = payload.get("overlay_verdicts") or {}
    for kind, head in (("invalid", "Invalid points of the overlaid runs"),
                       ("smoke", "Smoke points of the overlaid runs")):
        if group := theirs.get(kind):
            lines += ["", f"### {head} ({group['count']}: their results, not this run's)", ""]
            lines += [f"- ×{g['count']} {g['reason']} — {which_points(g['ids'], by_id, series)}"
                      for g in group["reasons"]]
    for kind, head in WARNING_HEADS.items():
        if warned := payload.get("verdicts", {}).get(kind):
            lines += ["", f"### {head} ({count_of(warned['count'], 'point')})", ""]
            lines += [f"- ×{g['count']} {g['reason']} — {which_points(g['ids'], by_id, series)}"
                      for g in warned["reasons"]]
    unrecorded = payload.get("power_unrecorded") or []
    if unrecorded:
        lines += ["", "### GPU power not recorded", ""]
        lines += [f"- ×{g['count']} {g['reason']}" for g in unrecorded]
    if missing:
        lines += ["", "### Jobs without a result", ""]
        # one line each: the whole reason holds the server log's last lines, which would break the list (a line
        # that starts with # or |); they are in the dashboard and the job's outcome.json. Its own gist: its folder
        # named where the banner's gist of several jobs says `JOBDIR`
        lines += [f"- `{m['job_id']}`: {m['status']}: {one_line(failure_gist(m['reason']))}" for m in missing]
    if drawn or reused:
        lines += ["", f"### Jobs reused from earlier runs (`run {_REUSE}`; drawn with the figures those runs stored)",
                  ""]
        lines += [f"- `{job['as']}`: {reused_reason(job)}, drawn" for job in drawn]
        lines += [f"- `{m['job_id']}`: {m['reason']}" for m in reused]
    return "\n".join(lines) + "\n"


def delta_cell(d: MetricDelta) -> str:
    if d.delta is None:
        return "–"
    col = HOT_BY_NAME[d.metric]  # in the metric's table unit, as its value is shown
    rel = f" ({signed(d.rel, lambda r: f'{r:.1%}')})" if d.rel is not None else ""
    band = f" ±{col.cell(d.band.half_width)} {d.band.kind}" if d.band else " (no band)"
    return f"{signed(d.delta, col.cell)}{rel}{band}"


def eval_delta_cell(e: EvalDelta) -> str:
    """An eval score's delta, signed as every delta is (`signed`), with its stderr band; `–` where there is none."""
    return "–" if e.delta is None else signed(e.delta, lambda x: f"{x:.4f}")


def comparison_markdown(comp: Comparison, metrics: Sequence[str] = ("tput_per_gpu", "p90_e2e_norm_intvty",
                                                                   "p90_ttft", "p90_e2el"),
                        reused: Collection[str] = ()) -> str:
    """A compact PR-comment table: one row per matched point, value in B, delta ± band and verdict per metric.
    `reused`: the stored result ids B stood jobs on (`run --reuse`): those of A's points are listed as reused by B,
    not as points B does not have."""
    head = ["Point", "Runs A/B"] + [HOT_BY_NAME[m].header for m in metrics]
    lines = [f"## llmsweep compare: {side_heading(comp, 'a')} → {side_heading(comp, 'b')}", ""]
    lines += [f"> {n}" for n in comp.notes]
    if comp.matched:  # no empty table: the notes say why nothing matched
        lines += ["", _row(head), _row(["---"] * len(head))]
    for pc in comp.matched:
        by = {d.metric: d for d in pc.deltas}
        # runs, as the table's title says them (an imported mean of N repeats is N runs: `PointComparison.runs`)
        # what served the sides apart (another engine build, power limit), beside the point: its verdicts stand
        point = pc.label + (f" ({apart_words(pc.served_apart)})" if pc.served_apart else "")
        cells = [point, f"{pc.runs('a')}/{pc.runs('b')}" + (f" (+{pc.history} hist)" if pc.history else "")]
        for m in metrics:
            d = by.get(m)
            cells.append("–" if d is None else f"{HOT_BY_NAME[m].cell(d.b)}: {delta_cell(d)} "
                         f"{VERDICT_MARK[d.verdict]}")
        lines.append(_row(cells))
    taken, only_a = reused_from_baseline(comp, reused)
    for title, pts in (("Reused by B from A, not measured again", taken), ("Only in A", only_a),
                       ("Only in B", comp.only_b)):
        if pts:
            lines += ["", f"**{title}:** " + ", ".join(f"`{p.job_id}`" for p in pts)]
    evals = [pc for pc in comp.matched if pc.eval is not None]
    if evals:
        lines += ["", _row(["Eval point", "Task", "A", "B", "Δ ± stderr band", "Verdict"]), _row(["---"] * 6)]
        for pc in evals:
            e = pc.eval
            assert e is not None
            band = f" ±{fmt(e.band)}" if e.band is not None else " (no band)"
            delta = ("not compared: " + e.differs if e.differs else "–" if e.delta is None
                     else f"{eval_delta_cell(e)}{band}")
            lines.append(_row([pc.label, e.task, f"{fmt(e.a)} ({e.verdict_a})", f"{fmt(e.b)} ({e.verdict_b})", delta,
                               VERDICT_MARK[e.verdict]]))
    shown = [*(d.verdict for pc in comp.matched for d in pc.deltas if d.metric in metrics),
             *(pc.eval.verdict for pc in evals if pc.eval is not None)]
    if legend := verdict_legend(VERDICT_MEANING, shown):  # what the verdicts in the tables above mean
        lines += ["", f"_Verdicts:_ {legend}"]
    lines += not_compared(comp)
    return "\n".join(lines) + "\n"


def not_compared(comp: Comparison) -> list[str]:
    """The lines that name the points matched but left out (sources that differ, a side holding two configurations
    of a point), one entry per reason naming every result it kept out; none when nothing was."""
    if not comp.skipped:
        return []
    refused: dict[str, list[str]] = {}
    for s in comp.skipped:
        refused.setdefault(s.reason, []).append(s.point.job_id)
    return ["", "**Not compared:** " + "; ".join(
        f"{', '.join(f'`{j}`' for j in dict.fromkeys(jobs))} ({reason})" for reason, jobs in refused.items())]


def side_heading(comp: Comparison, side: Literal["a", "b"]) -> str:
    """A side as a heading names it: `` `run-id` ``, with what its figures are when the sides differ in it
    (`` `run-id` (simulated, virtual time) ``)."""
    label, what = comp.side(side)
    return f"`{label}`" + (f" ({what})" if what else "")
