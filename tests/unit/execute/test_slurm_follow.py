"""What the Slurm driver makes of a batch job it follows: why its jobs failed when Slurm ended it (the state, what it
means, the fix), the time limit it runs under (sbatch's forms; extra_sbatch's --time overriding time_limit), and the
worker's stderr relayed line by line as it grows."""

from __future__ import annotations

import io
import re
import types
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, cast

import pytest

from llmsweep.errors import ConfigError
from llmsweep.execute import slurm
from llmsweep.execute.progress import PlainProgress
from llmsweep.execute.signals import exit_said
from llmsweep.execute.slurm import (
    SlurmExecutor,
    SlurmJobResult,
    SlurmOptions,
    _LogRelay,
    slurm_end_reason,
    time_limit_s,
    time_limit_warning,
)

FORMATS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"


@pytest.mark.parametrize(("value", "seconds"), [
    ("60", 3600), ("1", 60), ("90:30", 5430), ("02:00:00", 7200), ("00:01:00", 60), ("1-12", 129600),
    ("1-12:30", 131400), ("1-12:30:15", 131415), ("INFINITE", None), ("unlimited", None), ("0", None),
])
def test_time_limits_in_the_forms_sbatch_takes(value: str, seconds: int | None) -> None:
    assert time_limit_s(value) == seconds


@pytest.mark.parametrize(("options", "field"), [
    ({"time_limit": "2h"}, "time_limit"),
    ({"time_limit": "1:2:3:4"}, "time_limit"),
    ({"extra_sbatch": ["--time=soon"]}, "extra_sbatch"),
    ({"extra_sbatch": ["--time", "1-2-3"]}, "extra_sbatch"),
    ({"extra_sbatch": ["-t", "--qos=high"]}, "extra_sbatch"),
    ({"extra_sbatch": ["--qos=high", "-t"]}, "extra_sbatch"),
    ({"extra_sbatch": ["-t90m"]}, "extra_sbatch"),
])
def test_a_malformed_time_limit_is_refused_naming_the_field_and_the_forms(options: dict[str, Any],
                                                                         field: str) -> None:
    with pytest.raises(ConfigError) as err:
        SlurmExecutor(options)
    text = str(err.value)
    assert f"{field}: " in text and FORMATS in text, text


@pytest.mark.parametrize(("extra", "value", "seconds", "field"), [
    ((), "02:00:00", 7200, "time_limit"),
    (("--qos=high", "--time-min=10"), "02:00:00", 7200, "time_limit"),  # --time-min is another option
    (("--time=30",), "30", 1800, "extra_sbatch"),
    (("--time", "1-12"), "1-12", 129600, "extra_sbatch"),
    (("-t", "45:00"), "45:00", 2700, "extra_sbatch"),
    (("-t90",), "90", 5400, "extra_sbatch"),
    (("--time=10", "--qos=high", "-t", "20:30"), "20:30", 1230, "extra_sbatch"),  # sbatch takes the last one
])
def test_the_time_limit_is_the_last_time_sbatch_is_given(extra: tuple[str, ...], value: str, seconds: int,
                                                        field: str) -> None:
    limit = SlurmOptions(time_limit="02:00:00", extra_sbatch=extra).effective_time_limit
    assert (limit.value, limit.seconds, limit.field) == (value, seconds, field)


def test_the_warning_and_the_timeout_reasons_quote_the_limit_the_job_runs_under(monkeypatch: pytest.MonkeyPatch,
                                                                                tmp_path: Path) -> None:
    """extra_sbatch's --time came after time_limit's on the #SBATCH lines, so sbatch ran the job under it, while the
    warning and a TIMEOUT's reasons quoted time_limit and told the user to raise it (which changed nothing)."""
    options = SlurmOptions(time_limit="04:00:00", extra_sbatch=("--qos=high", "--time", "30"))
    monkeypatch.setattr(slurm, "planned_windows_s", lambda group: 3600.0)
    group: Any = types.SimpleNamespace(id="g", jobs=[object(), object()])
    warning = time_limit_warning(group, options.effective_time_limit)
    assert warning is not None and "more than the Slurm time limit 30 (the --time in extra_sbatch);" in warning
    assert warning.endswith("raise the --time in --executor-option extra_sbatch (it overrides time_limit)")
    assert time_limit_warning(group, SlurmOptions(time_limit="04:00:00").effective_time_limit) is None
    for ran in (True, False):
        why = slurm_end_reason(_ended("TIMEOUT"), options, ran=ran)
        assert why is not None and "its time limit, 30 (the --time in extra_sbatch), ran out" in why
        assert "raise the --time in --executor-option extra_sbatch" in why and "04:00:00" not in why
    # The script carries both, extra_sbatch's last (a value given apart stays on its flag's line): sbatch's choice.
    from llmsweep.engines.launch import LaunchSpec

    script = slurm.render_batch_script(LaunchSpec(engine="sim", argv=("sim",), port=1), options, name="g",
                                       group_file=tmp_path / "g.json", out_dir=tmp_path,
                                       launcher_file=tmp_path / "l.json")
    times = [line for line in script.splitlines() if line.startswith("#SBATCH --time")]
    assert times == ["#SBATCH --time=04:00:00", "#SBATCH --time 30"]


