"""`al collect --simulate` refuses a collection the simulator cannot model before any server starts (exit 2), by the
check `run --simulate` and `predict` refuse the job with; following the refusal's fix lets it through."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmsweep.alcollect.collect import collection_job
from llmsweep.alcollect.settings import CollectSettings
from llmsweep.cli.main import main
from llmsweep.execute.virtual import NotModelled
from llmsweep.plan import jobs_from_files

REPO = Path(__file__).resolve().parents[3]
RECIPE = REPO / "examples" / "gpu" / "smollm2-135m-bf16-h200-vllm-ngram.yaml"  # the README's al collect example
FLEET = REPO / "examples" / "gpu" / "fleet.yaml"
REASON = "no model figures for 'HuggingFaceTB/SmolLM2-135M-Instruct'"


@pytest.fixture
def no_user_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMSWEEP_CATALOG_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_a_job_the_simulator_cannot_model_is_refused_before_any_server_starts(
        no_user_catalog: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, run_dir = tmp_path / "out", tmp_path / "runs"
    with pytest.raises(SystemExit) as done:
        main(["al", "collect", str(RECIPE), "--runner-config", str(FLEET), "--simulate", "-k", "1", "3",
              "--thinking", "off", "--prompts", "builtin", "--out", str(out), "--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert done.value.code == 2, err
    assert "the simulator cannot model this job" in err and "no server was started" in err, err
    assert err.count(REASON) == 1 and err.count("fix:") == 1, err  # the reason and its fix, said once
    assert "launching" not in err and not run_dir.exists() and not out.exists()  # no cell folder, no server log


def test_a_catalog_entry_as_the_fix_says_lets_the_collection_through(no_user_catalog: None, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.alcollect.collect import refuse_unmodelled

    job = collection_job(jobs_from_files([RECIPE], runner_config=FLEET), simulate=True)
    settings = CollectSettings(ks=[1, 3], thinking=["thinking_off"])
    with pytest.raises(NotModelled, match=REASON) as refused:
        refuse_unmodelled(job, settings)
    assert "models.yaml in $LLMSWEEP_CATALOG_DIR" in str(refused.value)
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    entry = {"name": "SmolLM2-135M-Instruct", "family": "smollm2", "prefix": "smollm2",
             "hf_ids": ["HuggingFaceTB/SmolLM2-135M-Instruct"], "total_params_b": 0.135, "active_params_b": 0.135,
             "layers": 30, "hidden_size": 576, "attention": {"kind": "gqa", "heads": 9, "kv_heads": 3, "head_dim": 64},
             "native_context": 8192, "source": "config.json of HuggingFaceTB/SmolLM2-135M-Instruct"}
    (catalog / "models.yaml").write_text(yaml.safe_dump({"models": {"smollm2-135m-instruct": entry}}))
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(catalog))
    refuse_unmodelled(job, settings)  # modelled now: the collection goes on to its servers


def test_a_k_beyond_the_simulators_range_names_the_k_flag_not_the_recipe(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`-k 40` under --simulate was refused by the simulated launch's own flag check, whose fix sent the user to the
    recipe's serve.args, where no K is written: the K is the collection's, and so is the fix."""
    recipe = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"
    with pytest.raises(SystemExit) as done:
        main(["al", "collect", str(recipe), "--simulate", "-k", "2", "40", "--prompts", "builtin",
              "--out", str(tmp_path / "out"), "--run-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert done.value.code == 2, err
    assert "-k 40: the simulator models 1 to 16 draft tokens per step; no server was started" in err, err
    assert "fix: collect K <= 16 with --simulate" in err and "serve.args" not in err, err
    assert not (tmp_path / "runs").exists()
