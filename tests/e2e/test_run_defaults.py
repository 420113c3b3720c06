"""`llmsweep run` over an --out that already holds a run: refused (exit 2, nothing moved) unless --resume or
--force; --force reruns every job and keeps the earlier results; --repeats N runs every job N times and `compare`
takes its between-run noise band from the repeats."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_run_support import RECIPES, cli_env, cli_here, job_dirs, read_json, run_here, verdict

from llmsweep.metrics.registry import HOT_BY_NAME

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

RECIPE = RECIPES / "fixed-sim.yaml"  # two concurrency points on one simulated server, a few seconds
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Finished:
    """One finished `run RECIPE --live --json` (its --out and store under `root`) and what the CLI said."""

    root: Path
    proc: subprocess.CompletedProcess[str]

    def copy(self, to: Path) -> tuple[Path, dict[str, str]]:
        """A copy of the run and its store for a test that runs into it again: its --out and environment."""
        shutil.copytree(self.root, to)
        return to / "out", cli_env(to)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    """The finished live run the tests below read or copy: one run (~7 s) instead of one per test."""
    root = tmp_path_factory.mktemp("finished")
    proc = run_here([RECIPE, "--live", "--out", root / "out", "--json"], cli_env(root))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return Finished(root, proc)


def _tree(root: Path) -> dict[str, int]:
    """Every file of the run and when it was last written, but the folder's lock (`folderlock.LOCK_FILE`: a refused
    run held it while it looked, and names itself in it; no result is in it)."""
    from llmsweep.folderlock import LOCK_FILE

    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != LOCK_FILE}


def test_a_finished_run_is_refused_untouched_and_force_reruns_it_with_repeats(tmp_path: Path,
                                                                             finished: Finished) -> None:
    assert "2 to run on 1 live simulator server" in finished.proc.stderr  # said as simulated, not as a server
    out, env = finished.copy(tmp_path / "run")
    before = _tree(out)
    run_id = read_json(out / "run.json")["run_id"]

    again = run_here([RECIPE, "--live", "--out", out, "--no-report"], env)
    assert again.returncode == 2, again.stderr[-4000:]
    assert "already holds a finished run (2 job results)" in again.stderr
    assert "--resume" in again.stderr and "--force" in again.stderr
    assert _tree(out) == before  # nothing moved, nothing rewritten
    assert not list(out.glob("jobs/*/attempts"))

    both = run_here([RECIPE, "--live", "--out", out, "--resume", "--force"], env)
    assert both.returncode == 2 and "contradict" in both.stderr

    forced = run_here([RECIPE, "--live", "--out", out, "--no-report", "--force", "--repeats", "2"], env)
    assert forced.returncode == 0, forced.stderr[-4000:]
    assert "4 jobs planned (2 × 2 repeats)" in forced.stderr
    jobs = job_dirs(out)
    firsts = [name for name in jobs if "-repeat" not in name]
    assert len(firsts) == 2 and sorted(jobs) == sorted([*firsts, *(f"{n}-repeat2" for n in firsts)])
    assert all(verdict(d) == "valid" for d in jobs.values())
    for name in firsts:  # the earlier results were kept, not lost
        assert (jobs[name] / "attempts" / "1" / "summary.json").is_file()
    meta = read_json(out / "run.json")
    assert meta["run_id"] == run_id and meta["repeats"] == 2 and len(meta["expected_job_ids"]) == 4
    # A repeat draws its own prompts (its workload seed differs): the same ones would hit the first run's prefix cache.
    def seed(name: str) -> int:
        return int(read_json(jobs[name] / "run.json")["provenance"]["workload"]["seed"])

    assert seed(firsts[0]) != seed(f"{firsts[0]}-repeat2")

    # compare: the repeats of one run are a point's repeats, so every matched point has a between-run band.
    comp = cli_here(["compare", out, out, "--json"], env)
    assert comp.returncode in (0, 1), comp.stderr
    doc = json.loads(comp.stdout)
    assert len(doc["matched"]) == 2 and not any("no repeats" in n for n in doc["notes"])
    for point in doc["matched"]:
        assert len(point["a"]) == 2
        assert any(d["band"] and d["band"]["kind"] == "between-run" for d in point["deltas"])


def test_resume_of_a_finished_run_skips_every_job(tmp_path: Path, finished: Finished) -> None:
    out, env = finished.copy(tmp_path / "run")
    resumed = run_here([RECIPE, "--live", "--out", out, "--no-report", "--resume", "--json"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "0 to run," in resumed.stderr and "2 already done" in resumed.stderr
    # the table shows the verdicts and figures the finished jobs have on disk, marked resumed, not empty rows
    rows = json.loads(resumed.stdout)["jobs"]
    assert len(rows) == 2 and all(r["verdict"] == "valid" and r["resumed"] for r in rows), rows
    assert all(r["tput_per_gpu"] and r["tput_per_gpu"] > 0 and r["summary_file"] for r in rows), rows


def test_resume_with_options_that_change_what_was_measured_is_refused_untouched(tmp_path: Path,
                                                                               finished: Finished) -> None:
    """The run was served live (wall-clock time) on the recipes' workload: a `--resume` in virtual time, or on other
    traces, kept its finished jobs and measured the rest otherwise, in one run and one series, exit 0."""
    out, env = finished.copy(tmp_path / "run")
    before = _tree(out)
    other = run_here([RECIPE, "--out", out, "--resume", "--no-report"], env)
    assert other.returncode == 2, other.stderr[-3000:]
    assert "its clock: it ran with --live (wall-clock time), now no --live (virtual time)" in other.stderr
    assert "--force" in other.stderr
    assert _tree(out) == before  # nothing moved, nothing rewritten
    # --traces changes nothing a fixed-length job measures, nor --simulate a recipe already on the simulator: that
    # resume goes on (everything is done)
    same = run_here([RECIPE, "--live", "--traces", "synthetic", "--simulate", "--out", out, "--resume", "--no-report"],
                    env)
    assert same.returncode == 0 and "2 already done" in same.stderr, same.stderr[-3000:]
    # an agentic run resumed on other traces is refused: its finished points replayed the recipe's corpus
    quick = REPO / "examples" / "quickstart.yaml"
    first = run_here([quick, "--job", "qwen3.5_tp8_conc1_kvnone", "--out", tmp_path / "qs", "--no-report"], env)
    assert first.returncode == 0, first.stderr[-3000:]
    traces = tmp_path / "traces.jsonl"
    traces.write_text("")
    moved = run_here([quick, "--job", "qwen3.5_tp8_conc1_kvnone", "--out", tmp_path / "qs", "--resume",
                     "--traces", traces, "--no-report"], env)
    assert moved.returncode == 2, moved.stderr[-3000:]
    assert f"its trace corpus: it ran with no --traces (the recipes' sources), now --traces {traces}" in moved.stderr


def test_run_json_prints_the_end_table_and_stderr_says_what_each_job_is_doing(tmp_path: Path,
                                                                              finished: Finished) -> None:
    out, proc = finished.root / "out", finished.proc
    doc = json.loads(proc.stdout)  # stdout is the JSON table and nothing else
    assert doc["ok"] is True and doc["report"] == str(out / "report" / "index.html")
    rows = {r["conc"]: r for r in doc["jobs"]}
    assert sorted(rows) == [2, 4]
    for row in rows.values():
        assert row["verdict"] == "valid" and row["reason"] is None  # a fixed-length point has no 900 s minimum
        assert row["requests_ok"] > 0 and row["requests_failed"] == 0
        assert row["tput_per_gpu"] > 0 and row["p50_ttft"] > 0 and row["p50_tpot"] > 0
    # Not a terminal: timestamped lines, job k/N with its phases.
    lines = proc.stderr.splitlines()
    assert any(re.match(r"^\[\d\d:\d\d:\d\d\] job 1/2 conc 2 · launching", line) for line in lines), proc.stderr
    assert any(re.match(r"^\[\d\d:\d\d:\d\d\] job 2/2 conc 4 · measuring · .* in flight", line) for line in lines)

    # Without --json: the table on stdout, and the dashboard's path is still the last line. (In virtual time: the
    # table is the same whichever clock measured the points, and the live path was exercised just above.)
    again = run_here([RECIPE, "--out", tmp_path / "plain", "--no-report"], cli_env(tmp_path))
    assert again.returncode == 0, again.stderr[-4000:]
    stdout = again.stdout.strip().splitlines()
    assert stdout[-1] == str(tmp_path / "plain")
    # the throughput columns are headed as the metric table names them: total (InferenceX's headline) and output
    header = next(line for line in stdout if "verdict" in line)
    assert HOT_BY_NAME["tput_per_gpu"].header in header and HOT_BY_NAME["output_tput_per_gpu"].header in header
    assert sum(" valid " in line for line in stdout) == 2


def test_the_end_of_run_table_shows_a_reason_as_written(tmp_path: Path) -> None:
    """A failure reason that looks like markup (`[/nope]`, an unreadable trace source) used to raise rich's
    MarkupError: a traceback instead of the table, the completeness summary and the dashboard path."""
    out, env = tmp_path / "out", cli_env(tmp_path)
    proc = run_here([RECIPES / "agentic-sim.yaml", "--traces", "[/nope]", "--out", out], env)
    assert proc.returncode == 1, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr and "MarkupError" not in proc.stderr
    assert "[/nope]" in proc.stdout  # the reason, verbatim, in the table
    assert proc.stdout.strip().splitlines()[-1].endswith("report/index.html")


def test_an_unknown_only_job_names_a_command_that_lists_the_ids(tmp_path: Path) -> None:
    out, env = tmp_path / "out", cli_env(tmp_path)
    proc = run_here([RECIPE, "--job", "nope", "--out", out], env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    hint = re.search(r"`llmsweep (matrix [^`]+)`", proc.stderr)
    assert hint is not None, proc.stderr
    args = hint.group(1).replace("FILE", str(RECIPE)).split()
    listed = cli_here(args, env)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.split()) == 2  # the recipe's two job ids


def test_a_run_whose_every_job_was_refused_runs_again_with_the_fix_it_was_given(tmp_path: Path) -> None:
    """Every job refused (a trace corpus that is not there) leaves an --out with a finished run.json and no result:
    the fix it printed (another --traces) was refused as "already holds a finished run", and with --resume as a
    change of corpus that would mix with finished jobs it did not have."""
    recipe, env = RECIPES / "agentic-sim.yaml", cli_env(tmp_path)
    for more in ([], ["--resume"]):
        out = tmp_path / f"out{len(more)}"
        refused = run_here([recipe, "--traces", tmp_path / "missing", "--out", out, "--no-report"], env)
        assert refused.returncode == 1 and "--traces" in refused.stderr, refused.stderr[-4000:]
        assert read_json(out / "run.json")["finished"] and not list(out.glob("jobs/*/summary.json"))
        again = run_here([recipe, "--traces", "synthetic", "--out", out, "--no-report", *more], env)
        assert again.returncode == 0, (more, again.stderr[-4000:])
        assert len(list(out.glob("jobs/*/summary.json"))) == 2


def test_a_finished_run_that_stood_every_job_on_stored_results_is_refused_too(tmp_path: Path) -> None:
    """Its jobs hold `reused.json`, no summary: counted as no result, it was run over (every job measured again, the
    reuse moved into attempts/) without --resume or --force."""
    env = cli_env(tmp_path)
    first = run_here([RECIPE, "--out", tmp_path / "a", "--no-report"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    out = tmp_path / "b"
    reused = run_here([RECIPE, "--out", out, "--reuse", "--no-report"], env)
    assert reused.returncode == 0 and len(list(out.glob("jobs/*/reused.json"))) == 2, reused.stderr[-4000:]
    again = run_here([RECIPE, "--out", out, "--no-report"], env)
    assert again.returncode == 2 and "already holds a finished run (2 job results)" in again.stderr, again.stderr
    assert not list(out.glob("jobs/*/attempts"))
    # the fix it gives keeps them on the stored results (--resume alone has no summary to skip them by)
    assert "pass --resume --reuse" in again.stderr
    resumed = run_here([RECIPE, "--out", out, "--no-report", "--resume", "--reuse", "--json"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert [r["reused"] for r in json.loads(resumed.stdout)["jobs"]] == [True, True]


def test_an_out_that_cannot_be_written_is_one_error_line_before_anything_runs(tmp_path: Path) -> None:
    """A read-only disk, a folder the user cannot write, a path through a file: `run` ended in a traceback from the
    folder's creation or its lock file (exit 1)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = run_here([RECIPES / "fixed-sim.yaml", "--out", blocker / "out"], cli_env(tmp_path))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert f"error: --out {blocker / 'out'} cannot be written" in res.stderr
    assert "fix: pass --out a folder path this user can write" in res.stderr  # every output's wording
    assert "launching" not in res.stderr and "job 1/" not in res.stderr  # before any job or server