def _ended(state: str, **kw: Any) -> SlurmJobResult:
    return SlurmJobResult("42", state, 143, Path("slurm-42.out"), Path("slurm-42.err"), **kw)


ONE_HOUR = SlurmOptions(time_limit="01:00:00")


@pytest.mark.parametrize(("state", "what", "fix"), [
    ("TIMEOUT", "Slurm stopped it because its time limit, 01:00:00, ran out",
     "raise --executor-option time_limit=HH:MM:SS"),
    ("PREEMPTED", "Slurm stopped it to run other work first (preemption)",
     "run where jobs are not preempted (--executor-option partition=NAME"),
    ("NODE_FAIL", "Slurm stopped it because its node failed (stopped answering the controller, or set down); Slurm "
     "did not say which",
     "leave that node out if it fails again (--executor-option 'exclude=[NODE]'"),
    ("BOOT_FAIL", "Slurm stopped it because its node failed to boot for it; Slurm did not say which",
     "leave that node out until it boots again (--executor-option 'exclude=[NODE]'"),
    ("OUT_OF_MEMORY", "Slurm stopped it because it used more memory than it was given: it asked for no --mem",
     "give it more: --executor-option mem=SIZE (it asked for none and shared the node's), or exclusive=true"),
    ("CANCELLED", "someone outside this run cancelled it", "find out who cancelled it"),
    ("DEADLINE", "Slurm stopped it because its --deadline passed", "move or drop the --deadline"),
])
def test_a_job_slurm_ended_says_the_state_what_it_means_and_the_fix(state: str, what: str, fix: str) -> None:
    """Every state Slurm ends a batch job in is said in one form: the state, what Slurm did and why, the fix (TIMEOUT
    and OUT_OF_MEMORY kept an older, shorter wording: "it ran out of memory")."""
    ran = slurm_end_reason(_ended(state), ONE_HOUR, ran=True)
    assert ran is not None and ran.startswith(f"interrupted: Slurm job 42 ended {state} while this job ran (")
    assert f"({what}" in ran and f"); {fix}" in ran and ran.endswith("then rerun with --resume"), ran
    never = slurm_end_reason(_ended(state), ONE_HOUR, ran=False)
    assert never is not None and never.startswith(f"not run: Slurm job 42 ended {state} before it reached this job (")
    assert f"({what}" in never and f"); {fix}" in never and never.endswith("then `--resume` runs it"), never


def test_an_out_of_memory_end_names_the_memory_the_job_asked_for() -> None:
    said = slurm_end_reason(_ended("OUT_OF_MEMORY"), SlurmOptions(mem="64G", exclusive=True), ran=True)
    assert said is not None and "more memory than it was given: --mem=64G)" in said, said
    assert "--executor-option mem=SIZE above its 64G" in said and "exclusive=true" not in said, said  # whole already


@pytest.mark.parametrize(("options", "asked", "more"), [
    ({"extra_sbatch": ("--mem=200G", "--exclusive")}, "--mem=200G (in extra_sbatch)",
     "give it more: a larger --mem than its 200G in --executor-option extra_sbatch (it overrides mem), then"),
    ({"mem": "64G", "extra_sbatch": ("--mem-per-gpu", "80G")}, "--mem-per-gpu=80G (in extra_sbatch)",
     "give it more: a larger --mem-per-gpu than its 80G in --executor-option extra_sbatch (it overrides mem), or "
     "exclusive=true for the whole node, then"),
    ({"mem": "64G", "extra_sbatch": ("--exclusive",)}, "--mem=64G",
     "give it more: --executor-option mem=SIZE above its 64G, then"),
    ({"extra_sbatch": ("--exclusive",)}, "it asked for no --mem, so the partition's default",
     "give it more: --executor-option mem=SIZE (it asked for none), then"),
    ({"extra_sbatch": ("--exclusive=user",)}, "it asked for no --mem",  # shares the node with the user's jobs
     "give it more: --executor-option mem=SIZE (it asked for none and shared the node's), or exclusive=true"),
])
def test_an_out_of_memory_end_reads_the_memory_and_exclusive_extra_sbatch_set(options: dict[str, Any], asked: str,
                                                                             more: str) -> None:
    """extra_sbatch comes after --mem in the batch script, and sbatch takes the last: a `--mem=200G --exclusive`
    there said "it asked for no --mem … or exclusive=true", sending the user to options the job had."""
    said = slurm_end_reason(_ended("OUT_OF_MEMORY"), SlurmOptions(**options), ran=True)
    assert said is not None and f"more memory than it was given: {asked}" in said and more in said, said


