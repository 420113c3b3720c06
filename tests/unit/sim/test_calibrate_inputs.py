"""`llmsweep sim calibrate` on the runs a user really has: damaged job folders, points of another engine, invalid
or disaggregated points, two runs in one fit, the same run named twice, too few points; `--hold-out` patterns that
split nothing or fits that fail; `--save` over an older entry of the key or to a target it cannot write; options
the chosen mode does not read. Each on two or three fixed-length points of the committed H200 vLLM run, one factor,
one iteration: seconds."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llmsweep.catalog.sources import clear_caches
from llmsweep.cli.sim import calibrate as calibrate_cmd
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.sim.engine import EngineConfig

REPO = Path(__file__).resolve().parents[3]
LLAMA = REPO / "examples" / "results" / "h200-vllm-0.26.0" / "llama"
QUICK = ["--factors", "mem", "--max-iter", "1", "--json"]


pytestmark = pytest.mark.usefixtures("user_catalog")


def _run(tmp_path: Path, concs: tuple[int, ...] = (1, 4), name: str = "run") -> Path:
    """A copy of the committed run's fixed 1024/256 points at the given concurrencies (1, 4, 16, 64, 128)."""
    run = tmp_path / name
    for conc in concs:
        (job,) = (LLAMA / "jobs").glob(f"llama-1b_1024_256_*_conc{conc}_*")
        shutil.copytree(job, run / "jobs" / job.name)
    shutil.copy(LLAMA / "run.json", run / "run.json")
    return run


def _edit(path: Path, change: Callable[[Any], object]) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(("damage", "said"), [
    (lambda j: j.pop("conc"), "conc: Field required"),
    (lambda j: j["workload"].update(isl="x"), "workload.isl: Input should be a valid integer"),
    ("[1, 2]", "is not a JSON object"),
], ids=["field-missing", "ill-typed", "not-an-object"])
def test_a_job_json_that_is_not_a_job_is_left_out_naming_file_and_field(
        tmp_path: Path, damage: str | Callable[[Any], object], said: str) -> None:
    """A job.json that parses but is not a job (a field deleted, ill-typed, not an object) was a traceback."""
    run = _run(tmp_path, (1, 4, 16))
    (bad,) = run.glob("jobs/*_conc16_*")
    if isinstance(damage, str):
        (bad / "job.json").write_text(damage)
    else:
        _edit(bad / "job.json", damage)
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [p["label"] for p in doc["calibrations"][0]["points"]] == ["fixed 1024/256 c1", "fixed 1024/256 c4"]
    (why,) = doc["skipped"]
    assert str(bad / "job.json") in why and said in why and "(fix: restore the file" in why


def test_a_run_whose_files_carry_a_byte_order_mark_calibrates_as_without(tmp_path: Path) -> None:
    """A measured run copied through a Windows tool: its run.json, each job.json, summary.json and records.jsonl
    start with a UTF-8 byte-order mark. Each job had been left out ('Unexpected UTF-8 BOM'); they fit as before."""
    clean = _run(tmp_path, (1, 4), name="clean")
    marked = _run(tmp_path, (1, 4), name="marked")
    for path in [marked / "run.json", *marked.glob("jobs/*/job.json"), *marked.glob("jobs/*/summary.json"),
                 *marked.glob("jobs/*/records.jsonl")]:
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    fits = []
    for run in (clean, marked):
        res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        assert not doc["skipped"], doc["skipped"]
        fits.append([p["label"] for p in doc["calibrations"][0]["points"]])
    assert fits[0] == fits[1] == ["fixed 1024/256 c1", "fixed 1024/256 c4"]


def _as_engine(job: Path, engine: str, version: str) -> None:
    """Make a copied job folder say it ran on another engine (job.json and the launch its summary recorded)."""
    _edit(job / "job.json", lambda j: j.update(engine=engine, framework=engine))

    def launch(s: dict[str, Any]) -> None:
        s["provenance"]["launch"].update(engine=engine, engine_version=version, engine_version_reported=version)
    _edit(job / "summary.json", launch)


