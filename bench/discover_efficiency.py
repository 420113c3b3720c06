"""Does `llmsweep discover` find the same Pareto frontier as a dense grid, for fewer runs? Measured in one run.

Run: `.venv/bin/python bench/discover_efficiency.py [RECIPE] [--ladder-top 64] [--repeats 3] [--refine 2]
[--duration S] [--out DIR] [--json]`. On the simulator (virtual time), for each arm of RECIPE (default: the small
KV-cliff arm of the discover tests, `tests/data/recipes/discover/cliff-sim.yaml`):

- discovery: the repeated coarse ladder up to `--ladder-top` plus its refinement rounds (`llmsweep discover`);
- the dense grid: every concurrency from the arm's first to `--ladder-top`, one run each (the same workload seed as
  the ladder's first repeat);
- the ratio of runs (discovery's, repeats included, over the dense grid's) and the frontier distance: for each point
  on the dense grid's frontier (throughput per GPU against P90 E2E-normalised interactivity, the AgentX north star),
  how far below it the frontier of discovery's measured points lies at the same interactivity (linear between
  discovery's frontier points), against the run-to-run noise discovery measured at that concurrency (two single runs
  at 95 %). Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep.discover import analysis
from llmsweep.discover.model import CurvePoint, MetricNoise, Run
from llmsweep.discover.recipe import load_arms
from llmsweep.discover.sweep import DiscoverRequest, Stages, discover
from llmsweep.results.pareto import XY, pareto_front
from llmsweep.words import count_of

DEFAULT_RECIPE = Path(__file__).resolve().parents[1] / "tests" / "data" / "recipes" / "discover" / "cliff-sim.yaml"


def _frontier(points: list[CurvePoint]) -> list[CurvePoint]:
    xy = [XY(str(p.conc), p.means.get(analysis.INTERACTIVITY), p.means.get(analysis.THROUGHPUT)) for p in points]
    on = set(pareto_front(xy, "max", "max"))
    return sorted((p for p in points if str(p.conc) in on), key=lambda p: p.means[analysis.INTERACTIVITY] or 0.0)


def _distance(dense: list[CurvePoint], found: list[CurvePoint], tput: MetricNoise) -> dict[str, Any]:
    """Each dense-frontier point against discovery's frontier at its interactivity."""
    ours = _frontier(found)
    xs = [float(p.means[analysis.INTERACTIVITY] or 0.0) for p in ours]
    ys = [float(p.means[analysis.THROUGHPUT] or 0.0) for p in ours]
    rows = []
    for p in _frontier(dense):
        x, y = float(p.means[analysis.INTERACTIVITY] or 0.0), float(p.means[analysis.THROUGHPUT] or 0.0)
        at = float(np.interp(x, xs, ys))
        gap = (y - at) / y if y else 0.0
        band = analysis.separation(tput, p.conc, p.conc)
        rows.append({"conc": p.conc, "interactivity": round(x, 2), "dense_tput": round(y, 1),
                     "discover_tput": round(at, 1), "shortfall": round(gap, 4), "noise": round(band, 4),
                     "within_noise": gap <= band})
    gaps = [r["shortfall"] for r in rows]
    return {"dense_frontier_points": len(rows), "within_noise": sum(r["within_noise"] for r in rows),
            "max_shortfall": max(gaps, default=math.nan), "mean_abs_shortfall": float(np.mean(np.abs(gaps)))
            if gaps else math.nan, "discover_frontier": [p.conc for p in ours], "points": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe", nargs="?", type=Path, default=DEFAULT_RECIPE)
    ap.add_argument("--ladder-top", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--refine", type=int, default=2)
    ap.add_argument("--duration", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("runs/bench-discover"))
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)

    def quiet(_msg: str) -> None:
        return None

    t0 = time.perf_counter()
    req = DiscoverRequest(recipe=args.recipe, out=args.out / "discover", simulate=True, repeats=args.repeats,
                          ladder_top=args.ladder_top, refine=args.refine, duration=args.duration,
                          store=args.out / "store.sqlite")
    found = discover(req, event=quiet)
    t1 = time.perf_counter()
    _, arms = load_arms(args.recipe)
    dense_req = req.model_copy(update={"out": args.out / "dense"})
    dense = Stages(dense_req, arms, quiet)
    dense.run("dense", {a.id: list(range(a.start, args.ladder_top + 1)) for a in arms}, 1)
    t2 = time.perf_counter()

    report: dict[str, Any] = {"recipe": str(args.recipe), "ladder_top": args.ladder_top, "repeats": args.repeats,
                              "refine": args.refine, "discover_wall_s": round(t1 - t0, 1),
                              "dense_wall_s": round(t2 - t1, 1), "arms": []}
    for arm, proposal in zip(arms, found.arms, strict=True):
        mine: list[Run] = [r for r in found.runs if r.arm == arm.id]
        grid: list[Run] = dense.of(arm)
        tput = next(n for n in proposal.noise if n.metric == analysis.THROUGHPUT)
        report["arms"].append({
            "arm": arm.id, "label": arm.label,
            "discover_runs": len(mine), "discover_points": len({r.conc for r in mine}), "dense_runs": len(grid),
            "ratio": round(len(mine) / len(grid), 3) if grid else None,
            "proposed": proposal.concs, "knee": proposal.knee.conc if proposal.knee else None,
            "knee_above": proposal.knee.above if proposal.knee else None,
            "knee_said": proposal.knee.describe() if proposal.knee else None,
            "frontier": _distance(analysis.curve(grid), analysis.curve(mine), tput),
        })
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"recipe {report['recipe']}: ladder to {args.ladder_top}, {args.repeats} repeats, "
          f"{count_of(args.refine, 'refine round')}; discover {report['discover_wall_s']} s, dense grid "
          f"{report['dense_wall_s']} s (wall)")
    for a in report["arms"]:
        f = a["frontier"]
        print(f"{a['label']}: discover {a['discover_runs']} runs ({a['discover_points']} points) vs dense "
              f"{a['dense_runs']} runs: ratio {a['ratio']}; proposed grid {a['proposed']} (knee {a['knee_said']})")
        print(f"  frontier: {f['within_noise']}/{f['dense_frontier_points']} dense-frontier points within noise of "
              f"discover's frontier {f['discover_frontier']}; largest shortfall {f['max_shortfall']:+.1%}, mean "
              f"|shortfall| {f['mean_abs_shortfall']:.1%}")
        for r in f["points"]:
            print(f"    conc {r['conc']:>3}: interactivity {r['interactivity']:>8}  dense {r['dense_tput']:>8}  "
                  f"discover {r['discover_tput']:>8}  shortfall {r['shortfall']:+.1%} (noise ±{r['noise']:.1%})"
                  + ("" if r["within_noise"] else "  OUTSIDE NOISE"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
