"""The job lifecycle, the same wherever it runs: preflight → launch → ready → load → read back → teardown.

One *server group* is a set of jobs whose rendered LaunchSpec is identical: they share one server across their
concurrency points, because a real engine takes minutes to start. The executor decides only how the server process
is launched (local subprocess, `docker run`, an `srun` step on a Slurm node); this module does the rest and writes
every artifact through the server's secret scrubber.

A server that dies fails the job it was serving (with the tail of its log); the group relaunches it for the jobs
left, so one crash does not take a whole sweep down. Records already written are never lost: the client flushes each
one as it finishes.

A run-eval row whose point pins acceptance owes its eval to a server without the pin: the group runs all its points
first, then stops its server once and runs every owed eval on one relaunched server (`_owed_evals`).
"""

from __future__ import annotations

import errno
import logging
import os
import platform
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llmsweep import __version__, shell
from llmsweep.engine_ids import SIM
from llmsweep.engines.launch import LaunchSpec, Topology, comment_text
from llmsweep.errors import ConfigError, LaunchError, LlmsweepError, ResultError
from llmsweep.evals.harness import EvalSettings
from llmsweep.execute import artifacts as art
from llmsweep.execute.amd_gpus import AmdGpu, GfxClock
from llmsweep.execute.amd_gpus import query_clocks as query_amd_clocks
from llmsweep.execute.amd_gpus import query_static as query_amd_static
from llmsweep.execute.base import ServerLauncher
from llmsweep.execute.failure_text import never_came_up
from llmsweep.execute.handle import ServerHandle
from llmsweep.execute.preflight import preflight
from llmsweep.execute.progress import EvalCount, current_progress
from llmsweep.execute.readback import SERVER_DIED, ReadbackSettings, judge_paused, summarise_job
from llmsweep.execute.ready import check_alive, exit_text, probe_health, wait_ready
from llmsweep.execute.secrets import SecretScrubber, collect_secrets
from llmsweep.execute.signals import (
    first_signal,
    interrupt_in,
    interrupted_by,
    shielded,
    stop_then_raise,
    watching_pauses,
)
from llmsweep.host import cpu_model, load_average_1m, usable_cpus
from llmsweep.job_files import unjudged
from llmsweep.metrics.model import (
    DONE_VERDICTS,
    DONE_WORDS,
    MEASURED,
    SIMULATED,
    SUCCESS_STATUSES,
    WALL,
    GpuState,
    Hardware,
    HostFacts,
    RunSource,
    SimulatorProvenance,
    Summary,
    run_source,
)
from llmsweep.option_spellings import flag as _flag
from llmsweep.plan import Job
from llmsweep.plan.point import Point
from llmsweep.power.sampler import PowerProbe, PowerSettings, Sampler, probe_power, start_sampler
from llmsweep.sim_warnings import context_served, no_gpu_figures
from llmsweep.spec.workload import ScenarioId
from llmsweep.visible import CUDA as VISIBLE_CUDA
from llmsweep.visible import GpuTable, Listed, gpu_tool_step, select_listed
from llmsweep.words import count_of

if TYPE_CHECKING:
    from llmsweep.client import Endpoint, Progress, RunOptions
    from llmsweep.execute.roles import FederatedMetrics
    from llmsweep.execute.version_drift import EngineVersionDrift
    from llmsweep.metrics import GateConfig
    from llmsweep.workload.base import Workload

_EXECUTOR = _flag("executor")
_OUT = _flag("out")
_RESUME = _flag("resume")


log = logging.getLogger(__name__)

Status = Literal["valid", "smoke", "invalid", "failed", "skipped", "refused"]


class LifecycleSettings(BaseModel):
    """Knobs of the lifecycle that are not part of a job (how patient, how strict)."""

    model_config = ConfigDict(extra="forbid")

    resume: bool = Field(default=False, description=f"Skip the jobs whose folder in {_OUT} already holds a "
                         f"{DONE_WORDS} summary its outcome.json closed so (the end table shows that verdict, marked "
                         f"resumed), rerun half-done ones, and stop servers a killed run into {_OUT} left behind.")
    fail_fast: bool = Field(default=False, description="Stop at the first failed or invalid job.")
    startup_timeout_s: float | None = Field(default=None, description="Override the LaunchSpec's readiness timeout.")
    stop_grace_s: float = Field(default=15.0, ge=0, description="SIGTERM → SIGKILL grace when stopping a server.")
    request_timeout_s: float = Field(default=600.0, gt=0, description="Whole-request timeout of the client.")
    client_workers: int | None = Field(
        default=None, ge=1, description="Client worker processes; None = chosen from the load and the cores."
    )
    readback: ReadbackSettings = Field(default_factory=ReadbackSettings)
    max_relaunches: int = Field(default=1, ge=0, description="Times a group relaunches a server that died.")
    power: PowerSettings = Field(default_factory=PowerSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)


class JobOutcome(BaseModel):
    """How one job ended, for the completeness report and `outcome.json`."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    exp_name: str
    status: Status
    reasons: list[str] = Field(default_factory=list)
    summary_path: str | None = None
    seconds: float | None = None
    warnings: list[str] = Field(default_factory=list)
    """What holds for the job's result beyond its verdict: under the simulator, the engine rules it ran despite (a
    real engine would refuse the job: `policy` softens those rules to warnings in simulation) and what the simulator
    does not model (`pipeline.job_warnings`, their one home; added by `with_warnings`)."""
    eval_failure: str | None = None
    """A run-eval row whose eval did not pass: the eval's verdict and reasons (`eval_failure`). The job keeps its
    throughput verdict, as InferenceX's combined rows do; this says at the end of the run what the summary holds."""
    resumed: bool = False
    """`--resume` found the job finished in --out and did not run it again (status `skipped`); its verdict is its
    summary's (`summary_path`), which the end table shows, marked resumed."""
    reused: bool = False
    """`--reuse` found the job's result in the store and did not run it (status `skipped`; `reused.json` in its folder
    names the stored result): the end table shows that result's verdict and figures, marked reused."""

    @property
    def ok(self) -> bool:
        return self.status in SUCCESS_STATUSES

    def with_warnings(self, warnings: Sequence[str]) -> JobOutcome:
        """This outcome with the job's warnings (each once): they qualify any result the job has — a verdict, or a
        finished result it was skipped for (`--resume`, `--reuse`); a job refused, or failed without a result, has
        none to qualify."""
        if not warnings or self.status in ("refused", "failed"):
            return self
        return self.model_copy(update={"warnings": list(dict.fromkeys([*self.warnings, *warnings]))})


@dataclass
class ServerGroup:
    """Jobs that share one server; `spec` may carry port 0 (a free port is picked at launch)."""

    id: str
    spec: LaunchSpec
    jobs: list[Job]
    source: RunSource = MEASURED
    executor: str = "local"
    notes: list[str] = field(default_factory=list)
    topology: Topology | None = None
    """Set for a job launched role by role (disaggregated, `execute.roles`); `spec` is then its router's launch."""
    warnings: dict[str, list[str]] = field(default_factory=dict)
    """Job id -> the warnings its outcome carries (`JobOutcome.warnings`, from `pipeline.job_warnings`), for whatever
    writes the job's outcome.json where the group runs (this process, or a Slurm node)."""

    def to_json(self, run_dir: Path, settings: LifecycleSettings) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_dir": str(run_dir.resolve()),
            "spec": self.spec.model_dump(mode="json"),
            "jobs": [job.to_json() for job in self.jobs],
            "source": self.source,
            "executor": self.executor,
            "settings": settings.model_dump(mode="json"),
            # The node renders the topology again from the job (one home: `engines.render_topology`).
            "roles": self.topology is not None,
            "warnings": self.warnings,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> tuple[ServerGroup, Path, LifecycleSettings]:
        group = cls(
            id=doc["id"],
            spec=LaunchSpec.model_validate(doc["spec"]),
            jobs=[Job.model_validate(j) for j in doc["jobs"]],
            source=run_source(doc.get("source") == SIMULATED),
            executor=doc.get("executor", "slurm"),
            warnings={str(k): [str(w) for w in v] for k, v in (doc.get("warnings") or {}).items()},
        )
        if doc.get("roles") and group.jobs:
            from llmsweep import engines

            group.topology = engines.render_topology(group.jobs[0], simulate=group.source == SIMULATED)
        return group, Path(doc["run_dir"]), LifecycleSettings.model_validate(doc.get("settings", {}))


Event = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def command_text(spec: LaunchSpec, launcher: ServerLauncher, launched: Sequence[str] | None = None,
                 drift: EngineVersionDrift | None = None) -> str:
    """What `server_command.txt` holds: the engine line with its environment, and the launcher's wrapper if any.

    `launched` is the argv the launcher really ran (the handle's): a wrapper may carry per-launch parts, such as the
    unique srun step name, that a fresh `render` would not reproduce. `drift`: the server ran another engine
    version than the launch declares; the engine line names the one that ran, and a note says both.
    """
    version = drift.ran if drift is not None else spec.engine_version or ""
    lines = [f"# engine: {spec.engine} {version}".rstrip(), f"# image: {spec.image or '(host)'}"]
    lines += [f"# note: {n}" for n in spec.notes]
    lines += [f"# note: {drift.warning()}"] if drift is not None else []
    lines = [comment_text(line) for line in lines]  # a recipe value never ends a comment line
    lines.append(spec.shell_command())
    wrapped = list(launched) if launched else launcher.render(spec)
    if list(wrapped) != list(spec.argv):
        lines.append(f"# launched by the {launcher.kind} executor as:")
        lines.append(shell.join(wrapped))
    return "\n".join(lines) + "\n"


def _endpoint(job: Job, spec: LaunchSpec, base_url: str, federated: FederatedMetrics | None = None) -> Endpoint:
    from llmsweep.client import Endpoint

    api = Point.of(job).api
    # The engine's dialect: fields it answers 422 to stay out of requests; no metrics path means nothing to scrape.
    rejected = set(spec.rejected_request_fields)
    metrics_url = f"{base_url.rstrip('/')}{spec.metrics_path}" if spec.metrics_path else ""
    if federated is not None:  # a role-by-role deployment: its workers' metrics, not its router's
        metrics_url = federated.url
    return Endpoint(base_url=base_url, model=spec.served_model_name or job.workload.served_model_name, api=api,
                    send_ignore_eos="ignore_eos" not in rejected, send_stream_options="stream_options" not in rejected,
                    metrics_url=metrics_url)


def _run_options(job: Job, spec: LaunchSpec, settings: LifecycleSettings,
                 federated: FederatedMetrics | None = None) -> RunOptions:
    """The client's options for the job's one concurrency point: its scenario's stopping rule and failure ratio; the
    metric prefix the gate requires is the server's (a role-by-role deployment's: its workers')."""
    from llmsweep.client import RunOptions

    point = Point.of(job)
    load = point.load
    return RunOptions(
        concurrency=load.concurrency, num_requests=load.num_requests, duration_s=load.duration_s,
        warmup_requests=load.warmup_requests, max_failure_ratio=point.max_error_ratio,
        timeout_s=settings.request_timeout_s, workers=settings.client_workers, gpus=point.gpus,
        seed=job.workload.seed,
        require_metrics_prefix=federated.prefix if federated is not None else spec.metrics_prefix,
    )


def _gates(job: Job, options: RunOptions) -> GateConfig:
    return Point.of(job).gates(planned_duration_s=options.duration_s,
                               require_metrics_prefix=options.require_metrics_prefix)