def test_a_point_measured_on_another_engine_is_not_fitted_or_stored_as_vllms(tmp_path: Path,
                                                                             poor_h200_calibration: Path) -> None:
    """The simulator replays a TensorRT-LLM (or ATOM) job in vLLM's style, so a TensorRT-LLM run was fitted with the
    vLLM points and `--save` stored it as vllm-h200-dense-tiny: every later vLLM prediction used TensorRT-LLM's
    factors, labelled 'calibrated: vllm-h200-dense-tiny (trtllm 1.0.0, ...)'."""
    run = _run(tmp_path, (1, 4, 16))
    (trt,) = run.glob("jobs/*_conc16_*")
    _as_engine(trt, "trtllm", "1.0.0")
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK, "--save"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [p["label"] for p in doc["calibrations"][0]["points"]] == ["fixed 1024/256 c1", "fixed 1024/256 c4"]
    (why,) = doc["skipped"]
    assert why.startswith(trt.name) and "measured on trtllm" in why and "calibrations are keyed by engine" in why
    user_catalog = poor_h200_calibration
    assert "trtllm" not in (user_catalog / "sim_calibration.yaml").read_text()
    # a run of nothing else fits nothing (and stores nothing)
    for job in run.glob("jobs/*"):
        _as_engine(job, "trtllm", "1.0.0")
    (user_catalog / "sim_calibration.yaml").unlink()
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK, "--save"])
    assert isinstance(res.exception, LlmsweepError) and res.exception.exit_code == 2  # bad input
    assert "nothing the simulator can model" in str(res.exception)
    assert str(res.exception).count("measured on trtllm") == 3
    assert not (user_catalog / "sim_calibration.yaml").exists()


def test_an_invalid_point_is_left_out_with_its_gates_reasons(tmp_path: Path) -> None:
    """A point whose gates failed (here: 8 of 20 requests errored) was fitted like any other; smoke points (short
    windows, as every committed H200 point) still are."""
    run = _run(tmp_path, (1, 4, 16))
    (bad,) = run.glob("jobs/*_conc16_*")

    def invalid(s: dict[str, Any]) -> None:
        s["validity"].update(verdict="invalid", reasons=["error ratio 0.4000 exceeds 0.05 (8/20)",
                                                         *s["validity"]["reasons"]])
    _edit(bad / "summary.json", invalid)
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [p["label"] for p in doc["calibrations"][0]["points"]] == ["fixed 1024/256 c1", "fixed 1024/256 c4"]
    (why,) = doc["skipped"]
    assert why.startswith(bad.name) and "is invalid (error ratio 0.4000 exceeds 0.05 (8/20))" in why
    assert "smoke run" not in why and "(fix: re-run the point" in why


OLDER = """calibrations:
  my-h200:
    engine: vllm
    hardware: h200-sxm
    model_class: dense-tiny
    precision: bf16
    tp: 1
    kv_dtype: bf16
    efficiency: {mem: 0.5}
    provenance: {run_id: old-run, date: '2026-10-01', engine_version: vllm 0.20.0}
"""


