"""Slurm executor: submit a batch job whose body runs the job lifecycle on the allocated node.

On the node, the worker (the harness's own Python) launches the server as an `srun` step, in the engine image through
pyxis when the spec has one, and runs the client next to it; artifacts land in the out directory directly (shared
filesystem). Lessons from InferenceX are built in: every Slurm command has a timeout and a failure names the command;
job ids come from `sbatch --parsable` and an empty or malformed id is an error (never a grep that matches everything);
ids are written down; interrupting the submitter cancels its jobs; the job's exit code is what the caller sees.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from llmsweep import shell
from llmsweep.engines.launch import LaunchSpec, env_assignment
from llmsweep.errors import ConfigError, LaunchError
from llmsweep.execute import failure_text
from llmsweep.execute.artifacts import PID_FILES, SLURM_JOB_ID_FILE
from llmsweep.execute.base import HostPath, ImageMount
from llmsweep.execute.commands import describe, run_command
from llmsweep.execute.executor import Event, register_executor, validate_options
from llmsweep.execute.handle import log_tail
from llmsweep.execute.pyxis import (
    NODE_LAUNCHER_ENV,
    NodeLaunch,
    SrunOptions,
    import_image_script,
    option_mounts,
    scontrol_show,
    squash_path,
    write_node_launch,
)
from llmsweep.execute.signals import (
    INTERRUPT_SIGNALS,
    INTERRUPTED_REASONS,
    Interrupted,
    exit_said,
    handling,
    hurried,
    interrupt,
    received,
    shielded,
)
from llmsweep.findings import visible_text
from llmsweep.option_spellings import flag as _flag
from llmsweep.words import count_of, noun

_OPTION = _flag("executor_option")
"""`--executor-option`, as this module's fixes name it: read from its one home, `option_spellings`."""
_OUT = _flag("out")
"""`run --out`, as the messages below name it."""
_REPEATS = _flag("repeats")
"""`run --repeats`, as the fixes below name it."""
_RESUME = _flag("resume")

if TYPE_CHECKING:
    import subprocess

    from llmsweep.execute.lifecycle import JobOutcome, LifecycleSettings, ServerGroup

log = logging.getLogger(__name__)

DEFAULT_WORKER_COMMAND: tuple[str, ...] = (
    "{python}", "-m", "llmsweep.cli.main", "run", "--_worker", "{group}", _OUT, "{out}",
)
_JOB_ID = re.compile(r"^(\d+)(?:;[\w.-]+)?$")
_FINISHED_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
)
PYTHON_CHECK_EXIT = 65
_SLURM_FIX = ("check that slurmctld answers (`scontrol ping`, under the SLURM_CONF the run has) and start it if it "
              "is down (llmsweep's own test clusters: scripts/ci/start_slurm.sh, the multi-node one "
              "scripts/ci/start_slurm_multinode.sh)")


