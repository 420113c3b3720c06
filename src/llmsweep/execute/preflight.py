"""Checks that fail a job in a second instead of after a 30-minute server start: port free, GPUs visible and free.

A port already taken makes the server die with a bind error deep in its log (or, worse, the client benchmarks the
*other* server on that port); a job that wants GPUs the node does not show would load weights onto nothing; a GPU
another process computes on (NVIDIA: `nvidia-smi --query-compute-apps`) leaves the engine short of memory after its
weights loaded, or measured beside another workload.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from llmsweep.engine_ids import SIM
from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LaunchError
from llmsweep.option_spellings import flag as _flag
from llmsweep.visible import (
    BUS_ORDER,
    DEVICE_ORDER,
    VISIBLE_ENV,
    Listed,
    gpu_tool_step,
    host_vendor,
    list_amd_smi,
    match_uuid,
    read_nvidia_smi_list,
    run_gpu_tool,
    select_listed,
)
from llmsweep.words import count_of, noun

_OPTION = _flag("executor_option")
"""`--executor-option`, as this module's fixes name it: read from its one home, `option_spellings`."""

log = logging.getLogger(__name__)
PORT_PLACEHOLDER = "{port}"


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a server could bind `host:port` now (SO_REUSEADDR, as servers set it, so TIME_WAIT is no obstacle)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel says is free now (another process may still take it before the server binds)."""
    return pick_free_ports(1, host)[0]


def pick_free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` different ports the kernel says are free now: every socket is held until all are picked, so no two are
    the same (another process may still take one before its server binds)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(count):
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
    return ports


def _bind_host(host: str) -> str:
    return "0.0.0.0" if host in ("0.0.0.0", "") else host


def with_port(spec: LaunchSpec, port: int, *, replacing: int = 0) -> LaunchSpec:
    """Substitute `port` wherever the adapter left port `replacing` (0: a port the executor picks; a role-by-role
    launch on one host moves each planned port to a free one): `{port}` placeholders, `PORTFLAG N`, `PORTFLAG=N`,
    where PORTFLAG is the spec's `port_flag` (`--port`; ATOM's `--server-port`, its `--port` being an internal one)."""
    flag, old = spec.port_flag, str(replacing)
    argv: list[str] = []
    previous = ""
    for arg in spec.argv:
        if previous == flag and arg == old:
            arg = str(port)
        elif arg == f"{flag}={old}":
            arg = f"{flag}={port}"
        argv.append(arg.replace(PORT_PLACEHOLDER, str(port)))
        previous = arg if arg == flag else ""
    env = {k: v.replace(PORT_PLACEHOLDER, str(port)) for k, v in spec.env.items()}
    return spec.model_copy(update={"port": port, "argv": tuple(argv), "env": env})


def resolve_port(spec: LaunchSpec) -> LaunchSpec:
    """Return the spec with a usable port: a fresh free one when the spec says 0, else the given one checked free."""
    host = _bind_host(spec.host)
    if spec.port == 0:
        return with_port(spec, pick_free_port(host))
    if not port_is_free(spec.port, host):
        raise LaunchError(
            f"port {spec.port} on {spec.host} is already in use; the {spec.engine} server could not bind it",
            fix=f"stop whatever listens on {spec.port} (`ss -ltnp 'sport = :{spec.port}'`), or delete the recipe's "
            "`serve.port` to let llmsweep pick a free one",
        )
    return spec


@dataclass(frozen=True)
class _HostListing:
    """This host's GPUs as the first vendor tool on a PATH lists them (`_list_host`)."""

    exe: str
    """The tool, as found on the server's PATH."""
    listed: Listed
    """The host's GPUs (and their UUIDs: from `nvidia-smi -L` also its MIG instances', from `amd-smi list` ROCr's;
    none from `rocm-smi`)."""

    @property
    def models(self) -> frozenset[str]:
        """The GPU models the tool names (`nvidia-smi -L`: `NVIDIA H200`); empty where it names none (AMD's list)."""
        return frozenset(self.listed.models.values())


@dataclass(frozen=True)
class _ServerGpus:
    """What the vendor tool lists of this host's GPUs, and the ones the server's selection gives it."""

    listing: _HostListing
    selected: tuple[int, ...]
    """The GPUs the server is given, in the runtime's order (every GPU when no variable narrows them)."""

    @property
    def listed(self) -> Listed:
        return self.listing.listed


