"""Eval rows through `llmsweep run` on the simulator with real lm-eval: an eval-only recipe and a run-eval 8k1k row.

Needs lm-eval[api]==0.4.13 in its own environment (`.ci/run` makes `.venv-lmeval` and sets `LLMSWEEP_LM_EVAL`);
skips cleanly without it. The samples are a small GSM8K-format file the test writes (offline: no hub). The simulator
answers with made-up words, so the score is 0 and the eval is invalid against its threshold: that is the truth, and
it must be stored, exported, compared and shown as such.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from llmsweep.evals.harness import BOOTSTRAP
from llmsweep.words import count_of

LM_EVAL = os.environ.get("LLMSWEEP_LM_EVAL")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not LM_EVAL or not Path(LM_EVAL).is_file(),
                                 reason="needs lm-eval (set LLMSWEEP_LM_EVAL to a Python with lm-eval[api]==0.4.13)")]

# No warm-up request: served live, one 8k1k request is ~4 s of the simulator's wall clock before every point (of a
# point's ~9 s), and nothing here measures the warm-up.
RECIPE = """\
llama8b-h200-sim-evals:
  image: vllm/vllm-openai:v0.26.0
  model: meta-llama/Llama-3.1-8B-Instruct
  model-prefix: llama3.1-8b
  runner: h200
  precision: bf16
  framework: vllm
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 1, conc-list: [4, 16] }
  serve:
    engine: { name: sim }
  workload:
    num-prompts: 4
    num-warmups: 0
"""


def gsm8k_file(path: Path, n: int = 12) -> Path:
    """A small set in GSM8K's format: `question`, and an `answer` whose last line is `#### <number>`."""
    rows = [{"question": f"Ann has {i} pens and buys {i + 3} more. How many pens does she have now?",
             "answer": f"She has {i} + {i + 3} = {2 * i + 3} pens.\n#### {2 * i + 3}"} for i in range(1, n + 1)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def llmsweep(tmp_path: Path, *args: str | Path, env_extra: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite"), "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *(str(a) for a in args)], env=env,
                          capture_output=True, text=True, timeout=280, cwd=tmp_path)


def summaries(out: Path) -> dict[str, dict[str, Any]]:
    return {p.parent.name: json.loads(p.read_text()) for p in (out / "jobs").glob("*/summary.json")}


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "evals.yaml"
    path.write_text(RECIPE, encoding="utf-8")
    return path


def eval_args(tmp_path: Path) -> list[str | Path]:
    return ["--eval-dataset", gsm8k_file(tmp_path / "gsm8k.jsonl"), "--eval-limit", "4", "--eval-max-tokens", "16"]