def test_save_replaces_an_older_entry_of_the_same_key_so_predictions_use_the_new_fit(
        tmp_path: Path, user_catalog: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry of the same key under another id ('my-h200', written by hand or an earlier release) kept winning
    after `--save` said 'saved': predictions still used mem 0.5 under the old label."""
    run = _run(tmp_path)
    (user_catalog / "sim_calibration.yaml").write_text(OLDER)
    config = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm")
    assert config.calibration_label().startswith("calibrated: my-h200 (vllm 0.20.0")
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK, "--save"])
    assert res.exit_code == 0, res.output
    fitted = json.loads(res.stdout)["calibrations"][0]["efficiency"]["mem"]
    clear_caches()
    assert config.calibration_label().startswith(
        "calibrated: vllm-h200-dense-tiny-bf16-tp1-kv-bf16 (vllm 0.26.0, NVIDIA H200")
    assert config.efficiency_factors().mem == pytest.approx(fitted, rel=1e-3)
    assert "my-h200" not in (user_catalog / "sim_calibration.yaml").read_text()
    # the same key in a later catalog directory still wins: said, with the file that defines it
    later = tmp_path / "later"
    later.mkdir()
    (later / "sim_calibration.yaml").write_text(OLDER)
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", f"{user_catalog}{os.pathsep}{later}")
    clear_caches()
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK, "--save"])
    assert res.exit_code == 0, res.output
    (warning,) = [line for line in res.stderr.splitlines() if "warning:" in line]
    assert "still use calibration 'my-h200'" in warning and str(later / "sim_calibration.yaml") in warning


def test_a_save_that_cannot_happen_is_refused_before_fitting(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """--out a file whose 'calibrations:' is not a mapping was a TypeError traceback, and --save without a user
    catalog directory was refused only after the whole fit (minutes on a real run), its result lost."""
    run = _run(tmp_path)
    target = tmp_path / "mine.yaml"
    target.write_text("calibrations: [1]\n")
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK, "--out", str(target)])
    assert isinstance(res.exception, ConfigError), res.output
    assert str(target) in str(res.exception) and "not a mapping" in str(res.exception)
    assert "calibrating" not in res.stderr
    monkeypatch.delenv("LLMSWEEP_CATALOG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK, "--save"])
    assert isinstance(res.exception, ConfigError) and "no user catalog directory" in str(res.exception)
    assert "calibrating" not in res.stderr


@pytest.mark.parametrize("pattern", ["fixed 1024/256 c44", "fixed *"], ids=["matches-none", "matches-all"])
def test_a_hold_out_pattern_that_splits_no_key_is_refused_before_fitting(tmp_path: Path, pattern: str) -> None:
    """A mistyped pattern (or one matching every point) ran the whole fit, exit 0, with `hold_out: []`: the user
    read no hold-out line and could take the in-sample error for an out-of-sample one."""
    res = CliRunner().invoke(calibrate_cmd, [str(_run(tmp_path)), *QUICK, "--hold-out", pattern])
    assert isinstance(res.exception, ConfigError), res.output  # exit 2
    message = str(res.exception)
    assert f"--hold-out '{pattern}' matches" in message and "(fixed 1024/256 c1, fixed 1024/256 c4)" in message
    assert "calibrating" not in res.stderr  # refused before any fit


def test_a_hold_out_that_fails_is_said_and_the_main_fit_stands(tmp_path: Path) -> None:
    """Holding out one of two points leaves three metrics for three factors: the hold-out fit failed, and the
    command ended with exit 1 and that error alone, the main fit (and --save) lost."""
    res = CliRunner().invoke(calibrate_cmd, [str(_run(tmp_path)), "--factors", "mem,compute,step_s", "--max-iter",
                                             "1", "--json", "--hold-out", "fixed 1024/256 c4"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert len(doc["calibrations"][0]["points"]) == 2 and doc["hold_out"] == []
    (why,) = doc["hold_out_unchecked"]
    assert why.startswith("vllm/h200/dense-tiny/bf16/tp1/kv-bf16: the hold-out failed: ")
    assert "3 measured metrics cannot constrain 3 factors" in why
    said = res.stderr.splitlines()
    assert any("no hold-out check for vllm/h200/dense-tiny/bf16/tp1/kv-bf16" in line for line in said)


def test_a_calibration_fitted_on_two_runs_is_labelled_with_both(tmp_path: Path,
                                                               poor_h200_calibration: Path) -> None:
    """Points of two runs (another vLLM release, two days later) were stored under the first point's run id,
    engine version and date alone: the label said 'vllm 0.26.0, ..., 2026-12-01' for a fit half of 0.27.0."""
    first, second = _run(tmp_path, name="first"), _run(tmp_path, name="second")
    _edit(second / "run.json", lambda r: r.update(run_id="run-later"))
    for job in second.glob("jobs/*"):
        def later(s: dict[str, Any]) -> None:
            s["provenance"]["launch"].update(engine_version="0.27.0", engine_version_reported="0.27.0")
            s["provenance"]["started_at"] += 2 * 86400
        _edit(job / "summary.json", later)
    res = CliRunner().invoke(calibrate_cmd, [str(first), str(second), *QUICK, "--save"])
    assert res.exit_code == 0, res.output
    prov = json.loads(res.stdout)["calibrations"][0]["provenance"]
    first_id = json.loads((first / "run.json").read_text())["run_id"]
    assert prov["run_id"] == f"{first_id} + run-later" and prov["jobs"] == 4
    assert prov["engine_version"] == "0.26.0 + 0.27.0" and prov["date"] == "2026-12-01 + 2026-12-03"
    label = EngineConfig(model="llama-1b", hardware="h200", engine_style="vllm").calibration_label()
    assert label == ("calibrated: vllm-h200-dense-tiny-bf16-tp1-kv-bf16 (vllm 0.26.0 + 0.27.0, NVIDIA H200, "
                     "2026-12-01 + 2026-12-03)")


def test_an_option_the_mode_does_not_read_is_refused_not_dropped(tmp_path: Path) -> None:
    """`sim calibrate records.jsonl --model M --hardware H --out F` fitted, printed and exited 0 without writing
    F (the per-record fit stores nothing); --model on a run directory was dropped the same way."""
    (records,) = (LLAMA / "jobs").glob("llama-1b_1024_256_*_conc4_*/records.jsonl")
    target = tmp_path / "mine.yaml"
    res = CliRunner().invoke(calibrate_cmd, [str(records), "--model", "llama-1b", "--hardware", "h200",
                                             "--out", str(target), "--hold-out", "fixed *"])
    assert isinstance(res.exception, ConfigError), res.output
    assert "--hold-out, --out are for run directories" in str(res.exception) and not target.exists()
    res = CliRunner().invoke(calibrate_cmd, [str(_run(tmp_path)), *QUICK, "--model", "llama-3.1-8b"])
    assert isinstance(res.exception, ConfigError) and "--model is for a records.jsonl" in str(res.exception)
    # with its own options the records mode reaches the fit, which refuses this one-concurrency, one-prompt-length
    # slice as too thin to separate the decode step's terms (before: R^2 -1620 and per_seq_s 2.1 ms, printed as a
    # fit); records that vary both are fitted (test_calibrate.py)
    res = CliRunner().invoke(calibrate_cmd, [str(records), "--model", "llama-1b", "--hardware", "h200", "--json"])
    assert isinstance(res.exception, LlmsweepError) and "cannot separate" in str(res.exception), res.output


def test_a_job_folder_reached_twice_is_fitted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run named relative and absolute (or through a link) was fitted twice: each point counted double and
    the stored provenance claimed 4 jobs for 2."""
    run = _run(tmp_path)
    (tmp_path / "link").symlink_to(run)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(calibrate_cmd, ["run", str(run), str(tmp_path / "link"), *QUICK])
    assert res.exit_code == 0, res.output
    fit = json.loads(res.stdout)["calibrations"][0]
    assert [p["label"] for p in fit["points"]] == ["fixed 1024/256 c1", "fixed 1024/256 c4"]
    assert fit["provenance"]["jobs"] == 2


DISAGG_RECIPE = REPO / "tests" / "data" / "recipes" / "disagg" / "multinode.yaml"


def test_a_disaggregated_point_is_left_out_not_replayed_as_one_server(tmp_path: Path) -> None:
    """A measured prefill/decode job was replayed as the one aggregated server its render gives (DeepSeek-R1 at
    TP8 here) and fitted to the disaggregated measurement, under the aggregated key."""
    from llmsweep.cli.sim import _predicted_jobs

    jobs, *_ = _predicted_jobs((DISAGG_RECIPE,), ())
    disagg = next(j for j in jobs if j.disagg)
    run = _run(tmp_path)
    (donor,) = run.glob("jobs/*_conc4_*")
    folder = run / "jobs" / "disagg-point"
    shutil.copytree(donor, folder)
    doc = disagg.model_dump(mode="json", by_alias=True)
    (folder / "job.json").write_text(json.dumps({**doc, "conc": 4}))
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [c["key"]["model_class"] for c in doc["calibrations"]] == ["dense-tiny"]
    (why,) = doc["skipped"]
    assert why.startswith("disagg-point: ") and "is a disaggregated point" in why


def test_too_few_points_say_which_factors_would_fit(tmp_path: Path) -> None:
    """One point (three metrics) for the five default factors: the refusal's fix told the user to 'pass a run of a
    model the catalog knows', and the skipped line named no --factors that would fit."""
    (one,) = _run(tmp_path).glob("jobs/*_conc4_*")
    res = CliRunner().invoke(calibrate_cmd, [str(one)])
    assert isinstance(res.exception, LlmsweepError) and res.exception.exit_code == 2, res.output
    message = str(res.exception)
    assert "3 measured metrics cannot constrain 5 factors (mem, compute, step_s, per_seq_s, frontend_s)" in message
    assert "or fit fewer factors: --factors mem,step_s)" in message
    assert "a model the catalog knows" not in message and "follow the fix each skipped line names" in message
    # and that suggestion fits
    res = CliRunner().invoke(calibrate_cmd, [str(one), "--factors", "mem,step_s", "--max-iter", "1", "--json"])
    assert res.exit_code == 0, res.output
    assert set(json.loads(res.stdout)["calibrations"][0]["efficiency"]) == {"mem", "step_s"}


def test_an_eval_only_point_or_one_that_measured_nothing_is_left_out_as_such(tmp_path: Path) -> None:
    """An eval-only job folder (its eval passed) was a calibration point with nothing measured: replayed on every pass,
    counted in the stored entry's jobs, its concurrency feeding the load-term defaults; and a point no request
    completed in was too. Each is left out, saying why."""
    run = _run(tmp_path, (1, 4, 16))
    (evals,) = run.glob("jobs/*_conc4_*")
    (empty,) = run.glob("jobs/*_conc16_*")
    _edit(evals / "job.json", lambda j: j.update({"eval-only": True}))

    def nothing(s: dict[str, Any]) -> None:  # what a summary of no completed request reads as (zeros)
        for block in ("ttft", "tpot"):
            s["latency"][block].update(p50=0.0)
        s["throughput"].update(output_tps=0.0)

    _edit(empty / "summary.json", nothing)
    res = CliRunner().invoke(calibrate_cmd, [str(run), *QUICK])
    doc = json.loads(res.stdout) if res.stdout.strip() else {}
    skipped = doc.get("skipped", []) if doc else res.output
    assert any(w.startswith(evals.name) and "is an eval-only point" in w for w in skipped), res.output
    assert any(w.startswith(empty.name) and "measured none of the metrics a fit compares" in w for w in skipped), \
        res.output


@pytest.mark.parametrize("timestamps", [False, True])
def test_a_replay_point_is_replayed_as_it_drove_the_server(tmp_path: Path, timestamps: bool) -> None:
    """A Mooncake replay closed loop at its concurrency (`timestamps: false`) was replayed on the rows' own arrival
    times: 24 rows 30 s apart gave 2 tok/s against the run's ~1,500, and the fit compared the one with the other."""
    from llmsweep import engines
    from llmsweep.execute.virtual import engine_config
    from llmsweep.plan import full_sweep
    from llmsweep.sim.calibrate import OUTPUT, MeasuredPoint, _replays, predict_metrics
    from llmsweep.spec import loads_recipes

    trace = tmp_path / "rows.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 30_000 * i, "input_length": 512, "output_length": 128,
                                         "hash_ids": list(range(8 * i, 8 * i + 8))}) + "\n" for i in range(24)))
    text = (REPO / "tests" / "data" / "recipes" / "run" / "replay-sim.yaml").read_text()
    text = text.replace("mooncake: TRACE", f"mooncake: {trace}\n      timestamps: {str(timestamps).lower()}")
    (job,) = full_sweep(loads_recipes(text, "r.yaml").raise_on_error().recipes)
    point = MeasuredPoint(path=tmp_path, job=job.model_dump(mode="json", by_alias=True),
                          config=engine_config(engines.render(job, simulate=True)), concurrency=4,
                          scenario=job.workload.scenario, measured={}, weights={}, excess_hit_rate=0.0, provenance={})
    (replay,) = _replays([point])
    assert replay.open_loop is timestamps
    tps = predict_metrics(replay, {})[OUTPUT]
    # closed loop: four rows in flight at a time, back to back; open loop: one row every 30 s
    assert (tps < 20) if timestamps else (tps > 200), tps
