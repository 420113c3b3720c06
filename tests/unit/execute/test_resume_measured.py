"""What `run.json` records of the options that change a measurement, and what `--resume` compares: only what the
run's jobs used (a value no job used is no measurement to protect), a corpus by the file it names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main

from llmsweep.errors import ConfigError
from llmsweep.evals.harness import EvalSettings
from llmsweep.execute import pipeline
from llmsweep.execute.lifecycle import LifecycleSettings
from llmsweep.plan import jobs_from_files
from llmsweep.plan.matrix import EvalOptions
from llmsweep.power.sampler import PowerSettings
from llmsweep.workload.traces.synth import SynthProfile, synthesize, write_jsonl

REPO = Path(__file__).resolve().parents[3]
EVALS = REPO / "examples" / "evals" / "sim-8k1k-evals.yaml"
QUICKSTART = REPO / "examples" / "quickstart.yaml"


def request(out: Path, files: list[Path], *, resume: bool = False, limit: int | None = None,
            traces: str | None = None, live: bool = False, evals: EvalOptions | None = None,
            dataset: Path | None = None, power: str = "auto") -> pipeline.RunRequest:
    return pipeline.RunRequest(files=files, out=out, traces=traces, live=live, evals=evals or EvalOptions(),
                               settings=LifecycleSettings(resume=resume,
                                                          eval=EvalSettings(limit=limit, dataset=dataset),
                                                          power=PowerSettings(backend=power)))


def record(out: Path, req: pipeline.RunRequest) -> dict[str, object]:
    jobs = jobs_from_files(req.files, evals=req.evals)
    out.mkdir(parents=True, exist_ok=True)
    pipeline._write_run_meta(out, req, "run-x", jobs, None, [])
    held = out / "jobs" / jobs[0].id / "summary.json"  # a result it holds (a run with none has nothing to mix with)
    held.parent.mkdir(parents=True, exist_ok=True)
    held.write_text("{}")
    return dict(json.loads((out / "run.json").read_text()))


def check(out: Path, req: pipeline.RunRequest) -> None:
    pipeline._refuse_other_measurement(out, req, jobs_from_files(req.files, evals=req.evals))


def test_eval_settings_no_job_used_are_neither_recorded_nor_compared(tmp_path: Path) -> None:
    """A `--no-evals` run recorded `eval_settings` anyway; a resume that ran the evals for the first time was refused
    for settings that had measured nothing."""
    out = tmp_path / "out"
    meta = record(out, request(out, [EVALS], limit=9, evals=EvalOptions(no_evals=True)))
    assert "eval_settings" not in meta
    check(out, request(out, [EVALS], resume=True, limit=4))  # the evals run now, under these settings
    meta = record(out, request(out, [EVALS], resume=True, limit=4))
    assert meta["eval_settings"]["limit"] == 4  # type: ignore[index]
    with pytest.raises(ConfigError, match=r"--eval-limit 4, now .*--eval-limit 2"):
        check(out, request(out, [EVALS], resume=True, limit=2))


def test_eval_samples_edited_in_place_are_another_measurement_and_an_older_record_is_compared_by_path(
        tmp_path: Path) -> None:
    """`--eval-dataset` was compared by its path alone: a file edited between the run and its resume kept the path,
    so the finished jobs' scores (the first samples) and the rest (the others) were one run's evals."""
    samples = tmp_path / "gsm8k.jsonl"
    samples.write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    out = tmp_path / "out"
    meta = record(out, request(out, [EVALS], dataset=samples))
    first = meta["eval_settings"]["dataset_sha256"]  # type: ignore[index]
    assert isinstance(first, str) and len(first) == 16
    check(out, request(out, [EVALS], resume=True, dataset=samples))  # the same bytes: resumed
    samples.write_text('{"question": "2+2?", "answer": "#### 4"}\n')
    with pytest.raises(ConfigError, match=rf"its eval settings: .*gsm8k\.jsonl \(sha256 {first}\).*, now .*"
                                          r"gsm8k\.jsonl \(sha256 [0-9a-f]{16}\)"):
        check(out, request(out, [EVALS], resume=True, dataset=samples))
    # a run.json an older release wrote (the path, no digest): compared by the path, as then
    older = {**meta, "eval_settings": {k: v for k, v in meta["eval_settings"].items()  # type: ignore[attr-defined]
                                       if k != "dataset_sha256"}}
    (out / "run.json").write_text(json.dumps(older))
    check(out, request(out, [EVALS], resume=True, dataset=samples))


def test_a_resume_under_another_power_backend_is_refused_and_an_older_record_is_not_compared(tmp_path: Path) -> None:
    """`--power-backend` was not compared: a resume under `off` after `auto` left the run's later points without
    power beside earlier ones with it, in one series. An eval-only plan measures no power, so it is not compared."""
    out = tmp_path / "out"
    meta = record(out, request(out, [QUICKSTART]))
    assert meta["power_backend"] == "auto"
    check(out, request(out, [QUICKSTART], resume=True))
    with pytest.raises(ConfigError, match=r"its power backend: it ran with --power-backend auto, now --power-backend "
                                          r"off"):
        check(out, request(out, [QUICKSTART], resume=True, power="off"))
    (out / "run.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "power_backend"}))
    check(out, request(out, [QUICKSTART], resume=True, power="off"))  # an older release's run.json: not recorded
    evals = tmp_path / "evals"
    record(evals, request(evals, [EVALS], evals=EvalOptions(evals_only=True)))
    check(evals, request(evals, [EVALS], resume=True, power="off", evals=EvalOptions(evals_only=True)))


def test_an_all_eval_resume_is_not_compared_for_a_clock_its_evals_do_not_use(tmp_path: Path) -> None:
    out = tmp_path / "out"
    record(out, request(out, [EVALS]))  # virtual time
    check(out, request(out, [EVALS], resume=True, live=True, evals=EvalOptions(evals_only=True)))
    with pytest.raises(ConfigError, match="its clock"):
        check(out, request(out, [EVALS], resume=True, live=True))


def test_a_corpus_an_older_release_recorded_as_typed_is_compared_as_the_file_it_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.jsonl").write_text("")
    out = tmp_path / "out"
    meta = record(out, request(out, [QUICKSTART], traces="t.jsonl"))
    assert meta["traces"] == str(tmp_path / "t.jsonl")
    (out / "run.json").write_text(json.dumps({**meta, "traces": "t.jsonl"}))  # as 2026-12-04's first fix wrote it
    check(out, request(out, [QUICKSTART], resume=True, traces="t.jsonl"))
    with pytest.raises(ConfigError, match=r"its trace corpus: it ran with --traces .*t\.jsonl, now no --traces"):
        check(out, request(out, [QUICKSTART], resume=True))


def closed(run_dir: Path, job_id: str, status: str = "valid", reasons: tuple[str, ...] = ()) -> None:
    """The outcome.json a job's lifecycle writes as it closes the job (its verdict, after every check)."""
    from llmsweep.execute.lifecycle import JobOutcome

    (run_dir / "jobs" / job_id / "outcome.json").write_text(JobOutcome(
        job_id=job_id, exp_name="x", status=status, reasons=list(reasons)).model_dump_json())


