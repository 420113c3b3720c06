"""A disaggregated job run role by role on a REAL multi-node Slurm (scripts/ci/start_slurm_multinode.sh: one slurmd
per network namespace, each node its own address on a bridge): `llmsweep run --simulate --live --executor slurm`
places the prefill and decode workers as srun steps on different nodes, the router beside the first prefill
worker; they talk over the nodes' addresses; the client's results come through the router; provenance records the
topology read back from the roles; a role that cannot come up fails the job; success, failure and Ctrl-C leave no
step and no process behind. Skipped when that cluster is not running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from support.slurm_multinode import MN_CONF, cluster_nodes, hold_port, slurm

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "disagg-sim.yaml"

pytestmark = [pytest.mark.slurm, pytest.mark.slow]  # slow: xdist starts this file first (tests/conftest.py)


@pytest.fixture(scope="module", autouse=True)
def multinode_cluster() -> dict[str, str]:
    """The cluster's nodes and their addresses; skip when the multi-node cluster is not up."""
    return cluster_nodes()


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(MN_CONF), "LLMSWEEP_STORE": str(tmp_path / "store.sqlite"),
            "PYTHONUNBUFFERED": "1"}


LIVE_ON_SLURM = ("--simulate", "--live", "--executor", "slurm", "--executor-option", "poll_s=0.5", "--executor-option",
                 "time_limit=00:05:00")
"""`run`'s options that serve a recipe on this cluster: the simulator's roles as steps, polled often."""


def run_argv(recipe: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "llmsweep.cli.main", "run", str(recipe), *LIVE_ON_SLURM, "--out", str(out),
            "--no-report"]


def outcomes(out: Path) -> list[dict[str, Any]]:
    return list(json.loads((out / "run.json").read_text())["outcomes"])


def slurm_job_id(out: Path) -> str:
    (path,) = (out / "servers").glob("*/slurm_job_id")
    return path.read_text().strip()