def test_an_eval_only_job_stores_its_score_and_threshold_verdict(tmp_path: Path, recipe: Path) -> None:
    """`--out` relative, as the README writes it: lm-eval runs in its own output folder, and the relative paths it
    was given (its task file, output path and report) sent it looking inside that folder — every eval failed."""
    out = tmp_path / "out"
    proc = llmsweep(tmp_path, "run", recipe, "--evals-only", "--out", "out", "--json", *eval_args(tmp_path))
    assert proc.returncode == 1, proc.stderr  # the eval ran and failed its threshold
    # it runs against the simulator served live, in wall-clock time: not said as a virtual-time job
    assert "(fixed-seq-len), an eval against the simulator served live" in proc.stderr, proc.stderr[-3000:]
    assert "virtual time" not in proc.stderr.split("job 1/1", 1)[-1].splitlines()[0]
    (row,) = json.loads(proc.stdout)["jobs"]
    assert row["job"].endswith(row["job"][-12:]) and "_conc16_" in row["job"] and "_eval_" in row["job"]
    assert row["verdict"] == "invalid" and row["tput_per_gpu"] is None
    assert row["eval_task"] == "gsm8k" and row["eval_score"] == 0.0 and row["eval_verdict"] == "invalid"
    (summary,) = summaries(out).values()
    ev = summary["eval"]
    assert ev["mode"] == "eval-only" and ev["harness_version"] == "0.4.13" and ev["context_length"] == 9472
    assert ev["runs"][0]["n_samples"] == 4 and ev["runs"][0]["conc"] == 16 and ev["num_fewshot"] == 5
    command = ev["runs"][0]["command"]
    assert command[1:7] == ["-c", BOOTSTRAP, "--model", "local-chat-completions", "--apply_chat_template",
                            "--model_args"] and "num_concurrent=16" in command[7]
    assert {m["name"] for m in ev["runs"][0]["metrics"]} == {"exact_match,strict-match",
                                                             "exact_match,flexible-extract"}
    assert summary["validity"]["verdict"] == "invalid"
    assert ("exact_match,strict-match = 0.0000 is below the threshold 0.90 (default.gsm8k.exact_match)"
            in summary["validity"]["reasons"][0])
    assert summary["source"] == "simulated" and ev["acceptance_length"] is None
    # InferenceX's meta_env.json beside lm-eval's results, so its own collector and score gate read the folder.
    job_dir = next((out / "jobs").iterdir())
    # its command file says what served it live, not that no server was launched (virtual time's)
    served = (job_dir / "server_command.txt").read_text()
    assert "no server was launched" not in served and served.startswith("# engine: sim") and "sim serve" in served
    meta = json.loads((job_dir / "eval" / "meta_env.json").read_text())
    assert (meta["infmax_model_prefix"], meta["conc"], meta["isl"], meta["osl"], meta["tp"]) == (
        "llama3.1-8b", 16, "8192", "1024", 1)
    # Stored, and exported in InferenceX's eval row shape.
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        rows = db.execute("SELECT mode, task, score, verdict FROM evals").fetchall()
    assert rows == [("eval-only", "gsm8k", 0.0, "invalid")]
    # A simulated eval is no measurement: InferenceX's rows hold it only with --include-unpublished, marked failed.
    assert json.loads(llmsweep(tmp_path, "results", "export", "--format", "inferencex-evals").stdout) == []
    exported = llmsweep(tmp_path, "results", "export", "--format", "inferencex-evals", "--include-unpublished")
    (erow,) = json.loads(exported.stdout)
    assert (erow["task"], erow["hw"], erow["em_strict"], erow["n_eff"], erow["conc"]) == ("gsm8k", "H200", 0.0, 4, 16)
    assert erow["benchmark_outcome"] == {"status": "failed", "reason": "simulated"}
    throughput = json.loads(llmsweep(tmp_path, "results", "export", "--format", "inferencex").stdout)
    assert throughput == []  # an eval-only result has no throughput row
    # `summarize` re-reads the folder and reaches the same verdict.
    again = llmsweep(tmp_path, "summarize", job_dir, "--json")
    assert json.loads(again.stdout)["eval"]["verdict"] == "invalid", again.stderr
    # `--reuse` runs an eval again and says so, without the --no-evals hint an eval-only job cannot take
    reran = llmsweep(tmp_path, "run", recipe, "--evals-only", "--reuse", "--out", "again", "--no-report",
                     *eval_args(tmp_path))
    assert "not reused: 1 job with an eval run again" in reran.stderr and "--no-evals" not in reran.stderr


def test_an_eval_reads_its_servers_metrics_directly_whatever_proxy_the_environment_names(tmp_path: Path,
                                                                                          recipe: Path) -> None:
    """The eval's `/metrics` scrapes before and after lm-eval went through the environment's proxy (plain `urlopen`):
    on a login node with `http_proxy` set, both were errors and the eval's server metrics were empty."""
    dead = "http://127.0.0.1:9"
    proxy = {"HTTP_PROXY": dead, "http_proxy": dead, "NO_PROXY": "", "no_proxy": ""}
    out = tmp_path / "out"
    proc = llmsweep(tmp_path, "run", recipe, "--evals-only", "--out", out, *eval_args(tmp_path),
                    env_extra=proxy)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # (1: the eval ran and missed its threshold)
    (scrapes,) = list(out.glob("jobs/*/eval/server_metrics.jsonl"))
    lines = [json.loads(line) for line in scrapes.read_text().splitlines()]
    assert len(lines) >= 2 and all("error" not in line and line["samples"] for line in lines), lines[:2]