def test_a_run_eval_rows_point_measured_without_its_eval_is_not_done_for_a_plan_that_asks_it(tmp_path: Path) -> None:
    """A first `--no-evals` run measured the row's point; a `--resume` that plans its eval counted the job done and
    the eval never ran, with nothing said."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    from llmsweep.execute.lifecycle import resumed
    from llmsweep.metrics.model import EvalBlock, EvalRun, Summary

    (job,) = [j for j in jobs_from_files([EVALS]) if j.run_eval]
    run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=16, job_id=job.id), requests=8)])
    closed(run.path, job.id)
    assert resumed(job, run.path) is None  # its eval is owed
    assert resumed(job.model_copy(update={"run_eval": False}), run.path) is not None  # under --no-evals: done
    path = run.path / "jobs" / job.id / "summary.json"
    summary = Summary.load(path)
    summary.eval = EvalBlock(mode="run-eval", task="gsm8k", dataset="arith.jsonl", context_length=9472, max_tokens=16,
                             score=0.0, verdict="invalid", reasons=["below"],
                             runs=[EvalRun(conc=16, status="completed", n_samples=4, command=["x"])])
    path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    assert resumed(job, run.path) is not None  # the eval ran (its verdict is the outcome's eval failure, not this)


def test_a_job_a_signal_stopped_after_its_summary_was_written_runs_again(tmp_path: Path) -> None:
    """Under stress, a SIGTERM landed 7 ms after a live job's valid summary.json and before its outcome: outcome.json
    said `failed: interrupted by SIGTERM` beside it, and `--resume` counted the job done (valid, resumed), leaving the
    stale failed outcome for the dashboard to read."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    from llmsweep.execute.lifecycle import JobOutcome, resumed

    (job,) = [j for j in jobs_from_files([QUICKSTART])][:1]
    run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=1, job_id=job.id), requests=8)])
    closed(run.path, job.id)
    assert resumed(job, run.path) is not None  # a finished job: done
    (run.path / "jobs" / job.id / "outcome.json").write_text(JobOutcome(
        job_id=job.id, exp_name=job.exp_name, status="failed", reasons=["interrupted by SIGTERM"]).model_dump_json())
    assert resumed(job, run.path) is None


