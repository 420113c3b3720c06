"""Disaggregated jobs in virtual time: each deployment's roles on the simulator, its concurrencies one after another.

A multinode, disaggregated job on the simulated engine runs here (`llmsweep run` without `--live`, and `predict`):
its prefill and decode pools become simulated workers with the parallelism of the job's `prefill` and `decode` blocks,
placed on nodes by the same rule the role-by-role render uses (:func:`llmsweep.engines.base.worker_nodes`), with the
KV link the hardware catalog gives between them (:mod:`llmsweep.sim.disagg`).

As InferenceX runs them (wave-2 spec §6.3), the concurrencies of one topology — the jobs that share a curve identity
(`recipe-fingerprint`) and runner — run one after another on **one** deployment: each starts once the previous one
has drained (nothing running, waiting, queued for KV or in transfer) and the drain polls have seen it idle
(:func:`llmsweep.sim.disagg.drain_wait_s`). The prefix caches stay warm across them, as on the live deployment.

Provenance records the deployment that ran (`provenance.topology`: roles, their nodes and GPUs, the transfer backend,
the links), which the summary's `deployment` and `roles` blocks are read from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmsweep.engine_ids import SIM
from llmsweep.errors import LlmsweepError
from llmsweep.execute.lifecycle import JobOutcome, LifecycleSettings, ServerGroup, resumed
from llmsweep.execute.progress import current_progress
from llmsweep.plan import Job
from llmsweep.plan.point import Point, one_point_per_job
from llmsweep.words import count_of, noun

if TYPE_CHECKING:
    from llmsweep.execute.signals import StopRequest
    from llmsweep.metrics.model import Summary
    from llmsweep.power.sampler import PowerSettings
    from llmsweep.power.virtual import VirtualDeploymentPower
    from llmsweep.sim.disagg import Cluster, DisaggConfig
    from llmsweep.sim.predict import PredictedPoint, WindowProgress

Event = Callable[[str], None]


def is_disaggregated(job: Job) -> bool:
    """A job whose prefill and decode pools run as roles of their own (what `engines.launch_refusal` lets the
    simulator run in virtual time)."""
    return bool(job.disagg) and job.prefill is not None and job.decode is not None


def deployment_key(job: Job) -> tuple[str, str]:
    """Jobs with one key run on one deployment: the same curve identity (everything but conc) on the same runner."""
    return job.recipe_fingerprint, job.runner


def disagg_config(job: Job, *, max_concurrency: int | None = None) -> DisaggConfig:
    """The simulated deployment of `job`: each pool's engine is what the simulator would serve for one of its workers
    (the job seen as that worker, `engines.base.worker_job`), sized for `max_concurrency` (the largest conc run on
    it). A job the simulator cannot model is a :class:`~llmsweep.execute.virtual.NotModelled` with the reason."""
    from llmsweep import engines
    from llmsweep.catalog.hardware import get_hardware
    from llmsweep.engines.base import DEFAULT_GPUS_PER_NODE, worker_job, worker_nodes
    from llmsweep.engines.sim import DEFAULT_HARDWARE, SimAdapter
    from llmsweep.execute.virtual import NotModelled, engine_config
    from llmsweep.plan.job import Worker
    from llmsweep.sim.disagg import DisaggConfig, RoleName, RolePlan
    from llmsweep.sim.transfer import catalog_fabric

    if not is_disaggregated(job):
        raise NotModelled(f"job {job.id} is not a disaggregated prefill/decode job",
                          fix="run it as an aggregated job")
    assert job.prefill is not None and job.decode is not None
    try:
        hardware = job.sku or DEFAULT_HARDWARE  # (the simulator's, as the rendered roles price it)
        gpn = engines.runner_gpus_per_node(job) or get_hardware(hardware).gpus_per_node or DEFAULT_GPUS_PER_NODE
        placed = worker_nodes(job, gpn)
        plans: dict[str, RolePlan] = {}
        conc = max_concurrency or max(job.concs)
        pools: tuple[tuple[RoleName, Worker], ...] = (("prefill", job.prefill), ("decode", job.decode))
        for kind, worker in pools:
            # only the prefill pool offloads KV (`worker_job`): the DRAM budget is planned for it (`plan.dram`)
            wjob = worker_job(job, worker, kind).model_copy(update={"conc": conc})
            spec = engines.render(wjob, simulate=True)
            plans[kind] = RolePlan(kind=kind, engine=engine_config(spec),
                                   gpus_per_worker=worker.gpus_per_replica, nodes=tuple(placed[kind]))
        # the links every pair of workers uses: the one derivation the live roles' rendered `--kv-links` use too
        fabric = catalog_fabric(hardware, gpn, scaleup_latency_s=plans["decode"].engine.perf_inputs().link_latency_s)
        config = DisaggConfig(prefill=plans["prefill"], decode=plans["decode"], scaleup=fabric.scaleup,
                              scaleout=fabric.scaleout, domain_nodes=fabric.domain_nodes, gpus_per_node=gpn,
                              transfer_backend=SimAdapter().transfer_of(job) or "unspecified")  # as live roles
        config.links()  # a pair whose link the catalog cannot describe says so now, once per deployment
    except NotModelled:
        raise
    except LlmsweepError as exc:
        raise NotModelled(f"the simulator cannot model this disaggregated job: {exc.message}", fix=exc.fix) from exc
    return config


def command_text(job: Job, config: DisaggConfig) -> str:
    """`server_command.txt` of a disaggregated virtual-time job: the deployment that ran in-process, role by role."""
    lines = [f"# engine: sim (virtual time: no server was launched; a disaggregated deployment of "
             f"{count_of(config.gpus, 'GPU')} on {count_of(config.nodes, 'node')} ran in-process)",
             f"# kv transfer: {config.transfer_backend}; router policy: {config.router_policy}"]
    for link in config.links():
        lines.append(f"# link: {link.kind} {link.name}, {link.gbps:g} GB/s per GPU, {link.latency_s * 1e6:g} us")
    for role in (config.prefill, config.decode):
        e = role.engine
        for i, nodes in enumerate(role.nodes):
            lines.append(f"# {role.kind} worker {i}: {e.hardware} TP{e.tp} EP{e.ep}, "
                         f"{count_of(role.gpus_per_worker, 'GPU')} on {noun(len(nodes), 'node')} "
                         f"{', '.join(map(str, nodes))}; max running {e.max_running_requests}")
    lines.append(f"# job: {job.id}")
    return "\n".join(lines) + "\n"


def run_jobs(jobs: Sequence[tuple[Job, ServerGroup]], run_dir: Path, settings: LifecycleSettings, *,
             event: Event) -> list[JobOutcome]:
    """Run every disaggregated job in virtual time, deployment by deployment, each deployment's jobs in order of
    concurrency on one simulated cluster with a drain wait between them."""
    from llmsweep.execute.virtual import NotModelled

    deployments: dict[tuple[str, str], list[tuple[Job, ServerGroup]]] = {}
    for job, group in jobs:
        deployments.setdefault(deployment_key(job), []).append((job, group))
    outcomes: list[JobOutcome] = []
    for members in deployments.values():
        members.sort(key=lambda m: (max(m[0].concs), m[0].id))
        try:
            config = disagg_config(members[0][0], max_concurrency=max(max(j.concs) for j, _ in members))
        except NotModelled as exc:
            reason = exc.one_line()
            for job, _ in members:
                outcomes.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused", reasons=[reason]))
                event(f"job {job.id}: refused — {reason}")
            continue
        outcomes += _run_deployment(members, config, run_dir, settings, event)
        if settings.fail_fast and not all(o.ok for o in outcomes):
            break
    return outcomes


@dataclass
class _Deployment:
    """One simulated deployment and its virtual clock (epoch seconds: each point starts where the last one drained,
    plus the drain wait)."""

    config: DisaggConfig
    model: str
    clock: float
    cluster: Cluster = field(init=False)

    def __post_init__(self) -> None:
        self.start()

    def start(self) -> None:
        from llmsweep.sim.disagg import Cluster

        self.cluster = Cluster(self.config, model_name=self.model)


def _run_deployment(members: list[tuple[Job, ServerGroup]], config: DisaggConfig, run_dir: Path,
                    settings: LifecycleSettings, event: Event) -> list[JobOutcome]:
    from llmsweep.execute.virtual import run_job
    from llmsweep.sim.disagg import drain_wait_s

    deployment = _Deployment(config, members[0][0].model, time.time())
    outcomes: list[JobOutcome] = []
    event(f"disaggregated deployment of {count_of(len(members), 'job')}: {config.prefill.workers} prefill + "
          f"{count_of(config.decode.workers, 'decode worker')}, {count_of(config.gpus, 'GPU')} on "
          f"{count_of(config.nodes, 'node')}, virtual time")
    for job, group in members:
        done = resumed(job, run_dir) if settings.resume else None
        if done is not None:
            outcomes.append(done)
            continue
        event(f"job {job.id}: conc {job.concs[0]} ({job.workload.scenario}), disaggregated, virtual time")
        current_progress().job_started(job.id, job.concs[0] if job.concs else None)

        def simulate(jdir: Path, stop: StopRequest, job: Job = job, group: ServerGroup = group) -> Summary:
            return _simulate(job, group, deployment, jdir, stop, settings)

        outcome = run_job(job, group, None, run_dir, settings, event, simulate=simulate,
                          command=command_text(job, config))
        outcomes.append(outcome)
        deployment.clock += drain_wait_s()
        if not deployment.cluster.drained():  # a point that failed half-way: the next one gets a fresh deployment
            event(f"job {job.id}: the deployment did not drain; the next point starts a fresh one")
            deployment.start()
        if settings.fail_fast and not outcome.ok:
            break
    return outcomes


def predict_point(point: Point, cluster: Cluster, *, start_time: float, duration: float | None = None,
                  max_requests: int | None = None, provenance: dict[str, Any] | None = None,
                  summarize: bool = False, power: VirtualDeploymentPower | None = None,
                  on_progress: Callable[[WindowProgress], None] | None = None) -> PredictedPoint:
    """One point on a running deployment (left drained afterwards); its records start at `start_time`. With
    `summarize`, the gated summary of the point (`provenance` joined by the deployment's topology), as
    :func:`llmsweep.sim.predict.predict_point` makes it. `power`: the workers' modelled power, read at every scrape
    and integrated into the summary's power block. `on_progress`: as :func:`llmsweep.sim.predict.predict_point`'s."""
    from llmsweep.client.folder import run_json
    from llmsweep.metrics.model import PREDICTED
    from llmsweep.sim.disagg import DisaggPredictor
    from llmsweep.sim.predict import SCRAPE_INTERVAL_S, PredictedPoint, point_gates, point_window, summarise_predicted

    seconds, max_requests = point_window(point, duration, max_requests)
    workload = point.workload(simulated=True)
    predictor = DisaggPredictor(cluster, start_time=start_time, scrape_interval=SCRAPE_INTERVAL_S,
                                model_name=point.job.model)
    if power is not None and power.probe is not None:
        predictor.probes.append(power.probe)
    if on_progress is not None:
        predictor.report_window(on_progress)
    load = point.load
    records = predictor.run(workload, concurrency=point.concurrency, duration=seconds, max_requests=max_requests,
                            open_loop=load.concurrency is None, warmup_requests=load.warmup_requests)
    summary = None
    telemetry = info = None
    if summarize:
        info = run_json(provenance={**(provenance or {}), "topology": cluster.config.describe()},
                        gates=point_gates(point, seconds), client={"stop_reason": predictor.stats.stop_reason},
                        gpus=point.gpus, source=PREDICTED)
        telemetry = power.telemetry(point.gpus) if power is not None else None
        summary = summarise_predicted(records, predictor.scrapes, info, telemetry)
    return PredictedPoint(point, seconds, records, predictor.scrapes, summary, workload, predictor.stats, telemetry,
                          calibration_label(cluster.config), info)


def predict_job(job: Job, *, duration: float | None = None, max_requests: int | None = None,
                provenance: dict[str, Any] | None = None, power: PowerSettings | None = None) -> list[PredictedPoint]:
    """Every concurrency of a disaggregated job on one deployment, one after another with the drain wait between
    them (`llmsweep predict`); raises NotModelled when the simulator cannot model the job. Each point is the job
    `run` makes of it (`plan.point.one_point_per_job`: its own id, so its own prompts, as in `run`: the same prompts
    at the next concurrency would find the last one's in the deployment's prefix cache). `power`: how the workers'
    power is modelled (default settings when None)."""
    from llmsweep.power.sampler import PowerSettings
    from llmsweep.power.virtual import virtual_deployment_power
    from llmsweep.sim.disagg import Cluster, drain_wait_s

    config = disagg_config(job)
    cluster = Cluster(config, model_name=job.model)
    clock = 0.0
    out: list[PredictedPoint] = []
    settings = (power or PowerSettings()).for_jobs([job])
    # the context the deployment serves, as its virtual-time `run` records it (`_simulate`: the first decode worker's)
    launch = {"engine": SIM.id, "context_served": cluster.decode[0].core.config.served_context()}
    for point in sorted((Point.of(one) for one in one_point_per_job([job])), key=lambda p: p.concurrency):
        predicted = predict_point(point, cluster, start_time=clock, duration=duration, max_requests=max_requests,
                                  provenance={**(provenance or {}), "concurrency": point.concurrency,
                                              "calibration": calibration_label(config), "launch": launch},
                                  summarize=True, power=virtual_deployment_power(settings, cluster, start_time=clock))
        clock += (predicted.stats.virtual_seconds if predicted.stats is not None else 0.0) + drain_wait_s()
        out.append(predicted)
    return out


def _simulate(job: Job, group: ServerGroup, deployment: _Deployment, jdir: Path, stop: StopRequest,
              settings: LifecycleSettings) -> Summary:
    from llmsweep.execute.virtual import polled, write_point
    from llmsweep.power.virtual import virtual_deployment_power
    from llmsweep.sim.predict import no_cyclic_gc

    started_at = time.time()
    point = Point.of(job)
    power = virtual_deployment_power(settings.power.for_jobs([job]), deployment.cluster, start_time=deployment.clock)
    with no_cyclic_gc():  # the point and its summary (sim.predict.no_cyclic_gc)
        predicted = predict_point(point, deployment.cluster, start_time=deployment.clock, power=power,
                                  on_progress=polled(stop))
        if predicted.stats is not None:
            deployment.clock += predicted.stats.virtual_seconds
        if power is not None:  # every worker's modelled watts over the point, as the node samplers leave them
            power.write_job(jdir, expected_gpus=point.gpus)
        config = deployment.config
        # the context a live deployment's router reports: its first decode worker's `/v1/models` (`llmsweep.router`)
        served = deployment.cluster.decode[0].core.config.served_context()
        return write_point(job, group, predicted, jdir, settings, started_at=started_at,
                           observed={"calibration": calibration_label(config), "context_served": served},
                           extra={"topology": config.describe()})


def calibration_label(config: DisaggConfig) -> str:
    """Each pool's calibration label (`prefill: uncalibrated; decode: ...`), for tables and provenance."""
    from llmsweep.execute.roles import pools_calibration

    return pools_calibration([(role.kind, role.engine.calibration_label()) for role in (config.prefill, config.decode)])