def role_processes(addresses: dict[str, str]) -> list[str]:
    """Command lines of simulator role processes bound to one of the cluster's node addresses."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = " ".join(a.decode(errors="replace") for a in argv)
        if "llmsweep.cli.main sim" in text and any(f"--host {a}" in text for a in addresses.values()):
            found.append(text)
    return found


def assert_nothing_left(job_id: str, addresses: dict[str, str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        steps = slurm("squeue", "-h", "-s", "-j", job_id).strip() if job_in_queue(job_id) else ""
        if not steps and not job_in_queue(job_id) and not role_processes(addresses):
            return
        time.sleep(0.5)
    raise AssertionError(f"left behind: steps {slurm('squeue', '-h', '-s')!r}, processes {role_processes(addresses)}")


def job_in_queue(job_id: str) -> bool:
    try:
        return bool(slurm("squeue", "-h", "-j", job_id).strip())
    except subprocess.CalledProcessError:
        return False  # "Invalid job id": it has left


def served_text() -> str:
    """The recipe the live run serves: its answers of 256 tokens keep each decode running for a few of the run's
    one-second scrapes (64-token answers could finish between two scrapes on a loaded machine, so that no scrape saw
    the decode worker running)."""
    return RECIPE.read_text().replace("osl: 64", "osl: 256")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.CompletedProcess[str], Path]]:
    """One live run of the recipe (both concurrencies on one deployment brought up on three nodes, most of its
    time): the placement test and the server-metrics test below assert on it. Its result and its out folder."""
    tmp_path = tmp_path_factory.mktemp("served")
    out = tmp_path / "out"
    recipe = tmp_path / "served.yaml"
    recipe.write_text(served_text())
    proc = subprocess.run(run_argv(recipe, out), env=env(tmp_path), capture_output=True, text=True, timeout=240)
    try:
        yield proc, out
    finally:
        wait_gone(out)  # the next test's deployment needs the nodes' ports


def test_roles_land_on_different_nodes_talk_over_their_addresses_and_serve_the_client(
        served: tuple[subprocess.CompletedProcess[str], Path], multinode_cluster: dict[str, str]) -> None:
    proc, out = served
    assert proc.returncode == 0, proc.stderr[-3000:]
    # One job per concurrency (`<id>-conc<N>`), both served by the one deployment (one allocation, below).
    every = outcomes(out)
    assert [o["status"] for o in every] == ["valid", "valid"], every
    outcome = every[0]
    job_dir = out / "jobs" / outcome["job_id"]
    run_doc = json.loads((job_dir / "run.json").read_text())
    topology = run_doc["provenance"]["topology"]
    roles = topology["roles"]
    assert set(roles) == {"prefill", "decode", "router"} and topology["disaggregated"]
    prefill_nodes = [w["node"] for w in roles["prefill"]["placed"]]
    decode_nodes = [w["node"] for w in roles["decode"]["placed"]]
    # Every worker on a node of its own; the router beside the first prefill worker.
    assert len(set(prefill_nodes + decode_nodes)) == 3 and roles["router"]["placed"][0]["node"] == prefill_nodes[0]
    for role in roles.values():
        for w in role["placed"]:
            # Read back from the process itself, which bound its node's namespace address (not loopback).
            assert w["reported_node"] == w["node"]
            if role["kind"] in ("prefill", "decode"):  # each worker's GPUs, as its server reports them
                assert w["gpus"] == role["gpus_per_worker"] == 8
            assert urlparse(w["url"]).hostname == multinode_cluster[w["node"]] != "127.0.0.1"
    # GPUs per role as planned (2 prefill x TP8 + 1 decode x TP8), the job's 24, and the throughput divides by them.
    assert (roles["prefill"]["workers"], roles["prefill"]["gpus_per_worker"]) == (2, 8)
    assert topology["gpus"] == 24 == run_doc["provenance"]["hardware"]["gpus"]
    assert topology["kv_transfer"] == "mori"  # the backend's name, as virtual time records it; the links apart
    summary = json.loads((job_dir / "summary.json").read_text())
    assert summary["throughput"]["gpus"] == 24 and summary["validity"]["verdict"] == "valid"
    # The summary's deployment and roles blocks are read from that same record (one shape for every path).
    assert summary["deployment"]["gpus"] == 24 and summary["deployment"]["nodes"] == 3
    assert {r: summary["roles"][r]["gpus"] for r in ("prefill", "decode")} == {"prefill": 16, "decode": 8}
    # The client talked to the router: its address is the one the run's command names.
    router_url = roles["router"]["placed"][0]["url"]
    assert f"--host {urlparse(router_url).hostname}" in (job_dir / "server_command.txt").read_text()
    roles_dir = next((out / "servers").glob("*/roles"))
    assert "simulated PD router" in (roles_dir / "router-0.log").read_text()
    commands = (roles_dir / "commands.txt").read_text()
    for node in prefill_nodes + decode_nodes:  # every role's step, pinned to its node
        assert f"--nodelist={node} " in commands
    # One power sampler per node that ran a worker, each reading its worker's modelled power.
    for node in prefill_nodes + decode_nodes:
        lines = (roles_dir / "power" / node / "gpu_metrics.jsonl").read_text().splitlines()
        assert len(lines) > 2 and '"backend":"sim"' in lines[0].replace(" ", ""), lines[:2]
    # Each job's power block integrates every node's samples over its window: all 24 GPUs of all roles, the
    # per-token figures dividing by them all, and each role's share, also beside what the role did.
    for done in every:
        summary = json.loads((out / "jobs" / done["job_id"] / "summary.json").read_text())
        power = summary["power"]
        assert power["power_valid"] is True and power["reasons"] == [] and power["source"] == "simulated", power
        assert power["expected_gpus"] == power["observed_gpus"] == 24
        assert {g.split("/")[0] for g in power["observed_gpu_ids"]} == set(prefill_nodes + decode_nodes)
        shares = power["roles"]
        assert {r: shares[r]["observed_gpus"] for r in ("prefill", "decode")} == {"prefill": 16, "decode": 8}
        assert shares["prefill"]["energy_j"] + shares["decode"]["energy_j"] == pytest.approx(power["energy_j"])
        assert power["joules_per_output_token"] == pytest.approx(
            power["energy_j"] / summary["tokens"]["output_total"])
        assert power["avg_power_w"] == pytest.approx(power["avg_total_gpu_power_w"] / 24)
        # The decode worker runs every step of every request: it draws more per GPU than the prefill workers.
        assert shares["decode"]["avg_power_w"] > shares["prefill"]["avg_power_w"] > 0
        assert summary["roles"]["decode"]["power"] == shares["decode"]
    assert_nothing_left(slurm_job_id(out), multinode_cluster)


def test_a_role_that_cannot_come_up_fails_the_job_and_every_step_is_torn_down(
        tmp_path: Path, multinode_cluster: dict[str, str]) -> None:
    decode_node = sorted(multinode_cluster)[2]  # nodes 0, 1: prefill workers; node 2: the decode worker
    address = multinode_cluster[decode_node]
    blocker = hold_port(decode_node, address, 8000)  # the decode worker's port on its node, taken by another process
    try:
        out = tmp_path / "out"
        # One concurrency, so one job: a second would only relaunch the same roles to fail the same way.
        recipe = tmp_path / "one-conc.yaml"
        recipe.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]"))
        proc = subprocess.run(run_argv(recipe, out), env=env(tmp_path), capture_output=True, text=True, timeout=240)
    finally:
        blocker.terminate()
        blocker.wait(timeout=30)
    assert proc.returncode == 1, proc.stderr[-3000:]
    every = outcomes(out)
    assert {o["status"] for o in every} == {"failed"}, every
    outcome = every[0]
    assert f"decode worker 0 on node {decode_node} did not come up" in outcome["reasons"][0]
    from llmsweep.results.store import Store

    with Store(tmp_path / "store.sqlite", readonly=True) as store:
        assert [p for p in store.results() if p.job_id == outcome["job_id"] and p.verdict == "valid"] == []
    assert_nothing_left(slurm_job_id(out), multinode_cluster)


def test_two_deployments_of_one_sweep_never_share_a_node_and_both_serve(
        tmp_path: Path, multinode_cluster: dict[str, str]) -> None:
    """Two topologies of one recipe (2P1D on three nodes, 1P1D on two) are two batch jobs submitted together. Their
    roles listen on the same fixed ports of their nodes (workers 8000, router 8001): each allocation holds its nodes
    whole (`--exclusive`), so Slurm runs the second where the first is not, or after it. Sharing the nodes, both
    failed to start: "address already in use"."""
    recipe = tmp_path / "two.yaml"
    text = RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]")
    decode = "        decode: {num-worker: 1, tp: 8, ep: 1, dp-attn: false}\n"
    assert text.count(decode) == 1
    recipe.write_text(text.replace(decode, decode + "      - conc-list: [2]\n"
                                   "        prefill: {num-worker: 1, tp: 8, ep: 8, dp-attn: true}\n" + decode))
    out = tmp_path / "out"
    proc = subprocess.run(run_argv(recipe, out), env=env(tmp_path), capture_output=True, text=True, timeout=240)
    try:
        assert proc.returncode == 0, proc.stderr[-3000:]
        every = outcomes(out)
        assert [o["status"] for o in every] == ["valid", "valid"], every
        assert "address already in use" not in proc.stderr
        workers = sorted(len(json.loads((out / "jobs" / o["job_id"] / "summary.json").read_text())["provenance"][
            "topology"]["roles"]["prefill"]["placed"]) for o in every)
        assert workers == [1, 2]  # one job on each deployment
        scripts = list((out / "servers").glob("*/job.sbatch"))
        assert len(scripts) == 2 and all("#SBATCH --exclusive" in p.read_text() for p in scripts)
    finally:
        wait_gone(out)
    for job_id in (p.read_text().strip() for p in (out / "servers").glob("*/slurm_job_id")):
        assert_nothing_left(job_id, multinode_cluster)


def long_recipe(tmp_path: Path) -> Path:
    """The disaggregated recipe with a workload long enough to interrupt mid-run."""
    recipe = tmp_path / "long.yaml"
    recipe.write_text(RECIPE.read_text().replace("osl: 64", "osl: 4096").replace("num-prompts-per-conc: 4",
                                                                                 "num-prompts-per-conc: 64"))
    return recipe


@pytest.fixture(scope="module")
def killed_resumed_then_interrupted(tmp_path_factory: pytest.TempPathFactory,
                                    multinode_cluster: dict[str, str]) -> dict[str, Any]:
    """One sequence that feeds the two tests below (each a run brought up to its router on three nodes, which is
    most of their time): a run SIGKILLed once its router is up, its `--resume`, and a Ctrl-C of that resumed run
    once its own roles serve. What each step saw is recorded here and asserted by the tests."""
    tmp_path = tmp_path_factory.mktemp("killed-resumed")
    recipe = long_recipe(tmp_path)
    out = tmp_path / "out"
    router_logs = out / "servers"
    seen: dict[str, Any] = {}

    def router_up() -> bool:
        logs = list(router_logs.glob("*/roles/router-0.log"))
        return bool(logs) and "simulated PD router" in logs[0].read_text()

    def start(*extra: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / "run.log", "ab") as fh:
            return subprocess.Popen([*run_argv(recipe, out), *extra], env=env(tmp_path), stdout=fh,
                                    stderr=subprocess.STDOUT)

    first = start()
    try:
        wait_until(router_up, first, tmp_path / "run.log")
        seen["old_job"] = old_job = slurm_job_id(out)
        first.kill()  # SIGKILL: the submitter cannot cancel anything; the allocation and its steps run on
        first.wait(timeout=30)
        seen["left_after_kill"] = job_in_queue(old_job) and bool(role_processes(multinode_cluster))
        for log in router_logs.glob("*/roles/router-0.log"):
            log.unlink()
        killed_log_end = (tmp_path / "run.log").stat().st_size
        resumed = start("--resume")
        try:
            wait_until(router_up, resumed, tmp_path / "run.log")
            # Whether the resumed run had cancelled the old allocation (its steps with it) before it launched its own.
            seen["old_job_queued_at_relaunch"] = job_in_queue(old_job)
            seen["new_job"] = slurm_job_id(out)
            seen["roles_running_at_sigint"] = bool(role_processes(multinode_cluster))
            resumed.send_signal(signal.SIGINT)
            seen["rc_after_sigint"] = resumed.wait(timeout=120)
            seen["resume_log"] = (tmp_path / "run.log").read_bytes()[killed_log_end:].decode(errors="replace")
        finally:
            if resumed.poll() is None:
                resumed.kill()
    finally:
        if first.poll() is None:
            first.kill()
    return seen


def test_ctrl_c_of_the_run_tears_down_every_role_step(killed_resumed_then_interrupted: dict[str, Any],
                                                      multinode_cluster: dict[str, str]) -> None:
    """Ctrl-C of a run whose roles serve (here the resumed run of the fixture: Ctrl-C takes the same path in any
    run) ends it with an error and leaves no step and no role process."""
    seen = killed_resumed_then_interrupted
    assert seen["roles_running_at_sigint"], "the roles run while the client does"
    assert seen["rc_after_sigint"] != 0
    assert_nothing_left(seen["new_job"], multinode_cluster)


def test_resume_after_a_killed_run_cancels_its_role_steps_before_launching_again(
        killed_resumed_then_interrupted: dict[str, Any], multinode_cluster: dict[str, str]) -> None:
    seen = killed_resumed_then_interrupted
    assert seen["left_after_kill"], "a SIGKILLed submitter leaves its allocation and its role steps running"
    # The resumed run cancelled the old allocation (its steps with it) before it launched its own.
    assert not seen["old_job_queued_at_relaunch"] and seen["new_job"] != seen["old_job"]
    said = [line for line in seen["resume_log"].splitlines() if f"cancelling Slurm job {seen['old_job']}" in line]
    assert len(said) == 1 and said[0].endswith("left by an earlier, interrupted run"), said  # once, saying why
    assert seen["rc_after_sigint"] != 0
    assert_nothing_left(seen["old_job"], multinode_cluster)
    assert_nothing_left(seen["new_job"], multinode_cluster)


def wait_until(predicate: Any, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
        time.sleep(0.2)


def test_a_topology_wider_than_the_cluster_is_refused_with_slurms_reason_not_left_pending(
        tmp_path: Path, multinode_cluster: dict[str, str]) -> None:
    recipe = tmp_path / "wide.yaml"  # one node per worker: more workers than the cluster has nodes
    workers = len(multinode_cluster)
    recipe.write_text(RECIPE.read_text().replace("prefill: {num-worker: 2,", f"prefill: {{num-worker: {workers},"))
    out = tmp_path / "out"
    proc = subprocess.run(run_argv(recipe, out), env=env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    every = outcomes(out)
    assert {o["status"] for o in every} == {"refused"}, every
    outcome = every[0]
    assert f"Slurm cannot allocate the {workers + 1} nodes" in outcome["reasons"][0]
    assert "Requested node configuration is not available" in outcome["reasons"][0]
    assert not list((out / "servers").glob("*/slurm_job_id"))  # nothing was submitted

# ------------------------------------------------------------------ server metrics of a role-by-role deployment
#
# In this file, not one of its own: two files would run on two xdist workers at once, and two deployments need the
# same three nodes, each allocation holding its nodes whole (`--exclusive`): the second would wait for the first.
#
# A disaggregated job served role by role reads what each worker did from the worker's own `/metrics`, as the
# virtual-time run of the same recipe reads it from its modelled workers: `server_metrics.jsonl` holds every worker's
# series labelled with its role, the summary carries `server_metrics` and each role's `metrics` (and the role's
# `tp`/`ep`) in the virtual path's shape, and the required-metrics gate runs.


def run_summaries(recipe: Path, out: Path, tmp_path: Path, *live: str) -> list[dict[str, Any]]:
    env = {**os.environ, "SLURM_CONF": str(MN_CONF), "LLMSWEEP_STORE": str(tmp_path / f"{out.name}.sqlite")}
    argv = [sys.executable, "-m", "llmsweep.cli.main", "run", str(recipe), *live, "--out", str(out), "--no-report"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((out / "jobs" / o["job_id"] / "summary.json").read_text())
            for o in json.loads((out / "run.json").read_text())["outcomes"]]


def test_a_role_by_role_job_scrapes_every_worker_and_its_summary_says_what_each_role_did(
        served: tuple[subprocess.CompletedProcess[str], Path], tmp_path: Path) -> None:
    # The live run is the placement test's (`served`: bringing a deployment up is most of the cost); its first job
    # (conc 2) against the same job run in virtual time.
    proc, out = served
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = json.loads((out / "run.json").read_text())["outcomes"][0]["job_id"]
    job_dir = out / "jobs" / first
    live = json.loads((job_dir / "summary.json").read_text())
    assert live["provenance"]["options"]["concurrency"] == 2
    recipe = tmp_path / "one-conc.yaml"
    recipe.write_text(served_text().replace("conc-list: [2, 4]", "conc-list: [2]"))
    (virtual,) = run_summaries(recipe, tmp_path / "virtual", tmp_path)
    try:
        scrapes = [json.loads(line) for line in (job_dir / "server_metrics.jsonl").read_text().splitlines()]
        ok = [s for s in scrapes if "samples" in s]
        assert len(ok) >= 2 and len(ok) == len(scrapes), scrapes[:3]
        # every worker's own series, each labelled with its role and index (three workers: 2 prefill, 1 decode)
        workers = {(labels.get("role"), labels.get("worker")) for s in ok for _n, labels, _v in s["samples"]}
        assert workers == {("prefill", "0"), ("prefill", "1"), ("decode", "0")}
        metrics = live["server_metrics"]
        assert metrics["present"] and metrics["scrapes"] == len(ok) and metrics["scrape_errors"] == 0
        # the required-metrics gate ran, on the workers' prefix, as in virtual time
        gate = virtual["validity"]["gates"]["require_metrics_prefix"]
        assert gate and live["validity"]["gates"]["require_metrics_prefix"] == gate
        assert metrics["required_prefix"] == {"prefix": gate, "found": True}
        assert live["validity"]["verdict"] == "valid", live["validity"]
        # the roles block in the virtual path's shape: each worker role's metrics, its tp and ep
        for role in ("prefill", "decode"):
            got, want = live["roles"][role], virtual["roles"][role]
            assert set(got["metrics"]) == set(want["metrics"])
            assert {k: got[k] for k in ("tp", "ep", "dp_attention", "max_running_requests")} == {
                k: want[k] for k in ("tp", "ep", "dp_attention", "max_running_requests")}
        # the router runs no engine: its block is the virtual path's (what ran, no metrics, no parallelism)
        assert set(live["roles"]["router"]) - {"placed"} == set(virtual["roles"]["router"])
        # what each role did: the prompts computed on the prefill workers and taken in by the decode worker (as the
        # engines count them; the deployment's are its prefill workers' alone), the generated tokens on the decode one
        prefill, decode = live["roles"]["prefill"]["metrics"], live["roles"]["decode"]["metrics"]
        assert prefill["prompt_tokens"] > 0 and decode["prompt_tokens"] > 0
        assert live["server_metrics"]["tokens"]["prompt_total"] == prefill["prompt_tokens"]
        assert decode["generation_tokens"] > prefill["generation_tokens"]
        assert decode["running_max"] >= 1
    finally:
        wait_gone(out)


def wait_gone(out: Path) -> None:
    """The run's allocation has left the queue (its steps, the workers, with it)."""
    ids = [p.read_text().strip() for p in (out / "servers").glob("*/slurm_job_id")]
    deadline = time.monotonic() + 30
    for job_id in ids:
        while time.monotonic() < deadline:
            try:
                if not slurm("squeue", "-h", "-j", job_id).strip():
                    break
            except subprocess.CalledProcessError:
                break  # "Invalid job id": it has left
            time.sleep(0.5)
        else:
            raise AssertionError(f"Slurm job {job_id} is still queued")


