"""Docker executor: the server runs in its engine image via `docker run`; the client stays on the host.

A harness checkout (the `harness_dir` option) is mounted at `/llmsweep`, never `/workspace`: engine images install
editable engines there and a bind mount would mask them (InferenceX switched mount paths by image-name substring to
dodge this). Secrets are passed with `-e NAME` (value taken by the docker CLI from its own environment), so the
rendered command is safe to write.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from llmsweep import shell
from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError, LaunchError
from llmsweep.execute.base import (
    HARNESS_MOUNT,
    ON_HOST,
    HostPath,
    ImageMount,
    ServedIn,
    host_mounts,
    server_environment,
)
from llmsweep.execute.commands import run_command
from llmsweep.execute.executor import Event, register_executor, run_groups_here, validate_options
from llmsweep.execute.handle import ProcessServerHandle, flags_named
from llmsweep.execute.process import marks, start_process
from llmsweep.execute.signals import hurried, signal_of_exit
from llmsweep.option_spellings import flag as _flag
from llmsweep.visible import DEVICE_ORDER
from llmsweep.words import count_of, noun

_OPTION = _flag("executor_option")
"""`--executor-option`, as this module's fixes name it: read from its one home, `option_spellings`."""
_RESUME = _flag("resume")

if TYPE_CHECKING:
    from llmsweep.execute.lifecycle import JobOutcome, LifecycleSettings, ServerGroup

log = logging.getLogger(__name__)

_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")


class DockerOptions(BaseModel):
    """How to run engine images with docker on this host."""

    model_config = ConfigDict(extra="forbid")

    gpu_vendor: Literal["nvidia", "amd", "none"] = Field(
        default="nvidia",
        description="nvidia: --gpus, the GPUs CUDA_VISIBLE_DEVICES names on the host (all when unset); amd: the "
        "/dev/kfd and /dev/dri devices, with the host's HIP/ROCR/CUDA_VISIBLE_DEVICES passed in; none: CPU only.",
    )
    shm_size: str = Field(default="16g", description="--shm-size; engines pass tensors between ranks through /dev/shm.")
    init: bool = Field(
        default=True,
        description="--init: the daemon's init (docker-init) runs as the container's PID 1, passes `docker stop`'s "
        "SIGTERM on to the engine and reaps its worker processes. Without it the engine is PID 1, for which the "
        "kernel ignores any signal the engine left at its default action: such an engine is killed only when the "
        "stop's grace runs out (measured with transformers serve: the whole grace).",
    )
    hf_cache: HostPath | None = Field(default=None, description="Host Hugging Face cache, mounted at the same path.")
    model_dir: HostPath | None = Field(default=None, description="Host model directory, mounted read-only, same path.")
    harness_dir: HostPath | None = Field(default=None, description=f"llmsweep checkout mounted at {HARNESS_MOUNT}.")
    extra_mounts: tuple[str, ...] = Field(default=(), description="More -v specs, e.g. '/scratch:/scratch'.")
    workdir: str | None = Field(default=None, description="-w inside the container (default: the image's).")
    name_prefix: str = Field(default="llmsweep", description="Container names are <prefix>-<engine>-<random>.")
    docker: str = Field(default="docker", description="The docker CLI (or a compatible one, e.g. podman).")
    extra_args: tuple[str, ...] = Field(default=(), description="Extra `docker run` flags, placed before the image.")
    stop_timeout_s: float = Field(default=60.0, gt=0, allow_inf_nan=False,
                                  description="Timeout of the `docker stop` call itself.")
    pull_timeout_s: float = Field(
        default=3600.0, gt=0, allow_inf_nan=False,
        description="Longest `docker pull` of an image this host lacks (pulled before the server starts: the pull "
        "does not count against the start-up timeout).",
    )

    @field_validator("shm_size", mode="before")
    @classmethod
    def _shm_size(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # `shm_size=100` (read as YAML): bytes, as docker reads a bare number
        if isinstance(value, str) and not _DOCKER_SIZE.fullmatch(value):
            raise ValueError(f"{value!r} is not a size `docker run --shm-size` reads: a number with an optional unit "
                             "b, k, m or g (e.g. shm_size=16g)")
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value!r} is not an absolute path, which `docker run -w` needs (the container's "
                             "folder, not this host's); give one, e.g. workdir=/workspace, or leave it out for the "
                             "image's own")
        return value


_DOCKER_SIZE = re.compile(r"\d+(\.\d+)? ?[kKmMgGtTpP]?[iI]?[bB]?")
"""A size as docker's CLI reads `--shm-size` (go-units' RAMInBytes): `16g`, `1.5g`, `64MiB`, `100` (bytes)."""


def check_docker_cli(options: DockerOptions) -> None:
    """Refuse a docker CLI (the `docker` option) this host cannot run, before any job: otherwise each server's image
    check failed with "check the docker daemon", which is not what is wrong."""
    if shutil.which(options.docker) is not None:
        return
    where = Path(options.docker)
    said = ("does not exist" if "/" in options.docker and not where.exists() else
            "is not an executable file" if "/" in options.docker else "is not on PATH")
    raise ConfigError(
        f"the docker executor's CLI `{options.docker}` (executor option docker) {said}",
        fix=f"install Docker (or a compatible CLI such as podman), or name it: {_OPTION} docker=PATH "
        "(leave it out for `docker` on PATH)")


def container_name(spec: LaunchSpec, prefix: str = "llmsweep") -> str:
    """A unique, docker-safe name, so teardown stops exactly this container and parallel jobs never collide."""
    raw = f"{prefix}-{spec.engine}-{uuid.uuid4().hex[:10]}"
    return _NAME_UNSAFE.sub("-", raw).strip("-.")


_OUR_NAME = re.compile(r"-[0-9a-f]{10}$")
"""How `container_name` ends: a name without it was not ours to remove."""


