"""Local executor: the server runs on this host as a managed process tree; the lifecycle runs in this process."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError
from llmsweep.execute.base import server_environment
from llmsweep.execute.handle import ProcessServerHandle
from llmsweep.execute.process import start_process


class LocalOptions(BaseModel):
    """Options of the local executor."""

    model_config = ConfigDict(extra="forbid")

    cwd: Path | None = Field(default=None, description="Working directory of the server (default: the caller's).")
    allow_image: bool = Field(
        default=False,
        description="Run the argv on the host even when the spec names a container image (the engine is installed "
        "here). Off by default so a job never silently runs outside the image it claims.",
    )


class LocalLauncher:
    """Starts the spec's argv on this host."""

    kind = "local"

    def __init__(self, options: LocalOptions | None = None) -> None:
        self.options = options or LocalOptions()

    def render(self, spec: LaunchSpec) -> list[str]:
        if spec.image and not self.options.allow_image:
            raise ConfigError(
                f"the {spec.engine} job names image {spec.image!r} but the local executor runs on the host",
                fix="use the docker or slurm executor for image jobs, or set allow_image: true when the engine is "
                "installed on this host",
            )
        return list(spec.argv)

    def launch(
        self, spec: LaunchSpec, *, log_path: Path, environ: Mapping[str, str] | None = None
    ) -> ProcessServerHandle:
        argv = self.render(spec)
        env, scrubber = server_environment(spec, environ)
        process = start_process(argv, log_path=log_path, env=env, scrubber=scrubber, cwd=self.options.cwd)
        return ProcessServerHandle(spec, process, scrubber=scrubber, command=argv)