FOUR_PER_NODE = """labels:
  mi355x-disagg: [mi355x-disagg_0, mi355x-disagg_1, mi355x-disagg_2]
hardware:
  mi355x-disagg:
    available-cpu-dram-mib: 1_000_000
    gpus-per-node: 4
"""


def test_a_worker_wider_than_a_node_is_recorded_on_every_node_it_spans_as_virtual_time_records_it(
        tmp_path: Path, multinode_cluster: dict[str, str]) -> None:
    """A fleet of 4 GPUs per node (`--runner-config`): a TP4 prefill worker on node 0, a TP8 decode worker on nodes
    1 and 2 (one simulator step on node 1 models both). The live deployment recorded `roles.decode.nodes [1]`, no
    `gpus_per_node` and `kv_transfer: mori (modelled link …)` where virtual time records `[1, 2]`, 4 and `mori`."""
    fleet, recipe = tmp_path / "fleet.yaml", tmp_path / "wide.yaml"
    fleet.write_text(FOUR_PER_NODE)
    recipe.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]").replace(
        "prefill: {num-worker: 2, tp: 8, ep: 8, dp-attn: true}",
        "prefill: {num-worker: 1, tp: 4, ep: 1, dp-attn: false}"))
    out = tmp_path / "live"
    try:
        (live,) = run_summaries(recipe, out, tmp_path, "--runner-config", str(fleet), *LIVE_ON_SLURM)
    finally:
        wait_gone(out)
    (virtual,) = run_summaries(recipe, tmp_path / "virtual", tmp_path, "--runner-config", str(fleet))
    shared = ("nodes", "gpus", "gpus_per_node", "kv_transfer")
    assert {k: live["deployment"][k] for k in shared} == {k: virtual["deployment"][k] for k in shared} == {
        "nodes": 3, "gpus": 12, "gpus_per_node": 4, "kv_transfer": "mori"}
    assert {r: live["roles"][r]["nodes"] for r in live["roles"]} == {
        r: virtual["roles"][r]["nodes"] for r in virtual["roles"]} == {"prefill": [0], "decode": [1, 2], "router": [0]}
    (decode,) = live["provenance"]["topology"]["roles"]["decode"]["placed"]
    names = live["provenance"]["topology"]["node_names"]
    assert decode["nodes"] == names[1:] and decode["node"] == decode["reported_node"] == names[1]
    assert_nothing_left(slurm_job_id(out), multinode_cluster)


