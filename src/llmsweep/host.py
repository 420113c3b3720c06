"""Facts about the machine this process runs on, and its processes' tie to their parent, in one place."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a Slurm or `taskset` share), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


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
