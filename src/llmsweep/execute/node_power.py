"""One node's GPU power sampler, run as a step on that node of a multi-node job (`execute.roles`).

`python -m llmsweep.execute.node_power --dir DIR [--url URL] [--backend KIND]` samples with `llmsweep.power`'s
backends (the simulator's `/power` at URL when the role it serves is simulated; NVML, amd-smi or nvidia-smi
otherwise) until SIGTERM/SIGINT, appending the samples to DIR/gpu_metrics.jsonl (one folder per node) every FLUSH_S
seconds, where the lifecycle reads each job's window (`power.deployment`), and writing the file whole at the end.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from llmsweep.power.sampler import NoSampler, PowerSampler, PowerSettings, start_sampler

READY_LINE = "node power sampler running"
FLUSH_S = 0.5
"""How often the node's file gets the samples taken since the last write (a job's window end waits for one)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llmsweep.execute.node_power", description=__doc__)
    parser.add_argument("--dir", type=Path, required=True, help="The node's folder; gpu_metrics.jsonl goes there.")
    parser.add_argument("--url", default=None, help="The simulated role's URL (its /power), for the sim backend.")
    parser.add_argument("--backend", default="auto", choices=["auto", "nvml", "amd-smi", "nvidia-smi", "sim"])
    parser.add_argument("--gpus", type=int, default=0, help="GPUs of the node's role (auto backends need > 0).")
    parser.add_argument("--role", default=None, help="The role the node serves (prefill, decode: auto tries DCGM "
                        "first, as InferenceX's multi-node lane samples through DCGM).")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _s, _f: stop.set())
    engine = "sim" if args.backend == "sim" else "node"
    settings = PowerSettings(backend="auto" if args.backend == "sim" else args.backend)
    args.dir.mkdir(parents=True, exist_ok=True)
    sampler = start_sampler(settings, engine=engine, gpus=args.gpus, base_url=args.url, server_dir=args.dir,
                            role=args.role)
    if not isinstance(sampler, PowerSampler):
        why = sampler.header.error if isinstance(sampler, NoSampler) else None
        print(f"node power sampler: no backend can sample here ({args.backend})" + (f": {why}" if why else ""),
              file=sys.stderr, flush=True)
        return 3
    print(f"{READY_LINE} ({sampler.header.backend}) → {args.dir}", file=sys.stderr, flush=True)
    while not stop.wait(FLUSH_S):  # the samples so far, for the lifecycle's per-job power blocks (`power.deployment`)
        sampler.flush()
    sampler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
