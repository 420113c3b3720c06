"""A batch job that left the queue after the controller forgot it (past MinJobAge: a driver that could not reach
slurmctld for minutes, a site with a short MinJobAge) has its end read from Slurm's accounting, `sacct`, where the
cluster keeps it: its state (TIMEOUT, NODE_FAIL...) and nodes, not a guess from the exit status. Where sacct cannot say
(accounting disabled, as on the CI clusters), the state is said to be unknown, with sacct's own words.

`sacct` is faked on PATH with the output its man page documents for `-X -n -P -o JobID,State,ExitCode,NodeList,WorkDir`
(`|` between fields, none at the end, no header; `CANCELLED by UID`; ExitCode `STATUS:SIGNAL`); `scontrol` answers as
it does for a job it no longer knows. The disabled accounting's answer is checked against the real sacct in
tests/e2e/test_slurm_left.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmsweep.errors import LaunchError
from llmsweep.execute.slurm import DownNode, SlurmJob, SlurmOptions, sacct_end

FORGOT = "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1"
"""What `scontrol show job ID` says of a job the controller no longer knows."""


def _fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **scripts: str) -> Path:
    """Commands `name` running the shell text given, first on PATH; each appends its argv to calls.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\necho "{name} $*" >> {tmp_path}/calls.log\n{body}\n')
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def _job(out: Path) -> SlurmJob:
    out.mkdir(parents=True, exist_ok=True)
    return SlurmJob(job_id="42", name="g", out_dir=out, script_path=out / "job.sbatch",
                    options=SlurmOptions(command_timeout_s=10))


def _sacct(line: str) -> str:
    return f"printf '%s\\n' '{line}'"


@pytest.mark.parametrize(("state", "code", "exit_code"), [
    ("TIMEOUT", "0:15", 143),
    ("CANCELLED by 1001", "0:9", 137),
    ("OUT_OF_MEMORY", "0:125", 0),  # 125: Slurm's SIG_OOM, no signal (there is no exit 253)
    ("FAILED", "3:0", 3),
    ("COMPLETED", "0:0", 0),
])
def test_a_job_scontrol_forgot_has_its_end_read_from_sacct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          state: str, code: str, exit_code: int) -> None:
    """Its rc file says 143 whatever ended it (the batch script's trap on SIGTERM): read from it alone, a TIMEOUT was
    "FAILED" and its jobs never told to raise the time limit."""
    out = tmp_path / "servers" / "g"
    _fake(tmp_path, monkeypatch, scontrol=FORGOT, sacct=_sacct(f"42|{state}|{code}|vm|{out}"))
    job = _job(out)
    (out / "slurm-42.rc").write_text("143\n")
    result = job.finish()
    assert (result.state, result.exit_code, result.nodes) == (state.split()[0], exit_code, "vm")
    assert result.node == "vm"  # one node: the one the batch script ran on, which a dead worker's fix names
    assert result.unknown_state is None and result.ended == f"ended {state.split()[0]} (exit {exit_code})"
    calls = (tmp_path / "calls.log").read_text()
    assert "sacct -j 42 -X -n -P -o JobID,State,ExitCode,NodeList,WorkDir" in calls, calls


@pytest.mark.parametrize(("code", "status"), [("0:9", 137), ("0:15", 143), ("0:64", 192), ("3:0", 3), ("0:0", 0),
                                               ("0:125", 0), ("1:125", 1), ("0:65", 0), ("-", None), ("", None)])
def test_an_exit_code_reads_a_signal_as_the_shell_does_and_slurms_own_marks_as_no_signal(
        code: str, status: int | None) -> None:
    """Only a signal number (1-64) is 128 + N: Slurm writes 125 (SIG_OOM) in the signal field of an OUT_OF_MEMORY
    job, which read as "exit 253", a status no process had."""
    from llmsweep.execute.slurm import exit_of

    assert exit_of(code) == status


def test_a_dead_worker_whose_end_sacct_read_is_told_to_read_dmesg_on_its_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sacct keeps no BatchHost: an end read from it had no node, so a worker SIGKILLed on a one-node allocation was
    told to read "`dmesg` on the node", where scontrol's end names it."""
    from llmsweep.execute.slurm import WorkerEnd

    out = tmp_path / "servers" / "g"
    _fake(tmp_path, monkeypatch, scontrol=FORGOT, sacct=_sacct(f"42|FAILED|0:9|gpu-17|{out}"))
    result = _job(out).finish()
    assert (result.state, result.exit_code, result.node) == ("FAILED", 137, "gpu-17")
    worker = WorkerEnd(result, "b", SlurmOptions().effective_mem)
    assert "(`dmesg` on gpu-17 says" in worker.fix and "Slurm: FAILED on gpu-17" in worker.not_run(), worker.fix