def test_a_summary_no_outcome_closed_is_not_done(tmp_path: Path) -> None:
    """The client writes its summary when the load ends; the job's verdict (read-back checks, the power record, the
    server found alive, the eval) is made after it, and outcome.json closes the job. A SIGKILL landing between the
    two (28 ms on a live simulated job, reached by polling for summary.json) left a `valid` summary without a
    read-back block, a power record or an outcome, and `--resume` counted the job done and stored it valid. A job a
    Slurm time limit closed after its summary (its reason Slurm's, not `interrupted by …`) runs again too."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    from llmsweep.execute.lifecycle import resumed

    (job,) = [j for j in jobs_from_files([QUICKSTART])][:1]
    run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=1, job_id=job.id), requests=8)],
                              closed=False)
    assert resumed(job, run.path) is None  # killed before it was closed: it runs again
    closed(run.path, job.id, "failed", ("Slurm job 12 reached its time limit while this job ran",))
    assert resumed(job, run.path) is None
    closed(run.path, job.id)
    done = resumed(job, run.path)
    assert done is not None and done.resumed and done.reasons == ["resumed: summary already valid"]


def test_a_resume_whose_trace_file_now_holds_another_corpus_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus is compared as the path it names (above), and also as what it holds: a traces.jsonl regenerated
    in place between a run and its `--resume` kept the finished points on the old corpus and replayed the new one for
    the rest, one run and series over two corpora, nothing said."""
    args, traces, out = _one_job_of_two_on_a_trace_file(tmp_path, capsys, monkeypatch)
    write_jsonl(synthesize(SynthProfile(traces=3, seed=2, max_isl=4096)), traces)  # regenerated in place
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 2 and "trace corpus that changed" in err and "qwen3.5_tp8_conc2" in err, err
    assert len(list(out.glob("jobs/*/summary.json"))) == 1  # nothing ran
    write_jsonl(synthesize(SynthProfile(traces=3, seed=1, max_isl=4096)), traces)  # put back as it was
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0 and "1 resumed" in err, err