def test_a_speculative_point_served_on_slurm_records_the_acceptance_length_virtual_time_records(
        tmp_path: Path, multinode_cluster: dict[str, str]) -> None:
    """A DeepSeek-R1 MTP row (K=2) that measures real acceptance runs on the simulator at its estimate: served role
    by role on the cluster its result recorded no `provenance.acceptance`, where virtual time records the value, its
    source (`estimate`) and the basis."""
    recipe = tmp_path / "mtp.yaml"
    text = RECIPE.read_text().replace("- conc-list: [2, 4]", "- conc-list: [2]\n        spec-decoding: mtp").replace(
        "model: Qwen/Qwen3.5-397B-A17B-FP8", "model: deepseek-ai/DeepSeek-R1-0528").replace(
        "model-prefix: qwen3.5", "model-prefix: dsr1").replace(
        "engine: { name: sim }", "engine: { name: sim }\n    spec-decoding: { method: mtp, num-steps: 2 }")
    recipe.write_text(text)
    out = tmp_path / "live"
    try:
        (live,) = run_summaries(recipe, out, tmp_path, *LIVE_ON_SLURM)
    finally:
        wait_gone(out)
    (virtual,) = run_summaries(recipe, tmp_path / "virtual", tmp_path)
    accepted = live["provenance"].get("acceptance")
    assert accepted == virtual["provenance"]["acceptance"], (accepted, virtual["provenance"].get("acceptance"))
    assert accepted["source"] == "estimate" and accepted["value"] == pytest.approx(2.44) and "K=2" in accepted["basis"]
    assert_nothing_left(slurm_job_id(out), multinode_cluster)