def test_a_run_eval_row_runs_its_throughput_point_then_the_eval(tmp_path: Path, recipe: Path) -> None:
    out = tmp_path / "out"
    proc = llmsweep(tmp_path, "run", recipe, "--out", out, "--json", *eval_args(tmp_path))
    assert proc.returncode == 0, proc.stderr  # both throughput points are valid; the eval's failure is its own
    by_conc = {s["provenance"]["options"]["concurrency"]: s for s in summaries(out).values()}
    assert set(by_conc) == {4, 16} and "eval" not in by_conc[4]
    point = by_conc[16]
    assert point["validity"]["verdict"] == "valid" and point["requests"]["successful"] == 4
    assert point["throughput"]["total_tps"] > 0 and point["provenance"]["clock"] == "virtual"
    assert point["eval"]["mode"] == "run-eval" and point["eval"]["verdict"] == "invalid"
    assert any("below the threshold" in w for w in point["validity"]["warnings"])
    # ... and it is said where the run ends, beside the verdict that stands (it went unseen there: `1 valid`, exit 0)
    (failure,) = [line for line in proc.stderr.splitlines() if "throughput verdict, but" in line]
    assert failure.startswith("  1 job keeps its throughput verdict, but its gsm8k eval is invalid: "
                              "exact_match,strict-match = 0.0000 is below the threshold 0.90"), failure
    outcomes = json.loads((out / "run.json").read_text())["outcomes"]
    assert [o["eval_failure"] is not None for o in sorted(outcomes, key=lambda o: "_conc16_" in o["job_id"])] == [
        False, True]
    by_row = {row["conc"]: row["eval_failure"] for row in json.loads(proc.stdout)["jobs"]}  # `run --json` too
    assert by_row[4] is None and by_row[16].startswith("gsm8k eval is invalid: "), by_row
    # The dashboard: an evaluation view, and the failure on the throughput point it belongs to.
    data = json.loads((out / "report" / "data.json").read_text())
    (ev,) = data["evals"]
    assert ev["mode"] == "run-eval" and ev["verdict"] == "invalid" and ev["score"] == 0.0
    marked = [p for p in data["points"] if p["eval"]]
    assert len(marked) == 1 and marked[0]["eval"]["verdict"] == "invalid" and marked[0]["metrics"]["conc"] == 16
    assert 'id="evals-table"' in (out / "report" / "index.html").read_text()
    # `compare` matches the eval too: a run against itself is within noise, each side's verdict shown.
    cmp = llmsweep(tmp_path, "compare", out, out, "--json")
    matched = json.loads(cmp.stdout)["matched"]
    evals = [m["eval"] for m in matched if m["eval"]]
    assert evals == [{"task": "gsm8k", "a": 0.0, "b": 0.0, "delta": 0.0, "band": 0.0, "band_kind": "stderr",
                      "runs": {"a": 1, "b": 1}, "verdict": "within noise", "eval_verdict_a": "invalid",
                      "eval_verdict_b": "invalid", "eval_mode_a": "run-eval", "eval_mode_b": "run-eval",
                      "settings_differ": None}]
    # `--resume` keeps saying it: the resumed job's eval failure is the earlier attempt's (it went with the resume)
    resumed = llmsweep(tmp_path, "run", recipe, "--out", out, "--resume", "--no-report", *eval_args(tmp_path))
    assert resumed.returncode == 0 and "(2 resumed)" in resumed.stderr, resumed.stderr[-3000:]
    assert "1 job keeps its throughput verdict, but its gsm8k eval is invalid" in resumed.stderr
    # ... and a resume that would score its evals otherwise is refused: its finished eval scored 4 samples
    other = llmsweep(tmp_path, "run", recipe, "--out", out, "--resume", "--no-report", *eval_args(tmp_path)[:-4],
                     "--eval-limit", "2", "--eval-max-tokens", "16")
    assert other.returncode == 2, other.stderr
    assert "its eval settings: it ran with --eval-task gsm8k" in other.stderr and "--eval-limit 4" in other.stderr
    assert "now --eval-task gsm8k" in other.stderr and "--eval-limit 2" in other.stderr
    # a narrower resume (no eval job planned) neither compares nor overwrites what the evals were measured with
    narrow = llmsweep(tmp_path, "run", recipe, "--out", out, "--resume", "--no-report", "--no-evals",
                      "--eval-limit", "9")
    assert narrow.returncode == 0, narrow.stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["eval_settings"]["limit"] == 4
    assert llmsweep(tmp_path, "run", recipe, "--out", out, "--resume", "--no-report", *eval_args(tmp_path)
                    ).returncode == 0
    # `--reuse`: the plain point stands on its stored result; the run-eval row runs again, and the run says why
    again = llmsweep(tmp_path, "run", recipe, "--out", tmp_path / "again", "--reuse", "--json", *eval_args(tmp_path))
    rows = {row["conc"]: row for row in json.loads(again.stdout)["jobs"]}
    assert rows[4]["reused"] is True and rows[16]["reused"] is False, rows
    assert "not reused: 1 job with an eval run again" in again.stderr and rows[16]["job"] in again.stderr
    assert "--no-evals" not in again.stderr  # a point a run-eval row stored is keyed with its eval: never offered


