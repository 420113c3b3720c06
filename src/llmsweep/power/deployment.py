"""The GPU power of a disaggregated deployment: every worker's samples as one job's `gpu_metrics.jsonl`.

A deployment's GPUs are sampled where they are: one sampler per node of a role-by-role Slurm job
(`execute.node_power`, each appending to `servers/<group>/roles/power/<node>/gpu_metrics.jsonl`), or one modelled
power reading per simulated worker in virtual time (`power.virtual`). For each job the samples of every worker are
put in one file beside the records, each GPU named `<worker>/<index>` (a node's name, or `prefill0`, `decode1` in
virtual time) with its role in the header, so the one integration (`power.integrate`) gives the deployment's energy
over all GPUs of all roles, per-token figures dividing by all of them, and each role's share. A worker whose sampler
left no samples is named in the header (`missing`): the job's power is then invalid with `node_telemetry_missing`.
A node sampler's file also says each read of its backend that failed (`ReadFailure`); those within a job's window are
its header's `read_failures` and `read_error`, as one sampler's are (`power.sampler.PowerSampler.write_job`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llmsweep.power.samples import (
    GPU_METRICS_FILE,
    GpuSample,
    ReadFailure,
    TelemetryHeader,
    parse_gpu_metrics,
    write_gpu_metrics,
)

READ_BLOCK = 1 << 20
"""Bytes of a node's file read at a time (a long eval between two jobs leaves many lines to take in at once)."""
END_WAIT_S = 10.0
"""How long a job's end waits for every node's file to hold a sample at or after it (nodes flush every 0.5 s)."""


@dataclass(frozen=True, slots=True)
class SampledWorker:
    """One sampler of a deployment: what it is called in GPU ids, the role it samples, and that role's GPUs on it."""

    label: str
    role: str
    gpus: int


@dataclass(slots=True)
class WorkerSamples:
    worker: SampledWorker
    header: TelemetryHeader | None
    samples: list[GpuSample]
    why: str | None = None
    """Why the worker has no samples (its sampler did not start, its file is missing), when it has none."""
    failures: list[ReadFailure] = field(default_factory=list)
    """The reads of the worker's backend that failed, as its file says them."""


def merge(parts: Sequence[WorkerSamples], *, since: float, until: float | None = None, expected_gpus: int,
          role_gpus: dict[str, int], require: bool, max_gap_s: float) -> tuple[TelemetryHeader, list[GpuSample]]:
    """One header and the samples of every worker from just before `since`, each GPU as `<worker>/<index>`; the
    reads that failed from `since` to `until` (the job's end; None: since `since`) are counted (`read_failures`), the
    last one's words named with its worker (`read_error`)."""
    lead = since - 2 * max_gap_s
    samples: list[GpuSample] = []
    gpu_roles: dict[str, str] = {}
    missing: list[str] = []
    failed: list[tuple[float, str]] = []
    headers = [p.header for p in parts if p.header is not None and p.header.backend is not None]
    for part in parts:
        w = part.worker
        failed_here = [f for f in part.failures if f.t >= since and (until is None or f.t <= until)]
        failed += [(f.t, f"{w.label} ({w.role}): {f.error}") for f in failed_here]
        kept = [s.model_copy(update={"gpu": f"{w.label}/{s.gpu}"}) for s in part.samples if s.t >= lead]
        if not kept:
            why = part.why or (part.header.error if part.header is not None and part.header.error else None)
            if why is None and failed_here:  # a sampler that started, then failed every read: why
                why = f"no sample could be read: {failed_here[-1].error}"
            missing.append(f"{w.label} ({w.role}): {why or 'no samples'}")
            continue
        samples += kept
        gpu_roles.update({s.gpu: w.role for s in kept})
    backends = sorted({h.backend for h in headers if h.backend is not None})
    header = TelemetryHeader(
        backend="+".join(backends) if backends else None,
        source="simulated" if any(h.source == "simulated" for h in headers) else "measured" if backends else None,
        interval_s=max((h.interval_s for h in headers), default=1.0), max_gap_s=max_gap_s,
        expected_gpus=expected_gpus, gpu_ids=sorted(gpu_roles), require=require,
        error=None if headers else "; ".join(missing) or "no sampler in the deployment",
        gpu_roles=gpu_roles, role_gpus=role_gpus, missing=missing, read_failures=len(failed),
        read_error=max(failed)[1] if failed else None)
    return header, samples


