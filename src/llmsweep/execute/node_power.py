"""One node's GPU power sampler, run as a step on that node of a multi-node job (`execute.roles`).

`python -m llmsweep.execute.node_power --dir DIR [--url URL] [--backend KIND]` samples with `llmsweep.power`'s
backends (the simulator's `/power` at URL when the role it serves is simulated; NVML, amd-smi or nvidia-smi
otherwise) until SIGTERM/SIGINT, appending the samples, and each read of the backend that failed, to
DIR/gpu_metrics.jsonl (one folder per node) every `power.sampler.FLUSH_S` seconds, where the lifecycle reads each job's
window (`power.deployment`: its samples and its failed reads), and the last ones at the end. The process holds none
of them once written: a node sampler of a multi-hour run stays as small as at its start.
"""

from __future__ import annotations

import argparse
import select
import signal
import socket
import sys
from pathlib import Path
from typing import get_args

from llmsweep.engine_ids import SIM
from llmsweep.power.sampler import BackendChoice, NoSampler, PowerSampler, PowerSettings, start_sampler

READY_LINE = "node power sampler running"


class StopSignals:
    """SIGTERM or SIGINT, waited for on a socket the signal wakes (`signal.set_wakeup_fd`); main thread only.

    The handlers do nothing: Python runs a handler between two bytecodes of the main thread, a second signal's inside
    the first's, so a handler that takes a lock deadlocks on itself when two signals come close together. A
    teardown sends two (SIGTERM to the process group, then to the process): with `threading.Event.set` as the
    handler, a sampler on a loaded machine hung in it until SIGKILL, costing the teardown its whole grace period
    and the node's file its final write."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        for sock in (self._read, self._write):
            sock.setblocking(False)
        signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda _s, _f: None)

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once a stop signal has come (at once when one did before), else False after `timeout_s` (None: no
        limit)."""
        return bool(select.select([self._read], [], [], timeout_s)[0])

    def close(self) -> None:
        """Leave every further stop signal ignored (the process is stopping anyway) and close the sockets."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        signal.set_wakeup_fd(-1)
        self._read.close()
        self._write.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llmsweep.execute.node_power", description=__doc__)
    parser.add_argument("--dir", type=Path, required=True, help="The node's folder; gpu_metrics.jsonl goes there.")
    parser.add_argument("--url", default=None, help="The simulated role's URL (its /power), for the sim backend.")
    parser.add_argument("--backend", default="auto", choices=[c for c in get_args(BackendChoice) if c != "off"])
    parser.add_argument("--gpus", type=int, default=0,
                        help="GPUs of the node's role (0: a role on no GPU, which has no GPU power to sample).")
    parser.add_argument("--role", default=None, help="The role the node serves (prefill, decode: auto tries DCGM "
                        "first, as InferenceX's multi-node lane samples through DCGM).")
    args = parser.parse_args(argv)
    stop = StopSignals()
    engine = SIM.id if args.backend == "sim" else "node"  # `--backend sim`: the simulator's power model
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
    stop.wait()  # meanwhile the sampler appends its samples to the node's file (`power.deployment` reads it)
    stop.close()
    sampler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