class HostGpuQueries:
    """What a launch preflight asks this host's vendor tool, each asked once, when first needed, however many servers
    are checked against it: the GPUs it lists (`nvidia-smi -L`, else `amd-smi list`, else `rocm-smi --showid`:
    `_list_host`) and, NVIDIA, the processes computing on them (`--query-compute-apps`). A role-by-role deployment's
    workers on one host share one (`execute.roles.LocalPlacement`); a later preflight asks afresh with a new one."""

    def __init__(self) -> None:
        self._listed: dict[str | None, _HostListing | None] = {}
        self._tenants: dict[str, list[GpuTenant] | None] = {}

    def listing(self, env: Mapping[str, str]) -> _HostListing | None:
        """What the first vendor tool on `env`'s PATH lists; None when no tool is there."""
        path = env.get("PATH")
        if path not in self._listed:
            self._listed[path] = _list_host(path)
        return self._listed[path]

    def server(self, env: Mapping[str, str], recipe: Mapping[str, str], *,
               needs: str = "the server needs GPUs") -> _ServerGpus | None:
        """The host's GPUs `env`'s `*_VISIBLE_DEVICES` give a server (`llmsweep.visible.select_listed`); None when
        no tool lists them. A selection that names no GPU of this host, or hides every GPU, is a LaunchError with its
        reason (the engine would see fewer GPUs than its entries, or none), whose fix names where the selection is
        set: `recipe` (the recipe's `serve.env`) or this shell. `needs`: who needs the GPUs, the message's start."""
        found = self.listing(env)
        if found is None:
            return None
        visible = select_listed(found.listed, env)
        if visible.problem is not None:
            raise LaunchError(f"{needs}, but the GPU selection is unusable: {visible.problem}",
                              fix=_selection_fix(env, recipe))
        return _ServerGpus(found, visible.gpus or ())

    def tenants(self, exe: str) -> list[GpuTenant] | None:
        """The processes computing on the GPUs, as `exe` (nvidia-smi) lists them; None when it cannot say (best
        effort: a failed query refuses nothing)."""
        if exe not in self._tenants:
            try:
                out = run_gpu_tool([exe, COMPUTE_APPS_QUERY, "--format=csv,noheader,nounits"])
                self._tenants[exe] = parse_compute_apps(out)
            except OSError as exc:
                log.info("could not ask nvidia-smi which processes use the GPUs: %s", exc)
                self._tenants[exe] = None
        return self._tenants[exe]


NO_GPU_TOOL = "none of nvidia-smi, amd-smi and rocm-smi is on PATH"
"""What a GPU check says when no vendor tool can list the host's GPUs (`HostGpuQueries.listing` is None)."""


def _list_host(path: str | None) -> _HostListing | None:
    """The host's GPUs as the first vendor tool on `path` lists them: `nvidia-smi -L`; else `amd-smi list -e --json`
    (`list --json` where that fails: an older amd-smi), whose indices are the ones the lifecycle's `amd-smi static`
    and the power sampler number the GPUs by; else `rocm-smi --showid` (an amd-smi that fails too, ROCm before
    amd-smi). None when none is there. A LaunchError when the tool there fails (every AMD tool there, on AMD)."""
    fix = "check the GPU driver on this node (the tool failed or hung)"
    # every tool asked through `run_gpu_tool`: one that hung is not asked again in this preflight (`gpu_tool_step`)
    if exe := shutil.which("nvidia-smi", path=path):  # run as found on the server's PATH
        try:
            return _HostListing(exe, read_nvidia_smi_list(run_gpu_tool([exe, "-L"])))
        except OSError as exc:
            raise LaunchError(str(exc), fix=fix) from exc
    failed: LaunchError | None = None
    if exe := shutil.which("amd-smi", path=path):  # ROCm 7.x may ship it without rocm-smi (deprecated)
        try:
            return _HostListing(exe, list_amd_smi(exe))
        except OSError as exc:
            failed = LaunchError(str(exc), fix=fix)
    if exe := shutil.which("rocm-smi", path=path):
        try:
            out = run_gpu_tool([exe, "--showid"])
        except OSError as exc:
            raise LaunchError(str(exc), fix=fix) from exc
        indices = sorted({int(m) for m in re.findall(r"^GPU\[(\d+)\]", out, flags=re.MULTILINE)})
        return _HostListing(exe, Listed("rocm-smi", tuple(indices), None))
    if failed is not None:
        raise failed
    return None