def removal_of(argv: Sequence[str]) -> list[str] | None:
    """`DOCKER rm -f NAME` for a command line `render_docker_run` wrote (`DOCKER run … --network=host --name NAME`,
    the CLI first or after the interpreter of a wrapper script); None for any other command line, such as
    `conda run --name ENV …`, whose `--name` names no container of ours."""
    at = next((i for i in (1, 2) if i < len(argv) and argv[i] == "run"), 0)
    rest = list(argv[at + 1:at + 5])
    if not at or "--network=host" not in rest or "--name" not in rest[:-1]:
        return None
    name = rest[rest.index("--name") + 1]
    return [argv[at - 1], "rm", "-f", name] if _OUR_NAME.search(name) else None


LABEL_NAMESPACE = "llmsweep."
"""The prefix of every label key llmsweep puts on a container (its one home: each key below is written from it), so
`docker ps --filter label=llmsweep.group=…` finds a run's containers and no other tool's label is taken for ours."""
SERVER_DIR_LABEL = f"{LABEL_NAMESPACE}server-dir"
"""The label every container llmsweep starts carries: its server's folder (under the run's `--out`), as
`process.SERVER_DIR_ENV` marks the processes it starts. A run killed with its `docker run` CLI (or before its pid
file named the container) left a container nothing on disk named: `--resume` finds it by this label
(`left_containers`), whatever its name. It alone decides whether a container is a run's: an absolute folder, which
another run's (another `--out`) never equals nor lies under."""
LOG_LABEL = f"{LABEL_NAMESPACE}log"
"""The label naming the log of the launch the container serves: which role of a deployment (`prefill-0.log`) and which
relaunch (`server.2.log`)."""
GROUP_LABEL = f"{LABEL_NAMESPACE}group"
"""The label naming the server group the container serves (its folder's name under the run's `servers/`: the jobs
that share one server, `sglang-1a2b3c4d5e6f`; an `al collect` cell's name there), so a console line or a
`docker ps --filter` names it without reading a path."""
ROLE_LABEL = f"{LABEL_NAMESPACE}role"
"""The label naming the launch within its group: `server` for an aggregated server, the worker of a deployment
launched role by role (`prefill-0`, `decode-1`, `router-0`) — its log's name without the relaunch number."""


def container_labels(log_path: Path) -> dict[str, str]:
    """The labels of the container whose server logs to `log_path`: `SERVER_DIR_LABEL`, `LOG_LABEL`, `GROUP_LABEL`
    and `ROLE_LABEL`. Values go into `docker run`'s argv as one word each (`--label KEY=VALUE`: docker splits at the
    first `=`), never through a shell, so a folder of any spelling is carried as it is."""
    folder = log_path.parent.resolve()
    return {SERVER_DIR_LABEL: str(folder), LOG_LABEL: str(folder / log_path.name), GROUP_LABEL: folder.name,
            ROLE_LABEL: launch_role(log_path.name)}


def launch_role(log_name: str) -> str:
    """`ROLE_LABEL`'s value for a launch logging to `log_name`: `server.log`, `server.3.log` -> `server`;
    `prefill-0.log`, `prefill-0.2.log` -> `prefill-0`."""
    stem = log_name.removesuffix(".log")
    head, dot, tail = stem.rpartition(".")
    return head if dot and tail.isdigit() else stem


_DEVICE_LIST = re.compile(r"^[A-Za-z0-9:-]+(,[A-Za-z0-9:-]+)*$")
"""GPU indices or UUIDs (GPU-..., MIG-...), comma-separated: nothing that docker's CSV reading of `--gpus` would take
for another field or option."""

AMD_VISIBLE_ENV = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
"""What restricts a ROCm process to some GPUs; the container sees every /dev/dri node, so they go in as they are."""


def render_docker_run(spec: LaunchSpec, options: DockerOptions, name: str,
                      environ: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None) -> list[str]:
    """The `docker run` argv for `spec`; secrets appear by name only. `labels`: the container's (`container_labels`),
    after its name.

    The server gets the GPUs the host's environment (`environ`, default this process's) makes visible, as a local
    server would: a container sees every GPU unless told otherwise, so under `CUDA_VISIBLE_DEVICES=4,5,6,7` an
    engine given `--gpus all` would run on GPUs 0-3 while the power sampler reads 4-7. A `CUDA_VISIBLE_DEVICES` the
    recipe sets selects instead (the sampler reads the server's environment too). So does the host's
    `CUDA_DEVICE_ORDER` (the recipe's wins): it numbers those GPUs inside the container as it would for a local
    server."""
    env = os.environ if environ is None else environ
    if not spec.image:
        raise ConfigError(
            f"the {spec.engine} job names no image, so the docker executor has nothing to run",
            fix="set the job's image, or use the local executor for servers installed on the host",
        )
    check_docker_spelling(spec.image)
    # No `--rm`: the daemon would remove the container the moment it exits, and its State (OOMKilled, the exit code)
    # with it, before this run can ask why it ended; the handle's stop removes it (`docker rm -f`), and a run killed
    # before its stop leaves that command to `--resume` in the server's pid file.
    argv = [options.docker, "run", *(["--init"] if options.init else []), "--network=host", "--name", name]
    for key, value in sorted((labels or {}).items()):  # (after the name: `removal_of` reads the first four)
        argv += ["--label", f"{key}={value}"]
    argv += ["--ipc=host", f"--shm-size={options.shm_size}"]
    # A CPU-only server (the simulator in an image) gets no GPU flags: `--gpus` fails on hosts without the runtime.
    nvidia = spec.gpus > 0 and options.gpu_vendor == "nvidia"
    if nvidia:
        # the recipe's own selection wins, as it does for a local server and for the power sampler
        visible = spec.env.get("CUDA_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES", "")).strip()
        if visible and not _DEVICE_LIST.match(visible):
            raise ConfigError(
                f"CUDA_VISIBLE_DEVICES={visible!r} is not a list of GPU indices or UUIDs, so it cannot select the "
                "container's GPUs (`--gpus \"device=...\"`)",
                fix="set it to comma-separated indices or UUIDs, e.g. 0,1 or GPU-3f2a...",
            )
        # the CLI reads the value as CSV: a list of devices is one quoted field (indices or GPU-UUIDs)
        argv += ["--gpus", f'"device={visible}"' if visible else "all"]
        # the order this shell sets, as a local server inherits it (`preflight.in_bus_order` adds none to spec.env
        # then, and `check_gpus` checked the server's GPUs in it): a container gets no variable of the host's unasked
        order = env.get(DEVICE_ORDER, "").strip()
        if order and DEVICE_ORDER not in spec.env:
            argv += ["-e", f"{DEVICE_ORDER}={order}"]
    elif spec.gpus > 0 and options.gpu_vendor == "amd":
        argv += ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video",
                 "--security-opt", "seccomp=unconfined"]
        for var in AMD_VISIBLE_ENV:
            if env.get(var, "").strip() and var not in spec.env:
                argv += ["-e", f"{var}={env[var].strip()}"]
    if options.hf_cache is not None:
        argv += [*bind_mount(options.hf_cache, options.hf_cache), "-e", f"HF_HUB_CACHE={options.hf_cache}"]
    if options.model_dir is not None:
        argv += bind_mount(options.model_dir, options.model_dir, read_only=True)
    if options.harness_dir is not None:
        argv += bind_mount(options.harness_dir, HARNESS_MOUNT, read_only=True)
    for mount in options.extra_mounts:
        argv += ["-v", mount]
    if spec.files and spec.files_dir:  # the launch's files, named in argv by their host path (under `--out`)
        argv += bind_mount(spec.files_dir, spec.files_dir, read_only=True)
    if options.workdir:
        argv += ["-w", options.workdir]
    for key, value in sorted(spec.env.items()):
        if nvidia and key == "CUDA_VISIBLE_DEVICES":
            continue  # those GPUs are the container's 0..N-1: `--gpus` selected them
        argv += ["-e", f"{key}={value}"]
    for secret in spec.secret_env:
        argv += ["-e", secret]
    argv += list(options.extra_args)
    argv += ["--entrypoint", spec.argv[0], spec.image, *spec.argv[1:]]
    return argv


