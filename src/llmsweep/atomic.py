"""Writing a file whole or not at all: its text goes to `NAME.tmp` beside it, synced to disk, which then replaces
`NAME` (`os.replace`, atomic within a folder). A reader, a kill mid-write or a crash of the machine finds the old file
or the whole new one, never half of one. Every file llmsweep rewrites in place is written here (summaries, run.json,
outcomes, progress reports, the power samples, a cross-check's tables), so a `.tmp` a kill left beside them is always
half of the file of that name (`execute.artifacts.keep_previous_attempt` moves it aside with its attempt)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TextIO

TMP_SUFFIX = ".tmp"
"""What a file being written is called until it replaces its namesake."""


def tmp_path(path: Path) -> Path:
    """The temporary file `path` is written to first."""
    return path.with_name(path.name + TMP_SUFFIX)


@contextmanager
def _replacing(path: Path, mode: str, encoding: str | None = None) -> Iterator[Any]:
    """Write through a temporary file that then replaces the file. A `path` that is a symbolic link is written where
    it points (replacing the link made it a plain file, and the file it named kept the old text); the new file keeps
    the old one's permission bits (a 0600 file came back with the umask's)."""
    if path.is_symlink():
        path = path.resolve()
    tmp = tmp_path(path)
    try:
        old_mode = path.stat().st_mode & 0o7777
    except OSError:
        old_mode = None
    try:
        with tmp.open(mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            if old_mode is not None:
                os.fchmod(fh.fileno(), old_mode)
            _sync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _sync(fd: int) -> None:
    """The file's text on disk before it takes its name: renamed unsynced, a crash of the machine (a kernel panic, a
    node lost; not only of this process) could leave the name on an empty or partial file (XFS; ext4 mounted without
    its rename heuristic). A file system that cannot sync (EINVAL, ENOTSUP) is let be."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.ENOSYS):
            raise


def writing(path: Path) -> AbstractContextManager[TextIO]:
    """A UTF-8 text file to write `path` through: it replaces `path` when the block ends normally. When the block (or
    a write: a full disk) raises, the temporary file is removed and `path` is left as it was."""
    return _replacing(path, "w", encoding="utf-8")


def writing_bytes(path: Path) -> AbstractContextManager[BinaryIO]:
    """:func:`writing` for bytes (a gzip stream: a run's kept corpus)."""
    return _replacing(path, "wb")


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all (:func:`writing`)."""
    with writing(path) as fh:
        fh.write(text)