def _workload(job: Job, source: RunSource, endpoint: Endpoint | None = None) -> Workload:
    """The point's workload as `endpoint` receives it: a fixed-length workload's `ignore_eos` is what the client
    sends, false where the engine rejects the field (transformers serve: HTTP 422), so provenance's
    `workload.ignore_eos` never says a request asked for what it did not. None: as the job plans it."""
    point = Point.of(job)
    if endpoint is not None and not endpoint.send_ignore_eos and point.scenario.id is ScenarioId.FIXED_SEQ_LEN:
        return point.workload(simulated=source == SIMULATED, ignore_eos=False)
    return point.workload(simulated=source == SIMULATED)


def hardware_provenance(job: Job, observed: dict[str, Any] | None = None, *, no_gpu: bool = False) -> dict[str, Any]:
    """Provenance's `hardware` (`metrics.model.Hardware`): the job's SKU (what the summary's cost block prices),
    runner and GPUs, and what the host's driver said of its GPUs and the server's host of itself (`observe_runtime`;
    none in virtual time). `run` and `predict` both record it. The host's load average is read now: at the job's
    start, as `_provenance` is called for each job before its load. `no_gpu`: the server ran on none (a real
    engine's CPU rehearsal, :func:`on_no_gpu`): its GPUs are 0, not the job's, and the cost block prices no GPU-hour
    of the SKU for it."""
    seen = observed or {}
    state: list[GpuState] | None = seen.get("gpu_state")
    host: HostFacts | None = seen.get("host")
    if host is not None:
        host = host.model_copy(update={"load_avg_1m": load_average_1m()})
    return {"sku": job.sku, "runner": job.runner, "gpus": 0 if no_gpu else job.gpus,
            "gpu_names": seen.get("gpu_names"), "driver_version": seen.get("driver_version"),
            # Why `gpu_names` is null: the server's *_VISIBLE_DEVICES name a GPU this host does not have.
            **({"gpu_names_problem": seen["gpu_names_problem"]} if seen.get("gpu_names_problem") else {}),
            # only what was read: a result from before, or from where nothing could be read, keeps its shape, and
            # an unknown value is left out
            **({"gpu_state": [g.model_dump(mode="json", exclude_none=True) for g in state]} if state else {}),
            **({"host": host.model_dump(mode="json", exclude_none=True)} if host is not None else {})}


def simulator_build(calibration: str | None, digest: str | None) -> dict[str, Any]:
    """`provenance.simulator` (`metrics.model.SimulatorProvenance`): what the simulator that served a result says of
    itself — its calibration label and exact build (`sim.identity.simulator_digest`: this process's in virtual time
    and `predict`, the server's `/version` live), which `ResultPoint.simulator_build` reads. One builder for every
    path that records it."""
    return {"simulator": SimulatorProvenance(calibration=calibration, digest=digest).model_dump(exclude_none=True)}


def simulator_provenance(job: Job) -> dict[str, Any]:
    """What a result the simulator served records of how it modelled the job, in virtual time (`run --simulate`,
    `predict`) as over HTTP (`run --simulate --live`, on any executor): a speculative job's acceptance length and
    its source (`provenance.acceptance`), what the job sets that the simulator leaves out
    (`provenance.unmodelled`), the catalog figures it modelled the job with that are estimates
    (`provenance.estimated`), and the simulator's KV block where the stood-in engine pages its cache otherwise by
    default (`provenance.kv_block`)."""
    from llmsweep.engines.sim import engine_kv_block, estimated_figures, simulated_acceptance, unmodelled

    estimate = simulated_acceptance(job)
    block = engine_kv_block(job)
    return {**(estimate.provenance() if estimate is not None else {}),
            **({"unmodelled": missed} if (missed := unmodelled(job)) else {}),
            **({"estimated": figures} if (figures := estimated_figures(job)) else {}),
            **(block.provenance() if block is not None else {})}


def on_no_gpu(spec: LaunchSpec) -> bool:
    """Whether a real engine's launch uses no GPU (the CPU rehearsal): its per-GPU figures are no GPU's
    (`sim_warnings.no_gpu_figures`). The simulator's launch uses none either, but models the GPUs it reports."""
    return spec.gpus == 0 and spec.engine != SIM.id


def _provenance(job: Job, spec: LaunchSpec, group: ServerGroup, observed: dict[str, Any] | None = None,
                handle: ServerHandle | None = None, launcher: str | None = None,
                drift: EngineVersionDrift | None = None) -> dict[str, Any]:
    seen = observed or {}
    return {
        "job": {"id": job.id, "exp_name": job.exp_name, "recipe_key": job.recipe_key,
                "recipe_fingerprint": job.recipe_fingerprint},
        # `image` is what the server ran in, as its launcher says (None: on the host, as the simulator and the local
        # executor run); the recipe's is `recipe_image`.
        # the version that ran where it differs from the declared one (`execute.version_drift`), which is kept
        "launch": {"engine": spec.engine, "engine_version": drift.ran if drift is not None else spec.engine_version,
                   **({"engine_version_declared": drift.declared} if drift is not None else {}),
                   "engine_version_reported": seen.get("engine_version"),
                   "engine_version_installed": seen.get("engine_version_installed"), "image": seen.get("image"),
                   # the context length the server reported serving (`/v1/models`); job.json's is the launch's
                   "context_served": seen.get("context_served"),
                   # The local image `image` named when the server started, as the daemon reports it (docker).
                   "image_id": seen.get("image_id"), "image_digest": seen.get("image_digest"),
                   "recipe_image": job.image, "fingerprint": spec.fingerprint(),
                   # What placed the server: the group's executor and the launcher that started it there.
                   "executor": group.executor, "launcher": launcher,
                   # the batch job the server ran in: its srun step's, else (the server started by the worker
                   # itself, `node.use_srun: false`) the batch job this worker runs in
                   "slurm_job_id": (handle.job_id if handle is not None and handle.job_id else
                                    os.environ.get("SLURM_JOB_ID") if group.executor == "slurm" else None)},
        "hardware": hardware_provenance(job, seen, no_gpu=on_no_gpu(spec)),
        "llmsweep_version": __version__,
        "source": group.source,
        "clock": WALL,  # the live path; `execute.virtual` records VIRTUAL
        # The simulator says itself (GET /version; in virtual time, this process's core) whether its (engine,
        # hardware, model class) is calibrated, and its exact build (`ResultPoint.simulator_build` reads it).
        **(simulator_build(seen.get("calibration"), seen.get("simulator_digest")) if spec.engine == SIM.id else {}),
        **(simulator_provenance(job) if spec.engine == SIM.id else {}),
        # A job launched role by role: the topology that ran, read back from its roles (`execute.roles`).
        **({"topology": seen["topology"]} if seen.get("topology") is not None else {}),
        # a server on no GPU (a CPU rehearsal): its per-GPU figures are no GPU's (`sim_warnings.no_gpu_figures`)
        **({"gpus_known": False, "gpus_from": no_gpu_figures(Point.of(job).gpus)}
           if on_no_gpu(spec) else {}),
    }


GPU_IDENTITY_FIELDS = ("index", "uuid", "name", "driver_version")
"""What `observe_runtime` asks `nvidia-smi --query-gpu` first: which GPUs (`visible_rows`), their names, the driver."""
GPU_STATE_FIELDS = ("enforced.power.limit", "clocks.max.sm", "clocks.sm")
"""Asked after them in the same query (`GpuState`): what makes two hosts' GPUs of one SKU comparable."""


