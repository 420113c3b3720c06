"""The two things an executor supplies: how to launch a server, and where the job lifecycle runs.

`local` and `docker` run the lifecycle in this process and launch through a :class:`ServerLauncher`; `slurm` submits
a batch job whose body runs the lifecycle on the allocated node (see :mod:`llmsweep.execute.slurm`), where a node
launcher (plain srun or pyxis container) starts the server. The lifecycle itself is executor-agnostic.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
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


@dataclass(frozen=True)
class ImageMount:
    """A host folder a server in its job's image sees: `source` on this host, at `target` in the container — its own
    path (`hf_cache`, `model_dir`) or another (`-v /host/patches:/opt/patches`). Both absolute, `..` resolved."""

    source: Path
    target: Path

    @classmethod
    def same_path(cls, folder: Path) -> ImageMount:
        """`folder` mounted at its own path."""
        return cls(Path(os.path.abspath(folder)), Path(os.path.abspath(folder)))

    def host_path(self, path: Path) -> Path | None:
        """Where on this host the container's absolute `path` lies when it is `target` or under it (None otherwise):
        what the server reads there is what this host holds at that path."""
        return self.source / path.relative_to(self.target) if path.is_relative_to(self.target) else None


def host_mounts(specs: Iterable[str]) -> list[ImageMount]:
    """The host folders mount specs `SOURCE:TARGET[:FLAGS]` (docker's `-v`, pyxis's `--container-mounts`) mount into
    a container, each with where the container sees it, in the order given (a later mount at a path hides an earlier
    one). A named volume's (a source that is no absolute path), a spec without a target and one whose target is no
    absolute path (pyxis's `.`: the container's working directory) mount no host folder a path names."""
    out = []
    for spec in specs:
        source, _, rest = spec.partition(":")
        target = rest.partition(":")[0]
        if source.startswith("/") and target.startswith("/"):
            out.append(ImageMount(Path(os.path.abspath(source)), Path(os.path.abspath(target))))
    return out


def host_path_of(path: str, mounts: Sequence[ImageMount]) -> Path | None:
    """Where on this host a path a server in its job's image reads lies (`~` expanded, made absolute, `..` resolved
    as this host spells it): through the most specific of `mounts` whose target holds it (the deepest; of two at one
    target, the later, which hides the other); None where none does — the image's own path."""
    where = _in_container(path)
    seen = [(len(m.target.parts), i, host) for i, m in enumerate(mounts) if (host := m.host_path(where)) is not None]
    return max(seen)[2] if seen else None


def mounts_under(path: str, mounts: Sequence[ImageMount]) -> list[Path]:
    """The host folders of `mounts` a container sees inside its folder `path` (`-v /host/fixes:/opt/patches/fixes`
    beside `PYTHONPATH: /opt/patches`): their files are under it there, though not under the host folder it maps to
    (:func:`host_path_of`) or in the image."""
    where = _in_container(path)
    return [m.source for m in mounts if m.target != where and m.target.is_relative_to(where)]


def _in_container(path: str) -> Path:
    """`path` as this host spells a path: `~` expanded, made absolute, `..` resolved."""
    return Path(os.path.abspath(os.path.expanduser(path)))


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
