"""Facts about the machine this process runs on, and its processes' tie to their parent, in one place."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a Slurm or `taskset` share), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def stopped_by_parent_only() -> None:
    """In a child process its parent stops through a channel of its own (a stop event, a closed pipe): ignore the
    interrupt signals — SIGINT, SIGTERM, SIGHUP — that a terminal's Ctrl-C, a `kill -TERM -PGID` or a closed SSH
    session send the whole process group, so that the parent's orderly stop (in-flight requests recorded as
    cancelled) is what ends it, not the signal, which killed a client worker with its requests unrecorded. The
    parent's last resort is SIGKILL; a parent that dies takes the child with it (`exit_with_parent`)."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def resource_tracker_started() -> None:
    """Start multiprocessing's resource tracker (the first lock, queue or event of a spawn context starts it) with
    SIGHUP blocked, as it then keeps it. The tracker ignores SIGINT and SIGTERM but not SIGHUP: a closed terminal
    (SIGHUP to the group) killed it, and its relaunch printed warnings and KeyError tracebacks after `interrupted by
    SIGHUP`. It ends when this process does. This process gets a SIGHUP that came meanwhile once it is unblocked."""
    import signal
    from multiprocessing import resource_tracker

    if not hasattr(signal, "pthread_sigmask"):
        resource_tracker.ensure_running()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


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
