"""What the Slurm driver makes of a batch job it follows: why its jobs failed when Slurm ended it (the state, what it
means, the fix), the time limit it runs under (sbatch's forms; extra_sbatch's --time overriding time_limit), and the
worker's stderr relayed line by line as it grows."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from llmsweep.errors import ConfigError
from llmsweep.execute import slurm
from llmsweep.execute.progress import PlainProgress
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
ONE_HOUR = SlurmOptions(time_limit="01:00:00").effective_time_limit


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
        why = slurm_end_reason(_ended("TIMEOUT"), options.effective_time_limit, ran=ran)
        assert why is not None and "its time limit, 30 (the --time in extra_sbatch), ran out" in why
        assert "raise the --time in --executor-option extra_sbatch" in why and "04:00:00" not in why
    # The script carries both, extra_sbatch's last (a value given apart stays on its flag's line): sbatch's choice.
    from llmsweep.engines.launch import LaunchSpec

    script = slurm.render_batch_script(LaunchSpec(engine="sim", argv=("sim",), port=1), options, name="g",
                                       group_file=tmp_path / "g.json", out_dir=tmp_path,
                                       launcher_file=tmp_path / "l.json")
    times = [line for line in script.splitlines() if line.startswith("#SBATCH --time")]
    assert times == ["#SBATCH --time=04:00:00", "#SBATCH --time 30"]


def _ended(state: str) -> SlurmJobResult:
    return SlurmJobResult("42", state, 143, Path("slurm-42.out"), Path("slurm-42.err"))


@pytest.mark.parametrize(("state", "what", "fix"), [
    ("TIMEOUT", "its time limit, 01:00:00, ran out", "--executor-option time_limit=HH:MM:SS"),
    ("PREEMPTED", "Slurm preempted it", "--executor-option partition=NAME"),
    ("NODE_FAIL", "its node failed", "--executor-option exclude=[NODE]"),
    ("OUT_OF_MEMORY", "it ran out of memory", "--executor-option mem=SIZE"),
    ("CANCELLED", "cancelled outside this run", "who cancelled it"),
])
def test_a_job_slurm_ended_says_the_state_what_it_means_and_the_fix(state: str, what: str, fix: str) -> None:
    ran = slurm_end_reason(_ended(state), ONE_HOUR, ran=True)
    assert ran is not None and ran.startswith(f"interrupted: Slurm job 42 ended {state} while this job ran (")
    assert what in ran and fix in ran and ran.endswith("then rerun with --resume")
    never = slurm_end_reason(_ended(state), ONE_HOUR, ran=False)
    assert never is not None and never.startswith(f"not run: Slurm job 42 ended {state} before it reached this job (")
    assert what in never and fix in never and never.endswith("then `--resume` runs it")


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
    assert got[-1] == f"… {1000 - _LogRelay.MAX_LINES + 1} more line(s) in {path}"


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