def on_this_host(handle: ServerHandle) -> bool:
    """Whether the server runs on the machine this process runs on: it answers on a loopback address (a local or
    Docker launch, the server step of a Slurm job on the worker's node, a role deployment placed on this host). A
    server reached at another node's address (the roles of a multi-node job) is not; its host is not read here."""
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(handle.base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_facts() -> HostFacts:
    """This machine's CPU (`HostFacts`), read now; its load average is read per job (`hardware_provenance`)."""
    return HostFacts(cpu_model=cpu_model(), logical_cpus=os.cpu_count(), usable_cpus=usable_cpus())


def gpu_state(row: Sequence[str]) -> GpuState | None:
    """A `--query-gpu` row's `GPU_STATE_FIELDS` (after `GPU_IDENTITY_FIELDS`), None when it has none: `[N/A]` or
    `[Not Supported]` is an absent value, never a guess."""
    from llmsweep.power.backends import first_number

    values = [first_number(v) for v in row[len(GPU_IDENTITY_FIELDS):len(GPU_IDENTITY_FIELDS) + len(GPU_STATE_FIELDS)]]
    if not any(v is not None for v in values):
        return None
    values += [None] * (len(GPU_STATE_FIELDS) - len(values))
    return GpuState(index=int(row[0]), power_limit_w=values[0], sm_clock_max_mhz=values[1], sm_clock_mhz=values[2])


def _query_gpus() -> str | None:
    """`nvidia-smi --query-gpu` of `GPU_IDENTITY_FIELDS` and `GPU_STATE_FIELDS`; a driver that refuses the state's
    fields is asked the identity alone (the GPUs' names matter more than their state), None when neither answers."""
    from llmsweep.execute.commands import run_command

    for fields in ((*GPU_IDENTITY_FIELDS, *GPU_STATE_FIELDS), GPU_IDENTITY_FIELDS):
        try:
            return run_command(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                               timeout_s=30.0, fix="check the GPU driver").stdout
        except LlmsweepError as exc:
            log.info("could not query nvidia-smi: %s", exc)
    return None


def observe_runtime(handle: ServerHandle, spec: LaunchSpec) -> dict[str, Any]:
    """What the running server and this host say about themselves: the engine's `/version`; the GPUs as the driver
    names them, with their power limits and SM (NVIDIA) or GFX (AMD) clocks (`GpuState`); the host's CPU
    (`HostFacts`). The GPUs are read from `nvidia-smi --query-gpu`, or where nvidia-smi is absent from `amd-smi`
    (`execute.amd_gpus`). Best effort, read once per launch: a value that cannot be read is None, never a failure;
    one step of asking the tools (`llmsweep.visible.gpu_tool_step`: one that hangs is waited for once).
    The GPUs' state and the host are read only for a server on this host (:func:`on_this_host`) that is not the
    simulator: a simulated point ran on no GPU, and the machine that simulates it is not the engine's host."""
    with gpu_tool_step("this recording of the server's GPUs"):  # (part of the caller's step, where it has one)
        return _observe(handle, spec)


def _observe(handle: ServerHandle, spec: LaunchSpec) -> dict[str, Any]:
    from llmsweep.execute.ready import served_context, server_version

    doc = server_version(handle.base_url)
    # a version is the launched engine's only where /version names no engine (vLLM's, SGLang's) or that one: a server
    # that names another (the simulator behind a CPU rehearsal's stand-in for vLLM says `sim`) gives its own
    said = doc.get("engine")
    version = doc.get("version") if not said or said == spec.engine else None
    # the calibration and the build (`sim.identity.simulator_digest`) are the simulator's; real engines have neither
    seen: dict[str, Any] = {"engine_version": version, "gpu_names": None, "driver_version": None,
                            "calibration": doc.get("calibration"), "simulator_digest": doc.get("simulator_digest"),
                            # the context the server serves, as it reports it (vLLM's `auto`: what it fitted)
                            "context_served": served_context(handle.base_url, spec.served_model_name)}
    here = spec.engine != SIM.id and on_this_host(handle)
    if here:
        seen["host"] = host_facts()
    if spec.gpus <= 0 or (host := _host_gpus(here)) is None:
        return seen
    by_index = {g.index: g for g in host.gpus}
    try:
        env = {**os.environ, **spec.env}
        selected = select_visible(host.listed, env, host.fix)
        if handle.gpus_in_bus_order:  # a container numbers the GPUs it was given in the host's (bus) order
            selected.sort(key=host.listed.indices.index)
        gpus = [by_index[i] for i in selected]
        names = [g.name for g in gpus]
        # every GPU named, or none: a list with a hole would name fewer GPUs than the server ran on
        seen["gpu_names"] = [n for n in names if n] if names and all(names) else None
        if here:
            seen["gpu_state"] = [g.state for g in gpus if g.state is not None] or None
    except ConfigError as exc:
        # An entry that names no GPU of this host: the server's GPUs go unnamed rather than named wrongly
        # (or a shorter list), and the reason is kept with the hardware identity (`_provenance`).
        log.warning("GPUs of the server not identified: %s", exc.one_line())
        seen["gpu_names_problem"] = exc.one_line()
        gpus = host.gpus  # every GPU of the host: the driver is the same for all
    seen["driver_version"] = gpus[0].driver_version if gpus else None
    return seen


@dataclass(frozen=True, slots=True)
class _ListedGpu:
    """One GPU of this host as its vendor's tool listed it (`observe_runtime`); None where the tool said nothing."""

    index: int
    name: str | None
    driver_version: str | None
    state: GpuState | None


@dataclass(frozen=True, slots=True)
class _HostGpus:
    """This host's GPUs as one vendor's tool listed them, and how a server's selection of them is read."""

    gpus: list[_ListedGpu]
    listed: Listed
    """Their indices and the tool's UUIDs of them, as `llmsweep.visible.select_listed` reads a selection of them."""
    fix: str


_NVIDIA_FIX = "name the server's GPUs by index or by a UUID `nvidia-smi -L` lists, or unset the variable"
_AMD_FIX = "name the server's GPUs by index or by a UUID `amd-smi list -e` lists, or unset the variable"


def _host_gpus(here: bool) -> _HostGpus | None:
    """This host's GPUs: `nvidia-smi --query-gpu` where nvidia-smi is on PATH, else `amd-smi static` (with
    `amd-smi metric --clock` for their state when the server is `here`); None when neither answers."""
    if shutil.which("nvidia-smi"):
        if (out := _query_gpus()) is None:
            return None
        rows = _query_rows(out)
        return _HostGpus([_ListedGpu(int(r[0]), r[2], r[3], gpu_state(r)) for r in rows],
                         Listed("nvidia-smi", tuple(int(r[0]) for r in rows), _uuid_table(out)), _NVIDIA_FIX)
    if not shutil.which("amd-smi") or (amd := query_amd_static()) is None:
        return None
    clocks = query_amd_clocks() if here else {}
    return _HostGpus([_ListedGpu(g.index, g.name, g.driver_version, _amd_state(g, clocks.get(g.index)))
                      for g in amd.values()], Listed("amd-smi", tuple(amd), None), _AMD_FIX)


def _amd_state(gpu: AmdGpu, clock: GfxClock | None) -> GpuState | None:
    """An AMD GPU's power cap and GFX clocks as a `GpuState`, None when amd-smi gave none of them."""
    values = (gpu.power_limit_w, clock.max_mhz if clock else None, clock.mhz if clock else None)
    if all(v is None for v in values):
        return None
    return GpuState(index=gpu.index, power_limit_w=values[0], sm_clock_max_mhz=values[1], sm_clock_mhz=values[2],
                    clock_domain="gfx")


def _query_rows(csv: str) -> list[list[str]]:
    """The GPU rows of an `nvidia-smi --query-gpu=index,uuid,...` CSV, cells stripped."""
    rows = [[c.strip() for c in line.split(",")] for line in csv.splitlines() if line.strip()]
    return [r for r in rows if len(r) >= 4 and r[0].isdigit()]


def _uuid_table(csv: str) -> GpuTable:
    return GpuTable("nvidia", {r[1].lower(): int(r[0]) for r in _query_rows(csv)}, "listed by nvidia-smi --query-gpu")


def select_visible(listed: Listed, env: Mapping[str, str], fix: str) -> list[int]:
    """Which of the host's GPUs (`listed`, as its tool numbers them) the server's environment makes visible, in the
    runtime's order, not every GPU of the host: :func:`llmsweep.visible.select_listed`, as the launch preflight reads
    them (and the power sampler, through the same reader of the `*_VISIBLE_DEVICES` variables).

    Raises ConfigError when an entry names no GPU of the host (a typo'd UUID, an ambiguous prefix, an index the tool
    does not list): a shorter list would name GPUs the server may not have run on."""
    visible = select_listed(listed, env)
    if visible.problem is not None:
        raise ConfigError(f"the server's GPUs cannot be named: {visible.problem}", fix=fix)
    return list(visible.gpus or ())


def visible_rows(csv: str, env: Mapping[str, str]) -> list[list[str]]:
    """The rows of `nvidia-smi --query-gpu=index,uuid,...` for the GPUs the server's environment makes visible, in
    the runtime's order (:func:`select_visible`, with the CSV's UUIDs as the GPUs already listed).

    Raises ConfigError when an entry names no GPU of the host."""
    by_index = {int(r[0]): r for r in _query_rows(csv)}
    return [by_index[i] for i in select_visible(Listed("nvidia-smi", tuple(by_index), _uuid_table(csv)), env,
                                                _NVIDIA_FIX)]


_START_EXITS = 2
"""Launches in a row that exit while starting, none ever ready, after which a group's server is not launched again."""

PORT_RACES = 2
"""Launches in a row, none ready in between, that may exit while starting because a port llmsweep picked free for
them was taken first ("address already in use": another process took it in the moment between pick and bind), each
relaunched at once on ports picked afresh, before the exit counts as the job's failure. Only where llmsweep picks the
ports (a server whose spec leaves the port to it, a role deployment placed on this host): a port the recipe or a
Slurm topology fixes would be taken again."""


def lost_port_race(error: LlmsweepError) -> bool:
    """Whether a launch that exited while starting said it could not bind an address (the log tail in its
    LaunchError, in the words `ready.BIND_REFUSALS` knows)."""
    from llmsweep.execute.ready import bind_refusal

    return bind_refusal(error.message) is not None


class _Server:
    """One launched server of a group, relaunched on demand after a crash."""

    def __init__(self, group: ServerGroup, launcher: ServerLauncher, run_dir: Path, settings: LifecycleSettings,
                 event: Event) -> None:
        self.group, self.launcher, self.settings, self.event = group, launcher, settings, event
        self.dir = art.server_dir(run_dir, group.id)
        self.handle: ServerHandle | None = None
        self.spec: LaunchSpec | None = None
        self.observed: dict[str, Any] = {}
        self.launches = 0
        self.parked = 0
        """Launches stopped on purpose (`park`: a run-eval row's eval needed the GPUs); not deaths."""
        self.power: Sampler | None = None
        self.ever_ready = False
        """Whether a launch of it was ever ready: one that keeps exiting while starting before any was is not
        relaunched for every job (`start_exits`)."""
        self.start_exits = 0
        self.port_races = 0
        """Launches that exited while starting because a port was taken before they bound it (`lost_port_race`),
        each relaunched at once: neither a death nor an exit the job fails with."""
        self.races_in_row = 0
        """Of those, the ones since a launch was last ready: at most `PORT_RACES` (an engine that always fails to
        bind an address of its own is not relaunched three times for every job)."""
        self._picks_ports = False
        """Whether the launch in progress runs on ports llmsweep picked (`PORT_RACES`)."""
        self.start_error: LlmsweepError | None = None
        """Why its last launch did not become ready (it exited, or missed its readiness deadline), while none ever
        was: the later jobs' reason once it is not launched again — it never came up, it did not die."""
        self.unlaunched: LlmsweepError | None = None
        """Why the server could not be launched at all (preflight, image pull, the launch itself): no server ran, so
        the group's later jobs fail with this reason rather than as deaths of a server that never existed."""
        # The secrets of this group's launch, known before any launch succeeds (a failure message may quote them).
        self.scrubber = SecretScrubber(collect_secrets(group.spec.secret_env).values())
        self.drift: EngineVersionDrift | None = None
        """The engine version that ran, where it differs from the one the launch declares (`_judge_version`)."""
        self.refused: LlmsweepError | None = None
        """Why the group's server is not used for its jobs although it started (the engine version that ran does
        not honour a gated knob of the launch): each later job fails with it, without a relaunch."""

    @property
    def federated(self) -> FederatedMetrics | None:
        """A role-by-role deployment's workers' metrics as one scrape (`execute.roles`); None for one server."""
        from llmsweep.execute.roles import RoleDeployment

        return self.handle.metrics if isinstance(self.handle, RoleDeployment) else None

    def ensure(self) -> ServerHandle:
        """The group's live server: the one running while it still serves, else a launch (a relaunch after a death,
        bounded by `max_relaunches`); a launch that lost a port to another process is relaunched at once."""
        for _attempt in range(PORT_RACES + 1):
            raced_before = self.port_races
            try:
                return self._ensure()
            except LlmsweepError as exc:
                if self.port_races == raced_before:  # not a lost port (`_lost_port`): the job's failure
                    raise
                art.keep_pid_file(self.dir, self.launches)  # what the lost launch left, if it could not be stopped
                self.event(f"the {self.group.spec.engine} server of group {self.group.id} exited while starting: a "
                           "port picked for it was taken before it bound it; relaunching on ports picked afresh "
                           f"({exc.message.strip().splitlines()[0]})")
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _ensure(self) -> ServerHandle:
        if self.refused is not None:
            raise self.refused
        if self.handle is not None and self.handle.is_alive() and self._serving(self.handle):
            return self.handle
        if self.handle is not None:
            self.stop()
            art.keep_pid_file(self.dir, self.launches)  # what the dead server left, if it could not be stopped
        if self.unlaunched is not None:
            raise LaunchError(never_came_up(self.group.spec.engine, self.group.id, self.unlaunched.message),
                              fix=self.unlaunched.fix)
        if self.launches - self.parked - self.port_races > self.settings.max_relaunches:
            if not self.ever_ready and self.start_error is not None:
                # every launch missed its readiness deadline (or exited while starting), none was ever ready: that
                # is what the later jobs are told, not that a server which never came up "died N times"
                raise LaunchError(never_came_up(self.group.spec.engine, self.group.id,
                                                f"{self.start_error.message} (none of its {self.launches} launches "
                                                "became ready)"), fix=self.start_error.fix)
            raise LaunchError(
                f"server of group {self.group.id} died {self.launches} times; not relaunching again",
                fix=f"read {self.dir / art.SERVER_LOG}",
            )
        if self.group.topology is not None:
            self.launches += 1
            return self._ensure_roles(self.group.topology)
        self._picks_ports = self.group.spec.port == 0  # a port the recipe pins is checked free, not picked
        try:
            spec = preflight(self.group.spec, gpus=self.group.spec.engine != SIM.id)
            self.dir.mkdir(parents=True, exist_ok=True)
            spec = art.write_launch_files(spec, self.dir, self.scrubber)
            self.spec = spec
            log_path = self.dir / (art.SERVER_LOG if not self.launches else f"server.{self.launches + 1}.log")
            current_progress().phase("launching")
            prepared = self.launcher.prepare(spec, log_dir=self.dir, event=self.event)  # a pull is not start-up
            self.event(f"launching {spec.engine} server for {count_of(len(self.group.jobs), 'job')} "
                       f"on port {spec.port}")
            with shielded():  # a signal now waits until the server is recorded: held here and in its pid file
                handle = self.launcher.launch(spec, log_path=log_path)
                self.handle = handle
                self.launches += 1
                write_pid_file(self.dir / art.PID_FILE, handle, spec)
        except LlmsweepError as exc:
            if self.handle is None:
                self.unlaunched = exc
            raise
        try:
            ready = wait_ready(handle, timeout_s=self.settings.startup_timeout_s, poll_s=0.25)
        except BaseException as exc:
            self._start_failed(exc, exited=handle.returncode is not None, what="it")
            raise
        self.ever_ready, self.races_in_row = True, 0
        self.event(f"server ready in {ready.seconds:.1f} s at {handle.base_url}")
        # one step of asking the GPU tools: a tool that hangs is waited for once for the server's GPUs and its
        # sampler (`visible.gpu_tool_step`); the next server group asks it again
        with gpu_tool_step("this recording of the server's GPUs and start of its power sampler"):
            self.observed = {**observe_runtime(handle, spec), **asdict(prepared)}  # `_provenance` reads them
            unasked = self._read_installed_version(handle, spec)
            self._judge_version(spec)
            self._unread_version(spec, unasked)
            if on_no_gpu(spec):  # a CPU rehearsal: its figures are no GPU's, and its table says it
                for job in self.group.jobs:
                    kept = self.group.warnings.setdefault(job.id, [])
                    if (no_gpu := no_gpu_figures(Point.of(job).gpus)) not in kept:
                        kept.append(no_gpu)
            self.power = start_sampler(self.settings.power.for_jobs(self.group.jobs), engine=spec.engine,
                                       gpus=spec.gpus, base_url=handle.base_url, env=spec.env, server_dir=self.dir)
        self._judge_context(spec)
        if self.observed.get("engine_version") or self.observed.get("gpu_names"):
            gpus = self.observed.get("gpu_names")
            self.event(f"server reports {spec.engine} {self.observed.get('engine_version') or '(no version)'}"
                       + (f" on {', '.join(gpus)}" if gpus else ""))
        machine = Hardware(host=self.observed.get("host"), gpu_state=self.observed.get("gpu_state"))
        said = [f"host {machine.host.text()}" if machine.host is not None else "",
                f"GPUs {state}" if (state := machine.gpu_state_text()) else ""]
        if any(said):  # what two runs of one recipe on one SKU are told apart by (`HostFacts`, `GpuState`)
            self.event("server's machine: " + "; ".join(x for x in said if x))
        return handle

    def _read_installed_version(self, handle: ServerHandle, spec: LaunchSpec) -> str:
        """Record in `observed` what the interpreter that serves has installed (`engine_version_installed`) where it
        can be asked, and return the words for where it could not: the host's own engine (no image pins its build;
        `run --reuse` reads it), or a container's interpreter where the server reports no version. A server in a
        Slurm container (pyxis) or on another node is not asked: recorded as unread, so `_unread_version` says so."""
        if spec.engine == SIM.id:
            return ""
        if self.observed.get("image") is None and on_this_host(handle):
            from llmsweep.execute.host_engine import host_engine_version

            self.observed["engine_version_installed"] = host_engine_version(spec)
            return "the python that ran it could not be asked"
        if self.observed.get("engine_version"):
            return ""
        from llmsweep.execute.docker import DockerServerHandle

        if isinstance(handle, DockerServerHandle):
            self.observed["engine_version_installed"] = handle.installed_engine_version()
            return "its container's python could not be asked"
        self.observed["engine_version_installed"] = None
        return ("llmsweep does not ask the python of a server in a Slurm container" if self.observed.get("image")
                else "llmsweep does not ask the python of a server on another node")

    def _unread_version(self, spec: LaunchSpec, unasked: str) -> None:
        """Say so when the engine version that ran could be read neither from the server (`/version`) nor from the
        interpreter that ran it (the host's, or its container's; `unasked` says which, or that none was asked): the
        result then carries the version the launch declares, which nothing read back confirms
        (`launch.engine_version_reported` and `_installed` are null)."""
        if (spec.engine == SIM.id or not spec.engine_version or "engine_version_installed" not in self.observed
                or self.observed.get("engine_version") or self.observed.get("engine_version_installed")):
            return
        self.event(f"warning: the {spec.engine} version that ran was not read (the server reports none, and {unasked}"
                   f"): the result carries the declared {spec.engine_version}, unconfirmed")

    def _judge_context(self, spec: LaunchSpec) -> None:
        """Say the context the server reports serving, and warn each job whose launch fixed another (job.json records
        the launch's; the result's provenance, `launch.context_served`, what the server said)."""
        from llmsweep.engines import launched_job

        served = self.observed.get("context_served")
        if served is None or spec.engine == SIM.id:
            return
        self.event(f"server reports a context of {served:,} tokens")
        for job in self.group.jobs:
            asked = launched_job(job).max_model_len
            if asked is not None and asked != served:
                warning = context_served(served, asked)
                kept = self.group.warnings.setdefault(job.id, [])
                if warning not in kept:
                    kept.append(warning)

    def _judge_version(self, *specs: LaunchSpec) -> None:
        """Compare the engine version that ran (reported, else installed) with the one the launch declares: a drift
        is said on the console and in each of the group's results' warnings, and labels them; a gated knob the
        running version does not honour stops the server and fails the group's jobs (`execute.version_drift`).
        `specs`: the server's launch, or each role's of a deployment (the drift of the first one a knob of which the
        running version does not honour, else of the first)."""
        from llmsweep.execute.version_drift import version_drift

        if not specs or specs[0].engine == SIM.id or not self.group.jobs:
            return
        drifts = []
        for spec in specs:
            try:
                drifts.append(version_drift(self.group.jobs[0], spec, self.observed))
            except LlmsweepError as exc:  # a launch no adapter renders has no gates to judge again
                log.info("engine version not compared: %s", exc)
                return
        drift = next((d for d in drifts if d is not None and d.error() is not None), drifts[0])
        self.drift = drift
        if drift is None:
            return
        said = drift.warning()
        self.event(f"warning: {said}")
        for job in self.group.jobs:
            kept = self.group.warnings.setdefault(job.id, [])
            if said not in kept:
                kept.append(said)
        error = drift.error()
        if error is not None:
            self.refused = error
            self.stop()
            raise error

    def _ensure_roles(self, topology: Topology) -> ServerHandle:
        """Start every role of a disaggregated job where the group's launcher places it (a step on its node of the
        Slurm allocation, or a process of this host), each ready in turn, then the router; read back what started.
        Any failure tears down every role started so far."""
        from llmsweep.execute.roles import LocalPlacement, RoleDeployment, role_placement

        try:
            placement = role_placement(self.launcher, topology, self.dir, executor=self.group.executor)
        except LlmsweepError as exc:
            # nowhere to place the roles (the host's GPUs, a worker's preflight, the allocation): no role ran, and
            # nothing is left (the server folder is made once they are placed, as one server's after its preflight)
            self.unlaunched = exc
            raise
        self.dir.mkdir(parents=True, exist_ok=True)
        self._picks_ports = isinstance(placement, LocalPlacement)  # a Slurm placement keeps the topology's ports
        deployment = RoleDeployment(topology, placement, self.dir, launch=self.launches)
        self.handle, self.spec = deployment, deployment.spec
        current_progress().phase("launching")
        started = count_of(sum(r.count for r in topology.roles), f"role {placement.unit}", f"role {placement.units}")
        self.event(f"launching {started} of {topology.job} on {placement.where()}")
        try:
            deployment.start(startup_timeout_s=self.settings.startup_timeout_s, event=self.event,
                             power_backend=self.settings.power.backend)
            shares = [s for s in placement.gpus.values() if s]
            gpus = sum(r.count * r.gpus_per_worker for r in topology.roles)
            # the GPUs of every worker, as the driver names them (the router's launch uses none)
            seen = (deployment.spec.model_copy(update={"gpus": gpus, "env": {VISIBLE_CUDA: ",".join(shares)}})
                    if shares and topology.engine != SIM.id else deployment.spec)
            self.observed = observe_runtime(deployment, seen)
            ran = deployment.readback()
            self.observed["topology"] = ran.describe()
            if topology.engine == SIM.id:
                # the build the workers ran and their calibration, each read back from its own /version (the
                # router's said only its own build, and no calibration)
                self.observed["simulator_digest"] = ran.simulator_digest
                self.observed["calibration"] = ran.simulator_calibration
            if topology.engine != SIM.id:
                # the engine's version is its workers' (the router's /version is llmsweep's): one, or no result
                said = {w.version for r in ran.roles if r.role != "router" for w in r.workers if w.version}
                if len(said) > 1:
                    raise LaunchError(
                        f"the workers of {topology.job} report different {topology.engine} versions "
                        f"({', '.join(sorted(said))}): its results cannot be labelled with the version that ran",
                        fix=f"launch every role from one image (or one python, under {_EXECUTOR} local)")
                self.observed["engine_version"] = next(iter(said), None)
                # judged as one server's is: a drift from the declared version labels the results with the one
                # that ran, and a knob of a role's launch that version does not honour refuses the deployment
                self._judge_version(*deployment.role_specs.values())
            self.power = deployment.power(self.settings.power.for_jobs(self.group.jobs))  # every node's GPUs
        except BaseException as exc:
            # a role exited while starting (not: one slow to come up)
            self._start_failed(exc, exited=deployment.returncode is not None, what="a role")
            raise
        self.ever_ready, self.races_in_row = True, 0
        write_pid_file(self.dir / art.PID_FILE, deployment, deployment.spec)
        self.event(f"router ready at {deployment.base_url}")
        return deployment

    def _start_failed(self, exc: BaseException, *, exited: bool, what: str) -> None:
        """A launch that did not become ready (`what`: "it", one server; "a role", a deployment's): torn down, as a
        server that missed its readiness deadline may still come up later and the next job must not benchmark a
        server nobody saw become ready. Its error is kept for the later jobs while none was ever ready; one that
        exited while starting on every launch, none ever ready (a missing module, a bad flag, its port taken on its
        node), fails the group's later jobs with that reason, not as relaunches of a server that "died N times". One
        exit may be passing (a port taken between preflight and the engine's bind, `_lost_port`): the next job
        relaunches once."""
        self.stop()
        if not isinstance(exc, LlmsweepError) or (exited and self._lost_port(exc)) or self.ever_ready:
            return
        self.start_error = exc
        if exited:
            self.start_exits += 1
            if self.start_exits >= _START_EXITS:
                self.unlaunched = LaunchError(f"{exc.message} ({what} exited while starting on {self.start_exits} "
                                              "launches in a row)", fix=exc.fix)

    def _lost_port(self, exc: LlmsweepError) -> bool:
        """Whether a launch that exited while starting lost a port to another process (`lost_port_race`) with a
        relaunch left for it: counted apart (`port_races`), and `ensure` relaunches it at once."""
        if self.races_in_row >= PORT_RACES or not self._picks_ports or not lost_port_race(exc):
            return False
        self.port_races += 1
        self.races_in_row += 1
        return True

    def park(self) -> None:
        """Stop a live server on purpose (its GPUs go to the owed evals' server); a later launch of it is no relaunch
        after a death."""
        if self.handle is not None:
            self.stop()
            self.parked += 1

    def _serving(self, handle: ServerHandle) -> bool:
        """Whether a live server still answers its health check, asked before the next job is sent to it. A server
        shutting down from outside (`docker stop`, a SIGTERM to the engine) lives on through its graceful exit, and
        a hung one lives on for good: sent the next job, either fails it far from the cause. One that does not answer
        is given the stop grace to answer again or exit; then it is taken for dead, and relaunched."""
        url = f"{handle.base_url}{handle.spec.health_path}"
        deadline = time.monotonic() + self.settings.stop_grace_s
        while True:
            status = probe_health(url)
            if status is not None and 200 <= status < 300:
                return True
            if not handle.is_alive() or time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        got = "no answer" if status is None else f"HTTP {status}"
        grace = self.settings.stop_grace_s
        how = "it exited" if not handle.is_alive() else f"it did not answer again within {grace:g} s"
        self.event(f"the {self.group.spec.engine} server of group {self.group.id} no longer serves: {url} gave {got} "
                   f"before the next job, and {how}; it is stopped and launched again")
        return False

    def stop(self) -> None:
        """Tear the server down; its pid file goes only once nothing of it is left, so a `--resume` after anything
        that went wrong here (a kill, a process that would not die, a container `docker rm` could not remove) still
        finds it. Signals arriving meanwhile do not cut the teardown short (a second one skips the grace)."""
        handle = self.handle
        if handle is None:
            return
        with shielded():
            handle.stop(grace_s=self.settings.stop_grace_s)
            pid_file = self.dir / art.PID_FILE
            if handle.gone():
                pid_file.unlink(missing_ok=True)
            elif pid_file.exists():
                self.event(f"warning: the {self.group.spec.engine} server (pid {handle.pid}) may not be fully "
                           f"stopped; {pid_file} is kept so `llmsweep run {_RESUME}` stops it")
            self.handle = None
            if self.power is not None:  # stopped after the server, so the samples cover its teardown
                self.power.stop()
                self.power = None


def bench_job(
    job: Job,
    base_url: str,
    out_dir: Path,
    *,
    spec: LaunchSpec | None = None,
    source: RunSource = MEASURED,
    settings: LifecycleSettings | None = None,
    provenance: dict[str, Any] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    power: Sampler | None = None,
    federated: FederatedMetrics | None = None,
) -> Summary:
    """Drive a job's workload against a server that already serves it; returns the gated summary.

    The library form of `llmsweep bench` for a Job: the workload, concurrency, prompt counts, duration, gates and the
    read-back checks all come from the job, exactly as `llmsweep run` uses them. `spec` (the job's LaunchSpec) tells
    the served model name, the engine's request dialect and its metrics; rendered from the job when omitted.
    `federated`: a role-by-role deployment's workers' metrics (`execute.roles`), scraped instead of `spec`'s.
    """
    from llmsweep import engines

    settings = settings or LifecycleSettings()
    if spec is None:
        spec = engines.render(job, simulate=source == SIMULATED, port=engines.launch_port(job))
    options = _run_options(job, spec, settings, federated)
    from llmsweep.client import run_benchmark

    endpoint = _endpoint(job, spec, base_url, federated)
    workload = _workload(job, source, endpoint=endpoint)
    if power is not None:  # before the start is taken: the sampler keeps what the window needs from here on
        power.open_window()
    began = time.time()
    with stop_then_raise() as stop:  # a signal stops the load at the client's next poll, then unwinds the run
        run_benchmark(workload, endpoint, options, out_dir, provenance=provenance, gates=_gates(job, options),
                      on_progress=on_progress, stop_requested=stop.reason, source=source)
    if power is not None:  # the job's samples beside its records, read by the summary's power block
        from llmsweep.power.virtual import job_power_unmodelled, write_not_modelled

        unmodelled = job_power_unmodelled(job) if spec.engine == SIM.id else None
        if unmodelled is not None:  # the simulator's samples are of its tensor-parallel GPUs alone: not the job's
            write_not_modelled(Path(out_dir), unmodelled, expected_gpus=Point.of(job).gpus,
                               require=settings.power.required([job]), max_gap_s=settings.power.max_gap_s)
        else:
            power.write_job(Path(out_dir), began, expected_gpus=Point.of(job).gpus,
                            require=settings.power.required([job]))
    # the verdict from the raw records and every gate (`summarise_job`, as `llmsweep summarize`); the source is the
    # one run.json got with the records, never stamped afterwards (a kill between two writes would mislabel it)
    return summarise_job(Path(out_dir), settings=settings.readback)


def eval_job(job: Job, base_url: str, out_dir: Path, *, spec: LaunchSpec, source: RunSource,
             settings: LifecycleSettings, provenance: dict[str, Any], event: Event = _quiet,
             server_command: str | None = None) -> Summary:
    """The job's eval against a server that already serves it (`llmsweep.evals`), then its summary re-made with the
    eval attached. An eval-only job records here what ran (run.json), as the client does for a throughput point.
    `server_command`: the launch of the server relaunched for this eval alone (`eval_launch`), recorded with it."""
    from llmsweep.evals.results import run_eval

    if job.eval_only:
        art.write_json(out_dir / art.RUN_FILE, {"provenance": provenance, "gpus": Point.of(job).gpus, "source": source})
    metrics_url = f"{base_url.rstrip('/')}{spec.metrics_path}" if spec.metrics_path else None
    where = ("eval-only" if job.eval_only else "after the throughput run"
             + (", on its own server with real verification" if server_command is not None else ""))
    event(f"job {job.id}: eval {settings.eval.task} ({where})")
    # the phase from here on, whatever launched its server (which said `launching`): the eval, with its answers
    progress = current_progress()
    progress.phase("evaluating")

    def answered(done: int, of: int | None) -> None:
        progress.evaluated(EvalCount(answered=done, of=of))

    block = run_eval(job, base_url, model=spec.served_model_name or job.workload.served_model_name,
                     metrics_url=metrics_url, job_dir=out_dir, settings=settings.eval, server_command=server_command,
                     on_progress=answered)
    score = "n/a" if block.score is None else f"{block.score:.4f}"
    event(f"job {job.id}: eval {block.task} {block.score_name or 'score'} = {score} → {block.verdict}")
    return summarise_job(out_dir, settings=settings.readback)


def eval_launch(job: Job, group: ServerGroup) -> LaunchSpec | None:
    """The launch of `job`'s eval when the group's server cannot serve it, else None (the eval shares that server).

    A run-eval row whose throughput point pins acceptance (`engines.base.relaunches_for_eval`) evaluates on a server
    relaunched with real verification: the job's own launch without any spelling of synthetic acceptance
    (`engines.base.real_verification`), rendered as the group's was. Without a pin nothing differs: one server, as
    InferenceX runs it."""
    from llmsweep import engines
    from llmsweep.engines.base import real_verification, relaunches_for_eval

    if not relaunches_for_eval(job):
        return None
    spec = engines.render(real_verification(job), simulate=group.spec.engine == SIM.id, port=group.spec.port)
    return None if spec.fingerprint() == group.spec.fingerprint() else spec


EVAL_SERVER_SUFFIX = "-eval"
"""A relaunched eval server's group id is the throughput group's id with this suffix (`servers/<id>-eval/`)."""


def eval_group(group: ServerGroup, jobs: Sequence[Job], spec: LaunchSpec) -> ServerGroup:
    """The group of a relaunched eval server, for the evals of `jobs` (its own folder under `servers/`, its own
    launch files)."""
    return ServerGroup(id=f"{group.id}{EVAL_SERVER_SUFFIX}", spec=spec, jobs=list(jobs), source=group.source,
                       executor=group.executor, notes=[*group.notes, "eval server: real verification"],
                       warnings=group.warnings)


def relaunch_reason(job: Job) -> str:
    """Why a run-eval row's eval gets a server of its own: the words the progress lines use on every path."""
    pinned = job.acceptance.value if job.acceptance is not None else "?"
    return f"without synthetic acceptance for the eval (the throughput point pinned {pinned})"


def record_eval_server(jdir: Path, spec: LaunchSpec, launcher: ServerLauncher, handle: ServerHandle) -> str:
    """Write the relaunched eval server's launch to the job's `eval/server_command.txt` (secrets scrubbed) and return
    it as written: what the eval block records (`EvalBlock.server_command`)."""
    from llmsweep.evals.results import EVAL_DIR

    command = handle.scrubber.scrub(command_text(spec, launcher, handle.command))
    handle.scrubber.write_text(jdir / EVAL_DIR / art.COMMAND_FILE, command)
    return command


@dataclass(frozen=True)
class _OwedEval:
    """A run-eval row whose point pinned acceptance and ran: its eval waits for the group's eval server."""

    job: Job
    spec: LaunchSpec
    """The eval's launch (`eval_launch`): the job's own without synthetic acceptance."""
    spent: float
    """Seconds its point took: the job's `seconds` are those plus its eval's, not the other points' between."""


def _owed_evals(owed: Sequence[_OwedEval], server: _Server, run_dir: Path, settings: LifecycleSettings,
                event: Event) -> list[JobOutcome]:
    """The evals a group's pinned run-eval rows owe, once all its points ran: the pinned server stops once, and one
    server launched without synthetic acceptance (one per distinct launch; the rows of a group share it) runs every
    owed eval in turn, where a server per eval would start twice a row (the pinned one again for the next point). Its
    command, log and provenance are each eval's own (`eval/server_command.txt`, `eval/server.log`)."""
    server.park()
    launches: dict[str, list[_OwedEval]] = {}
    for item in owed:
        launches.setdefault(item.spec.fingerprint(), []).append(item)
    outcomes: list[JobOutcome] = []
    for items in launches.values():
        first = items[0]
        event(f"{count_of(len(items), 'eval')} of group {server.group.id} owed: relaunching "
              f"{relaunch_reason(first.job)}")
        evserver = _Server(eval_group(server.group, [i.job for i in items], first.spec), server.launcher, run_dir,
                           settings, event)
        try:
            outcomes += [_owed_eval(item, evserver, run_dir, settings, event) for item in items]
        finally:
            evserver.stop()
    return outcomes


def _owed_eval(item: _OwedEval, evserver: _Server, run_dir: Path, settings: LifecycleSettings,
               event: Event) -> JobOutcome:
    from llmsweep.evals.results import EVAL_DIR

    job = item.job
    jdir = art.job_dir(run_dir, job.id)
    handle: ServerHandle | None = None
    started = time.monotonic() - item.spent  # the job's clock resumes where its point stopped it
    current_progress().job_started(job.id, job.concs[0] if job.concs else None)

    def measure() -> Summary:
        nonlocal handle
        handle = evserver.ensure()
        spec = evserver.spec or item.spec
        command = record_eval_server(jdir, spec, evserver.launcher, handle)
        provenance = _provenance(job, spec, evserver.group, evserver.observed, handle, evserver.launcher.kind,
                                 evserver.drift)
        summary = eval_job(job, handle.base_url, jdir, spec=spec, source=evserver.group.source, settings=settings,
                           provenance=provenance, event=event, server_command=command)
        _alive_or_invalid(handle, f"job {job.id}'s eval", jdir, settings)
        return summary

    try:
        outcome = settle(job, jdir, started, measure)
    finally:
        _copy_log(handle or evserver.handle, jdir / EVAL_DIR)
    return _close(job, jdir, outcome, started, evserver.scrubber, event, evserver.group.warnings.get(job.id, ()))


def _copy_log(handle: ServerHandle | None, job_dir: Path) -> None:
    if handle is None or not handle.log_path.exists():
        return
    try:
        shutil.copyfile(handle.log_path, job_dir / art.SERVER_LOG)
    except OSError as exc:
        log.warning("could not copy the server log into %s: %s", job_dir, exc)


JobSink = Callable[[Path, "JobOutcome"], None]
_JOB_SINK: ContextVar[JobSink | None] = ContextVar("llmsweep_job_sink", default=None)
AttemptSink = Callable[[Path, Path], None]
_ATTEMPT_SINK: ContextVar[AttemptSink | None] = ContextVar("llmsweep_attempt_sink", default=None)


@contextmanager
def on_job_finished(sink: JobSink, superseded: AttemptSink | None = None) -> Iterator[None]:
    """Call `sink(job_dir, outcome)` as each job run in this context finishes, its outcome.json written (`run`
    stores each job's result then, so an interrupted sweep keeps what completed), and `superseded(job_dir, kept)` as
    a job's earlier attempt is moved aside into `kept` before it runs again (`keep_earlier_attempt`: the folder holds
    no result until the job finishes; `run` drops the stored one, which an interrupted `--force` rerun left stored
    beside a folder that no longer held it, or keeps it for the runs that stood on it). The sinks must not raise."""
    token, attempt = _JOB_SINK.set(sink), _ATTEMPT_SINK.set(superseded)
    try:
        yield
    finally:
        _ATTEMPT_SINK.reset(attempt)
        _JOB_SINK.reset(token)


def keep_earlier_attempt(job_id: str, job_dir: Path, event: Event) -> Path | None:
    """`artifacts.keep_earlier_attempt` (the artifacts of an earlier attempt move to `attempts/N`), and the
    `on_job_finished` context told that the job's folder holds no result now."""
    kept = art.keep_earlier_attempt(job_id, job_dir, event)
    if kept is not None and (sink := _ATTEMPT_SINK.get()) is not None:
        sink(job_dir, kept)
    return kept


def outcome_of(job: Job, summary: Summary, job_dir: Path) -> JobOutcome:
    """A measured job's outcome: its summary's verdict and reasons (the failing reason first: the smoke note is
    informational)."""
    status: Status = summary.validity.verdict
    return JobOutcome(job_id=job.id, exp_name=job.exp_name, status=status, reasons=verdict_reasons(summary),
                      summary_path=str(job_dir / art.SUMMARY_FILE), eval_failure=eval_failure(job, summary))


def eval_failure(job: Job, summary: Summary) -> str | None:
    """`JobOutcome.eval_failure` of a measured job: its eval's verdict and reasons when a run-eval row's eval did not
    pass; None otherwise (an eval-only job's verdict is its eval's)."""
    ev = summary.eval
    if job.eval_only or ev is None or ev.verdict == "valid":
        return None
    # said once, in front: the task (`eval gsm8k: …`) and the verdict (`smoke eval: …`)
    reasons = [r.removeprefix(f"eval {ev.task}: ").removeprefix(f"{ev.verdict} eval: ") for r in ev.reasons]
    return f"{ev.task} eval is {ev.verdict}: " + ("; ".join(reasons) or "no reason recorded")


def verdict_reasons(summary: Summary) -> list[str]:
    """A summary's verdict reasons as an outcome gives them: the failing reason first (the smoke note is
    informational)."""
    return sorted(summary.validity.reasons, key=lambda r: r.startswith("smoke run"))


OUT_UNWRITABLE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""Write errors that no job of the sweep can get past: a full disk, a quota, a read-only remount."""


def out_unwritable(exc: BaseException, what: str, then: str, *, kept: str = "") -> ResultError | None:
    """The one error a command ends with when `--out` stopped taking writes (`OUT_UNWRITABLE`) while it wrote `what`
    — not a traceback from wherever the write was —, saying where what it wrote before is (`kept`), its fix freeing
    space and then `then`; None for any other exception (the caller re-raises it)."""
    if not isinstance(exc, OSError) or exc.errno not in OUT_UNWRITABLE:
        return None
    where = f" ({exc.filename})" if exc.filename else ""
    return ResultError(f"cannot write {what} under {_OUT}: {exc.strerror}{where}"
                       + (f"; what was written before is in {kept}" if kept else ""),
                       fix=f"free space on that disk (or remount it writable), then {then}")


def settle(job: Job, job_dir: Path, started: float, measure: Callable[[], Summary]) -> JobOutcome:
    """The job's outcome from `measure` (whatever writes its folder and returns its summary), in one place for every
    path: a LlmsweepError fails the job with its message; a bug below fails this job, not the rest of the sweep;
    Ctrl-C / SIGTERM says so in the job folder (`interrupted by SIGINT`, the signal the run exits for: records
    written so far stay) and unwinds the sweep."""
    def stopped(exc: BaseException) -> None:
        art.write_json(job_dir / art.OUTCOME_FILE, JobOutcome(
            job_id=job.id, exp_name=job.exp_name, status="failed", reasons=[interrupted_by(first_signal(exc))],
            seconds=round(time.monotonic() - started, 3)).model_dump(mode="json"))

    try:
        return outcome_of(job, measure(), job_dir)
    except KeyboardInterrupt as exc:
        stopped(exc)
        raise
    except Exception as exc:
        # An error that replaced an interrupt (a teardown that failed while it unwound: `docker rm` timing out; a
        # library that made it an error of its own) unwinds the sweep as the signal: the next job must not launch.
        if (interrupt := interrupt_in(exc)) is not None:
            stopped(interrupt)
            raise interrupt from None
        if isinstance(exc, LlmsweepError):
            return JobOutcome(job_id=job.id, exp_name=job.exp_name, status="failed", reasons=[str(exc)])
        # --out is full (or became read-only): no job can write its results, this one's outcome included. The
        # sweep ends here, its servers stopped on the way out, with the fix; it ended in two tracebacks.
        if (full := out_unwritable(exc, "the results", f"`llmsweep run ... {_OUT} DIR {_RESUME}` runs the jobs left")):
            raise full from None
        from llmsweep.client.records import OutputWriteError

        if isinstance(exc, OutputWriteError):  # its records could not be kept (a file-size limit, an I/O error):
            # the client stopped at once; this job failed, said with the errno's words, and the sweep goes on
            return JobOutcome(job_id=job.id, exp_name=job.exp_name, status="failed", reasons=[exc.reason()],
                              seconds=round(time.monotonic() - started, 3))
        log.exception("job %s failed unexpectedly", job.id)
        return JobOutcome(job_id=job.id, exp_name=job.exp_name, status="failed",
                          reasons=[f"internal error: {type(exc).__name__}: {exc}"])


def report_job_finished(job_dir: Path, outcome: JobOutcome) -> None:
    """Tell the `on_job_finished` sink (if any) that a job's folder is final: `run_job` calls it here; an executor
    whose jobs run elsewhere (Slurm) calls it on the driver as it reads their outcomes back."""
    sink = _JOB_SINK.get()
    if sink is not None:
        sink(job_dir, outcome)


def run_job(job: Job, server: _Server, run_dir: Path, settings: LifecycleSettings, event: Event,
            owed: list[_OwedEval]) -> JobOutcome | None:
    """Run one job against the group's server (launching it if needed) and return its outcome; None when its point
    ran and its eval needs a server of its own (a run-eval row that pinned acceptance): the eval is added to `owed`,
    for `_owed_evals` once the group's points are done, and the job's folder says meanwhile that it owes one."""
    group = server.group
    jdir = art.job_dir(run_dir, job.id)
    jdir.mkdir(parents=True, exist_ok=True)
    keep_earlier_attempt(job.id, jdir, event)
    started = time.monotonic()
    handle: ServerHandle | None = None
    progress = current_progress()
    progress.job_started(job.id, job.concs[0] if job.concs else None)
    owes = False

    from llmsweep.engines import launched_job

    def measure() -> Summary:
        nonlocal handle, owes
        handle = server.ensure()
        spec = server.spec or group.spec
        scrub = handle.scrubber
        art.write_json(jdir / art.JOB_FILE, launched_job(job).to_json(), scrub)
        roles = handle.role_commands  # a role-by-role deployment: every role, not only its router
        scrub.write_text(jdir / art.COMMAND_FILE, command_text(spec, server.launcher, handle.command, server.drift)
                         + (f"# every role of the deployment, as launched:\n{roles}" if roles else ""))
        art.write_files_beside(spec, jdir, scrub)
        provenance = _provenance(job, spec, group, server.observed, handle, server.launcher.kind, server.drift)
        summary: Summary | None = None
        if not job.eval_only:
            event(f"job {job.id}: conc {job.concs[0]} ({job.workload.scenario})")
            with watching_pauses() as pauses:
                summary = bench_job(job, handle.base_url, jdir, spec=spec, source=group.source, settings=settings,
                                    provenance=provenance, on_progress=progress.client, power=server.power,
                                    federated=server.federated)
            summary = _unpaused_or_invalid(summary, pauses, jdir, settings)
        _alive_or_invalid(handle, f"job {job.id}", jdir, settings)
        relaunch = eval_launch(job, group) if job.run_eval else None
        if relaunch is not None:  # the throughput point pinned acceptance: the eval gets a server without the pin
            assert summary is not None
            owed.append(_OwedEval(job, relaunch, time.monotonic() - started))
            owes = True
            return summary
        if job.eval_only or job.run_eval:  # on the same server, after the throughput point if the row has one
            summary = eval_job(job, handle.base_url, jdir, spec=spec, source=group.source, settings=settings,
                               provenance=provenance, event=event)
            _alive_or_invalid(handle, f"job {job.id}", jdir, settings)
        assert summary is not None  # a job is a throughput point, an eval, or both
        return summary

    try:
        outcome = settle(job, jdir, started, measure)
    finally:
        _copy_log(handle or server.handle, jdir)
    if owes:
        progress.eval_owed(job.id)
        event(f"job {job.id}: point done; its eval runs after the group's other points, on a server of its own")
        return None
    return _close(job, jdir, outcome, started, server.scrubber, event, group.warnings.get(job.id, ()))


def _unpaused_or_invalid(summary: Summary, pauses: Sequence[float], jdir: Path,
                         settings: LifecycleSettings) -> Summary:
    """The job's summary, judged invalid when this process was stopped (Ctrl-Z, `kill -STOP`) and continued while its
    load ran (`pauses`: how long each stop lasted): the server answered on through the pause and the client's clocks
    counted it, so its TTFTs, gaps and throughput are not the server's (`readback.judge_paused`); neither the store,
    `--resume` nor `--reuse` takes it for a result."""
    judged = judge_paused(jdir, tuple(pauses), again=f"`llmsweep run ... {_RESUME}` runs it again",
                          settings=settings.readback)
    return summary if judged is None else judged


def _alive_or_invalid(handle: ServerHandle, during: str, jdir: Path, settings: LifecycleSettings) -> None:
    """`check_alive` after a job's load or eval: a server found dead fails the job, and the summary its load already
    wrote is judged invalid with the reason (`run.json` notes it, so `llmsweep summarize` says the same), so that
    neither the store, `--resume` nor `--reuse` takes it for a finished point."""
    try:
        check_alive(handle, during=during)
    except LaunchError:
        if (jdir / art.SUMMARY_FILE).is_file():
            info = art.read_json(jdir / art.RUN_FILE)
            info = info if isinstance(info, dict) else {}
            info[SERVER_DIED] = f"died during {during} ({exit_text(handle)})"
            art.write_json(jdir / art.RUN_FILE, info)
            summarise_job(jdir, settings=settings.readback)
        raise


def _close(job: Job, jdir: Path, outcome: JobOutcome, started: float, scrubber: SecretScrubber,
           event: Event, warnings: Sequence[str] = ()) -> JobOutcome:
    """Record a job's final outcome, with its `warnings` (its group's): its folder's outcome.json, the store
    (`on_job_finished`), progress, a line."""
    outcome = outcome.with_warnings(warnings)
    outcome.seconds = round(time.monotonic() - started, 3)
    # Reasons quote exceptions and log tails and travel on to run.json, the store and the console: scrub them here.
    outcome.reasons = [scrubber.scrub(r) for r in outcome.reasons]
    art.write_json(jdir / art.OUTCOME_FILE, outcome.model_dump(mode="json"), scrubber)
    report_job_finished(jdir, outcome)
    current_progress().job_finished(job.id, outcome.status)
    event(f"job {job.id}: {outcome.status}" + (f" — {outcome.reasons[0]}" if outcome.reasons else ""))
    return outcome


def power_gate(groups: Sequence[ServerGroup], settings: LifecycleSettings, event: Event = _quiet
               ) -> tuple[list[ServerGroup], list[JobOutcome]]:
    """`run --require-power` judged before any server starts, on the host that runs the groups' lifecycles and samples
    their power (this one for the local and docker executors; a Slurm job's node, through `pipeline.run_worker`).

    A simulated job whose power the simulator does not model (PP or PCP > 1: `power.virtual.sim_power_unmodelled`)
    and that requires it is refused first, with why and the fix: it is known here, before it runs, that its power
    can never be valid (it ran, then was judged invalid for power it could not have).

    Each group's power backends are probed (`power.sampler.probe_power`), once per distinct set-up. Where none can
    sample, the jobs that require power are refused with what the probe found and the fix (said one line per job,
    as the run's other refusals), and a group left without jobs starts no server; the jobs that do not require power
    run, and that their power will not be recorded is said once per reason (their power blocks say it too). Returns
    the groups to run (each with the jobs left) and the refused jobs' outcomes."""
    from llmsweep.power.virtual import NOT_MODELLED_FIX, job_power_unmodelled, not_modelled_error

    probes: dict[tuple[Any, ...], PowerProbe] = {}
    kept: list[ServerGroup] = []
    refused: list[JobOutcome] = []
    unrecorded: dict[tuple[str, str], int] = {}
    for group in groups:
        if group.spec.engine == SIM.id:
            able = []
            for job in group.jobs:
                why = job_power_unmodelled(job)
                if why is not None and settings.power.required([job]):
                    reason = f"power is required but the simulator does not model it: {why} (fix: {NOT_MODELLED_FIX})"
                    event(f"job {job.id}: refused — {reason}")
                    refused.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused",
                                              reasons=[reason]))
                    continue
                if why is not None and settings.power.backend != "off" and not job.eval_only:  # said at the start
                    where = (platform.node(), not_modelled_error(why))
                    unrecorded[where] = unrecorded.get(where, 0) + 1
                able.append(job)
            if not able:
                continue
            group = replace(group, jobs=able)
        spec = group.spec
        key = (spec.engine, spec.gpus > 0, tuple(sorted(spec.env.items())))
        probe = probes.get(key)
        if probe is None:
            probe = probes[key] = probe_power(settings.power, engine=spec.engine, gpus=spec.gpus, env=spec.env)
        if probe.usable:
            kept.append(group)
            continue
        rest = []
        for job in group.jobs:
            if settings.power.required([job]):
                reason = probe.refusal()
                event(f"job {job.id}: refused — {reason}")
                refused.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused", reasons=[reason]))
            else:
                rest.append(job)
        if rest:
            kept.append(replace(group, jobs=rest))
            measuring = sum(1 for job in rest if not job.eval_only)  # an eval-only job records no power anywhere
            if settings.power.backend != "off" and measuring:  # asked for: nothing to say
                where = (probe.host, probe.unrecorded())
                unrecorded[where] = unrecorded.get(where, 0) + measuring
    for (host, why), n in unrecorded.items():
        event(f"power will not be recorded for {count_of(n, 'job')} on {host}: {why}")
    return kept, refused


