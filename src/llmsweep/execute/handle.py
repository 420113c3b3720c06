"""ServerHandle: what the lifecycle holds between launch and teardown, whatever the executor.

The lifecycle (preflight → launch → ready → client → scrape → teardown) only needs a URL, a way to ask "still
alive?", the log to quote when it is not, and one call that tears everything down. Executors differ only in what
`stop` must do first (e.g. `docker stop` the container before killing the CLI attached to it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LlmsweepError
from llmsweep.execute.process import ManagedProcess
from llmsweep.execute.secrets import SecretScrubber
from llmsweep.execute.signals import hurried, shielded

log = logging.getLogger(__name__)

DEFAULT_TAIL_LINES = 40


def log_tail(path: Path, lines: int = DEFAULT_TAIL_LINES, max_bytes: int = 256 * 1024) -> str:
    """The last `lines` lines of a log (reads at most `max_bytes` from the end); empty when there is no log."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])


@runtime_checkable
class ServerHandle(Protocol):
    """A started server. `stop` is idempotent and leaves no process, container or job step behind."""

    spec: LaunchSpec
    log_path: Path
    scrubber: SecretScrubber
    command: tuple[str, ...]
    user_flags: str | None
    """Flags of the user's own the launcher put around the engine's command (`docker run`'s, `srun`'s), named as the
    user sets them, for a start-up failure's fix; None when there are none."""
    gpus_in_bus_order: bool
    """Whether the server's runtime numbers its GPUs in the host's bus order (nvidia-smi's), whatever order its
    selection names them in: a container given `--gpus "device=2,0"` has GPUs 0 and 2 as its devices 0 and 1, as
    CUDA enumerates them. False where the selection's order is the runtime's (`CUDA_VISIBLE_DEVICES=2,0` on the host:
    GPU 2 is device 0). `lifecycle.observe_runtime` records the GPUs in the order the server has them."""
    cleanup: tuple[str, ...]
    """The command a later `--resume` runs once the server's process is gone (`docker rm -f NAME`: a container
    outlives the docker CLI that started it); empty when stopping the process is all."""
    role_commands: str
    """A role-by-role deployment: every role's command as launched (the job's `server_command.txt` lists them under
    the router's); empty for one server."""

    @property
    def base_url(self) -> str: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def job_id(self) -> str | None: ...

    @property
    def returncode(self) -> int | None: ...

    def is_alive(self) -> bool: ...

    def stop(self, grace_s: float = 10.0) -> int | None: ...

    def gone(self) -> bool:
        """True once nothing of the server is left (process tree, container, job step): the pid file may go."""
        ...

    def tail(self, lines: int = DEFAULT_TAIL_LINES) -> str: ...

    # What a failure's text says of a server that died (`ready.exit_text`, `ready.wait_ready`): each handle kind
    # answers, None where it cannot tell.
    @property
    def dead_role(self) -> str | None:
        """Which part of the server died (`decode worker 0 on mn2`), where it has several; None: one process, or
        every part runs."""
        ...

    def exit_cause(self) -> str | None:
        """What ended the server, where its launcher can tell (docker's daemon: `killed by the kernel's OOM killer`);
        None while it runs or when nothing says."""
        ...

    def exit_fix(self, tail_lines: int = DEFAULT_TAIL_LINES) -> str | None:
        """The launcher's own fix for a start-up exit it knows by its status and log tail (docker's refusal, exit
        125), where the engine's usual fix would send the user to the wrong place; None: the usual fix."""
        ...


def flags_named(option: str, flags: Sequence[str]) -> str | None:
    """`user_flags` of a handle: the option's name and its flags, as a fix quotes them; None without flags."""
    return f"{option} ({' '.join(flags)})" if flags else None


class ProcessServerHandle:
    """A server whose lifetime is one local process tree (local, docker CLI, srun step)."""

    def __init__(
        self,
        spec: LaunchSpec,
        process: ManagedProcess,
        *,
        scrubber: SecretScrubber,
        command: Sequence[str],
        job_id: str | None = None,
        before_stop: Callable[[float], None] | None = None,
        after_stop: Callable[[], None] | None = None,
        cleanup: Sequence[str] = (),
        user_flags: str | None = None,
        exit_fix: Callable[[int | None, str], str | None] | None = None,
    ) -> None:
        self.spec = spec
        self.user_flags = user_flags
        self.gpus_in_bus_order = False  # a process on the host: its selection's order (DockerServerHandle: the bus's)
        self._exit_fix = exit_fix
        self.process = process
        self.log_path = process.log_path
        self.scrubber = scrubber
        self.command = tuple(command)
        self.cleanup = tuple(cleanup)
        """A command that removes what outlives the process tree (a container): a later `--resume` runs it when this
        run was killed before it could stop the server itself."""
        self.role_commands = ""  # one server: its command is `command`
        self._job_id = job_id
        self._before_stop = before_stop
        self._after_stop = after_stop
        self._stopped = False
        self._cleaned = False

    @property
    def base_url(self) -> str:
        return self.spec.base_url

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def job_id(self) -> str | None:
        return self._job_id

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def is_alive(self) -> bool:
        return self.process.is_alive()

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop the server (idempotent). Signals arriving meanwhile do not cut it short (a second one only skips
        the rest of the grace); it is done when :meth:`gone` says so."""
        if self._stopped:
            return self.process.returncode
        with shielded():
            self._cleaned = True
            if self._before_stop is not None:
                try:
                    self._before_stop(0.0 if hurried() else grace_s)  # `docker stop -t 0` after a second signal
                except LlmsweepError as exc:  # expected (`docker stop` of a daemon that went away): said, no traceback
                    self._cleaned = False
                    log.warning("pre-stop step failed for %s (%s); killing the process tree anyway",
                                self.spec.engine, exc.one_line())
                except Exception:  # teardown must go on: the process tree is still ours to kill
                    self._cleaned = False
                    log.exception("pre-stop step failed for %s; killing the process tree anyway", self.spec.engine)
            rc = self.process.stop(grace_s)
            if self._after_stop is not None:
                try:
                    self._after_stop()
                except LlmsweepError as exc:  # expected (`docker rm` of a daemon that went away): said, no traceback
                    self._cleaned = False
                    log.warning("post-stop clean-up failed for %s: %s", self.spec.engine, exc.one_line())
                except Exception:
                    self._cleaned = False
                    log.exception("post-stop clean-up failed for %s", self.spec.engine)
            self._stopped = self.gone()
        return rc

    def gone(self) -> bool:
        """Nothing of the server is left: no process of its tree or group, and its clean-up (a container) done."""
        return self._cleaned and not self.process.alive_pids()

    def tail(self, lines: int = DEFAULT_TAIL_LINES) -> str:
        self.process.settle_log()
        return log_tail(self.log_path, lines)

    @property
    def dead_role(self) -> str | None:
        return None  # one process tree: its exit status says it all

    def exit_cause(self) -> str | None:
        return None  # a process's own exit status is all a local process or an srun step tells

    def exit_fix(self, tail_lines: int = DEFAULT_TAIL_LINES) -> str | None:
        """The fix the launcher gave this handle (`exit_fix=`) for its exit status and log tail; None without one
        (the tail is read only for one)."""
        return self._exit_fix(self.returncode, self.tail(tail_lines)) if self._exit_fix is not None else None

    def __enter__(self) -> ProcessServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
