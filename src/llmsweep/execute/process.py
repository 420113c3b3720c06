"""Start a server as its own session with a scrubbed log, and stop its whole process tree, orphans included.

Engines fork workers (tokenizer managers, one process per GPU rank, compile workers); a server killed by its PID alone
leaves them holding GPUs and keeping Slurm steps alive. So the server starts in a new session (its own process
group), and stopping it signals the group *and* every descendant found by walking /proc, because a descendant may
have left the group (`setsid`, daemonising libraries).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from llmsweep.errors import LaunchError
from llmsweep.execute.secrets import SecretScrubber
from llmsweep.execute.signals import hurried
from llmsweep.words import count_of

log = logging.getLogger(__name__)

_POLL_S = 0.05
_REMEMBER_EVERY_S = 1.0


@dataclass(frozen=True)
class ProcInfo:
    """What /proc says about one process; `start_ticks` guards against signalling a recycled PID."""

    pid: int
    ppid: int
    pgid: int
    state: str
    start_ticks: int


def read_proc(pid: int) -> ProcInfo | None:
    """Parse /proc/PID/stat, or None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its closing one.
    fields = raw[raw.rindex(")") + 2 :].split()
    return ProcInfo(pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), state=fields[0], start_ticks=int(fields[19]))


def read_cmdline(pid: int) -> list[str] | None:
    """The argv of `pid` as /proc/PID/cmdline holds it, or None when it cannot be read (the process is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def all_processes() -> list[ProcInfo]:
    procs = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = read_proc(int(entry))
            if info is not None:
                procs.append(info)
    return procs


def process_tree(roots: int | Iterable[int], pgid: int | None = None) -> dict[int, ProcInfo]:
    """The roots, their descendants by parent links, and every member of process group `pgid`."""
    wanted = {roots} if isinstance(roots, int) else set(roots)
    procs = all_processes()
    children: dict[int, list[ProcInfo]] = {}
    for info in procs:
        children.setdefault(info.ppid, []).append(info)
    tree: dict[int, ProcInfo] = {}
    stack = [p for p in procs if p.pid in wanted or (pgid is not None and p.pgid == pgid)]
    while stack:
        info = stack.pop()
        if info.pid in tree:
            continue
        tree[info.pid] = info
        stack.extend(children.get(info.pid, []))
    return tree


def _alive(info: ProcInfo) -> bool:
    """Still running: same PID and start time, and not a zombie waiting to be reaped."""
    now = read_proc(info.pid)
    return now is not None and now.start_ticks == info.start_ticks and now.state not in ("Z", "X")


def _killpg(known: dict[int, ProcInfo], pgid: int | None, sig: int) -> None:
    """Signal the group only while a process we recorded still leads or belongs to it (the id may be recycled)."""
    if pgid is None or not any(i.pgid == pgid and _alive(i) for i in known.values()):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal(info: ProcInfo, sig: int) -> None:
    if _alive(info):
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, sig)


def stop_process_tree(
    root: int,
    *,
    pgid: int | None = None,
    grace_s: float = 10.0,
    reap: subprocess.Popen[Any] | None = None,
    seen: Iterable[ProcInfo] = (),
) -> list[int]:
    """SIGTERM the group and every descendant, wait `grace_s`, SIGKILL survivors; return the PIDs that needed SIGKILL.

    The tree is re-walked while waiting, so children spawned during shutdown and descendants whose parent already
    exited (re-parented to init) are still caught: they were recorded before their parent died. `seen` adds
    descendants recorded earlier (a server that died on its own leaves its session-leaving children unreachable).
    """
    known = process_tree(root, pgid)
    for info in seen:
        if _alive(info):
            known.setdefault(info.pid, info)
    _killpg(known, pgid, signal.SIGTERM)
    for info in known.values():
        _signal(info, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and not hurried():
        if reap is not None:
            reap.poll()
        living = [info.pid for info in known.values() if _alive(info)]
        if living:
            for pid, child in process_tree(living, pgid).items():
                known.setdefault(pid, child)
        if not any(_alive(info) for info in known.values()):
            return []
        time.sleep(_POLL_S)
    survivors = [info for info in known.values() if _alive(info)]
    _killpg(known, pgid, signal.SIGKILL)
    for info in survivors:
        _signal(info, signal.SIGKILL)
    kill_deadline = time.monotonic() + 5.0
    while time.monotonic() < kill_deadline and any(_alive(i) for i in survivors):
        if reap is not None:
            reap.poll()
        time.sleep(_POLL_S)
    if survivors:
        log.warning("killed %s that %s: %s", count_of(len(survivors), "process", "processes"),
                    "were still stopping at a second interrupt" if hurried() else
                    f"ignored SIGTERM for {grace_s:.0f} s", [i.pid for i in survivors])
    return [i.pid for i in survivors]


def signal_process_tree(root: int, *, pgid: int | None = None, sig: int = signal.SIGTERM) -> dict[int, ProcInfo]:
    """Signal the group and every descendant of `root` without waiting; what was signalled, for a later
    :func:`stop_process_tree` (`seen`) to wait for: several trees signalled first then stop side by side."""
    known = process_tree(root, pgid)
    _killpg(known, pgid, sig)
    for info in known.values():
        _signal(info, sig)
    return known


def tree_alive(roots: int | Iterable[int], *, pgid: int | None = None, seen: Iterable[ProcInfo] = ()) -> list[int]:
    """The PIDs still running (zombies aside) of `roots`, their descendants, group `pgid` and the `seen` processes.

    Empty means the server is gone: only then may the pid file that lets `--resume` find it go.
    """
    known = process_tree(roots, pgid)
    for info in seen:
        known.setdefault(info.pid, info)
    return sorted(pid for pid, info in known.items() if _alive(info))


class _LogPump(threading.Thread):
    """Copies the child's merged stdout/stderr into the log file through a stream scrubber, flushing each chunk."""

    def __init__(self, stream: object, log_path: Path, scrubber: SecretScrubber) -> None:
        super().__init__(name=f"log-pump:{log_path.name}", daemon=True)
        self._fd = stream.fileno()  # type: ignore[attr-defined]
        self._stream = stream
        self._log_path = log_path
        self._scrub = scrubber.stream()

    def run(self) -> None:
        # Keep draining even when the log cannot be written (disk full): a full pipe would block the server.
        writable = True
        with open(self._log_path, "ab", buffering=0) as out:
            while True:
                try:
                    chunk = os.read(self._fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                writable = self._write(out, self._scrub.feed(chunk), writable)
            self._write(out, self._scrub.flush(), writable)
        self._stream.close()  # type: ignore[attr-defined]

    def _write(self, out: BinaryIO, data: bytes, writable: bool) -> bool:
        if not writable or not data:
            return writable
        try:
            out.write(data)
        except OSError as exc:
            log.error("cannot write server log %s (%s); discarding further output", self._log_path, exc)
            return False
        return True


class ManagedProcess:
    """A process started in its own session whose output goes, scrubbed, to a log file."""

    def __init__(self, popen: subprocess.Popen[bytes], argv: Sequence[str], log_path: Path, pump: _LogPump) -> None:
        self._popen = popen
        self.argv = tuple(argv)
        self.log_path = log_path
        self._pump = pump
        self.pgid = popen.pid  # start_new_session makes the child its own session and group leader
        self._seen: dict[int, ProcInfo] = {}
        self._seen_at = 0.0

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def is_alive(self) -> bool:
        alive = self._popen.poll() is None
        if alive:
            self._remember_descendants()
        return alive

    def _remember_descendants(self) -> None:
        """Record the tree now and then, so `stop` still finds children after their parent died on its own."""
        now = time.monotonic()
        if now - self._seen_at < _REMEMBER_EVERY_S:
            return
        self._seen_at = now
        for pid, info in process_tree(self.pid, self.pgid).items():
            self._seen.setdefault(pid, info)

    def settle_log(self, timeout_s: float = 1.0) -> None:
        """Once the root has exited, give the log pump a moment to write what the pipe still holds: a server that dies
        at once (a flag its launcher refuses) writes its reason a moment before the pump has copied it, and the
        failure's log tail would read an empty file. A descendant still holding the pipe only costs the timeout."""
        if self._popen.poll() is not None:
            self._pump.join(timeout=timeout_s)

    def wait(self, timeout_s: float | None = None) -> int:
        rc = self._popen.wait(timeout=timeout_s)
        self.settle_log()  # a descendant still holding the pipe costs a second, not five
        return rc

    def alive_pids(self) -> list[int]:
        """What is left of the tree (the root, its group, every descendant seen); empty once it is all gone."""
        running = self._popen.poll() is None  # a reaped root's PID may already belong to someone else
        if running:
            self._remember_descendants()
        return tree_alive([self.pid] if running else [], pgid=self.pgid, seen=self._seen.values())

    def stop(self, grace_s: float = 10.0) -> int | None:
        """Stop the whole tree (idempotent); return the root's exit status."""
        stop_process_tree(self.pid, pgid=self.pgid, grace_s=grace_s, reap=self._popen, seen=self._seen.values())
        try:
            self._popen.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            log.warning("process %d did not exit after SIGKILL", self.pid)
        self._pump.join(timeout=5.0)
        return self._popen.returncode


SERVER_DIR_ENV = "LLMSWEEP_SERVER_DIR"
"""Set in the environment of every server process llmsweep starts (and so of all it starts in turn): the folder its
log goes to, under the run's `--out`. A run SIGKILLed between starting a server and writing its pid file left that
server running with nothing on disk naming it; `--resume` finds such a process by this mark (`marked_processes`)."""


def marks(value: str, under: Path, *, below: bool = True) -> bool:
    """Whether a server folder mark `value` (`SERVER_DIR_ENV`'s, or a container's `docker.SERVER_DIR_LABEL`) names
    `under` itself or (`below`) a folder under it."""
    folder = str(under.resolve())
    return value == folder or (below and value.startswith(folder + os.sep))


def marked_processes(under: Path, *, below: bool = True) -> list[tuple[int, list[str]]]:
    """(pid, argv) of every process of this user whose environment marks it a server llmsweep started for `under` or
    (`below`) a folder under it (`SERVER_DIR_ENV`: `run`'s servers mark their folder in the run's `servers/`, an `al
    collect` cell's server the cell itself: `below=False`), this process and its ancestors left out; /proc read as it
    is (a process that exits meanwhile, or whose environment cannot be read, is left out)."""
    spared, pid = set(), os.getpid()
    while pid > 1 and pid not in spared:  # this process and its ancestors: never our own leftovers
        spared.add(pid)
        info = read_proc(pid)
        pid = info.ppid if info is not None else 0
    found: list[tuple[int, list[str]]] = []
    mark = SERVER_DIR_ENV.encode() + b"="
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spared:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(mark) and marks(os.fsdecode(item[len(mark):]), under, below=below):
                argv = read_cmdline(int(entry.name))
                if argv is not None:
                    found.append((int(entry.name), argv))
                break
    return found


def start_process(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str],
    scrubber: SecretScrubber | None = None,
    cwd: Path | None = None,
) -> ManagedProcess:
    """Start `argv` in a new session, stdout+stderr merged into `log_path` (appended, scrubbed)."""
    if not argv:
        raise LaunchError("cannot start a server with an empty command line", fix="check the engine adapter's argv")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    scrubber = scrubber or SecretScrubber(())
    try:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**env, SERVER_DIR_ENV: str(log_path.parent.resolve())},  # found by `marked_processes` if orphaned
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise LaunchError(
            f"cannot start `{argv[0]}`: {exc.strerror}",
            fix="install the server binary or give its full path in the engine's argv",
        ) from exc
    pump = _LogPump(popen.stdout, log_path, scrubber)
    pump.start()
    log.info("started pid %d: %s (log %s)", popen.pid, scrubber.scrub(" ".join(argv)), log_path)
    return ManagedProcess(popen, argv, log_path, pump)