def refuse_here(run_dir: Path, outcome: JobOutcome) -> None:
    """Record a job refused where its group was to run (a Slurm node: `power_gate` there) in its folder's
    outcome.json, where the driver reads it back as it reads every job's outcome."""
    jdir = art.job_dir(run_dir, outcome.job_id)
    jdir.mkdir(parents=True, exist_ok=True)
    art.write_json(jdir / art.OUTCOME_FILE, outcome.model_dump(mode="json"))
    report_job_finished(jdir, outcome)


def run_group(
    group: ServerGroup,
    launcher: ServerLauncher,
    run_dir: Path,
    settings: LifecycleSettings,
    *,
    event: Event = _quiet,
) -> list[JobOutcome]:
    """Run every job of a group against one shared server; the server is always torn down."""
    outcomes: list[JobOutcome] = []
    todo: list[Job] = []
    for job in group.jobs:
        done = resumed(job, run_dir) if settings.resume else None
        if done is not None:
            outcomes.append(done)
        else:
            todo.append(job)
    if not todo:
        return outcomes
    server = _Server(group, launcher, run_dir, settings, event)
    owed: list[_OwedEval] = []
    try:
        for job in todo:
            outcome = run_job(job, server, run_dir, settings, event, owed)
            if outcome is None:
                continue
            outcomes.append(outcome)
            if settings.fail_fast and not outcome.ok:
                break
        if owed:  # the points that ran owe their evals even when the sweep stops early (--fail-fast)
            outcomes += _owed_evals(owed, server, run_dir, settings, event)
    finally:
        server.stop()
    return outcomes