PINNED_AL = 2.2
"""An explicit recipe pin for n-gram K=3 on a model no golden curve covers (so no golden value overrules it); the
simulator's typical n-gram K=3 acceptance, realised when nothing is pinned, is 1.62."""


def pinned_recipe(tmp_path: Path, concs: list[int]) -> Path:
    """8k1k with n-gram K=3 pinned for throughput. At conc 16, 32 and 64 InferenceX marks 32 and 64 `run-eval` (the
    upper median and the highest concurrency >= 16): a throughput point and two pinned run-eval jobs share the
    group's server. Served live, a point is one 8k1k request's wall-clock latency: so the smallest catalog model
    whose context holds 8k1k (Qwen3-Next-mini, 0.67B active: ~1.3 s a point) on a simulated B200, where Llama-3.1-8B
    took ~3.5 s there and ~5 s on the H200 (what is checked here depends on neither the model nor the GPU)."""
    spec = f"    spec-decoding: {{ method: ngram, num-steps: 3, acceptance-length: {PINNED_AL} }}\n"
    assert "  runner: h200\n" in RECIPE and "  model: meta-llama/Llama-3.1-8B-Instruct\n" in RECIPE
    text = RECIPE.replace("conc-list: [4, 16]", f"conc-list: {concs}, spec-decoding: mtp").replace(
        "    engine: { name: sim }\n", "    engine: { name: sim }\n" + spec).replace("  runner: h200\n",
                                                                                   "  runner: b200\n").replace(
        "  model: meta-llama/Llama-3.1-8B-Instruct\n  model-prefix: llama3.1-8b\n",
        "  model: llmsweep/qwen3-next-small\n  model-prefix: qwen3-next-mini\n")
    path = tmp_path / "pinned.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("live", "concs", "evals"), [(True, [16, 32, 64], (32, 64)), (False, [16], (16,))],
                         ids=["live", "virtual"])