@pytest.mark.parametrize(("nodes", "down", "node", "exclude"), [
    ("vm", None, "its node vm failed (stopped answering the controller, or set down)", "vm"),
    ("vm", (), "its node vm failed (stopped answering the controller, or set down); Slurm has it back in "
     "service now", "vm"),
    ("mn[0-2]", (slurm.DownNode("mn1", "down*", "Not responding"),),
     "its node mn1 failed (stopped answering the controller, or set down); `sinfo` shows mn1 down*: Not "
     "responding", "mn1"),
    ("mn[0-2]", (slurm.DownNode("mn0", "fail", None), slurm.DownNode("mn2", "down", "bad gpu")),
     "its nodes mn0 and mn2 failed (stopped answering the controller, or set down); `sinfo` shows mn0 fail, "
     "mn2 down: bad gpu", "mn0,mn2"),
    ("mn[0-2]", (), "one of its nodes (mn0, mn1 or mn2) failed (stopped answering the controller, or set down); "
     "Slurm has it back in service now, and did not say which", "NODE"),
    ("mn[0-2]", None, "one of its nodes (mn0, mn1 or mn2) failed (stopped answering the controller, or set down); "
     "`sinfo -R` names it while it is down", "NODE"),
])
def test_a_node_failure_names_the_node_that_failed(nodes: str, down: tuple[slurm.DownNode, ...] | None, node: str,
                                                    exclude: str) -> None:
    """NODE_FAIL said "its node failed" and sent the user to `scontrol show job` for its name: the reason names it
    (the job's one node, or those of its nodes Slurm shows down) and puts it in the exclude option to give."""
    said = slurm_end_reason(_ended("NODE_FAIL", nodes=nodes, down=down), ONE_HOUR, ran=True)
    assert said is not None and f"(Slurm stopped it because {node}); leave " in said, said
    assert f"(--executor-option 'exclude=[{exclude}]';" in said, said


@pytest.mark.parametrize(("state", "down", "why"), [
    ("NODE_FAIL", (), "`sinfo -R` no longer lists it, back in service: the controller's log (SlurmctldLogFile in "
     "`scontrol show config`) says why Slurm took it down)"),
    ("NODE_FAIL", (slurm.DownNode("mn1", "down*", None),), "`sinfo -R` says why Slurm took it down)"),
    ("NODE_FAIL", None, "`sinfo -R` says why Slurm took it down)"),  # sinfo did not answer
    ("BOOT_FAIL", (), "`sinfo -R` no longer lists it, back in service: the controller's log"),
])
def test_a_node_slurm_returned_to_service_is_not_said_to_be_in_sinfo_r(
        state: str, down: tuple[slurm.DownNode, ...] | None, why: str) -> None:
    """Under ReturnToService=2 a node that failed is back within a second and `sinfo -R` lists nothing of it (the
    cluster this project tests on runs so): the fix sent the user to an empty `sinfo -R`. Where sinfo shows none of the
    job's nodes failed, the fix says `sinfo -R` no longer lists it and where the reason is kept."""
    for nodes in ("mn1", "mn[0-2]"):
        said = slurm_end_reason(_ended(state, nodes=nodes, down=down), ONE_HOUR, ran=True)
        assert said is not None and why in said, said
        assert ("`sinfo -R` names it" in said or "`sinfo -R` says" in said) == (down != ()), said


def test_a_job_whose_state_slurm_no_longer_knows_is_never_said_to_have_ended_in_one() -> None:
    """The state read from the rc file alone (scontrol forgot the job, no accounting): no Slurm end is claimed for it,
    and its texts say the state is unknown and why."""
    result = _ended("FAILED", unknown_state="Slurm's final state of it is unknown: sacct cannot say")
    assert slurm_end_reason(result, ONE_HOUR, ran=True) is None
    assert result.ended == "ended with exit status 143 (Slurm's final state of it is unknown: sacct cannot say)"
    with pytest.raises(Exception, match=r"Slurm job 42 ended with exit status 143 \(Slurm's final state"):
        result.raise_for_status()


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED"])
def test_a_job_that_ended_by_itself_keeps_its_workers_reasons(state: str) -> None:
    assert slurm_end_reason(_ended(state), ONE_HOUR, ran=True) is None


def test_the_relay_passes_on_complete_lines_as_the_file_grows(tmp_path: Path) -> None:
    path = tmp_path / "slurm-42.err"
    relay = _LogRelay(path)
    assert relay.lines() == []  # not written yet
    path.write_bytes(b"launching sim server\nserver re")
    assert relay.lines() == ["launching sim server"]  # half a line waits for its newline
    with path.open("ab") as f:
        f.write(b"ady\n\n  \nimporting 10%\rimporting 55%\rimporting 100%\r\n" + b"x" * 600 + b"\nlast words")
    got = relay.lines()
    assert got[:2] == ["server ready", "importing 100%"]  # blank lines dropped, a redrawn line as last drawn
    assert got[2] == "x" * _LogRelay.MAX_CHARS + " …" and len(got) == 3
    assert relay.lines() == []
    assert relay.lines(final=True) == ["last words"]  # the batch job ended: what it left without a newline too