def resumed(job: Job, run_dir: Path) -> JobOutcome | None:
    """`--resume`: the skipped outcome of a job whose folder already holds a valid or smoke summary (pointing at it,
    so the end-of-run table shows its verdict and figures, marked resumed), else None (the job runs).

    The summary counts only beside the outcome.json that closed the job with a valid or smoke status: the client
    writes its own summary when the load ends, before the job's verdict is made (the read-back checks, the power
    record, the server found alive, the eval). A run killed in between (SIGKILL, OOM, a node lost) left a `valid`
    summary nothing had judged, and `--resume` took it for done; a job closed `failed` after its summary was written
    (a signal, Slurm's time limit, an error) runs again too."""
    jdir = art.job_dir(run_dir, job.id)
    summary = art.finished_summary(jdir)
    verdict = None if summary is None else summary.validity.verdict
    if summary is None or verdict not in DONE_VERDICTS:
        return None
    if job.run_eval and summary.eval is None:  # measured under --no-evals: it owes the eval this plan asks of it
        return None
    earlier = art.read_json(jdir / art.OUTCOME_FILE)  # what that attempt found beyond its verdict stays said
    if unjudged(summary.validity.verdict, earlier) is not None or not isinstance(earlier, dict):
        return None  # never closed (killed before its verdict), or closed failed (interrupted): it runs again
    failure = earlier.get("eval_failure")
    return JobOutcome(job_id=job.id, exp_name=job.exp_name, status="skipped", resumed=True,
                      reasons=[f"resumed: summary already {verdict}"], summary_path=str(jdir / art.SUMMARY_FILE),
                      eval_failure=failure if isinstance(failure, str) else None)


