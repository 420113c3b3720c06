"""A multinode, disaggregated prefill/decode job runs on the simulator role by role, in virtual time, and is stored
with the deployment that ran; everywhere its roles cannot be launched as roles (a real engine's) it is refused with its
reason. No stored result carries a disaggregated identity with an aggregated topology. (The live simulator's roles,
each a server of its own: tests/integration/test_local_roles.py, test_slurm_multinode.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_run_support import RECIPES, cli_env, cli_here, job_dirs, read_json, run_here

from llmsweep.engines import DISAGG_NOT_LAUNCHABLE
from llmsweep.engines.sim import DP_ATTENTION_UNMODELLED

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

REASON = "a real engine's disaggregated prefill/decode launch is not supported yet"


def _records(job_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (job_dir / "records.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("simulate", [False, True], ids=["sim-engine", "--simulate"])
def test_run_simulates_the_disagg_job_role_by_role_and_stores_its_deployment(tmp_path: Path, simulate: bool) -> None:
    out, store = tmp_path / "out", tmp_path / "store.sqlite"
    args: list[str | Path] = [RECIPES / "disagg-sim.yaml", RECIPES / "fixed-sim.yaml", "--out", out]
    proc = run_here([*args, "--simulate"] if simulate else args, cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    disagg = sorted(i for i in outcomes if "disagg-true" in i)
    # the job's two concurrencies are two points, each with its own folder and result
    assert [i.rsplit("-", 1)[1] for i in disagg] == ["conc2", "conc4"], outcomes
    assert all(o["status"] == "valid" for o in outcomes.values()), outcomes
    assert (f"2 jobs ran on the simulator, which does not model {DP_ATTENTION_UNMODELLED}: it predicts the points "
            "without modelling it") in proc.stderr
    dirs = job_dirs(out)
    ends: list[float] = []
    per_joule: list[float] = []
    for job_id in disagg:
        summary = read_json(dirs[job_id] / "summary.json")
        # Modelled power over every worker's GPUs (24: two prefill and one decode worker of 8), each role's share.
        power = summary["power"]
        assert power["power_valid"] and power["source"] == "simulated" and power["observed_gpus"] == 24, power
        assert (summary["roles"]["prefill"]["power"]["observed_gpus"],
                summary["roles"]["decode"]["power"]["observed_gpus"]) == (16, 8)
        assert (summary["roles"]["prefill"]["power"]["energy_j"] + summary["roles"]["decode"]["power"]["energy_j"]
                == pytest.approx(power["energy_j"]))
        per_joule.append(power["tokens_per_joule"])
        topo = summary["provenance"]["topology"]
        assert topo["disaggregated"] and topo["kv_transfer"] == "mori" and topo["nodes"] == 3
        # the prefill pool plans DP attention, which the simulator models as balanced ranks: the result names
        # what that leaves out
        assert summary["provenance"]["unmodelled"] == [DP_ATTENTION_UNMODELLED]
        roles = summary["roles"]
        assert (roles["prefill"]["workers"], roles["prefill"]["gpus"]) == (2, 16)
        assert (roles["decode"]["workers"], roles["decode"]["gpus"]) == (1, 8)
        assert roles["prefill"]["nodes"] == [0, 1] and roles["decode"]["nodes"] == [2]
        # throughput per GPU divides by every role's GPUs
        assert summary["throughput"]["gpus"] == summary["deployment"]["gpus"] == 24
        assert summary["deployment"]["links"][0]["kind"] == "scale-out"  # prefill and decode on different nodes
        transfer = roles["decode"]["metrics"]["kv_transfer_s_mean"]
        assert transfer > 0 and roles["decode"]["metrics"]["kv_transfers"] >= 1
        # TTFT includes the transfer: no request's first token came before its KV could have arrived
        records = [r for r in _records(dirs[job_id]) if r["status"] == 200]
        assert min(r["first_token_at"] - r["sent_at"] for r in records) > transfer * 0.5
        command = (dirs[job_id] / "server_command.txt").read_text()
        assert "prefill worker 1" in command and "decode worker 0" in command and "no server was launched" in command
        first = min(r["sent_at"] for r in records)
        if ends:  # the next concurrency ran on the same deployment after the drain wait
            assert first >= ends[-1] + 30
        ends.append(max(r["end_at"] for r in records))
    assert per_joule[1] > per_joule[0]  # more concurrency, more tokens per joule on the same deployment

    from llmsweep.results.store import Store

    with Store(store, readonly=True) as st:
        points = {p.job_id: p for p in st.results()}
    assert set(points) == set(outcomes)
    series = {p.identity.series_key() for i, p in points.items() if i in disagg}
    aggregated = {p.identity.series_key() for i, p in points.items() if i not in disagg}
    assert len(series) == 1 and not series & aggregated  # the dashboard and compare keep them apart


AMD_MASTER = Path(__file__).resolve().parents[3] / "shared" / "reference" / "inferencex" / "amd-master.yaml"
RUNNERS = AMD_MASTER.with_name("runners.yaml")


@pytest.mark.skipif(not AMD_MASTER.is_file(), reason="the InferenceX reference files are not present")
@pytest.mark.timeout(300)
def test_an_amd_master_sglang_disagg_job_runs_role_by_role_at_full_length(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_here([AMD_MASTER, "--runner-config", RUNNERS, "--simulate", "--config-keys",
                     "qwen3.5-fp8-mi355x-sglang-disagg", "--out", out, "--no-report"], cli_env(tmp_path))
    outcomes = {o["job_id"].rsplit("-conc", 1)[1]: o for o in read_json(out / "run.json")["outcomes"]}
    # the row's accuracy eval runs at its eval-conc (128) only: that point is refused (lm-eval needs the deployment
    # served live, which virtual time does not; with lm-eval absent, for that reason instead); the other
    # concurrencies are throughput points of the same deployment and run
    assert outcomes["128"]["status"] == "refused" and "eval" in outcomes["128"]["reasons"][0]
    assert {c for c, o in outcomes.items() if o["status"] == "valid"} == {"8", "16", "32", "64"}, proc.stderr[-3000:]
    for job_id, d in job_dirs(out).items():
        summary = read_json(d / "summary.json")
        job = read_json(d / "job.json")
        assert not job["run-eval"] and job["conc"] == [summary["provenance"]["options"]["concurrency"]]
        roles = summary["roles"]
        assert (roles["prefill"]["tp"], roles["prefill"]["gpus"], roles["decode"]["tp"], roles["decode"]["gpus"]) == (
            4, 4, 8, 8)
        assert summary["throughput"]["gpus"] == 12 and summary["deployment"]["kv_transfer"] == "mori"
        assert summary["requests"]["successful"] == 10 * job["conc"][0], job_id  # InferenceX's conc x 10 prompts
        assert roles["decode"]["metrics"]["kv_transfers"] >= summary["requests"]["successful"]


def test_agentic_multinode_concurrencies_run_one_after_another_on_one_deployment(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_here([RECIPES / "disagg-agentic-sim.yaml", "--out", out, "--no-report"], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stderr.count("disaggregated deployment of 2 jobs") == 1  # one deployment for both concurrencies
    dirs = sorted(job_dirs(out).values(), key=lambda d: read_json(d / "summary.json")["provenance"]["started_at"])
    assert len(dirs) == 2
    spans = []
    for d in dirs:
        summary = read_json(d / "summary.json")
        assert summary["validity"]["verdict"] == "smoke"  # an 8 s window is a smoke run, as for an aggregated job
        # two GB200 trays of one NVL72 rack: the KV moves over NVLink, not the NIC
        assert [link["kind"] for link in summary["deployment"]["links"]] == ["scale-up"]
        assert summary["roles"]["decode"]["max_running_requests"] == 8  # sized for the largest conc it serves
        records = _records(d)
        spans.append((min(r["sent_at"] for r in records), max(r["end_at"] for r in records if r["end_at"])))
    (_, first_end), (second_start, _) = spans
    assert second_start >= first_end + 30  # drained, then three idle 10 s polls


@pytest.mark.parametrize("live", [False, True], ids=["", "--live"])
def test_a_real_engines_disagg_job_is_refused(tmp_path: Path, live: bool) -> None:
    recipe = tmp_path / "real.yaml"  # the simulated recipe on SGLang (an image built for its GPUs: no policy error)
    recipe.write_text((RECIPES / "disagg-sim.yaml").read_text().replace("engine: { name: sim }", "engine: { name: "
                      "sglang }").replace("mi30x-20260730", "mi35x-20260730"))
    out = tmp_path / "out"
    proc = run_here([recipe, *(["--live"] if live else []), "--out", out, "--no-report"], cli_env(tmp_path))
    outcomes = read_json(out / "run.json")["outcomes"]
    assert outcomes and all(o["status"] == "refused" and len(o["reasons"]) == 1 for o in outcomes)
    assert all(o["reasons"][0].startswith(DISAGG_NOT_LAUNCHABLE) for o in outcomes)
    assert REASON in proc.stderr
    # and it says where it does run: on the simulator, in virtual time or live role by role
    assert "run it on the simulator with --simulate" in proc.stderr and "with --live each role is a process" in (
        proc.stderr)
    assert not (out / "jobs").exists() or not job_dirs(out)  # nothing was launched under its name


def test_no_stored_result_carries_a_disaggregated_identity_without_its_deployment(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_here([RECIPES / "disagg-sim.yaml", "--out", out, "--no-report"], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    forged = tmp_path / "forged"
    shutil.copytree(out, forged)
    job_dir = next(iter(job_dirs(forged).values()))
    summary = read_json(job_dir / "summary.json")
    del summary["deployment"], summary["roles"]  # as one aggregated server's summary would look
    (job_dir / "summary.json").write_text(json.dumps(summary))

    from llmsweep.errors import ResultError
    from llmsweep.results.store import Store

    with Store(tmp_path / "guard.sqlite") as st, pytest.raises(ResultError, match="no disaggregated deployment"):
        st.ingest_run(forged)
    with Store(tmp_path / "guard.sqlite") as st:
        assert st.ingest_run(out).results == 2  # the untouched run stores


def test_predict_runs_the_disagg_job_role_by_role(tmp_path: Path) -> None:
    proc = cli_here(["predict", RECIPES / "disagg-sim.yaml", RECIPES / "fixed-sim.yaml", "--duration", "3", "--json",
                     "--out", tmp_path / "pred"], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert all("summary" in r for r in rows), rows
    disagg = [r for r in rows if "disagg-true" in r["job"]]
    assert sorted(r["conc"] for r in disagg) == [2, 4]
    for r in disagg:
        assert r["summary"]["deployment"]["gpus"] == r["summary"]["throughput"]["gpus"] == 24
        assert set(r["summary"]["roles"]) == {"prefill", "decode", "router"}
        written = tmp_path / "pred" / r["job"] / f"conc{r['conc']}"
        assert read_json(written / "summary.json")["deployment"]["kv_transfer"] == "mori"
    assert all(r["summary"]["throughput"]["gpus"] == 8 and "deployment" not in r["summary"]
               for r in rows if r not in disagg)


FOUR_PER_NODE = """labels:
  mi355x-disagg: [mi355x-disagg_0, mi355x-disagg_1, mi355x-disagg_2, mi355x-disagg_3, mi355x-disagg_4, mi355x-disagg_5]