def check_docker_spelling(image: str) -> None:
    """Refuse pyxis's `registry#path:tag`: docker reads no `#` ("invalid reference format"), and its pull failure's
    fix (the name, the tag, `docker login`) does not say that the spelling is the matter."""
    if "#" in image:
        from llmsweep.catalog.images import parse_image

        raise ConfigError(
            f"image `{image}` is written in pyxis's spelling (`registry#path`), which docker does not read",
            fix=f"write it `{parse_image(image).reference(pyxis=False)}` in the recipe's `image` (pyxis, the slurm "
            "executor's, reads that spelling too)")


def bind_mount(source: str | Path, target: str | Path, *, read_only: bool = False) -> list[str]:
    """The `docker run` flags that bind host folder `source` at `target`: `-v SOURCE:TARGET[:ro]`, or, where a path
    holds a `:` (which `-v` reads as its field separator: `docker: invalid spec: ... too many colons`, exit 125, for an
    `--out runs/23:15` whose launch files are mounted), `--mount` with each field CSV-quoted as docker reads it."""
    source, target = str(source), str(target)
    if ":" not in source and ":" not in target:
        return ["-v", f"{source}:{target}" + (":ro" if read_only else "")]
    fields = ["type=bind", f"source={source}", f"target={target}", *(["readonly"] if read_only else [])]
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow(fields)
    return ["--mount", line.getvalue()]


def remove_container(rm: Sequence[str], *, timeout_s: float = 60.0) -> None:
    """`docker rm -f NAME`; a container already gone (removed from outside) is success, and so is one whose removal
    the daemon already has under way (another `docker rm`, a `--rm` container of an older run) once it is gone; any
    other failure, or a removal that does not end within `timeout_s`, is a LaunchError (the caller keeps the pid file
    and its clean-up command for `--resume`)."""
    deadline = time.monotonic() + timeout_s
    proc = run_command(rm, timeout_s=timeout_s, check=False, new_session=True, fix="check the docker daemon")
    said = (proc.stderr + proc.stdout).strip()
    if proc.returncode != 0 and "already in progress" in said.lower():
        inspect = [rm[0], "container", "inspect", "--format", "{{.State.Status}}", rm[-1]]
        while time.monotonic() < deadline:
            seen = run_command(inspect, timeout_s=max(1.0, deadline - time.monotonic()), check=False,
                               new_session=True, fix="check the docker daemon")
            if seen.returncode != 0 and "no such" in (seen.stderr + seen.stdout).lower():
                return
            time.sleep(0.2)
    if proc.returncode != 0 and "no such container" not in said.lower():
        raise LaunchError(f"`{' '.join(rm)}` failed with exit status {proc.returncode}: {said[-500:]}",
                          fix=f"check the docker daemon, then run `{' '.join(rm)}` by hand")


LEFT_CREATION_WAIT_S = 60.0
"""How long `--resume` waits for a container an earlier run's `docker run` (still alive) is creating before it stops
that CLI (`await_creation`): the daemon finishes a create whose CLI is killed."""


@dataclass(frozen=True)
class LeftContainer:
    """A container of llmsweep's the daemon has (`left_containers`), as its labels name it."""

    name: str
    server_dir: Path
    """Its `SERVER_DIR_LABEL`: what made it the run's."""
    group: str
    """Its `GROUP_LABEL` (its server folder's name, where an older llmsweep labelled it without)."""
    role: str | None
    """Its `ROLE_LABEL`; None where an older llmsweep labelled it without."""

    def said(self) -> str:
        """`prefill-0 of server group sglang-roles-1a2b…`: what it served, for a console line."""
        return f"{self.role or 'a server'} of server group {self.group}"