def write_pid_file(path: Path, handle: ServerHandle, spec: LaunchSpec) -> None:
    """What a later `--resume` needs to stop this server if this run dies without stopping it: the pid, the program
    running under it (docker, srun or the engine itself) and its start time, and the handle's cleanup command."""
    if handle.pid is None:
        return
    from llmsweep.execute.process import read_proc

    info = read_proc(handle.pid)
    command = handle.command or spec.argv
    art.write_json(path, {"pid": handle.pid, "host": platform.node(), "argv0": os.path.basename(command[0]),
                          "start_ticks": info.start_ticks if info else None,
                          "cleanup": list(handle.cleanup)})


def stop_stale_servers(run_dir: Path, event: Event = _quiet, *,
                       pid_files: str = f"servers/*/{art.PID_FILES}",
                       unrecorded_at: Path | None = None, docker: Sequence[str] = ()) -> list[int]:
    """Stop servers a killed run left behind (their pid files survive a SIGKILL of the run), before resuming; then
    run each one's recorded cleanup (`docker rm -f NAME`: a container outlives the docker CLI that started it), and
    scancel the Slurm jobs it submitted that never finished. A pid file goes only once its server is gone.
    `pid_files`: where under `run_dir` the pid files are (`al collect`: one folder per cell). Servers no pid file
    names are found by the folder their environment carries: under the run's `servers/` folder, where its own
    servers mark theirs (never the whole `run_dir`, which may hold another live run's `--out`: `run --out sweeps`
    beside a running `sweeps/x`), or exactly `unrecorded_at` (`al collect`: a cell's server marks the cell).

    Containers: a `docker run` CLI still alive is given time to finish creating its container before it is stopped
    (the daemon finishes a create whose CLI is killed: removing the container first found none, and it was left),
    and every container labelled with a server folder of this run (`docker.SERVER_DIR_LABEL`, asked of each docker
    CLI the pid files and processes name, of `docker` and of the `docker` CLIs given: the run's executor's) is
    removed — one whose CLI died with the run, or that no pid file named yet. One that cannot be removed, or was still
    being created, refuses the run (LaunchError): its servers would start beside it, on its GPUs and port."""
    from llmsweep.execute.process import read_proc, signal_process_tree, stop_process_tree, tree_alive

    stopped: list[int] = []
    left_behind: list[str] = []  # containers of this run still there, or perhaps being created still: said, refused
    unborn: set[str] = set()  # the names of those perhaps being created still
    clis = list(docker)
    with shielded():
        # The Slurm jobs first: a batch job's exit trap stops the servers its worker started in sessions of their own
        # (`node.use_srun: false`) by the pid files it finds, so a remote pid file is kept until its job has ended
        # (it was deleted below first, and the trap found nothing to stop)
        _cancel_stale_slurm_jobs(run_dir, event)
        stale = []
        for pid_file in sorted(run_dir.glob(pid_files)):  # server.pid, or server.N.pid kept
            doc = art.read_json(pid_file) or {}
            pid, argv0 = int(doc.get("pid") or 0), str(doc.get("argv0") or "")
            # An srun step's pid file names a process on the node: the Slurm job's cancellation above stopped it.
            here = doc.get("host") in (None, platform.node())
            ticks = doc.get("start_ticks")
            stale.append((pid_file, doc, pid, here, here and pid > 1 and _is_our_server(
                pid, argv0, ticks if isinstance(ticks, int) and not isinstance(ticks, bool) else None)))
        for _f, doc, pid, _h, ours in stale:
            removal = _container_removal([str(a) for a in doc.get("cleanup") or ()])
            if removal is not None:
                clis.append(removal[0])
                if ours is True and not _created(removal, pid):
                    left_behind.append(_being_created(removal, pid))
                    unborn.add(removal[-1])
        # Each of ours is sent SIGTERM first (a role-by-role deployment leaves a server per role and a power sampler
        # per node), so that they stop side by side; then each is waited for, and killed after its grace, as before.
        signalled = {pid: signal_process_tree(pid, pgid=pid) for _f, _d, pid, _h, ours in stale if ours is True}
        for pid_file, doc, pid, here, ours in stale:
            left = False
            if ours is None:  # a live process that may be the server or one that took its pid since: not signalled
                left = True
                event(f"warning: {pid_file} names pid {pid}, which now runs `{_command_line(pid)}`, but records no "
                      "start time (an older llmsweep wrote it), so llmsweep cannot tell that server from a process "
                      "that took its pid since: not stopped, and the pid file is kept. If it is the server, "
                      f"stop it (`kill -TERM -- -{pid}`); then delete {pid_file}")
            elif ours and pid in stopped:  # a second pid file of one server (a deployment's router, its roles'): said
                pass  # and stopped once
            elif ours:
                event(f"stopping server pid {pid} left running by an earlier, interrupted run")
                stop_process_tree(pid, pgid=pid, grace_s=5.0, seen=signalled[pid].values())
                stopped.append(pid)
                left = bool(tree_alive(pid, pgid=pid))
            if here and pid > 1 and not left and read_proc(pid) is None:
                # The root is gone but members of its group may not be. Linux never hands out a PID still in use as
                # a process group id, so processes in group `pid` without their leader are this server's.
                left = bool(tree_alive([], pgid=pid))
                if left:
                    event(f"stopping what is left of the process group of server pid {pid}")
                    stop_process_tree(pid, pgid=pid, grace_s=5.0)
                    stopped.append(pid)
                    left = bool(tree_alive([], pgid=pid))
            cleanup = [str(a) for a in doc.get("cleanup") or ()]
            if cleanup and not _run_cleanup(cleanup, event):
                left = True
            if cleanup and cleanup[-1] in unborn:
                left = True  # (it may be created yet: the next run removes it by this record too)
            if left:
                if ours is not None:  # (one it could not identify was said above)
                    event(f"warning: could not stop everything server pid {pid} left; {pid_file} is kept")
            else:
                pid_file.unlink(missing_ok=True)
        folder, below = (unrecorded_at, False) if unrecorded_at is not None else (art.servers_dir(run_dir), True)
        stopped += _stop_unrecorded(folder, event, below=below, clis=clis, left_behind=left_behind)
        left_behind += _remove_labelled(folder, event, below=below, clis=clis)
    if left_behind:
        from llmsweep.execute.docker import SERVER_DIR_LABEL

        raise LaunchError(
            f"containers an earlier, interrupted run into {run_dir} left could not be removed: "
            + "; ".join(left_behind) + " — this run's servers would start beside them, on their GPUs and ports",
            fix="remove them (`docker rm -f NAME`; one still being created once the daemon has it), then run again "
                f"(`{_RESUME}` also removes them, found by their {SERVER_DIR_LABEL} label)")
    return stopped


