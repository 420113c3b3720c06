"""What tests read of other processes, from /proc (Linux): one home for the reads the signal, worker and leak
tests make, each tolerant of a process that ends meanwhile."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def read_proc(pid: int, name: str) -> bytes:
    """`/proc/<pid>/<name>` (`cmdline`, `environ`, `status`, ...); empty when the process is gone."""
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def stat_fields(pid: int) -> list[str]:
    """The fields of `/proc/<pid>/stat` after the command name (state first, then the parent, ...: `man 5 proc`
    numbered from 3); empty when the process is gone."""
    stat = read_proc(pid, "stat").decode()
    return stat[stat.rindex(")") + 2:].split() if stat else []


def alive(pid: int) -> bool:
    """True while `pid` runs and is not a zombie."""
    fields = stat_fields(pid)
    return bool(fields) and fields[0] not in "ZX"


def cpu_ticks(pid: int) -> int:
    """User plus system clock ticks the process has run (0 when gone)."""
    fields = stat_fields(pid)
    return int(fields[11]) + int(fields[12]) if fields else 0


def parents() -> dict[int, int]:
    """Every process's parent."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat_fields(int(entry))):
            out[int(entry)] = int(fields[1])
    return out


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    return [p for p, parent in parents().items() if parent == pid]


def descendants(pid: int) -> list[int]:
    """Live processes under `pid` (its children, theirs, ...)."""
    parent_of = parents()
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, pp in parent_of.items() if pp in frontier]
        found += kids
        frontier = kids
    return [p for p in found if alive(p)]


def ctrl_z(leader: int, *, hold_s: float = 1.5, timeout: float = 10.0) -> None:
    """A terminal's Ctrl-Z, then `fg`: SIGTSTP to the process group `leader` leads, until the leader is stopped
    (state T), held `hold_s` (the pause the stopped command's clocks count), then SIGCONT to the group."""
    import signal

    os.killpg(leader, signal.SIGTSTP)
    deadline = time.monotonic() + timeout
    while (stat_fields(leader) or ["?"])[0] != "T":
        assert time.monotonic() < deadline, f"pid {leader} did not stop on SIGTSTP within {timeout:.0f} s"
        time.sleep(0.02)
    time.sleep(hold_s)
    os.killpg(leader, signal.SIGCONT)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen[Any] | None = None,
             log: Path | None = None, poll_s: float = 0.1) -> Any:
    """Poll `predicate` until it returns something true and return that; fail naming `what` (and the tail of `log`)
    when `timeout` seconds pass first or `proc` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run exited ({proc.returncode}) before {what}:\n"
                                 + (log.read_text(errors="replace")[-4000:] if log else ""))
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}"
                         + (f":\n{log.read_text(errors='replace')[-4000:]}" if log else ""))