def test_a_job_no_outcome_closed_does_not_refuse_a_resume_on_a_changed_corpus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A job killed after its summary and before outcome.json closed it is not finished (`job_files.unjudged`,
    as `resumed()` reads it): it runs again on the corpus as it is now, so its summary's corpus is no reason to refuse
    the resume — the refusal (exit 2, nothing run) left the run unresumable for a job that was never done."""
    args, traces, out = _one_job_of_two_on_a_trace_file(tmp_path, capsys, monkeypatch)
    (outcome,) = out.glob("jobs/*/outcome.json")
    outcome.unlink()  # as a SIGKILL between the client's summary and the job's verdict leaves the folder
    write_jsonl(synthesize(SynthProfile(traces=3, seed=2, max_isl=4096)), traces)  # regenerated in place
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0 and "trace corpus that changed" not in err and " resumed" not in err, err
    assert len(list(out.glob("jobs/*/outcome.json"))) == 2  # both ran, on the corpus as it is now


def test_a_narrowed_force_or_resume_over_a_trace_file_that_now_holds_another_corpus_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus check ran on `--resume` of the jobs it planned only: a `--force --job X` (or `--resume --job X`)
    after the trace file was regenerated ran X on the new corpus and kept the other jobs' results on the old one, one
    run and series over two corpora, nothing said. It is refused now, naming the kept job and the fix; the whole
    `--force`, or the traces put back, runs."""
    args, traces, out = _one_job_of_two_on_a_trace_file(tmp_path, capsys, monkeypatch)
    code, _, err = run_main(capsys, *args, "--resume")  # the conc-3 job too: the whole run done
    assert code == 0 and "1 resumed" in err, err
    (kept,) = out.glob("jobs/qwen3.5_tp8_conc2*")
    (again,) = out.glob("jobs/qwen3.5_tp8_conc3*")
    done = {p: p.read_bytes() for p in out.glob("jobs/*/summary.json")}
    write_jsonl(synthesize(SynthProfile(traces=3, seed=2, max_isl=4096)), traces)  # regenerated in place
    code, _, err = run_main(capsys, *args, "--force", "--job", "qwen3.5_tp8_conc3")
    assert code == 2, err
    assert f"--force of part of the run in {out} with a trace corpus that changed since its other jobs ran" in err
    assert f"when 1 kept job replayed it ({kept.name})" in err and "--force without --job/--config-keys" in err
    assert {p: p.read_bytes() for p in out.glob("jobs/*/summary.json")} == done  # nothing ran
    assert not (again / "attempts").exists()
    (again / "summary.json").unlink()  # a narrowed resume of the job left to run is refused alike
    code, _, err = run_main(capsys, *args, "--resume", "--job", "qwen3.5_tp8_conc3")
    assert code == 2 and "--resume with a trace corpus that changed" in err and kept.name in err, err
    write_jsonl(synthesize(SynthProfile(traces=3, seed=1, max_isl=4096)), traces)  # put back as it was
    code, _, err = run_main(capsys, *args, "--force", "--job", "qwen3.5_tp8_conc3")
    assert code == 0, err
    write_jsonl(synthesize(SynthProfile(traces=3, seed=2, max_isl=4096)), traces)
    code, _, err = run_main(capsys, *args, "--force")  # every job again, on the corpus as it is now
    assert code == 0, err
    corpora = {json.loads(p.read_text())["provenance"]["workload"]["corpus_digest"]
               for p in out.glob("jobs/*/summary.json")}
    assert len(corpora) == 1 and corpora != {json.loads(b)["provenance"]["workload"]["corpus_digest"]
                                             for b in done.values()}


