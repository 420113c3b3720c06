"""The power sampler: a background thread that reads a backend at its interval while a server runs.

The lifecycle starts one when a server is ready and stops it after the server is torn down. For each job it writes
the job's slice of the samples to `gpu_metrics.jsonl` beside the records (`write_job`): the last samples before the
job began, every sample since, and one more taken on the spot so the window's end is bracketed (as InferenceX
appends a one-shot sample after killing its `nvidia-smi -l 1`). The server folder's file keeps every sample of the
launch, appended as they are taken; the sampler holds in memory only what a job's window can still need.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.engine_ids import SIM
from llmsweep.option_spellings import flag, negation
from llmsweep.power.backends import BACKENDS, Backend, BackendContext, visible_gpus
from llmsweep.power.deployment import NodePowerFiles
from llmsweep.power.samples import (
    GPU_METRICS_FILE,
    REQUIRE_POWER_HELP,
    GpuSample,
    PowerSource,
    ReadFailure,
    TelemetryHeader,
    write_gpu_metrics,
)
from llmsweep.visible import gpu_tool_step

if TYPE_CHECKING:
    from llmsweep.plan import Job

log = logging.getLogger(__name__)

BackendChoice = Literal["auto", "off", "nvml", "amd-smi", "nvidia-smi", "dcgm", "sim"]
RUN_BACKEND_CHOICES = tuple(c for c in get_args(BackendChoice) if c != "sim")
"""What `llmsweep run --power-backend` offers (the simulator's own backend is chosen by the engine, never asked)."""
_POWER_BACKEND = flag("power_backend")
OFF_REASON = f"power sampling is off ({_POWER_BACKEND} off)"
AUTO_ORDER = ("nvml", "amd-smi", "nvidia-smi")
"""`auto` on real hardware: NVML first, then amd-smi, then nvidia-smi's CSV; the simulator always uses `sim`."""
FLUSH_S = 0.5
"""How often a sampler appends its new samples to the server folder's file (a node's, where a job's window end waits
for one: `power.deployment`)."""
MULTINODE_ROLES = frozenset({"prefill", "decode"})
"""Roles of a multi-node (disaggregated) deployment: InferenceX samples them through DCGM (wave-2 spec §3.3)."""


def auto_order(role: str | None = None) -> tuple[str, ...]:
    """The backends `auto` tries for a server of `role` (None or `server`: an aggregated one): a disaggregated role
    reads DCGM first, where its node runs a host engine, then what a single node uses."""
    return ("dcgm", *AUTO_ORDER) if role in MULTINODE_ROLES else AUTO_ORDER


class PowerSettings(BaseModel):
    """How a run samples GPU power (`llmsweep run --require-power`, `run --power-backend`)."""

    model_config = ConfigDict(extra="forbid")

    backend: BackendChoice = Field(default="auto", description="Sampler backend; auto picks one that works here.")
    interval_s: float = Field(default=1.0, gt=0, le=1.0, description="Sampling period (1 Hz or faster).")
    sim_interval_s: float = Field(default=0.25, gt=0, le=1.0, description="Sampling period on the simulator.")
    max_gap_s: float = Field(default=3.0, gt=0, description="Longest gap between samples integration accepts.")
    require: bool | None = Field(default=None, description=REQUIRE_POWER_HELP + " None: each recipe decides.")

    def asks(self, job: Job) -> bool:
        """Whether power is asked of `job`: the run's switch when given, else its recipe's `require-power`."""
        return self.require if self.require is not None else bool(job.require_power)

    def required(self, jobs: Iterable[Job]) -> bool:
        """Whether power is required for these jobs: asked (`asks`) of any of them that measures throughput. Never of
        an eval-only job: it measures accuracy, no throughput to spend power on, and samples none."""
        return any(self.asks(job) and not job.eval_only for job in jobs)

    def for_jobs(self, jobs: Iterable[Job]) -> PowerSettings:
        """These settings with `require` decided for `jobs` (a server group's, or one job's)."""
        return self.model_copy(update={"require": self.required(jobs)})


class PowerSampler:
    """Samples one backend in a thread; `open_window`, `write_job` and `stop` are safe to call from the lifecycle's
    thread.

    Its memory is one job's window, whatever the server's life: each reading goes to the server folder's file
    (`log_path`) within `FLUSH_S` (appended by a writer thread, so a slow disk never delays a reading), and only the
    samples a job's `gpu_metrics.jsonl` can still need stay in memory — from `2 x max_gap_s` before the open job
    began (`open_window`), or before now between jobs."""

    def __init__(self, backend: Backend, *, interval_s: float, header: TelemetryHeader, log_path: Path | None = None
                 ) -> None:
        self.backend, self.interval_s, self.header = backend, interval_s, header
        self.errors = 0
        self.last_error: str | None = None
        """What the backend said when its last failed read failed (a job that got no sample says it)."""
        self._window_failures = 0
        self._window_error: str | None = None
        """Reads that failed since the open job's window opened, and the last one's message (its file says them)."""
        self._kept: deque[GpuSample] = deque()
        """The samples a job's window may still need, in the order they were taken."""
        self._unwritten: list[GpuSample | ReadFailure] = []
        """Taken, or failed (a multi-node job's lifecycle counts its nodes' failed reads from their files), and not
        yet appended to `log_path`."""
        self._window_from: float | None = None
        """When the open job's window opened (`open_window`); None between jobs."""
        self._delivered = False
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._log_path = log_path
        self._started_file = False
        self._thread = threading.Thread(target=self._loop, name=f"power-{backend.kind}", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name=f"power-{backend.kind}-writer", daemon=True)

    @property
    def samples(self) -> list[GpuSample]:
        """The samples held: those a job's window may still need, oldest first (every sample of the launch is in the
        server folder's file)."""
        with self._lock:
            return list(self._kept)

    def start(self) -> PowerSampler:
        self.sample_now()
        self.flush()  # the server folder's file exists from the start: its header, then each reading
        self._thread.start()
        if self._log_path is not None:
            self._writer.start()
        return self

    def sample_now(self) -> list[GpuSample]:
        """One reading of every GPU, kept with the others; a failed read is logged and counted, never raised."""
        try:
            got = self.backend.read()
        except Exception as exc:  # a sensor hiccup must not end the sweep; gaps show up as invalid power
            message = f"{self.backend.kind}: {exc}"
            with self._lock:
                self.errors += 1
                self.last_error = message
                self._window_failures += 1
                self._window_error = message
                if self._log_path is not None:
                    self._unwritten.append(ReadFailure(t=time.time(), error=message))
            log.debug("power sample failed (%s): %s", self.backend.kind, exc)
            return []
        with self._lock:
            self._delivered = self._delivered or bool(got)
            self._kept.extend(got)
            if self._log_path is not None:
                self._unwritten.extend(got)
            self._forget_unneeded()
        return got

    def _forget_unneeded(self) -> None:
        """Drop (under the lock) the oldest samples no job's window can need: those more than `2 x max_gap_s` before
        the open job's window opened (`write_job`'s lead is later), or, between jobs, before now (the next job begins
        later)."""
        opened = self._window_from if self._window_from is not None else time.time()
        bound = opened - 2 * self.header.max_gap_s
        while self._kept and self._kept[0].t < bound:
            self._kept.popleft()

    def _loop(self) -> None:
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self.sample_now()
            next_at += self.interval_s
            if next_at < time.monotonic():  # a slow read: keep the period, skip the missed ticks
                next_at = time.monotonic() + self.interval_s

    def _write_loop(self) -> None:
        while not self._stop.wait(FLUSH_S):
            self.flush()

    def open_window(self) -> None:
        """A job begins now: the samples from `2 x max_gap_s` before now on are kept for its `write_job`, which
        closes the window. Called before the job takes its start time, so nothing its window needs is dropped."""
        with self._lock:
            self._window_from = time.time()
            self._window_failures, self._window_error = 0, None

    def write_job(self, job_dir: Path, since: float, *, expected_gpus: int, require: bool | None = None) -> Path:
        """Write the job's `gpu_metrics.jsonl`: samples from just before `since` to a fresh one taken now (retried a
        few times: without it the window's end is not bracketed, but only while the backend delivers: with no sample in
        this launch yet the window's start is not bracketed either, so one try). `require`: the job's own (default: the
        group's). `since`: the job's start, taken after its `open_window` (samples before it are kept from then)."""
        with self._lock:
            delivered = self._delivered
        for attempt in range(3 if delivered else 1):
            if attempt:
                time.sleep(min(0.2, self.interval_s))
            if self.sample_now():
                break
        lead = since - 2 * self.header.max_gap_s
        with self._lock:
            kept = [s for s in self._kept if s.t >= lead]
            self._window_from = None  # the next job begins after this one's end
            self._forget_unneeded()
            failures, failed_with = self._window_failures, self._window_error
            self._window_failures, self._window_error = 0, None
        header = _job_header(self.header, expected_gpus, require)
        if failures:  # a backend that failed mid-job: the gaps its reasons name have a cause, said here
            header = header.model_copy(update={"read_failures": failures, "read_error": failed_with})
        if not kept and self.last_error is not None:  # a backend that started, then failed every read: why
            header = header.model_copy(update={"error": f"no sample could be read: {self.last_error}"})
        path = job_dir / GPU_METRICS_FILE
        write_gpu_metrics(path, header, kept)
        return path

    def flush(self) -> None:
        """Append the samples taken (and the reads that failed) since the last flush to the server folder's file (the
        header and a fresh file on the first): a reader elsewhere sees them while the server runs (a multi-node job's
        node samplers, `execute.node_power`, whose failed reads the job's window counts: `power.deployment.merge`),
        and a kill leaves every reading but the last `FLUSH_S`'s (at worst a last line cut short, which
        `read_gpu_metrics` passes over). Each flush appends whole lines; one that fails is undone and its samples stay
        for the next."""
        if self._log_path is None:
            return
        with self._write_lock:  # one flush at a time, so the file keeps the samples' order
            with self._lock:
                new, self._unwritten = self._unwritten, []
            first = not self._started_file
            text = (self.header.model_dump_json() + "\n" if first else "") + "".join(
                s.model_dump_json(exclude_none=True) + "\n" for s in new)
            if not text:
                return
            size = None
            try:
                with self._log_path.open("wb" if first else "ab") as fh:
                    size = fh.tell()
                    fh.write(text.encode("utf-8"))
                self._started_file = True
            except OSError as exc:
                log.warning("could not write %s: %s", self._log_path, exc)
                if size is not None:  # a full disk may have taken part of the text: leave whole lines only
                    with contextlib.suppress(OSError):
                        os.truncate(self._log_path, size)
                with self._lock:
                    self._unwritten[:0] = new

    def stop(self) -> None:
        """Stop the threads, append the last samples to the server folder's file (when given) and close the
        backend."""
        self._stop.set()
        for thread in (self._thread, self._writer):
            if thread.is_alive():
                thread.join(timeout=self.interval_s + 10)
        self.flush()
        self.backend.close()


class NoSampler:
    """What the lifecycle holds when no backend can sample: each job still says so in its `gpu_metrics.jsonl`
    (required power then fails with the reason, instead of a job that silently has no power block)."""

    def __init__(self, header: TelemetryHeader) -> None:
        self.header = header

    def open_window(self) -> None:
        return None

    def write_job(self, job_dir: Path, since: float, *, expected_gpus: int, require: bool | None = None) -> Path:
        path = job_dir / GPU_METRICS_FILE
        write_gpu_metrics(path, _job_header(self.header, expected_gpus, require), [])
        return path

    def stop(self) -> None:
        return None


Sampler = PowerSampler | NoSampler | NodePowerFiles
"""What the lifecycle holds for a server group (`NodePowerFiles`: a role-by-role job's node samplers)."""


def _job_header(header: TelemetryHeader, expected_gpus: int, require: bool | None) -> TelemetryHeader:
    update: dict[str, object] = {"expected_gpus": expected_gpus}
    if require is not None:
        update["require"] = require
    return header.model_copy(update=update)


def _candidates(settings: PowerSettings, *, simulated: bool, gpus: int, role: str | None) -> tuple[str, ...]:
    """The backends a server's sampler tries, in order (none: sampling is off, or a real server without GPUs).

    A real server on no GPU (a CPU rehearsal) has no GPU power, whatever backend is named: a backend named with
    `run --power-backend` would read the host's GPUs, which the server never used, and credit their draw to it as its
    measured power."""
    if settings.backend == "off":
        return ()
    if simulated:
        return ("sim",)
    if gpus <= 0:
        return ()
    if settings.backend == "auto":
        return auto_order(role)
    return (settings.backend,)


def _context(*, simulated: bool, base_url: str | None, env: Mapping[str, str] | None) -> BackendContext:
    merged = {**os.environ, **(env or {})}
    return BackendContext(base_url=base_url, gpu_indices=None if simulated else visible_gpus(merged), env=merged)


NO_GPU_REASON = "the server runs on no GPU (its launch uses 0), so there is no GPU power to sample"
MEASURED_CHOICES = tuple(c for c in RUN_BACKEND_CHOICES if c not in ("auto", "off"))
"""The backends `run --power-backend` can name that sample real GPUs."""
NOT_REQUIRED_FIX = (f"run without requiring power: {negation('require_power')}, or drop the recipe's "
                    "`require-power: true`")


@dataclass(frozen=True, slots=True)
class PowerProbe:
    """What probing a server's power backends found on the host that samples it, before the server starts
    (`probe_power`): the backend that will sample, or why none can and how to get one."""

    backend: str | None
    """The backend that can sample (the first that probes well, in `auto`'s order); None when none can."""
    source: PowerSource = "measured"
    why: str | None = None
    """Why none can: each backend tried with what its probe found, or that sampling is off, or that the server has
    no GPU."""
    fix: str | None = None
    """How to get power recorded on this host; None when there is nothing to fix (a server without a GPU)."""
    host: str = field(default_factory=platform.node)

    @property
    def usable(self) -> bool:
        return self.backend is not None

    def refusal(self) -> str:
        """Why a job that requires power is refused before its server starts, and the fix."""
        fixes = "; or ".join(f for f in (self.fix, NOT_REQUIRED_FIX) if f)
        return f"power is required but cannot be sampled on {self.host}: {self.why} (fix: {fixes})"

    def unrecorded(self) -> str:
        """Why power is not recorded on this host, and how to get it: what a job's power block says (`error`)."""
        return f"{self.why}" + (f"; to record power: {self.fix}" if self.fix else "")


def probe_power(settings: PowerSettings, *, engine: str, gpus: int, env: Mapping[str, str] | None = None,
                role: str | None = None) -> PowerProbe:
    """Probe, on this host and before the server starts, the backends a server's sampler will try
    (`start_sampler`'s order): which one will sample, or why none can. The simulator's modelled power needs only its
    URL, known once it is up: a simulated server can always be sampled unless sampling is off."""
    simulated = engine == SIM.id
    kinds = _candidates(settings, simulated=simulated, gpus=gpus, role=role)
    if simulated and kinds:
        return PowerProbe("sim", source="simulated")
    ctx = _context(simulated=simulated, base_url=None, env=env)
    tried: list[str] = []
    for kind in kinds:
        problem = BACKENDS[kind].probe(ctx)
        if problem is None:
            return PowerProbe(kind, source=BACKENDS[kind].source)
        tried.append(f"{kind}: {problem}")
    return _none_can(settings, kinds, tried)


def _none_can(settings: PowerSettings, kinds: Sequence[str], tried: Sequence[str]) -> PowerProbe:
    """The probe of a server no backend can sample: sampling is off, the server has no GPU, or each backend tried
    (`kinds`) failed as `tried` says; with how to get power recorded."""
    if settings.backend == "off":
        return PowerProbe(None, why=OFF_REASON, fix=f"{_POWER_BACKEND} auto (or a backend that works on this host)")
    if not kinds:
        return PowerProbe(None, why=NO_GPU_REASON)
    others = [c for c in MEASURED_CHOICES if c not in kinds]
    fix = (f"install or repair {' or '.join(kinds)} on this host as said"
           + (f", or choose another backend: {_POWER_BACKEND} {'|'.join(others)}" if others else ""))
    return PowerProbe(None, why="; ".join(tried), fix=fix)


def start_sampler(settings: PowerSettings, *, engine: str, gpus: int, base_url: str | None,
                  env: Mapping[str, str] | None = None, server_dir: Path | None = None,
                  role: str | None = None) -> Sampler | None:
    """A started sampler for a server that is now ready, or None when power is not sampled at all (`off`, and power
    not required). `role`: the server's role in a disaggregated deployment (prefill, decode: `auto` tries DCGM
    first, as InferenceX's multi-node lane does), None for an aggregated server. When no backend can sample here,
    a `NoSampler`: every job's file says why and how to get power (`PowerProbe.unrecorded`), required or not — a
    server on no GPU too (`NO_GPU_REASON`): the run's start line announces it for its jobs, and each job's power
    block is where its summary, `results`, summary.md and `run --json` read that its power was not recorded.

    One step of the run (`llmsweep.visible.gpu_tool_step`, or part of the caller's): a vendor tool that hangs while
    the server's GPUs are chosen is waited for once."""
    if settings.backend == "off" and not settings.require:
        return None
    with gpu_tool_step("this start of the power sampler"):
        return _start(settings, engine=engine, gpus=gpus, base_url=base_url, env=env, server_dir=server_dir,
                      role=role)


def _start(settings: PowerSettings, *, engine: str, gpus: int, base_url: str | None, env: Mapping[str, str] | None,
           server_dir: Path | None, role: str | None) -> Sampler:
    simulated = engine == SIM.id
    kinds = _candidates(settings, simulated=simulated, gpus=gpus, role=role)
    ctx = _context(simulated=simulated, base_url=base_url, env=env)
    interval = settings.sim_interval_s if simulated else settings.interval_s
    why: list[str] = []  # each backend tried, with what stopped it
    for kind in kinds:
        cls = BACKENDS[kind]
        problem = cls.probe(ctx)
        if problem is not None:
            why.append(f"{kind}: {problem}")
            continue
        try:
            backend = cls(ctx)
        except Exception as exc:  # the driver refused after a good probe: try the next backend
            why.append(f"{kind}: {exc}")
            continue
        header = TelemetryHeader(backend=kind, source=cls.source, interval_s=interval, max_gap_s=settings.max_gap_s,
                                 gpu_ids=[str(i) for i in ctx.gpu_indices or ()], require=bool(settings.require))
        log_path = server_dir / GPU_METRICS_FILE if server_dir is not None else None
        return PowerSampler(backend, interval_s=interval, header=header, log_path=log_path).start()
    error = _none_can(settings, kinds, why).unrecorded()
    log.info("power not sampled: %s", error)
    return NoSampler(TelemetryHeader(backend=None, interval_s=interval, max_gap_s=settings.max_gap_s,
                                     require=bool(settings.require), error=error))