def test_an_option_sbatch_refuses_for_a_multinode_group_is_bad_input_with_that_options_fix(tmp_path: Path) -> None:
    """`partition=nosuch` for a disaggregated group was refused as 'Slurm cannot allocate the 3 nodes …' with the
    fix of a topology too wide, exit 1; a one-node group says to give a partition `sinfo` lists, exit 2."""
    out = tmp_path / "out"
    argv = [*run_argv(RECIPE, out), "--executor-option", "partition=nosuch"]
    proc = subprocess.run(argv, env=env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Invalid partition name" in proc.stderr and "give a partition `sinfo` lists" in proc.stderr
    assert "cannot allocate" not in proc.stderr
    assert not list((out / "servers").glob("*/slurm_job_id"))  # nothing was submitted


def test_a_per_node_option_no_node_meets_is_bad_input_not_a_topology_too_wide(tmp_path: Path) -> None:
    """`mem=999999G` for a disaggregated group: no node has that much memory, whatever the topology. It was refused
    per job as 'Slurm cannot allocate the 3 nodes the topology … needs' with the fix to choose a topology with fewer
    workers (exit 1), sending the user to the recipe for a typo in an option; a one-node group names the option, exit
    2, and so does this one now."""
    out = tmp_path / "out"
    argv = [*run_argv(RECIPE, out), "--executor-option", "mem=999999G"]
    proc = subprocess.run(argv, env=env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Requested node configuration is not available" in proc.stderr, proc.stderr[-3000:]
    assert "ask for what a node of the partition has" in proc.stderr and "mem=" in proc.stderr, proc.stderr[-3000:]
    assert "cannot allocate" not in proc.stderr and "fewer workers" not in proc.stderr, proc.stderr[-3000:]
    assert not list((out / "servers").glob("*/slurm_job_id"))  # nothing was submitted


def test_a_topology_the_excluded_nodes_leave_too_little_room_for_says_so(
        tmp_path: Path, multinode_cluster: dict[str, str]) -> None:
    """`exclude=[<a node>]` leaves the partition fewer nodes than the topology needs: its jobs are refused (the
    others would run) with a fix that names the exclusion, the one input that made it too small — not only 'another
    partition, or fewer workers'."""
    excluded = sorted(multinode_cluster)[-1]
    out = tmp_path / "out"
    argv = [*run_argv(RECIPE, out), "--executor-option", f"exclude=[{excluded}]"]
    proc = subprocess.run(argv, env=env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    every = outcomes(out)
    assert {o["status"] for o in every} == {"refused"}, every
    reason = every[0]["reasons"][0]
    assert "Slurm cannot allocate the 3 nodes" in reason and f"exclude ({excluded})" in reason, reason
    assert not list((out / "servers").glob("*/slurm_job_id"))  # nothing was submitted


def test_a_partition_whose_nodes_are_drained_is_not_taken_for_a_bad_option(
        tmp_path: Path, multinode_cluster: dict[str, str]) -> None:
    """Every node drained (an administrator's `scontrol update state=drain`, here for the length of the run): sbatch
    --test-only says 'Requested node configuration is not available' as it does for an option no node meets, for one
    node too. The jobs are refused as a cluster that cannot hold the topology now, naming the nodes that cannot take
    jobs and where Slurm says why — not bad input sending the user to change cpus_per_task or mem."""
    nodes = ",".join(sorted(multinode_cluster))
    out = tmp_path / "out"
    slurm("scontrol", "update", f"nodename={nodes}", "state=drain", "reason=llmsweep-test-drained")
    try:
        proc = subprocess.run(run_argv(RECIPE, out), env=env(tmp_path), capture_output=True, text=True, timeout=120)
    finally:
        slurm("scontrol", "update", f"nodename={nodes}", "state=resume")
    assert proc.returncode == 1, proc.stderr[-3000:]
    every = outcomes(out)
    assert {o["status"] for o in every} == {"refused"}, every
    reason = every[0]["reasons"][0]
    assert "Slurm cannot allocate the 3 nodes" in reason and "sinfo -R" in reason, reason
    assert all(node in reason for node in multinode_cluster), reason
    assert "cpus_per_task" not in proc.stderr, proc.stderr[-3000:]