def left_containers(docker: str, under: Path, *, below: bool = True,
                    timeout_s: float = 30.0) -> list[LeftContainer] | str:
    """The containers the daemon has, running or not, whose `SERVER_DIR_LABEL` names `under` or (`below`) a folder
    under it; a container whose label names another folder (another run's) is never among them. Why not, when the CLI
    or its daemon cannot say (a str)."""
    ps = [docker, "ps", "-a", "-q", "--no-trunc", "--filter", f"label={SERVER_DIR_LABEL}"]
    try:
        proc = run_command(ps, timeout_s=timeout_s, check=False, new_session=True, fix=_DAEMON_FIX)
    except LaunchError as exc:
        return exc.message
    if proc.returncode != 0:
        return f"`{' '.join(ps)}` failed with exit status {proc.returncode}: {(proc.stderr + proc.stdout).strip()}"
    ids = proc.stdout.split()
    if not ids:
        return []
    inspect = [docker, "container", "inspect", "--format", "{{.Name}} {{json .Config.Labels}}", *ids]
    try:  # (one removed since `ps` is said on stderr, the others still printed)
        proc = run_command(inspect, timeout_s=timeout_s, check=False, new_session=True, fix=_DAEMON_FIX)
    except LaunchError as exc:
        return exc.message
    found: list[LeftContainer] = []
    for line in proc.stdout.splitlines():
        name, _, text = line.strip().partition(" ")
        try:
            labels = json.loads(text)
        except ValueError:
            continue
        if not isinstance(labels, dict):
            continue
        folder, group, role = (labels.get(key) for key in (SERVER_DIR_LABEL, GROUP_LABEL, ROLE_LABEL))
        if isinstance(folder, str) and marks(folder, under, below=below):
            found.append(LeftContainer(name=name.lstrip("/"), server_dir=Path(folder),
                                       group=group if isinstance(group, str) and group else Path(folder).name,
                                       role=role if isinstance(role, str) and role else None))
    return found


PULL_LOG = "image-pull.log"
"""In the server's folder: what `docker pull` printed, when the image had to be pulled."""
_PULL_PROGRESS_S = 30.0


def image_facts(docker: str, image: str, *, timeout_s: float = 60.0) -> ServedIn | None:
    """`image` with the daemon's id and registry digest of it (None: this host does not have it)."""
    proc = run_command([docker, "image", "inspect", "--format", "{{json .}}", image], timeout_s=timeout_s,
                       check=False, fix="check the docker daemon (`docker info`)")
    if proc.returncode != 0:
        said = (proc.stderr + proc.stdout).strip()
        if "no such image" in said.lower():
            return None
        raise LaunchError(f"`docker image inspect {image}` failed with exit status {proc.returncode}: {said[-500:]}",
                          fix=_DAEMON_FIX if any(m in said.lower() for m in _DAEMON_UNREACHABLE)
                          else "check the docker daemon (`docker info`) and that this user may use it")
    doc = json.loads(proc.stdout)
    return ServedIn(image=image, image_id=doc.get("Id"),
                    image_digest=registry_digest(image, [str(d) for d in doc.get("RepoDigests") or []]))


def _repository(ref: str) -> str:
    """`ref` without its tag or digest, Docker Hub's `docker.io/` and `library/` left out (RepoDigests' spelling)."""
    name = ref.partition("@")[0]
    if name.rfind(":") > name.rfind("/"):
        name = name[:name.rfind(":")]
    for prefix in ("docker.io/", "index.docker.io/", "library/"):
        name = name.removeprefix(prefix)
    return name


def registry_digest(image: str, repo_digests: Sequence[str]) -> str | None:
    """The registry digest of `image`'s own repository among the daemon's RepoDigests (`repo@sha256:...`, one per
    repository the image was pulled from or pushed to, which can differ: a mirror's push of a multi-arch image has
    its own), or the digest `image` names; None when the image has none from its repository (built or tagged here)."""
    if "@" in image:
        return image.rpartition("@")[2]
    own = _repository(image)
    return next((d.rpartition("@")[2] for d in repo_digests if _repository(d) == own), None)


def _ends_with_parent() -> list[str]:
    """A prefix that has the kernel send the command SIGTERM when the thread that started it ends, so a harness
    killed with SIGKILL leaves no `docker pull` behind: util-linux's `setpriv --pdeathsig` (Linux), which sets it and
    then execs the command. Empty where there is no setpriv (the pull then runs on to its end)."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


class PullFailed(LaunchError):
    """`docker pull` of an image this host lacks failed or timed out (not interrupted: a signal is no verdict)."""


def ensure_image(docker: str, image: str, *, log_path: Path, event: Callable[[str], None],
                 timeout_s: float = 3600.0) -> ServedIn:
    """The image's facts (`image_facts`), pulling it first when this host lacks it: the pull's output goes to
    `log_path`, a progress line every 30 s. A failed or timed-out pull is stopped and raised (PullFailed), an
    interrupted one stopped and its interrupt raised."""
    facts = image_facts(docker, image)
    if facts is not None:
        return facts
    event(f"pulling {image} (not on this host; log {log_path})")
    started = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as out:
        # Its own session: a terminal's Ctrl-C reaches llmsweep, which stops the pull (below) and says so. Nothing
        # records it for `--resume`: it ends with llmsweep, however llmsweep ends (`_ends_with_parent`).
        proc = subprocess.Popen([*_ends_with_parent(), docker, "pull", image], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            next_note = started + _PULL_PROGRESS_S
            while proc.poll() is None:
                now = time.monotonic()
                if now - started > timeout_s:
                    raise PullFailed(f"`docker pull {image}` did not finish within {timeout_s:.0f} s",
                                      fix="pull it beforehand (`docker pull`), or raise the executor option "
                                      "pull_timeout_s")
                if now >= next_note:
                    done = log_path.read_text(errors="replace").count("Pull complete")
                    event(f"still pulling {image}: {count_of(done, 'layer')} complete after {now - started:.0f} s")
                    next_note = now + _PULL_PROGRESS_S
                time.sleep(0.2)
        except BaseException:
            for sig in (signal.SIGTERM, signal.SIGKILL):  # the CLI cancels its pull on SIGTERM; KILL if it hangs
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10.0)
                    break
            raise
    said = log_path.read_text(errors="replace").strip()
    facts = image_facts(docker, image) if proc.returncode == 0 else None
    if facts is None:
        raise PullFailed(f"`docker pull {image}` failed (exit status {proc.returncode}): {said[-500:]}",
                         fix=pull_failure_fix(said))
    event(f"pulled {image} in {time.monotonic() - started:.0f} s ({facts.image_digest or facts.image_id})")
    return facts


_UNREACHABLE = ("no such host", "dial tcp", "connection refused", "network is unreachable", "i/o timeout",
                "tls handshake timeout", "temporary failure in name resolution", "context deadline exceeded")
"""What `docker pull` says when the registry cannot be reached (not a wrong name, not a private image)."""
_DAEMON_UNREACHABLE = ("docker daemon", "docker.sock", "error during connect")
"""What the docker CLI says when its daemon does not answer (down, another DOCKER_HOST, no permission)."""


_DAEMON_FIX = ("the Docker daemon did not answer: start it (`systemctl start docker`), check DOCKER_HOST, and that "
               "this user may use its socket (the docker group)")


def pull_failure_fix(said: str) -> str:
    """The fix for a failed `docker pull` that said `said`: a daemon that did not answer is the daemon's matter, a
    registry this host cannot reach the network's, anything else the image's name, tag or credentials."""
    lowered = said.lower()
    if any(s in lowered for s in _DAEMON_UNREACHABLE):  # no registry was asked: the daemon itself did not answer
        return _DAEMON_FIX
    if any(s in lowered for s in _UNREACHABLE):
        return ("this host cannot reach the registry: check its network, proxy or registry mirror, or bring the image "
                "in by hand (`docker load` of a saved image)")
    return "check the image's name and tag, and `docker login` to its registry if it is private"


def check_mount_sources(options: DockerOptions) -> None:
    """Refuse a host folder the options mount that this host lacks: `docker run -v` does not refuse it, the daemon
    creates it (an empty folder owned by root), and the engine then finds no model in it, or fills a new root-owned
    Hugging Face cache with downloads. A `-v` source that is no absolute path is a named volume's: docker makes it."""
    named = [("hf_cache", options.hf_cache), ("model_dir", options.model_dir), ("harness_dir", options.harness_dir)]
    named += [("extra_mounts", Path(m.split(":", 1)[0])) for m in options.extra_mounts if m.startswith("/")]
    missing = [(key, path) for key, path in named if path is not None and not path.exists()]
    if missing:
        said = ", ".join(f"{key} {path}" for key, path in missing)
        raise ConfigError(
            f"the docker executor would mount host folders this host does not have: {said} (docker would create "
            "each as an empty folder owned by root, and the engine would find nothing in it)",
            fix=f"correct the executor option ({_OPTION} KEY=PATH) to a folder that exists here, or create "
            "it first (`mkdir -p PATH`)",
        )


