"""The wording of a server's launch failure as a job's reason, light to import: `ready` and `lifecycle` write it,
and the report reads its gist back to group jobs that failed for one cause (`failure_gist`).

A launch failure reads `<engine> server <what>` then the server log's last lines (`log_tail`); the jobs of a group
whose server could not be started again read `the <engine> server of group <id> never came up: <that reason>`
(`never_came_up`); a Slurm worker that died mid-job fails that job with its batch log's last lines the same way
(`slurm.WorkerEnd`). The log's name (`server.log`, `server.2.log` for a relaunch), its port and the fix that counts
launches differ from job to job; the cause does not.
"""

from __future__ import annotations

import re

_TAIL = re.compile(r"\n--- last \d+ lines of .* ---\n")
_NEVER = re.compile(r"^the \S+ server of group \S+ never came up: ")


FAIL_FAST_NOT_RUN = "not run: the sweep stopped before this job (fail-fast)"
"""The reason of a job `--fail-fast` left out: the driver's, and a Slurm worker's that stopped after a failed job."""


def log_tail(lines: int, log: object, tail: str) -> str:
    """What follows a launch failure's headline: the server log's last `lines` lines, or that the log is empty."""
    return f"\n--- last {lines} lines of {log} ---\n{tail}" if tail else f" (log {log} is empty)"


def never_came_up(engine: str, group: str, reason: str) -> str:
    """The reason of a job whose group's server could not be started again (`reason`: why it failed last)."""
    return f"the {engine} server of group {group} never came up: {reason}"


def failure_gist(reason: str) -> str:
    """One line that says why a job failed, the same for every job of one cause: the headline without the
    never-came-up preamble, and the engine's own error from the server log's tail (its last line that says `error`,
    as a traceback's last line or the simulator's `error:` does; else its last line), if it has one."""
    reason = _NEVER.sub("", reason)
    parts = _TAIL.split(reason, maxsplit=1)
    head = parts[0].strip().splitlines()[0] if parts[0].strip() else parts[0]
    if len(parts) == 1:
        return head
    lines = [line.strip() for line in parts[1].splitlines() if line.strip()]
    said = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "")
    return f"{head}: {said}" if said else head
