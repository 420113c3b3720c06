"""A file llmsweep rewrites in place (summary.json, run.json, outcomes, progress reports) is replaced whole or not at
all: a reader, a kill of the process, or a crash of the machine finds the old file or the whole new one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmsweep import atomic


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    atomic.write_text(path, "old\n")
    with pytest.raises(RuntimeError), atomic.writing(path) as fh:
        fh.write("half of the new")
        raise RuntimeError("a full disk")
    assert path.read_text() == "old\n" and not atomic.tmp_path(path).exists()


def test_the_new_text_is_on_disk_before_it_takes_the_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temporary file is fsynced before the rename: without it a machine that crashed (a kernel panic, a node
    lost) after the rename could come back with the name on an empty or partial file (XFS, ext4 without its
    rename heuristic), neither the old file nor the new one. Text and bytes alike."""
    events: list[tuple[str, int | str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("replace", Path(src).name))
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    atomic.write_text(tmp_path / "run.json", "{}\n")
    with atomic.writing_bytes(tmp_path / "corpus.gz") as fh:
        fh.write(b"\x1f\x8b")
    # the file synced is the one that then takes the name
    assert events == [("fsync", (tmp_path / "run.json").stat().st_ino), ("replace", "run.json.tmp"),
                      ("fsync", (tmp_path / "corpus.gz").stat().st_ino), ("replace", "corpus.gz.tmp")]
    assert (tmp_path / "run.json").read_text() == "{}\n" and (tmp_path / "corpus.gz").read_bytes() == b"\x1f\x8b"


def test_a_symlinked_file_is_rewritten_where_it_points_with_its_permissions(tmp_path: Path) -> None:
    """A results file linked into a shared folder, and a private 0600 one: rewritten, the link stays a link and the
    file it names gets the new text (the link had become a plain file, the shared copy kept the old text), and the
    file keeps its mode (it came back with the umask's, readable by every user). A new file gets the umask's."""
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "summary.json"
    atomic.write_text(target, "old\n")
    target.chmod(0o600)
    link = tmp_path / "summary.json"
    link.symlink_to(target)
    atomic.write_text(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert target.stat().st_mode & 0o777 == 0o600
    assert not atomic.tmp_path(target).exists() and not atomic.tmp_path(link).exists()
    fresh = tmp_path / "fresh.json"
    atomic.write_text(fresh, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask
