"""Launching a server inside a Slurm allocation: a job step (`srun`), in the engine image through pyxis/enroot.

The batch script runs the lifecycle on the node in the harness's own Python (Python ≥ 3.11, never the engine image's);
only the server runs in the container. Images are converted once to squash files under a shared cache directory;
the import is guarded by `flock` (concurrent jobs on the same image wait rather than corrupt each other's file) and
skipped when `unsquashfs -l` validates an existing file (a crashed import leaves a truncated file behind).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError
from llmsweep.execute.base import (
    HARNESS_MOUNT,
    HostPath,
    ImageMount,
    ServedIn,
    ServerLauncher,
    host_mounts,
    server_environment,
)
from llmsweep.execute.commands import run_command
from llmsweep.execute.handle import ProcessServerHandle, flags_named
from llmsweep.execute.local import LocalLauncher, LocalOptions
from llmsweep.execute.process import start_process

NODE_LAUNCHER_ENV = "LLMSWEEP_NODE_LAUNCHER"
_SQSH_UNSAFE = re.compile(r"[/:@#]")


def enroot_uri(image: str) -> str:
    """`docker://` URI enroot understands: `registry#path:tag` (the `#` form pyxis uses); Docker Hub images as-is.

    Accepts both spellings (`nvcr.io/nvidia/x:1` and `nvcr.io#nvidia/x:1`) so the same image maps to one squash file.
    """
    image = image.removeprefix("docker://")
    if "#" in image:
        return f"docker://{image}"
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"docker://{first}#{rest}"
    return f"docker://{image}"


def squash_path(image: str, cache_dir: Path) -> Path:
    """Squash file of `image` in `cache_dir`: the same name whichever spelling was used (`nvcr.io/x` or `nvcr.io#x`):
    the reference with `/ : @ #` as `+`, then a digest of its enroot URI — two references that differ only in those
    characters (`reg.io:5000/a:b`, a registry's port, and `reg.io/5000/a:b`, a repository path) are two images, and
    one name for both would run the first one imported under the other's label."""
    uri = enroot_uri(image)
    canonical = uri.removeprefix("docker://").replace("#", "/")
    digest = hashlib.sha256(uri.encode()).hexdigest()[:10]
    return cache_dir / f"{_SQSH_UNSAFE.sub('+', canonical)}-{digest}.sqsh"


def import_image_script(image: str, sqsh: Path, *, lock_timeout_s: int = 600, import_timeout_s: int = 3600) -> str:
    """Bash that makes `sqsh` a valid squash file of `image`: lock, validate or import (to a temp name), validate."""
    uri, target = shlex.quote(enroot_uri(image)), shlex.quote(str(sqsh))
    return f"""\
llmsweep_import_image() {{
  local uri=$1 sqsh=$2 lock_fd tmp
  mkdir -p "$(dirname "$sqsh")"
  exec {{lock_fd}}>"$sqsh.lock"
  if ! flock -w {lock_timeout_s} "$lock_fd"; then
    echo "llmsweep: waited {lock_timeout_s} s for $sqsh.lock (another job is importing $uri); rerun later" >&2
    return 75
  fi
  if [ -s "$sqsh" ] && unsquashfs -l "$sqsh" >/dev/null 2>&1; then
    echo "llmsweep: reusing valid squash file $sqsh"
  else
    [ -e "$sqsh" ] && echo "llmsweep: $sqsh is not a valid squash file; importing again" >&2
    rm -f "$sqsh"
    tmp="$sqsh.partial.$$"
    rm -f "$tmp"
    if ! timeout {import_timeout_s} enroot import -o "$tmp" "$uri"; then
      rm -f "$tmp"
      echo "llmsweep: enroot import of $uri failed or took over {import_timeout_s} s" >&2
      return 1
    fi
    if ! unsquashfs -l "$tmp" >/dev/null 2>&1; then
      rm -f "$tmp"
      echo "llmsweep: enroot import of $uri produced an invalid squash file" >&2
      return 1
    fi
    mv -f "$tmp" "$sqsh"
    echo "llmsweep: imported $uri to $sqsh"
  fi
  flock -u "$lock_fd"
  exec {{lock_fd}}>&-
}}
llmsweep_import_image {uri} {target}
"""


class SrunOptions(BaseModel):
    """How the node starts the server as a job step; container flags apply when the spec has an image."""

    model_config = ConfigDict(extra="forbid")

    use_srun: bool = Field(
        default=True,
        description="Start the server as an `srun` step (Slurm tracks and kills it with the job). False: plain "
        "process on the node (image-less servers only).",
    )
    srun: str = Field(default="srun", description="The srun binary.")
    hf_cache: HostPath | None = Field(default=None, description="Hugging Face cache mounted at the same path.")
    model_dir: HostPath | None = Field(default=None, description="Model directory mounted at the same path.")
    harness_dir: HostPath | None = Field(default=None, description=f"llmsweep checkout mounted at {HARNESS_MOUNT}.")
    extra_mounts: tuple[str, ...] = Field(default=(), description="More pyxis mounts, 'src:dst[:flags]'.")
    container_workdir: str = Field(default=HARNESS_MOUNT, description="--container-workdir inside the image.")
    container_writable: bool = Field(default=True, description="--container-writable (engines write caches).")
    container_mount_home: bool = Field(default=False, description="Mount $HOME (off: the image's home is used).")
    container_remap_root: bool = Field(default=False, description="--container-remap-root.")
    extra_args: tuple[str, ...] = Field(default=(), description="More srun flags, placed before the command.")


class NodeLaunch(BaseModel):
    """What the batch job's worker needs to start the server on its node; written beside the batch script."""

    model_config = ConfigDict(extra="forbid")

    srun: SrunOptions = Field(default_factory=SrunOptions)
    sqsh: Path | None = Field(default=None, description="Squash file of the spec's image (None: no container).")
    out_dir: Path | None = Field(default=None, description="Run output directory, mounted at the same path.")


def option_mounts(opts: SrunOptions) -> list[ImageMount]:
    """The host folders the options mount into every server's container, each with where it sees them (`hf_cache`,
    `model_dir` and, with `container_mount_home`, the home folder at their own path, the harness at /llmsweep, an
    `extra_mounts` item where it says, after the others as `_mount_list` gives them; the run's folder is mounted too,
    `NodeLaunch.out_dir`)."""
    return [*([ImageMount(opts.harness_dir, Path(HARNESS_MOUNT))] if opts.harness_dir is not None else []),
            *(ImageMount.same_path(p) for p in (opts.hf_cache, opts.model_dir) if p is not None),
            *host_mounts(opts.extra_mounts),
            *([ImageMount.same_path(Path.home())] if opts.container_mount_home else [])]


def _mount_list(launch: NodeLaunch) -> list[str]:
    opts = launch.srun
    mounts = []
    if opts.harness_dir is not None:
        mounts.append(f"{opts.harness_dir}:{HARNESS_MOUNT}")
    for path in (opts.hf_cache, opts.model_dir, launch.out_dir):
        if path is not None:
            mounts.append(f"{path}:{path}")
    mounts += list(opts.extra_mounts)
    for mount in mounts:
        if "," in mount or any(c.isspace() for c in mount):
            raise ConfigError(
                f"container mount {mount!r} contains a comma or whitespace, which pyxis cannot pass",
                fix="move the directory to a path without commas or spaces",
            )
    return mounts


def render_srun(spec: LaunchSpec, launch: NodeLaunch, step_name: str = "llmsweep-server",
                node: str | None = None) -> list[str]:
    """The `srun` step argv. Env (spec env and secrets) travels by `--export=ALL` from the step's environment, so
    values with commas survive and secret values never appear on the command line. `node`: the allocation's node
    the step runs on (a role of a multi-node job); None: Slurm's choice (the first node)."""
    opts = launch.srun
    argv = [opts.srun, "--overlap", "--ntasks=1", "--export=ALL", f"--job-name={step_name}"]
    if node is not None:
        argv += ["--nodes=1", f"--nodelist={node}"]
    if spec.gpus > 0:
        argv.append(f"--gres=gpu:{spec.gpus}")
    if spec.image:
        if launch.sqsh is None:
            raise ConfigError(
                f"the {spec.engine} job needs image {spec.image!r} but no squash file was prepared",
                fix="set squash_dir in the slurm executor options so the batch job imports the image",
            )
        argv += [f"--container-image={launch.sqsh}"]
        mounts = _mount_list(launch)
        if mounts:
            argv.append(f"--container-mounts={','.join(mounts)}")
        argv += [f"--container-workdir={opts.container_workdir}", "--no-container-entrypoint"]
        argv.append("--container-mount-home" if opts.container_mount_home else "--no-container-mount-home")
        if opts.container_writable:
            argv.append("--container-writable")
        if opts.container_remap_root:
            argv.append("--container-remap-root")
    argv += list(opts.extra_args)
    argv += list(spec.argv)
    return argv


class SrunLauncher:
    """Starts the server as a job step of the current allocation (must run inside one: `SLURM_JOB_ID` set)."""

    kind = "srun"

    def __init__(self, launch: NodeLaunch) -> None:
        self.launch_options = launch

    def render(self, spec: LaunchSpec, step_name: str | None = None, node: str | None = None) -> list[str]:
        return render_srun(spec, self.launch_options, step_name or f"llmsweep-{spec.engine}-server", node)

    def prepare(self, spec: LaunchSpec, *, log_dir: Path, event: Callable[[str], None]) -> ServedIn:
        # An image's squash file is imported by the batch script, under its lock, before the lifecycle; the step runs
        # in it (`render_srun` refuses an image without one).
        return ServedIn(image=spec.image)

    def launch(
        self, spec: LaunchSpec, *, log_path: Path, environ: Mapping[str, str] | None = None, node: str | None = None,
        step_label: str | None = None,
    ) -> ProcessServerHandle:
        """Start `spec` as a step (on `node` of the allocation when given; `step_label` names a role's step)."""
        step_name = f"llmsweep-{step_label or spec.engine}-{uuid.uuid4().hex[:8]}"
        argv = self.render(spec, step_name, node)
        env, scrubber = server_environment(spec, environ)
        job_id = env.get("SLURM_JOB_ID")
        if not job_id:
            raise ConfigError(
                "the srun launcher runs only inside a Slurm allocation (SLURM_JOB_ID is not set)",
                fix="launch through the slurm executor, or use the local launcher outside Slurm",
            )
        process = start_process(argv, log_path=log_path, env=env, scrubber=scrubber)

        def terminate_step(grace_s: float) -> None:
            # A signal to srun makes it SIGKILL the step at once; engines deserve a SIGTERM and a grace period first.
            if process.is_alive() and signal_steps_named(job_id, step_name, "TERM"):
                deadline = time.monotonic() + grace_s
                while process.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.1)

        def cancel_leftover_step() -> None:
            # If srun itself had to be SIGKILLed, the step may outlive it.
            signal_steps_named(job_id, step_name, None)

        return ProcessServerHandle(
            spec, process, scrubber=scrubber, command=argv, job_id=job_id,
            before_stop=terminate_step, after_stop=cancel_leftover_step,
            user_flags=flags_named("the slurm executor's node.extra_args", self.launch_options.srun.extra_args),
        )


