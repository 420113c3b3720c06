"""`llmsweep run --simulate` and `llmsweep predict` in virtual time: any recipe runs on the simulator offline, every
job gets a result or a refusal with its reason, and fixed-length points are valid when their prompts completed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_run_support import RECIPES, cli_env, cli_here, job_dirs, read_json, run_cli, run_here

from llmsweep.spec.workload import ResolvedWorkload
from llmsweep.words import count_of
from llmsweep.workload.agentic import AgenticWorkload
from llmsweep.workload.build import build_workload

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
AMD_MASTER = Path("/work/shared/reference/inferencex/amd-master.yaml")
RUNNERS = AMD_MASTER.with_name("runners.yaml")


def _offline(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))


def _short_seed(tmp_path: Path) -> Path:
    """The seed recipe as it is, with one concurrency per arm and a 300 s window (CI time)."""
    doc = yaml.safe_load(SEED.read_text())
    (recipe,) = doc.values()
    for entry in recipe["scenarios"]["agentic-coding"]:
        for arm in entry["search-space"]:
            arm["conc-list"] = [4]
    recipe.setdefault("workload", {})["duration"] = 300
    path = tmp_path / SEED.name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.timeout(300)
def test_the_seed_recipe_runs_offline_on_the_simulator_with_synthetic_traces(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli([_short_seed(tmp_path), "--simulate", "--traces", "synthetic", "--out", out], _offline(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    jobs = job_dirs(out)
    assert len(jobs) == 2
    for jdir in jobs.values():
        summary = read_json(jdir / "summary.json")
        assert summary["source"] == "simulated" and summary["provenance"]["clock"] == "virtual"
        assert summary["requests"]["successful"] > 0 and summary["requests"]["failed"] == 0
        assert read_json(jdir / "job.json")["workload"]["traces"]["synthetic"]["max-isl"] == 256000
    # each point records the fingerprint of the corpus it replayed, and rebuilding the corpus from the job (what
    # `sim calibrate` replays) gives the same one
    for jdir in jobs.values():
        recorded = read_json(jdir / "summary.json")["provenance"]["workload"]["corpus_digest"]
        job = read_json(jdir / "job.json")
        rebuilt = build_workload(ResolvedWorkload.model_validate(job["workload"]), concurrency=job["conc"],
                                 tokenizer=None)
        assert isinstance(rebuilt, AgenticWorkload) and recorded == rebuilt.corpus_digest


@pytest.mark.timeout(120)
def test_an_unreadable_trace_source_is_resolved_once_before_anything_runs_and_refuses_its_jobs(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli([SEED, "--simulate", "--out", out], _offline(tmp_path))
    assert proc.returncode == 1
    outcomes = read_json(out / "run.json")["outcomes"]
    assert len(outcomes) == 9 and {o["status"] for o in outcomes} == {"refused"}
    assert all("--traces synthetic" in o["reasons"][0] for o in outcomes)
    assert all("\n" not in o["reasons"][0] for o in outcomes)  # a reason is one line, whatever the hub printed
    # Said once before any job ran, and once in the completeness report (which then names the jobs); nothing was
    # simulated.
    assert proc.stderr.count("9 jobs refused") == 1
    assert proc.stderr.count("cannot be read") == 2 and "refused, 9 jobs: trace source" in proc.stderr
    assert not (out / "jobs").exists() or not list((out / "jobs").iterdir())
    # `predict` too: the source said once with its job count, and the error's fix is that source's, not a generic one.
    predicted = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "predict", str(SEED)],
                               env=_offline(tmp_path), capture_output=True, text=True, timeout=120)
    assert predicted.returncode == 1  # as `run` exits: jobs that could not run, not recipe errors
    assert predicted.stderr.count("cannot be read") == 1 and "9 jobs refused" in predicted.stderr
    assert "all 9 points were refused" in predicted.stderr
    assert "--traces synthetic" in predicted.stderr.split("fix:")[-1]
    # with --json, every point on stdout with its refusal (it printed nothing: the reasons were on stderr alone)
    as_json = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "predict", str(SEED), "--json"],
                             env=_offline(tmp_path), capture_output=True, text=True, timeout=120)
    assert as_json.returncode == 1
    docs = json.loads(as_json.stdout)
    assert len(docs) == 9 and all("--traces synthetic" in d["refused"] for d in docs), docs


def _without_pin(tmp_path: Path) -> Path:
    """spec-fixed-sim.yaml's MTP job without its pinned AL: a fixed-length job that measures real acceptance."""
    doc = yaml.safe_load((RECIPES / "spec-fixed-sim.yaml").read_text())
    recipe = doc["run-sim-spec"]
    del recipe["serve"]["spec-decoding"]["acceptance-length"]
    path = tmp_path / "spec-real.yaml"
    path.write_text(yaml.safe_dump({"run-sim-spec-real": recipe}, sort_keys=False))
    return path


