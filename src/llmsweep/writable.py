"""Where a command writes, checked before any work: an output path the user named that cannot be written is refused
(exit 2) with nothing made or changed there. One home for the CLI's outputs (`--out`, `--markdown`, `--github-output`)
and the library's (a curve file, an evidence folder), and for an output path that cannot be recorded (not UTF-8)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import NamedTuple

from llmsweep.errors import ConfigError


class Blocked(NamedTuple):
    """What stops a folder from being made: the path on its way, and what it is (`blocked_at`)."""

    at: Path
    what: str
    """`is a file, not a folder`, or `is a symbolic link to T, which does not exist`."""
    link: bool
    """A symbolic link to nothing (a scratch disk not mounted): its fix is its target, or removing it."""


def blocked_at(home: Path) -> Blocked | None:
    """Why the folder `home` (with any missing parents) cannot be made: the nearest path on its way that is there is a
    regular file, or a symbolic link to what is gone. None when the way is clear. Making the folder had failed on it
    with `[Errno 17] File exists` (a file) or `[Errno 2]` (a link) naming neither."""
    there = home
    while not there.exists() and there != there.parent:  # the nearest folder that is: it must take the rest
        if there.is_symlink():
            return Blocked(there, f"is a symbolic link to {os.readlink(there)}, which does not exist", link=True)
        there = there.parent
    return None if there.is_dir() else Blocked(there, "is a file, not a folder", link=False)


def refuse_unwritable(path: Path, *, folder: bool, option_name: str = "--out", makes_parents: bool = True,
                      then: str = "nothing was written") -> None:
    """Before any work: an output the user named that cannot be written is refused (exit 2), with nothing made or
    changed there: a folder output that is a file, a file output that is a folder, a path under a regular file or
    through a symbolic link to nothing, a missing folder a command that makes none would write into
    (`makes_parents=False`), a place this user cannot write. Found when writing, these had been tracebacks (exit 1),
    most after the work was done. `option_name` names the output as the user gave it; `then` says what did not happen
    (default: nothing was written)."""
    fix = f"pass {option_name} a {'folder' if folder else 'file'} path this user can write"
    if folder and path.exists() and not path.is_dir():
        raise ConfigError(f"{option_name} {path} is a file, not a folder; {then}", fix=fix)
    if not folder and path.is_dir():
        raise ConfigError(f"{option_name} {path} is a folder, not a file; {then}", fix=fix)
    home = path if folder else path.parent
    blocked = blocked_at(home)
    if blocked is not None:
        raise ConfigError(f"{option_name} {path} cannot be written: {blocked.at} {blocked.what}; {then}",
                          fix=f"make the link's target, remove the link, or {fix}" if blocked.link else fix)
    there = home
    while not there.exists() and there != there.parent:  # the nearest folder that is: it must take the rest
        there = there.parent
    if there != home and not makes_parents:
        raise ConfigError(f"{option_name} {path} cannot be written: the folder {home} does not exist; {then}",
                          fix=f"make {home} first, or {fix}")
    try:  # a write test, removed: a read-only mount, a folder of another user
        fd, probe = tempfile.mkstemp(dir=there, prefix=".llmsweep-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{option_name} {path} cannot be written: {there}: {exc.strerror or exc}; {then}",
                          fix=fix) from None
    if path.is_file() and not os.access(path, os.W_OK):
        raise ConfigError(f"{option_name} {path} cannot be written: the file is read-only; {then}", fix=fix)


def refuse_non_utf8(path: Path, *, option_name: str = "--out", then: str = "nothing was run or written") -> None:
    """Before any work: an output whose path is not valid UTF-8 (bytes the file system holds but UTF-8 cannot say,
    `$'/tmp/o\\xff'`) is refused (exit 2), for an output whose path is recorded (the results store, run.json, reports,
    all UTF-8): such a `run --out` ran every job and then failed to store them ('utf-8' codec can't encode character
    '\\udcff'). Checked on the absolute path: a relative one names the current folder too."""
    text = str(path.absolute())
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            shown = os.fsencode(text).decode("utf-8", "backslashreplace")  # the bytes as given: \xff
        except UnicodeEncodeError:  # a lone surrogate no bytes stand for (a library caller's str)
            shown = text.encode("utf-8", "backslashreplace").decode("ascii")
        raise ConfigError(f"{option_name} {shown} is not valid UTF-8, and the run records its output's path as UTF-8 "
                          f"text; {then}",
                          fix=f"pass {option_name} a path that is UTF-8 text (or rename the folder that is not)") \
            from None