def test_a_pinned_run_eval_row_runs_its_pin_then_the_eval_on_a_relaunch_with_real_verification(
        tmp_path: Path, live: bool, concs: list[int], evals: tuple[int, ...]) -> None:
    out = tmp_path / "out"
    began = time.monotonic()
    proc = llmsweep(tmp_path, "run", pinned_recipe(tmp_path, concs), *(["--live"] if live else []), "--out", out,
                    "--json", *eval_args(tmp_path))
    wall = time.monotonic() - began
    assert proc.returncode == 0, proc.stderr
    # each job's seconds are its own (an owed job's point, then its eval), so they add up to less than the sweep
    seconds = [o["seconds"] for o in json.loads((out / "run.json").read_text())["outcomes"]]
    assert len(seconds) == len(concs) and all(s > 0 for s in seconds) and sum(seconds) < wall, (seconds, wall)
    if live:  # the group's points first, then one server without the pin for every eval they owe
        assert proc.stderr.count("relaunching without synthetic acceptance for the eval") == 1, proc.stderr
        assert f"{count_of(len(evals), 'eval')} of group" in proc.stderr
        last_point = proc.stderr.index(f"conc {max(concs)} (fixed-seq-len)")
        assert proc.stderr.index(": eval gsm8k") > last_point, proc.stderr
    else:
        assert proc.stderr.count("serving the eval live without synthetic acceptance") == len(evals), proc.stderr
    by_conc = {s["provenance"]["options"]["concurrency"]: s for s in summaries(out).values()}
    assert set(by_conc) == set(concs)
    assert all("eval" not in by_conc[c] for c in concs if c not in evals)
    for conc, summary in by_conc.items():
        # Every throughput point ran its pin, and the read-back gate judged it against the pin.
        (check,) = summary["readback"]["checks"]
        assert check["check"] == "acceptance_length" and check["pinned"] == PINNED_AL and check["ok"] is True
        assert summary["validity"]["verdict"] == "valid", (conc, summary["validity"])
    for conc in evals:
        job_dir = out / "jobs" / by_conc[conc]["provenance"]["job"]["id"]
        assert f"--acceptance-length {PINNED_AL:g}" in (job_dir / "server_command.txt").read_text()
        # The eval ran on a second server, launched without the pin: its realised acceptance is the simulator's own.
        ev = by_conc[conc]["eval"]
        assert ev["mode"] == "run-eval" and ev["relaunched"] is True and ev["runs"][0]["n_samples"] == 4
        assert ev["acceptance_length"] is not None and abs(ev["acceptance_length"] - PINNED_AL) > 0.3
        command = (job_dir / "eval" / "server_command.txt").read_text()
        assert command == ev["server_command"] and "--spec-method ngram" in command
        assert "--acceptance-length" not in command
    servers = sorted(p.name for p in (out / "servers").iterdir())
    assert any(name.endswith("-eval") for name in servers)
    if live:  # each server started once: the pinned one for the three points, the eval one for both evals
        (pinned,) = [out / "servers" / n for n in servers if not n.endswith("-eval")]
        (relaunched,) = [out / "servers" / n for n in servers if n.endswith("-eval")]
        for folder in (pinned, relaunched):
            assert (folder / "server.log").is_file(), folder
            # A second launch is allowed only for what the run says relaunches a server whatever the job (on a
            # loaded machine: a picked port taken before the server bound it, or a health check unanswered for
            # the stop grace), said for that server's group; never a launch per eval.
            said = [line for line in proc.stderr.splitlines() if f"of group {folder.name} " in line and (
                "a port picked for it was taken" in line or "no longer serves" in line)]
            assert not (folder / "server.2.log").exists() or said, (folder, proc.stderr)
            assert not (folder / "server.3.log").exists(), folder


