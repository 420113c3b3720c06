"""The two things an executor supplies: how to launch a server, and where the job lifecycle runs.

`local` and `docker` run the lifecycle in this process and launch through a :class:`ServerLauncher`; `slurm` submits
a batch job whose body runs the lifecycle on the allocated node (see :mod:`llmsweep.execute.slurm`), where a node
launcher (plain srun or pyxis container) starts the server. The lifecycle itself is executor-agnostic.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Protocol, runtime_checkable

from pydantic import AfterValidator

from llmsweep.engines.launch import LaunchSpec, is_secret_name
from llmsweep.execute.handle import ServerHandle
from llmsweep.execute.secrets import SecretScrubber, collect_secrets

# Undeclared secret-looking values shorter than this are not scrubbed: masking "1" would mangle every log line.
_MIN_IMPLICIT_SECRET_LEN = 6


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path.expanduser()))


HARNESS_MOUNT = "/llmsweep"
"""Where a container (docker, pyxis) sees an llmsweep checkout an executor option mounts (`harness_dir`)."""

HostPath = Annotated[Path, AfterValidator(_absolute)]
"""A host folder an executor option names (a cache, a model folder, a mount): `~` expanded and made absolute where
the option is read (symlinks kept: a node may reach the folder by the same link). A bind mount or pyxis mount of a
relative path is no mount of that folder (docker takes `models:models` for a named volume's, and refuses it), and a
server or batch job starting elsewhere would not find it."""


def same_path_sources(mounts: Iterable[str]) -> list[Path]:
    """The host folders of mount specs `SOURCE:TARGET[:FLAGS]` (docker's `-v`, pyxis's `--container-mounts`) that a
    container sees at their own path: what it reads there is what this host holds. A named volume's (a source that is
    no absolute path) or one mounted elsewhere is none."""
    out = []
    for mount in mounts:
        source, _, rest = mount.partition(":")
        if source.startswith("/") and rest.partition(":")[0].rstrip("/") == source.rstrip("/"):
            out.append(Path(source))
    return out


@dataclass(frozen=True)
class ServedIn:
    """Where a launcher runs the server, for the provenance's `launch` block: the image (None: on the host, as the
    local executor runs even a job that names one), and what the container daemon reads back about it."""

    image: str | None
    image_id: str | None = None
    """The daemon's id of the local image `image` named when the server started."""
    image_digest: str | None = None
    """Its registry digest (sha256:...), when it came from a registry."""


ON_HOST = ServedIn(image=None)


@runtime_checkable
class ServerLauncher(Protocol):
    """Starts the server of a LaunchSpec (already preflighted: port resolved) and returns its handle at once."""

    kind: str

    def render(self, spec: LaunchSpec) -> list[str]:
        """The exact command line `launch` runs; secret values never appear in it (safe to write down)."""
        ...

    def prepare(self, spec: LaunchSpec, *, log_dir: Path, event: Callable[[str], None]) -> ServedIn:
        """What must happen before the server starts and its start-up clock runs (docker: pull an image this host
        lacks, saying so), interruptible; returns where the server will run."""
        ...

    def launch(self, spec: LaunchSpec, *, log_path: Path, environ: Mapping[str, str] | None = None) -> ServerHandle:
        ...


def server_environment(
    spec: LaunchSpec, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, str], SecretScrubber]:
    """The environment a server process gets (caller's env + spec env) and the scrubber for its secrets.

    Secrets come from the caller's environment by name, as the LaunchSpec promises; their values are in the returned
    env (the process needs them) and in the scrubber (so nothing written shows them). Undeclared variables that look
    secret (`*_TOKEN`, `*_KEY`, `*_SECRET`) are inherited too, so their values are scrubbed as well.
    """
    base = dict(os.environ if environ is None else environ)
    declared = collect_secrets(spec.secret_env, base)
    env = {**base, **spec.env}
    implicit = [v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_IMPLICIT_SECRET_LEN]
    return env, SecretScrubber([*declared.values(), *implicit])
