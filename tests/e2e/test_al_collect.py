"""`llmsweep al collect` end to end on the simulator serving with speculative decoding, read back by `llmsweep al`
and by the planner.

The simulator stands in for vLLM with the n-gram drafter: a fresh `llmsweep sim serve` per draft length K, whose
acceptance model realises the n-gram acceptance (AL rising with K); the collector reads it from the vLLM counters of
`/metrics` like on a real engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.procs import ctrl_z, wait_for

from llmsweep.alcollect.prompts import sent_digest
from llmsweep.catalog.golden import CURVES_ENV_VAR, load_curve
from llmsweep.catalog.sources import clear_caches

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"
FLEET = ROOT / "examples" / "gpu" / "fleet.yaml"


def _cli(*args: str | Path, env: dict[str, str] | None = None,
         timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *(str(a) for a in args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def _collect(out: Path, *extra: str | Path, recipe: Path = RECIPE) -> subprocess.CompletedProcess[str]:
    return _cli("al", "collect", recipe, "--simulate", "--prompts", "builtin", "--num-prompts", "3",
                "--output-len", "48", "--out", out, *extra)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("golden")
    proc = _collect(out, "-k", "1", "2", "3", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, json.loads(proc.stdout)


@pytest.mark.timeout(240)
def test_collect_writes_a_curve_rising_with_k_from_a_fresh_server_per_cell(
        collected: tuple[Path, dict[str, Any]]) -> None:
    _, result = collected
    cells = result["cells"]
    assert [(c["thinking"], c["k"], c["status"]) for c in cells] == [("thinking_off", k, "measured") for k in (1, 2, 3)]
    als = [c["acceptance_length"] for c in cells]
    assert als == sorted(als) and als[0] < als[-1] and als[0] > 1.0 and als[-1] <= 4.0
    for c in cells:  # AL = 1 + Δaccepted / Δdrafts, from the two scrapes kept beside the cell
        assert c["acceptance_length"] == pytest.approx(1 + c["accepted_tokens"] / c["drafts"])
        assert c["requests_ok"] == 3 and c["drafts"] > 0
        cell_dir = Path(c["directory"])
        command = (cell_dir / "server_command.txt").read_text()
        assert f"--spec-method ngram --spec-k {c['k']}" in command  # one launch per K, the rendered argv
        assert (cell_dir / "metrics_before.txt").is_file() and (cell_dir / "metrics_after.txt").is_file()
        assert not (cell_dir / "server.pid").exists()  # every server was stopped
    curve = load_curve(Path(result["curve_file"]))
    assert curve.id == "llama-1b_ngram" and curve.model_prefix == "llama-1b" and curve.method == "ngram"
    assert curve.values == {"thinking_off": {c["k"]: round(c["acceptance_length"], 2) for c in cells}}
    assert curve.simulated and "simulator" in (curve.engine or "") and curve.hardware == "simulated h200"
    assert curve.dataset is not None and curve.dataset.startswith("coding (llmsweep builtin coding set")
    assert curve.output_len == 48 and curve.sampling_common == {"temperature": 1.0, "top_p": 0.95, "top_k": 40}
    assert curve.precision_measured == "bf16" and curve.precision_basis == "header"


@pytest.mark.timeout(120)
def test_al_reads_the_collected_curve_back(collected: tuple[Path, dict[str, Any]]) -> None:
    out, result = collected
    want = round(result["cells"][1]["acceptance_length"], 2)
    proc = _cli("al", "llama-1b", "-m", "ngram", "-k", "2", "--thinking", "off", "--curves", out, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["value"] == want and doc["curve"] == "llama-1b_ngram" and doc["simulated"] is True
    # The same through the environment, as the planner reads it; the table says where the curve lives.
    proc = _cli("al", "llama-1b", "-m", "ngram", "-k", "2", "--thinking", "off", env={CURVES_ENV_VAR: str(out)})
    assert proc.returncode == 0 and proc.stdout.startswith(f"{want:.2f}") and "user curve" in proc.stdout
    proc = _cli("al", "llama-1b", "-m", "ngram", "-k", "4", "--thinking", "off", "--curves", out)
    assert proc.returncode == 2 and "llama-1b_ngram (llama-1b/ngram: off, K 1-3)" in proc.stderr


@pytest.mark.timeout(120)
def test_the_planner_pins_the_collected_curve(collected: tuple[Path, dict[str, Any]], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from llmsweep.plan import jobs_from_files
    from llmsweep.policy import validate_files

    out, result = collected
    doc = yaml.safe_load(RECIPE.read_text())
    (recipe,) = doc.values()
    recipe["runner"] = "cluster:h200-lent"
    recipe["scenarios"] = {"agentic-coding": [{"search-space": [
        {"tp": 1, "spec-decoding": "mtp", "kv-offloading": "none", "conc-list": [1]}]}]}
    recipe["serve"]["spec-decoding"]["num-steps"] = 3
    path = tmp_path / "agentic.yaml"
    path.write_text(yaml.safe_dump({"llama-1b-ngram-agentic": recipe}, sort_keys=False))
    monkeypatch.setenv(CURVES_ENV_VAR, str(out))
    clear_caches()
    try:
        (job,) = jobs_from_files([path], runner_config=FLEET)
        real, simulated = (validate_files([path], runner_config=FLEET, simulate=sim) for sim in (False, True))
    finally:
        monkeypatch.delenv(CURVES_ENV_VAR)
        clear_caches()
    assert job.acceptance is not None and job.acceptance.source == "golden"
    assert job.acceptance.value == round(result["cells"][2]["acceptance_length"], 2)
    assert "llama-1b_ngram" in (job.acceptance.provenance or "")
    # Collected with --simulate, the curve is the simulator's acceptance model: it pins a simulated run (a warning),
    # and refuses the recipe's real vLLM engine rather than pin it to a value nobody measured.
    assert job.acceptance.simulated and "collected on llmsweep's simulator" in (job.acceptance.provenance or "")
    assert [f.is_error for f in real.findings if f.rule == "golden-al.simulated-curve"] == [True]
    assert [f.is_error for f in simulated.findings if f.rule == "golden-al.simulated-curve"] == [False]


def _broken_recipe(tmp_path: Path) -> Path:
    """RECIPE whose server cannot start: its Python environment names no Python home, so it exits before ready."""
    doc = yaml.safe_load(RECIPE.read_text())
    (recipe,) = doc.values()
    recipe["serve"]["env"] = {"PYTHONHOME": str(tmp_path / "no-python-here")}
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump({"broken-ngram": recipe}, sort_keys=False))
    return path


@pytest.mark.timeout(120)
def test_a_cell_whose_server_cannot_start_is_named_and_fails_the_collection(tmp_path: Path) -> None:
    # a server whose Python cannot start exits before it is ready; a model the simulator has no figures for is
    # refused before any server starts (tests/unit/alcollect)
    proc = _collect(tmp_path / "golden", "-k", "2", recipe=_broken_recipe(tmp_path))
    assert proc.returncode == 1
    assert "thinking_off K=2: not measured" in proc.stderr and "exited" in proc.stderr
    assert not (tmp_path / "golden" / "llama-1b_ngram.yaml").exists()  # no curve from nothing measured
    assert "no curve was written: no cell was measured (thinking_off K=2: sim server exited" in proc.stderr


@pytest.mark.timeout(120)
def test_a_merge_that_measured_no_cell_says_nothing_was_merged_and_why_and_fails(
        collected: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    shutil.copytree(collected[0], tmp_path / "golden")
    curve_file = tmp_path / "golden" / "llama-1b_ngram.yaml"
    before = curve_file.read_bytes()
    for json_flag in ((), ("--json",)):
        proc = _cli("al", "collect", _broken_recipe(tmp_path), "--simulate", "--prompts", "builtin", "--num-prompts",
                    "3", "--output-len", "48", "-k", "4", "--merge-into", curve_file, *json_flag)
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert (f"nothing was merged into {curve_file}: no cell was measured (thinking_off K=4: sim server exited "
                "with status 1 while starting") in proc.stderr and "the curve is as it was" in proc.stderr
        assert "merged the cells into" not in proc.stdout
        assert curve_file.read_bytes() == before
        if json_flag:
            doc = json.loads(proc.stdout)
            assert doc["merged_into"] is None and doc["curve_file"] is None


@pytest.mark.timeout(120)
def test_a_prompts_file_with_fewer_rows_than_num_prompts_is_said_and_the_curve_states_what_was_sent(
        tmp_path: Path) -> None:
    """A small prompts file is legitimate: the collection sends what it holds, but says so on stderr (the file, the
    rows it has, the rows asked for), and the curve's dataset line states the count sent, not the count asked."""
    rows = (ROOT / "src" / "llmsweep" / "alcollect" / "data" / "coding_prompts.jsonl").read_text().splitlines()[:2]
    prompts = tmp_path / "two.jsonl"
    prompts.write_text("\n".join(rows) + "\n")
    proc = _cli("al", "collect", RECIPE, "--simulate", "--prompts", prompts, "--num-prompts", "5", "--output-len", "16",
                "-k", "1", "--out", tmp_path / "golden", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (f"warning: {prompts} has 2 `coding` rows, fewer than --num-prompts 5 asks for: collecting with 2 (the "
            "curve's dataset line states 2 prompts)") in proc.stderr
    result = json.loads(proc.stdout)
    assert [c["requests_ok"] for c in result["cells"]] == [2]  # what was sent
    curve = load_curve(Path(result["curve_file"]))
    digest = sent_digest([json.loads(row)["turns"][0] for row in rows])
    assert curve.dataset == f"coding ({prompts}, 2 prompts, sha256 {digest})" == result["dataset"]
    # a file holding as many rows as asked for (or more) says nothing
    proc = _cli("al", "collect", RECIPE, "--simulate", "--prompts", prompts, "--num-prompts", "2", "--output-len", "16",
                "-k", "1", "--out", tmp_path / "golden", "--force")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning" not in proc.stderr and "fewer than --num-prompts" not in proc.stderr


@pytest.mark.timeout(60)
def test_a_recipe_without_speculative_decoding_is_refused_with_the_fix(tmp_path: Path) -> None:
    doc = yaml.safe_load(RECIPE.read_text())
    (recipe,) = doc.values()
    del recipe["serve"]["spec-decoding"]
    recipe["scenarios"]["fixed-seq-len"][0]["search-space"][0]["spec-decoding"] = "none"
    path = tmp_path / "plain.yaml"
    path.write_text(yaml.safe_dump({"plain": recipe}, sort_keys=False))
    proc = _collect(tmp_path / "golden", recipe=path)
    assert proc.returncode == 2
    assert "no runnable single-server job with speculative decoding" in proc.stderr and "fix:" in proc.stderr


@pytest.mark.timeout(60)
def test_an_existing_curve_is_not_overwritten_without_force(collected: tuple[Path, dict[str, Any]]) -> None:
    out, _ = collected
    proc = _collect(out, "-k", "1")
    assert proc.returncode == 2 and "--force" in proc.stderr


@pytest.mark.timeout(120)
def test_thinking_on_cells_send_and_record_their_chat_template_kwargs(tmp_path: Path) -> None:
    proc = _collect(tmp_path / "golden", "-k", "2", "--thinking", "on", "--json",
                    "--chat-template-kwargs", 'on={"thinking_mode": "enabled"}', "--temperature", "0.6",
                    "--top-k", "20", "--presence-penalty", "1.5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    curve = load_curve(Path(result["curve_file"]))
    assert list(curve.values) == ["thinking_on"] and list(curve.values["thinking_on"]) == [2]
    assert curve.sampling["thinking_on"].chat_template_kwargs == {"thinking_mode": "enabled"}
    assert curve.sampling_common == {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "presence_penalty": 1.5}
    run = json.loads((Path(result["cells"][0]["directory"]) / "client" / "run.json").read_text())
    sent = run["provenance"]["workload"]["extra_body"]
    assert sent["chat_template_kwargs"] == {"thinking_mode": "enabled"}
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["presence_penalty"]) == (0.6, 0.95, 20, 1.5)


# --------------------------------------------------------------------------------- completing a curve: --merge-into


@pytest.fixture(scope="module")
def merged(collected: tuple[Path, dict[str, Any]],
           tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """K = 1-3 collected (a copy of `collected`'s folder: its curve and evidence), then K = 4 collected into the same
    curve (the H200 case: a call's limit cut the first). The first collection is `collected`'s own rather than one
    more of K = 1, 2: two servers and a CLI start fewer, and a merge reads only the curve file and its folder."""
    out = tmp_path_factory.mktemp("golden-merge") / "golden"
    shutil.copytree(collected[0], out)
    curve = out / "llama-1b_ngram.yaml"
    second = _cli("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "--num-prompts", "3",
                  "--output-len", "48", "-k", "4", "--merge-into", curve, "--json")
    assert second.returncode == 0, second.stderr[-3000:]
    return curve, collected[1], json.loads(second.stdout)


@pytest.mark.timeout(120)
def test_merge_into_with_a_prompts_file_edited_in_place_is_refused_before_a_server_starts(tmp_path: Path) -> None:
    """The same path and the same count of prompts, other prompts: the curve's cells would be two prompt sets under
    one dataset line. The line states the prompts' digest, and a merge compares it before anything is served."""
    rows = (ROOT / "src" / "llmsweep" / "alcollect" / "data" / "coding_prompts.jsonl").read_text().splitlines()
    prompts = tmp_path / "mine.jsonl"
    prompts.write_text("\n".join(rows[:2]) + "\n")
    common = ("--simulate", "--prompts", prompts, "--num-prompts", "2", "--output-len", "16")
    first = _cli("al", "collect", RECIPE, *common, "-k", "1", "--out", tmp_path / "golden", "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    curve = Path(json.loads(first.stdout)["curve_file"])
    before = curve.read_text()
    prompts.write_text("\n".join(rows[2:4]) + "\n")  # edited in place: two other coding prompts
    proc = _cli("al", "collect", RECIPE, *common, "-k", "2", "--merge-into", curve)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "was collected otherwise" in proc.stderr and "dataset: " in proc.stderr
    assert sent_digest([json.loads(r)["turns"][0] for r in rows[2:4]]) in proc.stderr
    assert curve.read_text() == before and not list(curve.parent.glob("*.runs-*"))
    prompts.write_text("\n".join(rows[:2]) + "\n")  # put back: the same prompts merge
    proc = _cli("al", "collect", RECIPE, *common, "-k", "2", "--merge-into", curve)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(load_curve(curve).values["thinking_off"]) == {1, 2}


@pytest.mark.timeout(120)
def test_merge_into_completes_the_curve_and_al_reads_the_new_cell_back(
        merged: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    curve_file, first, second = merged
    assert second["merged_into"] == second["curve_file"] == str(curve_file) and second["replaced"] == []
    curve = load_curve(curve_file)
    k4 = round(second["cells"][0]["acceptance_length"], 2)
    assert curve.values == {"thinking_off": {**{c["k"]: round(c["acceptance_length"], 2) for c in first["cells"]},
                                             4: k4}}
    assert curve.source is not None
    assert curve.source.startswith("llmsweep al collect, 2 collections: thinking_off K=1 2 3 on ")
    evidence = [Path(c["directory"]).parent for c in (*first["cells"], *second["cells"])]
    assert evidence[0] == evidence[1] == evidence[2] != evidence[3]  # the second collection's evidence of its own
    # ... beside the curve it completed and the first one's (copied there), not in it
    assert evidence[3].parent == curve_file.parent and evidence[3].name != evidence[0].name
    assert (curve_file.parent / evidence[0].name / "thinking_off-k1" / "cell.json").is_file()
    assert (evidence[0] / "thinking_off-k1" / "cell.json").is_file() and (evidence[3] / "thinking_off-k4").is_dir()
    assert str(evidence[0]) in curve.source and str(evidence[3]) in curve.source
    proc = _cli("al", "llama-1b", "-m", "ngram", "-k", "4", "--thinking", "off", "--curves", curve_file.parent,
                "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["value"] == k4


@pytest.mark.timeout(120)
def test_a_collection_in_another_precision_is_refused_before_any_server_starts(
        merged: tuple[Path, dict[str, Any], dict[str, Any]], tmp_path: Path) -> None:
    curve_file, _, _ = merged
    before, runs = curve_file.read_text(), set(curve_file.parent.iterdir())
    # fp8 on this bf16 job: a precision it does not serve, refused as such (it would label bf16 cells fp8)
    proc = _cli("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "--num-prompts", "3", "--output-len",
                "48", "-k", "5", "--merge-into", curve_file, "--precision", "fp8")
    assert proc.returncode == 2
    assert "--precision fp8 is not what the job serves: bf16 (recipe; simulated engine, no weights)" in \
        proc.stderr and "fix:" in proc.stderr and "launching" not in proc.stderr
    assert curve_file.read_text() == before and set(curve_file.parent.iterdir()) == runs
    # the same precision written another way (case, where it was read) is one precision: the cells join the curve
    shutil.copytree(curve_file.parent, tmp_path / "golden")
    copy = tmp_path / "golden" / curve_file.name
    proc = _cli("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "--num-prompts", "3", "--output-len",
                "48", "-k", "5", "--merge-into", copy, "--precision", "BF16 (by hand)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(load_curve(copy).values["thinking_off"]) == {1, 2, 3, 4, 5}
    # a curve that states another precision (here fp8, read from a model directory) is not one curve with these cells
    fp8 = copy.read_text().replace("# precision: BF16 (by hand)", "# precision: fp8 (config.json of /models/l-fp8)")
    assert fp8 != copy.read_text()
    copy.write_text(fp8)
    runs = set(copy.parent.iterdir())
    proc = _cli("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "--num-prompts", "3", "--output-len",
                "48", "-k", "6", "--merge-into", copy)
    assert proc.returncode == 2
    assert "precision: 'fp8 (config.json of /models/l-fp8)' in the curve, 'bf16 (recipe; simulated engine, no " \
        "weights)' in this collection" in proc.stderr and "fix:" in proc.stderr and "launching" not in proc.stderr
    assert copy.read_text() == fp8 and set(copy.parent.iterdir()) == runs


@pytest.mark.timeout(120)
def test_cells_from_other_hardware_are_refused_after_measuring_and_kept_aside(
        collected: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    shutil.copytree(collected[0], tmp_path, dirs_exist_ok=True)  # a collected curve, said to be from a real H200
    curve_file = tmp_path / "llama-1b_ngram.yaml"
    text = curve_file.read_text().replace("# hardware: simulated h200", "# hardware: 1 x NVIDIA H200 (nvidia-smi)")
    curve_file.write_text(text)
    proc = _cli("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "--num-prompts", "3", "--output-len",
                "48", "-k", "2", "--merge-into", curve_file)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "hardware: '1 x NVIDIA H200 (nvidia-smi)' in the curve, 'simulated h200' in this collection" in proc.stderr
    assert curve_file.read_text() == text  # the curve is as it was; the new cell waits beside it
    aside = tmp_path / "llama-1b_ngram.unmerged"
    assert f"cells are in {aside}" in proc.stderr and "llama-1b:\n  thinking_off:\n    2: " in aside.read_text()


@pytest.mark.timeout(60)
def test_merge_into_refuses_a_missing_curve_and_a_second_output_name(tmp_path: Path) -> None:
    proc = _cli("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "-k", "2", "--merge-into",
                tmp_path / "llama-1b_ngram.yaml")
    assert proc.returncode == 2 and "no curve to merge into" in proc.stderr and "without --merge-into" in proc.stderr
    proc = _cli("al", "collect", RECIPE, "--simulate", "-k", "2", "--merge-into", tmp_path / "x.yaml", "--variant", "b")
    assert proc.returncode == 2 and "--variant would name another" in proc.stderr


@pytest.mark.timeout(120)
def test_a_recipe_with_a_policy_error_is_refused_before_any_server_starts(tmp_path: Path) -> None:
    """`al collect` launches servers as `run` does, so it is held to the same checks: an SGLang flag on the vLLM
    recipe (`serve.unsupported-arg`) is printed and refuses the collection (exit 2) with no cell run — against a real
    engine, which the local executor would otherwise have tried to start."""
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(RECIPE.read_text().replace("      --max-model-len: 4096\n",
                                                 "      --max-model-len: 4096\n      --mem-fraction-static: 0.8\n"))
    out = tmp_path / "golden"
    proc = _cli("al", "collect", recipe, "--runner-config", FLEET, "--executor", "local", "--prompts", "builtin",
                "--num-prompts", "3", "--out", out)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "[serve.unsupported-arg]" in proc.stderr and "no server was started" in proc.stderr
    assert "collecting" not in proc.stderr and not list(tmp_path.rglob("server_command.txt"))


# --------------------------------------------------------------------------------- a sampling per thinking mode

QWEN_LIKE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n"
             "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
             "{% endif %}")
REFERENCE = """\
# Source GitHub Actions run: https://example.invalid/runs/1
# Acceptance Length (AL) reference values measured with SPEED-Bench.
# dataset: coding | output_len: 4096
# thinking_on : temp 0.6 top_p 0.95 top_k 20 presence_penalty 0.0 | chat_template_kwargs: {"enable_thinking": true}
# thinking_off: temp 0.7 top_p 0.8 top_k 20 presence_penalty 1.5 | chat_template_kwargs: {"enable_thinking": false}
# simulated: yes (a stand-in for the family's golden curve, measured in FP8)
# key = num_speculative_tokens (ngram level); value = golden AL
llama-1b-fp8:
  thinking_on:
    1: 1.50
  thinking_off:
    1: 1.50
"""
"""The family's golden curve as InferenceX writes Qwen3.5's: a sampling per thinking mode, another precision."""


def _sent(cell: dict[str, Any]) -> dict[str, Any]:
    run = json.loads((Path(cell["directory"]) / "client" / "run.json").read_text())
    body: dict[str, Any] = run["provenance"]["workload"]["extra_body"]
    return body


@pytest.mark.timeout(240)
def test_off_and_on_in_one_call_each_sampled_as_asked_and_al_shows_each_modes_sampling(tmp_path: Path) -> None:
    out = tmp_path / "golden"
    proc = _collect(out, "-k", "1", "--thinking", "off", "on", "--json", "--top-k", "20",
                    "--sampling", "on=temperature=0.6,top_p=0.95",
                    "--sampling", "off=temperature=0.7,top_p=0.8,presence_penalty=1.5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert [(c["thinking"], c["status"]) for c in result["cells"]] == [("thinking_off", "measured"),
                                                                       ("thinking_on", "measured")]
    off, on = (_sent(c) for c in result["cells"])
    assert (off["temperature"], off["top_p"], off["top_k"], off["presence_penalty"]) == (0.7, 0.8, 20, 1.5)
    assert (on["temperature"], on["top_p"], on["top_k"]) == (0.6, 0.95, 20) and "presence_penalty" not in on
    text = Path(result["curve_file"]).read_text()  # what the modes share on the dataset line, the rest per mode
    assert "| top_k: 20 | output_len: 48\n" in text
    assert "# thinking_off temperature: 0.7 | top_p: 0.8 | presence_penalty: 1.5 | chat_template_kwargs" in text
    assert "# thinking_on temperature: 0.6 | top_p: 0.95 | chat_template_kwargs" in text
    # the simulator cannot tell whether llmsweep/llama-1b thinks: said, and kept in the header
    assert "thinking on is not checked against the model's chat template" in proc.stderr
    assert "# note: thinking_on: the thinking switch was not checked before collecting" in text
    for mode, row in (("off", "temperature 0.7 top_p 0.8 top_k 20 presence_penalty 1.5"),
                      ("on", "temperature 0.6 top_p 0.95 top_k 20; presence_penalty unstated")):
        shown = _cli("al", "llama-1b", "-m", "ngram", "-k", "1", "--thinking", mode, "--curves", out)
        assert shown.returncode == 0, shown.stderr
        assert row in shown.stdout


@pytest.mark.timeout(240)
def test_each_mode_defaults_to_the_golden_curves_sampling_so_the_collection_stands_in_for_both(
        tmp_path: Path) -> None:
    reference, out = tmp_path / "reference", tmp_path / "golden"
    reference.mkdir()
    (reference / "llama-1b_ngram.yaml").write_text(REFERENCE)
    env = {CURVES_ENV_VAR: str(reference)}
    proc = _cli("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "--num-prompts", "3", "--output-len",
                "48", "--out", out, "--variant", "bf16", "-k", "1", "--thinking", "off", "on", "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "top_k, presence_penalty as llama-1b_ngram states them for thinking_off" in proc.stderr
    result = json.loads(proc.stdout)
    off, on = (_sent(c) for c in result["cells"])
    assert (off["temperature"], off["top_p"], off["top_k"], off["presence_penalty"]) == (0.7, 0.8, 20, 1.5)
    assert (on["temperature"], on["top_p"], on["top_k"]) == (0.6, 0.95, 20)
    assert result["curve_file"] == str(out / "llama-1b_ngram_bf16.yaml")
    # Served in bf16, the recipe is answered by the collected (bf16) curve over the family's FP8 one, in both modes:
    # each was sampled as that curve states for it.
    for mode, sampling in (("on", {"temperature": 0.6, "top_p": 0.95, "top_k": 20.0, "presence_penalty": 0.0}),
                           ("off", {"temperature": 0.7, "top_p": 0.8, "top_k": 20.0, "presence_penalty": 1.5})):
        got = _cli("al", "llama-1b", "-m", "ngram", "-k", "1", "--thinking", mode, "--precision", "bf16",
                   "--curves", out, "--json", env=env)
        assert got.returncode == 0, got.stderr
        doc = json.loads(got.stdout)
        assert (doc["curve"], doc["passed_over"], doc["unlike"]) == ("llama-1b_ngram_bf16", "llama-1b_ngram", [])
        assert doc["sampling"] == sampling


SILENT = """\
# Source GitHub Actions run: https://example.invalid/runs/2
# Acceptance Length (AL) reference values measured with SPEED-Bench.
# dataset: coding | temperature: 1.0 | output_len: 4096
# thinking_off chat_template_kwargs: {"enable_thinking": false}
# simulated: yes (a stand-in for the family's golden curve, measured in FP8)
# key = num_speculative_tokens (ngram level); value = golden AL
llama-1b-fp8:
  thinking_off:
    1: 1.50
"""
"""The family's golden curve as InferenceX writes DSv4's: only the temperature stated, top_p and top_k the server's."""


@pytest.mark.timeout(240)
def test_a_key_the_golden_curve_leaves_to_the_server_is_not_sent_so_the_collection_stands_in_for_it(
        tmp_path: Path) -> None:
    reference, out = tmp_path / "reference", tmp_path / "golden"
    reference.mkdir()
    (reference / "llama-1b_ngram.yaml").write_text(SILENT)
    env = {CURVES_ENV_VAR: str(reference)}
    common = ("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "--num-prompts", "3", "--output-len",
              "48", "--variant", "bf16", "-k", "1", "--thinking", "off", "--json")
    proc = _cli(*common, "--out", out, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("sampling thinking_off: temperature 1 (temperature as llama-1b_ngram states them for thinking_off); "
            "not sent: top_p, top_k, presence_penalty (unstated by llama-1b_ngram for thinking_off: the server's "
            "default)") in proc.stderr
    result = json.loads(proc.stdout)
    assert _sent(result["cells"][0]) == {"temperature": 1.0, "chat_template_kwargs": {"enable_thinking": False}}
    text = Path(result["curve_file"]).read_text()  # the header states what was sent, nothing more
    assert " | temperature: 1.0 | output_len: 48\n" in text and "top_p" not in text and "top_k" not in text

    def resolved(curves: Path) -> dict[str, Any]:
        got = _cli("al", "llama-1b", "-m", "ngram", "-k", "1", "--thinking", "off", "--precision", "bf16",
                   "--curves", curves, "--json", env=env)
        assert got.returncode == 0, got.stderr
        doc: dict[str, Any] = json.loads(got.stdout)
        return doc

    doc = resolved(out)  # served in bf16: the collected curve stands in for the family's FP8 one
    assert (doc["curve"], doc["passed_over"], doc["unlike"]) == ("llama-1b_ngram_bf16", "llama-1b_ngram", [])
    assert doc["sampling"] == {"temperature": 1.0}
    # a collection that sent top_p where the golden curve left it to the server was sampled otherwise
    given = _cli(*common, "--out", tmp_path / "given", "--top-p", "0.95", env=env)
    assert given.returncode == 0, given.stderr[-3000:]
    assert "top_p 0.95 (" in given.stderr
    assert "| top_p: 0.95 |" in Path(json.loads(given.stdout)["curve_file"]).read_text()
    doc = resolved(tmp_path / "given")
    assert (doc["curve"], doc["passed_over"]) == ("llama-1b_ngram", None)
    assert doc["unlike"] == ["llama-1b_ngram_bf16 (top_p 0.95, not unstated)"]


@pytest.mark.timeout(240)
def test_thinking_off_and_on_are_the_default_where_the_models_template_has_the_switch(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "chat_template.jinja").write_text(QWEN_LIKE)
    (recipe,) = yaml.safe_load(RECIPE.read_text()).values()
    recipe["serve"]["model-path"] = str(model)
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump({"llama-1b-ngram-local": recipe}, sort_keys=False))
    proc = _collect(tmp_path / "golden", "-k", "1", "--json", recipe=path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "thinking off and on (the default): the chat template" in proc.stderr
    cells = json.loads(proc.stdout)["cells"]
    assert [c["thinking"] for c in cells] == ["thinking_off", "thinking_on"]
    assert [_sent(c)["chat_template_kwargs"] for c in cells] == [{"enable_thinking": False}, {"enable_thinking": True}]


@pytest.mark.timeout(240)
def test_a_signal_stops_the_collection_writes_the_measured_cells_and_exits_with_its_status(tmp_path: Path) -> None:
    """SIGTERM during the second cell: the curve of the first is written, the cells not measured say the signal, and
    the exit status is 143 (it was 1 whatever the signal, the cells said `interrupted`)."""
    import signal

    out, err = tmp_path / "out.json", tmp_path / "err.log"
    argv = [sys.executable, "-m", "llmsweep.cli.main", "al", "collect", str(RECIPE), "--simulate", "--prompts",
            "builtin", "--num-prompts", "3", "--output-len", "48", "--out", str(tmp_path / "golden"), "-k", "1", "2",
            "3", "--json"]
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            wait_for(lambda: "[2/3]" in err.read_text(errors="replace"), 180, "the second cell", proc, err)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=120) == 143, err.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    said = err.read_text()
    assert "interrupted by SIGTERM: 1 of 3 cells ran; writing the curve of the measured ones" in said, said[-3000:]
    cells = json.loads(out.read_text())["cells"]
    # the cell it stopped was interrupted (its folder holds what it did; it was listed `failed`), the one after it
    # never ran (no folder to point at)
    assert [(c["k"], c["status"]) for c in cells] == [(1, "measured"), (2, "interrupted"), (3, "not run")]
    assert {c["reason"] for c in cells[1:]} == {"interrupted by SIGTERM"}
    assert Path(cells[1]["directory"]).is_dir() and cells[2]["directory"] is None
    assert list((tmp_path / "golden").glob("*.yaml")) or list((tmp_path / "golden").rglob("*.y*ml")), said[-2000:]
    # how to finish it without measuring K=1 again (the same call with --merge-into re-measured and replaced it)
    curve = tmp_path / "golden" / "llama-1b_ngram.yaml"
    assert (f"2 of 3 cells not measured; to measure them into the curve, run this call again with --merge-into "
            f"{curve} in place of --out/--variant/--force, and --thinking off -k 2 3") in said, said[-2000:]
    done = _cli("al", "collect", RECIPE, "--simulate", "--prompts", "builtin", "--num-prompts", "3", "--output-len",
                "48", "--merge-into", curve, "--thinking", "off", "-k", "2", "3", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["replaced"] == [] and "cells not measured" not in done.stderr
    assert sorted(load_curve(curve).values["thinking_off"]) == [1, 2, 3]


@pytest.mark.timeout(240)
def test_a_server_a_killed_collection_left_is_stopped_by_the_next_collection_of_the_curve(tmp_path: Path) -> None:
    """SIGKILL of the collector during its second cell: nothing ran its teardown, so that cell's server went on
    running (holding, on a GPU host, the GPUs every later server needs) until someone found it. The next collection
    into the same folder stops it, from the pid file the cell folder keeps, before its first server starts."""
    import signal
    import time

    from llmsweep.execute.process import read_proc

    err = tmp_path / "err.log"
    argv = [sys.executable, "-m", "llmsweep.cli.main", "al", "collect", str(RECIPE), "--simulate", "--prompts",
            "builtin", "--num-prompts", "3", "--output-len", "48", "--out", str(tmp_path / "golden"), "-k", "1", "2"]
    pid_file = tmp_path / "golden" / "llama-1b_ngram.runs" / "thinking_off-k2" / "server.pid"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        server = 0
        try:
            wait_for(lambda: "thinking_off K=2: ready" in err.read_text(errors="replace"), 180,
                     "cell K=2's server ready", proc, err, poll_s=0.05)
            server = int(json.loads(pid_file.read_text())["pid"])
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL
            assert read_proc(server) is not None  # left running: nothing of the collector is left to stop it
            again = _collect(tmp_path / "golden", "-k", "1")
            assert again.returncode == 0, again.stderr[-3000:]
            assert f"stopping server pid {server} left running" in again.stderr
            gone = time.monotonic() + 10
            while (info := read_proc(server)) is not None and info.state != "Z" and time.monotonic() < gone:
                time.sleep(0.05)
            assert info is None or info.state == "Z", "the left server is still running"
            assert not pid_file.exists()
        finally:
            if proc.poll() is None:
                proc.kill()
            if server and read_proc(server) is not None:
                os.kill(server, signal.SIGKILL)


@pytest.mark.timeout(240)
def test_a_cell_measured_across_a_ctrl_z_is_left_out_of_the_curve_says_why_and_fails_the_collection(
        tmp_path: Path) -> None:
    """Ctrl-Z (SIGTSTP to the collection's process group) once the first cell's load has its first record, held
    1.5 s, then SIGCONT: the cell's client clocks counted the pause while its server answered on. `run` and `bench`
    judge such a measurement invalid; the collection wrote the cell into the curve as measured and exited 0. Now the
    cell is not measured, saying why (its client folder's summary too), the other cell is, and the exit status is 1
    with the way to collect the cell again."""

    out, err, runs = tmp_path / "out.json", tmp_path / "err.log", tmp_path / "runs"
    argv = [sys.executable, "-m", "llmsweep.cli.main", "al", "collect", str(RECIPE), "--simulate", "--prompts",
            "builtin", "--num-prompts", "4", "--output-len", "256", "--out", str(tmp_path / "golden"),
            "--run-dir", str(runs), "-k", "1", "2", "--json"]
    records = runs / "thinking_off-k1" / "client" / "records.jsonl"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                process_group=0)
        try:
            wait_for(lambda: records.is_file() and records.read_text().strip(), 180, "the first record", proc, err,
                     poll_s=0.02)
            ctrl_z(proc.pid)  # held 1.5 s: the pause the cell's clocks count
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    said = err.read_text()
    assert rc == 1, said[-3000:]
    cells = json.loads(out.read_text())["cells"]
    assert [(c["k"], c["status"]) for c in cells] == [(1, "failed"), (2, "measured")], cells
    why = "llmsweep was stopped for "
    assert cells[0]["reason"].startswith(why) and "(Ctrl-Z, SIGTSTP or SIGSTOP, then SIGCONT)" in cells[0]["reason"]
    assert float(cells[0]["reason"][len(why):].split(" s ")[0]) >= 1.4, cells[0]  # the pause, measured
    assert "the cell is left out of the curve" in cells[0]["reason"]
    summary = json.loads((runs / "thinking_off-k1" / "client" / "summary.json").read_text())["validity"]
    assert summary["verdict"] == "invalid" and summary["reasons"][0] == cells[0]["reason"], summary
    curve = tmp_path / "golden" / "llama-1b_ngram.yaml"
    assert sorted(load_curve(curve).values["thinking_off"]) == [2]
    assert f"not measured: thinking_off K=1 ({cells[0]['reason']})" in curve.read_text()
    assert f"with --merge-into {curve} in place of --out/--variant/--force, and --thinking off -k 1" in said


@pytest.mark.timeout(120)
def test_a_host_that_can_start_no_server_is_refused_once_before_any_cell(tmp_path: Path) -> None:
    """On a host without a GPU tool every cell had failed in turn with the same reason, the table said `failed` for
    each and its title that the server reported no version, though none started. Refused once, exit 2, no cell run;
    nothing but the folder's claim is left behind."""
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").symlink_to(sys.executable)  # a PATH with no nvidia-smi, amd-smi or rocm-smi on it
    recipe = ROOT / "examples" / "gpu" / "smollm2-135m-bf16-h200-vllm-ngram.yaml"
    proc = _cli("al", "collect", recipe, "--runner-config", FLEET, "--thinking", "off", "--executor-option",
                "allow_image=true", "--prompts", "builtin", "--num-prompts", "3", "--output-len", "48", "--out",
                tmp_path / "golden", "-k", "1", "2", "3", env={"PATH": str(bare)})
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "error: no cell can start a server on this host: " in proc.stderr and "no server was started" in proc.stderr
    assert proc.stderr.count("rocm-smi is on PATH") == 1, proc.stderr[-3000:]
    assert "[1/3]" not in proc.stderr and not list((tmp_path / "golden").rglob("*-k1"))