DOCKER_REFUSED = 125
"""`docker run`'s exit status when docker itself could not run the container (a flag, a mount, the GPU runtime): the
engine never started."""
_NO_GPU_RUNTIME = "could not select device driver"
"""What the daemon says to `--gpus` when it has no NVIDIA runtime (the NVIDIA Container Toolkit is not installed)."""


def option_mounts(options: DockerOptions) -> list[ImageMount]:
    """The host folders the options mount into every server's container, each with where it sees them (`hf_cache`,
    `model_dir` at their own path, the harness at /llmsweep, an `extra_mounts` item where it says)."""
    return [*(ImageMount.same_path(p) for p in (options.hf_cache, options.model_dir) if p is not None),
            *([ImageMount(options.harness_dir, Path(HARNESS_MOUNT))] if options.harness_dir is not None else []),
            *host_mounts(options.extra_mounts)]


def same_path_mounts(spec: LaunchSpec, options: DockerOptions) -> list[Path]:
    """The host folders `render_docker_run` mounts at their own path: what the container sees as the host does."""
    mounts = [m.source for m in option_mounts(options) if m.source == m.target]
    if spec.files and spec.files_dir:
        mounts.append(Path(spec.files_dir))
    return mounts


def unmounted_host_paths(spec: LaunchSpec, options: DockerOptions) -> list[str]:
    """Absolute paths in the server's command (`--model-path /data/x`, `--flag=/data/x`) and environment that exist on
    this host under no same-path mount: the container sees the image's path there (mostly nothing), not the host's."""
    mounts = same_path_mounts(spec, options)
    words = [w.partition("=")[2] if w.startswith("-") else w for w in spec.argv[1:]] + list(spec.env.values())
    return list(dict.fromkeys(
        w for w in words if w.startswith("/") and os.path.exists(w)
        and not any(Path(w) == m or Path(w).is_relative_to(m) for m in mounts)))


NOT_RUNNABLE = {126: "is not executable", 127: "was not found"}
"""The container's command could not be started (the exit status of docker's init and of `docker run` itself)."""
_EXEC_FAILED = ("exec ", "executable file not found", "no such file or directory", "permission denied")


def docker_exit_fix(returncode: int | None, tail: str, user_flags: str | None = None,
                    unmounted: Sequence[str] = (), *, command: str | None = None, image: str | None = None,
                    ended: str | None = None) -> str | None:
    """The fix for a `docker run` that exited while starting, where docker's side is the cause: docker itself refused
    the container (exit 125: the engine never ran, so its arguments, model and image are not where to look), the
    image has no runnable `command` (126, 127), the daemon says what ended it (`ended`, `container_end`: out of
    memory, a kill from outside), or the engine was given host paths the container does not see (`unmounted`). None
    otherwise."""
    if returncode in NOT_RUNNABLE and command and command in tail and any(s in tail.lower() for s in _EXEC_FAILED):
        return (f"the image's `{command}` {NOT_RUNNABLE[returncode]} (exit status {returncode}: the engine never "
                f"started): use an image that has this engine installed, or correct the engine's command; "
                f"`docker run --rm --entrypoint {command} {image or 'IMAGE'} --help` checks it")
    if ended is not None:
        return f"{ended}: " + (_OOM_FIX if ended.startswith(_OOM) else _SIGKILLED_FIX if ended == _SIGKILLED_UNSAID
                               else _CRASH_FIX if ended.startswith(_CRASHED) else _KILLED_FIX)
    if returncode != DOCKER_REFUSED:
        if unmounted:
            return (f"the container does not see {', '.join(unmounted)}: "
                    f"{noun(len(unmounted), 'a host path', 'host paths')} "
                    "of the server's command under no mount (the engine finds the image's path there, mostly "
                    f"nothing). Mount {noun(len(unmounted), 'it', 'them')} at the same path "
                    f"({_OPTION} model_dir=FOLDER or hf_cache=FOLDER, or "
                    f"{_OPTION} {shell.quote('extra_mounts=[FOLDER:FOLDER:ro]')}), "
                    "and rerun")
        return None
    if any(s in tail.lower() for s in _DAEMON_UNREACHABLE):
        return _DAEMON_FIX
    if _NO_GPU_RUNTIME in tail:
        return ("this host's Docker cannot give containers NVIDIA GPUs (`--gpus`): install the NVIDIA Container "
                "Toolkit, configure it (`nvidia-ctk runtime configure --runtime=docker`) and restart the Docker "
                "daemon; `docker run --rm --gpus all IMAGE nvidia-smi` checks it. A CPU-only server: executor option "
                "gpu_vendor=none")
    return ("docker refused to run the container (exit status 125: docker's error above, before the engine started): "
            "fix what it names among the docker executor's options (mounts, gpu_vendor, shm_size, init"
            + (f", {user_flags}" if user_flags else "") + ") or this host's Docker, and rerun")