def test_a_sweep_stopped_while_an_eval_is_owed_leaves_that_job_unfinished_and_resume_runs_it(tmp_path: Path) -> None:
    """SIGTERM after conc 32's point (its eval owed to the group's eval server) and during conc 64's: the stop tears
    the server down, conc 32's folder says it owes its eval (so it is not done), and `--resume` reruns both pinned
    rows, their points and then their evals on one relaunched server, skipping conc 16."""
    out = tmp_path / "out"
    env = {**os.environ, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite"), "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "llmsweep.cli.main", "run", str(pinned_recipe(tmp_path, [16, 32, 64])), "--live",
            "--out", str(out), *(str(a) for a in eval_args(tmp_path))]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    finished_before_the_signal = False
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(f"[read {time.strftime('%H:%M:%S')}] {line}")
            if "_conc64_" in line and "conc 64 (fixed-seq-len)" in line:
                finished_before_the_signal = proc.poll() is not None  # this reader fell behind the whole run
                proc.send_signal(signal.SIGTERM)
                break
        seen.append(proc.communicate(timeout=60)[1])
    finally:
        if proc.poll() is None:
            proc.kill()
    said = "".join(seen)
    assert "_conc32_" in said and "point done; its eval runs after the group's other points" in said, said
    assert not finished_before_the_signal, said
    assert proc.returncode != 0, said  # (once in a full suite run it exited 0: its whole stderr, each read's time)
    assert not list((out / "servers").glob("*/server.pid"))  # the stop tore the pinned server down
    by_conc = {s["provenance"]["options"]["concurrency"]: s for s in summaries(out).values()}
    assert by_conc[16]["validity"]["verdict"] == "valid"
    owed = by_conc[32]["validity"]
    assert owed["verdict"] == "invalid" and any("owes an eval" in r for r in owed["reasons"]), owed

    resumed = llmsweep(tmp_path, "run", pinned_recipe(tmp_path, [16, 32, 64]), "--live", "--out", out, "--resume",
                       *eval_args(tmp_path))
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert resumed.stderr.count("relaunching without synthetic acceptance for the eval") == 1
    outcomes = {o["job_id"]: o["status"] for o in json.loads((out / "run.json").read_text())["outcomes"]}
    by_conc = {s["provenance"]["options"]["concurrency"]: s for s in summaries(out).values()}
    assert outcomes[by_conc[16]["provenance"]["job"]["id"]] == "skipped"
    for conc in (32, 64):
        assert outcomes[by_conc[conc]["provenance"]["job"]["id"]] == "valid"
        assert by_conc[conc]["eval"]["relaunched"] is True


def test_an_agentic_eval_only_job_runs_offline_without_reading_its_rows_trace_source(tmp_path: Path) -> None:
    """The seed recipe's agentic row names a Hugging Face trace corpus; its eval-only job replays none of it (lm-eval
    sends its samples), yet it was refused offline because that corpus could not be fetched."""
    # a copy outside the repository's recipes/: its eval row is its own highest concurrency (within recipes/, the
    # configuration's eval is the resident recipe's conc 32: `spec.scope`)
    seed = tmp_path / "seed.yaml"
    shutil.copy(Path(__file__).resolve().parents[2] / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml", seed)
    out = tmp_path / "out"
    env = {**os.environ, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", str(seed), "--simulate", "--evals-only",
                           "--out", str(out), "--json", *(str(a) for a in eval_args(tmp_path))],
                          env=env, capture_output=True, text=True, timeout=280, cwd=tmp_path)
    planned = proc.stderr.split("planned", 1)[-1].splitlines()[0]
    assert planned.endswith("the simulator served live for 1 eval (1 engine config), 0 refused"), proc.stderr
    assert "virtual time" not in planned  # nothing of this run is timed in virtual time
    (row,) = json.loads(proc.stdout)["jobs"]
    assert "_eval_" in row["job"] and row["eval_task"] == "gsm8k" and row["eval_score"] == 0.0, row


def test_a_disaggregated_eval_only_job_is_stored_with_its_deployment(tmp_path: Path) -> None:
    """A multinode 8k1k row's eval, served live role by role (`--all-evals`): the eval ran, then the run ended in
    `could not store the run` — its summary recorded no disaggregated deployment, so the store refused it as an
    aggregated server's result (a run-eval row's, which carries its throughput point's, was stored)."""
    import yaml

    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "disagg-sim.yaml")
                         .read_text())
    (recipe,) = doc.values()
    recipe["scenarios"]["fixed-seq-len"][0].update(isl=8192, osl=1024)
    recipe["scenarios"]["fixed-seq-len"][0]["search-space"][0]["conc-list"] = [16]
    path = tmp_path / "dis8k.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    proc = llmsweep(tmp_path, "run", path, "--evals-only", "--live", "--out", "out", "--no-report",
                    *eval_args(tmp_path))
    assert proc.returncode == 1, proc.stderr[-3000:]  # the eval ran, and failed its threshold: stored as such
    assert "could not store" not in proc.stderr, proc.stderr[-3000:]
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        rows = db.execute("SELECT mode, task, verdict FROM evals").fetchall()
    assert rows == [("eval-only", "gsm8k", "invalid")]
    (summary,) = summaries(tmp_path / "out").values()
    assert summary["deployment"]["disaggregated"] is True and set(summary["roles"]) >= {"prefill", "decode"}
