"""Engine adapters: render a Job into the exact server launch (argv, env, port, health, metrics, readiness).

Adapters know nothing of executors: they produce a `LaunchSpec`; an executor decides where and how it runs.

Public API:
    render(job, *, simulate=False, port=None) -> LaunchSpec
    render_topology(job, *, simulate=False, port=None, gpus_per_node=None) -> Topology   every role, its nodes
    launch_fingerprint(job, *, simulate=False) -> str     jobs with equal fingerprints can share one server
    launch_refusal(job, *, simulate, executor=None) -> str | None   why `run`/`predict` refuse a multinode job
    adapter_for(job, *, simulate=False) -> Adapter         what policy asks: consumed flags, conflicts, backends
    engine_flags(job) -> [(as written, as the engine reads it, value)]   the recipe's flags, resolved by its engine
    launch_memory_fraction(job) -> MemoryFraction | None   the memory fraction the job's engine launches with, and why
    get_adapter(name) -> Adapter;  ADAPTERS: name -> Adapter
"""

from __future__ import annotations

from typing import Any

from llmsweep.engine_ids import SIM, UNSERVED_FRAMEWORKS
from llmsweep.engines.atom import ATOMAdapter
from llmsweep.engines.base import MULTINODE_NOT_DISAGG_REFUSAL, Adapter, Conflict, flag_argv, norm_flag, split_flag
from llmsweep.engines.launch import LaunchSpec, Role, RoleWorker, Topology, is_secret_name
from llmsweep.engines.memory import MemoryFraction, launch_memory_fraction
from llmsweep.engines.sglang import SGLangAdapter
from llmsweep.engines.sim import SimAdapter
from llmsweep.engines.transformers import TransformersAdapter
from llmsweep.engines.trtllm import TRTLLMAdapter
from llmsweep.engines.vllm import VLLMAdapter
from llmsweep.errors import ContractError, LlmsweepError
from llmsweep.plan.job import Job

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (SGLangAdapter(), VLLMAdapter(), TRTLLMAdapter(), ATOMAdapter(),
                                                     SimAdapter(), TransformersAdapter())}


def get_adapter(name: str) -> Adapter:
    """The adapter registered under `name`; a ContractError names the known ones."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise ContractError(f"no engine adapter named {name!r}",
                            fix=f"use one of {', '.join(ADAPTERS)} (`serve.engine.name`)") from None


def runs_on_simulator(engine: str | None, *, simulate: bool) -> bool:
    """Whether a job of `engine` runs on the simulator: under --simulate, or when its engine is the simulator's (a
    job's `engine`, or the one a recipe's jobs get, `spec.engines.resolve_engine`). The one answer to that question."""
    return simulate or engine == SIM.id


def adapter_for(job: Job, *, simulate: bool = False) -> Adapter:
    """The simulator under `simulate` (it runs what a real engine would refuse), else the job's engine."""
    if runs_on_simulator(job.engine, simulate=simulate):
        return ADAPTERS["sim"]
    if job.engine is None:
        unserved = UNSERVED_FRAMEWORKS.get(job.framework.lower())
        reason = ("it has no `serve` block" if job.serve is None
                  else f"framework `{job.framework}` maps to no adapter" + (f" ({unserved})" if unserved else ""))
        raise ContractError(f"job {job.id} is not runnable: {reason}",
                            fix="add a `serve` block (and `serve.engine.name` for an unmapped framework), "
                                "or render it on the simulator with --simulate")
    return get_adapter(job.engine)


def engine_flags(job: Job) -> list[tuple[str, str, Any]]:
    """(as written, as the engine's parser resolves it, value) for each of the job's `serve.args`: `_`/`-`,
    `--flag=value`, aliases (`-sc`) and unique prefixes (`--speculative-conf`) resolved the way the engine will, so a
    rule compares what the engine sees. Jobs with no engine adapter get the normalised spelling."""
    if job.serve is None:
        return []
    try:
        adapter = adapter_for(job) if job.engine is not None else None
    except LlmsweepError:
        adapter = None
    out: list[tuple[str, str, Any]] = []
    for flag, value in job.serve.args.items():
        name, value = split_flag(flag, value)
        out.append((flag, adapter.canonical(name) if adapter is not None else norm_flag(name), value))
    return out


DISAGG_NOT_LAUNCHABLE = (
    "a real engine's disaggregated prefill/decode launch is not supported yet: it would run one aggregated server "
    "under the disaggregated job's name"
)
"""Why `run` on a real engine refuses a multinode/disaggregated job (an engine whose adapter launches no roles)."""
REAL_ROLE_EXECUTORS = ("local",)
"""The executors that launch a real engine's roles (an adapter's that `launches_roles`): the local executor, every
worker a process of this host on its own share of its GPUs (`execute.roles.LocalPlacement`)."""
REAL_ROLES_LOCAL_ONLY = "a real engine's disaggregated roles are launched only by the local executor yet"
"""Why another executor refuses them (the start of the reason)."""


