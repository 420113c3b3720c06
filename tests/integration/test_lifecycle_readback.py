"""The read-back gate in the real lifecycle: a job pinned at AL 3.39 run by `run_group` against a real simulator
server. Started at the pinned value it passes; started at 2.5 the job is invalid with the realised-vs-pinned reason,
read from the server's /metrics. Also: a short run at the pinned value reads back within the default 0.10."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.execute.lifecycle import LifecycleSettings, ServerGroup, run_group
from llmsweep.execute.local import LocalLauncher
from llmsweep.metrics.model import Summary
from llmsweep.plan import Job, jobs_from_files

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "spec-fixed-sim.yaml"


def _job(key: str) -> Job:
    (only,) = jobs_from_files([RECIPE], config_keys=[key])
    assert only.acceptance is not None and only.acceptance.value == 3.39
    return only


@pytest.fixture(scope="module")
def job() -> Job:
    return _job("run-sim-spec")


def _group_at(job: Job, al: str) -> ServerGroup:
    spec = engines.render(job, port=0)
    argv = list(spec.argv)
    i = argv.index("--acceptance-length")
    argv[i + 1] = al
    return ServerGroup(id=f"sim-al-{al}", spec=spec.model_copy(update={"argv": tuple(argv)}), jobs=[job],
                       source="simulated")


@pytest.mark.parametrize("al", ["3.39", "2.5"])
def test_realised_acceptance_length_is_read_back_against_the_pinned_one(job: Job, tmp_path: Path, al: str) -> None:
    (outcome,) = run_group(_group_at(job, al), LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    summary = json.loads((tmp_path / "jobs" / job.id / "summary.json").read_text())
    (check,) = summary["readback"]["checks"]
    assert check["pinned"] == 3.39
    assert check["verify_steps"] >= 100  # enough evidence for a verdict, in a run of a few seconds
    assert abs(check["realised"] - float(al)) <= 0.10, check  # the simulator realises what it was started at
    if al == "3.39":
        assert check["ok"] is True
        assert outcome.status == "valid", outcome.reasons  # a fixed-length point: no window minimum
    else:
        assert check["ok"] is False
        assert outcome.status == "invalid"
        assert any("realised acceptance length" in r and "pinned 3.39" in r for r in outcome.reasons), outcome.reasons
        assert summary["validity"]["verdict"] == "invalid"
        _summarize_keeps_the_verdict(tmp_path / "jobs" / job.id, summary)


def _summarize_keeps_the_verdict(job_dir: Path, summary: dict) -> None:
    """Gates have one home: `llmsweep summarize` on the job folder applies the read-back again, from job.json and
    the tolerances the run recorded, so the job stays invalid with the same reason (it used to become smoke)."""
    from click.testing import CliRunner

    from llmsweep.cli.main import cli

    res = CliRunner().invoke(cli, ["summarize", str(job_dir), "--json"], catch_exceptions=False)
    assert res.exit_code == 1, res.output  # a gate failed
    again = json.loads(res.output)
    assert again["validity"]["verdict"] == "invalid"
    assert again["validity"]["reasons"] == summary["validity"]["reasons"]
    assert again["readback"] == summary["readback"]
    assert json.loads((job_dir / "summary.json").read_text())["validity"] == summary["validity"]


def test_a_correctly_pinned_simulator_passes_with_short_outputs(tmp_path: Path) -> None:
    """24-token outputs: a first token per request from prefill and cut last steps, all in the SGLang formula."""
    job = _job("run-sim-spec-short")
    (outcome,) = run_group(_group_at(job, "3.39"), LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    summary = json.loads((tmp_path / "jobs" / job.id / "summary.json").read_text())
    (check,) = summary["readback"]["checks"]
    assert check["verify_steps"] >= 100
    assert check["ok"] is True, check
    assert outcome.status == "valid", outcome.reasons


def _summary(realised: float | None, steps: float | None) -> Summary:
    return Summary.model_validate({
        "validity": {"verdict": "smoke", "reasons": ["smoke run: profile window 8 s is shorter than 900 s"]},
        "server_metrics": {"spec_decode": {"acceptance_length": realised, "verify_steps": steps,
                                           "method": "d(generation_tokens) / d(spec_verify_calls)"}}})


def test_too_few_verify_steps_is_inconclusive_not_passed_and_a_missing_value_fails(job: Job) -> None:
    """A smoke run of ~4-token agentic turns has a few dozen verify steps: no verdict either way, said aloud."""
    from llmsweep.execute.readback import ReadbackSettings, apply_readback

    few = apply_readback(job, _summary(2.5, 40), ReadbackSettings())
    assert few.readback is not None and few.readback.checks[0].ok is None
    assert few.validity.verdict == "smoke"
    assert any("read-back inconclusive" in r and "40 verify steps" in r and "too few" in r
               for r in few.validity.reasons), few.validity.reasons

    enough = apply_readback(job, _summary(2.5, 400), ReadbackSettings())
    assert enough.validity.verdict == "invalid" and enough.readback is not None and enough.readback.ok is False

    missing = apply_readback(job, _summary(None, None), ReadbackSettings())
    assert missing.validity.verdict == "invalid"
    assert any("could not be read back" in r for r in missing.validity.reasons)


def test_launch_files_are_written_beside_the_server_and_kept_with_the_job(job: Job, tmp_path: Path) -> None:
    """A file a launch reads at start-up (TensorRT-LLM's LLM-API options) is written where the server runs before
    it starts, its `{launch_dir}` reference made absolute, and a copy kept in the job's folder with the command."""
    from llmsweep.engines.launch import LaunchFile

    group = _group_at(job, "3.39")
    file = LaunchFile(name="extra_llm_api_options.yaml", content="speculative_config:\n  decoding_type: MTP\n")
    spec = group.spec.model_copy(update={"files": (file,), "env": {**group.spec.env,
                                                                    "LLMSWEEP_OPTIONS": file.placeholder_path}})
    group = ServerGroup(id="with-file", spec=spec, jobs=[job], source="simulated")
    (outcome,) = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    assert outcome.status in ("smoke", "valid"), outcome.reasons
    placed = tmp_path.resolve() / "servers" / "with-file" / file.name
    assert placed.read_text() == file.content
    jdir = tmp_path / "jobs" / job.id
    assert (jdir / file.name).read_text() == file.content
    command = (jdir / "server_command.txt").read_text()
    assert f"LLMSWEEP_OPTIONS={placed}" in command and "{launch_dir}" not in command


def test_a_server_found_dead_when_the_load_ends_leaves_an_invalid_summary_that_resume_reruns(
    job: Job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server dies between the job's last response and the lifecycle's look at it: the load's summary was
    already written (valid), so the outcome's "failed" alone would leave the store, `--resume` and `--reuse` a
    finished point. The summary must say invalid, and say so again under `llmsweep summarize`."""
    import os
    import signal
    import time

    from llmsweep.execute import lifecycle

    real = lifecycle.bench_job
    killed: list[int] = []

    def bench_then_die(*args: object, **kwargs: object) -> Summary:
        summary = real(*args, **kwargs)  # type: ignore[arg-type]
        assert summary.validity.verdict == "valid", summary.validity.reasons
        (pid_file,) = (tmp_path / "servers").glob("*/server.pid")
        pid = int(json.loads(pid_file.read_text())["pid"])
        os.killpg(pid, signal.SIGKILL)
        # dead and waitable (left for the handle to reap): its threads gone too, not just its main one a zombie
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
            time.sleep(0.01)
        killed.append(pid)
        return summary

    monkeypatch.setattr(lifecycle, "bench_job", bench_then_die)
    (outcome,) = run_group(_group_at(job, "3.39"), LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    assert killed
    assert outcome.status == "failed" and "died during job" in outcome.reasons[0], outcome.reasons
    jdir = tmp_path / "jobs" / job.id
    summary = Summary.load(jdir / "summary.json")
    assert summary.validity.verdict == "invalid"
    assert summary.validity.reasons[0].startswith(f"the server died during job {job.id} (it was killed by SIGKILL")
    again = Summary.from_doc(json.loads((jdir / "summary.json").read_text()))
    from llmsweep.execute.readback import summarise_job

    assert summarise_job(jdir, write=False).validity == again.validity  # `summarize` reaches the same verdict

    monkeypatch.setattr(lifecycle, "bench_job", real)
    (resumed,) = run_group(_group_at(job, "3.39"), LocalLauncher(), tmp_path,
                           LifecycleSettings(stop_grace_s=5, resume=True))
    assert resumed.status == "valid", resumed.reasons  # rerun, not skipped as done
    assert (jdir / "attempts" / "1" / "summary.json").is_file()


def test_a_server_that_could_not_be_launched_fails_every_job_with_that_reason_not_as_a_death(tmp_path: Path) -> None:
    """Preflight refuses the launch (its port is taken): no server ever ran, so no job may be told that the server
    "died N times" or be sent to a server log that does not exist; each says why the launch was refused."""
    import socket

    from llmsweep.plan import jobs_from_files

    jobs = jobs_from_files([RECIPE.with_name("slow-fixed-sim.yaml")])
    assert len(jobs) >= 3
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        spec = engines.render(jobs[0], port=port)
        group = ServerGroup(id="taken-port", spec=spec, jobs=jobs, source="simulated")
        outcomes = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    assert [o.status for o in outcomes] == ["failed"] * len(jobs)
    assert f"port {port} on 127.0.0.1 is already in use" in outcomes[0].reasons[0]
    for o in outcomes[1:]:
        assert "never came up" in o.reasons[0] and f"port {port}" in o.reasons[0], o.reasons
        assert "died" not in o.reasons[0]


def test_a_server_that_exits_while_starting_is_not_relaunched_for_every_job(tmp_path: Path) -> None:
    """A server whose command exits before it is ever ready (a missing module, a bad flag) fails the same way on every
    relaunch: a walkthrough saw it relaunched and reported as a server that "died 2 times". The first two jobs fail
    with the exit and the log's tail (one exit may be passing); the rest with that reason, and nothing is launched
    again."""
    import sys

    from llmsweep.plan import jobs_from_files

    jobs = jobs_from_files([RECIPE.with_name("slow-fixed-sim.yaml")])
    spec = engines.render(jobs[0], port=0)
    spec = spec.model_copy(update={"argv": (sys.executable, "-c", "import no_such_module_for_llmsweep")})
    group = ServerGroup(id="exits", spec=spec, jobs=jobs, source="simulated")
    outcomes = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    assert [o.status for o in outcomes] == ["failed"] * len(jobs)
    # one exit may be passing (a port taken between preflight and the bind): the next job relaunches once
    for o in outcomes[:2]:
        assert "exited with status 1 while starting" in o.reasons[0] and "never came up" not in o.reasons[0]
    for o in outcomes[2:]:
        assert "never came up" in o.reasons[0] and "exited with status 1" in o.reasons[0], o.reasons
        assert "on 2 launches in a row" in o.reasons[0] and "died" not in o.reasons[0]
    logs = sorted(p.name for p in (tmp_path / "servers" / "exits").glob("server*.log"))
    assert logs == ["server.2.log", "server.log"], logs  # launched twice, not once per job


_TAKES_A_HELD_PORT = """
import os, sys
marker, held, times, argv = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
n = len(os.listdir(marker))
open(os.path.join(marker, str(n)), "w").close()
if n < times:  # this launch binds the port the test holds: the simulator's own "address already in use"
    argv[argv.index("--port") + 1] = held
os.execvp(argv[0], argv)
"""


def _racing_group(jobs: list[Job], tmp_path: Path, held: int, times: int) -> ServerGroup:
    """A real simulator launch whose first `times` launches find their port taken (by a socket the test holds) and
    exit while starting, as a server does when another process takes the free port picked for it first."""
    import sys

    marker = tmp_path / "launches"
    marker.mkdir()
    spec = engines.render(jobs[0], port=0)
    argv = (sys.executable, "-c", _TAKES_A_HELD_PORT, str(marker), str(held), str(times), *spec.argv)
    return ServerGroup(id="race", spec=spec.model_copy(update={"argv": argv}), jobs=jobs, source="simulated")


@pytest.mark.parametrize("times", [1, 2])
def test_a_server_that_loses_its_port_before_binding_it_is_relaunched_at_once_on_a_fresh_one(
        tmp_path: Path, times: int) -> None:
    """A free port picked for a server can be taken by another process before the server binds it (parallel runs on
    one host, a client's outgoing connection): the launch exits "address already in use". That is no fault of the
    job: the launch is relaunched at once on a port picked afresh, up to twice, and the job measures on it; the
    relaunches are no deaths (the next job still has its relaunch after a crash)."""
    import socket

    jobs = jobs_from_files([RECIPE.with_name("slow-fixed-sim.yaml")])[:2]
    events: list[str] = []
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        group = _racing_group(jobs, tmp_path, held.getsockname()[1], times)
        outcomes = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5), event=events.append)
    assert [o.status for o in outcomes] == ["valid"] * len(jobs), [o.reasons for o in outcomes]
    server = tmp_path / "servers" / "race"
    logs = [server / ("server.log" if n == 0 else f"server.{n + 1}.log") for n in range(times + 1)]
    for log in logs[:-1]:
        assert "address already in use" in log.read_text(), log.read_text()[-2000:]
    assert "address already in use" not in logs[-1].read_text()
    assert len(list(server.glob("server*.log"))) == times + 1  # one launch served both jobs
    said = [e for e in events if "relaunching on ports picked afresh" in e]
    assert len(said) == times and "exited while starting" in said[0], events


_LINGERS_ON_A_HELD_PORT = """
import os, sys
marker, held, stand_in, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
n = len(os.listdir(marker))
open(os.path.join(marker, str(n)), "w").close()
if n == 0:  # this launch binds the port the test holds, says so in uvicorn's words and lives on
    os.execvp(sys.executable, [sys.executable, stand_in, "--port", held])
os.execvp(argv[0], argv)
"""


def test_a_server_that_loses_its_port_and_lives_on_is_relaunched_at_once_on_a_fresh_one(tmp_path: Path) -> None:
    """A server may live on after uvicorn failed to bind its port (`transformers serve` ~3 s while its batching thread
    stops; one a non-daemon thread holds, for good): such a launch had waited out its readiness deadline (or been
    taken as ready on what answers the port). Its log's bind error ends it, stopped, and it is relaunched on a port
    picked afresh like a launch that exited."""
    import socket
    import sys

    jobs = jobs_from_files([RECIPE.with_name("slow-fixed-sim.yaml")])[:1]
    stand_in = Path(__file__).resolve().parents[1] / "unit" / "execute" / "helpers" / "uvicorn_like.py"
    events: list[str] = []
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        marker = tmp_path / "launches"
        marker.mkdir()
        spec = engines.render(jobs[0], port=0)
        argv = (sys.executable, "-c", _LINGERS_ON_A_HELD_PORT, str(marker), str(held.getsockname()[1]),
                str(stand_in), *spec.argv)
        group = ServerGroup(id="race", spec=spec.model_copy(update={"argv": argv}), jobs=jobs, source="simulated")
        outcomes = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5, startup_timeout_s=60),
                             event=events.append)
    assert [o.status for o in outcomes] == ["valid"], [o.reasons for o in outcomes]
    assert "address already in use" in (tmp_path / "servers" / "race" / "server.log").read_text()
    said = [e for e in events if "relaunching on ports picked afresh" in e]
    assert len(said) == 1 and "did not exit; stopped it" in said[0], events


def test_a_port_lost_on_every_launch_fails_the_job_with_the_bind_error(tmp_path: Path) -> None:
    """Three launches in a row that lose their port: the job fails with the bind error and the log tail (no endless
    relaunching); the next job launches once more, as after any exit while starting, but not three times: two races
    in a row, none ready between, are all a server gets (an engine that always fails to bind an address of its own
    is not relaunched three times for every job)."""
    import socket

    jobs = jobs_from_files([RECIPE.with_name("slow-fixed-sim.yaml")])[:2]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        group = _racing_group(jobs, tmp_path, held.getsockname()[1], 99)
        outcomes = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "exited with status 2 while starting" in outcomes[0].reasons[0], outcomes[0].reasons
    assert "address already in use" in outcomes[0].reasons[0]
    assert len(list((tmp_path / "launches").iterdir())) == 4  # 1 + 2 at once for the first job, 1 for the next


def test_a_server_that_never_becomes_ready_is_said_to_never_come_up_not_to_have_died(tmp_path: Path) -> None:
    """A server that starts and never answers its health check (a hang while loading) is torn down at its readiness
    deadline and relaunched once for the next job; the job after that was told the server "died 2 times", which it
    never did: it never came up. The first two jobs fail with the missed deadline (in seconds as given, not rounded
    to 0), the rest with it, the launch count and its fix, and nothing is launched a third time."""
    import sys

    from llmsweep.plan import jobs_from_files

    jobs = jobs_from_files([RECIPE.with_name("slow-fixed-sim.yaml")])
    assert len(jobs) >= 3
    spec = engines.render(jobs[0], port=0)
    spec = spec.model_copy(update={"argv": (sys.executable, "-c", "import time; time.sleep(120)")})
    group = ServerGroup(id="hangs", spec=spec, jobs=jobs, source="simulated")
    outcomes = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5, startup_timeout_s=0.5))
    assert [o.status for o in outcomes] == ["failed"] * len(jobs)
    for o in outcomes[:2]:
        assert "server not ready after 0.5 s" in o.reasons[0] and "never came up" not in o.reasons[0], o.reasons
    for o in outcomes[2:]:
        assert o.reasons[0].startswith("the sim server of group hangs never came up: sim server not ready after 0.5 s")
        assert "(none of its 2 launches became ready)" in o.reasons[0] and "died" not in o.reasons[0], o.reasons
        assert "fix: raise the recipe's `serve.health-timeout` (or `--startup-timeout`)" in o.reasons[0], o.reasons
    logs = sorted(p.name for p in (tmp_path / "servers" / "hangs").glob("server*.log"))
    assert logs == ["server.2.log", "server.log"], logs  # launched twice, not once per job
    assert not list((tmp_path / "servers" / "hangs").glob("server*.pid"))  # each hung launch was stopped


def test_the_engine_version_is_read_back_past_a_proxy_the_host_sets(
    job: Job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login node with HTTP_PROXY set: the `/version` read-back of the server this run launched goes direct, as the
    health check does (through the proxy it read nothing, and the run's engine version said null)."""
    from llmsweep.execute.lifecycle import observe_runtime
    from llmsweep.execute.preflight import resolve_port
    from llmsweep.execute.ready import wait_ready

    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    handle = LocalLauncher().launch(resolve_port(engines.render(job, port=0)), log_path=tmp_path / "server.log")
    try:
        wait_ready(handle, timeout_s=60, poll_s=0.1)
        seen = observe_runtime(handle, handle.spec)
    finally:
        handle.stop(grace_s=5)
    assert seen["engine_version"], seen


def test_gpu_names_are_those_of_the_visible_gpus_not_the_whole_host() -> None:
    from llmsweep.execute.lifecycle import visible_rows

    smi = ("0, GPU-aaa, NVIDIA H100 80GB HBM3, 570.1\n1, GPU-bbb, NVIDIA H100 80GB HBM3, 570.1\n"
           "2, GPU-ccc, NVIDIA H200, 570.1\n3, GPU-ddd, NVIDIA H200, 570.1\n")
    assert [r[2] for r in visible_rows(smi, {})] == ["NVIDIA H100 80GB HBM3"] * 2 + ["NVIDIA H200"] * 2
    assert [r[0] for r in visible_rows(smi, {"CUDA_VISIBLE_DEVICES": "3,2"})] == ["3", "2"]
    assert [r[2] for r in visible_rows(smi, {"CUDA_VISIBLE_DEVICES": "GPU-ccc"})] == ["NVIDIA H200"]


def test_a_server_that_stops_answering_between_jobs_is_relaunched_not_sent_the_next_job(
    job: Job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server shutting down from outside (`docker stop`: its process lives on through a graceful exit) or hung
    still passes `is_alive()`: the next job of its group used to be sent to it and failed far from the cause (a
    stopped engine: every request waits out the client's stall timeout). Before a job is sent to a live server, its
    health is asked; one that does not answer within the stop grace is stopped and launched again, and says so."""
    import os
    import signal

    from llmsweep.execute import lifecycle

    real = lifecycle.bench_job
    frozen: list[int] = []

    def bench_then_freeze(*args: object, **kwargs: object) -> Summary:
        summary = real(*args, **kwargs)  # type: ignore[arg-type]
        if not frozen:  # after the first job: the server's process lives, but answers nothing
            (pid_file,) = (tmp_path / "servers").glob("*/server.pid")
            pid = int(json.loads(pid_file.read_text())["pid"])
            os.killpg(pid, signal.SIGSTOP)
            frozen.append(pid)
        return summary

    monkeypatch.setattr(lifecycle, "bench_job", bench_then_freeze)
    second = job.model_copy(update={"id": f"{job.id}-again"})
    group = _group_at(job, "3.39")
    group = ServerGroup(id=group.id, spec=group.spec, jobs=[job, second], source=group.source)
    said: list[str] = []
    outcomes = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=1), event=said.append)
    assert frozen
    assert [o.status for o in outcomes] == ["valid", "valid"], [o.reasons for o in outcomes]
    (line,) = [s for s in said if "no longer serves" in s]
    assert "gave no answer before the next job, and it did not answer again within 1 s" in line
    assert "it is stopped and launched again" in line
    with pytest.raises(ProcessLookupError):  # the frozen server was torn down, not left stopped
        os.kill(frozen[0], 0)
    assert (tmp_path / "servers" / group.id / "server.2.log").is_file()  # the relaunch's own log


def test_a_port_the_recipe_pins_is_not_raced_for(tmp_path: Path) -> None:
    """A launch on the recipe's own `serve.port` that exits "address already in use" is not relaunched at once: the
    port would be the same, taken again; the job fails with the bind error, as any exit while starting."""
    import socket

    from llmsweep.execute.preflight import pick_free_port

    jobs = jobs_from_files([RECIPE.with_name("slow-fixed-sim.yaml")])[:1]
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        group = _racing_group(jobs, tmp_path, held.getsockname()[1], 1)
        pinned = pick_free_port()
        from dataclasses import replace

        from llmsweep.execute.preflight import with_port

        group = replace(group, spec=with_port(group.spec, pinned))
        (outcome,) = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    assert outcome.status == "failed" and "address already in use" in outcome.reasons[0], outcome.reasons
    assert len(list((tmp_path / "launches").iterdir())) == 1


def test_the_context_the_server_serves_is_read_back(job: Job, tmp_path: Path) -> None:
    """`/v1/models`' `max_model_len` is recorded as the server reports it (vLLM's `--max-model-len auto` is only known
    there), beside job.json's launched context."""
    from llmsweep.engines import launched_job
    from llmsweep.execute.lifecycle import observe_runtime
    from llmsweep.execute.preflight import resolve_port
    from llmsweep.execute.ready import served_context, wait_ready

    handle = LocalLauncher().launch(resolve_port(engines.render(job, port=0)), log_path=tmp_path / "server.log")
    try:
        wait_ready(handle, timeout_s=60, poll_s=0.1)
        seen = observe_runtime(handle, handle.spec)
        other = served_context(handle.base_url, "no-such-model")  # another model's server says nothing of this one
        unnamed = served_context(handle.base_url, None)  # no name: the only entry
    finally:
        handle.stop(grace_s=5)
    assert seen["context_served"] == launched_job(job).max_model_len == 128 + 160 + 256
    assert other is None and unnamed == seen["context_served"]


def test_a_server_serving_another_context_than_the_launch_set_is_said(job: Job, tmp_path: Path) -> None:
    """A server (here the simulator standing in for vLLM) that reports another context than its launch set: the job
    carries the warning, and provenance both values."""
    spec = engines.render(job, port=0)
    argv = list(spec.argv)
    argv[argv.index("--context-length") + 1] = "4096"
    group = ServerGroup(id="ctx", spec=spec.model_copy(update={"argv": tuple(argv), "engine": "vllm"}), jobs=[job],
                        source="simulated")
    (outcome,) = run_group(group, LocalLauncher(), tmp_path, LifecycleSettings(stop_grace_s=5))
    said = [w for w in outcome.warnings if "the server reports 4,096 tokens where the launch set 544" in w]
    assert said, outcome.warnings
    run = json.loads((tmp_path / "jobs" / job.id / "run.json").read_text())
    assert run["provenance"]["launch"]["context_served"] == 4096