class SlurmOptions(BaseModel):
    """Where and how batch jobs are submitted, and how their servers start on the node."""

    model_config = ConfigDict(extra="forbid")

    partition: str | None = Field(default=None, description="--partition (default: the cluster's default).")
    account: str | None = Field(default=None, description="--account.")
    time_limit: str = Field(default="02:00:00", description="--time of each job; Slurm kills it after this.")
    exclude: tuple[str, ...] = Field(default=(), description="Known-bad nodes, passed as --exclude.")
    gpu_type: str | None = Field(default=None, description="GRES type, e.g. 'h200' → --gres=gpu:h200:N.")
    exclusive: bool = Field(default=False, description="--exclusive node allocation (always, for a multi-node job "
                            "launched role by role: its roles listen on fixed ports of their nodes).")
    cpus_per_task: int | None = Field(default=None, gt=0, description="--cpus-per-task.")
    mem: str | None = Field(default=None, description="--mem, e.g. '64G'.")
    extra_sbatch: tuple[str, ...] = Field(
        default=(), description="More #SBATCH flags, e.g. '--qos=high' (a value given apart, '--qos', 'high', stays "
        "on its flag's line). A --time/-t here overrides time_limit (sbatch takes the last one).",
    )
    job_name_prefix: str = Field(default="llmsweep", description="Job names are <prefix>-<name>.")
    python: str = Field(default=sys.executable, description="Python of the harness on the node (≥ 3.11).")
    worker_command: tuple[str, ...] = Field(
        default=DEFAULT_WORKER_COMMAND,
        description="Command the job runs on the node; {python}, {group}, {out}, {launcher} are substituted.",
    )
    squash_dir: HostPath | None = Field(default=None, description="Shared cache of enroot squash files (image jobs).")
    import_lock_timeout_s: int = Field(default=600, ge=0, description="flock -w on <sqsh>.lock.")
    import_timeout_s: int = Field(default=3600, gt=0, description="Timeout of one `enroot import`.")
    import_env: dict[str, str] = Field(
        default_factory=dict, description="Env for the import, e.g. ENROOT_CACHE_PATH on local disk (NFS root-squash).",
    )
    node: SrunOptions = Field(default_factory=SrunOptions, description="How the node starts the server.")
    command_timeout_s: float = Field(default=60.0, gt=0, allow_inf_nan=False,
                                     description="Timeout of each sbatch/squeue/scontrol/scancel call.")
    poll_s: float = Field(default=5.0, gt=0, allow_inf_nan=False, description="squeue polling interval while waiting.")
    max_poll_failures: int = Field(default=5, gt=0, description="Consecutive failed squeue calls before giving up "
                                   "(once lost_track_s has passed too).")
    lost_track_s: float = Field(
        default=600.0, ge=0, allow_inf_nan=False,
        description="How long squeue may keep failing (slurmctld restarted, failing over, overloaded) before a "
        "batch job is given up for lost; its jobs' outcomes are still read back meanwhile.",
    )
    cancel_wait_s: float = Field(default=120.0, ge=0, allow_inf_nan=False,
                                 description="How long to wait for a cancelled job to leave the queue.")
    pending_note_s: float = Field(
        default=300.0, gt=0, allow_inf_nan=False,
        description="While a job waits in the queue, say so (with Slurm's reason) this often; the first note comes "
        "after a fifth of it.",
    )
    relay_worker_log: bool = Field(
        default=True,
        description="Pass the batch job's progress (the lines its worker writes to slurm-<id>.err) on to the run's "
        "output as they come, prefixed [slurm <id>].",
    )

    @field_validator("partition", "account", "time_limit", "gpu_type", "mem")
    @classmethod
    def _one_token(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            _check_sbatch_value(value, str(info.field_name))
        return value

    @field_validator("exclude", "extra_sbatch")
    @classmethod
    def _tokens(cls, values: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        for value in values:
            _check_sbatch_value(value, str(info.field_name))
        if info.field_name == "extra_sbatch":
            _refuse_overrides(values)
            for given in _times_given(values):
                time_limit_s(given, what=_EXTRA_TIME)
            _mems_given(values)  # a memory flag without its size is refused here, as a time flag's is
        return values

    @field_validator("worker_command")
    @classmethod
    def _worker_module_name(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        module = _worker_module(values)
        if module is not None and not _is_module_name(module):
            raise ValueError(f"worker_command runs `-m {module}`, which is not a Python module name (dotted "
                             "identifiers, e.g. llmsweep.cli.main); give the module {python} -m should run, or a "
                             "script path in place of `-m MODULE`")
        return values

    @field_validator("import_env")
    @classmethod
    def _import_env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:  # the batch script exports each: `export A=B=c` set A, `export 'A B=c'` failed under set -e
            if not shell.NAME.fullmatch(key):
                raise ValueError(f"import_env.{key}: {key!r} is not a shell variable name, which the batch script "
                                 "exports; give the variable's name (letters, digits and _, not first a digit), e.g. "
                                 "import_env: {ENROOT_CACHE_PATH: /local/enroot}")
        return env

    @field_validator("time_limit")
    @classmethod
    def _time_limit(cls, value: str) -> str:
        time_limit_s(value)
        return value

    @property
    def effective_time_limit(self) -> TimeLimit:
        """The time limit the batch jobs run under: the last `--time`/`-t` in `extra_sbatch` when it gives one (sbatch
        takes the last given, and the rendered script puts `extra_sbatch` after `time_limit`), else `time_limit`."""
        given = _times_given(self.extra_sbatch)
        if given:
            return TimeLimit(given[-1], time_limit_s(given[-1], what=_EXTRA_TIME), "extra_sbatch")
        return TimeLimit(self.time_limit, time_limit_s(self.time_limit), "time_limit")

    @property
    def effective_mem(self) -> MemoryAsked:
        """The memory the batch jobs ask for: the last `--mem`, `--mem-per-cpu` or `--mem-per-gpu` in `extra_sbatch`
        when it gives one (the rendered script puts `extra_sbatch` after `mem`, and sbatch takes the last given),
        else `mem`; and whether they hold their nodes whole, by `exclusive` or a bare `--exclusive` in
        `extra_sbatch` (`--exclusive=user`/`mcs`/`topo` shares the node still). Each with the option that set it."""
        given = _mems_given(self.extra_sbatch)
        exclusive = "exclusive" if self.exclusive else "extra_sbatch" if "--exclusive" in self.extra_sbatch else None
        if given:
            flag, size = given[-1]
            return MemoryAsked(flag, size, "extra_sbatch", exclusive)
        return MemoryAsked("--mem" if self.mem else None, self.mem, "mem" if self.mem else None, exclusive)


_SBATCH_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")


def _check_sbatch_value(value: str, field_name: str) -> None:
    """An option lands on an `#SBATCH` line as one token: whitespace would end it there (sbatch drops the rest of the
    line without a word) and a newline would end the directives and start a shell command."""
    if not value or _SBATCH_UNSAFE.search(value):
        raise ValueError(f"{field_name} {value!r} is empty or holds whitespace or control characters, which an "
                         "#SBATCH line cannot carry; give one token per value (e.g. extra_sbatch: ['--qos=high', "
                         "'--constraint=h200'])")


_OUT_FILES = ("the driver reads the batch job's output back from <out>/slurm-<id>.out and .err; leave it out (give "
              f"another {_OUT} to put them elsewhere)")
_COUNTS = ("the script sets the node and task counts from the deployment (one node and task; one task on each node "
           "of a multi-node one), and the worker starts each server as a step of its own; leave it out")
_GPUS = ("the script asks for the job's GPUs (--gres=gpu[:<gpu_type>]:<count>) from the deployment, and the result is "
         "labelled with that count; a later GPU request would replace it (another --gres drops the GPUs); leave it out "
         "(the GPU model goes in the gpu_type option)")
_SCRIPT_OWNS: dict[str, str] = {
    "export": "the worker needs the submitting environment (the script sets --export=ALL); leave it out: a server's "
              "variables go in its recipe env, the image import's in the import_env option",
    "requeue": "the script sets --no-requeue: a requeued batch job ran its worker again from the first job, measuring "
               f"anew jobs already stored; leave it out (`{_RESUME}` runs the unfinished jobs again)",
    "output": _OUT_FILES,
    "error": _OUT_FILES,
    "chdir": f"the batch job runs in its out directory, where it writes its files; leave it out (give another {_OUT})",
    "parsable": "the driver submits with --parsable already; leave it out",
    "clusters": "the driver polls and cancels the job without -M, so it would lose it on the other cluster (Ctrl-C "
                "left it running); leave it out and run llmsweep on a login node of that cluster",
    "cluster": "the driver polls and cancels the job without -M, so it would lose it on the other cluster (Ctrl-C "
               "left it running); leave it out and run llmsweep on a login node of that cluster",
    "array": "the driver tracks one batch job per server group, not an array of them; leave it out (repeats: "
             f"{_REPEATS})",
    "nodes": _COUNTS,
    "ntasks": _COUNTS,
    "ntasks-per-node": _COUNTS,
    "wait": "sbatch would not return until the job ended, past the driver's command_timeout_s, and the job would run "
            "untracked; leave it out (the driver waits for the job itself)",
    "gres": _GPUS,
    "gpus": _GPUS,
    "gpus-per-node": _GPUS,
    "gpus-per-task": _GPUS,
    "gpus-per-socket": _GPUS,
}
"""The sbatch options the batch script or its driver depends on (`render_batch_script`, `SlurmJob`), by long name, with
why and what to do instead: given in extra_sbatch they would win (sbatch takes the last), so they are refused."""
_SHORT_OWNED = {"o": "output", "e": "error", "D": "chdir", "M": "clusters", "a": "array", "N": "nodes", "n": "ntasks",
                "W": "wait", "G": "gpus"}
"""The short forms of `_SCRIPT_OWNS`' options."""
_SHORT_VALUED = frozenset("aAbBcCdDeFGiJkLmMnNopqStwx")
"""sbatch's short options that take a value (in the same token, `-o/x`, or the next, `-o /x`; `-k`'s is optional, in
the same token only: `-koff`); the others are flags, which may share a token (`-Qo/x`)."""


def _refuse_overrides(tokens: Sequence[str]) -> None:
    """A ValueError naming the first option of `tokens` (extra_sbatch) the batch script depends on (`_SCRIPT_OWNS`),
    in any of sbatch's forms: `--flag=value`, `--flag value`, an abbreviation sbatch would take (`--out=`), `-o value`,
    `-ovalue`, after other short flags (`-Qo`)."""
    for token in tokens:
        if token.startswith("--"):
            given = token[2:].split("=", 1)[0]
            owned = next((name for name in _SCRIPT_OWNS if given and name.startswith(given)), None)
            flag = f"--{given}"
        elif token.startswith("-"):
            owned, flag = None, token
            for letter in token[1:]:
                if letter in _SHORT_OWNED:
                    owned, flag = _SHORT_OWNED[letter], f"-{letter}"
                    break
                if letter in _SHORT_VALUED:  # the rest of the token is its value
                    break
        else:
            continue  # the value of the flag before it
        if owned is not None:
            named = flag if flag == f"--{owned}" else f"{flag} (--{owned})"
            raise ValueError(f"extra_sbatch {token!r}: {named} overrides what the batch script depends on (sbatch "
                             f"takes the last one given): {_SCRIPT_OWNS[owned]}")


def expand_hostlist(text: str) -> tuple[str, ...]:
    """The node names of a Slurm hostlist as Slurm writes one (NodeList, srun's `Node failure on %s`, `sinfo %N`):
    `mn[1-2]` is mn1 and mn2, `gpu[01-03,7]` keeps the zero padding of its ranges, `r[1-2]n[1-2]` is every pair, and
    `a,b[1-2]` lists several; what `scontrol show hostnames` prints, without asking the controller. Each name once, in
    the list's order; a part that is no hostlist (unbalanced brackets, a range that is not numbers) is kept as written.
    """
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    names: dict[str, None] = {}
    for part in (p.strip() for p in parts):
        if part:
            names.update(dict.fromkeys(_expand_part(part) or (part,)))
    return tuple(names)


def _expand_part(part: str) -> list[str] | None:
    """The names of one hostlist part without top-level commas (`mn[1-2,5]x[1-2]`); None when it is no hostlist."""
    opening = part.find("[")
    if opening < 0:
        return None if "]" in part else [part]
    closing = part.find("]", opening)
    if closing < 0 or "[" in part[opening + 1:closing]:
        return None
    values: list[str] = []
    for spec in part[opening + 1:closing].split(","):
        low, dash, high = spec.strip().partition("-")
        if not low.isdigit() or (dash and not high.isdigit()) or (dash and int(high) < int(low)):
            return None
        width = len(low)
        values += [str(n).zfill(width) for n in range(int(low), int(high if dash else low) + 1)]
    rest = _expand_part(part[closing + 1:]) if part[closing + 1:] else [""]
    if rest is None:
        return None
    return [part[:opening] + value + tail for value in values for tail in rest]


def exclude_option(names: Sequence[str]) -> str:
    """`--executor-option`'s `exclude=[A,B]` that leaves nodes `names` out, each written so the option's YAML reads it
    back as that name (quoted where YAML would read it as something else: `01`, `yes`), and the whole one shell word
    (`shell.quote`: `'exclude=[A,B]'`) as a fix shows it to paste: bare, zsh takes `[A,B]` for a glob and refuses the
    line (`no matches found`), as bash does under `failglob`. A placeholder (`NODE`) is written the same way."""
    import yaml

    def entry(name: str) -> str:
        try:
            plain = yaml.safe_load(f"[{name}]") == [name]
        except yaml.YAMLError:
            plain = False
        return name if plain else json.dumps(name)

    return shell.quote(f"exclude=[{','.join(entry(name) for name in names)}]")


@dataclass(frozen=True)
class DownNode:
    """A node `sinfo` shows failed (`down_nodes`: down, failing, not responding), with the reason Slurm keeps for it
    (`%E`; None when it has none)."""

    name: str
    state: str
    reason: str | None = None

    def text(self) -> str:
        return f"{self.name} ({self.state}" + (f": {self.reason}" if self.reason else "") + ")"


@dataclass(frozen=True)
class SrunNodeFailure:
    """Nodes a step's srun said failed, in the logs of the batch job's server folder (`srun_node_failures`)."""

    said: tuple[str, ...]
    """The node lists as srun wrote them (`mn1`, `mn[1-2]`: a hostlist), each once."""
    logs: tuple[Path, ...]
    """The logs that say it, in the order read."""

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes that failed, each by its name (`said`'s hostlists expanded: `expand_hostlist`)."""
        return expand_hostlist(",".join(self.said))

    def text(self) -> str:
        lines = " and ".join(f"`srun: error: Node failure on {node}`" for node in self.said)
        return f"{lines} in {', '.join(str(path) for path in self.logs)}"


@dataclass(frozen=True)
class SlurmJobResult:
    """How a batch job ended. `ok` only when Slurm says COMPLETED and the script exited 0."""

    job_id: str
    state: str
    exit_code: int
    stdout_path: Path
    stderr_path: Path
    node: str | None = None
    """The node its batch script (and the worker) ran on, as `scontrol` names it (BatchHost); None when Slurm had
    forgotten the job (the exit read from the rc file) or did not say."""
    nodes: str | None = None
    """Every node of its allocation, as Slurm writes the list (NodeList: `vm`, `mn[0-2]`); None when Slurm did not
    say."""
    down: tuple[DownNode, ...] | None = None
    """For a batch job that ended NODE_FAIL or BOOT_FAIL: those of its nodes `sinfo` shows failed as the job is read
    back (`down_nodes`; empty: none any more, Slurm returned them to service); None when not asked or sinfo did not
    answer."""
    srun_said: SrunNodeFailure | None = None
    """For a batch job that ended NODE_FAIL where `sinfo` shows none of its nodes down (Slurm returned the failed one
    to service at once: `ReturnToService=2`), the nodes its steps' srun said failed, in their logs; None when none
    said so, or `sinfo` named the node."""
    unknown_state: str | None = None
    """Why Slurm's own final state of the batch job is not known (scontrol no longer knows the job and sacct cannot
    say: accounting disabled, no record): `state` then says no more than the exit status of its rc file does
    (COMPLETED for 0, else FAILED), and every text says so (`ended`). None when Slurm said the state."""

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == 0

    @property
    def ended(self) -> str:
        """How it ended as a reason says it: `ended TIMEOUT (exit 143)`, or, its state unknown, the exit status and
        why Slurm cannot say more."""
        if self.unknown_state is None:
            return f"ended {self.state} (exit {self.exit_code})"
        return f"ended with exit status {self.exit_code} ({self.unknown_state})"

    def raise_for_status(self) -> SlurmJobResult:
        if not self.ok:
            tail = log_tail(self.stderr_path, 20) or log_tail(self.stdout_path, 20)
            said = (f"ended {self.state} with exit code {self.exit_code}" if self.unknown_state is None
                    else self.ended)
            raise LaunchError(
                f"Slurm job {self.job_id} {said}"
                + (f"\n--- tail of {self.stderr_path} ---\n{tail}" if tail else ""),
                fix=f"read {self.stdout_path} and {self.stderr_path} and the server log in the job's out directory",
            )
        return self


def parse_job_id(stdout: str) -> str:
    """The job id of `sbatch --parsable` output (`ID` or `ID;cluster`); anything else is an error."""
    lines = [line.strip() for line in stdout.strip().splitlines() if line.strip()]
    match = _JOB_ID.match(lines[-1]) if lines else None
    if match is None:
        raise LaunchError(
            f"sbatch --parsable printed {stdout.strip()!r}, not a job id",
            fix="check the sbatch output above; llmsweep never guesses a job id",
        )
    return match.group(1)


_SAFE_PATH = re.compile(r"^[\w./+@=,:-]+$")


def _check_path(path: Path, what: str) -> None:
    """#SBATCH lines cannot quote, and Slurm expands '%': only plain path characters are accepted."""
    if not _SAFE_PATH.match(str(path)):
        raise ConfigError(
            f"{what} {path} contains characters #SBATCH lines cannot carry (whitespace, %, quotes, $)",
            fix="choose a directory whose path has only letters, digits and ./_+@=,:-",
        )


def _substitute(part: str, values: Mapping[str, str]) -> str:
    """Fill {python} {group} {out} {launcher}; other braces (JSON in an argument) are left alone."""
    for key, value in values.items():
        part = part.replace("{" + key + "}", value)
    return part


PYTHON_FIX = f"give a Python >= 3.11 with llmsweep and its dependencies installed: {_OPTION} python=PATH"
"""The fix for a node whose Python cannot run the worker (the batch script says it, and the driver quotes it)."""
_PYTHON_CHECK_SAID = "llmsweep: node python: "
"""How the batch script's line begins when the node's Python cannot run the worker (read back by the driver)."""


def _worker_module(worker_command: Sequence[str]) -> str | None:
    """The module the worker command's `{python}` runs (`{python} [-X opt ...] -m MODULE`): what the check imports.
    None when `{python}` runs a script (its own `sys.path` is its business) or is not there; a `-m` of a wrapper
    before it (`numactl -m 0 {python} ...`) is not the worker's."""
    try:
        at = next(i for i, part in enumerate(worker_command) if part == "{python}")
    except StopIteration:
        return None
    args = list(worker_command[at + 1:])
    while args and args[0].startswith("-") and args[0] != "-m":  # the interpreter's own options (-u, -X dev, -O)
        args = args[2:] if args[0] in ("-X", "-W") else args[1:]
    return args[1] if len(args) > 1 and args[0] == "-m" else None


def _is_module_name(module: str) -> bool:
    """Whether `module` is what `python -m` imports: dotted Python identifiers (`llmsweep.cli.main`)."""
    return all(part.isidentifier() for part in module.split("."))


WORKER_IMPORTS: tuple[str, ...] = ("llmsweep.execute.pipeline", "llmsweep.client.transport", "llmsweep.client.scrape")
"""What the batch script's check imports after the worker's module: the modules a job's lifecycle runs, which bring
in the dependencies it needs (pydantic, PyYAML and numpy; aiohttp for the load; prometheus_client for the scrape).
The worker's own module (llmsweep's CLI) imports them only as a job runs: a Python without them passed the check,
then every job failed with "internal error: ModuleNotFoundError". `tests/unit/execute/test_slurm_render.py` checks
that they bring in every dependency a worker job imports."""

_VERSION_CHECK = ('import sys; print("%d.%d.%d" % tuple(sys.version_info[:3])); '
                  "sys.exit(sys.version_info < (3, 11))")
"""The node Python's version, and whether it is new enough (Python 2 runs it too, and says its version)."""
_IMPORT_CHECK = (
    "import importlib, sys\n"
    "for name in sys.argv[1:]:\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "    except Exception as exc:\n"
    '        lost = getattr(exc, "name", None) if isinstance(exc, ImportError) else None\n'
    '        what = f"{type(exc).__name__}: {exc}"\n'
    '        if lost and lost != name and not name.startswith(lost + "."):\n'
    '            print(f"{lost}, which {name} needs ({what})")\n'
    "        else:\n"
    '            print(f"{name} ({what})")\n'
    "        sys.exit(1)")
"""Import each module named on the command line in turn; the first that fails is said (a dependency it lacks named
first), and the check exits 1. No `'` in it: the batch script carries it in single quotes, line by line as it is."""


def _python_check(python: str, module: str | None) -> str:
    """Fail in a second, before any image import, when the harness Python on the node cannot run the client: missing
    (or not executable), older than 3.11, or unable to import the worker's module and the modules a job runs
    (`WORKER_IMPORTS`: llmsweep or one of its dependencies missing, with the batch job's environment, its PYTHONPATH
    included; `module` None, a script worker: the version only). Exit `PYTHON_CHECK_EXIT`, with a line the driver
    reads back (`python_check_reason`).

    The Python and the modules reach the line the check says only as shell variables or as the words a Python prints:
    inside the echo's double quotes a `$(...)` or backtick in either would have run on the node."""
    exe = shell.quote(python)
    said = f"{_PYTHON_CHECK_SAID}$llmsweep_python on $(hostname)"
    version = (
        f"llmsweep_python={exe}\n"
        f"llmsweep_said=$({exe} -c {shell.quote(_VERSION_CHECK)} 2>&1) && llmsweep_rc=0 || llmsweep_rc=$?\n"
        'if [ "$llmsweep_rc" -ne 0 ]; then\n'
        '  llmsweep_said=$(printf %s "$llmsweep_said" | tail -n 1)\n'
        '  case "$llmsweep_rc:$llmsweep_said" in\n'
        "    127:*) llmsweep_said='does not exist (no such file on this node, nor a command on its PATH)' ;;\n"
        "    126:*) llmsweep_said='is not executable' ;;\n"
        '    *:[0-9]*.[0-9]*.[0-9]*) llmsweep_said="is Python $llmsweep_said, older than 3.11" ;;\n'
        '    *) llmsweep_said="does not run as Python 3.11 or newer ($llmsweep_said)" ;;\n'
        "  esac\n"
        f'  echo "{said} $llmsweep_said; the client cannot run; {PYTHON_FIX}" >&2\n'
        f"  exit {PYTHON_CHECK_EXIT}\n"
        "fi")
    if module is None:  # a script worker: what it imports is its own
        return version
    modules = " ".join(shell.quote(m) for m in dict.fromkeys((module, *WORKER_IMPORTS)))
    return version + "\n" + (
        f"if ! llmsweep_import=$({exe} -c '{_IMPORT_CHECK}' {modules} 2>&1); then\n"
        f'  echo "{said} cannot import $(printf %s "$llmsweep_import" | tail -n 1); the worker cannot run; '
        f'{PYTHON_FIX}" >&2\n'
        f"  exit {PYTHON_CHECK_EXIT}\n"
        "fi"
    )


def python_check_reason(result: SlurmJobResult) -> str | None:
    """Why the jobs of a batch job whose node Python failed the batch script's check (`_python_check`) never ran:
    the check's own line (which Python, on which node, what it lacks, the fix) and where to read more; None when the
    batch job did not end on that check."""
    if result.exit_code != PYTHON_CHECK_EXIT:
        return None
    try:
        text = result.stderr_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    said = [line[len(_PYTHON_CHECK_SAID):] for line in text.splitlines() if line.startswith(_PYTHON_CHECK_SAID)]
    if not said:
        return None
    return (f"Slurm job {result.job_id} {result.ended} before this job ran: the node's python {said[-1]}; see "
            f"{result.stderr_path}")


def job_name(options: SlurmOptions, name: str) -> str:
    return re.sub(r"[^\w.-]+", "-", f"{options.job_name_prefix}-{name}").strip("-")


def render_batch_script(
    spec: LaunchSpec, options: SlurmOptions, *, name: str, group_file: Path, out_dir: Path, launcher_file: Path,
    nodes: int = 1,
) -> str:
    """The sbatch script: resources, output files in `out_dir`, image import (if any), then the worker command.

    `nodes` > 1: the allocation of a job launched role by role (`execute.roles`), one task per node; the worker runs
    on the first node and starts each role as a step on its own node (only the simulator's roles are launched so
    far: they use no GPU)."""
    _check_path(out_dir, "out directory")
    _check_path(Path(options.python), "python")
    headers = [f"--job-name={job_name(options, name)}"]
    if options.partition:
        headers.append(f"--partition={options.partition}")
    if options.account:
        headers.append(f"--account={options.account}")
    if nodes > 1:
        headers += [f"--nodes={nodes}", "--ntasks-per-node=1", f"--time={options.time_limit}"]
    else:
        headers += ["--nodes=1", "--ntasks=1", f"--time={options.time_limit}"]
    if spec.gpus > 0:
        gres = f"gpu:{options.gpu_type}:{spec.gpus}" if options.gpu_type else f"gpu:{spec.gpus}"
        headers.append(f"--gres={gres}")
    if options.exclude:
        headers.append(f"--exclude={','.join(options.exclude)}")
    if options.exclusive or nodes > 1:
        # a role-by-role deployment holds its nodes whole: its roles listen on the ports its topology fixes on each
        # node (the simulator's workers 8000, its router 8001), so two deployments of one sweep that Slurm placed
        # side by side on shared nodes failed each other's start ("address already in use")
        headers.append("--exclusive")
    if options.cpus_per_task:
        headers.append(f"--cpus-per-task={options.cpus_per_task}")
    if options.mem:
        headers.append(f"--mem={options.mem}")
    # --no-requeue: a node that fails ends the batch job NODE_FAIL, which fails the jobs it had not finished and says
    # so; Slurm's default requeue ran the worker again from its first job, measuring anew (and moving aside) jobs
    # already stored valid, while the driver showed the last job draining for minutes without a word of it
    headers += [f"--output={out_dir}/slurm-%j.out", f"--error={out_dir}/slurm-%j.err", f"--chdir={out_dir}",
                "--export=ALL", "--no-requeue"]
    for i, token in enumerate(options.extra_sbatch):  # a value given apart (`--time`, `30`) stays on its option's line
        if i > 0 and not token.startswith("-"):
            headers[-1] += f" {token}"
        else:
            headers.append(token)
    values = {"python": options.python, "group": str(group_file), "out": str(out_dir), "launcher": str(launcher_file)}
    worker = shell.join(_substitute(part, values) for part in options.worker_command)
    lines = ["#!/bin/bash", *(f"#SBATCH {h}" for h in headers), "",
             "# Rendered by llmsweep.execute.slurm. The exit status of this script is the job's result.",
             "set -euo pipefail",
             # A worker that died without its teardown (killed: out of memory) leaves the servers it started itself
             # (`node.use_srun: false`) in their own session, which Slurm's process tracking may not follow once
             # they are orphaned: their pid files name them, and the job stops their process groups as it ends.
             "llmsweep_stop_servers() {",
             f"  local f pid; for f in {shell.quote(str(out_dir))}/{PID_FILES}; do",
             '    [ -f "$f" ] || continue',
             "    pid=$(grep -o '\"pid\": *[0-9]*' \"$f\" | grep -o '[0-9]*$' || true)",
             '    if [ -n "$pid" ] && [ "$pid" -gt 1 ]; then kill -TERM -- "-$pid" 2>/dev/null || true; fi',
             "  done",
             "}",
             f"trap 'rc=$?; llmsweep_stop_servers; echo $rc > {out_dir}/slurm-${{SLURM_JOB_ID}}.rc' EXIT",
             # killed by scancel, the time limit or preemption, $? in the EXIT trap would be the last command's 0
             # (the signals that unwind llmsweep itself, SIGQUIT's `scancel -s QUIT` and SIGUSR1's included)
             *(f"trap 'llmsweep_stop_servers; echo {128 + sig} > {out_dir}/slurm-${{SLURM_JOB_ID}}.rc; trap - EXIT; "
               f"exit {128 + sig}' {sig.name.removeprefix('SIG')}" for sig in INTERRUPT_SIGNALS),
             f"export {NODE_LAUNCHER_ENV}={shell.quote(str(launcher_file))}",
             "export PYTHONUNBUFFERED=1",
             'echo "llmsweep: job ${SLURM_JOB_ID} on $(hostname) started $(date -u +%FT%TZ)"']
    if any("{python}" in part for part in options.worker_command):
        lines.append(_python_check(options.python, _worker_module(options.worker_command)))
    if spec.image and options.node.use_srun:
        if options.squash_dir is None:
            raise ConfigError(
                f"the {spec.engine} job runs image {spec.image!r} under Slurm but no squash_dir is configured",
                fix="set squash_dir in the slurm executor options to a directory every node can read and write",
            )
        for key, value in sorted(options.import_env.items()):
            lines.append(f"export {env_assignment(key, value)}")
        lines.append(import_image_script(
            spec.image, squash_path(spec.image, options.squash_dir),
            lock_timeout_s=options.import_lock_timeout_s, import_timeout_s=options.import_timeout_s,
        ).rstrip("\n"))
    lines.append(worker)
    return "\n".join(lines) + "\n"


SBATCH_INPUT_ENV: dict[str, tuple[str, ...]] = {
    "--job-name": ("SBATCH_JOB_NAME",), "--partition": ("SBATCH_PARTITION",), "--account": ("SBATCH_ACCOUNT",),
    "--time": ("SBATCH_TIMELIMIT",), "--gres": ("SBATCH_GRES", "SBATCH_GPUS"), "--exclusive": ("SBATCH_EXCLUSIVE",),
    "--cpus-per-task": ("SBATCH_CPUS_PER_TASK",), "--mem": ("SBATCH_MEM_PER_NODE", "SBATCH_MEM_PER_CPU"),
    "--export": ("SBATCH_EXPORT",), "--no-requeue": ("SBATCH_REQUEUE", "SBATCH_NO_REQUEUE"),
    "--qos": ("SBATCH_QOS",), "--constraint": ("SBATCH_CONSTRAINT",), "--reservation": ("SBATCH_RESERVATION",),
    "--output": ("SBATCH_OUTPUT",), "--error": ("SBATCH_ERROR",),
    "--ntasks": ("SLURM_NTASKS", "SLURM_NPROCS"), "--ntasks-per-node": ("SLURM_NTASKS_PER_NODE",),
}
"""sbatch's input environment variables by the option each stands for: Slurm takes them over the script's `#SBATCH`
lines (command line > environment > script), so a site's `SBATCH_TIMELIMIT` shortened every batch job's `--time`
and an `SBATCH_EXPORT=NONE` left the worker without the driver's environment."""
SBATCH_DRIVER_ENV: dict[str, str] = {"SBATCH_CLUSTERS": "clusters", "SLURM_CLUSTERS": "clusters",
                                     "SBATCH_WAIT": "wait", "SBATCH_ARRAY_INX": "array"}
"""sbatch input variables that stand for an option no batch script of llmsweep's may take (`_SCRIPT_OWNS`, which
`extra_sbatch` refuses for the same reason), whatever its `#SBATCH` lines: never passed to sbatch."""
_SAID_ENV: set[str] = set()


def sbatch_environment(script: str, environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the sbatch input variables that would override an option the script's `#SBATCH` lines set
    (:data:`SBATCH_INPUT_ENV`) or that no batch script of llmsweep's may take (:data:`SBATCH_DRIVER_ENV`), each left
    out said once a process, with why."""
    options = {line.split()[1].split("=", 1)[0] for line in script.splitlines()
               if line.startswith("#SBATCH ") and len(line.split()) > 1}
    env = dict(environ)
    left_out = [(name, f"the batch script sets {option}, which it would override (Slurm takes the environment over "
                       "#SBATCH lines)")
                for option, names in SBATCH_INPUT_ENV.items() if option in options for name in names]
    left_out += [(name, f"it stands for --{option}: {_SCRIPT_OWNS[option]}")
                 for name, option in SBATCH_DRIVER_ENV.items()]
    for name, why in left_out:
        if name in env:
            value = env.pop(name)
            if name not in _SAID_ENV:
                _SAID_ENV.add(name)
                log.warning("sbatch: %s=%s in the environment is not passed: %s", name, value, why)
    return env


_UNREACHED = ("contact slurm controller", "socket timed out", "connection refused", "zero bytes", "munge")
"""Words of an sbatch error that says the controller was not reached (no refusal: `_SLURM_FIX` applies)."""


def unreached(said: str) -> bool:
    """Whether a Slurm command's error says it never reached slurmctld (:data:`_UNREACHED`): nothing was refused."""
    return any(word in said.lower() for word in _UNREACHED)


def the_controller(environ: Mapping[str, str] | None = None) -> str:
    """The Slurm controller a command asks, named for a message: its configuration where SLURM_CONF chooses it."""
    conf = (os.environ if environ is None else environ).get("SLURM_CONF")
    return f"the Slurm controller (slurmctld{f' of SLURM_CONF={conf}' if conf else ''})"


def controller_unanswered(failed: str, environ: Mapping[str, str] | None = None) -> LaunchError:
    """The error of a Slurm command that did not reach slurmctld (`failed`: the command and what it said), for every
    group alike — one node or many — so the run stops with it rather than refusing a group as if Slurm had judged it."""
    return LaunchError(f"{the_controller(environ)} does not answer: {failed}", fix=_SLURM_FIX)


def controller_down(environ: Mapping[str, str] | None = None, *, timeout_s: float = 30.0) -> str | None:
    """What `scontrol ping` says of slurmctld when no controller of the cluster answers it (one ping each, no retry:
    at once), else None — also when scontrol cannot be asked. A Slurm command against a controller that is down
    retries it for several seconds (sbatch about 10, `sbatch --test-only` about 20) before it gives up; a run says
    so before it waits."""
    try:
        proc = run_command(["scontrol", "ping"], timeout_s=timeout_s, env=environ, check=False, fix=_SLURM_FIX)
    except LaunchError:
        return None
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("Slurmctld")]
    if not lines or any(line.endswith(" is UP") for line in lines):
        return None
    return "; ".join(lines)


_NODE_CONFIG_FIX = ("ask for what a node of the partition has (`sinfo -N -o '%N %P %c %m %G'`: CPUs, memory, GPUs): "
                    f"{_OPTION} cpus_per_task=, mem=, gpu_type=, extra_sbatch, fewer nodes in exclude, or "
                    "another partition=NAME")
"""The fix when no node of the partition has what each node of the batch job asks for (Slurm's `Requested node
configuration is not available`)."""
_USABLE_NODE_STATES = frozenset({"idle", "mix", "alloc", "comp", "resv", "plnd"})
"""`sinfo %t` states, less their flag suffixes (`~` powered down, which Slurm powers up for a job), of a node that takes
jobs: idle, mixed, allocated, completing, reserved, planned. Not these: down, drained or draining, failing, in
maintenance, booting, unknown; nor one whose state ends in `*` (not responding)."""
_REFUSED_FIXES: tuple[tuple[str, str], ...] = (
    ("invalid partition", f"give a partition `sinfo` lists ({{partitions}}): {_OPTION} partition=NAME, or "
                          "leave it out for the cluster's default"),
    ("invalid account", "give an account you belong to (`sacctmgr show assoc user=$USER format=account,partition`): "
                        f"{_OPTION} account=NAME, or leave it out for your default account"),
    ("invalid qos", "give a QOS your account may use (`sacctmgr show assoc user=$USER format=qos`) in "
                    f"{_OPTION} extra_sbatch, or leave it out"),
    ("--time", f"give a Slurm time limit ({{formats}}): {_OPTION} time_limit=HH:MM:SS, or the --time in "
               "extra_sbatch"),
    ("time limit", f"give a time limit within the partition's (`sinfo -o '%P %l'`): {_OPTION} time_limit="
                   "HH:MM:SS"),
    ("node name", f"name only nodes `sinfo -N` lists in {_OPTION} exclude (or a --nodelist in extra_sbatch)"),
    ("node configuration is not available", _NODE_CONFIG_FIX),
    ("generic resource", f"give a GPU type the nodes have (`sinfo -o '%P %G'`): {_OPTION} gpu_type=TYPE, or "
                         "leave it out"),
)
"""What to do about a batch job sbatch refused, by the words of Slurm's reason (matched case-insensitively)."""
_REFUSED_ENV: dict[str, tuple[str, ...]] = {
    "invalid partition": ("SBATCH_PARTITION",), "invalid account": ("SBATCH_ACCOUNT",),
    "invalid qos": ("SBATCH_QOS",), "generic resource": ("SBATCH_GRES", "SBATCH_GPUS"),
}
"""The sbatch input variables that give what a refusal of `_REFUSED_FIXES` names, where the script sets no option of
its own for it (`sbatch_environment` passes them then): the refused value came from the environment, not from an
option the user gave."""


def refused_fix(message: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The fix for a batch job `sbatch` refused (`sbatch: error: ...`: its own check of an option, or the
    controller's `Batch job submission failed: REASON`): the option to change and how to see what the cluster offers;
    where sbatch took the refused value from its environment (`SBATCH_PARTITION`, ...: `environ`, as sbatch got it),
    that variable first. None when sbatch did not reach the controller or did not answer (`_SLURM_FIX` says what to
    check)."""
    said = message.lower()
    if "sbatch: error:" not in said or unreached(said):
        return None
    reason = said.split("sbatch: error:", 1)[1]  # sbatch's own check, or the controller's refusal
    for words, fix in _REFUSED_FIXES:
        if words in reason:
            if "{partitions}" not in fix:
                fix = fix.format(formats=TIME_FORMATS)
            else:
                try:
                    listed = run_command(["sinfo", "-h", "-o", "%P"], timeout_s=30.0, env=environ, check=False,
                                         fix=_SLURM_FIX).stdout.split()
                except LaunchError:
                    listed = []
                names = ", ".join(name.replace("*", " (the default)") for name in listed) or "none answered"
                fix = fix.format(partitions=names)
            given = [f"{name}={shell.quote(env[name])}" for env in (environ or {},)
                     for name in _REFUSED_ENV.get(words, ()) if env.get(name)]
            if given:  # not an option the user gave: the variable sbatch read it from (unset: the cluster's default)
                fix = re.sub(r", or leave it out\b.*$", "", fix)
                return (f"{' and '.join(given)} in the environment gave it, not the executor options (sbatch reads it "
                        f"where the script sets none): unset {noun(len(given), 'it', 'them')}, or "
                        + fix[0].lower() + fix[1:])
            return fix
    return _REFUSED_ANY_FIX


_REFUSED_ANY_FIX = ("check the slurm executor options (partition, account, cpus_per_task, mem, gpu_type, exclude, "
                    "extra_sbatch) against what `sinfo` and `scontrol show partition` say the cluster has")
"""The fix of a refusal whose words name no option (`refused_fix`): not known to be the input's fault."""


class AllocationRefused(LaunchError):
    """Slurm says it cannot allocate the nodes a group's topology needs (`sbatch --test-only`): that group's jobs are
    refused with the reason, the other groups run. Any other failure to submit a group stops the run, one node or
    many."""


@dataclass(frozen=True)
class JobEnd:
    """A batch job's end as Slurm keeps it (`scontrol show job`, or `sacct`): its state (the first word: `CANCELLED
    by 0` is CANCELLED), its batch script's exit status (`exit_of`), the node the script ran on and the nodes of its
    allocation. None where Slurm did not say."""

    state: str | None
    exit_code: int | None
    node: str | None = None
    nodes: str | None = None


def exit_of(code: str) -> int | None:
    """The exit status of Slurm's `ExitCode` (`STATUS:SIGNAL`, as scontrol and sacct write it); a signal that ended
    the batch script (`0:9`, a signal number 1-64) reads as the shell's 128 + signal, as its own exit after a killed
    child does. A second field past the signals is Slurm's own mark, no signal (`0:125` of an OUT_OF_MEMORY job:
    its SIG_OOM), and the status stands. None for anything else."""
    match = re.match(r"^(\d+):(\d+)$", code.strip())
    if match is None:
        return None
    status, sig = int(match.group(1)), int(match.group(2))
    return 128 + sig if 1 <= sig <= _MAX_SIGNAL else status


_MAX_SIGNAL = 64
"""The highest signal number (Linux's SIGRTMAX): Slurm writes codes of its own above it in ExitCode's signal field."""


SACCT_FIELDS = ("JobID", "State", "ExitCode", "NodeList", "WorkDir")
"""What `sacct_end` asks sacct for, in this order (`--format`)."""


def sacct_end(job_id: str, workdir: Path, *, timeout_s: float) -> JobEnd | str:
    """The end of batch job `job_id` as Slurm's accounting keeps it (`sacct -j ID -X -n -P`: the allocation's own
    line, `|`-separated, no header), once the controller no longer knows it; its node is its NodeList's where that
    names one node (sacct keeps no BatchHost). Only a record of a job that worked in
    `workdir` (the folder `submit` ran it in) counts: a controller whose state was reset numbers jobs from the
    start again, and sacct returns the most recent job of a number. Else why sacct cannot say, in its words (`Slurm
    accounting storage is disabled`, not installed, no record, still running as it keeps it)."""
    argv = ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", ",".join(SACCT_FIELDS)]
    try:
        proc = run_command(argv, timeout_s=timeout_s, check=False, fix=_SLURM_FIX)
    except LaunchError as exc:
        return exc.message
    if proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return f"`sacct` exited with status {proc.returncode}: {said[-1] if said else 'no reason given'}"
    wanted = str(workdir.resolve())
    other = None
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|", len(SACCT_FIELDS) - 1)
        if len(parts) != len(SACCT_FIELDS) or parts[0] != job_id:
            continue
        _, state, code, nodes, where = parts
        if where and Path(where).resolve() != Path(wanted):
            other = where
            continue
        word = state.split()[0] if state.split() else ""
        if word not in _FINISHED_STATES:
            return f"sacct has it {word or 'without a state'} still (its accounting may lag behind)"
        listed = nodes if nodes and nodes not in ("None assigned", "(null)") else None
        # sacct keeps no BatchHost: an allocation of one node is where the batch script ran
        one = expand_hostlist(listed) if listed else ()
        return JobEnd(word, exit_of(code), one[0] if len(one) == 1 else None, listed)
    if other is not None:
        return f"sacct's job {job_id} worked in {other}, not in {wanted} (another job of that number)"
    return f"sacct has no record of job {job_id}"


_NODE_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL"})
"""Batch job states that say a node of the job failed: `down_nodes` asks which."""


_STATE_FLAGS = "*~#!%$@^-"
"""The flag suffixes of a `sinfo %t` state (`*` not responding, `~` powered down, `#` powering up, `!`/`%` powering
down, `$` in a maintenance reservation, `@` reboot pending, `^` rebooting, `-` planned)."""
_FAILED_NODE_STATES = frozenset({"down", "fail", "failg"})
"""`sinfo %t` states, less their flag suffixes, of a node that failed: down, failed, failing. Not drained or
draining (an administrator's drain, a maintenance, lets the jobs on the node run to their end), in maintenance,
booting or unknown: none of those ends a job."""


def _usable(state: str) -> bool:
    """Whether a node in `sinfo %t` state `state` takes jobs (`_USABLE_NODE_STATES`, not `*`: not responding)."""
    return not state.endswith("*") and state.rstrip(_STATE_FLAGS) in _USABLE_NODE_STATES


def _failed(state: str) -> bool:
    """Whether a node in `sinfo %t` state `state` failed (`_FAILED_NODE_STATES`, or `*`: not responding), as a
    node that ended a job NODE_FAIL shows."""
    return state.endswith("*") or state.rstrip(_STATE_FLAGS) in _FAILED_NODE_STATES


def down_nodes(nodes: str, *, timeout_s: float) -> tuple[DownNode, ...] | None:
    """Those of `nodes` (a Slurm node list: `vm`, `mn[0-2]`) that `sinfo` shows failed now (`_failed`: a drained node
    beside the one that failed ended no job), with Slurm's reason for each; None when sinfo does not answer."""
    try:
        proc = run_command(["sinfo", "-h", "-N", "-n", nodes, "-o", "%N|%t|%E"], timeout_s=timeout_s, check=False,
                           fix=_SLURM_FIX)
    except LaunchError:
        return None
    if proc.returncode != 0:
        return None
    down: dict[str, DownNode] = {}
    for line in proc.stdout.splitlines():  # a node of several partitions is listed once for each
        name, state, reason = [*line.strip().split("|", 2), "", ""][:3]
        if name and _failed(state) and name not in down:
            down[name] = DownNode(name, state, None if reason.strip() in ("", "none") else reason.strip())
    return tuple(down.values())


SRUN_NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")
"""What a step's srun writes to its stderr (the role's log: `pyxis.SrunLauncher`) when slurmctld tells it a node of
the step failed (SRUN_NODE_FAIL, sent to the steps on that node as it sets the node down): Slurm's
`error("Node failure on %s", nodelist)` of `_node_fail_handler` (src/api/step_launch.c for a step, src/srun/allocate.c
for an allocation), under srun's log prefix `srun: error: `. The nodes are named as the controller names them: a
hostlist (`mn[1-2]` where two failed at once; `SrunNodeFailure.nodes` expands it)."""
_SRUN_LOG_TAIL = 256 * 1024
"""Bytes read from the end of each log for srun's line: it is among the step's last words, and a server's log may be
gigabytes."""
_MTIME_SLACK_S = 2.0
"""Seconds before its submission a log may have been last written and still be the batch job's (a filesystem's
coarse timestamps)."""


def srun_node_failures(out_dir: Path, *, since: float) -> SrunNodeFailure | None:
    """The nodes the steps' srun said failed in the logs of a batch job's server folder `out_dir` (`server*.log`, and
    one folder down: each role's `roles/<role>-<i>.log`) last written at or after `since` (an earlier batch job's are
    not this one's); None when no log says so. Each log's tail only (`_SRUN_LOG_TAIL`)."""
    nodes: dict[str, None] = {}
    logs: list[Path] = []
    for path in sorted([*out_dir.glob("*.log"), *out_dir.glob("*/*.log")]):
        try:
            if path.stat().st_mtime < since:
                continue
            with path.open("rb") as fh:
                fh.seek(max(0, path.stat().st_size - _SRUN_LOG_TAIL))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            continue
        named = SRUN_NODE_FAILURE.findall(text)
        if named:
            nodes.update(dict.fromkeys(named))
            logs.append(path)
    return SrunNodeFailure(tuple(nodes), tuple(logs)) if nodes else None


@dataclass
class SlurmJob:
    """One submitted batch job; `wait` polls the queue with timeouts, `cancel` scancels and waits until it is gone."""

    job_id: str
    name: str
    out_dir: Path
    script_path: Path
    options: SlurmOptions
    result: SlurmJobResult | None = field(default=None)
    _failures: int = field(default=0, repr=False)
    """squeue calls failed in a row (`poll`)."""
    _answered: float = field(default_factory=time.monotonic, repr=False)
    """When squeue last answered for the job (or it was submitted)."""
    lost: bool = field(default=False, repr=False)
    """`poll` gave the job up for lost (squeue failed over `lost_track_s`): it may still run, owed a scancel."""
    cancel_sent: bool = field(default=False, repr=False)
    """A `scancel` of the job went through (`request_cancel`): one that did not (the controller down) is owed."""
    submitted: float = field(default_factory=time.time, repr=False)
    """When it was submitted (wall clock): a log in its folder last written before then is an earlier job's."""

    @property
    def stdout_path(self) -> Path:
        return self.out_dir / f"slurm-{self.job_id}.out"

    @property
    def stderr_path(self) -> Path:
        return self.out_dir / f"slurm-{self.job_id}.err"

    def queue_state(self) -> str | None:
        """The job's state while Slurm lists it in the queue; None once it has left."""
        listed = self.queue_entry()
        return None if listed is None else listed[0]

    def queue_entry(self) -> tuple[str, str] | None:
        """(state, Slurm's reason: `Resources`, `Priority`, `None` ...) while the queue lists the job; else None."""
        proc = run_command(["squeue", "-h", "-j", self.job_id, "-o", "%T %r"],
                           timeout_s=self.options.command_timeout_s, check=False, fix=_SLURM_FIX)
        if proc.returncode != 0:
            if "Invalid job id" in proc.stderr:
                return None
            raise LaunchError(f"`squeue -j {self.job_id}` failed: {proc.stderr.strip()}", fix=_SLURM_FIX)
        lines = [s.strip() for s in proc.stdout.splitlines() if s.strip()]
        if not lines:
            return None
        state, _, reason = lines[0].partition(" ")
        return state, reason.strip()

    def poll(self) -> SlurmJobResult | tuple[str, str]:
        """One look at the queue: the job's result once it has left it (or reached a final state), else its
        (state, reason). A failed squeue reads as ("UNKNOWN", why); `max_poll_failures` of them in a row, over at
        least `lost_track_s`, raise: a controller restarted or failing over answers again within minutes, and the
        batch job runs on meanwhile (its jobs were failed as lost while they ran, and left running unstored)."""
        try:
            listed = self.queue_entry()
            self._failures = 0
            self._answered = time.monotonic()
        except LaunchError as exc:
            self._failures += 1
            silent = time.monotonic() - self._answered
            if self._failures >= self.options.max_poll_failures and silent >= self.options.lost_track_s:
                self.lost = True
                raise LaunchError(
                    f"lost track of Slurm job {self.job_id}: {self._failures} squeue calls in a row failed over "
                    f"{silent:.0f} s ({exc.message})",
                    fix=f"{_SLURM_FIX}; the job may still be running (`squeue -j {self.job_id}`)",
                ) from exc
            log.warning("squeue failed (%d in a row over %.0f s; Slurm job %s is given up for lost after %d and "
                        "%.0f s): %s", self._failures, silent, self.job_id, self.options.max_poll_failures,
                        self.options.lost_track_s, exc.message)
            return "UNKNOWN", exc.message
        if listed is None or listed[0] in _FINISHED_STATES:
            return self.finish()
        return listed

    def wait(self, timeout_s: float | None = None) -> SlurmJobResult:
        """Poll until the job leaves the queue (or `timeout_s` passes: LaunchError, the job keeps running)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            seen = self.poll()
            if isinstance(seen, SlurmJobResult):
                return seen
            if deadline is not None and time.monotonic() >= deadline:
                raise LaunchError(
                    f"Slurm job {self.job_id} still {seen[0]} after {timeout_s:.0f} s",
                    fix="wait longer, or cancel it with `scancel " + self.job_id + "`",
                )
            time.sleep(self.options.poll_s)

    def finish(self) -> SlurmJobResult:
        """Read the final state and exit code: from scontrol while Slurm remembers the job (MinJobAge after its
        end), else from sacct where Slurm keeps accounting, else the exit status from the rc file its batch script
        wrote, its state then said to be unknown (`SlurmJobResult.unknown_state`), with why sacct could not say."""
        end = self._scontrol_end()
        sacct_said = None
        if end.state is None:  # Slurm's controller no longer knows the job: its accounting may
            found = sacct_end(self.job_id, self.out_dir, timeout_s=self.options.command_timeout_s)
            if isinstance(found, JobEnd):
                end = found
                log.info("Slurm job %s: its end read from sacct (scontrol no longer knows it)", self.job_id)
            else:
                sacct_said = found
        state, exit_code = end.state, end.exit_code
        rc_file = self.out_dir / f"slurm-{self.job_id}.rc"
        unknown = None
        if exit_code is None and rc_file.is_file():
            text = rc_file.read_text().strip()
            exit_code = int(text) if text.lstrip("-").isdigit() else None
            if state is None and exit_code is not None:
                state = "COMPLETED" if exit_code == 0 else "FAILED"
                unknown = (f"Slurm's final state of it is unknown: scontrol no longer knows the job and sacct cannot "
                           f"say, {sacct_said}; the exit status is its batch script's, from {rc_file.name}")
        if exit_code is None or state is None:
            raise LaunchError(
                f"Slurm job {self.job_id} left the queue without an exit status (scontrol forgot it, sacct cannot "
                f"say, {sacct_said or 'no answer'}, and {rc_file} is missing)",
                fix="raise MinJobAge in slurm.conf (or enable Slurm's accounting, which sacct reads), or check that "
                    "the out directory is shared with the node",
            )
        down, srun_said = None, None
        if state in _NODE_STATES and end.nodes:
            down = down_nodes(end.nodes, timeout_s=self.options.command_timeout_s)
        if state == "NODE_FAIL" and not down:  # the node is back already (or sinfo did not answer): srun saw it fail
            srun_said = srun_node_failures(self.out_dir, since=self.submitted - _MTIME_SLACK_S)
        self.result = SlurmJobResult(self.job_id, state, exit_code, self.stdout_path, self.stderr_path, end.node,
                                     nodes=end.nodes, down=down, srun_said=srun_said, unknown_state=unknown)
        if unknown is not None:
            log.warning("Slurm job %s %s", self.job_id, self.result.ended)
        else:
            log.info("Slurm job %s ended %s (exit %d)", self.job_id, state, exit_code)
        return self.result

    def _scontrol_end(self) -> JobEnd:
        """The job's end as `scontrol show job` says it (JobState, ExitCode, BatchHost, NodeList); all None once
        scontrol no longer knows the job."""
        fields = scontrol_show("job", self.job_id, timeout_s=self.options.command_timeout_s, fix=_SLURM_FIX)
        host, nodes = fields.get("BatchHost"), fields.get("NodeList")
        return JobEnd(fields.get("JobState"), exit_of(fields.get("ExitCode", "")),
                      host if host and host != "(null)" else None,
                      nodes if nodes and nodes not in ("(null)", "None") else None)

    def suspension(self) -> Suspension | None:
        """What `scontrol show job` says of the batch job's suspensions (`scontrol suspend`, preemption or gang
        scheduling by suspension), seen by a poll or not: None when Slurm never suspended it (or cannot say)."""
        fields = scontrol_show("job", self.job_id, timeout_s=self.options.command_timeout_s, fix=_SLURM_FIX)
        event = fields.get("SuspendTime", "None")
        at = _slurm_epoch(event)
        if at is None:  # None: never suspended
            return None
        now = time.time()
        state = fields.get("JobState")
        start, ran = _slurm_epoch(fields.get("StartTime", "")), _run_time_s(fields.get("RunTime", ""))
        # a job still running has the end its time limit sets as EndTime: its end so far is now
        end = _slurm_epoch(fields.get("EndTime", "")) if state in _FINISHED_STATES else now
        # RunTime leaves the suspensions out: what the wall clock adds to it since the start is their total
        total = None if start is None or end is None or ran is None else max(0, round(end - start - ran))
        # SuspendTime is the last suspension's start while suspended, else its end (the resume), to the second
        return Suspension(event, now if state == "SUSPENDED" else at + 1, total)

    def over_partition_time(self) -> bool:
        """Whether the job's time limit is longer than its partition's MaxTime, as `scontrol` shows both. Slurm 22.05
        pends such a job for PartitionConfig (not PartitionTimeLimit), the reason it also gives for more CPUs or memory
        than a node has: this tells the two apart. False when either cannot be read."""
        def fields(*what: str) -> dict[str, str]:
            return scontrol_show(*what, timeout_s=self.options.command_timeout_s, fix=_SLURM_FIX)

        try:
            job = fields("job", self.job_id)
            partition = fields("partition", job["Partition"]) if job.get("Partition") else {}
        except LaunchError as exc:  # a slow or unreachable controller: not known, and no reason to end the run
            log.info("could not read Slurm job %s's time limit against its partition's: %s", self.job_id, exc.message)
            return False
        try:
            limit = time_limit_s(job.get("TimeLimit", ""))
            most = time_limit_s(partition.get("MaxTime", ""))
        except ValueError:
            return False
        return most is not None and (limit is None or limit > most)

    def cancel(self) -> None:
        """scancel the job and wait (bounded) until the queue no longer lists it."""
        if self.result is not None:
            return
        left = cancel_jobs([self], wait_s=self.options.cancel_wait_s)
        if left:
            raise LaunchError(
                f"Slurm job {self.job_id} is still listed {self.options.cancel_wait_s:.0f} s after scancel",
                fix=f"check the node (`scontrol show job {self.job_id}`); scancel -f {self.job_id}",
            )

    def request_cancel(self, *, announced: bool = False) -> bool:
        """scancel, without waiting (`cancel_jobs` waits for several at once); whether it went through (`cancel_sent`:
        Slurm took it, or the job was gone already). `announced`: the caller has said so already, in its own words.
        A scancel that times out raises LaunchError."""
        if not announced:
            log.warning("cancelling Slurm job %s", self.job_id)
        proc = run_command(["scancel", self.job_id], timeout_s=self.options.command_timeout_s, check=False,
                           new_session=True, fix=_SLURM_FIX)
        if proc.returncode != 0:
            log.warning("scancel %s: %s", self.job_id, proc.stderr.strip())
        self.cancel_sent = self.cancel_sent or proc.returncode == 0
        return proc.returncode == 0

    def __enter__(self) -> SlurmJob:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.result is None:
            self.cancel()


@dataclass(frozen=True)
class Suspension:
    """A batch job's suspensions as Slurm keeps them (`SlurmJob.suspension`)."""

    event: str
    """SuspendTime as `scontrol` prints it: when the last suspension began, or ended (its resume)."""
    until: float
    """Wall-clock time (epoch) the last suspension lasted until: its resume (one second late: Slurm counts seconds),
    or now while it lasts."""
    total_s: int | None
    """Seconds suspended in all (the wall clock since the start less RunTime); None when scontrol did not say."""


def _slurm_epoch(text: str) -> float | None:
    """A time as `scontrol` prints it (local time, `2026-12-05T11:19:18`) in seconds since the epoch; None for
    `None`, `Unknown` or anything else."""
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def _run_time_s(text: str) -> int | None:
    """Seconds of a duration as `scontrol` prints it (`[D-]HH:MM:SS`); None when it is not one."""
    match = re.match(r"^(?:(\d+)-)?(\d+):(\d+):(\d+)$", text)
    if match is None:
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


_ENDED_BY_SLURM: dict[str, tuple[str, str]] = {
    "TIMEOUT": ("Slurm stopped it because its time limit, {time_limit}{where}, ran out", "{time_limit_fix}"),
    "PREEMPTED": ("Slurm stopped it to run other work first (preemption)",
                  f"run where jobs are not preempted ({_OPTION} partition=NAME, or a --qos in extra_sbatch)"),
    "NODE_FAIL": ("Slurm stopped it because {node} failed (stopped answering the controller, or set down){now}",
                  f"leave {{name}} out if {{they}} fail{{s}} again ({_OPTION} {{exclude}}; {{why}})"),
    "BOOT_FAIL": ("Slurm stopped it because {node} failed to boot for it{now}",
                  f"leave {{name}} out until {{they}} boot{{s}} again ({_OPTION} {{exclude}}; {{why}})"),
    "OUT_OF_MEMORY": ("Slurm stopped it because it used more memory than it was given: {mem}",
                      "give it more: {more_memory}"),
    "CANCELLED": ("someone outside this run cancelled it (a user's or an administrator's scancel)",
                  "find out who cancelled it and why"),
    "DEADLINE": ("Slurm stopped it because its --deadline passed", "move or drop the --deadline in extra_sbatch"),
}
"""Batch job states that say Slurm (or someone other than this run) ended the job: what Slurm did and why, and the
fix, each in the same form. `{time_limit}` is the one the job ran under (`SlurmOptions.effective_time_limit`), `{where}`
says where it was set; `{node}` names the node that failed (`_failed_node`), `{mem}` what the job asked for
(`SlurmOptions.effective_mem`)."""


def _failed_node(result: SlurmJobResult) -> dict[str, str]:
    """What the reason of a batch job that ended NODE_FAIL or BOOT_FAIL says of the node: `node` (which failed),
    `now` (what `sinfo` shows of it now), `name` (what the fix calls it), `exclude` (the option to give,
    `exclude_option`), `why` (where the user reads why Slurm took it down) and the words that agree with how many:
    `it`/`them`, `they` (it/they), `s` (fails/fail). Its nodes `sinfo` shows down (`SlurmJobResult.down`), else those
    its steps' srun said failed (`srun_said`, its hostlists expanded: Slurm has returned them to service since), else
    its one node, else each node of its list, one of which failed (Slurm has returned it to service since, or did not
    say).

    A node Slurm has returned to service (`ReturnToService=2` does so as soon as it answers again: `sinfo` answered
    and shows none of the job's nodes failed) has no reason left for `sinfo -R` to show: the reason says so and sends
    the user to the controller's log, never to an empty `sinfo -R` as if it named the node."""
    one = {"it": "it", "they": "it", "s": "s"}
    back = result.down is not None and not result.down  # sinfo answered, showing none of them down

    def why(it: str) -> str:
        if back:
            return (f"`sinfo -R` no longer lists {it}, back in service: the controller's log (SlurmctldLogFile in "
                    f"`scontrol show config`) says why Slurm took {it} down")
        return f"`sinfo -R` says why Slurm took {it} down"

    def named(names: Sequence[str], said: str) -> dict[str, str]:
        words = one if len(names) == 1 else {"it": "them", "they": "they", "s": ""}
        return {"node": ("its node " if len(names) == 1 else "its nodes ") + _and(names),
                "now": said + (f"; Slurm has {words['it']} back in service now" if back else ""),
                "name": _and(names), "exclude": exclude_option(names), "why": why(words["it"]), **words}

    if result.down:
        shown = ", ".join(f"{n.name} {n.state}" + (f": {n.reason}" if n.reason else "") for n in result.down)
        return named([n.name for n in result.down], f"; `sinfo` shows {shown}")
    if result.srun_said is not None:
        return named(result.srun_said.nodes, f"; srun said so: {result.srun_said.text()}")
    listed = expand_hostlist(result.nodes) if result.nodes else ()
    if len(listed) == 1:  # one node
        return named(listed, "")
    unnamed = {"name": "that node", "exclude": exclude_option(["NODE"]), "why": why("it"), **one}
    if listed:
        return {"node": f"one of its nodes ({_and(listed, 'or')})",
                "now": "; Slurm has it back in service now, and did not say which" if back
                else "; `sinfo -R` names it while it is down", **unnamed}
    return {"node": "its node", "now": "; Slurm did not say which", **unnamed}


def _and(names: Sequence[str], last: str = "and") -> str:
    """`a`, `a and b`, `a, b and c`: each node named (`or` for one of them)."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


_NEVER_STARTS: dict[str, tuple[str, str]] = {
    "PartitionConfig": ("it asks for more than a node of its partition has (CPUs, memory, GPUs)",
                        "ask for what a node has (`scontrol show partition`, `sinfo -N -o '%N %c %m %G'`: "
                        f"{_OPTION} cpus_per_task=, mem=, gpu_type=, extra_sbatch), or run on another "
                        f"partition ({_OPTION} partition=NAME)"),
    "PartitionNodeLimit": ("it asks for more (or fewer) nodes than its partition allows",
                           f"run it on a partition with that many nodes ({_OPTION} partition=NAME)"),
    "PartitionTimeLimit": ("its time limit, {time_limit}{where}, is longer than its partition's MaxTime",
                           "lower it to the partition's (`sinfo -o '%P %l'`), or run on another partition "
                           f"({_OPTION} partition=NAME)"),
    "BadConstraints": ("no node of its partition has the features or resources it asks for",
                       "fix the --constraint/--gres in extra_sbatch or gpu_type (`sinfo -o '%P %f %G'`)"),
    "InvalidAccount": ("its account does not exist or may not use this partition",
                       f"give an account you belong to (`sacctmgr show assoc user=$USER`): {_OPTION} "
                       "account=NAME"),
    "InvalidQOS": ("its QOS does not exist or is not allowed to its account",
                   "give a QOS you may use (`sacctmgr show assoc user=$USER format=qos`) in extra_sbatch"),
    "AccountNotAllowed": ("its partition does not allow its account",
                          f"give another {_OPTION} account=NAME, or partition=NAME"),
    "QOSNotAllowed": ("its partition does not allow its QOS", "give another --qos in extra_sbatch, or partition"),
    "DependencyNeverSatisfied": ("a job its --dependency waits for ended in a way that can never satisfy it",
                                 "fix or drop the --dependency in extra_sbatch (`scontrol show job` names it)"),
}
"""Pending reasons that never clear on their own: Slurm took the batch job (its partition does not enforce those
limits at submission) but will never start it. The job is cancelled and its jobs fail with what it means and the fix,
instead of a run that says "pending" until somebody kills it."""


_HELD = {"JobHeldAdmin": "an administrator", "JobHeldUser": "its user"}
"""Pending reasons that say the batch job is held (`scontrol hold`, `sbatch --hold`): by whom."""


def held_text(job_id: str, reason: str) -> str:
    """What a pending note says of a held batch job: who holds it and the command that releases it (the run keeps
    waiting for it meanwhile)."""
    who = _HELD[reason]
    return (f"Slurm job {job_id} is held by {who} ({reason}): it starts only once released, `scontrol release "
            f"{job_id}`" + (" (an administrator may run it: ask one)" if reason == "JobHeldAdmin" else ""))


def never_starts(reason: str, limit: TimeLimit) -> tuple[str, str] | None:
    """(what `reason` means, the fix) when a batch job pending for it will never start, else None."""
    said = _NEVER_STARTS.get(reason)
    if said is None:
        return None
    values = {"time_limit": limit.value, "where": limit.where}
    return said[0].format(**values), said[1].format(**values)


def ended_by_slurm(result: SlurmJobResult, options: SlurmOptions, *, whole_node: bool = False
                   ) -> tuple[str, str] | None:
    """(what Slurm did and why, the fix) when the batch job's state says Slurm, or someone other than this run,
    ended it; None for any other state, and when Slurm's state of it is unknown (`SlurmJobResult.unknown_state`).
    `whole_node`: the batch job held its node whole (a multi-node group always does)."""
    said = _ENDED_BY_SLURM.get(result.state)
    if said is None or result.unknown_state is not None:
        return None
    limit, memory = options.effective_time_limit, options.effective_mem
    values = {"time_limit": limit.value, "where": limit.where, "time_limit_fix": limit.fix, **_failed_node(result),
              "mem": memory.asked, "more_memory": memory.more(whole_node)}
    return said[0].format(**values), said[1].format(**values)


def slurm_end_reason(result: SlurmJobResult, options: SlurmOptions, *, ran: bool,
                     whole_node: bool = False) -> str | None:
    """Why a job of a batch job Slurm ended failed: interrupted (`ran`: it was running) or not run (the batch job
    never reached it), the state, what it means and the fix; None when the state is not one of those
    (COMPLETED, FAILED: the worker's own outcomes say why)."""
    said = ended_by_slurm(result, options, whole_node=whole_node)
    if said is None:
        return None
    what, fix = said
    if ran:
        return (f"interrupted: Slurm job {result.job_id} ended {result.state} while this job ran ({what}); {fix}, "
                f"then rerun with {_RESUME}")
    return (f"not run: Slurm job {result.job_id} ended {result.state} before it reached this job ({what}); {fix}, "
            f"then `{_RESUME}` runs it")


WORKER_LOG_LINES = 20
"""How many of the batch log's last lines the reason of the job a worker died in quotes."""


@dataclass(frozen=True)
class WorkerEnd:
    """A batch job Slurm did not end itself (FAILED, COMPLETED: not one of `_ENDED_BY_SLURM`) whose worker ran but
    ended before it wrote every job's outcome — killed on the node (the kernel's out-of-memory killer where Slurm
    does not confine memory, a `kill -9`), or crashed. The job it was running is the one it died in (its window may
    have begun, its records partly written: no result), the jobs after it were never reached (`--resume` runs both);
    each reason says how the worker ended, what Slurm says of the batch job, and the fix."""

    result: SlurmJobResult
    in_flight: str | None
    """The job the worker was running as it ended; None when it ended between two jobs."""
    memory: MemoryAsked
    """The memory the batch job asked for (`SlurmOptions.effective_mem`)."""
    whole_node: bool = False
    """It held its node whole whatever its options said (a multi-node group: `render_batch_script`)."""

    @property
    def how(self) -> str:
        return exit_said(self.result.exit_code)

    @property
    def slurm_says(self) -> str:
        if self.result.unknown_state is not None:
            return f"Slurm: {self.result.unknown_state}"
        return f"Slurm: {self.result.state}" + (f" on {self.result.node}" if self.result.node else "")

    @property
    def fix(self) -> str:
        """What to do before `--resume`: for a SIGKILL, the node's memory first (the likelier cause on a GPU node),
        then a kill from outside; for any other end, the worker's own last words in the batch log."""
        log_path = self.result.stderr_path
        if self.result.exit_code != 128 + signal.SIGKILL:
            return f"read the batch job's log {log_path} for what ended the worker (a traceback, a crash) and fix that"
        on = f" on {self.result.node}" if self.result.node else " on the node"
        return (f"if the node ran out of memory (`dmesg`{on} says \"Out of memory: Killed process …\"), give the "
                f"batch job more: {self.memory.more(self.whole_node)}, or have the engine use less; otherwise find "
                f"what killed the worker (its batch log: {log_path})")

    def died_in(self, jdir: Path) -> str:
        """The reason of the job the worker was running: how it ended, what its folder holds (no result either
        way), the batch log's last lines and the fix, worded as a server's launch failure is (`failure_text`)."""
        from llmsweep.execute import artifacts as art

        tail = "\n".join(visible_text(line) for line in log_tail(self.result.stderr_path, WORKER_LOG_LINES)
                         .splitlines())
        message = (f"the worker of Slurm job {self.result.job_id} {self.how} while this job ran, before it wrote its "
                   f"outcome ({self.slurm_says}); {_left_in(jdir / art.SUMMARY_FILE, jdir / art.RECORDS_FILE)}"
                   + failure_text.log_tail(WORKER_LOG_LINES, self.result.stderr_path, tail))
        return str(LaunchError(message, fix=f"{self.fix}; then rerun with {_RESUME}"))

    def not_run(self) -> str:
        """The reason of a job the worker never reached."""
        where = f"while it ran job {self.in_flight}" if self.in_flight else "after the last job it finished"
        return (f"not run: the worker of Slurm job {self.result.job_id} {self.how} {where}, before it reached this "
                f"job ({self.slurm_says}); {self.fix}; then `{_RESUME}` runs it")

    def eval_not_run(self) -> str:
        """The reason of a job whose point was measured and whose eval waited for its group's eval server."""
        where = f"while it ran job {self.in_flight}" if self.in_flight else "between two jobs"
        return (f"eval not run: the worker of Slurm job {self.result.job_id} {self.how} {where}, before this job's "
                f"eval (owed: it runs after the group's other points) ran ({self.slurm_says}); {self.fix}; then "
                f"`{_RESUME}` runs the job again")

    def line(self, finished: int, died: int, never: int, total: int) -> str:
        """What the run says as the batch job ends."""
        where = f"while it ran job {self.in_flight}" if self.in_flight else "between two jobs"
        ended = f"ended {self.result.state}" if self.result.unknown_state is None else self.result.ended
        return (f"Slurm job {self.result.job_id} {ended}: its worker {self.how} {where}; "
                f"{finished} of {count_of(total, 'job')} finished, {died} died with the worker, {never} not run — "
                f"{self.fix}; then rerun with {_RESUME} to run the rest")


def _left_in(summary: Path, records: Path) -> str:
    """What the folder of a job its worker died in holds: never a result (`--resume` runs it again)."""
    if summary.is_file():
        return "its load had ended (summary.json) but the job was never judged: no result"
    try:
        with records.open("rb") as f:
            count = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        count = 0
    if count:
        return f"its window had begun: {count_of(count, 'record')} in {records.name}, cut short, no result"
    return "it had measured nothing yet"


def _suspended_note(job_id: str, seconds: int | None = None) -> str:
    """Why a job measured while Slurm suspended its batch job is invalid, and the fix. `seconds`: how long Slurm had
    the batch job suspended in all, as it counts it, over the looks at the queue that found this job in flight
    (`_Batch.suspended`); None when Slurm did not say."""
    held = "" if seconds is None else f" for about {seconds} s in all" if seconds else " for under a second"
    return (f"Slurm suspended batch job {job_id}{held} while this job ran (`scontrol suspend`, or preemption or gang "
            "scheduling by suspension): its timings include the pause; run where jobs are not suspended "
            f"({_OPTION} partition=NAME, or a --qos in extra_sbatch), then `{_RESUME}` runs it again")


def judge_suspended(jdir: Path, outcome: JobOutcome, note: str) -> JobOutcome:
    """A job that measured while its batch job was suspended: its summary is judged again with `note` in its
    run.json (`readback.SUSPENDED`: invalid, whatever its gates say, for `summarize` too), so that neither the store,
    `--resume` nor `--reuse` takes its stalled timings for a result. A job that wrote no summary, or failed (its
    reason says more than the pause), is left as it is. The worker's own note of the same pause (`readback.PAUSED`:
    Slurm stops the batch job's processes with SIGSTOP and continues them with SIGCONT) gives way to this one."""
    from llmsweep.execute import artifacts as art
    from llmsweep.execute.lifecycle import verdict_reasons
    from llmsweep.execute.readback import PAUSED, SUSPENDED, summarise_job

    run_path = jdir / art.RUN_FILE
    info = art.read_json(run_path) if run_path.is_file() else None
    judged = outcome.status in ("valid", "smoke", "invalid")
    if outcome.summary_path is None or not judged or not isinstance(info, dict):
        return outcome
    info[SUSPENDED] = note
    info.pop(PAUSED, None)
    art.write_json(run_path, info)
    summary = summarise_job(jdir)
    outcome = outcome.model_copy(update={"status": summary.validity.verdict, "reasons": verdict_reasons(summary)})
    art.write_json(jdir / art.OUTCOME_FILE, outcome.model_dump(mode="json"))
    return outcome


def _outcome_in(path: Path) -> JobOutcome | None:
    """The outcome a job folder holds (written atomically by the worker), or None."""
    from llmsweep.execute import artifacts as art
    from llmsweep.execute.lifecycle import JobOutcome

    doc = art.read_json(path) if path.is_file() else None
    if not isinstance(doc, dict):
        return None
    try:
        return JobOutcome.model_validate(doc)
    except ValueError:
        return None


def _interrupted(outcome: JobOutcome) -> bool:
    """The worker wrote that a signal stopped the job (`lifecycle.settle`): on the node, Slurm's SIGTERM."""
    return outcome.status == "failed" and bool(outcome.reasons) and outcome.reasons[0] in INTERRUPTED_REASONS


_TIME_LIMIT = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_EXTRA_TIME = "the --time in extra_sbatch"
TIME_FORMATS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (or INFINITE, UNLIMITED)"
"""The forms of a Slurm time limit sbatch takes, as an error names them."""


def time_limit_s(value: str, *, what: str = "time_limit") -> int | None:
    """Seconds of a Slurm time limit in the forms sbatch takes (`90`, `90:30`, `02:00:00`, `1-12`, `1-12:30`,
    `1-12:30:00`); None for no limit (INFINITE, UNLIMITED, 0). Anything else is a ValueError naming `what` (the
    option that gave it) and the forms (sbatch would refuse it only once the job is submitted)."""
    text = value.strip()
    if text.upper() in ("INFINITE", "UNLIMITED"):
        return None
    match = _TIME_LIMIT.match(text)
    if match is None:
        raise ValueError(f"{what} {value!r} is not a Slurm time limit; give {TIME_FORMATS}, e.g. 02:00:00 for two "
                         "hours")
    days, a, b, c = match.groups()
    if days is not None:  # days-hours[:minutes[:seconds]]
        seconds = int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    elif c is not None:  # hours:minutes:seconds
        seconds = int(a) * 3600 + int(b) * 60 + int(c)
    else:
        seconds = int(a) * 60 + int(b or 0)  # minutes[:seconds]
    return seconds or None  # --time=0: no limit


def _times_given(tokens: Sequence[str]) -> list[str]:
    """The values of the `--time` options among sbatch flags, in order: `--time=V`, `--time V`, `-t V`, `-tV`
    (`--time-min` is another option). A `--time` or `-t` with nothing after it is a ValueError."""
    found: list[str] = []
    for i, token in enumerate(tokens):
        if token in ("--time", "-t"):
            if i + 1 >= len(tokens) or tokens[i + 1].startswith("-"):
                raise ValueError(f"extra_sbatch {token!r} has no value after it; give the limit with it, e.g. "
                                 f"'--time=04:00:00' ({TIME_FORMATS})")
            found.append(tokens[i + 1])
        elif token.startswith("--time="):
            found.append(token.removeprefix("--time="))
        elif token.startswith("-t") and not token.startswith("--"):
            found.append(token[2:])
    return found


_MEM_FLAGS = ("--mem", "--mem-per-cpu", "--mem-per-gpu")


def _mems_given(tokens: Sequence[str]) -> list[tuple[str, str]]:
    """The memory options among sbatch flags, in order, each (flag, size): `--mem=V`, `--mem V`, and the same of
    `--mem-per-cpu` and `--mem-per-gpu` (sbatch has no short form of them). A flag with nothing after it is a
    ValueError (as `--time`'s is: `_times_given`), not passed over — the job's reason would name a size it never had."""
    found: list[tuple[str, str]] = []
    for i, token in enumerate(tokens):
        flag, eq, value = token.partition("=")
        if flag not in _MEM_FLAGS:
            continue
        if eq:
            found.append((flag, value))
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
            found.append((flag, tokens[i + 1]))
        else:
            raise ValueError(f"extra_sbatch {token!r} has no value after it; give the size with it, e.g. "
                             f"'{flag}=200G'")
    return found


@dataclass(frozen=True)
class MemoryAsked:
    """The memory a batch job asks for (`SlurmOptions.effective_mem`): the option (`--mem`, `--mem-per-cpu`,
    `--mem-per-gpu`; None: none, it gets the partition's default) and its size, the executor option that set it
    (`mem`, `extra_sbatch`), which is the one to raise, and the one that holds its node whole (`exclusive`,
    `extra_sbatch`; None: it shares the node)."""

    flag: str | None
    size: str | None
    field: str | None
    exclusive: str | None = None

    @property
    def asked(self) -> str:
        """What it asked for, as a reason says it."""
        if self.flag is None:
            return "it asked for no --mem, so the partition's default"
        return f"{self.flag}={self.size}" + (" (in extra_sbatch)" if self.field == "extra_sbatch" else "")

    def more(self, whole_node: bool = False) -> str:
        """How to give it more memory than it had (`whole_node`: it held its node whole, whatever its options said:
        a multi-node group always does)."""
        if self.field == "extra_sbatch":
            more = (f"a larger {self.flag} than its {self.size} in {_OPTION} extra_sbatch (it overrides "
                    "mem)")
        elif self.flag is not None:
            more = f"{_OPTION} mem=SIZE above its {self.size}"
        else:
            shared = "" if whole_node or self.exclusive else " and shared the node's"
            more = f"{_OPTION} mem=SIZE (it asked for none{shared})"
        return more + ("" if whole_node or self.exclusive else ", or exclusive=true for the whole node")


@dataclass(frozen=True)
class TimeLimit:
    """The time limit a batch job runs under (`SlurmOptions.effective_time_limit`): as given, in seconds (None: no
    limit), and the option that set it, which is the one to raise."""

    value: str
    seconds: int | None
    field: str

    @property
    def where(self) -> str:
        return "" if self.field == "time_limit" else f" ({_EXTRA_TIME})"

    @property
    def fix(self) -> str:
        if self.field == "time_limit":
            return f"raise {_OPTION} time_limit=HH:MM:SS"
        return f"raise the --time in {_OPTION} extra_sbatch (it overrides time_limit)"


def planned_windows_s(group: ServerGroup) -> float:
    """The measurement windows a group's jobs plan (those with a duration; prompt counts are not timed), in seconds:
    the least its batch job takes, before any server start, warm-up or drain."""
    from llmsweep.plan.point import Point

    total = 0.0
    for job in group.jobs:
        if job.eval_only:
            continue
        try:
            total += Point.of(job).load.duration_s or 0.0
        except Exception:  # a job this cannot time is left out of a warning; it never fails the run
            continue
    return total


def time_limit_warning(group: ServerGroup, limit: TimeLimit) -> str | None:
    """A warning when the group's planned windows alone exceed the batch job's time limit (Slurm would stop it
    before it is done), else None."""
    windows = planned_windows_s(group)
    if limit.seconds is None or windows <= limit.seconds:
        return None
    from llmsweep.execute.progress import duration_text

    return (f"warning: {group.id}: its {count_of(len(group.jobs), 'job')} {noun(len(group.jobs), 'plans', 'plan')} "
            f"{duration_text(windows)} of measurement "
            f"windows alone, more than the Slurm time limit {limit.value}{limit.where}; Slurm will stop the batch "
            f"job before it is done (the jobs not reached fail, `{_RESUME}` runs them later) — {limit.fix}")


class _LogRelay:
    """The new lines of a file the node appends to (the worker's stderr on the shared filesystem), from where the
    last call stopped; a line still being written waits for its newline (or for `final`). A line that redraws
    itself (`\\r`) is taken as it was last drawn; control characters are shown escaped (`findings.visible_text`); long
    lines are cut, and a flood is summarised."""

    MAX_READ = 1 << 20
    MAX_LINES = 200
    MAX_CHARS = 500

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def lines(self, *, final: bool = False) -> list[str]:
        data = b""
        try:
            with self.path.open("rb") as f:
                if os.fstat(f.fileno()).st_size < self._offset:  # replaced or truncated: start again
                    self._offset, self._partial = 0, b""
                f.seek(self._offset)
                while True:
                    chunk = f.read(self.MAX_READ)
                    data += chunk
                    if not final or not chunk:
                        break
        except OSError:
            if not final:
                return []
        self._offset += len(data)
        chunks = (self._partial + data).split(b"\n")
        self._partial = b"" if final else chunks.pop()
        out: list[str] = []
        for raw in chunks:
            drawn = [part for part in raw.decode("utf-8", errors="replace").split("\r") if part.strip()]
            if not drawn:
                continue
            line = visible_text(drawn[-1].rstrip())  # a node's log reaches this terminal: no escape sequences
            out.append(line if len(line) <= self.MAX_CHARS else line[: self.MAX_CHARS] + " …")
        if len(out) > self.MAX_LINES:
            out = [*out[: self.MAX_LINES - 1], f"… {count_of(len(out) - self.MAX_LINES + 1, 'more line')} in "
                                               f"{self.path}"]
        return out


@dataclass
class _Batch:
    """A submitted batch job as `SlurmExecutor.run_groups` follows it."""

    group: ServerGroup
    sjob: SlurmJob
    relay: _LogRelay | None
    report_path: Path
    """Where its worker reports its job in flight (`progress.ReportingProgress`)."""
    beat: int | None = None
    """The last report's beat (a new one: the worker is alive)."""
    running: bool = False
    started: set[str] = field(default_factory=set)
    """Jobs whose folder shows the worker started them (their job.json)."""
    closed: set[str] = field(default_factory=set)
    """Jobs whose outcome has been reported."""
    suspended: dict[str, int | None] = field(default_factory=dict)
    """Jobs in flight while Slurm had the batch job SUSPENDED, and the seconds it was suspended in all over the looks
    that found them hit (None while Slurm has not said): the reason their result cannot stand (`_suspended_note`)."""
    suspended_at: float | None = None
    """When the batch job was first seen SUSPENDED (None while it is not)."""
    suspend_event: str = "None"
    """Slurm's SuspendTime of the batch job (its last suspension or resume) already accounted for (`unseen`)."""
    suspended_s: int = 0
    """Seconds Slurm had the batch job suspended in all, as of the last look (`SlurmJob.suspension`)."""


@register_executor
class SlurmExecutor:
    """Submits batch jobs; the lifecycle runs on the node through `worker_command`."""

    kind: ClassVar[str] = "slurm"
    summary: ClassVar[str] = "Slurm batch jobs"
    options_model: ClassVar[type[BaseModel]] = SlurmOptions
    lifecycle_here: ClassVar[bool] = False

    def __init__(self, options: Mapping[str, Any] | SlurmOptions | None = None) -> None:
        self.options = validate_options(self.kind, SlurmOptions, options)

    def image_mounts(self) -> tuple[ImageMount, ...] | None:
        # a job's image is served in a pyxis container by a `srun` step; a plain process on the node reads its files
        return tuple(option_mounts(self.options.node)) if self.options.node.use_srun else None

    def run_groups(self, groups: Sequence[ServerGroup], run_dir: Path, settings: LifecycleSettings, *,
                   event: Event) -> list[JobOutcome]:
        """One batch job per group, all submitted first, then waited for together; an interrupt cancels those still
        live.

        While a batch job runs, what its worker writes to its stderr (`slurm-<id>.err`: the server's launch, each
        job's start and outcome) is passed on to `event`, prefixed `[slurm <id>]` (`relay_worker_log`); its job in
        flight is shown on the run's progress display as a local run shows its job (its phase, the client's counters
        and window), from what the worker reports in the server folder (`progress.ReportingProgress`), each batch job
        a lane of the sweep's ETA; and each job the worker finishes is reported (stored, counted k/N) as its
        `outcome.json` appears; the rest are read as the batch job leaves the queue. A batch job Slurm itself ended
        (its time limit, preemption, a node failure, out of memory, a scancel from outside this run) fails the job it
        interrupted and those it never reached with that reason and its fix — not with the "interrupted by SIGTERM"
        its worker wrote on the signal. A worker that died on the node without Slurm ending its batch job (killed by
        the kernel's OOM killer or a `kill -9`, crashed) fails the job it was running with how it died, its batch
        log's last lines and the fix, and the jobs after it as not run (`WorkerEnd`).

        Every job handed here runs anew (`--resume` kept the finished ones out): what an earlier attempt left in its
        folder is moved aside on this side before the batch job is submitted, so an `outcome.json` found after the
        batch job is this attempt's, never the last one's reported for a job that died before writing its own."""
        from llmsweep.execute import artifacts as art
        from llmsweep.execute.lifecycle import JobOutcome, keep_earlier_attempt, report_job_finished
        from llmsweep.execute.progress import (
            QUIET_S,
            current_progress,
            duration_text,
            read_report,
            ready_to_read_reports,
        )

        ready_to_read_reports()  # before any job is submitted: the read-back on an interrupt imports nothing
        submitted: list[_Batch] = []
        outcomes: list[JobOutcome] = []

        def close(job_id: str, outcome: JobOutcome, batch: _Batch | None = None) -> None:
            # Stored and marked closed together, a signal held meanwhile: one landing between the two would either
            # leave a job stored and closed again by the read-back on the interrupt, or closed and never stored.
            with shielded():
                if batch is not None and job_id in batch.suspended:
                    outcome = judge_suspended(art.job_dir(run_dir, job_id), outcome,
                                              _suspended_note(batch.sjob.job_id, batch.suspended[job_id]))
                outcomes.append(outcome)
                report_job_finished(art.job_dir(run_dir, job_id), outcome)  # `run` stores it now
                if batch is not None:
                    batch.closed.add(job_id)
                # k/N and the ETA on the driver, the job timed by its own clock on the node (seen here a poll late, or
                # not at all when it started and ended between two looks)
                current_progress().job_finished(job_id, outcome.status, seconds=outcome.seconds)

        def relay(batch: _Batch, *, final: bool = False) -> None:
            if batch.relay is not None:
                for line in batch.relay.lines(final=final):
                    event(f"[slurm {batch.sjob.job_id}] {line}")

        def follow(batch: _Batch) -> None:
            """What the worker reports of its job in flight (its phase, the client's counters: `ReportingProgress`),
            and the jobs it finished (their outcome.json) and started (its report, or their job.json) since the last
            look. What says a job started is read first and acted on last: the worker writes a job's outcome before
            the report or the job.json of the next, so every job finished before one named is closed (counted k/N)
            before that one is shown — numbered in the order the worker ran them, even when one started and ended
            between two looks."""
            progress = current_progress()
            lane = batch.sjob.job_id
            concs = {job.id: job.concs[0] if job.concs else None for job in batch.group.jobs}
            report = read_report(batch.report_path)
            begun = [job.id for job in batch.group.jobs if job.id not in batch.started
                     and (art.job_dir(run_dir, job.id) / art.JOB_FILE).is_file()]

            def queued() -> None:  # the lane's jobs not started yet (an owed eval is timed apart)
                progress.queued(lane, sum(1 for job in batch.group.jobs
                                          if job.id not in batch.closed and job.id not in progress.state.jobs
                                          and job.id not in progress.state.owed))

            ended = {job.id: outcome for job in batch.group.jobs if job.id not in batch.closed
                     and (outcome := _outcome_in(art.job_dir(run_dir, job.id) / art.OUTCOME_FILE)) is not None
                     and not _interrupted(outcome)}  # final: the worker wrote it as the job ended
            if ended:
                unseen(batch)  # before they are stored: a pause no poll saw
            for job in batch.group.jobs:
                if job.id in ended:
                    close(job.id, ended[job.id], batch)
                    queued()
                    s = progress.state
                    if s.total:
                        eta = s.eta_s()
                        event(f"Slurm job {batch.sjob.job_id}: {s.done}/{s.total} {noun(s.total, 'job')} done"
                              + ("" if eta is None else f" · sweep ETA {duration_text(eta)}"))
            if report is not None:
                fresh, batch.beat = report.beat != batch.beat, report.beat
                for said in report.jobs:
                    if said.job_id not in concs or said.job_id in batch.closed:
                        continue
                    if said.job_id not in progress.state.jobs:
                        batch.started.add(said.job_id)
                        progress.job_started(said.job_id, concs[said.job_id], lane=lane)
                        queued()  # no longer waiting in its lane: shown with its phase next, and the ETA
                    progress.reported(said, fresh=fresh, quiet_after_s=max(QUIET_S, 3 * self.options.poll_s))
                for job_id in report.owed:
                    if job_id in concs and job_id in progress.state.jobs:
                        progress.eval_owed(job_id)
            for job_id in begun:  # a worker that never reports: its jobs as their folders show them
                if job_id not in batch.started and job_id not in batch.closed:
                    batch.started.add(job_id)
                    progress.job_started(job_id, concs[job_id], lane=lane)
                    queued()
                    progress.phase("running", job_id=job_id)
            queued()

        def suspension(batch: _Batch, state: str) -> None:
            """Slurm suspended the batch job (`scontrol suspend`, preemption or gang scheduling by suspension): its
            processes are stopped, the client's clocks are not, so the job in flight measures the pause as if the
            server were slow. It is judged invalid when it closes (`judge_suspended`); said once per suspension."""
            if state != "SUSPENDED":
                if batch.suspended_at is not None and state == "RUNNING":
                    event(f"Slurm job {batch.sjob.job_id} resumed after "
                          f"{time.monotonic() - batch.suspended_at:.0f} s suspended")
                    batch.suspended_at = None
                return
            hit = [job.id for job in batch.group.jobs if job.id not in batch.closed
                   and (job.id in batch.started or (art.job_dir(run_dir, job.id) / art.JOB_FILE).is_file())]
            for job_id in hit:  # its seconds as Slurm counts them: `unseen`, once it has resumed
                batch.suspended.setdefault(job_id, None)
            if batch.suspended_at is None:
                batch.suspended_at = time.monotonic()
                event(f"Slurm job {batch.sjob.job_id} is suspended (`scontrol suspend`, or preempted by suspension)"
                      + (f": the job it was running ({', '.join(hit)}) will be judged invalid, its timings include "
                         f"the pause; `{_RESUME}` runs it again" if hit else ""))

        def unseen(batch: _Batch) -> None:
            """Suspensions no poll saw (shorter than `poll_s`, between two looks at the queue: any number of them), as
            Slurm keeps them (`SlurmJob.suspension`), asked before jobs are stored. Slurm keeps only the last one's time
            (SuspendTime) and the time suspended in all (the wall clock since the start less RunTime), so those since
            the last look may have begun any time after it: every job not stored yet that started (its job.json)
            before the last resume is judged invalid, as those of a suspension a poll saw are (`suspension` above),
            and the seconds suspended since the last look count in its reason."""
            try:
                said = batch.sjob.suspension()
            except LaunchError as exc:
                log.warning("could not ask Slurm whether job %s was suspended: %s", batch.sjob.job_id, exc.message)
                return
            if said is None:
                return
            fresh_s = None if said.total_s is None else said.total_s - batch.suspended_s
            batch.suspended_s = said.total_s if said.total_s is not None else batch.suspended_s
            if said.event == batch.suspend_event and not fresh_s:
                return  # no suspension since the last look
            batch.suspend_event = said.event
            hit = []
            for job in batch.group.jobs:
                try:
                    start = (art.job_dir(run_dir, job.id) / art.JOB_FILE).stat().st_mtime  # as its measurement begins
                except OSError:
                    continue  # not started
                if job.id not in batch.closed and start <= said.until:
                    hit.append(job.id)
            fresh = [job_id for job_id in hit if job_id not in batch.suspended]
            for job_id in hit:
                if fresh_s is None:
                    batch.suspended.setdefault(job_id, None)
                else:
                    batch.suspended[job_id] = (batch.suspended.get(job_id) or 0) + fresh_s
            if fresh:
                event(f"Slurm job {batch.sjob.job_id} was suspended between two looks at the queue ("
                      + ("" if fresh_s is None else f"about {fresh_s} s in all; ")
                      + f"`scontrol show job {batch.sjob.job_id}`: SuspendTime={said.event}): the "
                      f"{noun(len(fresh), 'job')} it was running ({', '.join(fresh)}) will be judged invalid, "
                      f"{noun(len(fresh), 'its', 'their')} timings include the pause; "
                      f"`{_RESUME}` runs {noun(len(fresh), 'it', 'them')} again")

        def worker_end(batch: _Batch, seen: SlurmJobResult) -> WorkerEnd | str | None:
            """How the worker of a batch job that left the queue ended, where it ran but left jobs without an
            outcome and Slurm did not end it (its state's own reasons, `slurm_end_reason`, say that): the job it was
            running and its end (`WorkerEnd`), or `FAIL_FAST_NOT_RUN` when it stopped after a failed job under
            `--fail-fast` (exit 1 between two jobs); None when it never ran (the node's Python, an image import: the
            batch log says) or left nothing unsaid."""
            if ended_by_slurm(seen, self.options) is not None or python_check_reason(seen):
                return None
            jobs = [job for job in batch.group.jobs if job.id not in batch.closed]
            if not any(_outcome_in(art.job_dir(run_dir, job.id) / art.OUTCOME_FILE) is None for job in jobs):
                return None
            report = read_report(batch.report_path)
            reported = set() if report is None else {said.job_id for said in report.jobs}
            owed = set() if report is None else set(report.owed)

            def begun(job_id: str) -> bool:  # the worker started it: its report, or its folder's job.json
                return job_id in batch.started or job_id in reported or (
                    art.job_dir(run_dir, job_id) / art.JOB_FILE).is_file()

            # begun and without an outcome of its own: a job that finished after the last poll is not the one the
            # worker died in
            started = [job.id for job in jobs if job.id not in owed and begun(job.id)
                       and _outcome_in(art.job_dir(run_dir, job.id) / art.OUTCOME_FILE) is None]
            if report is None and not started and not batch.closed:
                return None  # the worker never started: the batch log says why
            in_flight = started[-1] if started else None
            ids = {job.id for job in batch.group.jobs}
            if (settings.fail_fast and in_flight is None and seen.exit_code == 1
                    and any(not o.ok for o in outcomes if o.job_id in ids)):
                return failure_text.FAIL_FAST_NOT_RUN
            # (a multi-node group holds its nodes whole already: `render_batch_script`)
            return WorkerEnd(seen, in_flight, self.options.effective_mem, whole_node=batch.group.topology is not None)

        def settle(batch: _Batch, seen: SlurmJobResult | LaunchError) -> None:
            """The batch job left the queue: the outcomes of its jobs not reported yet."""
            group, sjob = batch.group, batch.sjob
            whole = group.topology is not None  # (a multi-node group holds its nodes whole: `render_batch_script`)
            if isinstance(seen, SlurmJobResult) and any(job.id not in batch.closed for job in group.jobs):
                unseen(batch)
            worker: WorkerEnd | str | None = None
            if isinstance(seen, SlurmJobResult):
                ended = python_check_reason(seen) or (
                    f"Slurm job {seen.job_id} {seen.ended} before this job wrote its outcome; see {seen.stdout_path} "
                    f"and {seen.stderr_path}")
                worker = worker_end(batch, seen)
            else:
                event(f"Slurm job {sjob.job_id}: {seen.message}")
                ended = f"{seen.one_line()}; see {sjob.stdout_path} and {sjob.stderr_path}"
            left: list[tuple[str, JobOutcome]] = []
            cut = {"interrupted": 0, "not run": 0}
            for job in group.jobs:
                if job.id in batch.closed:
                    continue
                jdir = art.job_dir(run_dir, job.id)
                outcome = _outcome_in(jdir / art.OUTCOME_FILE)
                why, ran = None, False
                if isinstance(seen, SlurmJobResult) and (outcome is None or _interrupted(outcome)):
                    ran = outcome is not None or (jdir / art.JOB_FILE).is_file()
                    why = slurm_end_reason(seen, self.options, ran=ran, whole_node=whole)
                if isinstance(worker, WorkerEnd) and (outcome is None or _interrupted(outcome)):
                    # the worker died: in which job, and which it never reached (one that finished is neither)
                    died = job.id == worker.in_flight
                    cut["interrupted" if died else "not run"] += 1
                    if outcome is None:  # (one the worker wrote as it was stopped, a SIGTERM's, says it already)
                        why = worker.died_in(jdir) if died else worker.eval_not_run() if (
                            jdir / art.SUMMARY_FILE).is_file() else worker.not_run()
                elif isinstance(worker, str) and outcome is None:
                    why = worker
                if why is not None:
                    if not isinstance(worker, WorkerEnd):
                        cut["interrupted" if ran else "not run"] += 1
                    if outcome is None:
                        outcome = JobOutcome(job_id=job.id, exp_name=job.exp_name, status="failed", reasons=[why])
                    else:  # the worker took Slurm's SIGTERM for a user's interrupt: its folder says why it was
                        outcome.reasons = [why]
                        art.write_json(jdir / art.OUTCOME_FILE, outcome.model_dump(mode="json"))
                elif outcome is None:
                    outcome = JobOutcome(job_id=job.id, exp_name=job.exp_name, status="failed", reasons=[ended])
                left.append((job.id, outcome))
            if isinstance(seen, SlurmJobResult):
                line = f"Slurm job {seen.job_id} {seen.ended}"
                said = ended_by_slurm(seen, self.options, whole_node=whole)
                if isinstance(worker, WorkerEnd):
                    line = worker.line(len(group.jobs) - sum(cut.values()), cut["interrupted"], cut["not run"],
                                       len(group.jobs))
                elif said is not None and any(cut.values()):
                    finished = len(group.jobs) - sum(cut.values())
                    line += (f": {said[0]}; {finished} of "
                             f"{count_of(len(group.jobs), 'job')} finished, {cut['interrupted']} interrupted, "
                             f"{cut['not run']} not run — {said[1]}, then rerun with {_RESUME} to run the rest "
                             f"(see {seen.stderr_path})")
                event(line)
            for job_id, outcome in left:
                close(job_id, outcome, batch)
            # its lane is over: the jobs it never reached no longer weigh on the sweep's ETA
            current_progress().queued(sjob.job_id, 0)

        down = controller_down(timeout_s=self.options.command_timeout_s) if groups else None
        if down is not None:  # said before sbatch's own retries (tens of seconds) keep the run silent
            event(f"{the_controller()} does not answer `scontrol ping` ({down}): sbatch keeps trying it for several "
                  "seconds, and the run stops if it does not answer by then")
        with cancel_on_interrupt([]) as live:
            for group in groups:
                gdir = art.server_dir(run_dir, group.id)
                for job in group.jobs:
                    keep_earlier_attempt(job.id, art.job_dir(run_dir, job.id), event)
                group_file = art.write_json(gdir / art.GROUP_FILE, group.to_json(run_dir, settings))
                (gdir / art.PROGRESS_FILE).unlink(missing_ok=True)  # an earlier attempt's worker said it
                nodes = group.topology.nodes if group.topology is not None else 1
                warning = time_limit_warning(group, self.options.effective_time_limit)
                if warning is not None:
                    event(warning)
                try:
                    sjob = self.submit(group.spec, group_file=group_file, out_dir=gdir, name=group.id, nodes=nodes,
                                       into=live)
                except AllocationRefused as exc:
                    # A topology the cluster cannot hold: its jobs are refused with the reason, the others run. (An
                    # option sbatch refuses is bad input for every group, exit 2; a controller that does not answer,
                    # or an sbatch that fails otherwise, stops the run: as for one node.)
                    event(f"{group.id}: refused — {exc.message}")
                    for job in group.jobs:
                        close(job.id, JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused",
                                                 reasons=[exc.one_line()]))
                    continue
                submitted.append(_Batch(group, sjob, _LogRelay(sjob.stderr_path)
                                        if self.options.relay_worker_log else None, gdir / art.PROGRESS_FILE))
                event(f"submitted Slurm job {sjob.job_id} for {count_of(len(group.jobs), 'job')} ({group.id})")
            waiting = list(submitted)
            lost: list[SlurmJob] = []  # given up for lost, maybe still running: scancelled once slurmctld answers
            started = time.monotonic()
            next_note = started + self.options.pending_note_s / 5
            try:
                while waiting:
                    pending: list[str] = []
                    held: list[str] = []
                    answered = False
                    for batch in list(waiting):
                        seen: SlurmJobResult | tuple[str, str] | LaunchError
                        try:
                            seen = batch.sjob.poll()
                        except LaunchError as exc:  # lost track of it: this group fails, the others are waited for
                            seen = exc
                        answered = answered or isinstance(seen, SlurmJobResult) or (
                            isinstance(seen, tuple) and seen[0] != "UNKNOWN")  # squeue answered
                        if isinstance(seen, tuple) and seen[0] == "PENDING":
                            said = seen[1]
                            if said == "PartitionConfig" and batch.sjob.over_partition_time():
                                said = "PartitionTimeLimit"  # Slurm 22.05's word for it: PartitionConfig
                            hopeless = never_starts(said, self.options.effective_time_limit)
                            if hopeless is not None:  # cancelled now: it would pend until somebody killed the run
                                seen = self._refuse_pending(batch.sjob, seen[1], *hopeless)
                        if isinstance(seen, tuple):
                            if seen[0] == "PENDING" and seen[1] in _HELD:
                                held.append(held_text(batch.sjob.job_id, seen[1]))
                            elif seen[0] == "PENDING":
                                pending.append(f"{batch.sjob.job_id} ({seen[1] or 'no reason given'})")
                            elif seen[0] == "RUNNING" and not batch.running:
                                batch.running = True
                                event(f"Slurm job {batch.sjob.job_id} is running")
                            relay(batch)
                            follow(batch)  # what it finished before the suspension is closed before the rest
                            suspension(batch, seen[0])
                            continue
                        relay(batch, final=True)
                        follow(batch)  # what it finished since the last look, reported as such
                        settle(batch, seen)
                        if isinstance(seen, LaunchError) and batch.sjob.lost:
                            lost.append(batch.sjob)
                            event(f"warning: Slurm job {batch.sjob.job_id} may still be running, its servers with it: "
                                  "it is cancelled as soon as slurmctld answers again (in this run, or by the next run "
                                  f"into this {_OUT}, `{_RESUME}`); by hand: scancel {batch.sjob.job_id}")
                        # only now: an interrupt while its jobs are stored above still reads the rest back below
                        waiting.remove(batch)
                    if lost and answered:  # slurmctld answers again: the jobs it lost are cancelled now
                        for sjob in [sjob for sjob in lost if not sjob.cancel_sent]:
                            try:
                                if sjob.request_cancel(announced=True):
                                    event(f"cancelled Slurm job {sjob.job_id} (given up for lost) now that "
                                          "slurmctld answers again")
                            except LaunchError as exc:
                                log.warning("could not cancel Slurm job %s: %s", sjob.job_id, exc.message)
                    if not waiting:
                        break
                    current_progress().changed()  # a plain display's status line (every 30 s) while a job runs
                    if (pending or held) and time.monotonic() >= next_note:
                        waited = time.monotonic() - started
                        if pending:
                            event(f"still waiting for a node after {waited:.0f} s: Slurm {noun(len(pending), 'job')} "
                                  f"{', '.join(pending)} pending")
                        for said in held:  # it never starts on its own: who holds it, and how to let it go
                            event(f"still waiting after {waited:.0f} s: {said}")
                        next_note = time.monotonic() + self.options.pending_note_s
                    time.sleep(self.options.poll_s)
            except BaseException:
                # An interrupt (Ctrl-C, SIGTERM) or an error lands between two looks at the queue: what the workers
                # finished since the last look is reported (stored, counted) before their batch jobs are cancelled,
                # never left on disk for a later --resume to find while the run says it stored nothing of it.
                with shielded():
                    for batch in waiting:
                        try:
                            follow(batch)
                        except Exception as exc:  # reporting what is on disk never hides the interrupt
                            log.warning("could not read back what Slurm job %s finished: %s", batch.sjob.job_id, exc)
                raise
        order = {job.id: i for i, job in enumerate(job for group in groups for job in group.jobs)}
        return sorted(outcomes, key=lambda o: order.get(o.job_id, len(order)))

    def node_launch(self, spec: LaunchSpec, out_dir: Path) -> NodeLaunch:
        sqsh = None
        if spec.image and self.options.node.use_srun and self.options.squash_dir is not None:
            sqsh = squash_path(spec.image, self.options.squash_dir)
        return NodeLaunch(srun=self.options.node, sqsh=sqsh, out_dir=out_dir)

    def submit(
        self,
        spec: LaunchSpec,
        *,
        group_file: Path,
        out_dir: Path,
        name: str,
        environ: Mapping[str, str] | None = None,
        nodes: int = 1,
        into: list[SlurmJob] | None = None,
    ) -> SlurmJob:
        """Write the batch script and node launch file into `out_dir`, sbatch it, record and return the job.

        `into`: the list a :func:`cancel_on_interrupt` block guards. From `sbatch` to the job being in that list and
        its id in `out_dir` (what `run --resume` reads) a signal is held (:func:`shielded`; `sbatch` in its own
        session, so a terminal's Ctrl-C does not cut it short): an interrupt then cancels the job it just submitted
        instead of leaving it queued with no record of it."""
        out_dir = out_dir.resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        launcher_file = write_node_launch(self.node_launch(spec, out_dir), out_dir / "node_launch.json")
        script = render_batch_script(spec, self.options, name=name, group_file=group_file.resolve(),
                                     out_dir=out_dir, launcher_file=launcher_file, nodes=nodes)
        script_path = out_dir / "job.sbatch"
        script_path.write_text(script, encoding="utf-8")
        environ = sbatch_environment(script, os.environ if environ is None else environ)
        if nodes > 1:
            self._check_nodes(script_path, nodes, name, environ)
        with shielded():
            try:
                proc = run_command(["sbatch", "--parsable", str(script_path)],
                                   timeout_s=self.options.command_timeout_s, env=environ, fix=_SLURM_FIX,
                                   new_session=True)
            except LaunchError as exc:
                if unreached(exc.message):
                    raise controller_unanswered(exc.message, environ) from exc
                fix = refused_fix(exc.message, environ)
                if fix is None:
                    raise
                if fix == _REFUSED_ANY_FIX:
                    raise LaunchError(exc.message, fix=fix) from exc
                # sbatch named the option it refused (a partition, account, QOS, time limit, GPU type, node that
                # does not exist): bad input, exit 2, like any other option the run is given
                raise ConfigError(exc.message, fix=fix) from exc
            job_id = parse_job_id(proc.stdout)
            (out_dir / SLURM_JOB_ID_FILE).write_text(job_id + "\n", encoding="utf-8")
            job = SlurmJob(job_id=job_id, name=name, out_dir=out_dir, script_path=script_path, options=self.options)
            if into is not None:
                into.append(job)
        log.info("submitted Slurm job %s (%s) → %s", job_id, name, out_dir)
        return job


    def _refuse_pending(self, sjob: SlurmJob, reason: str, what: str, fix: str) -> LaunchError:
        """Cancel a batch job Slurm will never start (`never_starts`); the error its jobs fail with."""
        try:
            sjob.cancel()
            sjob.finish()  # ended: nothing left for the interrupt guard to cancel
        except LaunchError as exc:
            log.warning("while cancelling Slurm job %s: %s", sjob.job_id, exc.message)
        return LaunchError(f"Slurm will never start batch job {sjob.job_id}: it pends for {reason} ({what}); "
                           "cancelled", fix=fix)

    def _check_nodes(self, script_path: Path, nodes: int, name: str, environ: Mapping[str, str] | None) -> None:
        """`sbatch --test-only`: a multi-node allocation the partition can never hold would pend forever
        (PartitionNodeLimit); it is refused now with Slurm's reason instead."""
        def test_only(*override: str) -> subprocess.CompletedProcess[str]:
            return run_command(["sbatch", "--test-only", *override, str(script_path)],
                               timeout_s=self.options.command_timeout_s, env=environ, check=False, fix=_SLURM_FIX)

        proc = test_only()
        if proc.returncode != 0 and unreached(proc.stderr or proc.stdout):
            # no answer from slurmctld: nothing was judged of the topology — the run stops, as for a one-node group
            raise controller_unanswered(f"`{describe(proc.args)}` failed with exit status {proc.returncode}: "
                                        f"{(proc.stderr or proc.stdout).strip()}", environ)
        if proc.returncode != 0:
            said = (proc.stderr or proc.stdout).strip().splitlines()
            fix = refused_fix(proc.stderr or "", environ)
            node_config = "node configuration" in (proc.stderr or "").lower()
            unusable = self._unusable_nodes(environ) if node_config else []
            if node_config and not unusable and test_only("--nodes=1").returncode != 0:
                # Not one node of the partition, all of them up, meets what each node is asked for (mem,
                # cpus_per_task, a --constraint in extra_sbatch), the node count aside (a command-line --nodes
                # overrides the script's): the options are at fault, not the topology — bad input, exit 2 with their
                # fix, as for a one-node group. (A node down or drained fails `--test-only` alike: not the options.)
                raise ConfigError(f"sbatch refuses the batch job of {name}: {said[-1] if said else 'no reason given'}",
                                  fix=_NODE_CONFIG_FIX)
            if fix is not None and fix != _REFUSED_ANY_FIX and not node_config:
                # sbatch named another option it refuses (a partition, account, QOS, time limit, GPU type): bad
                # input, exit 2 with that option's fix, as `submit` says it for a one-node group
                raise ConfigError(f"sbatch refuses the batch job of {name}: {said[-1] if said else 'no reason given'}",
                                  fix=fix)
            excluded = (f"exclude ({','.join(self.options.exclude)}) fewer nodes ({_OPTION} "
                        f"{shell.quote('exclude=[...]')}), "
                        if self.options.exclude else "")
            down = (f" ({len(unusable)} of the partition's nodes cannot take jobs now, {', '.join(unusable)}: down, "
                    "drained or not responding, `sinfo -R` says why)" if unusable else "")
            raise AllocationRefused(
                f"Slurm cannot allocate the {count_of(nodes, 'node')} the topology of {name} needs"
                + (f": {said[-1]}" if said else "") + down,
                fix=f"{excluded}run it on a partition with that many nodes ({_OPTION} partition=NAME), or "
                    "choose a topology with fewer workers" + ("; or wait until those nodes are back" if down else ""),
            )

    def _unusable_nodes(self, environ: Mapping[str, str] | None) -> list[str]:
        """The nodes of the batch jobs' partition (`partition`, else the cluster's default) that cannot take a job
        now, as `sinfo` shows them: down, drained or draining, failing, not responding (`*`), in maintenance. Empty
        when sinfo does not answer."""
        try:
            proc = run_command(["sinfo", "-h", "-N", "-o", "%N %P %t"], timeout_s=self.options.command_timeout_s,
                               env=environ, check=False, fix=_SLURM_FIX)
        except LaunchError:
            return []
        unusable: list[str] = []
        for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
            node, partition, state = [*line.split(), "", "", ""][:3]
            ours = partition.rstrip("*") == self.options.partition if self.options.partition \
                else partition.endswith("*")
            if ours and not _usable(state) and node not in unusable:
                unusable.append(node)
        return unusable


class SlurmInterrupted(Interrupted):
    """The submitter got an interrupt signal (SIGTERM, SIGHUP, SIGUSR1, ...: :func:`cancel_on_interrupt`); raised in
    the main thread so `with` blocks cancel their jobs."""


def cancel_jobs(jobs: Sequence[SlurmJob], *, wait_s: float, announced: bool = False) -> list[SlurmJob]:
    """scancel every job, then wait (at most `wait_s`, less once a further signal hurries the shutdown) until the
    queue lists none of them; returns those still listed. Jobs that ended are skipped. `announced`: the caller has
    said which jobs it cancels and why (no second, bare line per job)."""
    live = [job for job in jobs if job.result is None]

    def send(job: SlurmJob, *, again: bool = False) -> None:
        try:
            job.request_cancel(announced=announced or again)
        except LaunchError as exc:
            log.error("could not cancel Slurm job %s: %s", job.job_id, exc.message)

    for job in live:
        send(job)
    deadline = time.monotonic() + wait_s
    poll_s = min([job.options.poll_s for job in live] + [1.0])
    while live:
        still = []
        for job in live:
            try:
                if job.queue_state() is not None:
                    still.append(job)
                    if not job.cancel_sent:  # the controller answers again: the scancel it missed
                        log.warning("cancelling Slurm job %s now that slurmctld answers again", job.job_id)
                        send(job, again=True)
            except LaunchError as exc:
                log.warning("squeue failed while cancelling %s: %s", job.job_id, exc.message)
                still.append(job)
        live = still
        if not live or time.monotonic() >= deadline or hurried():
            break
        time.sleep(poll_s)
    return live


def owed_cancel_text(job: SlurmJob) -> str:
    """What to say of a batch job no scancel reached (the controller did not answer): it may still run, holding its
    node and its servers; the next run into the same --out (`--resume`) cancels it, or the user does."""
    record = job.out_dir / SLURM_JOB_ID_FILE
    return (f"Slurm job {job.job_id} could not be cancelled (slurmctld did not answer) and may still be "
            f"running, its servers with it: the next `llmsweep run` into this {_OUT} (`{_RESUME}`) cancels it first "
            f"({record} records it), or cancel it by hand once `sinfo` answers: scancel {job.job_id}")


def queued_workdirs(*, timeout_s: float = 60.0) -> dict[str, Path] | None:
    """This user's batch jobs in the queue: job id → working directory (`--chdir`: the server folder `submit` writes
    the batch script into). None when squeue fails (said as a warning): the queue could not be read."""
    try:
        proc = run_command(["squeue", "-h", "-u", str(os.getuid()), "-o", "%i|%Z"], timeout_s=timeout_s,
                           check=False, fix=_SLURM_FIX)
    except LaunchError as exc:
        log.warning("could not list the Slurm jobs in the queue: %s", exc.message)
        return None
    if proc.returncode != 0:
        log.warning("could not list the Slurm jobs in the queue: squeue: %s", proc.stderr.strip())
        return None
    found: dict[str, Path] = {}
    for line in proc.stdout.splitlines():
        job_id, _, workdir = line.strip().partition("|")
        if job_id.isdigit() and workdir:
            found[job_id] = Path(workdir)
    return found


def jobs_working_in(folders: Sequence[Path], queued: Mapping[str, Path] | None) -> dict[str, Path]:
    """The jobs of `queued` (:func:`queued_workdirs`) whose working directory is one of `folders`: job id → folder. A
    submitter SIGKILLed while `sbatch` ran leaves a job it never recorded (`slurm_job_id` is written once sbatch has
    answered); this finds it."""
    wanted = {folder.resolve(): folder for folder in folders}
    return {job_id: wanted[workdir] for job_id, workdir in (queued or {}).items() if workdir in wanted}


def _completing(job: SlurmJob) -> bool:
    """Whether the queue lists `job` as COMPLETING (CG): cancelled and ending, its node cleaning up."""
    try:
        return job.queue_state() == "COMPLETING"
    except LaunchError:
        return False


def driver_signal_file(out_dir: Path, job_id: str) -> Path:
    """In a batch job's folder: the signal that stopped the driver (its name), written before the driver scancels the
    job (:func:`cancel_on_interrupt`), for its worker (:func:`driver_signal`)."""
    return out_dir / f"slurm-{job_id}.signal"


def driver_signal(out_dir: Path, job_id: str | None) -> Callable[[int], int | None]:
    """For a worker (`signals.named_for`): the signal a SIGTERM it received stands for. The driver's `scancel` sends
    SIGTERM whatever stopped the driver (Ctrl-C's SIGINT, a SIGHUP): where the driver wrote its signal before the
    scancel (`driver_signal_file`), the worker's records name that one — the signal the run exits for — not
    SIGTERM. None (SIGTERM itself) where no file says so: the time limit's, or a scancel from outside the run."""
    said: list[int] = []

    def stands_for(signum: int) -> int | None:
        if signum != signal.SIGTERM or not job_id:
            return None
        if not said:
            try:
                said.append(signal.Signals[driver_signal_file(out_dir, job_id).read_text().strip()])
            except (OSError, KeyError):
                return None
        return said[0]

    return stands_for


def _say_driver_signal(jobs: Sequence[SlurmJob], signum: int) -> None:
    """Write the driver's signal beside each job it is about to scancel (:func:`driver_signal`). Nothing here may
    keep the scancels from being sent: a file that cannot be written leaves that worker naming SIGTERM."""
    for job in jobs:
        try:
            driver_signal_file(job.out_dir, job.job_id).write_text(signal.Signals(signum).name + "\n")
        except Exception as exc:  # the cancellation comes first
            log.info("could not write the driver's signal for Slurm job %s: %s", job.job_id, exc)


@contextmanager
def cancel_on_interrupt(jobs: list[SlurmJob]) -> Iterator[list[SlurmJob]]:
    """Cancel every unfinished job in `jobs` when the block exits early: an exception, or any interrupt signal
    (`host.INTERRUPT_SIGNAL_NAMES`: Ctrl-C, SIGTERM, SIGHUP, SIGQUIT, the SIGUSR1 of `sbatch --signal=B:USR1@T`, ...),
    whether or not the CLI's `signals.install()` ran — a signal ignored (`nohup`'s SIGHUP, so that the jobs outlive
    the terminal) or handled by something else in the process is left as it is (`signals.taken_over`).

    Jobs appended to the list inside the block are covered too. On a normal exit unfinished jobs are cancelled as
    well: leaving the block means nobody will collect them. The cancellation itself is shielded: any signal arriving
    meanwhile (a second SIGTERM, a Ctrl-C after SIGHUP) is recorded and only stops the wait for the queue to empty,
    never the scancels.
    """

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise interrupt(signum, SlurmInterrupted)  # the exit code follows the first signal: 143 for SIGTERM

    try:
        with handling(raise_interrupt):
            yield jobs
    finally:
        with shielded():
            live = [job for job in jobs if job.result is None]
            if received():  # cancelled for a signal: the workers' records name it, not scancel's SIGTERM
                _say_driver_signal(live, received()[0])
            wait_s = max([job.options.cancel_wait_s for job in live] + [0.0])
            for job in cancel_jobs(live, wait_s=wait_s):
                if not job.cancel_sent:
                    log.warning("%s", owed_cancel_text(job))
                    continue
                if _completing(job):  # cancelled, and ending: a forced cancel would only race Slurm's own clean-up
                    log.warning("Slurm job %s is completing after scancel: Slurm removes it from the queue once its "
                                "node has cleaned up (`squeue -j %s` shows it)", job.job_id, job.job_id)
                    continue
                log.error("Slurm job %s is still listed after scancel; check the node (`scontrol show job %s`), "
                          "then `scancel -f %s`", job.job_id, job.job_id, job.job_id)