def scontrol_show(*what: str, timeout_s: float, fix: str, check: bool = False) -> dict[str, str]:
    """`scontrol show WHAT -o` (a job, a partition, a node) as its `Key=Value` fields; empty when scontrol fails and
    `check` is off (with `check`, its failure raises, naming the command and `fix`)."""
    proc = run_command(["scontrol", "show", *what, "-o"], timeout_s=timeout_s, check=check, fix=fix)
    if proc.returncode != 0:
        return {}
    return dict(tok.split("=", 1) for tok in proc.stdout.split() if "=" in tok)


def signal_steps_named(job_id: str, step_name: str, signal_name: str | None, timeout_s: float = 30.0) -> list[str]:
    """Send `signal_name` (None: cancel) to every step of `job_id` called `step_name`; return their step ids."""
    fix = "check that slurmctld answers (`sinfo`)"
    out = run_command(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"], timeout_s=timeout_s, check=False, fix=fix)
    steps = [line.split()[0] for line in out.stdout.splitlines() if line.split()[1:] == [step_name]]
    for step in steps:
        argv = ["scancel", step] if signal_name is None else ["scancel", f"--signal={signal_name}", step]
        run_command(argv, timeout_s=timeout_s, check=False, fix=fix)
    return steps


def write_node_launch(launch: NodeLaunch, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(launch.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    return path


def node_launcher_from_env(environ: Mapping[str, str] | None = None) -> ServerLauncher:
    """The launcher a batch job's worker should use: from the file `LLMSWEEP_NODE_LAUNCHER` names, else local.

    The lead's worker entry point calls this on the node, so the submitting side decides how servers start there.
    """
    env = os.environ if environ is None else environ
    path = env.get(NODE_LAUNCHER_ENV)
    if not path:
        return LocalLauncher()
    try:
        launch = NodeLaunch.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the node launch file {path} named by {NODE_LAUNCHER_ENV}: {exc}",
            fix="the out directory must be on a filesystem the node shares with the submitting host",
        ) from exc
    if launch.srun.use_srun:
        return SrunLauncher(launch)
    return LocalLauncher(LocalOptions(cwd=launch.out_dir))