def test_a_node_failure_read_from_sacct_names_the_node_sinfo_shows_down(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "servers" / "g"
    _fake(tmp_path, monkeypatch, scontrol=FORGOT, sacct=_sacct(f"42|NODE_FAIL|0:0|mn[0-2]|{out}"),
          sinfo="printf 'mn0|alloc|none\\nmn1|down*|Not responding\\nmn1|down*|Not responding\\nmn2|idle|none\\n'")
    result = _job(out).finish()
    assert result.state == "NODE_FAIL" and result.nodes == "mn[0-2]" and result.node is None  # which ran the script?
    assert result.down == (DownNode("mn1", "down*", "Not responding"),)
    assert "sinfo -h -N -n mn[0-2] -o %N|%t|%E" in (tmp_path / "calls.log").read_text()


def test_only_a_node_that_failed_is_named_never_one_drained_beside_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A node drained for maintenance (drain, drng), in maintenance, booting or in an unknown state ended no job: the
    reason named mn0 `drain` beside the node that failed and gave both to exclude. Only down, fail, failg and a
    node not responding (`*`) are the failed ones."""
    from llmsweep.execute.slurm import slurm_end_reason

    out = tmp_path / "servers" / "g"
    states = {"mn0": "drain", "mn1": "down*", "mn2": "drng", "mn3": "maint", "mn4": "boot", "mn5": "unk",
              "mn6": "failg", "mn7": "idle*", "mn8": "fail", "mn9": "mix~", "mn10": "down~"}
    listed = "\\n".join(f"{name}|{state}|none" for name, state in states.items())
    _fake(tmp_path, monkeypatch, scontrol=FORGOT, sacct=_sacct(f"42|NODE_FAIL|0:0|mn[0-10]|{out}"),
          sinfo=f"printf '{listed}\\n'")
    result = _job(out).finish()
    assert [n.name for n in result.down or ()] == ["mn1", "mn6", "mn7", "mn8", "mn10"], result.down
    said = slurm_end_reason(result, SlurmOptions(), ran=True, whole_node=True)
    assert said is not None and "(--executor-option 'exclude=[mn1,mn6,mn7,mn8,mn10]';" in said, said
    assert "its nodes mn1, mn6, mn7, mn8 and mn10 failed" in said, said  # not "mn1 and mn6 and mn7 and ..."
    _fake(tmp_path, monkeypatch, sinfo="printf 'mn0|drain|maintenance\\nmn1|maint|none\\n'")
    assert _job(out).finish().down == ()  # a drain names no failed node: srun's words, or `sinfo -R`, say which


SRUN_NODE_FAIL_LOG = """\
INFO:     127.0.0.1:50712 - "POST /v1/completions HTTP/1.1" 200 OK
srun: error: Node failure on {node}
srun: Job step aborted: Waiting up to 7 seconds for job step to finish.
"""
"""The end of a role's log whose step ran on the node that failed, as srun 22.05 wrote it (captured on a one-node
cluster whose node was set down under a running step: `vm` there), the engine's last line before it."""


def test_a_node_failure_sinfo_no_longer_shows_is_named_from_what_srun_said_in_the_roles_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a cluster with `ReturnToService=2` the failed node is back in service within a second, so `sinfo` shows
    none of the job's nodes down as its end is read, and a multi-node job's reason said only "one of its nodes,
    mn[0-2]," with `exclude=[NODE]`. The srun of the step on that node wrote which one to its role's log: the reason
    names it and gives it to exclude. A log an earlier batch job left in the folder is not this one's."""
    from llmsweep.execute.slurm import slurm_end_reason

    out = tmp_path / "servers" / "g"
    _fake(tmp_path, monkeypatch, scontrol=FORGOT, sacct=_sacct(f"42|NODE_FAIL|0:0|mn[0-2]|{out}"),
          sinfo="printf 'mn0|idle|none\\nmn1|idle|none\\nmn2|idle|none\\n'")
    roles = out / "roles"
    roles.mkdir(parents=True)
    earlier = roles / "prefill-0.log"  # an earlier batch job's, whose node mn2 failed
    earlier.write_text(SRUN_NODE_FAIL_LOG.format(node="mn2"))
    os.utime(earlier, (1e9, 1e9))
    job = _job(out)
    (roles / "router-0.log").write_text("llmsweep PD router on http://10.0.0.1:8000\n")
    (roles / "decode-0.log").write_text("x" * 300_000 + "\n" + SRUN_NODE_FAIL_LOG.format(node="mn1"))
    result = job.finish()
    assert result.down == () and result.srun_said is not None
    assert result.srun_said.nodes == ("mn1",) and result.srun_said.logs == (roles / "decode-0.log",)
    said = slurm_end_reason(result, SlurmOptions(), ran=True, whole_node=True)
    assert said is not None and "(Slurm stopped it because its node mn1 failed (stopped answering the controller, " \
        f"or set down); srun said so: `srun: error: Node failure on mn1` in {roles / 'decode-0.log'}; Slurm has it " \
        "back in service now); leave mn1 out if it fails again (--executor-option 'exclude=[mn1]';" in said, said