def _selection_fix(env: Mapping[str, str], recipe: Mapping[str, str]) -> str:
    """How to give a server GPUs this node has: where each `*_VISIBLE_DEVICES` it runs with is set. Inside a Slurm
    job (`SLURM_JOB_ID`) a selection the recipe does not set is Slurm's, from the job's --gres: the node is the
    matter, not this shell."""
    names = [name for name in VISIBLE_ENV if name in env]
    pinned = [name for name in names if name in recipe]
    shell = [name for name in names if name not in recipe]
    slurm = bool(shell) and bool(env.get("SLURM_JOB_ID"))
    here = [] if slurm else shell  # (Slurm's are said apart)
    where = " and ".join([*([f"the recipe's `serve.env` {', '.join(pinned)}"] if pinned else []),
                          *([f"this shell's {', '.join(here)}"] if here else [])])
    fixes = [f"name GPUs this node has in {where} (indices or UUIDs from nvidia-smi -L / amd-smi list), or unset "
             f"{'it' if len(pinned) + len(here) == 1 else 'them'} there"] if where else []
    if slurm:
        fixes.append(f"{', '.join(shell)} in this Slurm job is Slurm's, set from the GPUs of its --gres (unless "
                     f"you set it in an salloc of your own: unset it there): {_slurm_node_check(env)}, or "
                     f"{_leave_node_out(env)}")
    return "; ".join(fixes) or "name GPUs this node has in the selection, or unset it"


def _slurm_node_check(env: Mapping[str, str]) -> str:
    """What to check of a Slurm node whose job's GPUs are not what the job asked for."""
    node = env.get("SLURMD_NODENAME") or "NODE"
    return (f"check the node's GPUs and gres.conf against `nvidia-smi -L` there (`scontrol show node {node}`; under "
            "cgroup.conf's ConstrainDevices=yes a job sees its own GPUs alone, numbered from 0)")


def _leave_node_out(env: Mapping[str, str]) -> str:
    """How to run a Slurm job's servers off this node until its admins fix it."""
    from llmsweep.execute.slurm import exclude_option

    node = env.get("SLURMD_NODENAME")
    option = exclude_option([node or "NODE"])
    return f"leave node {node or 'NODE'} out ({_OPTION} {option}) and tell its admins"


COMPUTE_APPS_QUERY = "--query-compute-apps=gpu_uuid,pid,used_memory,process_name"
"""What `nvidia-smi` is asked of the processes computing on the GPUs (with `--format=csv,noheader,nounits`)."""
NOT_A_TENANT = ("nvidia-cuda-mps-server",)
"""Compute processes that are no other workload: the MPS server a node runs for every client, the server's too."""


@dataclass(frozen=True)
class GpuTenant:
    """A process computing on a GPU, as `nvidia-smi --query-compute-apps` lists it."""

    gpu_uuid: str
    pid: int
    used_mib: int | None
    name: str


def parse_compute_apps(text: str) -> list[GpuTenant]:
    """`nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory,process_name --format=csv,noheader,nounits`: one
    process a line (its memory `[N/A]` where the driver does not say, as in a container); other lines are skipped."""
    tenants = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",", 3)]
        if len(cells) != 4 or not cells[0].lower().startswith(("gpu-", "mig-")) or not cells[1].isdigit():
            continue
        tenants.append(GpuTenant(cells[0], int(cells[1]), int(cells[2]) if cells[2].isdigit() else None, cells[3]))
    return tenants


def _refuse_busy(spec: LaunchSpec, host: _ServerGpus, queries: HostGpuQueries, fix: str) -> None:
    """LaunchError when another process computes on a GPU the server would use (the first `spec.gpus` of its
    selection). NVIDIA only; a query that fails or says nothing readable is no refusal (best effort), and neither is
    a GPU split into MIG instances (the query names the GPU, not the instance: another job's process on another
    instance would read as this server's neighbour).

    Not on AMD: `amd-smi process` lists every process that opened the GPUs' driver (KFD) under every GPU, with the
    process's memory over all of them (amd-smi 26.2.1 on 4 GPUs, each running one rank of a tp=4 vLLM: each rank
    listed under all four with the same VRAM; ROCm 5.6's release notes say the same of its amd-smi), so it cannot say
    which GPU a process computes on; a refusal read from it would refuse free GPUs beside a busy one."""
    table = host.listed.uuids
    if table is None or table.vendor != "nvidia":  # (an AMD listing's UUIDs are ROCr's: no tool to ask, above)
        return
    split = {index for uuid, index in table.uuids.items() if uuid.startswith("mig-")}
    wanted = host.selected[:spec.gpus]
    used = tuple(i for i in wanted if i not in split)
    if not used or (tenants := queries.tenants(host.listing.exe)) is None:
        return
    busy: dict[int, list[GpuTenant]] = {}
    for tenant in tenants:
        gpu = match_uuid(tenant.gpu_uuid, table.uuids)
        if gpu in used and tenant.pid != os.getpid() and os.path.basename(tenant.name) not in NOT_A_TENANT:
            busy.setdefault(gpu, []).append(tenant)
    if not busy:
        return
    said = "; ".join(
        f"GPU {gpu} ({tenants[0].gpu_uuid}) holds "
        + ", ".join(f"pid {t.pid} ({t.name}{f', {t.used_mib} MiB' if t.used_mib is not None else ''})"
                    for t in tenants)
        for gpu, tenants in sorted(busy.items()))
    pids = [str(t.pid) for tenants in busy.values() for t in tenants]
    raise LaunchError(f"the {spec.engine} server would use {noun(len(wanted), 'GPU')} "
                      f"{', '.join(map(str, wanted))}, but another process computes on "
                      f"{'them' if len(busy) > 1 else 'it'}: {said}; the server would not fit beside it, "
                      "or be measured sharing the GPU",
                      fix=f"stop or wait for {noun(len(pids), 'pid')} {' '.join(pids)} (`nvidia-smi` shows what runs "
                          f"where), or {fix}")