def _container_removal(cleanup: Sequence[str]) -> list[str] | None:
    """`[DOCKER, rm, -f, NAME]` when a pid file's cleanup (or `docker.removal_of` a command line) removes a
    container; else None."""
    return list(cleanup) if len(cleanup) == 4 and list(cleanup[1:3]) == ["rm", "-f"] else None


def _created(removal: Sequence[str], pid: int) -> bool:
    """Wait (`docker.await_creation`) while `docker run` process `pid` lives and its container (`removal`'s NAME) does
    not exist yet: True once it does or the CLI is gone, False when the wait ran out first."""
    from llmsweep.execute.docker import LEFT_CREATION_WAIT_S, await_creation
    from llmsweep.execute.process import read_proc

    def creating() -> bool:
        info = read_proc(pid)
        return info is not None and info.state not in ("Z", "X")

    return await_creation(removal[0], removal[-1], creating, LEFT_CREATION_WAIT_S)


def _being_created(removal: Sequence[str], pid: int) -> str:
    from llmsweep.execute.docker import LEFT_CREATION_WAIT_S

    return (f"container {removal[-1]} was still being created by the earlier run's `{removal[0]} run` (pid {pid}) "
            f"after {LEFT_CREATION_WAIT_S:.0f} s, and the daemon may create it yet")


