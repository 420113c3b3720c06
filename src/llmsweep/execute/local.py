"""Local executor: the server runs on this host as a managed process tree; the lifecycle runs in this process."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError
from llmsweep.execute.base import ON_HOST, HostPath, ImageMount, ServedIn, server_environment
from llmsweep.execute.executor import Event, register_executor, run_groups_here, validate_options
from llmsweep.execute.handle import ProcessServerHandle
from llmsweep.execute.process import start_process
from llmsweep.option_spellings import flag as _flag

_OPTION = _flag("executor_option")
"""`--executor-option`, as this module's fixes name it: read from its one home, `option_spellings`."""

if TYPE_CHECKING:
    from llmsweep.execute.lifecycle import JobOutcome, LifecycleSettings, ServerGroup


class LocalOptions(BaseModel):
    """Options of the local executor."""

    model_config = ConfigDict(extra="forbid")

    cwd: HostPath | None = Field(default=None, description="Working directory of the server (default: the caller's).")
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
                fix="run image jobs with the docker executor, or slurm with srun on the node (its default, pyxis); "
                f"under the local executor, `{_OPTION} allow_image=true` runs the engine installed on this "
                "host",
            )
        return list(spec.argv)

    def prepare(self, spec: LaunchSpec, *, log_dir: Path, event: Callable[[str], None]) -> ServedIn:
        return ON_HOST  # whatever image the job names (`allow_image`)

    def launch(
        self, spec: LaunchSpec, *, log_path: Path, environ: Mapping[str, str] | None = None
    ) -> ProcessServerHandle:
        argv = self.render(spec)
        env, scrubber = server_environment(spec, environ)
        process = start_process(argv, log_path=log_path, env=env, scrubber=scrubber, cwd=self.options.cwd)
        return ProcessServerHandle(spec, process, scrubber=scrubber, command=argv)


@register_executor
class LocalExecutor:
    """Servers run on this machine, one group after the other; the lifecycle runs in this process."""

    kind: ClassVar[str] = "local"
    summary: ClassVar[str] = "this machine"
    options_model: ClassVar[type[BaseModel]] = LocalOptions
    lifecycle_here: ClassVar[bool] = True

    def __init__(self, options: Mapping[str, Any] | LocalOptions | None = None) -> None:
        self.launcher = LocalLauncher(validate_options(self.kind, LocalOptions, options))

    def image_mounts(self) -> tuple[ImageMount, ...] | None:
        return None  # the host's engine serves every job, reading this host's files

    def run_groups(self, groups: Sequence[ServerGroup], run_dir: Path, settings: LifecycleSettings, *,
                   event: Event) -> list[JobOutcome]:
        return run_groups_here(self.launcher, groups, run_dir, settings, event)