def check_gpus(spec: LaunchSpec, environ: Mapping[str, str] | None = None, *, reselect: str | None = None,
               queries: HostGpuQueries | None = None) -> None:
    """Fail when the spec needs GPUs this machine does not show, or that another process computes on (NVIDIA). The
    simulator and CPU servers are skipped.

    `reselect`: where llmsweep chose the selection in `spec.env` itself (a role-by-role deployment's worker, given its
    share of the host's GPUs: `execute.roles.LocalPlacement`), how to give the server other GPUs: the fix of a
    refusal, in place of the recipe's `serve.env` (None: the selection in `spec.env` is the recipe's). `queries`:
    what the host's tool was already asked (the deployment's other workers'); None: asked here.

    One step of the run (`llmsweep.visible.gpu_tool_step`): a vendor tool that does not answer within its timeout is
    not asked again in this check, and the next check (a later server group's) asks it again."""
    if spec.gpus <= 0 or spec.engine == SIM.id:
        return
    with gpu_tool_step("this launch preflight"):
        _check_gpus(spec, environ, reselect=reselect, queries=queries)


def _check_gpus(spec: LaunchSpec, environ: Mapping[str, str] | None, *, reselect: str | None,
                queries: HostGpuQueries | None) -> None:
    host_env = os.environ if environ is None else environ
    in_slurm = bool(host_env.get("SLURM_JOB_ID"))  # the check runs on the node, inside the batch job's allocation
    # the server runs with the recipe's env over this process's (the launchers, `observe_runtime` and the power
    # sampler all read it so): a selection the recipe sets is the server's, whatever this shell has
    queries = HostGpuQueries() if queries is None else queries
    host = queries.server({**host_env, **spec.env}, spec.env, needs=f"the {spec.engine} server needs GPUs")
    pinned = [f"{name}={spec.env[name]}" for name in VISIBLE_ENV if name in spec.env]
    whose = "the recipe's" if reselect is None else "its"
    if host is None:
        raise LaunchError(
            f"the {spec.engine} server needs {count_of(spec.gpus, 'GPU')} but {NO_GPU_TOOL}",
            fix=("this node is no GPU node, or its driver tools are not on the batch job's PATH: pick a GPU "
                 "partition (the slurm executor's `partition`) or add the tools' folder to PATH on the nodes")
            if in_slurm else "run on a GPU machine, or install the vendor driver tools (nvidia-smi / amd-smi)",
        )
    tool, found = host.listed.tool, len(host.selected)
    if found < spec.gpus:
        if reselect is not None:
            fix = f"{reselect}, or lower tp/pp in the recipe"
        elif pinned:
            fix = (f"name {count_of(spec.gpus, 'GPU')} in the recipe's `serve.env` {', '.join(pinned)}, or drop it "
                   "there, or lower tp/pp in the recipe")
        elif in_slurm:
            fix = (f"this Slurm allocation shows fewer GPUs than it needs (llmsweep's batch jobs ask --gres=gpu:"
                   f"{spec.gpus}; in an salloc of your own, ask for as many): {_slurm_node_check(host_env)} and the "
                   "slurm executor's `gpu_type`, or lower tp/pp in the recipe")
        else:
            fix = ("free GPUs on this machine or name more of them in CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES (the "
                   "docker executor passes the same selection), or lower tp/pp in the recipe")
        under = f" under {whose} {', '.join(pinned)}" if pinned else ""
        raise LaunchError(f"the {spec.engine} server needs {count_of(spec.gpus, 'GPU')} but {tool} shows "
                          f"{found} visible{under}",
                          fix=fix)
    if reselect is not None:
        elsewhere = reselect
    elif pinned:
        elsewhere = f"select free GPUs in the recipe's `serve.env` {', '.join(pinned)}"
    elif in_slurm:
        elsewhere = f"{_leave_node_out(host_env)}: this allocation's GPUs should be its own"
    else:
        elsewhere = "select free GPUs with CUDA_VISIBLE_DEVICES"
    _refuse_other_order(spec, host, {**host_env, **spec.env})
    _refuse_busy(spec, host, queries, fix=elsewhere)


