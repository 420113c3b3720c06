"""Modelled GPU power for simulated jobs run in virtual time (`execute.virtual`, and a disaggregated deployment's
workers in `execute.virtual_disagg`), labelled simulated.

The live simulator serves its power model (`sim.power.PowerModel`) at `GET /power` and the `sim` backend samples it
on the wall clock. In virtual time no server runs and no clock is waited on, so the same model is read on the
virtual clock instead: the predictor calls :class:`VirtualPower` at each of its scrapes (every virtual second), the
model advances over the virtual interval from the core's counters, and its reading becomes the samples the `sim`
backend's parser reads from its NVML-style document (`PowerReading.samples`, with no document built and parsed back).
The job's `gpu_metrics.jsonl` then has the live path's form and the summary's power block comes from the one
integration (`power.integrate`), exactly as for a live job.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from llmsweep.option_spellings import negation
from llmsweep.power.backends import SimBackend
from llmsweep.power.deployment import SampledWorker, WorkerSamples, merge
from llmsweep.power.sampler import OFF_REASON, PowerSettings
from llmsweep.power.samples import GPU_METRICS_FILE, GpuSample, Telemetry, TelemetryHeader, write_gpu_metrics

if TYPE_CHECKING:
    from llmsweep.plan import Job
    from llmsweep.sim.core import EngineCore
    from llmsweep.sim.disagg import Cluster
    from llmsweep.sim.power import PowerModel, PowerReading

NOT_MODELLED_FIX = ("measure its power on a real engine, or run it without requiring power "
                    f"({negation('require_power')}, or drop the recipe's `require-power: true`)")
"""How to get past a simulated job that requires power the simulator does not model (`sim_power_unmodelled`)."""


def sim_power_unmodelled(tp: int | None, gpus: int) -> str | None:
    """Why the simulator's power model gives no figure for a job on `gpus` GPUs of tensor-parallel size `tp`, None
    when it models it: the model prices a step on the tensor-parallel GPUs (`sim.power.PowerModel`), not on the
    pipeline or context-parallel ranks a job with PP or PCP > 1 adds, which the simulator does not model. The one
    place this is decided: the virtual-time power (`VirtualPower`), the live simulator's job files and
    `run --require-power`'s gate before any server starts (`execute.lifecycle.power_gate`) all ask it. `tp` None: a
    disaggregated job, whose workers are modelled each on all its GPUs (`VirtualDeploymentPower`)."""
    if tp is None or gpus <= tp:
        return None
    return (f"the simulator's power model covers one engine's {tp} tensor-parallel GPUs, not the {gpus} the job uses "
            "(its pipeline or context parallelism, or more than one worker)")


def job_power_unmodelled(job: Job) -> str | None:
    """`sim_power_unmodelled` for a simulated job (its tensor-parallel size and GPUs as planned)."""
    return None if job.disagg else sim_power_unmodelled(job.tp, job.gpus)


def not_modelled_error(why: str) -> str:
    """What a job's power file and its power block say (`error`) of power the simulator does not model."""
    return f"not modelled: {why}"


def write_not_modelled(job_dir: Path, why: str, *, expected_gpus: int, require: bool, max_gap_s: float) -> Path:
    """The `gpu_metrics.jsonl` of a job the live simulator served whose power it does not model
    (`sim_power_unmodelled`): no samples, and a header that says so, in place of its server's samples of the
    tensor-parallel GPUs alone (read as `expected_gpu_count_mismatch`, as if GPUs had gone unsampled)."""
    path = job_dir / GPU_METRICS_FILE
    write_gpu_metrics(path, TelemetryHeader(backend=None, source=SimBackend.source, max_gap_s=max_gap_s,
                                            expected_gpus=expected_gpus, require=require,
                                            error=not_modelled_error(why), not_modelled=True), [])
    return path


VIRTUAL_INTERVAL_S = 1.0
"""The predictor scrapes every virtual second (`sim.predict.predict_point`), so the model is sampled at 1 Hz."""


class _Readings:
    """One power model read on the virtual clock: each reading is kept as the model's figures and turned into samples
    when they are read (at the point's end, in one batch, which costs less than building them at every scrape)."""

    def __init__(self, model: PowerModel) -> None:
        self.model = model
        self._pending: list[tuple[float, PowerReading]] = []
        self._samples: list[GpuSample] = []

    def read(self, t: float) -> None:
        """Advance the model to unix time `t` and keep its reading."""
        self._pending.append((t, self.model.advance(t)))

    @property
    def samples(self) -> list[GpuSample]:
        """Every reading's samples, in reading order."""
        if self._pending:
            gpus = self.model.tp
            for t, reading in self._pending:
                self._samples.extend(reading.samples(t, gpus))
            self._pending.clear()
        return self._samples


