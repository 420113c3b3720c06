"""A disaggregated job run role by role on ONE host with the local executor: `llmsweep run --live` on a simulated
prefill/decode recipe starts each prefill and decode worker and the router as a process of its own on a free loopback
port, the router pointed at the workers; the client's requests go through the router; provenance (and the summary's
`deployment` and `roles` blocks) records the topology read back from each role's `/version`; both concurrencies run on
the one deployment; and success, Ctrl-C, and a SIGKILL of the run followed by `--resume` (then a Ctrl-C of that) leave
no role process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from support.held_port import holder
from support.procs import alive, read_proc, stat_fields, wait_for

from llmsweep.execute.virtual_disagg import disagg_config
from llmsweep.http_app import node_name
from llmsweep.plan.job import Job
from llmsweep.sim.identity import simulator_digest

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "disagg-sim.yaml"
"""Two prefill workers (TP8) and one decode worker (TP8) on the simulator, concurrencies 2 and 4, 4 prompts each."""


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "LLMSWEEP_STORE": str(tmp_path / "store.sqlite"), "PYTHONUNBUFFERED": "1"}


def run_argv(recipe: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "llmsweep.cli.main", "run", str(recipe), "--live", "--out", str(out), "--no-report",
            *extra]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def role_pid_files(out: Path) -> list[Path]:
    """The pid file of every role process (and power sampler) the local placement started: `server.<label>.pid`."""
    return sorted(p for p in (out / "servers").glob("*/server.*.pid")) if (out / "servers").is_dir() else []


def role_pids(out: Path) -> dict[str, int]:
    pids = {}
    for path in role_pid_files(out):
        try:
            pids[path.name] = int(read_json(path)["pid"])
        except (FileNotFoundError, ValueError, KeyError):  # being written or removed meanwhile
            continue
    return pids


def left_behind(pids: list[int], where: Path) -> list[str]:
    """What is left of the given processes (their process groups: each role leads its own), and any process working
    in `where` (the runs start there, and every role process inherits it) or naming it (a power sampler's folder)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        fields = stat_fields(pid)
        if not fields or fields[0] in "ZX":
            continue
        cmdline = read_proc(pid, "cmdline").replace(b"\0", b" ").decode(errors="replace")
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        if (pid in pids or int(fields[2]) in pids or Path(cwd).is_relative_to(where)
                or ("llmsweep" in cmdline and str(where) in cmdline)):
            found.append(f"{pid}: {cmdline}")
    return found


def assert_gone(pids: list[int], where: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while left_behind(pids, where) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left_behind(pids, where), left_behind(pids, where)



def _decode_exits(topology: Any, line: str, status: int) -> Any:
    """`topology` with its decode workers replaced by a process that prints `line` and exits with `status` at once."""
    decode = topology.roles[1]
    assert decode.kind == "decode"
    argv = (sys.executable, "-c", f"import sys; print({line!r}, flush=True); sys.exit({status})")
    broken = decode.model_copy(update={"workers": tuple(
        w.model_copy(update={"spec": w.spec.model_copy(update={"argv": argv})}) for w in decode.workers)})
    return topology.model_copy(update={"roles": (topology.roles[0], broken, *topology.roles[2:])})


def test_roles_run_as_processes_of_this_host_serve_the_client_through_the_router_and_are_read_back(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(run_argv(RECIPE, out), env=env(tmp_path), capture_output=True, text=True, timeout=240,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    outcomes = read_json(out / "run.json")["outcomes"]
    assert [o["status"] for o in outcomes] == ["valid", "valid"], outcomes
    # one deployment, brought up once, serves both concurrencies one after the other
    assert proc.stderr.count("launching 4 role processes") == 1, proc.stderr[-4000:]
    host = node_name()
    placements = []
    for outcome in outcomes:
        job_dir = out / "jobs" / outcome["job_id"]
        summary = read_json(job_dir / "summary.json")
        provenance = summary["provenance"]
        assert (provenance["launch"]["executor"], provenance["launch"]["launcher"]) == ("local", "local")
        topology = provenance["topology"]
        roles = topology["roles"]
        assert set(roles) == {"prefill", "decode", "router"} and topology["disaggregated"]
        assert topology["router_policy"] == "round_robin"  # what the router's /version said
        # the simulator build the deployment ran, as each role's own /version said (the same tree as this process's;
        # it was the router's alone)
        assert provenance["simulator"]["digest"] == simulator_digest()
        assert {w["simulator_digest"] for role in roles.values() for w in role["placed"]} == {simulator_digest()}
        # and its calibration, each pool's as its workers say it, in virtual time's words (it recorded none: the
        # router's /version says no calibration)
        pools = {k: {w["calibration"] for w in roles[k]["placed"]} for k in ("prefill", "decode")}
        assert all(len(said) == 1 and None not in said for said in pools.values()), pools
        assert provenance["simulator"]["calibration"] == "; ".join(f"{k}: {next(iter(pools[k]))}"
                                                                   for k in ("prefill", "decode"))
        assert topology["node_names"] == [host] and topology["nodes"] == 1
        # role counts and GPUs as planned, each worker's read back from its own /version
        assert [len(roles[r]["placed"]) for r in ("prefill", "decode", "router")] == [2, 1, 1]
        ports = []
        for role in roles.values():
            for worker in role["placed"]:
                url = urlparse(worker["url"])
                assert url.hostname == "127.0.0.1" and worker["node"] == worker["reported_node"] == host, worker
                ports.append(url.port)
                if role["kind"] != "router":
                    assert worker["gpus"] == role["gpus_per_worker"] == 8
        # the links the KV crossed, as the decode worker models them: the pairs' links virtual time uses
        job = Job.model_validate(read_json(job_dir / "job.json"))
        assert topology["links"] == [link.model_dump(mode="json", exclude={"source"})
                                     for link in disagg_config(job).links()], topology["links"]
        # every role on a loopback port of its own, none the port the topology plans per node (8000, router 8001)
        assert len(set(ports)) == 4 and not {8000, 8001} & set(ports), ports
        placements.append({r: [w["url"] for w in role["placed"]] for r, role in roles.items()})
        # the job folder's server command (the dashboard's drill-down) says how every role ran, not only the router
        command = (job_dir / "server_command.txt").read_text()
        assert command.count("sim serve") == 3 and command.count("sim router") == 2, command  # router: twice
        assert command.count("--role prefill") == 2 and command.count("--role decode") == 1
        assert all(f"--port {urlparse(w['url']).port}" in command for role in roles.values() for w in role["placed"])
        # the summary's blocks are read from that record
        deployment = summary["deployment"]
        assert (deployment["gpus"], deployment["nodes"]) == (24, 1)
        # the KV-transfer backend in virtual time's words (its name: the links are `links`), and no GPUs per node:
        # every worker ran on this host, whose GPUs are not the runner's nodes'
        assert deployment["kv_transfer"] == disagg_config(job).describe()["kv_transfer"] == "mori"
        assert deployment["gpus_per_node"] is None
        assert summary["throughput"]["gpus"] == 24
        assert {r: (summary["roles"][r]["workers"], summary["roles"][r]["gpus"]) for r in ("prefill", "decode")} == {
            "prefill": (2, 16), "decode": (1, 8)}
        # the client talked to the router, which sent every request through a prefill and the decode worker
        assert provenance["endpoint"]["base_url"] == roles["router"]["placed"][0]["url"]
        successful = summary["requests"]["successful"]
        assert successful == 4 * provenance["options"]["concurrency"]  # the recipe's 4 prompts per concurrency
        prefill, decode = summary["roles"]["prefill"]["metrics"], summary["roles"]["decode"]["metrics"]
        # the prompts computed on the prefill workers and taken in by the decode worker (as the engines count them),
        # the deployment's its prefill workers' alone (not counted twice)
        assert prefill["prompt_tokens"] > 0 and decode["prompt_tokens"] > 0
        assert summary["server_metrics"]["tokens"]["prompt_total"] == prefill["prompt_tokens"]
        assert decode["generation_tokens"] > prefill["generation_tokens"]  # the generated tokens on the decode worker
        # every request's KV crossed to the decode worker once, read from its own transfer series (not modelled here)
        assert decode["kv_transfers"] == successful and decode["kv_transfer_bytes"] > 0, decode
        scrapes = [json.loads(line) for line in (job_dir / "server_metrics.jsonl").read_text().splitlines()]
        workers = {(labels.get("role"), labels.get("worker")) for s in scrapes if "samples" in s
                   for _n, labels, _v in s["samples"]}
        assert workers == {("prefill", "0"), ("prefill", "1"), ("decode", "0")}
        # power: one sampler per worker (they share the host), over all 24 GPUs of all roles
        power = summary["power"]
        assert power["power_valid"] and power["observed_gpus"] == 24, power
        assert {g.split("/")[0] for g in power["observed_gpu_ids"]} == {"prefill0", "prefill1", "decode0"}
    assert placements[0] == placements[1]  # both jobs on the same started roles
    roles_dir = next((out / "servers").glob("*/roles"))
    router_log = (roles_dir / "router-0.log").read_text()
    worker_urls = placements[0]["prefill"] + placements[0]["decode"]
    assert all(url in router_log for url in worker_urls), router_log  # the router was pointed at the started workers
    commands = (roles_dir / "commands.txt").read_text()
    for url in [*worker_urls, *placements[0]["router"]]:
        assert f"--port {urlparse(url).port}" in commands
    assert not role_pid_files(out) and not list((out / "servers").glob("*/server*.pid"))  # all stopped and gone
    assert_gone([], tmp_path)


def long_recipe(tmp_path: Path) -> Path:
    """The recipe with a job long enough to interrupt mid-way: 128 requests of 128 tokens at conc 2, half a minute.
    Not longer requests: the tests wait for a job's first record (its warm-up request's end, ~0.5 s at 128 tokens
    against ~4.5 s at 1,024) before they interrupt it."""
    recipe = tmp_path / "long.yaml"
    text = RECIPE.read_text()
    assert "osl: 64" in text and "num-prompts-per-conc: 4" in text
    recipe.write_text(text.replace("osl: 64", "osl: 128").replace("num-prompts-per-conc: 4",
                                                                    "num-prompts-per-conc: 64"))
    return recipe


def start(recipe: Path, out: Path, tmp_path: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """The run in the background with SIGINT at its default (a script's `cmd &` would start it ignored)."""
    fh = open(log, "ab")  # noqa: SIM115 - the child's; closed with the test's tmp dir
    return subprocess.Popen(run_argv(recipe, out, *extra), env=env(tmp_path), stdout=fh, stderr=subprocess.STDOUT,
                            cwd=tmp_path, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def serving(out: Path) -> dict[str, int] | None:
    """Every role's pid (four roles, three samplers) once the first job has records: the roles serve the client."""
    jobs = out / "jobs"
    measuring = jobs.is_dir() and any((d / "records.jsonl").is_file() and (d / "records.jsonl").stat().st_size
                                      for d in jobs.iterdir())
    pids = role_pids(out)
    return pids if measuring and len(pids) == 7 else None


def starting(out: Path) -> dict[str, int] | None:
    """The pids of the roles started so far, once a worker has started and before the router has."""
    pids = role_pids(out)
    return pids if pids and "server.router0.pid" not in pids else None


# (a lone Ctrl-C mid-job is the first of the second case's signals, and `test_resume_…` ends on one: not run apart,
# for the suite's time)
@pytest.mark.parametrize(("when", "signals"), [
    (serving, (signal.SIGINT, signal.SIGTERM, signal.SIGINT)),
    (starting, (signal.SIGINT,)),
], ids=["mid-job-then-more-during-teardown", "while-the-roles-start"])
def test_ctrl_c_tears_down_every_role_process(tmp_path: Path, when: Callable[[Path], dict[str, int] | None],
                                              signals: tuple[signal.Signals, ...]) -> None:
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start(long_recipe(tmp_path), out, tmp_path, log)
    pids: list[int] = []
    try:
        found = wait_for(lambda: when(out), 120, f"{when.__name__}", proc, log, poll_s=0.2)
        pids = list(found.values())
        assert all(alive(p) for p in pids)
        for sig in signals:  # more signals arrive while the roles are torn down: they hurry it, never cut it short
            proc.send_signal(sig)
            time.sleep(0.05)
        assert proc.wait(timeout=120) == 130, log.read_text(errors="replace")[-4000:]
        assert_gone(pids, tmp_path)
        assert not role_pid_files(out) and not list((out / "servers").glob("*/server*.pid"))
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in pids:  # test clean-up of what this test started, by pid (never by name)
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)


def test_resume_after_a_killed_run_stops_its_roles_and_ctrl_c_of_the_resumed_run_stops_its_own(
        tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "run.log"
    recipe = long_recipe(tmp_path)
    first = start(recipe, out, tmp_path, log)
    old: list[int] = []
    new: list[int] = []
    resumed: subprocess.Popen[bytes] | None = None
    try:
        old = list(wait_for(lambda: serving(out), 120, "the first run's roles serving", first, log,
                            poll_s=0.2).values())
        first.kill()  # SIGKILL: the run cannot stop anything; its roles, each in a session of its own, run on
        first.wait(timeout=30)
        time.sleep(1)
        assert all(alive(p) for p in old), "a SIGKILLed run leaves its role processes running"
        resumed = start(recipe, out, tmp_path, log, "--resume")
        found = wait_for(lambda: (pids := serving(out)) and not set(pids.values()) & set(old) and pids, 120,
                         "the resumed run's own roles serving", resumed, log, poll_s=0.2)
        new = list(found.values())
        assert not any(alive(p) for p in old), "the resumed run left the killed run's roles running"
        assert "left running by an earlier, interrupted run" in log.read_text(errors="replace")
        resumed.send_signal(signal.SIGINT)
        assert resumed.wait(timeout=120) == 130, log.read_text(errors="replace")[-4000:]
        assert_gone(old + new, tmp_path)
        assert not role_pid_files(out)
    finally:
        for proc in (first, resumed):
            if proc is not None and proc.poll() is None:
                proc.kill()
        for pid in old + new:
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)


def test_a_role_that_does_not_come_up_fails_the_start_naming_it_and_every_started_role_is_torn_down(
        tmp_path: Path) -> None:
    """What the lifecycle does when a role fails (`_Server._ensure_roles`: start, and on any failure stop): here the
    decode worker exits at once; the error names it, and the prefill workers already serving are stopped, their pid
    files with them."""
    from llmsweep import engines
    from llmsweep.errors import LaunchError
    from llmsweep.execute.local import LocalLauncher
    from llmsweep.execute.roles import LocalPlacement, RoleDeployment
    from llmsweep.plan import jobs_from_files

    one = tmp_path / "one.yaml"
    one.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]"))
    (job,) = jobs_from_files([one])
    topology = _decode_exits(engines.render_topology(job, simulate=True), "decode cannot start", 3)
    server_dir = tmp_path / "servers" / "g"
    deployment = RoleDeployment(topology, LocalPlacement(topology, LocalLauncher(), server_dir), server_dir)
    pids: list[int] = []
    try:
        with pytest.raises(LaunchError, match=r"decode worker 0 on node .* did not come up") as failed:
            deployment.start(startup_timeout_s=120)
        assert "exited with status 3 while starting" in failed.value.message
        pids = [int(read_json(p)["pid"]) for p in sorted(server_dir.glob("server.*.pid"))]
        assert len(pids) == 3  # the two prefill workers and the decode worker; the router never started
        assert "decode cannot start" in (server_dir / "roles" / "decode-0.log").read_text()
    finally:
        deployment.stop(grace_s=5.0)
    assert deployment.gone()
    assert_gone(pids, tmp_path)
    assert not list(server_dir.glob("server.*.pid"))


def test_a_role_that_dies_while_the_deployment_serves_is_named_with_its_own_log(tmp_path: Path) -> None:
    """A decode worker killed while the deployment serves: the job's failure (`check_alive` after its load, and the
    note its summary is judged invalid by) names that worker, where it ran and how it exited, and quotes its own log
    under its own name (it said `sim server died … (exit status -9)` over the router log's name, with the decode
    worker's tail under it)."""
    from llmsweep import engines
    from llmsweep.errors import LaunchError
    from llmsweep.execute.local import LocalLauncher
    from llmsweep.execute.ready import check_alive
    from llmsweep.execute.roles import LocalPlacement, RoleDeployment
    from llmsweep.plan import jobs_from_files

    one = tmp_path / "one.yaml"
    one.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]"))
    (job,) = jobs_from_files([one])
    topology = engines.render_topology(job, simulate=True)
    server_dir = tmp_path / "servers" / "g"
    deployment = RoleDeployment(topology, LocalPlacement(topology, LocalLauncher(), server_dir), server_dir)
    pids: list[int] = []
    try:
        deployment.start(startup_timeout_s=120)
        pids = [int(read_json(p)["pid"]) for p in sorted(server_dir.glob("server.*.pid"))]
        check_alive(deployment, during="job j")  # every role serves
        assert deployment.log_path.name == "router-0.log"
        decode = int(read_json(server_dir / "server.decode0.pid")["pid"])
        os.killpg(decode, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while deployment.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(LaunchError) as died:
            check_alive(deployment, during="job j")
        host = node_name()
        message = died.value.message
        assert message.startswith(f"sim server died during job j (decode worker 0 on {host} was killed by SIGKILL "
                                  "(signal 9: the kernel's out-of-memory killer")
        assert f"--- last 40 lines of {server_dir / 'roles' / 'decode-0.log'} ---" in message, message
        assert f"[decode worker 0 on {host}]" in message and "simulated decode worker" in message
        # what the failure text reads off any handle (`ServerHandle`): the role, and its own handle's account of
        # the exit (a local process says no more than its status)
        assert deployment.dead_role == f"decode worker 0 on {host}"
        assert deployment.exit_cause() is None and deployment.exit_fix() is None
    finally:
        deployment.stop(grace_s=5.0)
    assert deployment.gone()
    assert_gone(pids, tmp_path)
    assert not list(server_dir.glob("server.*.pid"))


def test_a_deployment_whose_role_exits_while_starting_on_every_launch_fails_the_later_jobs_with_that_reason(
        tmp_path: Path) -> None:
    """Three concurrencies on one deployment whose decode worker exits while starting (its port taken on its node,
    a bad flag): the first two jobs each launch it and fail naming that worker; the third is not launched again and
    fails with the same reason (`never came up`), as a single server's does, where it said `server of group … died
    2 times; not relaunching again` (`read server.log`) of a deployment that never served."""
    from llmsweep import engines
    from llmsweep.execute.lifecycle import LifecycleSettings, ServerGroup, run_group
    from llmsweep.execute.local import LocalLauncher
    from llmsweep.plan import jobs_from_files
    from llmsweep.plan.point import one_point_per_job
    from llmsweep.power.sampler import PowerSettings

    three = tmp_path / "three.yaml"
    three.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2, 4, 8]"))
    jobs = one_point_per_job(jobs_from_files([three]))
    assert len(jobs) == 3
    topology = _decode_exits(engines.render_topology(jobs[0], simulate=True), "error: port taken", 2)
    router = topology.roles[-1].workers[0].spec
    group = ServerGroup(id="sim-roles-test", spec=router, jobs=jobs, source="simulated", topology=topology)
    run_dir = tmp_path / "run"
    outcomes = run_group(group, LocalLauncher(), run_dir, LifecycleSettings(power=PowerSettings(backend="off")))
    assert [o.status for o in outcomes] == ["failed"] * 3, outcomes
    for outcome in outcomes[:2]:
        assert "decode worker 0 on node" in outcome.reasons[0] and "did not come up" in outcome.reasons[0]
    last = outcomes[2].reasons[0]
    assert "died" not in last.split("\n")[0] and "never came up: decode worker 0 on node" in last, last
    assert "a role exited while starting on 2 launches in a row" in last
    assert not list((run_dir / "servers").glob("*/server*.pid"))  # every role of both launches stopped
    assert_gone([], run_dir)


_LOSES_ITS_PORT_ONCE = """
import os, sys
marker, argv = sys.argv[1], sys.argv[2:]
if not os.path.exists(marker):  # the first launch: another process took a port picked for it (ZMQ's words)
    open(marker, "w").close()
    print("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5600')", flush=True)
    sys.exit(1)
os.execvp(argv[0], argv)
"""


def test_a_role_that_loses_its_port_before_binding_it_is_relaunched_at_once_with_every_role_on_fresh_ports(
        tmp_path: Path) -> None:
    """A decode worker that exits while starting because a port picked free for it was taken first ("Address
    already in use"): the whole deployment is torn down and launched again at once on ports picked afresh, and the
    job measures on it, valid, instead of failing for a race on a busy host."""
    from llmsweep import engines
    from llmsweep.execute.lifecycle import LifecycleSettings, ServerGroup, run_group
    from llmsweep.execute.local import LocalLauncher
    from llmsweep.plan import jobs_from_files
    from llmsweep.plan.point import one_point_per_job
    from llmsweep.power.sampler import PowerSettings

    one = tmp_path / "one.yaml"
    one.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]"))
    (job,) = one_point_per_job(jobs_from_files([one]))
    topology = engines.render_topology(job, simulate=True)
    decode = topology.roles[1]
    assert decode.kind == "decode"
    marker = tmp_path / "lost"
    racing = decode.model_copy(update={"workers": tuple(w.model_copy(update={"spec": w.spec.model_copy(update={
        "argv": (sys.executable, "-c", _LOSES_ITS_PORT_ONCE, str(marker), *w.spec.argv)})}) for w in decode.workers)})
    topology = topology.model_copy(update={"roles": (topology.roles[0], racing, *topology.roles[2:])})
    group = ServerGroup(id="sim-roles-race", spec=topology.roles[-1].workers[0].spec, jobs=[job], source="simulated",
                        topology=topology)
    run_dir, events = tmp_path / "run", list[str]()
    (outcome,) = run_group(group, LocalLauncher(), run_dir, LifecycleSettings(power=PowerSettings(backend="off")),
                           event=events.append)
    assert outcome.status == "valid", outcome.reasons
    assert marker.exists()
    roles = run_dir / "servers" / "sim-roles-race" / "roles"
    assert "Address already in use" in (roles / "decode-0.log").read_text()
    assert "Address already in use" not in (roles / "decode-0.2.log").read_text()
    (said,) = [e for e in events if "relaunching on ports picked afresh" in e]
    assert "decode worker 0" in said, events
    assert not list((run_dir / "servers").glob("*/server*.pid"))  # every role of both launches stopped


def one_conc_topology(tmp_path: Path) -> tuple[Any, Any]:
    from llmsweep import engines
    from llmsweep.plan import jobs_from_files

    one = tmp_path / "one.yaml"
    one.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]"))
    (job,) = jobs_from_files([one])
    return job, engines.render_topology(job, simulate=True)


def test_a_router_whose_port_another_server_answers_on_is_not_taken_for_ready(tmp_path: Path) -> None:
    """The router's readiness is its own process's (its log's `simulated PD router on …` line, then /health): with
    its port taken by a server that answers every /health, the router cannot bind and exits, and the start fails
    naming it. The router's launch had no marker: the stray server's /health made it `ready` at once, and the
    client would have benchmarked whatever held the port."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.local import LocalLauncher
    from llmsweep.execute.roles import LocalPlacement, RoleDeployment

    _job, topology = one_conc_topology(tmp_path)
    server_dir = tmp_path / "servers" / "g"
    placement = LocalPlacement(topology, LocalLauncher(), server_dir)
    router = topology.role("router").workers[0]
    deployment = RoleDeployment(topology, placement, server_dir)
    pids: list[int] = []
    with holder(placement.ports[(router.nodes[0], router.spec.port)]):  # a stray server left on the router's port
        try:
            with pytest.raises(LaunchError, match=r"router worker 0 on node .* did not come up") as failed:
                deployment.start(startup_timeout_s=60)
            assert "exited with status" in failed.value.message and "cannot bind" in failed.value.message
            pids = [int(read_json(p)["pid"]) for p in sorted(server_dir.glob("server.*.pid"))]
        finally:
            deployment.stop(grace_s=5.0)
    assert_gone(pids, tmp_path)


def test_a_relaunched_deployment_is_ready_by_its_own_launchs_logs_not_the_last_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deployment launched again (after a role died) on the ports of the first launch, as the roles of a Slurm
    allocation are (here the local placement is held to the same ports): the decode worker's port is answered by a
    stray server, so the new decode worker exits, and the relaunch fails naming it. Each launch logged to the same
    files, so the first launch's `ready` line passed the relaunch's readiness check and the stray /health did the
    rest: the relaunch came `up` on a decode worker that had exited."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute import preflight
    from llmsweep.execute.lifecycle import LifecycleSettings, ServerGroup, _Server
    from llmsweep.execute.local import LocalLauncher
    from llmsweep.power.sampler import PowerSettings

    job, topology = one_conc_topology(tmp_path)
    planned = sorted({(w.nodes[0], w.spec.port) for role in topology.roles for w in role.workers})
    fixed = preflight.pick_free_ports(len(planned), "127.0.0.1")
    monkeypatch.setattr(preflight, "pick_free_ports", lambda count, host="127.0.0.1": fixed[:count])
    decode = topology.role("decode").workers[0]
    decode_port = dict(zip(planned, fixed, strict=True))[(decode.nodes[0], decode.spec.port)]
    group = ServerGroup(id="g", spec=topology.role("router").workers[0].spec, jobs=[job], source="simulated",
                        topology=topology)
    server = _Server(group, LocalLauncher(), tmp_path / "run", LifecycleSettings(power=PowerSettings(backend="off")),
                     lambda _msg: None)
    try:
        first = server.ensure()
        assert first.base_url.endswith(f":{fixed[planned.index((0, topology.role('router').workers[0].spec.port))]}")
        server.stop()  # as after a role died: the deployment is torn down, the next job launches it again
        # a stray server on the decode worker's port
        with holder(decode_port), pytest.raises(LaunchError, match=r"decode worker 0 on node .* did not come up") \
                as failed:
            server.ensure()
        assert "exited with status" in failed.value.message and "cannot bind" in failed.value.message
        roles = tmp_path / "run" / "servers" / "g" / "roles"
        assert (roles / "decode-0.log").is_file() and "cannot bind" in (roles / "decode-0.2.log").read_text()
    finally:
        server.stop()
    assert not list((tmp_path / "run" / "servers").glob("*/server*.pid"))
    assert_gone([], tmp_path / "run")


def test_a_router_that_routes_to_other_workers_than_the_started_ones_fails_the_read_back(tmp_path: Path) -> None:
    """Every worker comes up and says what it serves as, but the router was launched naming only the first prefill
    worker: the read-back fails the job naming both lists, from the router's own /version. It was recorded as a
    deployment of two prefill workers (their GPUs in every per-GPU figure) while one of them never saw a request."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.local import LocalLauncher
    from llmsweep.execute.roles import LocalPlacement, RoleDeployment

    _job, topology = one_conc_topology(tmp_path)
    router = topology.role("router")
    assert router is not None
    argv = list(router.workers[0].spec.argv)
    second = [i for i, a in enumerate(argv) if a == "--prefill"][1]
    del argv[second:second + 2]  # the router's launch loses the second prefill worker
    narrowed = router.model_copy(update={"workers": tuple(
        w.model_copy(update={"spec": w.spec.model_copy(update={"argv": tuple(argv)})}) for w in router.workers)})
    topology = topology.model_copy(update={"roles": tuple(narrowed if r.kind == "router" else r
                                                          for r in topology.roles)})
    server_dir = tmp_path / "servers" / "g"
    deployment = RoleDeployment(topology, LocalPlacement(topology, LocalLauncher(), server_dir), server_dir)
    pids: list[int] = []
    try:
        deployment.start(startup_timeout_s=60)
        pids = [h.pid for _r, _w, h in deployment.started if h.pid is not None]
        prefill = [h.base_url for r, _w, h in deployment.started if r.kind == "prefill"]
        with pytest.raises(LaunchError, match=r"routes to prefill workers") as failed:
            deployment.readback()
        assert f"routes to prefill workers {prefill[:1]}" in failed.value.message
        assert f"the prefill workers started are {prefill}" in failed.value.message
    finally:
        deployment.stop(grace_s=5.0)
    assert_gone(pids, tmp_path)