def _refuse_other_order(spec: LaunchSpec, host: _ServerGpus, env: Mapping[str, str]) -> None:
    """LaunchError when the server (running with `env`) numbers an NVIDIA host's GPUs in another order than
    nvidia-smi's (`CUDA_DEVICE_ORDER` set, by the recipe or this shell, to other than `PCI_BUS_ID`: CUDA's default,
    fastest first) and the host's GPUs are not all one model: its indices, and the device it takes first, would be
    other GPUs than the ones checked, recorded as its hardware and sampled for its power (all by nvidia-smi's
    numbering). On a host of one model the two orders agree. Unset, llmsweep sets `PCI_BUS_ID` (`in_bus_order`)."""
    order = (env.get(DEVICE_ORDER) or "").strip()
    if host.listed.tool != "nvidia-smi" or not order or order == BUS_ORDER or len(host.listing.models) < 2:
        return
    where = "the recipe's `serve.env`" if DEVICE_ORDER in spec.env else "this shell"
    models = ", ".join(sorted(host.listing.models))
    raise LaunchError(f"the {spec.engine} server would number this host's GPUs by {DEVICE_ORDER}={order} (set in "
                      f"{where}), not in nvidia-smi's order, and the host has GPUs of more than one model "
                      f"({models}): the GPUs llmsweep checks, records and samples as the server's, by nvidia-smi's "
                      "numbering, would not be the ones it runs on",
                      fix=f"unset {DEVICE_ORDER} in {where} (llmsweep then runs the server with "
                          f"{DEVICE_ORDER}={BUS_ORDER}, nvidia-smi's order), or set it to {BUS_ORDER}")


def in_bus_order(spec: LaunchSpec, environ: Mapping[str, str] | None = None) -> LaunchSpec:
    """`spec` to launch with `CUDA_DEVICE_ORDER=PCI_BUS_ID` in its env where it is a GPU server (not the simulator)
    on an NVIDIA host (nvidia-smi on the server's PATH) and neither the recipe's `serve.env` nor this shell
    (`environ`) sets the variable (the server inherits the shell's: a local one by its environment, a docker container
    by `-e`, `docker.render_docker_run`).

    Every GPU index llmsweep reads for a server is nvidia-smi's (the preflight's, the GPUs recorded as its hardware,
    the power sampler's NVML indices, a role-by-role deployment's shares of the host), and so is the index an
    engineer reads off `nvidia-smi` and writes into `CUDA_VISIBLE_DEVICES`; CUDA's own default order puts the
    fastest GPU first. On a host of mixed GPUs (a display GPU beside the accelerators, two generations in one box)
    `CUDA_VISIBLE_DEVICES=0`, or no selection with the engine taking device 0, would otherwise run the server on
    another GPU than the one checked free, named in its result and sampled for its power. An order set explicitly is
    kept (`check_gpus` refuses one other than `PCI_BUS_ID` where it matters: a host of mixed GPUs)."""
    host_env = os.environ if environ is None else environ
    env = {**host_env, **spec.env}
    if spec.gpus <= 0 or spec.engine == SIM.id or (env.get(DEVICE_ORDER) or "").strip() \
            or host_vendor(env) != "nvidia":
        return spec
    return spec.model_copy(update={"env": {**spec.env, DEVICE_ORDER: BUS_ORDER}})


def preflight(spec: LaunchSpec, *, gpus: bool = True, environ: Mapping[str, str] | None = None) -> LaunchSpec:
    """Everything to check where the server will run, before launching it: the port (resolved when 0), then GPUs.

    Returns the spec to launch (its port filled in; a GPU server on an NVIDIA host numbering the GPUs in nvidia-smi's
    order: `in_bus_order`). Call it on the machine that runs the server: here for local and docker, on the node (in
    the batch job's worker) for Slurm. A deployment launched role by role on this host checks each worker's GPUs with
    `check_gpus` before any starts (`execute.roles.LocalPlacement`, which picks every port free itself, as
    `resolve_port` picks a port 0, and orders each worker's GPUs with `in_bus_order`).
    """
    resolved = resolve_port(spec)
    if gpus:
        resolved = in_bus_order(resolved, environ)
        check_gpus(resolved, environ)
    return resolved
