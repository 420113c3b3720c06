"""Aggregated against disaggregated prefill/decode on the simulator: where the KV transfer shows in TTFT and where
decode interference leaves TPOT.

Run: `.venv/bin/python bench/disagg_vs_agg.py [--model llama-3.1-8b] [--hardware h200] [--isl 1024 8192 16384]
[--conc 1 8 32] [--osl 128] [--per-lane 4] [--json]`. For each (ISL, concurrency) it runs one aggregated engine (one
GPU) and three disaggregated deployments of the same engine (1 prefill + 1 decode worker, each one GPU: two GPUs in
all) whose KV moves over the SKU's scale-out NIC, over its scale-up link (both workers in one domain), and with two
prefill workers (three GPUs), and prints median TTFT, median TPOT, the modelled transfer of one prompt, and output
tokens per second per GPU (every role's GPUs). Figures are virtual-time predictions, uncalibrated for disaggregation.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from llmsweep.catalog.hardware import get_hardware
from llmsweep.metrics import summarise
from llmsweep.metrics.model import PREDICTED
from llmsweep.sim.disagg import Cluster, DisaggConfig, DisaggPredictor, Link, RolePlan
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.predict import predict
from llmsweep.workload.base import LaneProgram, RequestIdentity, RequestSpec, Send, Workload


class Fixed(Workload):
    """Every lane sends `per_lane` prompts of `isl` distinct words, one after another."""

    def __init__(self, isl: int, osl: int, per_lane: int) -> None:
        self.isl, self.osl, self.per_lane = isl, osl, per_lane

    def one(self, lane: int, i: int) -> LaneProgram:
        prompt = " ".join(f"l{lane}r{i}w{k}" for k in range(self.isl))
        yield Send(RequestSpec(api="completions", max_tokens=self.osl, prompt=prompt,
                               identity=RequestIdentity(session=f"l{lane}r{i}", node="", turn=0, lane=lane)))

    def sessions(self, lane: int) -> Iterator[LaneProgram]:
        for i in range(self.per_lane):
            yield self.one(lane, i)


def deployment(engine: EngineConfig, prefill: int, *, near: bool) -> DisaggConfig:
    hw = get_hardware(engine.hardware)
    nodes = list(range(prefill + 1))
    scaleout = Link(kind="scale-out", name=hw.scaleout or "NIC", gbps=hw.scaleout_gbps or 50.0,
                    latency_s=(hw.scaleout_latency_us or 10.0) / 1e6)
    scaleup = Link(kind="scale-up", name=hw.scaleup, gbps=hw.link_gbs, latency_s=engine.perf_inputs().link_latency_s)
    return DisaggConfig(
        prefill=RolePlan(kind="prefill", engine=engine, gpus_per_worker=1, nodes=tuple((n,) for n in nodes[:-1])),
        decode=RolePlan(kind="decode", engine=engine, gpus_per_worker=1, nodes=((nodes[-1],),)),
        scaleup=scaleup, scaleout=scaleout, domain_nodes=len(nodes) if near else 1, gpus_per_node=hw.gpus_per_node,
        transfer_backend="nixl")


def figures(records: list[dict[str, Any]], gpus: int) -> dict[str, float]:
    """The printed figures, as the summary defines them (TTFT, TPOT, output throughput per GPU of every role)."""
    s = summarise(records, gpus=gpus, source=PREDICTED)
    return {"ttft_p50_ms": s.latency.ttft.p50 * 1e3, "tpot_p50_ms": s.latency.tpot.p50 * 1e3,
            "out_tps_per_gpu": s.throughput.per_gpu.output_tps}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--isl", type=int, nargs="+", default=[1024, 8192, 16384])
    ap.add_argument("--conc", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--osl", type=int, default=128)
    ap.add_argument("--per-lane", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    engine = EngineConfig(model=args.model, hardware=args.hardware, tp=1, calibrated=False)
    rows: list[dict[str, Any]] = []
    for isl in args.isl:
        for conc in args.conc:
            work = Fixed(isl, args.osl, args.per_lane)
            row: dict[str, Any] = {"isl": isl, "conc": conc}
            row["agg"] = figures(predict(work, engine, concurrency=conc, duration=1e9), 1)
            for name, prefill, near in (("1p1d_nic", 1, False), ("1p1d_nvlink", 1, True), ("2p1d_nic", 2, False)):
                cluster = Cluster(deployment(engine, prefill, near=near))
                records = DisaggPredictor(cluster).run(work, concurrency=conc, duration=1e9)
                row[name] = {**figures(records, cluster.config.gpus),
                             "transfer_ms": cluster.transfer_time(isl, 0, 0) * 1e3}
            rows.append(row)
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    cols = ("agg", "1p1d_nic", "1p1d_nvlink", "2p1d_nic")
    sys.stdout.write(f"{args.model} on {args.hardware}, TP1 workers, OSL {args.osl}; TTFT p50 / TPOT p50 ms, "
                     "output tok/s/GPU; [transfer ms of one prompt]\n")
    sys.stdout.write(f"{'isl':>6} {'conc':>5}  " + "  ".join(f"{c:>30}" for c in cols) + "\n")
    for row in rows:
        cells = []
        for c in cols:
            f = row[c]
            extra = f" [{f['transfer_ms']:.1f}]" if "transfer_ms" in f else ""
            cells.append(f"{f['ttft_p50_ms']:7.1f} / {f['tpot_p50_ms']:5.2f}, {f['out_tps_per_gpu']:6.0f}{extra}")
        sys.stdout.write(f"{row['isl']:>6} {row['conc']:>5}  " + "  ".join(f"{c:>30}" for c in cells) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
