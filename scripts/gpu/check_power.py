#!/usr/bin/env python3
"""Energy from two independent sources, per job of an `llmsweep run` directory: the trapezoid of sampled board power
(what the summary's power block reports) against the driver's own cumulative energy counter (NVML's
`nvmlDeviceGetTotalEnergyConsumption`, which the `nvml` backend records with every sample; amd-smi's
`total_energy_consumption`; the simulator's modelled counter), over the same window.

Two windows per job, both from the job's `gpu_metrics.jsonl`:

- **profile**: the client's profile window (the summary's `power.window`): the integral interpolates power at the
  window's edges, the counter is interpolated there too (the summary's `counter_check`, recomputed here);
- **span**: from the first to the last sample of the job's file: no interpolation at all, the counter's readings
  at two sampled instants against the trapezoid over every sample between them.

Prints one row per job (and per GPU with --per-gpu) with both energies and the difference in %, then a verdict:
exit 0 when every job's profile-window difference is within --tolerance (default 5 %), 1 when one is not, 2 when the
directory holds no job with power samples and a counter. `--json` prints the rows as JSON instead.

    PYTHONPATH=src python3 scripts/gpu/check_power.py RUN_DIR [--tolerance 0.05] [--per-gpu] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from llmsweep.metrics.model import Summary
from llmsweep.power.integrate import gpu_energy
from llmsweep.power.samples import GPU_METRICS_FILE, GpuSample, read_gpu_metrics
from llmsweep.words import count_of


@dataclass
class Row:
    job: str
    gpu: str
    backend: str | None
    source: str
    window_s: float
    integral_j: float
    counter_j: float | None
    diff_pct: float | None
    span_s: float
    span_integral_j: float
    span_counter_j: float | None
    span_diff_pct: float | None
    avg_power_w: float | None
    joules_per_output_token: float | None


def _pct(integral: float, counter: float | None) -> float | None:
    return None if counter is None or integral <= 0 else 100.0 * (counter - integral) / integral


def _one_gpu(samples: list[GpuSample], start: float, end: float, max_gap_s: float) -> tuple[float, float | None,
                                                                                            float, float, float | None]:
    """(profile integral, profile counter, span seconds, span integral, span counter) of one GPU."""
    reasons: list[str] = []
    prof = gpu_energy(samples, start, end, max_gap_s, reasons)
    if prof is None:
        raise ValueError(", ".join(reasons) or "no usable samples")
    both = sorted(s.t for s in samples if s.power_w is not None and s.energy_j is not None)
    if len(both) < 2:
        return prof.energy_j, prof.counter_j, 0.0, 0.0, None
    t0, t1 = both[0], both[-1]
    span = gpu_energy([s for s in samples if t0 <= s.t <= t1], t0, t1, max(max_gap_s, t1 - t0), [])
    if span is None:
        return prof.energy_j, prof.counter_j, 0.0, 0.0, None
    return prof.energy_j, prof.counter_j, t1 - t0, span.energy_j, span.counter_j


def check_job(jdir: Path, *, per_gpu: bool) -> tuple[list[Row], str | None]:
    """The job's rows (one total, plus one per GPU when asked), or why it has none."""
    summary_path, metrics_path = jdir / "summary.json", jdir / GPU_METRICS_FILE
    if not summary_path.is_file() or not metrics_path.is_file():
        return [], "no summary.json or no gpu_metrics.jsonl"
    power = Summary.load(summary_path).power
    if power is None or power.window.start is None or power.window.end is None:
        return [], "the summary has no power window"
    start, end = power.window.start, power.window.end
    header, samples, problems = read_gpu_metrics(metrics_path)
    if header is None or problems:
        return [], f"{metrics_path} is unreadable ({', '.join(problems) or 'no header'})"
    by_gpu: dict[str, list[GpuSample]] = defaultdict(list)
    for s in samples:
        by_gpu[s.gpu].append(s)
    rows: list[Row] = []
    total = Row(jdir.name, "all", header.backend, header.source, end - start, 0.0, 0.0, None, 0.0, 0.0, 0.0, None,
                power.avg_power_w, power.joules_per_output_token)
    for gpu in sorted(by_gpu, key=lambda g: (len(g), g)):
        try:
            integral, counter, span_s, span_integral, span_counter = _one_gpu(by_gpu[gpu], start, end, header.max_gap_s)
        except ValueError as exc:
            return [], f"GPU {gpu}: {exc}"
        if per_gpu:
            rows.append(Row(jdir.name, gpu, header.backend, header.source, end - start, integral, counter,
                            _pct(integral, counter), span_s, span_integral, span_counter,
                            _pct(span_integral, span_counter), None, None))
        total.integral_j += integral
        total.span_integral_j += span_integral
        total.span_s = max(total.span_s, span_s)
        total.counter_j = None if counter is None or total.counter_j is None else total.counter_j + counter
        total.span_counter_j = (None if span_counter is None or total.span_counter_j is None
                                else total.span_counter_j + span_counter)
    if not by_gpu:
        return [], "no samples"
    total.diff_pct, total.span_diff_pct = _pct(total.integral_j, total.counter_j), _pct(total.span_integral_j,
                                                                                         total.span_counter_j)
    return [total, *rows], None


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("run_dir", type=Path, help="an `llmsweep run --out` directory (or one job folder)")
    ap.add_argument("--tolerance", type=float, default=0.05, help="largest |difference| accepted (fraction)")
    ap.add_argument("--per-gpu", action="store_true", help="a row per GPU as well")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    root: Path = args.run_dir
    jdirs = sorted(p for p in (root / "jobs").iterdir() if p.is_dir()) if (root / "jobs").is_dir() else [root]
    rows: list[Row] = []
    skipped: dict[str, str] = {}
    for jdir in jdirs:
        got, why = check_job(jdir, per_gpu=args.per_gpu)
        rows += got
        if why:
            skipped[jdir.name] = why
    totals = [r for r in rows if r.gpu == "all"]
    compared = [r for r in totals if r.diff_pct is not None]
    bad = [r for r in compared if abs(r.diff_pct or 0.0) > 100 * args.tolerance]
    if args.json:
        print(json.dumps({"tolerance": args.tolerance, "rows": [asdict(r) for r in rows], "skipped": skipped,
                          "ok": bool(compared) and not bad}, indent=2))
    else:
        head = (f"{'job':<44} {'gpu':>4} {'backend':>8} {'window s':>9} {'integral J':>12} {'counter J':>12} "
                f"{'diff %':>7} {'span s':>8} {'span diff %':>11} {'W/GPU':>7} {'J/out tok':>10}")
        print(head)
        for r in rows:
            print(f"{r.job[-44:]:<44} {r.gpu:>4} {r.backend or '-':>8} {r.window_s:>9.2f} {r.integral_j:>12.1f} "
                  f"{_fmt(r.counter_j, '12.1f'):>12} {_fmt(r.diff_pct, '+7.2f'):>7} {r.span_s:>8.2f} "
                  f"{_fmt(r.span_diff_pct, '+11.2f'):>11} {_fmt(r.avg_power_w, '7.1f'):>7} "
                  f"{_fmt(r.joules_per_output_token, '10.4f'):>10}")
        for job, why in skipped.items():
            print(f"skipped {job}: {why}")
        if compared:
            worst = max(abs(r.diff_pct or 0.0) for r in compared)
            print(f"{count_of(len(compared), 'job')} compared; largest |difference| {worst:.2f} % "
                  f"(tolerance {100 * args.tolerance:.1f} %): {'OK' if not bad else f'{len(bad)} outside'}")
        else:
            print("no job with power samples and an energy counter: nothing compared")
    if not compared:
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