class NodeFile:
    """A node sampler's `gpu_metrics.jsonl` read as it grows: each read parses only the whole lines appended since the
    last (a line the node is still writing waits for the next read), a block at a time, and keeps only the samples a
    job can still need; those a later job cannot need are dropped (`forget_before`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0
        self.header: TelemetryHeader | None = None
        self.samples: list[GpuSample] = []
        self.failures: list[ReadFailure] = []

    def read(self, keep_from: float = -math.inf) -> bool:
        """Take in what was appended, keeping the samples at or after `keep_from`; False when there is no file yet."""
        try:
            with self.path.open("rb") as fh:
                if fh.seek(0, 2) < self.offset:  # written anew from the start (a sampler restarted on the node)
                    self.offset, self.lines, self.header, self.samples, self.failures = 0, 0, None, [], []
                fh.seek(self.offset)
                rest = b""
                while block := fh.read(READ_BLOCK):
                    data = rest + block
                    cut = data.rfind(b"\n") + 1
                    self._take(data[:cut], keep_from)
                    rest = data[cut:]
        except OSError:
            return False
        return True

    def _take(self, whole: bytes, keep_from: float) -> None:
        if not whole:
            return
        lines = whole.decode("utf-8", errors="replace").splitlines()
        header, samples, failures, _problems = parse_gpu_metrics(lines, self.lines + 1)
        self.header = header or self.header
        self.samples += [s for s in samples if s.t >= keep_from]
        self.failures += [f for f in failures if f.t >= keep_from]
        self.offset += len(whole)
        self.lines += len(lines)

    def forget_before(self, t: float) -> None:
        self.samples = [s for s in self.samples if s.t >= t]
        self.failures = [f for f in self.failures if f.t >= t]


class NodePowerFiles:
    """A role-by-role Slurm job's node samplers as the lifecycle's sampler (`write_job`, `stop`): each job's file is
    merged from the nodes' files, once every node has written a sample at or after the job's end."""

    def __init__(self, nodes: Sequence[tuple[SampledWorker, Path]], *, role_gpus: dict[str, int], require: bool,
                 max_gap_s: float, not_started: dict[str, str] | None = None, end_wait_s: float = END_WAIT_S) -> None:
        self.nodes = [(worker, NodeFile(path)) for worker, path in nodes]
        self.role_gpus, self.require, self.max_gap_s = role_gpus, require, max_gap_s
        self.not_started = not_started or {}
        self.end_wait_s = end_wait_s

    def _read(self, keep_from: float) -> list[WorkerSamples]:
        parts = []
        for worker, node in self.nodes:
            if worker.label in self.not_started:
                why = f"sampler did not start: {self.not_started[worker.label]}"
                parts.append(WorkerSamples(worker, None, [], why))
            elif not node.read(keep_from):
                parts.append(WorkerSamples(worker, None, [], f"no {GPU_METRICS_FILE} from the node"))
            else:
                parts.append(WorkerSamples(worker, node.header, node.samples, failures=node.failures))
        return parts

    def open_window(self) -> None:
        """Nothing to keep: the nodes' files are read when a job ends, from the samples its window needs."""
        return None

    def write_job(self, job_dir: Path, since: float, *, expected_gpus: int, require: bool | None = None) -> Path:
        end = time.time()
        deadline = time.monotonic() + self.end_wait_s
        lead = since - 2 * self.max_gap_s  # what `merge` keeps: samples before it are not read into memory
        parts = self._read(lead)
        while not all(p.why is not None or any(s.t >= end for s in p.samples) for p in parts) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
            parts = self._read(lead)
        header, samples = merge(parts, since=since, until=end, expected_gpus=expected_gpus, role_gpus=self.role_gpus,
                                require=self.require if require is None else require, max_gap_s=self.max_gap_s)
        path = job_dir / GPU_METRICS_FILE
        write_gpu_metrics(path, header, samples)
        for _worker, node in self.nodes:  # the next job starts after this one ended
            node.forget_before(end - 2 * self.max_gap_s)
        return path

    def stop(self) -> None:
        """The node samplers are steps of the deployment, stopped with it (`execute.roles.RoleDeployment.stop`)."""
        return None