class VirtualPower:
    """The simulated GPUs' power read on the virtual clock; `probe` is the predictor's probe factory (None when
    sampling is off, in which case the job's file says so)."""

    def __init__(self, *, hardware: str, tp: int, start_time: float, settings: PowerSettings,
                 gpus: int | None = None) -> None:
        self.hardware, self.tp, self.settings = hardware, tp, settings
        self.start_time = start_time
        self.model: PowerModel | None = None
        self._readings: _Readings | None = None
        self.error = OFF_REASON if settings.backend == "off" else None
        # the model prices a step on the tensor-parallel GPUs: not a figure for the job's pipeline or context ranks,
        # which it does not model (it said `expected_gpu_count_mismatch`, then `telemetry_unavailable`, as if
        # samples went missing)
        unmodelled = sim_power_unmodelled(tp, gpus) if self.error is None and gpus is not None else None
        self.not_modelled = unmodelled is not None
        if unmodelled is not None:
            self.error = not_modelled_error(unmodelled)

    @property
    def probe(self) -> Callable[[EngineCore], Callable[[float], None]] | None:
        return None if self.error else self.bind

    def bind(self, core: EngineCore) -> VirtualPower:
        """Attach the model to the core the predictor runs (its counters drive the utilisation)."""
        from llmsweep.sim.power import PowerModel

        # read at the times the predictor gives (`_Readings.read`): its clock only starts it, and names no `self`,
        # so the readings are freed with the point rather than by a cyclic collection
        start = self.start_time
        self.model = PowerModel(core, hardware=self.hardware, tp=self.tp, clock=lambda: start)
        self._readings = _Readings(self.model)
        return self

    def __call__(self, t: float) -> None:
        """One reading of every modelled GPU at unix time `t` (start time + virtual seconds)."""
        if self._readings is None:
            raise RuntimeError("VirtualPower read before it was bound to a core")
        self._readings.read(t)

    @property
    def samples(self) -> list[GpuSample]:
        """Every modelled GPU's samples so far (none before the model is bound)."""
        return self._readings.samples if self._readings is not None else []

    def header(self, expected_gpus: int) -> TelemetryHeader:
        return TelemetryHeader(backend=None if self.error else SimBackend.kind, source=SimBackend.source,
                               interval_s=VIRTUAL_INTERVAL_S, max_gap_s=self.settings.max_gap_s,
                               expected_gpus=expected_gpus, gpu_ids=[str(i) for i in range(self.tp)],
                               require=bool(self.settings.require), error=self.error,
                               not_modelled=self.not_modelled)

    def telemetry(self, expected_gpus: int) -> Telemetry:
        """What the job's `gpu_metrics.jsonl` holds: the header and the samples."""
        return self.header(expected_gpus), self.samples

    def write_job(self, job_dir: Path, *, expected_gpus: int) -> Path:
        """The job's `gpu_metrics.jsonl`, as the live sampler writes it."""
        path = job_dir / GPU_METRICS_FILE
        write_gpu_metrics(path, *self.telemetry(expected_gpus))
        return path


def virtual_power(settings: PowerSettings, *, hardware: str, tp: int, start_time: float,
                  gpus: int | None = None) -> VirtualPower | None:
    """The modelled power of a virtual-time job (`settings` decided for the job: `PowerSettings.for_jobs`), or None
    when power is neither sampled nor required (`run --power-backend off`)."""
    if settings.backend == "off" and not settings.require:
        return None
    return VirtualPower(hardware=hardware, tp=tp, start_time=start_time, settings=settings, gpus=gpus)


class VirtualDeploymentPower:
    """The modelled power of a disaggregated deployment in virtual time (`execute.virtual_disagg`): one power model
    per simulated worker, each over its own engine's counters and its own GPUs, read together at every scrape of the
    deployment's predictor. The job's file merges them as the node samplers' are merged on Slurm
    (`power.deployment`): GPUs named `prefill0/3`, `decode0/0`, …, each with its role."""

    def __init__(self, cluster: Cluster, *, start_time: float, settings: PowerSettings) -> None:
        from llmsweep.sim.power import PowerModel

        self.settings, self.start_time = settings, start_time
        self.error = OFF_REASON if settings.backend == "off" else None
        config = cluster.config
        plans = {"prefill": config.prefill, "decode": config.decode}
        self.role_gpus = {kind: plan.gpus for kind, plan in plans.items()}
        self.workers: list[tuple[SampledWorker, _Readings]] = []
        for w in cluster.workers:
            plan = plans[w.role]
            model = PowerModel(w.core, hardware=plan.engine.hardware, tp=plan.gpus_per_worker,
                               clock=lambda: start_time)  # read at the predictor's times (`_Readings.read`)
            self.workers.append((SampledWorker(label=f"{w.role}{w.index}", role=w.role, gpus=plan.gpus_per_worker),
                                 _Readings(model)))

    @property
    def probe(self) -> Callable[[float], None] | None:
        """What the deployment's predictor calls at each scrape (None when sampling is off)."""
        return None if self.error else self

    def __call__(self, t: float) -> None:
        for _worker, readings in self.workers:
            readings.read(t)

    def telemetry(self, expected_gpus: int) -> Telemetry:
        """Every worker's GPUs, merged as a role-by-role job's node files are: the header and the samples."""
        head = TelemetryHeader(backend=SimBackend.kind, source=SimBackend.source, interval_s=VIRTUAL_INTERVAL_S)
        parts = [WorkerSamples(worker, head, readings.samples) for worker, readings in self.workers]
        header, samples = merge(parts, since=self.start_time, expected_gpus=expected_gpus, role_gpus=self.role_gpus,
                                require=bool(self.settings.require), max_gap_s=self.settings.max_gap_s)
        if self.error:  # sampling is off yet power is required: the job says why it has none
            header = header.model_copy(update={"backend": None, "error": self.error, "missing": []})
        return header, samples

    def write_job(self, job_dir: Path, *, expected_gpus: int) -> Path:
        """The job's `gpu_metrics.jsonl`, as a role-by-role job's merged node files."""
        path = job_dir / GPU_METRICS_FILE
        write_gpu_metrics(path, *self.telemetry(expected_gpus))
        return path


def virtual_deployment_power(settings: PowerSettings, cluster: Cluster, *,
                             start_time: float) -> VirtualDeploymentPower | None:
    """The modelled power of one point run on a simulated deployment (None when power is neither sampled nor
    required: `run --power-backend off`)."""
    if settings.backend == "off" and not settings.require:
        return None
    return VirtualDeploymentPower(cluster, start_time=start_time, settings=settings)