@pytest.mark.timeout(120)
def test_fixed_length_points_are_valid_and_real_acceptance_runs_at_the_labelled_estimate(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_here([RECIPES / "fixed-sim.yaml", _without_pin(tmp_path), "--out", out], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    jobs = job_dirs(out)
    assert len(jobs) == 3
    for name, jdir in jobs.items():
        summary = read_json(jdir / "summary.json")
        job = read_json(jdir / "job.json")
        # InferenceX: a fixed-length point is valid when its planned prompts completed within the gates.
        assert summary["validity"]["verdict"] == "valid", (name, summary["validity"])
        assert summary["requests"]["successful"] == job["workload"]["num-prompts"] or \
            summary["requests"]["successful"] == job["workload"]["num-prompts-per-conc"] * job["conc"]
        if job.get("spec-decoding", "none") != "none":
            acceptance = summary["provenance"]["acceptance"]
            # The golden curve covers Qwen3.5 MTP K=3: the estimate is its value, labelled as an estimate.
            assert acceptance["source"] == "estimate" and acceptance["value"] == pytest.approx(3.39)
            assert "estimate" in (jdir / "server_command.txt").read_text()


def _predict(args: list[str | Path], env: dict[str, str], timeout: float = 240) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "predict", *(str(a) for a in args), "--json"],
                          env=env, capture_output=True, text=True, timeout=timeout)
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    refused = sum(1 for r in rows if "refused" in r)
    # a point that could not be predicted is a job that could not run, as `run` counts it: exit 1, after the others
    assert proc.returncode == (1 if refused else 0), proc.stderr[-4000:]
    assert (f"{refused} of {count_of(len(rows), 'point')} could not be predicted" in proc.stderr) == bool(refused)
    return rows


MASTER_KEYS = ("dsv4-fp8-mi300x-vllm", "dsr1-fp8-mi355x-sglang-mtp", "qwen3.5-fp8-mi300x-sglang-agentic-mtp",
               "qwen3.5-fp8-mi355x-sglang-disagg")
"""A slice of the AMD master: the DeepSeek-V4-Pro FP8 job that used to abort `predict`, fixed-length speculative
jobs with real acceptance, the seed's AgentX jobs (their HF corpus is not reachable offline) and a disaggregated
SGLang recipe (1 prefill TP4 + 1 decode TP8 over MoRI)."""


@pytest.mark.skipif(not AMD_MASTER.is_file(), reason="the InferenceX reference files are not present")
@pytest.mark.timeout(300)
def test_predict_on_the_amd_master_gives_every_job_a_result_or_a_refusal(tmp_path: Path) -> None:
    from llmsweep.plan import jobs_from_files
    from llmsweep.plan.point import points_of

    expected = {(j.id, p.concurrency) for j in jobs_from_files([AMD_MASTER], config_keys=list(MASTER_KEYS))
                for p in points_of(j)}
    keys = [a for k in MASTER_KEYS for a in ("--config-keys", k)]
    results = _predict([AMD_MASTER, *keys, "--max-requests", "16", "--duration", "60"], _offline(tmp_path))
    by_job: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_job.setdefault(r["job"], []).append(r)
    assert {job for job, _ in expected} == set(by_job)
    for rows in by_job.values():
        for r in rows:
            assert ("summary" in r) != ("refused" in r), r
            if "refused" in r:
                assert r["refused"], r
    refused = [r for r in results if "refused" in r]
    # refused only for a reason: the seed's HF corpus offline, or a job the simulator cannot model
    assert all("--traces synthetic" in r["refused"] or "cannot" in r["refused"] for r in refused), refused
    # the disaggregated job is predicted role by role: every concurrency, on its 4 + 8 GPUs, over the scale-out NIC
    disagg = [r for r in results if "disagg-true" in r["job"]]
    assert sorted(r["conc"] for r in disagg) == [8, 16, 32, 64, 128]
    for r in disagg:
        summary = r["summary"]
        assert summary["throughput"]["gpus"] == summary["deployment"]["gpus"] == 12
        assert (summary["roles"]["prefill"]["tp"], summary["roles"]["decode"]["tp"]) == (4, 8)
        assert summary["deployment"]["kv_transfer"] == "mori"
        assert summary["roles"]["decode"]["metrics"]["kv_transfer_s_mean"] > 0
    dsv4 = [r for r in results if r["job"].startswith("dsv4") and "summary" in r]
    assert dsv4, "DeepSeek-V4-Pro FP8 fits 8 x MI300X (InferenceX's ~1.05 TB dequantized, 131 GB a GPU)"
    spec = [r for r in results if "_spec-mtp_" in r["job"] and "summary" in r and "agentic" not in r["job"]]
    assert spec and all(r["summary"]["provenance"]["acceptance"]["source"] == "estimate" for r in spec)


