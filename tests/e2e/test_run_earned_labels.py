"""`llmsweep run` labels a result only with what ran: the engine version the launch's interpreter had (not one the
recipe declared), `ignore_eos` as the client sent it (transformers serve rejects the field, so it is never sent), and
a workload tokenizer that cannot be loaded refuses its jobs before any server starts. The local executor launches
the rendered `transformers serve` command, answered by a stand-in `transformers` module (tests/support)."""

from __future__ import annotations

from pathlib import Path

from support.fake_transformers import stand_in_env
from support.real_engine import tiny_transformers_recipe
from test_run_support import job_dirs, read_json, run_here

from llmsweep.sim_warnings import no_gpu_figures


def _recipe(tmp_path: Path, model_dir: Path, *, tokenizer: str | None = None, version: str = "5.17.0") -> Path:
    text = tiny_transformers_recipe(model_dir, key="tf", concs="[1]", isl=32, osl=8, warmups=0, prompts_per_conc=2,
                                    health_timeout=60)
    text = text.replace("version: 5.17.0 }", f"version: {version} }}")
    if version != "5.17.0":  # an image whose tag names no version: the declared one stands until the server runs
        # (a tag naming 5.17.0 beside a declared 4.50.0 is refused at validate: engine.version-mismatch)
        text = text.replace("transformers-pytorch-cpu:5.17.0", "transformers-pytorch-cpu:latest")
    if tokenizer is not None:
        text = text.replace(f"    tokenizer: {model_dir}\n", f"    tokenizer: {tokenizer}\n")
    path = tmp_path / "tf.yaml"
    path.write_text(text)
    return path