_OOM = "the container ran out of memory"
_OOM_FIX = ("raise the container's memory limit (`--memory`/`--memory-swap` in the executor's extra_args) or free the "
            "host's memory, or have the engine use less (a smaller model, batch or context), and rerun")
_EVENTS_LAG_S = 0.5
_SIGKILLED = 137
_SIGKILLED_UNSAID = ("killed by SIGKILL: the kernel's OOM killer (the container's `--memory` limit, or the host's "
                     "memory) or a kill from outside this run (`docker kill`, `docker rm -f`); the daemon's event log "
                     "names neither")
_SIGKILLED_FIX = ("if memory ran out (`dmesg` says \"Memory cgroup out of memory\" or \"Out of memory\"), " + _OOM_FIX
                  + "; otherwise find what kills this run's containers")
_KILLED_FIX = "find what stops this run's containers (another user, a cleanup script, a scheduler), and rerun"
_CRASHED = "the engine crashed"
_CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
                            signal.SIGSYS, signal.SIGTRAP})
"""Signals a process raises against itself when it crashes (a bad memory access, an abort, a failed assertion)."""
_CRASH_FIX = ("read the log tail above for where it crashed (a native library of the image: CUDA or the driver it "
              "does not match, NCCL, a kernel the engine compiled), and rerun")


def ended_by_signal(returncode: int | None) -> str | None:
    """What docker's exit status 128 + N says of a container: its main process was ended by signal N (docker-init
    exits so when the engine under it was; a shell wrapping the engine, too). None for any other status, and for
    137 (SIGKILL: `exit_cause` asks the daemon why)."""
    sig = signal_of_exit(returncode)
    if sig is None or sig == signal.SIGKILL:
        return None
    said = f"{sig.name}, signal {sig.value}: docker's exit status 128 + its number"
    if sig in _CRASH_SIGNALS:
        return f"{_CRASHED} ({said})"
    return f"the engine was ended by a signal this run did not send ({said}; the daemon logged no kill)"


def container_end(docker: str, name: str, since: float, *, timeout_s: float = 10.0) -> str | None:
    """What the daemon's event log says ended container `name` since `since` (unix seconds): the kernel's OOM killer
    (an `oom` event), or a kill this run did not send (a `kill` event: `docker kill`, `docker stop`, `docker rm -f`);
    None when it says neither (the engine exited on its own) or cannot say (the daemon does not answer, or keeps no
    more of its log: it holds its last 256 events, which a busy host passes in seconds). The container's own State
    says an OOM kill however busy the daemon (`DockerServerHandle.exit_cause` asks it first); the log is asked for
    what the State does not say, or once the container is gone. Call it before this run stops the container (its own
    stop sends `kill` events too)."""
    # `--until` as a timestamp, half a second on: `0s` ("now") is cut to the second, which drops the events of the
    # second a container ended in, and the daemon logs an `oom` a moment after the exit the CLI reports.
    until = f"{time.time() + _EVENTS_LAG_S:.9f}"
    argv = [docker, "events", "--since", str(int(since) - 1), "--until", until, "--filter", f"container={name}",
            "--format", '{{.Action}} {{index .Actor.Attributes "signal"}}']
    try:
        proc = run_command(argv, timeout_s=timeout_s, check=False, new_session=True, fix=_DAEMON_FIX)
    except LaunchError:
        return None
    if proc.returncode != 0:
        return None
    events = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    if any(e[0] == "oom" for e in events):
        return f"{_OOM}: the kernel's OOM killer ended it (the daemon's `oom` event)"
    signals = [e[1] for e in events if e[0] == "kill" and len(e) > 1]
    if signals:
        return (f"something outside this run stopped the container (the daemon's `kill` event, signal "
                f"{', '.join(dict.fromkeys(signals))}: `docker kill`, `docker stop` or `docker rm -f`)")
    return None


_ENDED = ("exited", "dead", "removing")
_NO_SUCH = "(no such container)"
_CLI_EXIT_WAIT_S = 2.0
_INSPECT_TIMEOUT_S = 5.0


def inspect_state(docker: str, name: str) -> dict[str, Any] | str | None:
    """The daemon's `State` of container `name` (`Status`, `OOMKilled`, `ExitCode`…), `_NO_SUCH` once gone (or not
    created yet), None when the daemon did not say."""
    argv = [docker, "container", "inspect", "--format", "{{json .State}}", name]
    try:
        proc = run_command(argv, timeout_s=_INSPECT_TIMEOUT_S, check=False, new_session=True, fix=_DAEMON_FIX)
    except LaunchError:
        return None
    if proc.returncode == 0:
        with contextlib.suppress(ValueError):
            state = json.loads(proc.stdout)
            return state if isinstance(state, dict) else None
        return None
    return _NO_SUCH if "no such" in (proc.stderr + proc.stdout).lower() else None


