"""Run one external command (sbatch, squeue, docker, nvidia-smi) with a timeout, never a silent hang.

InferenceX runs hung forever on `squeue` and went green on failures nobody checked; here every external call has a
timeout, and a failure becomes an error that names the command, its exit status and what it printed.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from llmsweep import shell
from llmsweep.errors import LaunchError

log = logging.getLogger(__name__)


def describe(argv: Sequence[str]) -> str:
    return shell.join(argv)


def run_command(
    argv: Sequence[str],
    *,
    timeout_s: float,
    fix: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
    input_text: str | None = None,
    new_session: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `argv`, capture its output, raise :class:`LaunchError` naming it on timeout, absence or failure.

    `new_session` keeps a terminal's Ctrl-C away from it (a teardown command killed halfway leaves a container).
    """
    log.debug("running %s (timeout %.0f s)", describe(argv), timeout_s)
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            input=input_text,
            stdin=None if input_text is not None else subprocess.DEVNULL,
            start_new_session=new_session,
        )
    except FileNotFoundError as exc:
        raise LaunchError(f"`{argv[0]}` is not installed or not on PATH (running `{describe(argv)}`)", fix=fix) from exc
    except subprocess.TimeoutExpired as exc:
        raise LaunchError(f"`{describe(argv)}` did not answer within {timeout_s:.0f} s", fix=fix) from exc
    if check and proc.returncode != 0:
        output = (proc.stderr.strip() or proc.stdout.strip())[-2000:]
        raise LaunchError(f"`{describe(argv)}` failed with exit status {proc.returncode}: {output}", fix=fix)
    return proc
