"""One live llmsweep process per output folder: `run --out` and `bench … --out` claim theirs for the whole run, and
`summarize` refuses a folder a live run still writes.

A claim is an exclusive `flock` on a lock file inside the folder, taken without waiting: a second claim of the same
folder is refused at once, whoever made it (two benches started in the same second into one default folder, a
`bench` and a `run` given one --out). The kernel drops the lock with its process (a kill, a crash), so a folder left
by a killed run is free again; the file stays, as the lock's home (unlinking it would let a claim taken on the
unlinked file and one on a new file coexist). The holder writes its pid and command into the file, so a refusal names
who holds the folder.

On a shared folder the lock holds across machines only where the file system carries flock locks between clients:
Linux NFS does (it takes them as POSIX locks through the lock daemon), as does Lustre mounted with `-o flock`; Lustre
with `-o localflock`, or NFS mounted `-o nolock`/`local_lock=flock`, keeps each node's locks to itself, so two runs
on two nodes could both claim one folder there. A file system that refuses locks outright (ENOSYS, ENOLCK) is a
refusal that says so, never a claim taken without a lock.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from llmsweep.errors import ConfigError

LOCK_FILE = ".llmsweep-run.lock"
"""The lock file inside a claimed folder (its name from the first claimant, `llmsweep run`)."""
LOOK_RETRIES, LOOK_RETRY_S = 10, 0.05
"""A claim refused is tried again this often, this far apart, before it is said: `holder` (a `summarize` looking)
holds the lock shared for an instant, a claim for its whole run."""


@dataclass(frozen=True)
class Holder:
    """Who holds a folder's claim, as its lock file says (an older llmsweep's claim says nothing: both None)."""

    pid: int | None
    command: str | None

    @property
    def who(self) -> str:
        return f"`{self.command}`" if self.command else "llmsweep process"

    @property
    def pid_note(self) -> str:
        return f" (pid {self.pid})" if self.pid is not None else ""


_HELD: set[int] = set()
"""File descriptors of the claims this process holds."""


def _drop_inherited_claims() -> None:
    """In a forked child (a parse worker): point the claims' descriptors at /dev/null. A flock belongs to the open
    file, which a fork shares, so a child kept its parent's claim until it exited: after a kill -9 of the parent its
    workers held the folder for seconds and a `--resume` was refused as if the run were alive. (Not closed: the
    inherited file object would close the descriptor number again at exit, perhaps another file's by then.)"""
    if not _HELD:
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in _HELD:
            os.dup2(null, fd)
    finally:
        os.close(null)
        _HELD.clear()


os.register_at_fork(after_in_child=_drop_inherited_claims)


@contextmanager
def claim(folder: Path, command: str, *, fix: str) -> Iterator[None]:
    """Hold `folder` (made if missing) for the `with` block, as `command` (e.g. `llmsweep bench`); ConfigError (exit
    2) naming the holder and `fix` when a live process holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fh = open(folder / LOCK_FILE, "a+")  # noqa: SIM115 - closed by the `with` below
    except OSError as exc:  # a lock file another user left, read-only to this one
        raise _unlockable(folder, exc) from None
    with fh:
        for attempt in range(LOOK_RETRIES + 1):
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == LOOK_RETRIES:
                    raise _busy(folder, _read(fh), fix) from None
                time.sleep(LOOK_RETRY_S)  # perhaps only `holder` looking: it lets go at once
            except OSError as exc:  # ENOSYS, ENOLCK, EOPNOTSUPP: a file system that takes no locks
                raise _unlockable(folder, exc) from None
        _HELD.add(fh.fileno())
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()} {command}\n")
            fh.flush()
            yield
        finally:
            _HELD.discard(fh.fileno())
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def refuse_held(folder: Path, *, fix: str) -> None:
    """ConfigError (exit 2), as `claim` says it, when a live process holds `folder`; nothing is claimed or made."""
    if (held := holder(folder)) is not None:
        raise _busy(folder, held, fix)


def _unlockable(folder: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"cannot claim {folder} for this run: locking {folder / LOCK_FILE} failed "
                       f"({exc.strerror or exc}), so another run could write the folder at the same time",
                       fix="write to a folder on a file system that takes flock locks (a local disk; NFS with its "
                           "lock daemon; Lustre mounted with -o flock), or one whose lock file this user can write")


def _busy(folder: Path, held: Holder, fix: str) -> ConfigError:
    return ConfigError(f"another {held.who} is using {folder}{held.pid_note}", fix=fix)


def holder(folder: Path) -> Holder | None:
    """Who holds `folder` now, or None when no live process does (no lock file: none ever did). Changes nothing in
    the folder (a read-only folder, a packed copy, reads the same)."""
    try:
        fh = open(folder / LOCK_FILE)  # noqa: SIM115 - closed below, after the lock is tried
    except OSError:
        return None
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fh)
        except OSError:  # a file system without locks: nothing can be said
            return None
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return None


def _read(fh: TextIO) -> Holder:
    """The holder a lock file names (`<pid> <command>`), read from its start."""
    try:
        fh.seek(0)
        pid, _, command = fh.readline().strip().partition(" ")
    except (OSError, ValueError):
        return Holder(None, None)
    return Holder(int(pid) if pid.isdigit() else None, command or None)
