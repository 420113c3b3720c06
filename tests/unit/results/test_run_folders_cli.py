"""What the commands that take a run accept: a run folder or a stored run id alike (`report` too, `results frontier`
as an argument), and a `bench` output folder refused naming what it is and what works on it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_main


@pytest.fixture
def cli_run(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str]]:
    """Run the command line as a user does (errors printed by `main`, with their exit status): (status, stdout +
    stderr)."""

    def invoke(*args: str | Path) -> tuple[int, str]:
        code, out, err = run_main(capsys, *args)
        return code, out + err

    return invoke


def _bench_folder(run_dir: Path, out: Path) -> Path:
    """What `llmsweep bench fixed --out OUT` writes: one measurement's records, scrapes, summary and the client's
    run.json, with no jobs/ folder (here, the files of a run's job, as the client wrote them there)."""
    job = next((run_dir / "jobs").iterdir())
    out.mkdir()
    for name in ("records.jsonl", "server_metrics.jsonl", "summary.json"):
        shutil.copy(job / name, out / name)
    (out / "run.json").write_text(json.dumps({"started": 1_790_000_000.0, "workers": 1}), encoding="utf-8")
    return out


def test_a_bench_output_folder_is_refused_by_every_command_that_takes_a_run(make_run, store_path: Path, cli_run,
                                                                             tmp_path: Path) -> None:
    """`report out/fixed` said "nothing was planned into it" (exit 0) and `results ingest out/fixed` stored an empty
    run (`ingested fixed: 0 results`, exit 0): a `bench` folder is one measurement, not a run."""
    run = make_run("run1", concs=(1, 4))
    fixed = _bench_folder(run.path, tmp_path / "fixed")
    for args in (("report", fixed, "--no-png"), ("results", "ingest", fixed), ("compare", run.path, fixed),
                 ("results", "frontier", "--run", fixed)):
        code, out = cli_run(*args)
        assert code == 2, (args, code, out)
        assert f"{fixed} is a `bench` output folder, not a run" in out, (args, out)
        assert f"llmsweep summarize {fixed}" in out, (args, out)  # what does work on it
    assert not (fixed / "report").exists()
    assert not store_path.exists()  # nothing stored, not even an empty run


def test_report_takes_a_stored_run_id_and_says_what_it_wrote_as_json(make_run, store_path: Path, cli_run,
                                                                     tmp_path: Path) -> None:
    run = make_run("run1", concs=(1, 4))
    assert cli_run("results", "ingest", run.path)[0] == 0
    out = tmp_path / "rep"
    code, text = cli_run("report", "run1", "--out", out, "--json")
    assert code == 0, text
    doc = json.loads(text)
    assert doc["run_id"] == "run1" and doc["points"] == 2
    assert Path(doc["html"]) == out / "index.html" and Path(doc["html"]).is_file()
    assert Path(doc["markdown"]).is_file() and Path(doc["data"]).is_file()
    assert doc["pngs"] and all(Path(p).is_file() and p.endswith(".png") for p in doc["pngs"])
    # a folder still works without any store, and --json there too
    code, text = cli_run("report", run.path, "--no-png", "--json", "--store", tmp_path / "absent.sqlite")
    assert code == 0 and json.loads(text)["html"] == str(run.path / "report" / "index.html"), text


def test_report_of_a_stored_run_without_its_folder_names_the_fix(make_run, store_path: Path, tmp_path: Path,
                                                                  cli_run) -> None:
    run = make_run("run1", concs=(4,))
    assert cli_run("results", "ingest", run.path)[0] == 0
    export = tmp_path / "export.json"
    assert cli_run("results", "export", "--run", "run1", "--out", export)[0] == 0
    run.path.rename(tmp_path / "moved")
    code, out = cli_run("report", "run1")
    assert code == 2 and "was ingested from" in out and "no longer a run folder" in out, out
    code, out = cli_run("results", "import", export)
    (imported,) = (r["run_id"] for r in json.loads(cli_run("results", "runs", "--json")[1]) if r["run_id"] != "run1")
    code, out = cli_run("report", imported)
    assert code == 2 and "has no run folder: its rows were imported" in out and f"--with {imported}" in out, out
    code, out = cli_run("report", "run-nope")
    assert code == 2 and "neither a run directory nor a run id in the store" in out, out


def test_frontier_takes_the_run_as_its_argument_or_as_run(make_run, store_path: Path, cli_run) -> None:
    run = make_run("run1", concs=(1, 4, 16))
    assert cli_run("results", "ingest", run.path)[0] == 0
    by_option = cli_run("results", "frontier", "--run", "run1", "--json")
    assert by_option[0] == 0 and cli_run("results", "frontier", "run1", "--json") == by_option
    assert cli_run("results", "frontier", str(run.path), "--json") == by_option
    code, out = cli_run("results", "frontier", "run1", "--run", "other")
    assert code == 2 and "give one" in out
    code, out = cli_run("results", "frontier")
    assert code == 2 and "give the run" in out


def _cut(path: Path) -> None:
    """A file cut short mid-write (a full disk, a copy interrupted)."""
    path.write_text(path.read_text(encoding="utf-8")[:40], encoding="utf-8")


@pytest.mark.parametrize("broken", ["run.json", "job.json", "outcome.json", "summary.json"])
def test_a_run_file_that_does_not_read_is_bad_input_with_a_fix_that_fits_it(make_run, store_path: Path, cli_run,
                                                                            broken: str) -> None:
    """A cut run.json, job.json or summary.json gave exit 1, and run.json's and job.json's fix said to re-run
    `summarize`, which rebuilds neither: exit 2 (bad input) and the fix that mends that file."""
    run = make_run("run1", concs=(1, 4))
    job = run.jobs[0].dir
    if broken == "outcome.json":
        (job / broken).write_text(json.dumps({"job_id": run.jobs[0].job_id, "status": "valid"}), encoding="utf-8")
    path = run.path / broken if broken == "run.json" else job / broken
    _cut(path)
    # `report` draws the rest of a run whose one summary.json does not read, that job listed as unreadable with this
    # fix (tests/e2e/test_report_counts.py); the commands that store or compare its points refuse it
    reporting = [] if broken == "summary.json" else [["report", run.path]]
    for argv in (*reporting, ["results", "ingest", run.path], ["results", "frontier", run.path],
                 ["compare", run.path, run.path]):
        code, out = cli_run(*argv)
        assert code == 2, (argv, out)
        assert f"error: cannot read {path}" in out and out.count("error:") == 1 and "Traceback" not in out, out
        fix = out.split("fix: ", 1)[1]
        if broken == "summary.json":
            assert fix.startswith(f"`llmsweep summarize {job}` rebuilds it from its records.jsonl"), fix
        else:
            assert "summarize" not in fix and f"restore {broken} from a copy of the run" in fix, fix
        if broken == "job.json":
            assert "that job runs anew, its files kept in its attempts/ folder" in fix  # no folder to move aside
            assert f"--out {run.path} --resume" in fix
        if broken == "run.json":
            assert f"--out {run.path} --resume" in fix


@pytest.mark.parametrize("marked", ["run.json", "job.json", "outcome.json", "summary.json"])
def test_a_run_file_saved_with_a_byte_order_mark_at_its_start_reads(make_run, store_path: Path, cli_run,
                                                                    marked: str) -> None:
    """A run folder's file re-saved by a Windows editor starts with a UTF-8 byte-order mark: every command that
    reads the folder had refused it ('Unexpected UTF-8 BOM', exit 2). It reads as the file without the mark."""
    run = make_run("run1", concs=(1, 4))
    job = run.jobs[0].dir
    if marked == "outcome.json":
        (job / marked).write_text(json.dumps({"job_id": run.jobs[0].job_id, "status": "valid"}), encoding="utf-8")
    path = run.path / marked if marked == "run.json" else job / marked
    path.write_text(path.read_text(encoding="utf-8"), encoding="utf-8-sig")
    for argv in (["results", "frontier", run.path, "--json"], ["compare", run.path, run.path, "--no-history"],
                 ["results", "ingest", run.path]):
        code, out = cli_run(*argv)
        assert code == 0 and "BOM" not in out, (argv, out)


def test_summarize_of_a_run_folder_names_its_job_folders(make_run, cli_run, tmp_path: Path) -> None:
    """`summarize RUN` (a run folder, where it takes one job's folder) said "RUN has no records.jsonl": true, but
    no word that the folder is a run, nor which folder to pass. It is named as `compare` names the opposite mix-up
    (a job folder for a run), with a few of its job folders and how many it holds; nothing is written."""
    run = make_run("run1", concs=(1, 4, 8, 16))
    jobs = sorted(str(d) for d in (run.path / "jobs").iterdir())
    before = sorted(p for p in run.path.rglob("*"))
    code, out = cli_run("summarize", run.path)
    assert code == 2 and "no records.jsonl" not in out, out
    assert f"{run.path} is a run of `llmsweep run` (4 job folders under jobs/), not a job folder" in out, out
    assert f"pass one of its job folders: {', '.join(jobs[:3])} and 1 more" in out, out
    assert sorted(p for p in run.path.rglob("*")) == before
    assert "is a run of" not in cli_run("summarize", jobs[0])[1]  # a job folder it names is taken as one


def test_results_import_of_a_run_folder_names_results_ingest(make_run, store_path: Path, cli_run) -> None:
    """`results import RUN` said click's "File 'RUN' is a directory", with no word of `results ingest`, which stores
    a run folder; a job folder (or another folder inside a run) names the ingest of its run. Nothing is stored."""
    run = make_run("run1", concs=(1,))
    job = next((run.path / "jobs").iterdir())
    for given in (run.path, job):
        code, out = cli_run("results", "import", given)
        assert code == 2 and "is a directory" not in out, out
        assert f"`llmsweep results ingest {run.path}`" in out, out
    assert "is a run of `llmsweep run`, not a file" in cli_run("results", "import", run.path)[1]
    assert f"is a job folder of the run {run.path}, not a file" in cli_run("results", "import", job)[1]
    assert not store_path.exists()
    code, out = cli_run("results", "ingest", run.path)  # the fix works
    assert code == 0 and "ingested run1: 1 result" in out, out


@pytest.mark.parametrize("damage", [{"latency": {}, "throughput": {}}, {"throughput": {}}, {"latency": {}},
                                    {"throughput": {"duration_s": 1.0}}])
def test_a_summary_whose_blocks_were_emptied_replaces_no_stored_result(make_run, store_path: Path, cli_run,
                                                                       damage: dict[str, object]) -> None:
    """A copy of a run whose one summary.json had `"latency": {}, "throughput": {}` re-ingested (exit 0) over the
    stored run: the job stood as a valid point of 0.0 tok/s/GPU with no TTFT in `results frontier` and the report.
    A whole block emptied, or one without its figures, is bad input as a missing block is: exit 2, nothing
    replaced, and every reader refuses it alike."""
    run = make_run("run1", concs=(1, 4))
    assert cli_run("results", "ingest", run.path)[0] == 0
    stored = cli_run("results", "list", "--run", "run1", "--json")
    path = run.jobs[0].dir / "summary.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**doc, **damage}), encoding="utf-8")
    for argv in (["results", "ingest", run.path], ["results", "frontier", run.path], ["compare", run.path, run.path]):
        code, out = cli_run(*argv)
        assert code == 2, (argv, out)
        assert f"error: {path} is not a whole summary: " in out and "Traceback" not in out, out
        assert "empty" in out or "it has no `throughput.request_rps`" in out, out
        assert out.split("fix: ", 1)[1].startswith(f"`llmsweep summarize {run.jobs[0].dir}` rebuilds it"), out
    assert cli_run("results", "list", "--run", "run1", "--json") == stored  # the good result is still the one stored
    code, out = cli_run("report", run.path, "--no-png", "--json")  # drawn without it, listed as unreadable
    assert code == 0 and "is not a whole summary" in out, out
