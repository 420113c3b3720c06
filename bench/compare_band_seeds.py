"""How much does `compare`'s within-run band move with the bootstrap seed, and what does the exact bootstrap cost?

    .venv/bin/python bench/compare_band_seeds.py [--requests 64] [--seeds 40] [--resamples 200,1000,4000]

Runs bands-base.yaml and bands-pr.yaml (tests/data/recipes/results: one fixed-length point at conc 16 on the simulator
in virtual time; the PR prefills every prompt in two chunks) with `--requests` profiling requests each, then for every
P50/P90 metric prints the within-run band `compare` gives (1.96 × √(sd_A² + sd_B²)) three ways: the Monte Carlo
bootstrap it used to draw (`R` seeded resamples per side, over `--seeds` seeds: min, max, max/min and the coefficient
of variation of the band, and how often |Δ| fell outside it, i.e. `unverified` rather than `within noise`), and the
exact bootstrap it computes now (one value, no seed). CPU is per side and metric (process time).

Measured 2026-12-06 on the shared 2-core dev box (load from other work), 64 requests per side, 40 seeds; the band's
max/min over the seeds, how many seeds put |Δ| outside it (`unverified`, else `within noise`), and CPU per side and
metric:

Exact: the one band, inside or outside |Δ|, and its CPU. MC R: the band's max/min over the seeds, in how many seeds
|Δ| fell outside it, and the CPU.

| metric | Δ | exact (CPU) | MC R=200 | R=1000 | R=4000 |
|---|---|---|---|---|---|
| p90_ttft | +15.1 ms | 14.4 ms out (0.5 ms) | 3.03x, cv 30 %, 26/40 (10 ms) | 1.89x, 29/40 (52) | 1.29x, 30/40 (227) |
| p50_ttft | +15.2 ms | 6.0 ms out (0.7 ms) | 1.44x, 40/40 | 1.48x, 40/40 | 1.18x, 40/40 |
| p90_tpot | +0.20 ms | 0.125 ms out (0.4 ms) | 1.23x, 40/40 | 1.12x | 1.05x |
| p90_e2el | +48 ms | 120 ms in (0.4 ms) | 1.28x, 0/40 | 1.13x | 1.05x |
| p90_intvty | −2.19 | 1.37 out (0.5 ms) | 1.23x, 40/40 | 1.12x | 1.05x |
| tput_per_gpu | −17.4 | 20.6 in (0.1 ms) | 1.17x, 0/40 (4 ms) | 1.07x | 1.03x (83 ms) |

A P90 over 64 requests sits between two or three order statistics whose gaps are wide (TTFT is bimodal: prompts that
wait for another's prefill), so its bootstrap distribution is lumpy and a Monte Carlo estimate of its spread converges
slowly: 20x the resamples still moved the band 1.3x and flipped the verdict in a quarter of the seeds. The exact
bootstrap is that distribution itself: one band, and 20x less CPU than the 200 draws it replaces.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "tests" / "data" / "recipes" / "results"
METRICS = ("p90_ttft", "p50_ttft", "p90_tpot", "p90_e2el", "p90_intvty", "p90_e2e_norm_intvty", "tput_per_gpu")


def _run(tmp: Path, recipe: str, requests: int) -> Path:
    text = (RECIPES / recipe).read_text().replace("num-prompts-per-conc: 16", f"num-prompts-per-conc: {requests // 16}")
    path = tmp / recipe
    path.write_text(text)
    out = tmp / recipe.removesuffix(".yaml")
    subprocess.run([sys.executable, "-m", "llmsweep", "run", str(path), "--out", str(out), "--no-report",
                    "--store", str(tmp / "store.sqlite")], check=True, capture_output=True)
    return out


def _monte_carlo_sd(samples: object, metric: str, gpus: int, seed: int, key: str, resamples: int) -> float:
    """The Monte Carlo bootstrap `compare` drew before (seeded from (seed, result id), `resamples` draws)."""
    from llmsweep.results.samples import STATISTICS, Samples

    assert isinstance(samples, Samples)
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    stat = STATISTICS[metric]
    draws = np.array([stat(samples, rng.integers(0, samples.n, samples.n), gpus) for _ in range(resamples)])
    draws = draws[np.isfinite(draws)]
    return float(draws.std(ddof=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--resamples", default="200,1000,4000")
    args = ap.parse_args()
    from llmsweep.results.bands import Z975, bootstrap_sd
    from llmsweep.results.point import points_from_run
    from llmsweep.results.rundir import load_run
    from llmsweep.results.samples import load_samples

    with tempfile.TemporaryDirectory() as tmp:
        (a,) = points_from_run(load_run(_run(Path(tmp), "bands-base.yaml", args.requests)))
        (b,) = points_from_run(load_run(_run(Path(tmp), "bands-pr.yaml", args.requests)))
        sa, sb = (load_samples(p.records_path) for p in (a, b))  # type: ignore[arg-type]
        assert sa is not None and sb is not None
        print(f"{sa.n} and {sb.n} successful requests")
        for metric in METRICS:
            va, vb = a.metric(metric), b.metric(metric)
            assert va is not None and vb is not None
            delta = vb - va
            t = time.process_time()
            exact = Z975 * math.hypot(bootstrap_sd(sa, metric, a.gpus), bootstrap_sd(sb, metric, b.gpus))
            cpu_exact = (time.process_time() - t) / 2
            where = "outside" if abs(delta) > exact else "inside"
            print(f"{metric:20s} delta {delta:+.5g}  exact band {exact:.5g} ({where}), "
                  f"{cpu_exact * 1e3:.2f} ms CPU per side")
            for resamples in map(int, args.resamples.split(",")):
                t = time.process_time()
                bands = [Z975 * math.hypot(_monte_carlo_sd(sa, metric, a.gpus, s, a.result_id, resamples),
                                           _monte_carlo_sd(sb, metric, b.gpus, s, b.result_id, resamples))
                         for s in range(args.seeds)]
                cpu = (time.process_time() - t) / (2 * args.seeds)
                outside = sum(abs(delta) > w for w in bands)
                print(f"    MC R={resamples:5d}: band {min(bands):.5g}-{max(bands):.5g} "
                      f"({max(bands) / min(bands):.2f}x, cv {statistics.stdev(bands) / statistics.mean(bands):.1%}), "
                      f"|delta| outside in {outside}/{args.seeds} seeds, {cpu * 1e3:.1f} ms CPU per side")


if __name__ == "__main__":
    main()
