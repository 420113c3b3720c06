"""Static PNG plots (matplotlib, Agg) of the dashboard's scatter: one file per x axis, for PRs and papers.

matplotlib is imported only here and only when plots are asked for, so `llmsweep --help` and runs stay light; when
it is not installed the report is still written and the caller is told which extra to install.
"""

from __future__ import annotations

import importlib.util
import logging
import textwrap
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def point_tag(p: Mapping[str, Any]) -> str:
    """The label beside a point, as on the dashboard: concurrency and successful requests (`c16 · n48`)."""
    req = p.get("requests") or {}
    ok, total = req.get("successful"), req.get("finished")
    n = "–" if ok is None else f"{ok}" + (f"/{total}" if total is not None and total != ok else "")
    return f"c{p['metrics']['conc']} · n{n}"


def empty_text(payload: Mapping[str, Any], axis_label: str) -> str:
    """What a plot without a point says: the run's empty message and where its reasons are, that its results are
    evals, or which axis lacks values."""
    if payload.get("empty"):
        where = " The reasons are in summary.md and index.html beside this plot." if payload.get("missing") else ""
        return f"{payload['empty']}{where}"
    if not payload["points"] and (evals := len(payload.get("evals") or ())):
        return f"No throughput point: the run's results are evals ({evals}, in summary.md and index.html)."
    return f"no point has values for {axis_label} and {payload['y']['label']}"


LABEL_SPOTS = ((5, 4, "left"), (5, -10, "left"), (-5, 4, "right"), (-5, -10, "right"), (5, 13, "left"),
               (5, -19, "left"), (-5, 13, "right"), (-5, -19, "right"))
"""Offsets (points) tried around a marker for its label, in order, as on the dashboard."""


LABEL_HALO = 2.5
"""Width (points) of the white outline of a point's label, as the page's labels have (`paint-order: stroke`): a
frontier line, a bar or a ring drawn across a label left it unreadable (`c8 · n2988` under the ring beside it)."""
LABEL_CLEAR = 2.9
"""Points a label of a ringed point (`REPEATS_STYLE`) moves out beyond its spot: the ring, wider than a single
result's marker, ran under the label's first characters."""


def label_points(ax: Any, tags: Sequence[tuple[str, float, float]], fontsize: float = 6.5,
                 ringed: Collection[tuple[float, float]] = ()) -> None:
    """Annotate each point with its tag at the first spot around it that stays inside the plot's frame and overlaps
    no label placed before it (else the first spot inside the frame): the label of the rightmost point ran over
    the frame's right edge. A tag at the same spot as one labelled already (identical values: two arms that came out
    the same) is labelled once: it had been drawn twice, one under the other (the legend says which series coincide).
    `ringed`: the spots of points that are the mean of their repeats, whose labels keep clear of their ring
    (`LABEL_CLEAR`). Labels have a white outline and lie over markers and lines (`LABEL_HALO`). Call it once the
    figure is laid out (the frame's place in pixels is final)."""
    from matplotlib import patheffects

    halo = [patheffects.withStroke(linewidth=LABEL_HALO, foreground="white")]
    to_px = ax.figure.dpi / 72.0
    frame = ax.get_window_extent()
    placed: list[tuple[float, float, float, float]] = []
    for text, x, y in dict.fromkeys(tags):
        px, py = ax.transData.transform((x, y))
        w, h = len(text) * fontsize * 0.55 * to_px, fontsize * 1.2 * to_px
        boxes = []
        clear = LABEL_CLEAR if (x, y) in ringed else 0.0
        for dx0, dy, ha in LABEL_SPOTS:
            dx = dx0 + (clear if dx0 > 0 else -clear)
            x0 = px + dx * to_px - (w if ha == "right" else 0)
            boxes.append(((dx, dy, ha), (x0, py + dy * to_px, x0 + w, py + dy * to_px + h)))
        inside = [(spot, box) for spot, box in boxes
                  if frame.x0 <= box[0] and box[2] <= frame.x1 and frame.y0 <= box[1] and box[3] <= frame.y1]
        free = [(spot, box) for spot, box in inside
                if not any(b[0] < box[2] and box[0] < b[2] and b[1] < box[3] and box[1] < b[3] for b in placed)]
        choice, box = (free or inside or boxes)[0]
        placed.append(box)
        ax.annotate(text, (x, y), xytext=choice[:2], textcoords="offset points", ha=choice[2], fontsize=fontsize,
                    color="#344054", path_effects=halo, zorder=4)


PNG_PATTERN = "pareto_*.png"
"""The files `write_pngs` writes (`pareto_<axis>.png`), one per x axis."""