def test_a_relayed_line_cannot_drive_the_terminal(tmp_path: Path) -> None:
    """An engine's log on a node can carry colour codes or a clear-line: relayed to this terminal they are escaped."""
    path = tmp_path / "slurm-42.err"
    path.write_bytes(b"\x1b[2K\x1b[31mERROR\x1b[0m engine died\x07\n")
    assert _LogRelay(path).lines() == ["\\x1b[2K\\x1b[31mERROR\\x1b[0m engine died\\x07"]


def test_a_flood_of_lines_is_summarised(tmp_path: Path) -> None:
    path = tmp_path / "slurm-42.err"
    path.write_text("".join(f"line {i}\n" for i in range(1000)))
    got = _LogRelay(path).lines()
    assert len(got) == _LogRelay.MAX_LINES and got[0] == "line 0"
    assert got[-1] == f"… {1000 - _LogRelay.MAX_LINES + 1} more lines in {path}"


def test_a_job_running_on_a_node_shows_as_running_with_its_time_so_far(tmp_path: Path) -> None:
    out = tmp_path / "progress.txt"
    with out.open("w") as stream:
        progress = PlainProgress(stream, interval_s=0.0)
        progress.sweep(3)
        progress.job_started("a", 4)
        progress.phase("running")
        progress.changed()
        progress.job_finished("a", "valid")
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and all(line.endswith("job 1/3 conc 4 · running · 0s so far") for line in lines), lines
    assert progress.state.done == 1 and progress.state.timed == 1


class _ScriptedBatchJob:
    """A batch job whose worker's steps (what it writes to the shared filesystem) happen one per look at the queue:
    the driver sees exactly what a worker leaves between two polls, whatever the poll interval."""

    def __init__(self, out_dir: Path, steps: list[list[Callable[[], None]]], *, state: str = "COMPLETED",
                 exit_code: int = 0) -> None:
        self.job_id, self.out_dir, self.steps = "77", out_dir, steps
        self.stdout_path, self.stderr_path = out_dir / "slurm-77.out", out_dir / "slurm-77.err"
        self.state, self.exit_code = state, exit_code
        self.result: SlurmJobResult | None = None

    def poll(self) -> SlurmJobResult | tuple[str, str]:
        if self.steps:
            for step in self.steps.pop(0):
                step()
            return "RUNNING", ""
        self.result = SlurmJobResult(self.job_id, self.state, self.exit_code, self.stdout_path, self.stderr_path,
                                     "node7")
        return self.result

    def suspension(self) -> None:
        """What `scontrol show job` says of suspensions no poll saw (`SlurmJob.suspension`): none here."""
        return None