hardware:
  mi355x-disagg:
    available-cpu-dram-mib: 1_000_000
    gpus-per-node: 4
"""


def test_the_runner_files_gpus_per_node_places_the_workers_in_render_run_and_predict(tmp_path: Path) -> None:
    """A runner file (`--runner-config`) whose label has 4 GPUs per node: each TP8 worker spans 2 nodes, 6 in all.
    `render` placed them so; `run` and `predict` placed them by the packaged fleet (8 per node, 3 nodes), so the
    stored topology and the simulated deployment (its links) were not the job that was rendered."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FOUR_PER_NODE)
    recipe = RECIPES / "disagg-sim.yaml"
    placed = {"prefill": [[0, 1], [2, 3]], "decode": [[4, 5]], "router": [[0]]}
    from llmsweep.plan import jobs_from_files

    (job,) = jobs_from_files([recipe], runner_config=fleet)
    rendered = cli_here(["render", recipe, "--job", job.id, "--runner-config", fleet, "--json"], cli_env(tmp_path))
    assert rendered.returncode == 0, rendered.stderr[-4000:]
    topo = json.loads(rendered.stdout)["topology"]
    assert topo["nodes"] == 6 and {r["kind"]: [w["nodes"] for w in r["workers"]] for r in topo["roles"]} == placed

    out = tmp_path / "out"
    proc = run_here([recipe, "--simulate", "--runner-config", fleet, "--out", out, "--no-report"], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    dirs = job_dirs(out)
    assert len(dirs) == 2  # conc 2 and 4, each a point
    for job_dir in dirs.values():
        summary = read_json(job_dir / "summary.json")
        assert summary["provenance"]["topology"]["nodes"] == summary["deployment"]["nodes"] == 6
        assert {k: v["nodes"] for k, v in summary["roles"].items()} == {
            "prefill": [0, 1, 2, 3], "decode": [4, 5], "router": [0]}
        command = (job_dir / "server_command.txt").read_text()
        assert "on 6 nodes ran in-process" in command and "8 GPUs on nodes 2, 3" in command
        assert read_json(job_dir / "job.json")["gpus-per-node"] == 4  # the placement travels with the job

    predicted = cli_here(["predict", recipe, "--runner-config", fleet, "--duration", "3", "--json"],
                         cli_env(tmp_path))
    assert predicted.returncode == 0, predicted.stderr[-4000:]
    rows = json.loads(predicted.stdout)
    assert len(rows) == 2 and all(r["summary"]["deployment"]["nodes"] == 6 for r in rows), rows


def test_run_refuses_a_framework_llmsweep_cannot_launch_with_why(tmp_path: Path) -> None:
    recipe = tmp_path / "tilert.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text().replace("framework: sglang", "framework: tilert")
                      .replace("  serve:\n    engine: { name: sim }\n", ""))
    out = tmp_path / "out"
    proc = run_here([recipe, "--out", out], cli_env(tmp_path))
    outcomes = read_json(out / "run.json")["outcomes"]
    assert len(outcomes) == 2 and all(o["status"] == "refused" for o in outcomes), proc.stderr
    assert all("TileRT is its own engine" in o["reasons"][0] for o in outcomes)