def write_pngs(payload: Mapping[str, Any], out_dir: Path, axes: Sequence[str] | None = None) -> list[Path]:
    """`pareto_<axis>.png` per x axis; returns the files written (empty when matplotlib is missing)."""
    if not matplotlib_available():
        log.warning("matplotlib is not installed: PNG plots skipped (pip install matplotlib)")
        return []
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    wanted = axes or [a["key"] for a in payload["axes"]]
    written = []
    for axis in (a for a in payload["axes"] if a["key"] in wanted):
        fig = pareto_figure(payload, axis)
        path = out_dir / PNG_PATTERN.replace("*", axis["key"])
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


SERIES_SWATCH: dict[str, Any] = {"marker": "o", "s": 28}
"""A series' legend entry: a filled marker in its colour, as the page's legend swatch, whatever its points' verdicts
(it had been the style of its first drawn point: a series whose first point was smoke got a faded square, one whose
first was invalid a hollow dashed circle, as if the series, not a point, were smoke or invalid)."""
SMOKE_STYLE: dict[str, Any] = {"alpha": 0.35, "linewidths": 1.2, "marker": "s", "s": 34}
"""Smoke points: faded squares (they ran too little to be valid); invalid ones are hollow dashed circles."""
REPEATS_STYLE: dict[str, Any] = {"marker": "o", "s": 120, "facecolors": "none", "linewidths": 0.9}
"""Points that are the mean of their repeats (`run --repeats`): ringed in their series' colour around whatever marks
their verdict, as the page's table and tooltip say `mean of N repeats`; the title's key says what the ring means."""
REUSED_STYLE: dict[str, Any] = {"marker": "D", "edgecolors": "#101828", "linewidths": 0.9}
"""Points `run --reuse` took from earlier runs' stored results: diamonds with a dark edge (their fill keeps saying
their verdict), one legend entry per run they came from."""


SPREAD_STYLE: dict[str, Any] = {"fmt": "none", "elinewidth": 0.9, "capsize": 2.5, "capthick": 0.9, "zorder": 1.5}
"""The bars of a point that is the mean of its repeats: thin, capped, in its series' colour, under the markers."""


def spread_bars(ax: Any, points: Sequence[Mapping[str, Any]], x: str, y: str, color: str) -> None:
    """Bars across each point that is the mean of its repeats, on each axis the repeats give a spread of: the span the
    page draws too (`report.data.spread_bounds`, `REPEATS_SPREAD` in the title's key)."""
    for p in points:
        spread = p.get("spread") or {}
        xv, yv = float(p["metrics"][x]), float(p["metrics"][y])
        xb, yb = spread.get(x), spread.get(y)
        if xb is None and yb is None:
            continue
        ax.errorbar([xv], [yv], xerr=None if xb is None else [[xv - xb[0]], [xb[1] - xv]],
                    yerr=None if yb is None else [[yv - yb[0]], [yb[1] - yv]], ecolor=color, **SPREAD_STYLE)