def _option_parsed(fix: str) -> tuple[str, ...]:
    """The nodes the `--executor-option exclude=...` a fix gives leaves out, read as the shell and the CLI read it."""
    import re
    import shlex

    from llmsweep.cli.options import executor_options

    given = re.search(r"--executor-option ('[^']*'|\S+?)(?:;|$)", fix)
    assert given is not None, fix
    return SlurmOptions(**executor_options(tuple(shlex.split(given.group(1))))).exclude



def _node_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: str, sinfo: str,
               srun_node: str | None = None) -> tuple[Path, SlurmJob]:
    """A batch job of group folder `servers/g` that sacct says ended NODE_FAIL on `nodes`, sinfo listing `sinfo`
    (its `%N|%t|%E` lines), and, with `srun_node`, a decode worker's log where srun said that node failed."""
    out = tmp_path / "servers" / "g"
    _fake(tmp_path, monkeypatch, scontrol=FORGOT, sacct=_sacct(f"42|NODE_FAIL|0:0|{nodes}|{out}"),
          sinfo=f"printf '{sinfo}'")
    if srun_node is not None:
        (out / "roles").mkdir(parents=True)
        (out / "roles" / "decode-0.log").write_text(SRUN_NODE_FAIL_LOG.format(node=srun_node))
    return out, _job(out)


def test_nodes_srun_names_in_a_hostlist_are_named_one_by_one_and_the_fix_parses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """srun writes `Node failure on %s` with the controller's hostlist: two nodes failing at once are `mn[1-2]`. The
    reason names each node, and its `exclude=[...]` is one the CLI reads (`exclude=[mn[1-2]]` is no YAML: the CLI
    refused the fix it was given)."""
    from llmsweep.execute.slurm import slurm_end_reason

    idle = "".join(f"mn{n}|idle|none\\n" for n in range(4))
    _, job = _node_fail(tmp_path, monkeypatch, "mn[0-3]", idle, srun_node="mn[1-2]")
    result = job.finish()
    assert result.srun_said is not None and result.srun_said.nodes == ("mn1", "mn2")
    said = slurm_end_reason(result, SlurmOptions(), ran=True, whole_node=True)
    assert said is not None and "Slurm stopped it because its nodes mn1 and mn2 failed" in said, said
    assert "`srun: error: Node failure on mn[1-2]`" in said and "Slurm has them back in service now" in said, said
    assert "leave mn1 and mn2 out if they fail again (--executor-option 'exclude=[mn1,mn2]';" in said, said
    assert _option_parsed(said) == ("mn1", "mn2")


@pytest.mark.parametrize(("hostlist", "names"), [
    ("vm", ("vm",)),
    ("mn[1-2]", ("mn1", "mn2")),
    ("gpu[08-10,12]", ("gpu08", "gpu09", "gpu10", "gpu12")),
    ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),
    ("a,b[1-2],a", ("a", "b1", "b2")),
    ("mn[1-", ("mn[1-",)),  # no hostlist: kept as written
])
def test_a_hostlist_expands_as_scontrol_show_hostnames_does(hostlist: str, names: tuple[str, ...]) -> None:
    from llmsweep.execute.slurm import expand_hostlist

    assert expand_hostlist(hostlist) == names


@pytest.mark.parametrize("names", [("mn1", "mn2"), ("01", "yes"), ("node-7",), ("mn1",)])
def test_the_exclude_option_a_fix_gives_reads_back_as_its_nodes(names: tuple[str, ...]) -> None:
    """Names YAML would read as a number or a boolean are quoted, so the option leaves out the nodes named."""
    from llmsweep.execute.slurm import exclude_option

    assert _option_parsed(f"(--executor-option {exclude_option(names)}; x)") == names


