"""The version of the engine a host would serve a launch with, read before it starts: for `run --reuse` of a job the
local executor serves with the host's own engine (no image pins the build), whose stored result stands for this run
only if the host still has the engine that measured it.

Read from the interpreter the launch would run (`python3 -m sglang.launch_server`'s `python3` on the launch's PATH,
or the one a console script such as `vllm` names in its `#!` line): the engine distribution's installed version
(`importlib.metadata`, which imports nothing of the engine), else its top-level module's `__version__`.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from llmsweep.engine_ids import ENGINE_IDS
from llmsweep.engines.launch import LaunchSpec

log = logging.getLogger(__name__)

PROBE = ("import sys\n"
         "try:\n"
         "    import importlib.metadata as m; print(m.version(sys.argv[1]))\n"
         "except Exception:\n"
         "    print(__import__(sys.argv[1]).__version__)\n")
"""What the interpreter runs: the distribution's version, else the module's `__version__` (argv[1]: the package)."""
TIMEOUT_S = 120.0
"""An engine import (the fallback) can take a minute on a cold disk."""


def launch_interpreter(spec: LaunchSpec, path: str | None) -> str | None:
    """The python a launch runs its engine in: argv[0] of `python3 -m …`, or the interpreter a console script's `#!`
    line names (`#!/usr/bin/env python3` read through `path`); None when neither can be found."""
    if not spec.argv:
        return None
    exe = shutil.which(spec.argv[0], path=path)
    if exe is None:
        return None
    if spec.argv[1:2] == ("-m",):
        return exe
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(4096).decode("utf-8", "replace")
    except OSError:
        return None
    named = shebang_interpreter(first)
    if named is None:
        return None
    word, on_path = named
    return shutil.which(word, path=path) if on_path else word


def shebang_interpreter(first_line: str) -> tuple[str, bool] | None:
    """The interpreter a script's first line names: (its path, False) for `#!/usr/bin/python3`, (its name, True) for
    `#!/usr/bin/env python3` or `env -S python3 -u` (found on the PATH of whoever runs it); None when the line is no
    `#!` line."""
    first = first_line.strip()
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        return (words[0], True) if words else None
    return words[0], False


def host_engine_version(spec: LaunchSpec, env: Mapping[str, str] | None = None) -> str | None:
    """The version of `spec.engine` the interpreter of its launch has installed, as that interpreter reads it under
    `env` (default this process's environment, the launch's own variables over it); None when it cannot be read."""
    identity = ENGINE_IDS.get(spec.engine)
    if identity is None or identity.package is None:
        return None
    environ = {**(env if env is not None else os.environ), **spec.env}
    python = launch_interpreter(spec, environ.get("PATH"))
    if python is None:
        return None
    try:
        done = subprocess.run([python, "-c", PROBE, identity.package], capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=environ, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("cannot read the host's %s version with %s: %s", spec.engine, python, exc)
        return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        log.info("cannot read the host's %s version with %s: %s", spec.engine, python, done.stderr.strip()[-300:])
        return None
    return lines[-1].strip() or None