def await_creation(docker: str, name: str, creating: Callable[[], bool], timeout_s: float) -> bool:
    """While `creating()` (its `docker run` CLI lives) and the daemon has no container `name`, wait: the CLI may be
    creating it, and the daemon finishes a create whose CLI is killed, so a container removed (`docker rm -f`: "no
    such container") before it exists is left behind once it does. True once the daemon has it or the CLI has exited
    (it creates nothing more); False when `timeout_s` passed, or a second signal hurried the teardown, first (the CLI
    may create it yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if isinstance(inspect_state(docker, name), dict) or not creating():
            return True
        if time.monotonic() >= deadline or hurried():
            return False
        time.sleep(0.1)


_SCRIPT_FIRST_LINE = 'exe=$(command -v "$1") && IFS= read -r line < "$exe" && printf "%s\\n" "$line"'
"""`sh -c` in the container: the first line of the command `$1` names on the container's PATH (a console script's
`#!` line), with the shell's builtins only (an engine image may lack `head`)."""


def container_engine_version(docker: str, name: str, spec: LaunchSpec) -> str | None:
    """The version of `spec.engine` the interpreter of its launch has installed in running container `name`, read
    there as the local executor reads the host's (`host_engine.PROBE`: the distribution's version, else the module's
    `__version__`) with `docker exec`, under the container's environment; None when it cannot be read (the container
    has no `sh` to find a console script's interpreter, or the probe fails)."""
    from llmsweep.engine_ids import ENGINE_IDS
    from llmsweep.execute.host_engine import PROBE, TIMEOUT_S, shebang_interpreter

    identity = ENGINE_IDS.get(spec.engine)
    if identity is None or identity.package is None or not spec.argv:
        return None

    def exec_in(*argv: str) -> str | None:
        try:
            proc = run_command([docker, "exec", name, *argv], timeout_s=TIMEOUT_S, check=False, new_session=True,
                               fix=_DAEMON_FIX)
        except LaunchError as exc:
            log.info("cannot read the %s version in container %s: %s", spec.engine, name, exc.message)
            return None
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            log.info("cannot read the %s version in container %s: `%s` exited %s: %s", spec.engine, name,
                     shell.join(argv[:3]), proc.returncode, proc.stderr.strip()[-300:])
            return None
        return lines[-1].strip() or None

    python: str | None = spec.argv[0]
    if spec.argv[1:2] != ("-m",):  # a console script (`vllm serve`): the interpreter its `#!` line names
        first = exec_in("sh", "-c", _SCRIPT_FIRST_LINE, "sh", spec.argv[0])
        named = shebang_interpreter(first) if first is not None else None
        python = named[0] if named is not None else None  # (a bare name: `docker exec` finds it on the PATH)
    return exec_in(python, "-c", PROBE, identity.package) if python else None