def test_a_job_finished_between_two_looks_is_counted_before_the_next_is_shown_and_times_the_eta(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs that start and end between two looks at the queue (a poll interval longer than a job): the worker's
    report named the next job before the driver closed the last, which it numbered as if the last had not run (`job
    1/3 conc 2` before `1/3 jobs done`); a job never seen running was not timed, one seen a poll late was timed from
    then (`sweep ETA 0s` with a job left), and a lane's stale count of its jobs left put a non-zero ETA after the last
    one. Each job is 10 s long on the node (its outcome's seconds): the ETA is counted in those."""
    from llmsweep.execute import artifacts as art
    from llmsweep.execute.lifecycle import JobOutcome
    from llmsweep.execute.progress import use_progress

    run_dir = tmp_path / "out"
    jobs = [types.SimpleNamespace(id=name, exp_name=f"exp-{name}", concs=[conc], eval_only=False)
            for name, conc in (("a", 1), ("b", 2), ("c", 3))]
    group: Any = types.SimpleNamespace(id="g", spec=None, jobs=jobs, topology=None,
                                       to_json=lambda run_dir, settings: {"id": "g"})
    beat = 0

    def started(name: str, *, reported: bool) -> None:
        nonlocal beat
        art.write_json(art.job_dir(run_dir, name) / art.JOB_FILE, {"id": name})
        if reported:
            beat += 1
            art.write_json(art.server_dir(run_dir, "g") / art.PROGRESS_FILE,
                           {"beat": beat, "jobs": [{"job_id": name, "phase": "measuring"}], "owed": []})

    def finished(name: str) -> None:
        art.write_json(art.job_dir(run_dir, name) / art.OUTCOME_FILE, JobOutcome(
            job_id=name, exp_name=f"exp-{name}", status="valid", seconds=10.0).model_dump(mode="json"))

    steps: list[list[Callable[[], None]]] = [
        [partial(started, "a", reported=False)],  # a worker that has not reported yet: a shown by its job.json
        [partial(finished, "a"), partial(started, "b", reported=True)],  # a ran whole between two looks; b measures
        [partial(finished, "b"), partial(started, "c", reported=False), partial(finished, "c")],  # b, c: in one
    ]
    batch = _ScriptedBatchJob(run_dir / "servers" / "g", steps)
    monkeypatch.setattr(SlurmExecutor, "submit", lambda self, spec, **kw: batch)
    stream = io.StringIO()
    with use_progress(PlainProgress(stream, interval_s=3600.0)) as progress:
        progress.sweep(3)
        outcomes = SlurmExecutor({"poll_s": 0.01, "relay_worker_log": False}).run_groups(
            [group], run_dir, cast(Any, None), event=progress.line)
    assert [o.job_id for o in outcomes] == ["a", "b", "c"]
    lines = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    shown = [line for line in lines if re.match(r"(Slurm job 77: \d/3 jobs done|job \d/3 conc)", line)]
    assert shown == [
        "job 1/3 conc 1 · running · 0s so far",  # nothing done yet to time the sweep by
        "Slurm job 77: 1/3 jobs done · sweep ETA 20s",  # b and c left, 10 s each
        "job 2/3 conc 2 · measuring · sweep ETA 20s",  # b just seen: its 10 s, then c's
        "Slurm job 77: 2/3 jobs done · sweep ETA 10s",
        "Slurm job 77: 3/3 jobs done · sweep ETA 0s",
    ], lines


@pytest.fixture
def fresh_signals() -> Iterator[None]:
    """This process's record of signals received, empty before and after a test that interrupts itself (a first
    interrupt makes later ones hurry a shutdown instead of raising: the next test would see none raised)."""
    from llmsweep.execute import signals

    signals.reset()
    yield
    signals.reset()


@pytest.mark.usefixtures("fresh_signals")
def test_a_signal_while_a_finished_job_is_stored_neither_cuts_that_store_nor_loses_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM landing while `run` stores a job the worker finished (the driver's sink) cut that store short, and
    the job, already marked closed, was not stored by the read-back on the interrupt: a later --resume found it
    finished on disk while the run had stored nothing of it. The store now runs to its end, the signal is raised
    after it, and the read-back stores what else the worker finished — each job exactly once."""
    import os
    import signal

    from llmsweep.execute import artifacts as art
    from llmsweep.execute.lifecycle import JobOutcome, on_job_finished
    from llmsweep.execute.signals import Interrupted

    run_dir = tmp_path / "out"
    jobs = [types.SimpleNamespace(id=name, exp_name=f"exp-{name}", concs=[1], eval_only=False) for name in "abc"]
    group: Any = types.SimpleNamespace(id="g", spec=None, jobs=jobs, topology=None,
                                       to_json=lambda run_dir, settings: {"id": "g"})

    def finished(name: str) -> None:
        art.write_json(art.job_dir(run_dir, name) / art.JOB_FILE, {"id": name})
        art.write_json(art.job_dir(run_dir, name) / art.OUTCOME_FILE, JobOutcome(
            job_id=name, exp_name=f"exp-{name}", status="valid", seconds=1.0).model_dump(mode="json"))

    # a finishes and is seen at one look; b finishes just after, before the interrupt's read-back; c never runs
    batch = _ScriptedBatchJob(run_dir / "servers" / "g", [[partial(finished, "a")], [], [], []])
    monkeypatch.setattr(SlurmExecutor, "submit", lambda self, spec, **kw: batch)
    stored: list[tuple[str, str]] = []

    def sink(job_dir: Path, outcome: JobOutcome) -> None:
        stored.append(("begun", outcome.job_id))
        if outcome.job_id == "a":
            finished("b")
            os.kill(os.getpid(), signal.SIGTERM)  # delivered at once, inside the store
        stored.append(("stored", outcome.job_id))

    with on_job_finished(sink), pytest.raises((Interrupted, KeyboardInterrupt)):
        SlurmExecutor({"poll_s": 0.01, "relay_worker_log": False}).run_groups(
            [group], run_dir, cast(Any, None), event=lambda line: None)
    assert stored == [("begun", "a"), ("stored", "a"), ("begun", "b"), ("stored", "b")], stored


@pytest.mark.usefixtures("fresh_signals")
def test_a_signal_while_the_last_look_stores_a_finished_batch_still_stores_the_rest_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch job finished a and b and left the queue between two looks; a SIGTERM landing while the last look
    stores a must not lose b: the batch was dropped from the ones the interrupt reads back before its jobs were
    stored (review of the fix above)."""
    import os
    import signal

    from llmsweep.execute import artifacts as art
    from llmsweep.execute.lifecycle import JobOutcome, on_job_finished
    from llmsweep.execute.signals import Interrupted

    run_dir = tmp_path / "out"
    jobs = [types.SimpleNamespace(id=name, exp_name=f"exp-{name}", concs=[1], eval_only=False) for name in "ab"]
    group: Any = types.SimpleNamespace(id="g", spec=None, jobs=jobs, topology=None,
                                       to_json=lambda run_dir, settings: {"id": "g"})

    class Ended(_ScriptedBatchJob):
        def poll(self) -> SlurmJobResult | tuple[str, str]:  # the worker's last writes, then it leaves the queue
            for name in "ab":
                art.write_json(art.job_dir(run_dir, name) / art.JOB_FILE, {"id": name})
                art.write_json(art.job_dir(run_dir, name) / art.OUTCOME_FILE, JobOutcome(
                    job_id=name, exp_name=f"exp-{name}", status="valid", seconds=1.0).model_dump(mode="json"))
            return super().poll()

    batch = Ended(run_dir / "servers" / "g", [])
    monkeypatch.setattr(SlurmExecutor, "submit", lambda self, spec, **kw: batch)
    stored: list[tuple[str, str]] = []

    def sink(job_dir: Path, outcome: JobOutcome) -> None:
        if outcome.job_id == "a":
            os.kill(os.getpid(), signal.SIGTERM)
        stored.append((outcome.job_id, outcome.status))

    with on_job_finished(sink), pytest.raises((Interrupted, KeyboardInterrupt)):
        SlurmExecutor({"poll_s": 0.01, "relay_worker_log": False}).run_groups(
            [group], run_dir, cast(Any, None), event=lambda line: None)
    assert stored == [("a", "valid"), ("b", "valid")], stored


@pytest.mark.parametrize(("exit_code", "said"), [
    (137, "was killed by SIGKILL (exit 137: the kernel's out-of-memory killer, or a `kill -9` from outside this run)"),
    (139, "was killed by SIGSEGV (exit 139)"),
    (1, "exited with status 1"),
    (0, "exited with status 0"),
    (255, "exited with status 255"),  # no signal 127
    (-11, "was killed by SIGSEGV (signal 11)"),  # a local server Python saw a signal end (it said `status -11`)
    (-9, "was killed by SIGKILL (signal 9: the kernel's out-of-memory killer, or a `kill -9` from outside this run)"),
    (None, "exited (its status unknown)"),
])
def test_a_processs_end_is_said_as_its_signal_or_its_status(exit_code: int | None, said: str) -> None:
    """A Slurm worker's batch script (a shell's 128 + N) and a local server (Python's −N) alike."""
    assert exit_said(exit_code) == said


class _DyingWorker:
    """A group of three jobs a, b, c whose worker finishes a, starts b (its report, its job.json, `records` records),
    then ends with `exit_code` (FAILED), b's outcome unwritten; its batch log's last line says so."""

    def __init__(self, tmp_path: Path, *, exit_code: int = 137, records: int = 2, fail_a: bool = False) -> None:
        from llmsweep.execute import artifacts as art
        from llmsweep.execute.lifecycle import JobOutcome

        self.run_dir = run_dir = tmp_path / "out"
        self.jobs = [types.SimpleNamespace(id=name, exp_name=f"exp-{name}", concs=[1], eval_only=False)
                     for name in "abc"]
        self.group: Any = types.SimpleNamespace(id="g", spec=None, jobs=self.jobs, topology=None,
                                                to_json=lambda run_dir, settings: {"id": "g"})

        def a_ends() -> None:
            art.write_json(art.job_dir(run_dir, "a") / art.JOB_FILE, {"id": "a"})
            art.write_json(art.job_dir(run_dir, "a") / art.OUTCOME_FILE, JobOutcome(
                job_id="a", exp_name="exp-a", status="failed" if fail_a else "valid",
                reasons=["sim server died"] if fail_a else [], seconds=1.0).model_dump(mode="json"))

        def b_starts() -> None:
            art.write_json(art.server_dir(run_dir, "g") / art.PROGRESS_FILE,
                           {"beat": 1, "jobs": [{"job_id": "b", "phase": "measuring"}], "owed": []})
            art.write_json(art.job_dir(run_dir, "b") / art.JOB_FILE, {"id": "b"})
            (art.job_dir(run_dir, "b") / art.RECORDS_FILE).write_text("{}\n" * records)

        def log(*lines: str) -> None:
            path = art.server_dir(run_dir, "g") / "slurm-77.err"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.writelines(line + "\n" for line in lines)

        steps: list[list[Callable[[], None]]] = [[a_ends], [b_starts, partial(log, "job b: conc 1", "line 39: 4242 "
                                                                              "Killed  python -m llmsweep.cli.main")]]
        self.batch = _ScriptedBatchJob(run_dir / "servers" / "g", steps, state="FAILED", exit_code=exit_code)

    def run(self, monkeypatch: pytest.MonkeyPatch, *, fail_fast: bool = False,
            **options: Any) -> tuple[dict[str, Any], list[str]]:
        batch = self.batch
        monkeypatch.setattr(SlurmExecutor, "submit", lambda self, spec, **kw: batch)
        said: list[str] = []
        outcomes = SlurmExecutor({"poll_s": 0.01, "relay_worker_log": False, **options}).run_groups(
            [self.group], self.run_dir, cast(Any, types.SimpleNamespace(fail_fast=fail_fast)), event=said.append)
        return {o.job_id: o for o in outcomes}, said


def test_a_worker_killed_mid_job_fails_that_job_with_its_death_and_the_fix_and_the_jobs_after_as_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker SIGKILLed (the kernel's OOM killer, a `kill -9`) while b measured: every job left read "ended
    FAILED (exit 137) before this job wrote its outcome", the same for the one it died in and the one it never
    reached, with no fix. b now says the worker died in it, what its folder holds, the batch log's last lines and the
    fix (the node's memory first); c says it was never reached and why; a stays valid."""
    worker = _DyingWorker(tmp_path)
    outcomes, said = worker.run(monkeypatch)
    log = worker.batch.stderr_path
    assert outcomes["a"].status == "valid"
    assert outcomes["b"].status == outcomes["c"].status == "failed"
    fix = ("if the node ran out of memory (`dmesg` on node7 says \"Out of memory: Killed process …\"), give the batch "
           "job more: --executor-option mem=SIZE (it asked for none and shared the node's), or exclusive=true for the "
           f"whole node, or have the engine use less; otherwise find what killed the worker (its batch log: {log})")
    killed = ("was killed by SIGKILL (exit 137: the kernel's out-of-memory killer, or a `kill -9` from outside this "
              "run)")
    assert outcomes["b"].reasons == [
        f"the worker of Slurm job 77 {killed} while this job ran, before it wrote its outcome (Slurm: FAILED on "
        "node7); its window had begun: 2 records in records.jsonl, cut short, no result"
        f"\n--- last 20 lines of {log} ---\njob b: conc 1\nline 39: 4242 Killed  python -m llmsweep.cli.main"
        f"\n  fix: {fix}; then rerun with --resume"]
    assert outcomes["c"].reasons == [
        f"not run: the worker of Slurm job 77 {killed} while it ran job b, before it reached this job (Slurm: FAILED "
        f"on node7); {fix}; then `--resume` runs it"]
    assert f"Slurm job 77 ended FAILED: its worker {killed} while it ran job b; 1 of 3 jobs finished, 1 died " \
        f"with the worker, 1 not run — {fix}; then rerun with --resume to run the rest" in said, said
    # the report groups them by cause: the job it died in apart from the one it never reached
    from llmsweep.execute.failure_text import failure_gist

    assert failure_gist(outcomes["b"].reasons[0]).startswith(f"the worker of Slurm job 77 {killed} while this job")


def test_a_worker_that_asked_for_memory_is_told_to_raise_it_and_one_that_crashed_to_read_its_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fix fits what is known: a SIGKILL under `mem=64G` raises that; an exit 1 (a traceback) points at the
    batch log; a job killed before it measured holds nothing."""
    outcomes, _ = _DyingWorker(tmp_path / "oom").run(monkeypatch, mem="64G", exclusive=True)
    assert "give the batch job more: --executor-option mem=SIZE above its 64G, or have the engine use less" \
        in outcomes["b"].reasons[0]
    outcomes, _ = _DyingWorker(tmp_path / "extra").run(monkeypatch, mem="64G",
                                                       extra_sbatch=["--mem-per-cpu=4G", "--exclusive"])
    assert "give the batch job more: a larger --mem-per-cpu than its 4G in --executor-option extra_sbatch (it " \
        "overrides mem), or have the engine use less" in outcomes["b"].reasons[0], outcomes["b"].reasons
    worker = _DyingWorker(tmp_path / "crash", exit_code=1, records=0)
    outcomes, _ = worker.run(monkeypatch)
    fix = f"read the batch job's log {worker.batch.stderr_path} for what ended the worker (a traceback, a crash)"
    assert outcomes["b"].reasons[0].startswith("the worker of Slurm job 77 exited with status 1 while this job ran, "
                                               "before it wrote its outcome (Slurm: FAILED on node7); it had "
                                               "measured nothing yet\n--- last 20 lines"), outcomes["b"].reasons
    assert f"\n  fix: {fix} and fix that; then rerun with --resume" in outcomes["b"].reasons[0]
    assert outcomes["c"].reasons[0].startswith("not run: the worker of Slurm job 77 exited with status 1 while it "
                                               f"ran job b, before it reached this job (Slurm: FAILED on node7); {fix}")


def test_a_worker_that_stopped_after_a_failed_job_under_fail_fast_left_the_rest_not_run_for_that(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--fail-fast`: the worker stops after a failed job and exits 1, between two jobs — no death: the jobs it
    left say what the driver says of the jobs fail-fast left out."""
    from llmsweep.execute.failure_text import FAIL_FAST_NOT_RUN

    worker = _DyingWorker(tmp_path, exit_code=1, fail_a=True)
    worker.batch.steps = worker.batch.steps[:1]  # a fails; the worker starts nothing after it
    outcomes, said = worker.run(monkeypatch, fail_fast=True)
    assert outcomes["a"].reasons == ["sim server died"]
    assert outcomes["b"].reasons == outcomes["c"].reasons == [FAIL_FAST_NOT_RUN]
    assert "Slurm job 77 ended FAILED (exit 1)" in said, said


def test_a_batch_job_whose_worker_never_started_keeps_saying_how_it_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing says the worker ran (no report, no job begun: an image import that failed): no job is named as the
    one it died in; each says how the batch job ended and where its log is."""
    worker = _DyingWorker(tmp_path, exit_code=1)
    worker.batch.steps = []
    outcomes, _ = worker.run(monkeypatch)
    log = worker.batch
    assert {o.reasons[0] for o in outcomes.values()} == {
        f"Slurm job 77 ended FAILED (exit 1) before this job wrote its outcome; see {log.stdout_path} and "
        f"{log.stderr_path}"}


_FIRST_LOOK = '''
import importlib.abc, os, signal, sys, types
from pathlib import Path
from typing import Any, cast

from llmsweep.execute import artifacts as art, signals
from llmsweep.execute.lifecycle import JobOutcome, on_job_finished
from llmsweep.execute.slurm import SlurmExecutor

run_dir = Path(sys.argv[1])
submitted, sent = False, []


def interrupt(where: str) -> None:
    sent.append(where)
    os.kill(os.getpid(), signal.SIGINT)  # the handler runs at the next instruction: here, inside whatever this is
    sum(range(100))


class InImports(importlib.abc.MetaPathFinder):
    """The Ctrl-C lands in the first import of the client's stack after submitting, if there is one: mid-asyncio."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if submitted and not sent and name == "asyncio.tasks":
            interrupt(name)


class Batch:
    """The worker finishes job a before the driver's first look at the queue; the Ctrl-C lands in that look's
    imports, or else in the next look."""

    job_id = "77"

    def __init__(self, out_dir: Path) -> None:
        self.out_dir, self.result, self.looks = out_dir, None, 0
        self.stdout_path, self.stderr_path = out_dir / "slurm-77.out", out_dir / "slurm-77.err"

    def poll(self) -> tuple[str, str]:
        self.looks += 1
        if self.looks == 1:
            art.write_json(art.job_dir(run_dir, "a") / art.JOB_FILE, {"id": "a"})
            art.write_json(art.job_dir(run_dir, "a") / art.OUTCOME_FILE, JobOutcome(
                job_id="a", exp_name="exp-a", status="valid", seconds=1.0).model_dump(mode="json"))
        elif not sent:
            interrupt("the next look")
        return "RUNNING", ""

    def suspension(self) -> None:
        return None


def submit(self: Any, spec: Any, **kw: Any) -> Batch:
    global submitted
    submitted = True
    return Batch(run_dir / "servers" / "g")


assert "asyncio" not in sys.modules  # as in `llmsweep run`, nothing has imported it yet
sys.meta_path.insert(0, InImports())
SlurmExecutor.submit = submit
jobs = [types.SimpleNamespace(id=n, exp_name=f"exp-{n}", concs=[1], eval_only=False) for n in "ab"]
group = types.SimpleNamespace(id="g", spec=None, jobs=jobs, topology=None, to_json=lambda run_dir, settings: {})
stored = []
signals.install()
try:
    with on_job_finished(lambda job_dir, outcome: stored.append(outcome.job_id)):
        SlurmExecutor({"poll_s": 0.01, "relay_worker_log": False}).run_groups(
            [cast(Any, group)], run_dir, cast(Any, None), event=lambda line: None)
except signals.Interrupted:
    print("stored:", *stored)
'''


def test_a_ctrl_c_in_the_first_look_after_submitting_still_stores_what_the_worker_finished(tmp_path: Path) -> None:
    """A Ctrl-C right after submission landed in the driver's first read of the worker's report, which imported the
    client (aiohttp, asyncio) lazily: asyncio was left half-imported, and the read-back on the interrupt, importing it
    again, failed ("could not read back what Slurm job 77 finished: name 'coroutines' is not defined"), storing
    nothing of what the worker had finished. Checked in a fresh interpreter, where nothing has imported asyncio."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _FIRST_LOOK, str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (0, "stored: a\n", ""), (run.stdout, run.stderr)