def test_a_declared_engine_version_other_than_the_one_that_ran_is_said_and_not_the_label(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    env = stand_in_env(tmp_path, version="5.17.0", LLMSWEEP_STORE=str(tmp_path / "store.sqlite"))
    res = run_here([_recipe(tmp_path, tiny_model_dir, version="4.50.0"), "--executor-option", "allow_image=true",
                    "--out", tmp_path / "run", "--no-report", "--request-timeout", "10"], env)
    assert res.returncode == 0, res.stderr[-4000:]
    ((_, jdir),) = job_dirs(tmp_path / "run").items()
    said = ("engine version: the recipe declares transformers 4.50.0, but the server ran transformers 5.17.0 (the "
            "python that ran it has it installed); the result is labelled 5.17.0")
    assert f"warning: {said}" in res.stderr
    assert said in "".join(read_json(jdir / "outcome.json")["warnings"])
    command = (jdir / "server_command.txt").read_text()
    assert command.startswith("# engine: transformers 5.17.0\n") and f"# note: {said}" in command
    prov = read_json(jdir / "summary.json")["provenance"]
    launch = prov["launch"]
    assert launch["engine_version"] == "5.17.0" and launch["engine_version_declared"] == "4.50.0"
    assert launch["engine_version_installed"] == "5.17.0"


def test_a_version_nothing_read_back_is_said_to_be_the_declared_one_unconfirmed(tmp_path: Path,
                                                                                 tiny_model_dir: Path) -> None:
    """The server reports no version and its interpreter's cannot be read: the result carries the declared one, and
    the run says that nothing confirmed it (it ran unsaid)."""
    env = stand_in_env(tmp_path, version=None, LLMSWEEP_STORE=str(tmp_path / "store.sqlite"))
    res = run_here([_recipe(tmp_path, tiny_model_dir), "--executor-option", "allow_image=true",
                    "--out", tmp_path / "run", "--no-report", "--request-timeout", "10"], env)
    assert res.returncode == 0, res.stderr[-4000:]
    assert ("warning: the transformers version that ran was not read (the server reports none, and the python that "
            "ran it could not be asked): the result carries the declared 5.17.0, unconfirmed") in res.stderr
    ((_, jdir),) = job_dirs(tmp_path / "run").items()
    launch = read_json(jdir / "summary.json")["provenance"]["launch"]
    assert launch["engine_version_reported"] is None and launch["engine_version_installed"] is None


def test_the_declared_version_that_ran_is_the_label_and_ignore_eos_what_was_sent(tmp_path: Path,
                                                                                   tiny_model_dir: Path) -> None:
    env = stand_in_env(tmp_path, version="5.17.0", LLMSWEEP_STORE=str(tmp_path / "store.sqlite"))
    res = run_here([_recipe(tmp_path, tiny_model_dir), "--executor-option", "allow_image=true",
                    "--out", tmp_path / "run", "--no-report", "--request-timeout", "10"], env)
    assert res.returncode == 0, res.stderr[-4000:]
    ((_, jdir),) = job_dirs(tmp_path / "run").items()
    # no engine-version warning (its only warning: the stand-in serves on no GPU, `sim_warnings.no_gpu_figures`)
    assert "engine version:" not in res.stderr
    assert read_json(jdir / "outcome.json")["warnings"] == [no_gpu_figures(1)]
    prov = read_json(jdir / "summary.json")["provenance"]
    assert prov["launch"]["engine_version"] == "5.17.0" and "engine_version_declared" not in prov["launch"]
    # transformers serve answers 422 to `ignore_eos`: the client never sent it, and provenance says so
    assert prov["workload"]["ignore_eos"] is False


def test_a_server_on_no_gpu_records_none_and_prices_no_gpu_hour(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The CPU rehearsal (transformers serve `--device cpu`, its launch uses 0 GPUs) of a job planned for one H200:
    its hardware says 0 GPUs, not the job's 1; its per-GPU figures are the endpoint's (`gpus_known: false`); and it
    has no cost block — it was priced as H200 GPU-hours ($/Mtok at the catalog's $/GPU-hour, tok/s per all-in MW),
    figures of a GPU that served nothing. The job's SKU stays what the plan targets."""
    env = stand_in_env(tmp_path, version="5.17.0", LLMSWEEP_STORE=str(tmp_path / "store.sqlite"))
    res = run_here([_recipe(tmp_path, tiny_model_dir), "--executor-option", "allow_image=true",
                    "--out", tmp_path / "run", "--no-report", "--request-timeout", "10"], env)
    assert res.returncode == 0, res.stderr[-4000:]
    ((_, jdir),) = job_dirs(tmp_path / "run").items()
    summary = read_json(jdir / "summary.json")
    prov = summary["provenance"]
    assert prov["hardware"]["gpus"] == 0 and prov["hardware"]["sku"] == "h200", prov["hardware"]
    assert prov["gpus_known"] is False and prov["gpus_from"] == no_gpu_figures(1)
    tput = summary["throughput"]
    assert tput["total_tps"] > 0 and tput["per_gpu"]["total_tps"] == tput["total_tps"]  # the endpoint's
    assert summary["power"]["cost"] is None, summary["power"]["cost"]


def test_a_tokenizer_that_cannot_be_loaded_refuses_its_jobs_before_any_server_starts(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    env = stand_in_env(tmp_path, LLMSWEEP_STORE=str(tmp_path / "store.sqlite"))
    empty = tmp_path / "no-tokenizer"
    empty.mkdir()
    for bad, why in ((tmp_path / "missing", "no such file or directory"), (empty, "no tokenizer.json in")):
        recipe = _recipe(tmp_path, tiny_model_dir, tokenizer=str(bad))
        out = tmp_path / f"run-{bad.name}"
        res = run_here([recipe, "--executor-option", "allow_image=true", "--out", out, "--no-report"], env)
        assert res.returncode != 0
        assert "launching" not in res.stderr and "server ready" not in res.stderr, res.stderr[-3000:]
        assert f"{recipe}: tf.workload.tokenizer: " in res.stderr and why in res.stderr
        (outcome,) = read_json(out / "run.json")["outcomes"]
        assert outcome["status"] == "refused"
        assert outcome["reasons"][0].startswith(f"{recipe}: tf.workload.tokenizer: ") and why in outcome["reasons"][0]


def test_an_engine_that_ignores_a_gated_knob_of_the_launch_fails_its_jobs(tmp_path: Path,
                                                                          tiny_model_dir: Path) -> None:
    """Policy judged the gate at the declared 5.17.0; the interpreter that ran the server has 4.50.0, which (in this
    user catalog) ignores `--cb-num-blocks`: the server is stopped and the job fails, never measured under the flag."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "engines.yaml").write_text(
        "gates:\n  transformers.cb-num-blocks:\n    engine: transformers\n    kind: arg\n    name: cb-num-blocks\n"
        "    min_version: 5.0.0\n    below: ignored\n    estimate: false\n    evidence: a test's catalog\n"
        "    message: transformers serve reads --cb-num-blocks only from 5.0.0\n")
    env = stand_in_env(tmp_path, version="4.50.0", LLMSWEEP_STORE=str(tmp_path / "store.sqlite"),
                       LLMSWEEP_CATALOG_DIR=str(catalog))
    res = run_here([_recipe(tmp_path, tiny_model_dir), "--executor-option", "allow_image=true",
                    "--out", tmp_path / "run", "--no-report", "--request-timeout", "10"], env)
    assert res.returncode == 1, res.stderr[-4000:]
    assert "feature gates were judged at the declared 5.17.0: cb-num-blocks; at 4.50.0: " in res.stderr
    ((_, jdir),) = job_dirs(tmp_path / "run").items()
    outcome = read_json(jdir / "outcome.json")
    assert outcome["status"] == "failed" and not (jdir / "summary.json").exists()
    assert "transformers 4.50.0 ran (the python that ran it has it installed), not the declared 5.17.0" in \
        outcome["reasons"][0]
