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