class DockerServerHandle(ProcessServerHandle):
    """A `docker run` CLI's handle that asks the daemon whether its container still runs (`is_alive`) and why it
    ended (`exit_cause`). The container outlives its exit (no `--rm`) until `stop` removes it, so its State can say
    why it ended."""

    def __init__(self, *args: Any, docker: str, name: str, started_unix: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._docker, self._name, self._started_unix = docker, name, started_unix
        self._cause: tuple[str | None] | None = None
        self._stopping = False
        self._seen_running = False
        self._ended = False
        """The daemon said the container ended (its CLI may not have exited yet)."""

    def stop(self, grace_s: float = 10.0) -> int | None:
        self._stopping = True
        return super().stop(grace_s)

    def is_alive(self) -> bool:
        """The attached CLI runs and the daemon does not say its container ended. The CLI outlives a container killed
        from outside (`docker kill`, `docker rm -f`, the OOM killer) by a moment (~0.1 s here, more on a busy host):
        long enough for a job whose load stopped on that death to be judged against a live server, and for the next
        job to be sent to it. A container the daemon says ended is dead; its CLI is given a moment to exit, so its
        exit status is known."""
        if not super().is_alive():
            return False
        if self._stopping:
            return True
        state = self._container_state()
        if state == "running":
            self._seen_running = True
        elif state in _ENDED or (state == _NO_SUCH and self._seen_running):
            self._ended = True
            deadline = time.monotonic() + _CLI_EXIT_WAIT_S
            while super().is_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            return False
        return True  # being created, or the daemon did not say: the CLI's life decides

    def installed_engine_version(self) -> str | None:
        """The engine version the container's interpreter has installed (`container_engine_version`), for a server
        that reports none: what ran, read where it ran, never the version the launch declares."""
        return container_engine_version(self._docker, self._name, self.spec)

    def await_creation(self, timeout_s: float) -> bool:
        """`await_creation` of its container while its attached `docker run` lives (one seen running was created)."""
        return self._seen_running or await_creation(self._docker, self._name, self.process.is_alive, timeout_s)

    def _container_state(self) -> str | None:
        """The daemon's `State.Status` of the container, `_NO_SUCH` once gone, None when the daemon did not say."""
        state = self._inspect_state()
        return str(state.get("Status")) if isinstance(state, dict) else state

    def _inspect_state(self) -> dict[str, Any] | str | None:
        return inspect_state(self._docker, self._name)

    def _oom_killed(self) -> str | None:
        """`_OOM` when the container's own State says the kernel's OOM killer ended it, else None. The daemon sets
        the flag on the kernel's OOM notice, which may reach it a moment after the exit: an exit 137 without it is
        asked once more, `_EVENTS_LAG_S` later, and so is a daemon too busy to answer within `_INSPECT_TIMEOUT_S`."""
        for again in (False, True):
            state = self._inspect_state()
            if state is None and not again:  # the daemon did not say (busy: its answer timed out): asked once more
                time.sleep(_EVENTS_LAG_S)
                continue
            if not isinstance(state, dict):
                return None  # gone (removed from outside), or the daemon did not say twice
            if state.get("OOMKilled") is True:
                return f"{_OOM}: the kernel's OOM killer ended it (the container's State.OOMKilled)"
            if again or state.get("Running") or state.get("ExitCode") != _SIGKILLED:
                return None
            time.sleep(_EVENTS_LAG_S)
        return None

    def exit_cause(self) -> str | None:
        """Why the container ended, once it has: its own State's OOM kill, else what the daemon's event log says
        (`container_end`), else the signal its exit status names (`ended_by_signal`: a crash); asked once."""
        if (self.returncode is None and not self._ended) or (self._stopping and self._cause is None):
            return None  # alive, or stopped by this run (whose own `docker stop` the events would show)
        if self._cause is None:
            cause = self._oom_killed() or container_end(self._docker, self._name, self._started_unix)
            if cause is None and self.returncode == _SIGKILLED:
                cause = _SIGKILLED_UNSAID  # (removed from outside, and the daemon's log no longer holds its events)
            elif cause is None:
                cause = ended_by_signal(self.returncode)  # a crash (SIGSEGV, SIGABRT…), or a kill inside the container
            self._cause = (cause,)
        return self._cause[0]


class DockerLauncher:
    """Runs the server with `docker run` attached, so the CLI's output is the server's log and its life the server's."""

    kind = "docker"

    def __init__(self, options: DockerOptions | None = None) -> None:
        self.options = options or DockerOptions()
        self._failed_pulls: dict[str, PullFailed] = {}
        """Images whose pull failed in this run: every later group of the image fails with that error at once,
        rather than waiting out another pull (up to `pull_timeout_s` each, where the registry does not answer)."""

    def render(self, spec: LaunchSpec, name: str | None = None, environ: Mapping[str, str] | None = None,
               labels: Mapping[str, str] | None = None) -> list[str]:
        return render_docker_run(spec, self.options, name or container_name(spec, self.options.name_prefix),
                                 environ, labels)

    def prepare(self, spec: LaunchSpec, *, log_dir: Path, event: Callable[[str], None]) -> ServedIn:
        """The image, pulled here when this host lacks it; its id and digest for the provenance (what the tag named
        when the server started: a tag such as `:latest` moves)."""
        if not spec.image:
            return ON_HOST  # (`launch` refuses it: docker runs nothing without an image)
        check_docker_spelling(spec.image)
        failed = self._failed_pulls.get(spec.image)
        if failed is not None:
            raise PullFailed(f"{failed.message} (an earlier server of this run; not pulled again)", fix=failed.fix)
        try:
            return ensure_image(self.options.docker, spec.image, log_path=log_dir / PULL_LOG, event=event,
                                timeout_s=self.options.pull_timeout_s)
        except PullFailed as exc:
            self._failed_pulls[spec.image] = exc
            raise

    def launch(
        self, spec: LaunchSpec, *, log_path: Path, environ: Mapping[str, str] | None = None
    ) -> ProcessServerHandle:
        name = container_name(spec, self.options.name_prefix)
        argv = self.render(spec, name, environ, container_labels(log_path))
        env, scrubber = server_environment(spec, environ)
        started_unix = time.time()
        process = start_process(argv, log_path=log_path, env=env, scrubber=scrubber)

        def stop_container(grace_s: float) -> None:
            # Killing the attached CLI does not stop the container: ask the daemon, then make sure it is gone. Both
            # calls run in their own session, so a terminal's second Ctrl-C cannot cut them short.
            # `-t`: spelled `--time` by older CLIs and `--timeout` by newer ones, which warn on `--time`.
            stop = [self.options.docker, "stop", "-t", str(int(grace_s)), name]

            def stop_it() -> str:
                try:
                    proc = run_command(stop, timeout_s=grace_s + self.options.stop_timeout_s, check=False,
                                       new_session=True,
                                       fix="check the docker daemon; remove the container by hand with `docker rm -f`")
                except LaunchError as exc:  # a `docker stop` that hung: the removal below still kills the container
                    log.warning("%s; removing container %s with `docker rm -f`", exc.message, name)
                    return ""
                return (proc.stderr + proc.stdout).lower() if proc.returncode else ""

            if "no such container" in stop_it():
                # `docker run` may be creating it still (a large image on vfs storage, a busy daemon): the daemon
                # finishes a create whose CLI is killed, and that container would be left behind, named by nothing
                if not handle.await_creation(self.options.stop_timeout_s):
                    raise LaunchError(
                        f"container {name} was still being created when its server was stopped",
                        fix=f"`llmsweep run {_RESUME}` removes it (`docker rm -f {name}`), or run that by hand")
                stop_it()
            remove_container([self.options.docker, "rm", "-f", name], timeout_s=self.options.stop_timeout_s)

        user_flags = flags_named("the docker executor's extra_args", self.options.extra_args)
        handle: DockerServerHandle

        def exit_fix(returncode: int | None, tail: str) -> str | None:
            return docker_exit_fix(returncode, tail, user_flags, unmounted_host_paths(spec, self.options),
                                   command=spec.argv[0], image=spec.image, ended=handle.exit_cause())

        handle = DockerServerHandle(spec, process, scrubber=scrubber, command=argv, before_stop=stop_container,
                                    cleanup=(self.options.docker, "rm", "-f", name), user_flags=user_flags,
                                    exit_fix=exit_fix, docker=self.options.docker, name=name,
                                    started_unix=started_unix)
        # `--gpus "device=2,0"` mounts GPUs 0 and 2, which CUDA in the container numbers in bus order (the order is
        # PCI_BUS_ID there, or the host's, checked at preflight): the server's device 0 is GPU 0, not 2
        handle.gpus_in_bus_order = spec.gpus > 0 and self.options.gpu_vendor == "nvidia"
        return handle


@register_executor
class DockerExecutor:
    """Servers run in their engine images with `docker run` on this machine; the lifecycle runs in this process."""

    kind: ClassVar[str] = "docker"
    summary: ClassVar[str] = "Docker on this machine"
    options_model: ClassVar[type[BaseModel]] = DockerOptions
    lifecycle_here: ClassVar[bool] = True

    def __init__(self, options: Mapping[str, Any] | DockerOptions | None = None) -> None:
        validated = validate_options(self.kind, DockerOptions, options)
        check_docker_cli(validated)
        check_mount_sources(validated)
        self.launcher = DockerLauncher(validated)

    def image_mounts(self) -> tuple[ImageMount, ...] | None:
        return tuple(option_mounts(self.launcher.options))

    def run_groups(self, groups: Sequence[ServerGroup], run_dir: Path, settings: LifecycleSettings, *,
                   event: Event) -> list[JobOutcome]:
        return run_groups_here(self.launcher, groups, run_dir, settings, event)
