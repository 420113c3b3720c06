"""`run --config-keys` says what it found about the recipes it runs, not about every recipe of the file: on
InferenceX's master file (56 keys, no `serve` blocks) one key printed 40 warnings about the others, each saying the
recipe "cannot be run by llmsweep" while the selected one, just as bare, ran on the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.cli.main import main
from llmsweep.plan import jobs_from_files

TWO = """\
{key}:
  image: lmsysorg/sglang:v0.5.16-cu130
  model: deepseek-ai/DeepSeek-R1-0528
  model-prefix: dsr1
  runner: h200
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 256
      search-space:
      - {{ tp: 8, ep: 1, conc-list: [4] }}
"""


def test_findings_about_unselected_recipes_are_not_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "master.yaml"
    recipe.write_text(TWO.format(key="picked") + TWO.format(key="other"))
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    with pytest.raises(SystemExit) as done:
        main(["run", str(recipe), "--simulate", "--config-keys", "picked", "--out", str(tmp_path / "run"),
              "--no-report", "--json"])
    captured = capsys.readouterr()
    assert done.value.code == 0, captured.err
    assert [r["verdict"] for r in json.loads(captured.out)["jobs"]] == ["valid"]
    said = [line for line in captured.err.splitlines() if "spec.not-runnable" in line]
    assert len(said) == 1 and "picked" in said[0] and "other" not in captured.err, said
    assert "run --simulate" in said[0]  # a bare recipe runs on the simulator; no real engine can launch it
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert not any("other" in json.dumps(f) for f in recorded.get("findings", []))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, object]], str]:
    with pytest.raises(SystemExit) as done:
        main(["run", *args, "--no-report", "--json"])
    captured = capsys.readouterr()
    return int(done.value.code or 0), json.loads(captured.out)["jobs"], captured.err


def test_an_error_about_what_planned_no_job_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """An input that plans no job (here a directory with no recipe; a recipe whose offload arm's runner has no
    hardware metadata is dropped the same way) refuses no job, so its error used to be one stderr line in a run that
    exited 0 with those recipes simply absent. The run now fails and its summary says what was not planned: exit 1,
    as a run that partly ran (2, bad input, is kept for a run where nothing ran)."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(TWO.format(key="picked"))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, rows, err = _run(capsys, str(tmp_path / "empty"), str(recipe), "--simulate", "--out", str(tmp_path / "run"))
    assert [r["verdict"] for r in rows] == ["valid"]  # what planned still ran
    assert code == 1 and "not planned:" in err and "[plan.no-jobs]" in err, err


def test_a_recipe_error_never_lands_on_a_recipe_whose_key_prefixes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Keys hold dots (`qwen3`, `qwen3.5-x`): a finding about `qwen3.5-x` is that recipe's, even when a run plans
    only `qwen3`'s job (`--job`); it used to refuse the clean `qwen3` job for the other recipe's unknown model."""
    served = TWO + "  serve:\n    args: {{}}\n"  # a recipe a real engine would serve: an unknown model is an error
    recipe = tmp_path / "r.yaml"
    recipe.write_text(served.format(key="qwen3") + served.format(key="qwen3.5-x").replace(
        "deepseek-ai/DeepSeek-R1-0528", "example/NoSuchModel-7B"))
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    (clean,) = [j.id for j in jobs_from_files([recipe]) if j.recipe_key == "qwen3"]
    code, rows, err = _run(capsys, str(recipe), "--simulate", "--job", clean, "--out", str(tmp_path / "run"))
    assert [(r["job"], r["verdict"]) for r in rows] == [(clean, "valid")], err
    assert code == 0


def test_only_job_takes_what_render_job_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`run --job` used to need the full id where `render --job` takes a unique prefix or exp-name."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(TWO.format(key="picked") + TWO.format(key="other"))
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    picked, other = jobs_from_files([recipe])
    assert picked.exp_name == other.exp_name  # the two recipes' jobs differ only in their ids' last part
    with pytest.raises(SystemExit) as done:
        main(["run", str(recipe), "--simulate", "--job", picked.exp_name, "--out", str(tmp_path / "no")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "matches 2 jobs" in err and picked.id in err and other.id in err, err
    assert not (tmp_path / "no").exists()
    code, rows, err = _run(capsys, str(recipe), "--simulate", "--job", picked.id[:-6], "--out",
                           str(tmp_path / "run"))
    assert code == 0 and [r["job"] for r in rows] == [picked.id], err


def test_only_job_says_findings_about_the_jobs_it_runs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The quickstart's golden-AL provenance warning is about all nine jobs; under `--job` it named all nine."""
    quickstart = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    jobs = jobs_from_files([quickstart])
    one = jobs[0]
    code, rows, err = _run(capsys, str(quickstart), "--job", one.id, "--out",
                           str(tmp_path / "run"))
    assert code == 0 and [r["job"] for r in rows] == [one.id], err
    said = [line for line in err.splitlines() if line.strip().startswith("job:")]
    assert said and all(line.strip() == f"job: {one.id}" for line in said), said
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["findings"]
    assert recorded and all(f.get("jobs") in (None, [], [one.id]) for f in recorded), recorded