def pareto_figure(payload: Mapping[str, Any], axis: Mapping[str, Any]) -> Any:
    """The scatter of one x axis as a matplotlib Figure (the caller has selected a backend and closes it)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 5.2), dpi=110)
    key, y = axis["key"], payload["y"]["key"]
    by_id = {p["id"]: p for p in payload["points"]}

    def xv(p: Mapping[str, Any]) -> float:
        """The point's value on this axis (points without one are filtered out before plotting)."""
        return float(p["metrics"][key])

    plotted = 0
    tags: list[tuple[str, float, float]] = []
    ringed_at: set[tuple[float, float]] = set()
    # series whose points coincide on these axes, as the page's legend says it (report.data.coinciding_series)
    coincide = (payload.get("coincident") or {}).get(y, {}).get(key, {})
    # a series without a frontier says why, as on the page (report.data.frontier_gaps): every point smoke, say
    gaps = (payload.get("no_frontier") or {}).get(y, {}).get(key, {})
    for s in payload["series"]:
        pts = [p for p in payload["points"] if p["series"] == s["key"] and p["metrics"].get(key) is not None
               and p["metrics"].get(y) is not None]
        plotted += len(pts)
        styles: tuple[tuple[list[Any], dict[str, Any]], ...] = (
            ([p for p in pts if p["valid"] and p["verdict"] != "smoke"], {"color": s["color"], "s": 28}),
            ([p for p in pts if p["valid"] and p["verdict"] == "smoke"],
             {"color": s["color"], "edgecolors": s["color"], **SMOKE_STYLE}),
            ([p for p in pts if not p["valid"]], {"facecolors": "none", "edgecolors": s["color"], "linestyle": "--",
                                                  "s": 36}),
        )
        for group, style in styles:
            # a reused point keeps its verdict's fill and colour, as a diamond (an invalid one its dashed edge)
            for part, look in (([p for p in group if not p.get("reused")], style),
                               ([p for p in group if p.get("reused")], {**REUSED_STYLE, **style, "marker": "D"})):
                if part:
                    ax.scatter([xv(p) for p in part], [p["metrics"][y] for p in part], **look)
        if pts:  # one legend entry per series drawn, its swatch the series' colour (`SERIES_SWATCH`)
            ax.scatter([], [], color=s["color"], label=s["label"]
                       + (f" — {coincide[s['key']]}" if s["key"] in coincide else "")
                       + (f" — no frontier: {gaps[s['key']]}" if s["key"] in gaps else ""), **SERIES_SWATCH)
        ringed = [p for p in pts if p.get("repeats")]  # the mean of its repeats: ringed, whatever its verdict
        if ringed:
            ax.scatter([xv(p) for p in ringed], [p["metrics"][y] for p in ringed], edgecolors=s["color"],
                       **REPEATS_STYLE)
            spread_bars(ax, ringed, key, y, s["color"])
            ringed_at.update((xv(p), float(p["metrics"][y])) for p in ringed)
        front = [by_id[i] for i in payload["frontiers"].get(key, {}).get(s["key"], [])]
        if front:
            ax.plot([xv(p) for p in front], [p["metrics"][y] for p in front], color=s["color"], linewidth=1.8)
        tags += [(point_tag(p), xv(p), float(p["metrics"][y])) for p in pts]
    reused_from = sorted({p["reused"]["run_id"] for p in payload["points"] if p.get("reused")})
    for run_id in reused_from:  # a legend entry per earlier run: which points were not measured by this run
        ax.scatter([], [], facecolors="none", label=f"reused from run {run_id}", **REUSED_STYLE)
    if not plotted:
        # wrapped to the plot's width by hand: `wrap=True` wraps at the figure's edge, so the centred line ran over
        # the y-axis title and out of the frame
        ax.text(0.5, 0.5, textwrap.fill(empty_text(payload, axis["label"]), EMPTY_WRAP), transform=ax.transAxes,
                ha="center", va="center", fontsize=10, multialignment="center")
        if not payload["points"]:  # nothing to scale an axis to: no made-up -0.04..0.04 ticks
            ax.set_xticks([])
            ax.set_yticks([])
    unit = f" ({axis['unit']})" if axis["unit"] else ""
    ax.set_xlabel(axis["label"] + unit)
    ax.set_ylabel(f"{payload['y']['label']} ({payload['y']['unit']})")
    ax.margins(x=0.07)  # room for the labels of the outermost points
    ax.set_ylim(bottom=0)
    ax.set_ylim(top=ax.get_ylim()[1] * 1.06)  # and above the highest point
    ax.grid(alpha=0.3)
    repeats = sorted({p["repeats"]["n"] for p in payload["points"] if p.get("repeats")})
    said = f"{repeats[0]}" if len(repeats) == 1 else f"{repeats[0]}–{repeats[-1]}" if repeats else ""
    ax.set_title(title_lines([f"run {payload['run']['run_id']}", "■ faded = smoke", "○ hollow = invalid",
                              *(["◆ = reused"] if reused_from else []),
                              *([f"◎ ringed = mean of {said} repeats, bars {payload['repeats_spread']}"]
                                if repeats else []),
                              payload["tag_key"]]), fontsize=9)
    handles, labels = ax.get_legend_handles_labels() if plotted else ([], [])
    legend_h = legend_below(fig, handles, labels)
    fig.tight_layout(rect=(0, legend_h / fig.get_figheight(), 1, 1))
    label_points(ax, tags, ringed=ringed_at)  # where the frame now is: each label kept inside it
    return fig


TITLE_WRAP = 118
"""Characters per line of the title (9 pt: the figure's width)."""


def title_lines(parts: Sequence[str]) -> str:
    """The title's parts joined by ` · `, a line broken between two parts only where the next would make it wider
    than the figure (`TITLE_WRAP`): a title that fits reads as one line."""
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 3 + len(part) > TITLE_WRAP:
            lines.append(part)
        else:
            lines[-1] += f" · {part}"
    return "\n".join(lines)
EMPTY_WRAP = 70
"""Characters per line of what a plot without a point says (10 pt: well inside the plot's width)."""
LEGEND_WRAP = 120
"""Characters per legend line: a series label longer than that (an arm that sets what the simulator does not model
says so in its label) wraps instead of running off the figure."""
LEGEND_FONT = 7.0


def legend_below(fig: Any, handles: Sequence[Any], labels: Sequence[str]) -> float:
    """The legend under the plot, one entry per series, long labels wrapped, the figure made taller by its height
    (inches, returned): inside the axes a legend covered points, and one wider than the figure ran off it while
    tight_layout squeezed the plot to a third of its width and cut the title."""
    if not handles:
        return 0.0
    wrapped = [textwrap.fill(label, LEGEND_WRAP) for label in labels]
    lines = sum(label.count("\n") + 1 for label in wrapped)
    height = (lines * 1.25 + len(wrapped) * 0.5 + 1.0) * LEGEND_FONT / 72.0
    fig.set_size_inches(fig.get_figwidth(), fig.get_figheight() + height)
    fig.legend(handles, wrapped, loc="lower center", fontsize=LEGEND_FONT, frameon=False, borderaxespad=0.3)
    return height