def pasted(tmp_path: Path, words: str) -> list[str]:
    """The words a shell that refuses a glob matching nothing (zsh's default, bash's `failglob`) makes of `words`
    pasted on its command line, in an empty folder; AssertionError with the shell's words when it refuses them."""
    import subprocess

    done = subprocess.run(["bash", "-O", "failglob", "-c", f"printf '%s\\n' {words}"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("names", [("mn1", "mn2"), ("mn1",), ("01",), ("NODE",)])
def test_the_exclude_option_a_fix_gives_pastes_into_a_shell_that_globs(tmp_path: Path,
                                                                       names: tuple[str, ...]) -> None:
    """`--executor-option exclude=[mn1]` pasted into zsh is refused (`no matches found: exclude=[mn1]`: the brackets
    are a glob): the fix's option is one quoted word, which every shell passes on as written."""
    from llmsweep.cli.options import executor_options
    from llmsweep.execute.slurm import exclude_option

    given = pasted(tmp_path, f"--executor-option {exclude_option(names)}")
    assert given[0] == "--executor-option" and len(given) == 2, given
    assert SlurmOptions(**executor_options((given[1],))).exclude == names


def test_srun_is_not_asked_where_sinfo_names_the_node_or_nothing_said_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    out, job = _node_fail(tmp_path, monkeypatch, "mn[0-2]", "mn0|idle|none\\nmn1|down*|Not responding\\n",
                          srun_node="mn1")
    result = job.finish()
    assert result.down == (DownNode("mn1", "down*", "Not responding"),) and result.srun_said is None
    (out / "roles" / "decode-0.log").write_text("srun: error: mn1: task 0: Killed\n")  # no node failure said
    _fake(tmp_path, monkeypatch, sinfo="printf 'mn0|idle|none\\nmn1|idle|none\\n'")
    assert job.finish().srun_said is None


@pytest.mark.parametrize(("sacct", "why"), [
    ("echo 'Slurm accounting storage is disabled' >&2; exit 1",
     "sacct cannot say, `sacct` exited with status 1: Slurm accounting storage is disabled"),
    ("exit 0", "sacct cannot say, sacct has no record of job 42"),
    (_sacct("42|RUNNING|0:0|vm|{out}"), "sacct cannot say, sacct has it RUNNING still (its accounting may lag"),
    (_sacct("42|COMPLETED|0:0|vm|/elsewhere"),
     "sacct cannot say, sacct's job 42 worked in /elsewhere, not in {out} (another job of that number)"),
])
def test_a_job_neither_scontrol_nor_sacct_knows_is_said_to_end_in_an_unknown_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sacct: str, why: str) -> None:
    """Accounting disabled, no record, a record still running, or one of another job of the number (a controller
    whose numbering started again): the exit status comes from the rc file, and the state is said to be unknown and
    why, never "ended FAILED" as if Slurm had said so."""
    out = tmp_path / "servers" / "g"
    _fake(tmp_path, monkeypatch, scontrol=FORGOT, sacct=sacct.format(out=out))
    job = _job(out)
    (out / "slurm-42.rc").write_text("143\n")
    result = job.finish()
    assert result.exit_code == 143 and result.unknown_state is not None
    assert why.format(out=out.resolve()) in result.unknown_state, result.unknown_state
    assert result.ended.startswith("ended with exit status 143 (Slurm's final state of it is unknown: scontrol no "
                                   "longer knows the job and sacct cannot say"), result.ended
    assert "from slurm-42.rc" in result.ended


def test_a_job_with_no_end_anywhere_names_what_sacct_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "servers" / "g"
    _fake(tmp_path, monkeypatch, scontrol=FORGOT, sacct="echo 'Slurm accounting storage is disabled' >&2; exit 1")
    with pytest.raises(LaunchError) as err:
        _job(out).finish()
    assert "Slurm accounting storage is disabled" in err.value.message, err.value.message
    assert "enable Slurm's accounting" in (err.value.fix or "")


def test_scontrol_is_asked_first_and_sacct_only_once_it_forgot_the_job(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "servers" / "g"
    _fake(tmp_path, monkeypatch, sacct="exit 1",
          scontrol="echo 'JobId=42 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 BatchHost=vm NodeList=vm'")
    result = _job(out).finish()
    assert (result.state, result.exit_code, result.node, result.nodes) == ("TIMEOUT", 143, "vm", "vm")
    assert "sacct" not in (tmp_path / "calls.log").read_text()


def test_sacct_not_installed_is_said_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    said = sacct_end("42", tmp_path, timeout_s=5)
    assert isinstance(said, str) and "`sacct` is not installed or not on PATH" in said, said


@pytest.mark.parametrize("extra", [("--mem",), ("--mem-per-gpu", "--exclusive")])
def test_a_memory_flag_without_its_size_is_refused_as_a_time_flag_without_its_limit_is(extra: tuple[str, ...]) -> None:
    """`extra_sbatch --mem` with no size was passed over: the out-of-memory reason then named the `mem` option the job
    did not run under (sbatch refuses the flag, or reads the next token as its size)."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="has no value after it; give the size with it"):
        SlurmOptions(extra_sbatch=extra)
