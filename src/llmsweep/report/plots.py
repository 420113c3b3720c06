"""Static PNG plots (matplotlib, Agg) of the dashboard's scatter: one file per x axis, for PRs and papers.

matplotlib is imported only here and only when plots are asked for, so `llmsweep --help` and runs stay light; when
it is not installed the report is still written and the caller is told which extra to install.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def write_pngs(payload: Mapping[str, Any], out_dir: Path, axes: Sequence[str] | None = None) -> list[Path]:
    """`pareto_<axis>.png` per x axis; returns the files written (empty when matplotlib is missing)."""
    if not matplotlib_available():
        log.warning("matplotlib is not installed: PNG plots skipped (pip install matplotlib)")
        return []
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    wanted = axes or [a["key"] for a in payload["axes"]]
    by_id = {p["id"]: p for p in payload["points"]}
    written = []
    for axis in (a for a in payload["axes"] if a["key"] in wanted):
        fig, ax = plt.subplots(figsize=(8.5, 5.2), dpi=110)
        key = axis["key"]

        def xv(p: Mapping[str, Any], key: str = key) -> float:
            """The point's value on this axis (points without one are filtered out before plotting)."""
            return float(p["metrics"][key])

        for s in payload["series"]:
            pts = [p for p in payload["points"] if p["series"] == s["key"] and p["metrics"].get(key) is not None
                   and p["metrics"].get(payload["y"]["key"]) is not None]
            ok = [p for p in pts if p["valid"]]
            bad = [p for p in pts if not p["valid"]]
            y = payload["y"]["key"]
            ax.scatter([xv(p) for p in ok], [p["metrics"][y] for p in ok], color=s["color"], s=28, label=s["label"])
            if bad:
                ax.scatter([xv(p) for p in bad], [p["metrics"][y] for p in bad], facecolors="none",
                           edgecolors=s["color"], linestyle="--", s=36)
            front = [by_id[i] for i in payload["frontiers"].get(key, {}).get(s["key"], [])]
            if front:
                ax.plot([xv(p) for p in front], [p["metrics"][y] for p in front], color=s["color"], linewidth=1.8)
        unit = f" ({axis['unit']})" if axis["unit"] else ""
        ax.set_xlabel(axis["label"] + unit)
        ax.set_ylabel(f"{payload['y']['label']} ({payload['y']['unit']})")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.set_title(f"run {payload['run']['run_id']} · hollow = invalid", fontsize=10)
        if payload["series"]:
            ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        path = out_dir / f"pareto_{key}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
