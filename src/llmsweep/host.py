"""Facts about the machine this process runs on, and its processes' tie to their parent, in one place."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a Slurm or `taskset` share), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def cpu_model(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> str | None:
    """The CPU's model name as /proc/cpuinfo gives it (its first `model name` line, spaces collapsed), None where it
    has none (Arm's /proc/cpuinfo names parts by number; macOS has no such file): never a guess."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
    except OSError:
        return None
    return None


def load_average_1m() -> float | None:
    """The 1-minute load average of this machine (`os.getloadavg`), None where the platform has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


INTERRUPT_SIGNAL_NAMES = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM",
                          "SIGPROF", "SIGXCPU", "SIGIO", "SIGPWR", "SIGSTKFLT")
"""The signals that end a process by default and come from outside it: those a terminal's Ctrl-C (or Ctrl-\\), a
`kill -TERM -PGID`, a `timeout` or a closed SSH session send a whole process group, and the rest a user, a batch
system or a limit sends (Slurm's `sbatch --signal=B:USR1@120` ahead of a time limit, `scancel -s USR2`, a CPU-time
limit's SIGXCPU, `timeout -s ALRM`). The CLI unwinds a command on each of them (`execute.signals.INTERRUPT_SIGNALS`,
built from this list); SIGUSR1 and SIGALRM used to end `llmsweep run` at once, its servers left running.

Not among them: SIGKILL and SIGSTOP (nothing can catch them); SIGPIPE and SIGXFSZ, which Python ignores from its
start (the write fails instead); the faults a process's own instruction raises (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
SIGTRAP, SIGSYS, SIGABRT: nothing resumes after them); those that do not end a process (SIGCHLD, SIGWINCH, SIGURG,
SIGCONT, and job control's SIGTSTP, SIGTTIN, SIGTTOU, which must keep stopping it); and the real-time signals, a
program's own (libraries' timers), which nothing sends a run to stop it."""


def interrupt_signals(names: Iterable[str] = INTERRUPT_SIGNAL_NAMES) -> tuple[signal.Signals, ...]:
    """The signals named that this platform has (macOS has no SIGPWR or SIGSTKFLT), in their order."""
    return tuple(signal.Signals[n] for n in names if n in signal.Signals.__members__)


def _interrupts(names: Iterable[str]) -> set[signal.Signals]:
    return set(interrupt_signals(names))


def stopped_by_parent_only(names: Iterable[str] = INTERRUPT_SIGNAL_NAMES) -> None:
    """In a child process its parent stops through a channel of its own (a stop event, a closed pipe): ignore the
    interrupt signals — SIGINT, SIGTERM, SIGHUP, SIGQUIT and the rest of `INTERRUPT_SIGNAL_NAMES` — that a terminal's
    Ctrl-C, a `kill -TERM -PGID`, a closed SSH session or a batch system's `scancel -s USR1` send the whole process
    group, so that the parent's orderly stop (in-flight requests recorded
    as cancelled) is what ends it, not the signal, which killed a client worker with its requests unrecorded. The
    parent's last resort is SIGKILL; a parent that dies takes the child with it (`exit_with_parent`).

    A child started under :func:`interrupts_held` has them blocked until here, so that none ends it while it boots;
    one that came meanwhile is discarded with the block, ignored."""
    sigs = _interrupts(names)
    for sig in sigs:
        signal.signal(sig, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)


@contextmanager
def interrupts_held(names: Iterable[str] = INTERRUPT_SIGNAL_NAMES) -> Iterator[None]:
    """Block the interrupt signals in this thread while it starts a child that ignores them
    (:func:`stopped_by_parent_only`): the child inherits the blocked mask through fork and exec, so a signal to the
    whole process group cannot end it while its interpreter boots, before it ignores them (the record helper died
    so under a `timeout -s INT`: the job failed with "the record helper process ended before it was ready" and the
    signal was lost with it). This process handles a signal that came meanwhile once the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _interrupts(names))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def resource_tracker_started() -> None:
    """Start multiprocessing's resource tracker (the first lock, queue or event of a spawn context starts it) with
    the interrupt signals other than SIGINT and SIGTERM blocked (SIGHUP, SIGQUIT, SIGUSR1, ...), as it then keeps
    them. The tracker ignores SIGINT and SIGTERM but not those: a closed terminal (SIGHUP to the group) or a Ctrl-\\
    (SIGQUIT) killed it, and its relaunch printed warnings and KeyError tracebacks after `interrupted by SIGHUP`. It
    ends when this process does. This process gets a signal that came meanwhile once it is unblocked."""
    from multiprocessing import resource_tracker

    with interrupts_held(tuple(n for n in INTERRUPT_SIGNAL_NAMES if n not in ("SIGINT", "SIGTERM"))):
        resource_tracker.ensure_running()


def exit_with_parent() -> None:
    """In a spawned process: exit at once when the parent process dies, however it died (SIGKILL, OOM), so a killed
    run leaves no worker behind. A daemon thread waits on the parent's sentinel; it costs nothing until then."""
    import multiprocessing as mp
    import multiprocessing.connection
    import threading

    parent = mp.parent_process()
    if parent is None:
        return

    def watch() -> None:
        mp.connection.wait([parent.sentinel])
        os._exit(1)  # records already written stay; nobody is left to read the rest

    threading.Thread(target=watch, name="llmsweep-parent-watch", daemon=True).start()