def _one_job_of_two_on_a_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[Any, ...], Path, Path]:
    """A two-job quickstart run replaying a trace file (seed 1), its conc-2 job run: (the `run` arguments, the trace
    file, the run folder)."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    recipe = tmp_path / "two.yaml"
    text = QUICKSTART.read_text().replace("conc-list: [1, 4, 8, 12, 16]", "conc-list: [2, 3]")
    text = "\n".join(line for line in text.splitlines() if "kv-offloading: dram, kv-offload-backend" not in line)
    recipe.write_text(text.replace("duration: 1800", "duration: 10"))
    traces, out = tmp_path / "traces.jsonl", tmp_path / "out"
    write_jsonl(synthesize(SynthProfile(traces=3, seed=1, max_isl=4096)), traces)
    args = ("run", recipe, "--traces", traces, "--out", out, "--no-report")
    code, _, err = run_main(capsys, *args, "--job", "qwen3.5_tp8_conc2")
    assert code == 0, err
    return args, traces, out


def test_a_force_of_part_of_the_run_keeps_what_the_rest_was_measured_by_and_refuses_other_options(
        tmp_path: Path) -> None:
    """`--force --config-keys K` of K's fixed-length jobs dropped `traces` from run.json although the run's agentic
    jobs, kept, had replayed a corpus (a later resume under another `--traces` was then not refused); and a narrowed
    `--force` under other options kept those jobs' results beside the jobs it measured the other way, run.json saying
    the new options for all."""
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(EVALS.read_text() + "\n" + QUICKSTART.read_text())
    out = tmp_path / "out"
    whole = request(out, [mixed])
    jobs = jobs_from_files([mixed])
    fixed = [j for j in jobs if j.id.startswith("llama")]
    agentic = next(j for j in jobs if not j.id.startswith("llama"))
    out.mkdir()
    pipeline._write_run_meta(out, whole, "run-x", jobs, None, [])
    assert json.loads((out / "run.json").read_text())["traces"] is None  # the recipes' own sources
    part = whole.model_copy(update={"force": True, "config_keys": ["llama8b-h200-sim-evals"]})
    pipeline._write_run_meta(out, part, "run-x", fixed, None, [])
    assert "traces" in json.loads((out / "run.json").read_text())
    other = part.model_copy(update={"settings": LifecycleSettings(power=PowerSettings(backend="off"))})
    pipeline._refuse_other_measurement(out, other, fixed)  # nothing measured yet: nothing to mix with
    (out / "jobs" / fixed[0].id).mkdir(parents=True)
    (out / "jobs" / fixed[0].id / "summary.json").write_text("{}")
    pipeline._refuse_other_measurement(out, other, fixed)  # only the jobs it runs again hold results
    (out / "jobs" / f"{agentic.id}-repeat2").mkdir(parents=True)
    (out / "jobs" / f"{agentic.id}-repeat2" / "summary.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"--force of part of the run .* its power backend: it ran with "
                                          r"--power-backend auto, now --power-backend off\. Its other jobs keep "
                                          rf"results .*\({agentic.id}-repeat2\)") as refused:
        pipeline._refuse_other_measurement(out, other, fixed)
    assert "--force without --job/--config-keys" in (refused.value.fix or "")
    pipeline._refuse_other_measurement(out, other.model_copy(update={"config_keys": []}), jobs)  # the whole run


def _mooncake(path: Path, output_length: int) -> None:
    """A 12-row Mooncake trace whose rows ask `output_length` tokens each."""
    path.write_text("".join(json.dumps({"timestamp": 100 * i, "input_length": 700 + 10 * i,
                                        "output_length": output_length, "hash_ids": [0, 1 + i % 3]}) + "\n"
                            for i in range(12)))


def test_a_narrowed_force_or_resume_over_a_mooncake_trace_edited_in_place_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A Mooncake replay's summary records no corpus digest, and the corpus check named no corpus of a Mooncake job:
    a `--force --job X` after the trace file was regenerated in place ran X on the new rows beside the other job's
    result on the old ones, one run and series over two corpora, nothing said (the README says it is refused). The
    kept job's corpus is the file digest its reuse key was recorded with."""
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    trace, recipe, out = tmp_path / "trace.jsonl", tmp_path / "replay.yaml", tmp_path / "out"
    _mooncake(trace, 60)
    recipe.write_text((REPO / "tests" / "data" / "recipes" / "run" / "replay-sim.yaml").read_text()
                      .replace("mooncake: TRACE", f"mooncake: {trace}").replace("conc-list: [4]", "conc-list: [2, 4]"))
    args = ("run", recipe, "--out", out, "--no-report")
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    (kept,) = out.glob("jobs/*_conc2_*")
    (again,) = out.glob("jobs/*_conc4_*")
    done = {p: p.read_bytes() for p in out.glob("jobs/*/summary.json")}
    _mooncake(trace, 90)  # regenerated in place
    code, _, err = run_main(capsys, *args, "--force", "--job", again.name)
    assert code == 2, err
    assert f"--force of part of the run in {out} with a trace corpus that changed since its other jobs ran" in err
    assert f"{trace} held corpus file-sha256:" in err and f"when 1 kept job replayed it ({kept.name})" in err, err
    assert {p: p.read_bytes() for p in out.glob("jobs/*/summary.json")} == done  # nothing ran
    assert not (again / "attempts").exists()
    (again / "summary.json").unlink()
    code, _, err = run_main(capsys, *args, "--resume")  # the finished job's rows are not the file's now
    assert code == 2 and "--resume with a trace corpus that changed" in err and kept.name in err, err
    _mooncake(trace, 60)  # put back as it was
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0 and "1 resumed" in err, err
