"""Executors: start a LaunchSpec's server locally, in Docker or under Slurm, know when it is ready, tear it down.

An executor supplies two things to the executor-agnostic lifecycle (`execute/lifecycle.py`):

- how to launch the server: a :class:`~llmsweep.execute.base.ServerLauncher` (`local`, `docker`, and on a Slurm node
  `srun`/pyxis) returning a :class:`~llmsweep.execute.handle.ServerHandle`;
- where the lifecycle runs: here (`local`, `docker`) or on an allocated node (`slurm`, which submits a batch job
  running the worker command; the worker picks its launcher with `node_launcher_from_env()`).

Submodules import nothing heavy; import them directly (`from llmsweep.execute.local import LocalLauncher`).
"""

from __future__ import annotations

from typing import Any

LOCAL_KINDS = ("local", "docker")
EXECUTOR_KINDS = ("local", "docker", "slurm")


def make_launcher(kind: str, options: dict[str, Any] | None = None) -> Any:
    """The launcher for an in-process executor kind, its options validated (`extra="forbid"`)."""
    from pydantic import ValidationError

    from llmsweep.errors import ConfigError

    try:
        if kind == "local":
            from llmsweep.execute.local import LocalLauncher, LocalOptions

            return LocalLauncher(LocalOptions.model_validate(options or {}))
        if kind == "docker":
            from llmsweep.execute.docker import DockerLauncher, DockerOptions

            return DockerLauncher(DockerOptions.model_validate(options or {}))
    except ValidationError as exc:
        raise ConfigError(
            f"invalid {kind} executor options: {exc}", fix="fix or remove the fields named above"
        ) from exc
    if kind == "slurm":
        raise ConfigError(
            "the slurm executor does not launch servers here; it submits batch jobs (SlurmExecutor.submit)",
            fix="use llmsweep.execute.slurm.SlurmExecutor for kind 'slurm'",
        )
    raise ConfigError(f"unknown executor kind {kind!r}", fix=f"use one of {', '.join(EXECUTOR_KINDS)}")