def test_an_out_that_is_another_commands_folder_is_refused_untouched(tmp_path: Path, finished: Finished) -> None:
    """A job folder of a run, or a `bench` measurement: the run wrote its run.json over the client's record there
    (what `summarize` judges the measurement by: afterwards a valid bench read as smoke) and exited 0; it is refused
    whatever --resume or --force say, as `bench` refuses a run's folder."""
    out, env = finished.copy(tmp_path / "run")
    job = next(iter(job_dirs(out).values()))
    bench = tmp_path / "bench"
    shutil.copytree(job, bench)  # a measurement's files without a run's jobs/: what `bench --out` leaves
    for target, what in ((job, "a job folder of `llmsweep run`"), (bench, "a measurement of `llmsweep bench`")):
        before = _tree(target)
        for extra in ([], ["--force"], ["--resume"]):
            res = run_here([RECIPE, "--out", target, "--no-report", *extra], env)
            assert res.returncode == 2, res.stderr[-3000:]
            assert f"error: --out {target} is {what}" in res.stderr and "Traceback" not in res.stderr
            assert "job 1/" not in res.stderr
        assert _tree(target) == before


def test_an_out_inside_a_run_or_holding_one_is_refused_untouched(tmp_path: Path, finished: Finished) -> None:
    """`run … --out runs/quickstart/jobs` ran every job and wrote run.json, report/ and jobs/ into the finished run's
    jobs/ folder (exit 0): an --out inside another run (its jobs/, report/, a new path below them) is refused, exit 2,
    nothing written, the fix naming a folder beside the run; so is a folder that is no run and holds one below it
    (`--out runs` beside `runs/quickstart`), the fix naming a new folder in it. The run's own folder is no such
    folder: `--resume` goes on with it."""
    copied, env = finished.copy(tmp_path / "copy")  # (its store stays there)
    (tmp_path / "runs").mkdir()
    out = copied.rename(tmp_path / "runs" / "fixed-sim")  # a run named as its recipe: the fix steps to fixed-sim-2
    before = _tree(tmp_path / "runs")
    inside = [out / "jobs", out / "report", out / "jobs" / "new" / "deeper", next(iter(job_dirs(out).values())) / "x"]
    for target in inside:
        for extra in ([], ["--force"], ["--resume"]):
            res = run_here([RECIPE, "--live", "--out", target, "--no-report", *extra], env)
            assert res.returncode == 2, res.stderr[-3000:]
            assert f"error: --out {target} is inside {out}, a run of `llmsweep run`" in res.stderr, res.stderr
            assert (f"fix: pass a folder of its own beside it to --out, e.g. {tmp_path / 'runs' / 'fixed-sim-2'}, or "
                    f"{out} itself with --resume") in res.stderr, res.stderr
            assert "job 1/" not in res.stderr and "Traceback" not in res.stderr
    for holder in (tmp_path / "runs", tmp_path):
        res = run_here([RECIPE, "--live", "--out", holder, "--no-report"], env)
        assert res.returncode == 2, res.stderr[-3000:]
        assert f"error: --out {holder} is no run and holds a run of `llmsweep run`, {out}" in res.stderr, res.stderr
        assert f"e.g. {holder / 'fixed-sim-2' if holder.name == 'runs' else holder / 'fixed-sim'}" in res.stderr
    assert _tree(tmp_path / "runs") == before  # nothing written: no run.json, jobs/ or report/ in either folder
    assert not (out / "jobs" / "run.json").exists() and not (tmp_path / "runs" / "run.json").exists()
    resumed = run_here([RECIPE, "--live", "--out", out, "--no-report", "--resume"], env)
    assert resumed.returncode == 0 and "2 already done" in resumed.stderr, resumed.stderr[-3000:]


def test_a_refused_out_says_no_warning_of_the_recipes_before_it(tmp_path: Path, finished: Finished) -> None:
    """Rerunning a recipe with warnings over a finished run printed its golden-AL warning (four lines) before the
    refusal; the refusal is what the user reads first, and a refused run warns of nothing it does not run. A run
    that goes on says its warnings before anything starts."""
    out, env = finished.copy(tmp_path / "run")
    warned = RECIPES / "spec-fixed-sim.yaml"
    for target in (out, out / "jobs"):
        res = run_here([warned, "--out", target, "--no-report"], env)
        assert res.returncode == 2, res.stderr[-3000:]
        assert "warning [" not in res.stderr and res.stderr.startswith("error: "), res.stderr
    fresh = run_here([warned, "--out", tmp_path / "fresh", "--no-report", "--config-keys", "run-sim-spec-short"], env)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    said = fresh.stderr.index("warning [golden-al.precision-provenance]")
    assert said < fresh.stderr.index("job 1/"), fresh.stderr
