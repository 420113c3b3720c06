"""How much memory does a server's power sampler hold over a long sweep? Drives `power.sampler.PowerSampler` with a
fake backend on a virtual clock — N readings of G GPUs at the simulator's 4 Hz, jobs of `--job-s` seconds with an
idle `--gap-s` between them (an eval, a relaunch's wait) — in a fresh process per revision, and prints the peak traced
memory (tracemalloc), what is still held before the sampler stops, and the process's peak RSS.

    .venv/bin/python bench/power_sampler_memory.py [--readings 28800] [--gpus 8] [--job-s 300] [--gap-s 600]
                                                   [--baseline REV|none]

The baseline (`--baseline REV`, default d69e2971: the last commit whose sampler kept every sample of the launch in a
list and rewrote the server folder's file from it at the end) is extracted with `git archive` and driven the same
way in the same run; the bench then checks that both wrote the same bytes: the server folder's `gpu_metrics.jsonl`
and every job's. The readings are taken by the driver (the sampler's thread is not started: a virtual second takes no
time) and the server file is flushed every virtual `FLUSH_S`, as the writer thread does in real time.

Measured 2026-12-06 on the 2-core dev box (load average 6-7 from other work; memory does not depend on it), 8 GPUs
at 4 Hz, 300 s jobs 600 s apart; RSS is with tracemalloc on, in both:

| readings (virtual time) | samples | revision | peak traced | held before stop | peak RSS |
|---|---|---|---|---|---|
| 28 800 (2 h) | 230 k | this one | 11.8 MB | 0.3 MB | 57 MB |
| 28 800 (2 h) | 230 k | baseline d69e2971 | 276 MB | 274 MB | 508 MB |
| 57 600 (4 h) | 461 k | this one | 11.8 MB | 0.3 MB | 57 MB |
| 57 600 (4 h) | 461 k | baseline d69e2971 | 552 MB | 549 MB | 983 MB |

The baseline holds ~1.2 KB a sample for the server's whole life (~830 MB a day for 8 GPUs at 1 Hz, 3.3 GB at 4 Hz);
this one holds one job's window (300 s x 4 Hz x 8 GPUs = 9 600 samples, 11.5 MB, at the peak) whatever the run's
length, and both wrote the same bytes.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE_REV = "d69e2971"

CHILD = r"""
import gc, json, resource, sys, time, tracemalloc
from pathlib import Path

args = json.loads(sys.argv[1])
out = Path(args["out"])
clock = [1_800_000_000.0]
time.time = lambda: clock[0]  # the virtual clock: the backend stamps with it, the sampler compares with it

from llmsweep.power.backends import Backend, BackendContext
from llmsweep.power.sampler import PowerSampler
from llmsweep.power.samples import GpuSample, TelemetryHeader

class Fake(Backend):
    kind = "fake"
    def __init__(self):
        super().__init__(BackendContext())
        self.n = 0
    def read(self):
        self.n += 1
        return [GpuSample(t=clock[0], gpu=str(g), power_w=300.0 + (self.n * 7 + g) % 97, energy_j=self.n * 1e3 + g,
                          sm_clock_mhz=1980.0, mem_clock_mhz=2619.0, temperature_c=60.0, util_gpu=90.0, util_mem=40.0)
                for g in range(args["gpus"])]

tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
interval = 0.25
header = TelemetryHeader(backend="fake", source="simulated", interval_s=interval,
                         gpu_ids=[str(g) for g in range(args["gpus"])])
sampler = PowerSampler(Fake(), interval_s=interval, header=header, log_path=out / "server.jsonl")
per_job, per_gap = int(args["job_s"] / interval), int(args["gap_s"] / interval)
flush_every = max(1, int(0.5 / interval))
opens = getattr(sampler, "open_window", None)  # the baseline has none: it kept every sample
taken, job = 0, 0
sampler.sample_now()
while taken < args["readings"]:
    for _ in range(per_gap):
        clock[0] += interval; sampler.sample_now(); taken += 1
        if taken % flush_every == 0:
            sampler.flush()
    if opens is not None:
        opens()
    began = clock[0]
    for _ in range(per_job):
        clock[0] += interval; sampler.sample_now(); taken += 1
        if taken % flush_every == 0:
            sampler.flush()
    job_dir = out / f"job{job:03d}"
    job_dir.mkdir()
    sampler.write_job(job_dir, began, expected_gpus=args["gpus"])
    job += 1
gc.collect()
held = tracemalloc.get_traced_memory()[0] - base
sampler.stop()
peak = tracemalloc.get_traced_memory()[1] - base
print(json.dumps({"readings": taken, "samples": taken * args["gpus"], "jobs": job, "peak_traced": peak,
                  "held": held, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def run(src: Path, out: Path, args: argparse.Namespace) -> dict[str, float]:
    out.mkdir(parents=True)
    doc = {"out": str(out), "readings": args.readings, "gpus": args.gpus, "job_s": args.job_s, "gap_s": args.gap_s}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(doc)], env={"PYTHONPATH": str(src)},
                          capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"the sampler at {src} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def same_files(a: Path, b: Path) -> list[str]:
    """The files that differ between two output folders (or are in one only)."""
    names = sorted({p.relative_to(a) for p in a.rglob("*") if p.is_file()}
                   | {p.relative_to(b) for p in b.rglob("*") if p.is_file()})
    return [str(n) for n in names if not ((a / n).is_file() and (b / n).is_file()
                                          and filecmp.cmp(a / n, b / n, shallow=False))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readings", type=int, default=28_800, help="Readings of every GPU (4 Hz: 14 400 an hour).")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--job-s", type=float, default=300.0, help="Each job's window, virtual seconds.")
    parser.add_argument("--gap-s", type=float, default=600.0, help="Between two jobs, virtual seconds.")
    parser.add_argument("--baseline", default=BASELINE_REV, help="A git revision to compare with, or `none`.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmsweep-bench-power-") as tmp:
        rows = [("this one", run(ROOT / "src", Path(tmp) / "this", args))]
        if args.baseline != "none":
            archive = Path(tmp) / "baseline.tar"
            subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), args.baseline, "src"], check=True)
            with tarfile.open(archive) as tar:
                tar.extractall(Path(tmp) / "baseline", filter="data")
            rows.append((f"baseline {args.baseline}", run(Path(tmp) / "baseline" / "src", Path(tmp) / "base", args)))
        mb = 1e6
        print(f"{args.readings} readings x {args.gpus} GPUs at 4 Hz ({args.readings / 14_400:.1f} h), "
              f"{rows[0][1]['jobs']} jobs of {args.job_s:.0f} s, {args.gap_s:.0f} s apart")
        print(f"{'revision':<22} {'peak traced':>12} {'held at end':>12} {'peak RSS':>10}")
        for name, r in rows:
            print(f"{name:<22} {r['peak_traced'] / mb:>9.1f} MB {r['held'] / mb:>9.1f} MB "
                  f"{r['peak_rss'] / mb:>7.0f} MB")
        if len(rows) == 2:
            this, base = rows[0][1], rows[1][1]
            print(f"baseline / this one: peak traced {base['peak_traced'] / this['peak_traced']:.0f}x, held "
                  f"{base['held'] / max(this['held'], 1):.0f}x, peak RSS {base['peak_rss'] / this['peak_rss']:.1f}x")
            differ = same_files(Path(tmp) / "this", Path(tmp) / "base")
            print("files written: identical (server file and every job's)" if not differ
                  else f"files written DIFFER: {', '.join(differ[:10])}")
            if differ:
                sys.exit(1)


if __name__ == "__main__":
    main()
