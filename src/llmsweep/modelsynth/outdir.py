"""Writing a model directory so that it is whole or absent: staged beside `--out`, moved in when complete.

An import or synth that fails or is interrupted part way (a full disk, Ctrl-C, a bad tensor) must not leave a
directory that looks like a model — `config.json` and a tokenizer with missing or half-written weights. Everything is
written into a hidden sibling (`.NAME.partial-PID`, same filesystem, so the final move is a rename), removed on any
failure. Under `--force` into a non-empty directory, the staged files replace those of the same name, and the weights
and provenance files a previous write left there are removed first: an engine would otherwise load a stale
`model.safetensors` or a stale shard index instead of the new weights. So is the drafter a previous `model synth
--with-draft` wrote in `draft/` (it holds llmsweep's provenance file) when the new write has none: it is the old
model's, of the old vocabulary, and a recipe naming it would serve it beside the new model.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from llmsweep.errors import ConfigError

PROVENANCE_FILES = ("llmsweep-synth.json", "llmsweep-import.json")
"""The records `model synth` and `model import` write beside what they wrote."""
STALE_FILES = ("model.safetensors.index.json", *PROVENANCE_FILES)
"""Files of a previous model in the directory that a new write must not leave behind (besides `*.safetensors`)."""
DRAFT_DIR = "draft"
"""Where `model synth --with-draft` writes the drafter, inside the model's directory."""


def check_out(out: Path, force: bool) -> None:
    """Refuse an `--out` that is a file, or a non-empty directory without `force`."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file", fix="name a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConfigError(f"--out {out} is not empty", fix="choose an empty directory or pass --force")


def _write_error(out: Path, exc: OSError) -> ConfigError:
    where = f" ({exc.filename})" if exc.filename else ""
    return ConfigError(
        f"cannot write the model directory {out}: {exc.strerror or exc}{where}",
        fix="choose a writable --out on a filesystem with room for the weights",
    )


def _remove_stale(directory: Path, staged: Path) -> None:
    """Remove `directory`'s weights and provenance files that `staged` does not replace, and a drafter llmsweep wrote
    in `draft/` that it does not replace (a folder of the user's own is kept)."""
    for path in directory.iterdir():
        if (staged / path.name).exists():
            continue
        stale = path.name in STALE_FILES or path.name.endswith(".safetensors")
        if stale and path.is_file():
            path.unlink()
        elif (path.name == DRAFT_DIR and path.is_dir() and not path.is_symlink()
              and any((path / name).is_file() for name in PROVENANCE_FILES)):
            shutil.rmtree(path)


def _merge(staged: Path, out: Path) -> None:
    """Move `staged`'s files into the existing directory `out`, replacing those of the same name; config.json last."""
    if (staged / "config.json").is_file():
        _remove_stale(out, staged)
    entries = sorted(staged.iterdir(), key=lambda p: p.name == "config.json")
    for path in entries:
        target = out / path.name
        if path.is_dir() and target.is_dir():
            _merge(path, target)
        else:
            if target.is_dir():
                shutil.rmtree(target)
            shutil.move(path, target)  # a rename, unless `out` is another filesystem's mount point


@contextmanager
def staged_out(out: Path, force: bool) -> Iterator[Path]:
    """A fresh directory to write the model into; on success its contents become `out`, on failure it is removed.

    OS errors (no space, no permission, a path through a file) become a `ConfigError` naming `out`."""
    check_out(out, force)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if staging.exists():
            shutil.rmtree(staging)  # a killed earlier write of this same process id
        staging.mkdir()
    except OSError as exc:
        raise _write_error(out, exc) from exc
    try:
        yield staging
        check_out(out, force)  # the directory may have been filled while this one was written
        if out.exists():
            _merge(staging, out)
        else:
            staging.rename(out)
    except OSError as exc:
        raise _write_error(out, exc) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