def launch_refusal(job: Job, *, simulate: bool = False, executor: str | None = None) -> str | None:
    """Why `job` cannot be launched as planned (None when it can): the one home of that decision. `executor`: the
    run's (None: under whichever can launch it, as `validate` and `render` ask).

    A multinode job (prefill and decode pools, a router, KV transfer) rendered as one server would be a single
    aggregated server with the decode worker's parallelism, stored under the disaggregated job's identity and
    `gpus = prefill + decode`: a label the run did not earn. Only roles are launched as roles: the simulator's (under
    `simulate`, or on the `sim` engine), in virtual time on the simulator core (`llmsweep.sim.disagg`), or live, each
    role a server of its own, by an executor that places roles (`execute.roles`: processes of this host, or steps on
    the nodes of a Slurm allocation; `execute.placement` says which executors do); and the roles of an engine whose
    adapter `launches_roles` (vLLM with NIXL), under the local executor only (REAL_ROLE_EXECUTORS: one host, every
    worker on its own GPUs behind llmsweep's router). Every other real engine's roles are refused.
    """
    if not (job.multinode or job.disagg or job.prefill is not None or job.decode is not None):
        if job.router is not None and not runs_on_simulator(job.engine, simulate=simulate):
            return aggregated_router_refusal(job.router.name, job.router.version)
        return None
    if not (job.disagg and job.prefill is not None and job.decode is not None):
        # on any engine, live or not: no executor runs a multinode aggregated deployment
        return MULTINODE_NOT_DISAGG_REFUSAL
    if runs_on_simulator(job.engine, simulate=simulate):
        return None
    adapter = ADAPTERS.get(job.engine or "")
    if adapter is None or not adapter.launches_roles:
        return (f"{DISAGG_NOT_LAUNCHABLE}; llmsweep launches only the simulator's and vLLM's prefill/decode roles "
                "(`render` shows this engine's roles one by one); run it on the simulator with --simulate (in "
                "virtual time; with --live each role is a process of this host, or a step on its node under "
                "--executor slurm)")
    why = adapter.role_launch_refusal(job)
    if why is not None:
        return (f"{why}; run it on the simulator with --simulate")
    if executor is not None and executor not in REAL_ROLE_EXECUTORS:
        return (f"{REAL_ROLES_LOCAL_ONLY} (each worker a process of this host on its own GPUs): --executor "
                f"{executor} would place {adapter.name}'s workers on nodes no run has checked them on (a real "
                "engine's roles as Slurm steps, with the NIXL side channel on each node's address, are untested); "
                "use --executor local on a host with every worker's GPUs, or --simulate")
    return None


def aggregated_router_refusal(name: str, version: str) -> str:
    """Why a real engine's aggregated row that names a router (InferenceX's optional `vllm-router`/`sglang-router` in
    front of DP-attention ranks) is not run: llmsweep launches the server alone, so its result would carry a router
    in its identity that did not run. (The simulator runs it, its balanced DP ranks standing in for the router, and
    says the router is not modelled: `engines.sim.unmodelled`.)"""
    return (f"the row names router {name} {version} in front of an aggregated server, and llmsweep launches the server "
            "alone: its result would be labelled with a router that did not run; drop the row's `router` to measure "
            "the engine balancing its own DP ranks (another configuration, under its own id), or run it on the "
            "simulator with --simulate")


def context_fitted(job: Job) -> bool:
    """The job's launch asks its engine to fit the context to its memory at start-up (`Adapter.fits_context`: vLLM's
    `--max-model-len auto`); False where no adapter launches the job (no `serve` block: the derived context runs)."""
    from llmsweep.errors import LlmsweepError

    try:
        return adapter_for(job).fits_context(job)
    except LlmsweepError:
        return False


def launched_job(job: Job) -> Job:
    """The job as its server is launched, and as `job.json` records it: an eval-only fixed-seq-len job at the eval
    context length (`evals.context.serving_job`), and `max-model-len` the context the launch runs with — a recipe
    that sets the engine's context flag (`--max-model-len: 8192`, so that jobs share one server) runs that, not the
    isl + osl + 256 the launch would derive (`serve.context-conflict` refuses one below what the job needs), cut to
    what the engine serves where it cuts it without a word (ATOM: the checkpoint's positions, `Adapter.context_cap`;
    not the catalog's estimate of them)."""
    from llmsweep.errors import LlmsweepError
    from llmsweep.evals.context import serving_job

    job = serving_job(job)
    try:
        context = adapter_for(job).launched_context(job)
    except LlmsweepError:
        return job
    return job if context == job.max_model_len else job.model_copy(update={"max_model_len": context})


def render(job: Job, *, simulate: bool = False, port: int | None = None) -> LaunchSpec:
    """The exact launch of `job`'s server: argv, env (secrets by name), port, health, metrics, readiness, for the
    job as launched (:func:`launched_job`)."""
    return adapter_for(job, simulate=simulate).render(launched_job(job), port=port)


def launch_port(job: Job) -> int:
    """The port a server of `job` is launched on: the recipe's `serve.port` where it asks for one (checked free where
    the server runs, `execute.preflight.resolve_port`), else 0 — a free port picked there."""
    return job.serve.port if job.serve is not None and job.serve.port is not None else 0


def render_topology(job: Job, *, simulate: bool = False, port: int | None = None,
                    gpus_per_node: int | None = None) -> Topology:
    """Every role of `job` (one `server` for an aggregated job; prefill, decode and router for a disaggregated one),
    each worker's exact launch and its nodes. `gpus_per_node` defaults to :func:`runner_gpus_per_node`'s.
    A ContractError says why a job cannot be rendered role by role (an engine or framework llmsweep cannot launch
    disaggregated yet): such a job stays planned and is never run under a wrong label. Each role is rendered from the
    job as launched (:func:`launched_job`), as :func:`render` renders a server and the virtual-time deployment its
    workers (`execute.virtual_disagg.disagg_config`): a recipe's context flag, cut to what the engine serves, is the
    context every role serves and job.json records."""
    if job.multinode and gpus_per_node is None:
        gpus_per_node = runner_gpus_per_node(job)
    return adapter_for(job, simulate=simulate).render_topology(launched_job(job), port=port,
                                                               gpus_per_node=gpus_per_node)


def runner_gpus_per_node(job: Job) -> int | None:
    """GPUs per node of the job's runner: the record of the fleet it was planned with (`Job.gpus_per_node`: the
    invocation's runner file, else the packaged fleet; the packaged fleet's for a job planned without one), else its
    GPU SKU's host size (hardware catalog: an NVL72 tray holds 4); None when neither says. The one answer for placing
    workers on nodes: the rendered topology and the simulator's disaggregated deployment place them alike."""
    from llmsweep.catalog.fleet import default_fleet
    from llmsweep.catalog.hardware import get_hardware
    from llmsweep.errors import LlmsweepError

    if job.gpus_per_node is not None:
        return job.gpus_per_node
    fleet = default_fleet()
    known = fleet.gpus_per_node(job.runner_label) or fleet.gpus_per_node(job.runner)
    if known or job.sku is None:
        return known
    try:
        return get_hardware(job.sku).gpus_per_node
    except LlmsweepError:
        return None


def launch_fingerprint(job: Job, *, simulate: bool = False) -> str:
    """Hash of what would be launched (default port): jobs that differ only in conc share a server."""
    return render(job, simulate=simulate).fingerprint()


def same_launch(a: Job, b: Job, *, simulate: bool = False) -> tuple[bool, str] | None:
    """(whether `a` and `b` render the same launch — argv, env, files: `LaunchSpec.fingerprint`, what a reuse key
    holds —, the engine `a` launches), or None when either does not render. The simulator's launch leaves out what it
    does not model (an engine env var), so two jobs may launch alike there and not on their engine."""
    from llmsweep.errors import LlmsweepError

    try:
        first, second = render(a, simulate=simulate, port=0), render(b, simulate=simulate, port=0)
    except LlmsweepError:
        return None
    return first.fingerprint() == second.fingerprint(), first.engine


__all__ = [
    "ADAPTERS",
    "DISAGG_NOT_LAUNCHABLE",
    "MULTINODE_NOT_DISAGG_REFUSAL",
    "REAL_ROLES_LOCAL_ONLY",
    "REAL_ROLE_EXECUTORS",
    "Adapter",
    "Conflict",
    "LaunchSpec",
    "MemoryFraction",
    "Role",
    "RoleWorker",
    "Topology",
    "adapter_for",
    "engine_flags",
    "flag_argv",
    "get_adapter",
    "is_secret_name",
    "launch_fingerprint",
    "launch_memory_fraction",
    "launch_port",
    "launch_refusal",
    "launched_job",
    "render",
    "render_topology",
    "runner_gpus_per_node",
    "same_launch",
]