def _remove_labelled(folder: Path, event: Event, *, below: bool, clis: Sequence[str]) -> list[str]:
    """Remove the containers labelled with a server folder of `folder` (`below`: under it) that each docker CLI of
    `clis`, and `docker`, finds (`docker.left_containers`), each CLI asked once however it is spelt (`docker`,
    `/usr/bin/docker`: the program PATH finds); what could not be removed, as said. A CLI that cannot ask its daemon
    is said only where this run named it (`clis`): on a host without Docker, `docker` is not asked."""
    from llmsweep.execute.docker import left_containers

    if not folder.is_dir():
        return []

    def program(cli: str) -> str:
        found = shutil.which(cli)
        return os.path.abspath(found) if found else cli

    named: dict[str, str] = {}
    for cli in clis:
        named.setdefault(program(cli), cli)
    asked = dict(named)
    if shutil.which("docker"):
        asked.setdefault(program("docker"), "docker")
    failed: list[str] = []
    for where, cli in asked.items():
        found = left_containers(cli, folder, below=below)
        if isinstance(found, str):
            if where in named:
                event(f"warning: could not ask the docker daemon for containers an earlier run left: {found}")
            else:
                log.debug("no containers asked of `%s`: %s", cli, found)
            continue
        for left in found:
            event(f"removing container {left.name}, which an earlier, interrupted run left: {left.said()} (its "
                  f"label names {left.server_dir})")
            if not _run_cleanup([cli, "rm", "-f", left.name], event):
                failed.append(f"container {left.name} (`{cli} rm -f {left.name}` failed)")
    return failed


def _stop_unrecorded(folder: Path, event: Event, *, below: bool = True, clis: list[str] | None = None,
                     left_behind: list[str] | None = None) -> list[int]:
    """Stop the servers of this run that no pid file names: a run SIGKILLed after starting one and before writing
    its pid file (a few milliseconds; `shielded` holds every other signal there) left it running, and nothing on
    disk named it. Every server process carries its folder in its environment (`process.SERVER_DIR_ENV`): each
    process group holding `folder` (or, `below`, a folder under it) is stopped, and a `docker run` among them has its
    container removed (the CLI's death leaves the container running) — once it has created it (`_created`: else what
    it may create yet goes in `left_behind`). The docker CLIs of those go in `clis`."""
    from llmsweep.execute.docker import removal_of
    from llmsweep.execute.process import marked_processes, read_proc, stop_process_tree, tree_alive

    groups: dict[int, list[tuple[int, list[str]]]] = {}
    for pid, argv in marked_processes(folder, below=below):
        info = read_proc(pid)
        if info is not None:
            groups.setdefault(info.pgid, []).append((pid, argv))
    stopped: list[int] = []
    for pgid, members in sorted(groups.items()):
        removals: list[list[str]] = []
        for pid, argv in members:  # a container outlives the `docker run` that started it; removed once, where several
            # processes of the group carry its command line (one that forked itself, a shell between fork and exec)
            removal = removal_of(argv)
            if removal is not None and removal not in removals:
                removals.append(removal)
                if clis is not None:
                    clis.append(removal[0])
                if not _created(removal, pid) and left_behind is not None:
                    left_behind.append(_being_created(removal, pid))
        event(f"stopping server process group {pgid} (`{' '.join(members[0][1][:3])} …`) left running by an earlier, "
              "interrupted run that had not yet recorded it")
        stop_process_tree(pgid, pgid=pgid, grace_s=5.0)
        stopped.append(pgid)
        if tree_alive([], pgid=pgid):
            event(f"warning: could not stop process group {pgid}; stop it by hand (`kill -KILL -- -{pgid}`)")
        for removal in removals:
            _run_cleanup(removal, event)
    return stopped


def _run_cleanup(cleanup: list[str], event: Event) -> bool:
    from llmsweep.execute.docker import remove_container

    event(f"removing what the interrupted run's server left: {' '.join(cleanup)}")
    try:
        if cleanup[1:3] == ["rm", "-f"]:
            remove_container(cleanup)
        else:
            from llmsweep.execute.commands import run_command

            run_command(cleanup, timeout_s=60.0, new_session=True, fix=f"run `{' '.join(cleanup)}` by hand")
    except LaunchError as exc:
        event(f"could not run the cleanup ({exc.message}); run `{' '.join(cleanup)}` by hand")
        return False
    return True


def _cancel_stale_slurm_jobs(run_dir: Path, event: Event) -> None:
    """scancel every batch job an earlier run submitted into this --out whose end it never saw (no `slurm-ID.rc`):
    a SIGKILLed submitter cannot cancel them, and each holds a node and runs an engine that would race the resumed
    run's. So is every job of this user the queue lists as working in one of this run's server folders: one submitted
    by an `sbatch` the submitter was SIGKILLed in, before it could record its id. A recorded id is cancelled only
    while the queue lists it working in the folder that recorded it: one that has left the queue is done with, and
    one working elsewhere is another job that took its number since (a controller whose state was reset numbers jobs
    from the start again; a --resume against another cluster finds that cluster's job of the number), never this
    run's to cancel. A queue that cannot be read cancels every recorded id (a scancel of a job gone is a no-op). Then
    wait (bounded) until the queue lists none of them: a cancelled job's worker still tears down on its node, writing
    into the folders the resumed run is about to use."""
    from llmsweep.execute.slurm import SlurmJob, SlurmOptions, cancel_jobs, jobs_working_in, queued_workdirs

    folders = [script.parent for script in sorted(art.servers_dir(run_dir).glob("*/job.sbatch"))]
    records = sorted(art.servers_dir(run_dir).glob(f"*/{art.SLURM_JOB_ID_FILE}"))
    queued = queued_workdirs() if folders or records else {}
    stale: list[SlurmJob] = []
    recorded: set[str] = set()
    for id_file in records:
        job_id = id_file.read_text(encoding="utf-8").strip()
        recorded.add(job_id)
        if not job_id or (id_file.parent / f"slurm-{job_id}.rc").exists():
            continue
        if queued is not None:
            workdir = queued.get(job_id)
            if workdir is None:
                continue  # it has left the queue: nothing of it runs
            if workdir != id_file.parent.resolve():
                event(f"Slurm job {job_id}, which {id_file} records, now works in {workdir}, not in "
                      f"{id_file.parent}: another job took its number; left alone")
                continue
        event(f"cancelling Slurm job {job_id} left by an earlier, interrupted run")
        stale.append(SlurmJob(job_id=job_id, name=id_file.parent.name, out_dir=id_file.parent,
                              script_path=id_file.parent / "job.sbatch", options=SlurmOptions(poll_s=1.0)))
    for job_id, folder in jobs_working_in(folders, queued).items():
        if job_id in recorded or (folder / f"slurm-{job_id}.rc").exists():  # said above, or ending
            continue
        event(f"cancelling Slurm job {job_id} left by an earlier, interrupted run (submitted, its id never recorded: "
              f"it works in {folder})")
        stale.append(SlurmJob(job_id=job_id, name=folder.name, out_dir=folder, script_path=folder / "job.sbatch",
                              options=SlurmOptions(poll_s=1.0)))
    if not stale:
        return
    for job in cancel_jobs(stale, wait_s=SlurmOptions().cancel_wait_s, announced=True):
        event(f"Slurm job {job.job_id} is still listed after scancel: run `scancel -f {job.job_id}` by hand and "
              "wait until `squeue -j` no longer lists it before resuming")


def _is_our_server(pid: int, argv0: str, start_ticks: int | None = None) -> bool | None:
    """True when `pid` is still the process we launched (a recycled pid belongs to someone else): the same pid and
    start time (/proc/PID/stat's field 22) name one process, whatever it has exec'd since — a launcher that execs the
    engine (the rehearsal's `vllm` stand-in, a wrapper script) leaves no `argv0` in its command line, and taking it
    for someone else's left it running, its pid file deleted, beside the server the resume launched. False when it is
    not (no process, another start time, another program).

    None when it cannot be told: a pid file without a start time (an older llmsweep's) naming a live process that runs
    its program. The name alone is no identity — the simulator and many engines run as `python`, and so do a
    notebook and another user's job that took the pid since — so such a process is never signalled (it once was:
    `--resume` stopped an unrelated python process as the old server)."""
    from llmsweep.execute.process import read_cmdline, read_proc

    info = read_proc(pid)
    if info is None:
        return False
    if start_ticks is not None:
        return info.start_ticks == start_ticks
    cmdline = read_cmdline(pid) or []
    if bool(argv0) and any(os.path.basename(part) == argv0 for part in cmdline[:3]):
        return None
    return False


def _command_line(pid: int, limit: int = 160) -> str:
    """The command line of `pid` as /proc shows it, shortened for a log line ('?' when it cannot be read)."""
    from llmsweep.execute.process import read_cmdline

    text = " ".join(read_cmdline(pid) or []) or "?"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def summarize_outcomes(outcomes: Sequence[JobOutcome]) -> dict[str, Any]:
    """Jobs by how they ended; one `--resume` did not run again counts as `resumed`, one `--reuse` stood on a stored
    result as `reused` (the end table shows the verdict of each, marked so; both had been `skipped` alike)."""
    counts: dict[str, int] = {}
    for o in outcomes:
        said = "resumed" if o.resumed else "reused" if o.reused else o.status
        counts[said] = counts.get(said, 0) + 1
    return counts
