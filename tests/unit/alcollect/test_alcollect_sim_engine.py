"""A curve is labelled simulated from what served its cells, never only from `--simulate`: a recipe whose engine is
the simulator's (`serve.engine: {name: sim}`) collected without the option ran the simulator, and its curve said
`engine: sim 0.1.0`, no `simulated: yes`, so `llmsweep al --json` read `simulated: false` and the planner's
`golden-al.simulated-curve` let it pin recipes as a measurement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.alcollect.collect import collect_curve, collection_job, curve_file_name
from llmsweep.alcollect.prompts import BUILTIN, load_prompts
from llmsweep.alcollect.settings import CellResult, CollectSettings
from llmsweep.catalog.golden import load_curve
from llmsweep.execute.local import LocalExecutor
from llmsweep.plan import jobs_from_files

REPO = Path(__file__).resolve().parents[3]
LLAMA = REPO / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"
VLLM_ENGINE = "engine: { name: vllm, version: 0.26.0 }"


@pytest.fixture
def sim_recipe(tmp_path: Path) -> Path:
    """The llama n-gram recipe served by the simulator itself (no --simulate needed to run it)."""
    text = LLAMA.read_text()
    assert VLLM_ENGINE in text
    path = tmp_path / "sim-recipe.yaml"
    path.write_text(text.replace(VLLM_ENGINE, "engine: { name: sim }"))
    return path


@pytest.mark.timeout(120)
def test_a_sim_engine_recipe_collected_without_simulate_writes_a_simulated_curve(
        sim_recipe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from support.cli import run_main

    out = tmp_path / "golden"
    code, stdout, err = run_main(capsys, "al", "collect", sim_recipe, "--prompts", "builtin", "--num-prompts", "1",
                                 "--output-len", "8", "-k", "1", "--thinking", "off", "--out", out, "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["simulated"] is True and doc["cells"][0]["simulated"] is True, doc
    assert "simulated servers" in err, err
    curve = load_curve(Path(doc["curve_file"]))
    assert curve.simulated  # what `llmsweep al` and golden-al.simulated-curve read
    text = Path(doc["curve_file"]).read_text()
    assert "# simulated: yes" in text and "# engine: llmsweep simulator" in text, text


def test_a_cell_the_simulator_served_makes_the_curve_simulated_whatever_the_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The label is earned from what served each cell (its launch, its /version): a job planned for vLLM without
    --simulate whose server turned out to be the simulator writes a simulated curve."""
    from llmsweep.alcollect import collect as collect_module

    job = collection_job(jobs_from_files([LLAMA]), simulate=False)
    assert job.engine == "vllm"

    def served_by_sim(_job: object, mode: str, k: int, *_: object) -> CellResult:
        return CellResult(thinking=mode, k=k, status="measured", acceptance_length=1.5, accepted_tokens=5,
                          drafts=10, requests_ok=1, output_tokens=8, engine_version="0.1.0", simulated=True,
                          directory=str(tmp_path / "runs" / f"{mode}-k{k}"))

    monkeypatch.setattr(collect_module, "_run_cell", served_by_sim)
    # (the host's check for the vLLM launch, which needs a GPU this machine may not have: the cells are stood in for)
    monkeypatch.setattr(collect_module, "refuse_host", lambda *_a, **_k: None)
    settings = CollectSettings.model_validate({"ks": [1], "thinking": ["thinking_off"], "output_len": 8})
    out = tmp_path / "golden" / curve_file_name(job)
    result = collect_curve(job, settings, load_prompts(BUILTIN, "coding", 1), tmp_path / "runs", out,
                           launcher=LocalExecutor({}).launcher, simulate=False)
    assert result.simulated and "simulator" in result.engine, result.engine
    assert load_curve(out).simulated


def test_the_engine_line_says_no_server_started_only_where_none_was_launched() -> None:
    """The title said `(image tag; the server reported no version)` where no cell's server had started (a host with
    no GPU); a server launched that never became ready did start, and reported no version."""
    from llmsweep.alcollect.collect import _engine_text

    job = collection_job(jobs_from_files([LLAMA]), simulate=False)
    cell = CellResult(thinking="thinking_off", k=1, status="failed", directory=None, reason="x")
    assert _engine_text(job, [cell], False).endswith("; no server started)")
    started = cell.model_copy(update={"launched": True})
    assert _engine_text(job, [cell, started], False).endswith("; the server reported no version)")
