"""Checks that fail a job in a second instead of after a 30-minute server start: port free, GPUs visible.

A port already taken makes the server die with a bind error deep in its log (or, worse, the client benchmarks the
*other* server on that port); a job that wants GPUs the node does not show would load weights onto nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
from collections.abc import Mapping

from llmsweep.engine_ids import SIM
from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LaunchError
from llmsweep.execute.commands import run_command
from llmsweep.visible import VISIBLE_ENV, GpuTable, parse_nvidia_smi_list, resolve_visible

PORT_PLACEHOLDER = "{port}"
_GPU_TOOL_TIMEOUT_S = 30.0


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


def count_gpus(environ: Mapping[str, str] | None = None) -> tuple[str, int] | None:
    """(tool, visible GPU count): the GPUs `nvidia-smi -L` or `rocm-smi --showid` lists, narrowed by the
    `*_VISIBLE_DEVICES` selection as the runtime applies it (`llmsweep.visible`); None when neither tool exists. A
    selection that names no GPU of this host is a LaunchError with its reason (the engine would see fewer GPUs than
    its entries, or none)."""
    env = os.environ if environ is None else environ
    fix = "check the GPU driver on this node (the tool failed or hung)"
    known: GpuTable | None = None
    if nvidia_smi := shutil.which("nvidia-smi", path=env.get("PATH")):  # run as found on `env`'s PATH
        out = run_command([nvidia_smi, "-L"], timeout_s=_GPU_TOOL_TIMEOUT_S, fix=fix).stdout
        found = sum(1 for line in out.splitlines() if line.startswith("GPU "))
        tool = "nvidia-smi"
        known = GpuTable("nvidia", parse_nvidia_smi_list(out), "listed by nvidia-smi -L")
    elif rocm_smi := shutil.which("rocm-smi", path=env.get("PATH")):
        out = run_command([rocm_smi, "--showid"], timeout_s=_GPU_TOOL_TIMEOUT_S, fix=fix).stdout
        found = len(set(re.findall(r"^GPU\[(\d+)\]", out, flags=re.MULTILINE)))
        tool = "rocm-smi"
    else:
        return None
    visible = resolve_visible(env, known)
    if visible.problem is not None:
        raise LaunchError(f"the server's GPU selection is unusable: {visible.problem}",
                          fix="name GPUs this node has (indices or UUIDs from nvidia-smi -L / amd-smi list), or "
                              "unset the variable")
    if visible.gpus is None:
        return tool, found
    if past := [i for i in visible.gpus if i >= found]:
        # the runtime stops at it, hiding it and every GPU named after it: never counted as the GPUs before it plus
        # those after it (0,7,1 on a 2-GPU host is GPU 0 alone to the engine)
        named = ", ".join(f"{name}={env[name]}" for name in VISIBLE_ENV if env.get(name, "").strip())
        listed = f"{found} GPU(s) on this host (0-{found - 1})" if found else "no GPU on this host"
        raise LaunchError(f"the server's GPU selection is unusable: {named} names GPU {', '.join(map(str, past))}, "
                          f"but {tool} lists {listed}; the runtime stops at it, hiding it and every GPU named after it",
                          fix="name GPUs this node has (indices or UUIDs from nvidia-smi -L / amd-smi list), or "
                              "unset the variable")
    return tool, len(visible.gpus)


def check_gpus(spec: LaunchSpec, environ: Mapping[str, str] | None = None) -> None:
    """Fail when the spec needs GPUs this machine does not show. The simulator and CPU servers are skipped."""
    if spec.gpus <= 0 or spec.engine == SIM.id:
        return
    host_env = os.environ if environ is None else environ
    in_slurm = bool(host_env.get("SLURM_JOB_ID"))  # the check runs on the node, inside the batch job's allocation
    # the server runs with the recipe's env over this process's (the launchers, `observe_runtime` and the power
    # sampler all read it so): a selection the recipe sets is the server's, whatever this shell has
    counted = count_gpus({**host_env, **spec.env})
    pinned = [f"{name}={spec.env[name]}" for name in VISIBLE_ENV if name in spec.env]
    if counted is None:
        raise LaunchError(
            f"the {spec.engine} server needs {spec.gpus} GPU(s) but neither nvidia-smi nor rocm-smi is on PATH",
            fix=("this node is no GPU node, or its driver tools are not on the batch job's PATH: pick a GPU "
                 "partition (the slurm executor's `partition`) or add the tools' folder to PATH on the nodes")
            if in_slurm else "run on a GPU machine, or install the vendor driver tools (nvidia-smi / rocm-smi)",
        )
    tool, found = counted
    if found < spec.gpus:
        if pinned:
            fix = (f"name {spec.gpus} GPU(s) in the recipe's `serve.env` {', '.join(pinned)}, or drop it there, or "
                   "lower tp/pp in the recipe")
        elif in_slurm:
            fix = (f"this Slurm allocation shows fewer GPUs than it needs (llmsweep's batch jobs ask --gres=gpu:"
                   f"{spec.gpus}; in an salloc of your own, ask for as many): check the node's GPUs and gres.conf "
                   "(`scontrol show node`) and the slurm executor's `gpu_type`, or lower tp/pp in the recipe")
        else:
            fix = ("free GPUs on this machine or name more of them in CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES (the "
                   "docker executor passes the same selection), or lower tp/pp in the recipe")
        under = f" under the recipe's {', '.join(pinned)}" if pinned else ""
        raise LaunchError(f"the {spec.engine} server needs {spec.gpus} GPU(s) but {tool} shows {found} visible{under}",
                          fix=fix)


def preflight(spec: LaunchSpec, *, gpus: bool = True, environ: Mapping[str, str] | None = None) -> LaunchSpec:
    """Everything to check where the server will run, before launching it: the port (resolved when 0), then GPUs.

    Returns the spec to launch (its port filled in). Call it on the machine that runs the server: here for local and
    docker, on the node (in the batch job's worker) for Slurm.
    """
    resolved = resolve_port(spec)
    if gpus:
        check_gpus(resolved, environ)
    return resolved