@pytest.mark.skipif(not AMD_MASTER.is_file(), reason="the InferenceX reference files are not present")
@pytest.mark.timeout(300)
def test_run_simulate_on_the_amd_master_accounts_for_every_job(tmp_path: Path) -> None:
    out = tmp_path / "out"
    keys = ["--config-keys", "dsv4-fp8-mi300x-vllm-mtp", "--config-keys", "qwen3.5-fp8-mi300x-sglang-agentic-mtp"]
    proc = run_cli([AMD_MASTER, "--runner-config", RUNNERS, "--simulate", *keys, "--out", out, "--no-report"],
                   _offline(tmp_path))
    assert proc.returncode == 1, proc.stderr[-4000:]  # refusals fail the run, never abort it
    outcomes = read_json(out / "run.json")["outcomes"]
    assert outcomes and all(o["status"] == "valid" or (o["status"] == "refused" and o["reasons"])
                            for o in outcomes), outcomes
    ran = [o for o in outcomes if o["status"] == "valid"]
    # DeepSeek-V4-Pro FP8 on 8 x MI300X fits; its MTP throughput rows run at the golden-curve estimate.
    assert ran and all(o["job_id"].startswith("dsv4") for o in ran)
    for o in ran:
        acceptance = read_json(out / "jobs" / o["job_id"] / "summary.json")["provenance"]["acceptance"]
        assert acceptance["source"] == "estimate" and acceptance["value"] > 1
    # The AgentX jobs' HF corpus is not reachable offline: resolved once, every such job refused with the fix.
    agentic = [o for o in outcomes if o["job_id"].startswith("qwen3.5")]
    assert agentic and all(o["status"] == "refused" and "--traces synthetic" in o["reasons"][0] for o in agentic)
    assert proc.stderr.count("cannot be read") == 2  # once up front, once in the completeness report


@pytest.mark.timeout(180)
def test_compare_matches_agentic_points_only_on_the_corpus_they_replayed(tmp_path: Path) -> None:
    """Two runs of one agentic recipe replay the same corpus: their points match. A run on another corpus (another
    synthetic seed) at the same concurrencies is another experiment: no point matches unless `--ignore corpus`
    says so, and the output names it."""
    store = tmp_path / "store.sqlite"
    env = cli_env(tmp_path)
    recipe = RECIPES / "agentic-sim.yaml"
    other = tmp_path / "other-corpus.yaml"
    other.write_text(recipe.read_text().replace("seed: 7, max-isl", "seed: 8, max-isl"))
    for name, path in (("a", recipe), ("b", recipe), ("c", other)):
        proc = run_here([path, "--out", tmp_path / name, "--store", store, "--no-report"], env)
        assert proc.returncode == 0, proc.stderr[-3000:]

    def compare(*args: str) -> dict[str, Any]:
        proc = cli_here(["compare", *args, "--store", store, "--no-history", "--json"], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)

    same = compare(str(tmp_path / "a"), str(tmp_path / "b"))
    assert len(same["matched"]) == 2
    corpora = {m["identity"]["corpus"] for m in same["matched"]}
    assert len(corpora) == 1 and next(iter(corpora)).startswith("sha256:")
    different = compare(str(tmp_path / "a"), str(tmp_path / "c"))
    assert different["matched"] == [] and len(different["only_a"]) == 2 and len(different["only_b"]) == 2
    relaxed = compare(str(tmp_path / "a"), str(tmp_path / "c"), "--ignore", "corpus")
    assert len(relaxed["matched"]) == 2 and relaxed["ignored_fields"] == ["corpus"]
